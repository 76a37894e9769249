//! `$HERMES_HOME`: where every hook file lives, and its `config.yaml`.
//!
//! This is the only module that reads the `HERMES_HOME` variable. Everything else takes a
//! resolved [`Home`].

use std::fmt;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use yaml_serde::{Mapping, Value};

use crate::ownership::{self, Role};

/// A resolved Hermes home directory.
///
/// ```
/// use hermes_host::home::Home;
/// let home = Home::at("/tmp/h");
/// assert_eq!(home.plugins_dir(), std::path::Path::new("/tmp/h/plugins"));
/// assert_eq!(home.config_path(), std::path::Path::new("/tmp/h/config.yaml"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// `$HERMES_HOME` if set and not empty, else `~/.hermes`.
    ///
    /// ```no_run
    /// let home = hermes_host::home::Home::from_env();
    /// println!("{}", home.root().display());
    /// ```
    pub fn from_env() -> Home {
        match std::env::var_os("HERMES_HOME") {
            Some(dir) if !dir.is_empty() => Home::at(PathBuf::from(dir)),
            _ => Home::at(default_root()),
        }
    }

    /// The named profile `~/.hermes/profiles/<name>`.
    ///
    /// ```
    /// let home = hermes_host::home::Home::profile("work");
    /// assert!(home.root().ends_with(".hermes/profiles/work"));
    /// ```
    pub fn profile(name: &str) -> Home {
        Home::at(default_root().join("profiles").join(name))
    }

    /// A home at `root`.
    pub fn at(root: impl Into<PathBuf>) -> Home {
        Home { root: root.into() }
    }

    /// The home directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<home>/config.yaml`.
    pub fn config_path(&self) -> PathBuf {
        self.root.join("config.yaml")
    }

    /// `<home>/plugins`: native plugins, one directory each.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }

    /// `<home>/hooks`: gateway hooks, one directory each.
    pub fn hooks_dir(&self) -> PathBuf {
        self.root.join("hooks")
    }

    /// `<home>/shell-hooks-allowlist.json`: approved shell hooks.
    pub fn allowlist_path(&self) -> PathBuf {
        self.root.join("shell-hooks-allowlist.json")
    }

    /// `<home>/sessions`: session transcripts.
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// Reads `config.yaml`. A missing file is an empty config; a malformed one is an empty
    /// config plus an error that names the file. So is one that another user could change
    /// (writable by group or others, or owned by someone else than you or root, as
    /// [`crate::ownership::inspect`] decides): it names what runs as you, so none of its
    /// settings is used until its permissions are fixed.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// std::fs::write(dir.path().join("config.yaml"), "plugins:\n  enabled: [audit-log]\n").unwrap();
    /// let (config, problem) = hermes_host::home::Home::at(dir.path()).load_config();
    /// assert!(problem.is_none());
    /// assert_eq!(config.plugins_enabled(), Some(vec!["audit-log".to_string()]));
    ///
    /// use std::os::unix::fs::PermissionsExt;
    /// let path = dir.path().join("config.yaml");
    /// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    /// let (config, problem) = hermes_host::home::Home::at(dir.path()).load_config();
    /// assert_eq!(config.plugins_enabled(), None);
    /// assert!(problem.unwrap().to_string().contains("chmod go-w"));
    /// ```
    pub fn load_config(&self) -> (Config, Option<ConfigError>) {
        let path = self.config_path();
        // The file decides which commands run as the user (shell hooks, plugins,
        // `hooks_auto_accept`) and whether loose permissions elsewhere are tolerated
        // (`hooks.strict_permissions`), so a copy another user could edit is not read at
        // all, whatever it says.
        if let Some(finding) = ownership::inspect(&path, Role::Config) {
            let message = format!(
                "it {}: {} (it names the hooks and plugins that run, and can approve them); run `{}`",
                finding.condition(),
                finding.risk(),
                finding.fix()
            );
            return (Config::default(), Some(ConfigError { path, message }));
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Config::default(), None),
            Err(e) => {
                return (
                    Config::default(),
                    Some(ConfigError {
                        path,
                        message: e.to_string(),
                    }),
                );
            }
        };
        match Config::parse(&text) {
            Ok(config) => (config, None),
            Err(message) => (Config::default(), Some(ConfigError { path, message })),
        }
    }

    /// Writes `config` to `config.yaml`, atomically, readable and writable by the user
    /// only (mode 0600, whatever the umask). Comments in the old file are not kept.
    ///
    /// # Errors
    ///
    /// When the directory cannot be created or the file cannot be written.
    pub fn save_config(&self, config: &Config) -> Result<(), ConfigError> {
        let path = self.config_path();
        let err = |message: String| ConfigError {
            path: path.clone(),
            message,
        };
        std::fs::create_dir_all(&self.root).map_err(|e| err(e.to_string()))?;
        let text = yaml_serde::to_string(&Value::Mapping(config.root.clone()))
            .map_err(|e| err(e.to_string()))?;
        let tmp = self.root.join(".config.yaml.tmp");
        // A new file, private to the user whatever the umask: one that others could
        // write would be refused by the next `load_config`. A temporary file left by an
        // interrupted save goes first, so `create_new` never writes through a link.
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| err(format!("{}: {e}", tmp.display())))?;
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| err(format!("{}: {e}", tmp.display())))?;
        drop(file);
        std::fs::rename(&tmp, &path).map_err(|e| err(e.to_string()))
    }
}

fn default_root() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join(".hermes")
}

/// A `config.yaml` that could not be read or parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// What was wrong with it.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}; fix the file (its settings are ignored until then)",
            self.path.display(),
            self.message
        )
    }
}

impl std::error::Error for ConfigError {}

/// The parsed `config.yaml`, in its original key order.
///
/// ```
/// let config = hermes_host::home::Config::parse("hooks_auto_accept: true\n").unwrap();
/// assert!(config.get("hooks_auto_accept").is_some());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    root: Mapping,
}

impl Config {
    /// Parses YAML text. An empty document is an empty config.
    ///
    /// # Errors
    ///
    /// The parser's message (with line and column) when the text is not YAML, or when the
    /// top level is not a mapping.
    pub fn parse(text: &str) -> Result<Config, String> {
        crate::nesting::check_yaml(text)?;
        let value: Value = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
        match value {
            Value::Null => Ok(Config::default()),
            Value::Mapping(root) => Ok(Config { root }),
            other => Err(format!(
                "the top level must be a mapping, not {}",
                yaml_type_name(&other)
            )),
        }
    }

    /// The top-level value under `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.root.get(key)
    }

    /// Keys of `config.yaml` that hermes does not know but that look like one it does, and
    /// keys it does not know inside `plugins:`, each as one warning with the likely
    /// intended key. A top-level key that resembles nothing of hermes's is left alone: a
    /// Hermes `config.yaml` holds many settings for other parts of Hermes.
    ///
    /// ```
    /// let config = hermes_host::home::Config::parse("hook: {}\nmodel: x\nplugins:\n  enable: [a]\n").unwrap();
    /// assert_eq!(config.unknown_keys(), [
    ///     "config.yaml: unknown key 'hook' — did you mean 'hooks'? (ignored)",
    ///     "config.yaml: unknown key 'plugins.enable' — did you mean 'enabled'? (ignored)",
    /// ]);
    /// ```
    pub fn unknown_keys(&self) -> Vec<String> {
        const TOP: &[&str] = &["hooks", "plugins", "gateway", "hooks_auto_accept", "bench"];
        const PLUGINS: &[&str] = &[
            "enabled",
            "disabled",
            "settings",
            "isolation",
            "isolation_default",
            "slow_callback_warning",
            "python",
        ];
        let mut out = Vec::new();
        for key in self.root.keys().filter_map(Value::as_str) {
            if TOP.contains(&key) {
                continue;
            }
            if let Some(close) = crate::pyfmt::close_match(key, TOP, 0.75) {
                out.push(format!(
                    "config.yaml: unknown key '{key}' — did you mean '{close}'? (ignored)"
                ));
            }
        }
        match self.get("plugins") {
            None | Some(Value::Null) | Some(Value::Mapping(_)) => {}
            Some(other) => out.push(format!(
                "config.yaml: `plugins:` must be a mapping (enabled, disabled, settings, ...), not {}; no plugin is enabled",
                yaml_type_name(other)
            )),
        }
        if let Some(Value::Mapping(plugins)) = self.get("plugins") {
            for key in plugins.keys().filter_map(Value::as_str) {
                if PLUGINS.contains(&key) {
                    continue;
                }
                let hint = crate::pyfmt::close_match(key, PLUGINS, 0.6)
                    .map(|close| format!("did you mean '{close}'?"))
                    .unwrap_or_else(|| format!("known: {}", PLUGINS.join(", ")));
                out.push(format!(
                    "config.yaml: unknown key 'plugins.{key}' — {hint} (ignored)"
                ));
            }
        }
        match self.get("hooks") {
            None | Some(Value::Null) | Some(Value::Mapping(_)) => {}
            Some(other) => out.push(format!(
                "config.yaml: `hooks:` must be a mapping of event names to lists of hooks, not {}; no shell hook is loaded",
                yaml_type_name(other)
            )),
        }
        out
    }

    /// The whole document's top-level mapping.
    pub(crate) fn root(&self) -> &Mapping {
        &self.root
    }

    /// `plugins.enabled` as names: `None` when missing or not a list (nothing enabled).
    pub fn plugins_enabled(&self) -> Option<Vec<String>> {
        string_list(self.get("plugins")?.get("enabled")?)
    }

    /// `plugins.settings.<plugin>`: the user's settings for one plugin, as JSON, merged over
    /// the `config:` of its `plugin.yaml` when it loads. `Ok(None)` when there are none.
    ///
    /// # Errors
    ///
    /// What is wrong with the entry (not a mapping, or not representable as JSON), naming
    /// its key.
    ///
    /// ```
    /// let config = hermes_host::home::Config::parse("plugins:\n  settings:\n    guardrail:\n      default_patterns: false\n").unwrap();
    /// let settings = config.plugin_settings("guardrail").unwrap().unwrap();
    /// assert_eq!(settings["default_patterns"], false);
    /// assert_eq!(config.plugin_settings("memory").unwrap(), None);
    /// ```
    pub fn plugin_settings(&self, plugin: &str) -> Result<Option<serde_json::Value>, String> {
        let Some(value) = self
            .get("plugins")
            .and_then(|p| p.get("settings"))
            .and_then(|s| s.get(plugin))
        else {
            return Ok(None);
        };
        match value {
            Value::Null => Ok(None),
            Value::Mapping(_) => serde_json::to_value(value)
                .map(Some)
                .map_err(|e| format!("plugins.settings.{plugin} cannot be read as JSON: {e}")),
            other => Err(format!(
                "plugins.settings.{plugin} must be a mapping of the plugin's settings, not {}",
                yaml_type_name(other)
            )),
        }
    }

    /// `plugins.disabled` as names (empty when missing).
    pub fn plugins_disabled(&self) -> Vec<String> {
        self.get("plugins")
            .and_then(|p| p.get("disabled"))
            .and_then(string_list)
            .unwrap_or_default()
    }

    /// Adds `name` to `plugins.enabled` and removes it from `plugins.disabled`.
    ///
    /// Returns false when it was already enabled and not disabled.
    ///
    /// ```
    /// let mut config = hermes_host::home::Config::default();
    /// assert!(config.enable_plugin("memory"));
    /// assert!(!config.enable_plugin("memory"));
    /// assert_eq!(config.plugins_enabled(), Some(vec!["memory".to_string()]));
    /// ```
    pub fn enable_plugin(&mut self, name: &str) -> bool {
        let removed = self.edit_list("disabled", |list| remove_name(list, name));
        let added = self.edit_list("enabled", |list| add_name(list, name));
        removed || added
    }

    /// Adds `name` to `plugins.disabled` and removes it from `plugins.enabled`.
    ///
    /// Returns false when it was already disabled and not enabled.
    ///
    /// ```
    /// let mut config = hermes_host::home::Config::default();
    /// config.enable_plugin("memory");
    /// assert!(config.disable_plugin("memory"));
    /// assert_eq!(config.plugins_enabled(), Some(vec![]));
    /// assert_eq!(config.plugins_disabled(), vec!["memory".to_string()]);
    /// ```
    pub fn disable_plugin(&mut self, name: &str) -> bool {
        let removed = self.edit_list("enabled", |list| remove_name(list, name));
        let added = self.edit_list("disabled", |list| add_name(list, name));
        removed || added
    }

    fn edit_list(&mut self, key: &str, edit: impl FnOnce(&mut Vec<Value>) -> bool) -> bool {
        let plugins = self
            .root
            .entry(Value::from("plugins"))
            .or_insert_with(|| Value::Mapping(Mapping::new()));
        if !plugins.is_mapping() {
            *plugins = Value::Mapping(Mapping::new());
        }
        let Value::Mapping(plugins) = plugins else {
            return false;
        };
        let list = plugins
            .entry(Value::from(key))
            .or_insert_with(|| Value::Sequence(Vec::new()));
        if !list.is_sequence() {
            *list = Value::Sequence(Vec::new());
        }
        match list {
            Value::Sequence(items) => edit(items),
            _ => false,
        }
    }
}

fn add_name(list: &mut Vec<Value>, name: &str) -> bool {
    if list.iter().any(|v| v.as_str() == Some(name)) {
        return false;
    }
    list.push(Value::from(name));
    true
}

fn remove_name(list: &mut Vec<Value>, name: &str) -> bool {
    let before = list.len();
    list.retain(|v| v.as_str() != Some(name));
    list.len() != before
}

fn string_list(value: &Value) -> Option<Vec<String>> {
    let items = value.as_sequence()?;
    Some(
        items
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .collect(),
    )
}

/// The Python type name the reference prints for a YAML value (`list`, `dict`, `str`, ...).
///
/// ```
/// use hermes_host::home::yaml_type_name;
/// assert_eq!(yaml_type_name(&yaml_serde::Value::from("x")), "str");
/// ```
pub fn yaml_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Sequence(_) => "list",
        Value::Mapping(_) => "dict",
        Value::Tagged(_) => "tagged",
    }
}

/// The reference's truthy parsing of a flag value: `1`, `true`, `yes`, `on` (any case,
/// surrounding space ignored).
///
/// ```
/// assert!(hermes_host::home::is_truthy(" Yes "));
/// assert!(!hermes_host::home::is_truthy("0"));
/// ```
pub fn is_truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// The subdirectories of `dir` as `(name, path)`, sorted by name in byte order, which is
/// the code-point order Python's `sorted()` gives. A missing or unreadable `dir` has none.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// for name in ["b", "a", "B"] {
///     std::fs::create_dir(dir.path().join(name)).unwrap();
/// }
/// std::fs::write(dir.path().join("file"), "").unwrap();
/// let names: Vec<String> = hermes_host::home::sorted_subdirs(dir.path()).into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["B", "a", "b"]);
/// ```
pub fn sorted_subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    dirs.sort();
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_saved_config_is_private_to_the_user_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::at(dir.path());
        std::fs::write(home.config_path(), "plugins:\n  enabled: [a]\n").unwrap();
        std::fs::set_permissions(home.config_path(), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        // What an interrupted save leaves behind.
        std::fs::write(dir.path().join(".config.yaml.tmp"), "junk").unwrap();
        let (mut config, problem) = home.load_config();
        assert_eq!(problem, None);
        assert!(config.enable_plugin("b"));
        home.save_config(&config).unwrap();
        let mode = std::fs::metadata(home.config_path())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let (again, problem) = home.load_config();
        assert_eq!(problem, None);
        assert_eq!(
            again.plugins_enabled(),
            Some(vec!["a".to_string(), "b".to_string()])
        );
        assert!(!dir.path().join(".config.yaml.tmp").exists());
    }
}
