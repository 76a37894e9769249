//! Plugins linked into the host binary instead of loaded from a library.
//!
//! A plugin crate built as an rlib with its `static` feature on (which turns on this crate's
//! `static` feature) registers itself here from [`export_plugin!`](crate::export_plugin):
//! its name, version, `plugin.yaml` and `register` function. The host reads them with
//! [`static_plugins`] and registers them beside the plugins it loads from libraries, under
//! the same `plugins.enabled` rules. Use case: one self-contained agent binary (a musl
//! build, no `dlopen`).

use abi_stable::std_types::{RResult, RString};

use crate::core::RegistrarMut;

/// A plugin linked into this binary.
#[derive(Clone, Copy, Debug)]
pub struct StaticPlugin {
    /// The crate's name (`CARGO_PKG_NAME`).
    pub crate_name: &'static str,
    /// The crate's version.
    pub version: &'static str,
    /// The text of the crate's `plugin.yaml`, read at compile time.
    pub manifest: &'static str,
    /// The plugin's wrapped `register`, as a library's root module holds it.
    pub register: extern "C" fn(RegistrarMut<'_>) -> RResult<(), RString>,
}

impl StaticPlugin {
    /// Used by [`export_plugin!`](crate::export_plugin).
    #[doc(hidden)]
    pub const fn __new(
        crate_name: &'static str,
        version: &'static str,
        manifest: &'static str,
        register: extern "C" fn(RegistrarMut<'_>) -> RResult<(), RString>,
    ) -> StaticPlugin {
        StaticPlugin {
            crate_name,
            version,
            manifest,
            register,
        }
    }
}

#[cfg(feature = "registry")]
inventory::collect!(StaticPlugin);

#[cfg(feature = "registry")]
#[doc(hidden)]
pub use inventory::submit as __submit;

/// Every plugin linked into this binary with its `static` feature, in no particular order
/// (the host sorts them). Empty without this crate's `registry` feature (which `static`
/// turns on).
///
/// ```
/// for plugin in hermes_hooks_abi::sdk::statics::static_plugins() {
///     println!("{} {}", plugin.crate_name, plugin.version);
/// }
/// ```
pub fn static_plugins() -> Vec<&'static StaticPlugin> {
    #[cfg(feature = "registry")]
    {
        inventory::iter::<StaticPlugin>.into_iter().collect()
    }
    #[cfg(not(feature = "registry"))]
    {
        Vec::new()
    }
}
