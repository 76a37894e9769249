//! `$HERMES_HOME/.env`: the variables Hermes loads into its plugins' environment
//! (observability plugins document their credentials there), read once per load for the
//! workers of Python plugins and gateway hooks' `handler.py`.

use std::path::Path;

/// The variables of one `.env`, `(name, value)`, shared by every worker of a load.
pub type Vars = std::sync::Arc<Vec<(String, String)>>;

/// The variables of a `.env` file as Hermes reads them (python-dotenv's rules, for the
/// shapes people write): `NAME=value`, `export NAME=value`, quoted values, `#` comments.
/// Names a process already has are left out: the host's environment wins. A file another
/// user could have written is not read (a warning says what to run).
///
/// ```
/// use std::os::unix::fs::PermissionsExt as _;
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join(".env");
/// std::fs::write(&path, "# keys\nexport DOTENV_DOC_A=\"one two\"\nDOTENV_DOC_B=x # note\n").unwrap();
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
/// let vars = hermes_host::dotenv::read(&path);
/// assert_eq!(vars, [("DOTENV_DOC_A".into(), "one two".into()), ("DOTENV_DOC_B".into(), "x".into())]);
/// ```
pub fn read(path: &Path) -> Vec<(String, String)> {
    let Ok(bytes) = crate::private_file::read_regular(path) else {
        return Vec::new();
    };
    if let Some(finding) = crate::ownership::inspect(path, crate::ownership::Role::Config) {
        tracing::warn!(
            "{}: not loaded for plugins and gateway hooks: it {}; run `{}`",
            path.display(),
            finding.condition(),
            finding.fix()
        );
        return Vec::new();
    }
    let text = String::from_utf8_lossy(&bytes);
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line).trim_start();
        let Some((name, value)) = line.split_once('=') else {
            continue;
        };
        let name = name.trim();
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid || std::env::var_os(name).is_some() {
            continue;
        }
        let value = value.trim();
        let value = if let Some(inner) = value.strip_prefix('"').and_then(|v| v.rsplit_once('"')) {
            inner.0.replace("\\n", "\n").replace("\\\"", "\"")
        } else if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.rsplit_once('\'')) {
            inner.0.to_string()
        } else {
            value
                .split(" #")
                .next()
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        out.push((name.to_string(), value));
    }
    out
}
