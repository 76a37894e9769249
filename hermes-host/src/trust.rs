//! Whether a file on disk may be trusted to run as the user: the checks every loader makes
//! before it loads a plugin library, starts a gateway hook handler or runs a shell hook
//! script.
//!
//! Three rules, each with one message that names the file, the problem and the fix:
//!
//! - **Confinement** ([`confine`]): a path a manifest names (a plugin's `library:`, a gateway
//!   hook's `library:`) must resolve, after symlinks, to a file inside the directory that
//!   manifest lives in. A `plugin.yaml` saying `library: ../../../tmp/libx.so` would
//!   otherwise load whatever another user put in `/tmp`.
//! - **Plain names** ([`plugin_name`]): a plugin's name becomes a directory under
//!   `plugins/`, so it is letters, digits, `-` and `_` only; no separator, no `..`.
//! - **Ownership and permissions** ([`inspect`], from [`crate::ownership`], applied by
//!   [`Policy::check`]), as sshd's `StrictModes` does: a file or directory that group or
//!   others may write, or that is owned by someone other than the user running the host
//!   (or root), lets that someone change what runs as the user, and makes an approval
//!   pinned to the script's content meaningless. Such a file is refused, or, with
//!   `hooks.strict_permissions: false` in `config.yaml` (shared machines that need
//!   group-writable hook directories), loaded with a warning. `config.yaml` itself gets
//!   no such leniency, since it holds that setting (see `Home::load_config`).
//!
//! Nothing here loads or runs anything; it reads metadata only, so it sits beside the
//! loaders, below them in the flow (files -> loaders -> registry).
//!
//! ```
//! use std::os::unix::fs::PermissionsExt;
//! use hermes_host::trust::{Policy, Role};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let script = dir.path().join("guard.sh");
//! std::fs::write(&script, "#!/bin/sh\n").unwrap();
//! std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
//! assert_eq!(Policy::STRICT.check(&[(&script, Role::ShellScript)]), Ok(Vec::new()));
//!
//! std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o777)).unwrap();
//! let refusal = Policy::STRICT.check(&[(&script, Role::ShellScript)]).unwrap_err();
//! assert!(refusal.contains("is writable by"), "{refusal}");
//! assert!(refusal.contains(&format!("chmod go-w {}", script.display())), "{refusal}");
//! ```

use std::path::{Component, Path, PathBuf};

use crate::config::{Config, HooksSection, Setting};

pub use crate::ownership::{Finding, Problem, Role, inspect};

/// Whether a finding refuses the file or only warns (`hooks.strict_permissions`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// Refuse (true, the default) or warn (false).
    pub strict: bool,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy::STRICT
    }
}

impl Policy {
    /// Refuse what fails the rule: the default.
    pub const STRICT: Policy = Policy { strict: true };

    /// `hooks.strict_permissions` of `config.yaml`; anything but `false` is strict (the
    /// shell hook parser warns about a value that is not a boolean).
    ///
    /// ```
    /// use hermes_host::{config::Config, trust::Policy};
    /// assert!(Policy::from_config(&Config::default()).strict);
    /// let shared = Config::parse("hooks:\n  strict_permissions: false\n").unwrap();
    /// assert!(!Policy::from_config(&shared).strict);
    /// ```
    pub fn from_config(config: &Config) -> Policy {
        Policy::from_hooks(&config.hooks)
    }

    /// The same, from the `hooks:` section alone (what the shell hook loader is handed).
    pub fn from_hooks(hooks: &HooksSection) -> Policy {
        Policy {
            strict: hooks.strict_permissions != Setting::Set(false),
        }
    }

    /// Checks every path in order. `Ok` with the warnings to show (none when all is well,
    /// one per finding when the policy only warns); `Err` with the refusal of the first
    /// finding when it is strict. Paths that do not exist are not findings: the loader
    /// reports a missing file in its own words.
    ///
    /// # Errors
    ///
    /// The first finding, as one line with its fix, when the policy is strict.
    pub fn check(&self, paths: &[(&Path, Role)]) -> Result<Vec<String>, String> {
        let mut warnings = Vec::new();
        for (path, role) in paths {
            let Some(finding) = inspect(path, *role) else {
                continue;
            };
            if self.strict {
                return Err(format!(
                    "{}: {}; run `{}`, or set `hooks.strict_permissions: false` in config.yaml to allow it on a shared machine",
                    finding.what(),
                    finding.risk(),
                    finding.fix()
                ));
            }
            warnings.push(format!(
                "{}; allowed because hooks.strict_permissions is false in config.yaml; run `{}` to fix it",
                finding.what(),
                finding.fix()
            ));
        }
        Ok(warnings)
    }
}

/// The key of the `hooks:` block that turns refusals into warnings.
pub use crate::config::STRICT_PERMISSIONS_KEY;

/// `dir.join(relative)`, provided it resolves (after symlinks, and after `..` for a file
/// that does not exist yet) to a path inside `dir`.
///
/// # Errors
///
/// One line naming the manifest key, where the path leads and the rule, with the fix.
///
/// ```
/// use hermes_host::trust::confine;
/// let dir = tempfile::tempdir().unwrap();
/// assert_eq!(confine(dir.path(), "library", "libx.so").unwrap(), dir.path().join("libx.so"));
/// let escape = confine(dir.path(), "library", "../../../../tmp/libx.so").unwrap_err();
/// assert!(escape.contains("outside the directory"), "{escape}");
/// ```
pub fn confine(dir: &Path, key: &str, relative: &str) -> Result<PathBuf, String> {
    let joined = dir.join(relative);
    let root = resolve(dir);
    let target = resolve(&joined);
    if target.starts_with(&root) && target != root {
        return Ok(joined);
    }
    let file_name = Path::new(relative)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| relative.to_string());
    Err(format!(
        "`{key}: {relative}` resolves to {}, outside the directory {}; what a manifest loads must be a file inside its own directory: move the file into {} and set `{key}: {file_name}`",
        target.display(),
        dir.display(),
        dir.display()
    ))
}

/// `path` with symlinks resolved as far as it exists, and `.`/`..` applied to the rest the
/// way the kernel would (a `..` after a symlink leaves the link's target).
fn resolve(path: &Path) -> PathBuf {
    if let Ok(real) = path.canonicalize() {
        return real;
    }
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => {
                out.push(other.as_os_str());
                if let Ok(real) = out.canonicalize() {
                    out = real;
                }
            }
        }
    }
    out
}

/// Checks a plugin name: the directory it installs into is `plugins/<name>/`, so letters,
/// digits, `-` and `_` only.
///
/// # Errors
///
/// What is wrong with it and what a valid name looks like.
///
/// ```
/// use hermes_host::trust::plugin_name;
/// assert!(plugin_name("audit-log_2").is_ok());
/// for bad in ["", "..", "a/b", "a.b", "x y", "é"] {
///     assert!(plugin_name(bad).is_err(), "{bad}");
/// }
/// ```
pub fn plugin_name(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        return Ok(());
    }
    let why = if name.is_empty() {
        "is empty".to_string()
    } else if name.contains('/') || name.contains('\\') {
        "contains a path separator".to_string()
    } else if name.contains("..") {
        "contains `..`".to_string()
    } else {
        "has characters other than letters, digits, '-' and '_'".to_string()
    };
    Err(format!(
        "plugin name '{name}' {why}; a plugin lives in plugins/<name>/, so use letters, digits, '-' and '_' only"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_lenient_policy_warns_once_per_finding_and_refuses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, "").unwrap();
        std::fs::write(&b, "").unwrap();
        chmod(&a, 0o666);
        chmod(&b, 0o646);
        let lenient = Policy { strict: false };
        let warnings = lenient
            .check(&[(&a, Role::PluginDir), (&b, Role::PluginLibrary)])
            .unwrap();
        assert_eq!(warnings.len(), 2);
        assert!(warnings[1].contains("allowed because hooks.strict_permissions is false"));
        let refusal = Policy::STRICT
            .check(&[(&a, Role::PluginDir), (&b, Role::PluginLibrary)])
            .unwrap_err();
        assert!(refusal.starts_with(&format!("{} (plugin directory)", a.display())));
    }

    #[test]
    fn confinement_follows_symlinks_and_dot_dots() {
        let outer = tempfile::tempdir().unwrap();
        let dir = outer.path().join("plugin");
        std::fs::create_dir(&dir).unwrap();
        std::fs::create_dir(dir.join("lib")).unwrap();
        std::fs::write(outer.path().join("libx.so"), "").unwrap();
        // Inside, through a harmless detour.
        assert!(confine(&dir, "library", "lib/../libx.so").is_ok());
        assert!(confine(&dir, "library", "./lib/libx.so").is_ok());
        // Outside, lexically and through a symlink (file and directory).
        assert!(confine(&dir, "library", "../libx.so").is_err());
        assert!(confine(&dir, "library", "/etc/passwd").is_err());
        assert!(confine(&dir, "library", "missing/../../../x.so").is_err());
        std::os::unix::fs::symlink(outer.path().join("libx.so"), dir.join("link.so")).unwrap();
        let err = confine(&dir, "library", "link.so").unwrap_err();
        assert!(
            err.contains("resolves to") && err.contains("libx.so"),
            "{err}"
        );
        std::os::unix::fs::symlink(outer.path(), dir.join("up")).unwrap();
        assert!(confine(&dir, "library", "up/libx.so").is_err());
        // A symlink that stays inside is fine.
        std::fs::write(dir.join("lib/libreal.so"), "").unwrap();
        std::os::unix::fs::symlink(dir.join("lib/libreal.so"), dir.join("libalias.so")).unwrap();
        assert!(confine(&dir, "library", "libalias.so").is_ok());
        // The directory itself is not a file inside it.
        assert!(confine(&dir, "library", ".").is_err());
    }
}
