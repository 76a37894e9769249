//! Leaves the checkout's path where the plugin template's cargo-generate hook can read it.
//!
//! cargo-generate copies a template to a temporary directory before its hooks run and tells
//! them nothing about where it came from, so `plugin-template/pre.rhai` cannot see which
//! hermes-hooks checkout it was rendered from. Building this crate from a checkout writes
//! that path into `plugin-template/checkout-dir.rhai` (ignored by git, and by the template
//! when it renders); the hook reads it from its copy and then checks that the checkout is
//! really there. A build from a crates.io download has no checkout and writes nothing.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let Some(manifest_dir) = std::env::var_os("CARGO_MANIFEST_DIR") else {
        return;
    };
    let crate_dir = Path::new(&manifest_dir);
    let Some(checkout) = crate_dir.parent() else {
        return;
    };
    let template = crate_dir.join("plugin-template");
    let in_checkout = template.join("pre.rhai").is_file()
        && checkout.join("hermes-hooks-abi/Cargo.toml").is_file()
        && checkout.join("plugin-template/checkout.rhai").is_file();
    if !in_checkout {
        return;
    }
    let Some(dir) = checkout.to_str() else {
        return;
    };
    let text = format!(
        "// Written by hermes-host/build.rs: the checkout this template is in. Not committed.\nexport const DIR = {dir:?};\n"
    );
    let path = template.join("checkout-dir.rhai");
    if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
        // A read-only checkout still builds; the hook then falls back to its other rules.
        let _ = std::fs::write(&path, text);
    }
}
