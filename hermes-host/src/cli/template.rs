//! The plugin template, embedded in the binary, and the one renderer `hermes plugins new`
//! uses.
//!
//! `plugin-template/` (in this crate, linked from the repository root) is a cargo-generate
//! template. Its pre hook (`pre.rhai`) turns the answers into the variables the files
//! test; [`Answers::variables`] computes the same variables here, and the files are rendered
//! by the same Liquid engine cargo-generate uses, so both routes write identical crates. A
//! test renders both ways and compares every file.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use hermes_hooks_abi::hooks::{HOOKS, OutcomeKind};

/// The template files a plugin crate is made of, as `(path in the template, text)`. The
/// template's own machinery (`cargo-generate.toml`, `pre.rhai`, `checkout.rhai`) is
/// not among them; a test checks that this list is the rest of the directory.
pub const FILES: &[(&str, &str)] = &[
    (
        ".gitignore",
        include_str!("../../plugin-template/.gitignore"),
    ),
    (
        "Cargo.toml.liquid",
        include_str!("../../plugin-template/Cargo.toml.liquid"),
    ),
    ("README.md", include_str!("../../plugin-template/README.md")),
    (
        "plugin.yaml",
        include_str!("../../plugin-template/plugin.yaml"),
    ),
    (
        "rustfmt.toml",
        include_str!("../../plugin-template/rustfmt.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../../plugin-template/src/lib.rs"),
    ),
    (
        "tests/plugin.rs",
        include_str!("../../plugin-template/tests/plugin.rs"),
    ),
    (
        "benches/hooks.rs",
        include_str!("../../plugin-template/benches/hooks.rs"),
    ),
];

/// The hooks a new plugin starts with when none are asked for (the template's default).
pub const DEFAULT_HOOKS: &[&str] = &["pre_tool_call", "on_session_end"];

/// Hooks whose sample in the template is a function of its own; other observers and
/// transforms get a one-line sample each (as `pre.rhai` says too).
const OWN_SAMPLE: &[&str] = &[
    "pre_tool_call",
    "pre_llm_call",
    "on_session_end",
    "pre_gateway_dispatch",
    "transform_tool_result",
    "pre_verify",
];

/// What the user asked for: the template's placeholders.
#[derive(Clone, Debug)]
pub struct Answers {
    /// The crate and plugin name, such as `my-plugin`.
    pub name: String,
    /// The hooks to start with, validated, without repeats.
    pub hooks: Vec<String>,
    /// Whether to add a native gateway hook.
    pub gateway: bool,
    /// For Cargo.toml and plugin.yaml.
    pub author: String,
    /// For Cargo.toml and plugin.yaml.
    pub description: String,
    /// The hermes-hooks checkout to depend on by path; `None`: the crates.io releases.
    pub checkout: Option<PathBuf>,
}

impl Answers {
    /// Checks a name and a hook list given on the command line.
    ///
    /// # Errors
    ///
    /// One line naming what to fix: a name that is not a plain crate name, or a hook this
    /// interface does not have (with the closest one).
    pub fn check(name: &str, hooks: Option<&[String]>) -> anyhow::Result<(String, Vec<String>)> {
        check_name(name)?;
        let asked: Vec<String> = match hooks {
            Some(list) => list.iter().map(|h| h.trim().to_string()).collect(),
            None => DEFAULT_HOOKS.iter().map(|h| h.to_string()).collect(),
        };
        let known: Vec<&str> = HOOKS.iter().map(|h| h.name).collect();
        let mut out: Vec<String> = Vec::new();
        for hook in asked.into_iter().filter(|h| !h.is_empty()) {
            if !known.contains(&hook.as_str()) {
                let mut sorted = known.clone();
                sorted.sort_unstable();
                match hermes_host::pyfmt::close_match(&hook, &sorted, 0.6) {
                    Some(close) => {
                        bail!("unknown hook '{hook}' in --hooks; did you mean '{close}'?")
                    }
                    None => bail!(
                        "unknown hook '{hook}' in --hooks (valid: {})",
                        sorted.join(", ")
                    ),
                }
            }
            if !out.contains(&hook) {
                out.push(hook);
            }
        }
        Ok((name.to_string(), out))
    }

    /// The Liquid variables of the template, exactly as `pre.rhai` sets them for
    /// cargo-generate.
    pub fn variables(&self) -> liquid::Object {
        use liquid::model::{Array, Value};
        let text = |s: &str| Value::scalar(s.to_string());
        let list = |items: Vec<&str>| Value::Array(items.into_iter().map(text).collect::<Array>());
        let crate_name = self.name.replace('-', "_");
        let on = |hook: &str| self.hooks.iter().any(|h| h == hook);
        let selected: Vec<&str> = HOOKS.iter().map(|h| h.name).filter(|h| on(h)).collect();
        let transforms: Vec<&str> = HOOKS
            .iter()
            .filter(|h| on(h.name) && !OWN_SAMPLE.contains(&h.name))
            .filter(|h| {
                matches!(
                    h.outcome,
                    OutcomeKind::Replace | OutcomeKind::ReplaceNonEmpty
                )
            })
            .map(|h| h.name)
            .collect();
        let observers: Vec<&str> = HOOKS
            .iter()
            .filter(|h| on(h.name) && !OWN_SAMPLE.contains(&h.name))
            .filter(|h| h.outcome == OutcomeKind::Observer)
            .map(|h| h.name)
            .collect();
        let (abi_path, host_path) = match &self.checkout {
            Some(dir) => (
                format!("{}/hermes-hooks-abi", dir.display()),
                format!("{}/hermes-host", dir.display()),
            ),
            None => (String::new(), String::new()),
        };
        let library_file = format!(
            "{}{crate_name}{}",
            std::env::consts::DLL_PREFIX,
            std::env::consts::DLL_SUFFIX
        );
        let mut vars = liquid::Object::new();
        vars.insert("project-name".into(), text(&self.name));
        vars.insert("crate_name".into(), text(&crate_name));
        vars.insert("author".into(), text(&self.author));
        vars.insert("description".into(), text(&self.description));
        vars.insert("hooks".into(), text(&self.hooks.join(",")));
        vars.insert("gateway".into(), Value::scalar(self.gateway));
        vars.insert("abi_path".into(), text(&abi_path));
        vars.insert("host_path".into(), text(&host_path));
        vars.insert("library_file".into(), text(&library_file));
        for hook in HOOKS {
            vars.insert(
                format!("hook_{}", hook.name).into(),
                Value::scalar(on(hook.name)),
            );
        }
        vars.insert(
            "any_hook".into(),
            Value::scalar(!selected.is_empty() || self.gateway),
        );
        vars.insert("selected_hooks".into(), list(selected));
        vars.insert("observer_hooks".into(), list(observers));
        vars.insert("replace_hooks".into(), list(transforms));
        vars
    }
}

/// A crate name cargo and the plugin directory both accept: a lowercase letter first, then
/// lowercase letters, digits, `-` and `_`.
fn check_name(name: &str) -> anyhow::Result<()> {
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !ok {
        bail!(
            "'{name}' is not a plugin name; use lowercase letters, digits, '-' and '_', starting with a letter (for example my-plugin)"
        );
    }
    Ok(())
}

/// The hermes-hooks checkout this binary was built from, when it is still there: its crates
/// are then what a new plugin builds against (a binary built from a crates.io download has
/// none, and new plugins use the releases).
pub fn build_checkout() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).parent()?;
    let marks = [
        dir.join("plugin-template/checkout.rhai"),
        dir.join("hermes-hooks-abi/Cargo.toml"),
    ];
    marks.iter().all(|m| m.is_file()).then(|| dir.to_path_buf())
}

/// Renders every template file for `answers`: `(path in the new crate, text)`.
///
/// # Errors
///
/// A template that does not parse or render, which is a bug of this binary.
pub fn render(answers: &Answers) -> anyhow::Result<Vec<(String, String)>> {
    let parser = liquid::ParserBuilder::with_stdlib()
        .build()
        .context("cannot set up the template renderer")?;
    let vars = answers.variables();
    FILES
        .iter()
        .map(|(path, text)| {
            let out = parser
                .parse(text)
                .and_then(|t| t.render(&vars))
                .with_context(|| format!("the embedded template file {path} does not render"))?;
            let path = path.strip_suffix(".liquid").unwrap_or(path);
            Ok((path.to_string(), out))
        })
        .collect()
}

/// Writes the rendered crate into `dir`, which must be missing or empty unless `force`.
///
/// # Errors
///
/// `dir` is a non-empty directory (and not `force`), or a file cannot be written; nothing
/// is written when `dir` is refused.
pub fn write(dir: &Path, files: &[(String, String)], force: bool) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!(
            "{} exists and is not a directory; choose another --path or name",
            dir.display()
        );
    }
    let non_empty = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if non_empty && !force {
        bail!(
            "{} is not empty; choose another --path, or pass --force to write the template's files into it",
            dir.display()
        );
    }
    for (path, text) in files {
        let dest = dir.join(path);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&dest, text).with_context(|| format!("cannot write {}", dest.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answers(hooks: &[&str]) -> Answers {
        Answers {
            name: "my-plugin".into(),
            hooks: hooks.iter().map(|h| h.to_string()).collect(),
            gateway: false,
            author: "A".into(),
            description: "D".into(),
            checkout: None,
        }
    }

    #[test]
    fn the_embedded_files_are_the_template_directory_less_its_machinery() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin-template");
        let mut on_disk = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).expect("the template directory") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    let rel = path.strip_prefix(&root).expect("inside").to_string_lossy();
                    on_disk.push(rel.into_owned());
                }
            }
        }
        on_disk.retain(|p| {
            ![
                "cargo-generate.toml",
                "checkout.rhai",
                "checkout-dir.rhai",
                "pre.rhai",
            ]
            .contains(&p.as_str())
        });
        on_disk.sort();
        let mut embedded: Vec<String> = FILES.iter().map(|(p, _)| p.to_string()).collect();
        embedded.sort();
        assert_eq!(embedded, on_disk);
    }

    #[test]
    fn every_hook_renders_and_a_repeat_is_one_hook() {
        let all: Vec<String> = HOOKS.iter().map(|h| h.name.to_string()).collect();
        let (_, hooks) = Answers::check("x", Some(&all)).unwrap();
        assert_eq!(hooks.len(), HOOKS.len());
        let names: Vec<&str> = hooks.iter().map(String::as_str).collect();
        let files = render(&answers(&names)).unwrap();
        let lib = &files.iter().find(|(p, _)| p == "src/lib.rs").unwrap().1;
        for hook in HOOKS {
            assert!(
                lib.contains(&format!(".{}(", hook.name)),
                "{} has no sample",
                hook.name
            );
        }
        let twice = ["pre_tool_call".to_string(), "pre_tool_call".to_string()];
        assert_eq!(
            Answers::check("x", Some(&twice)).unwrap().1,
            ["pre_tool_call"]
        );
    }

    #[test]
    fn bad_names_and_hooks_say_what_to_fix() {
        let err = Answers::check("My Plugin", None).unwrap_err().to_string();
        assert!(
            err.starts_with("'My Plugin' is not a plugin name; use lowercase"),
            "{err}"
        );
        for bad in ["../x", "a/b", "", "-x", "x.y"] {
            assert!(Answers::check(bad, None).is_err(), "{bad}");
        }
        let err = Answers::check("x", Some(&["pre_tool_cal".to_string()])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown hook 'pre_tool_cal' in --hooks; did you mean 'pre_tool_call'?"
        );
    }

    /// `major.minor` of a version.
    fn requirement(version: &str) -> String {
        version.split('.').take(2).collect::<Vec<_>>().join(".")
    }

    #[test]
    fn the_crates_io_form_asks_for_the_workspace_versions() {
        let files = render(&answers(DEFAULT_HOOKS)).unwrap();
        let cargo = &files.iter().find(|(p, _)| p == "Cargo.toml").unwrap().1;
        let abi = requirement(hermes_hooks_abi::sdk::ABI_VERSION);
        assert!(
            cargo.contains(&format!("\nhermes-hooks-abi = \"{abi}\"\n")),
            "{cargo}"
        );
        let host = requirement(env!("CARGO_PKG_VERSION"));
        assert!(
            cargo.contains(&format!(
                "\nhermes-host = {{ version = \"{host}\", default-features = false, features = [\"testing\"] }}\n"
            )),
            "{cargo}"
        );
    }
}
