//! `config.yaml`, parsed once into one typed model.
//!
//! [`Config::parse`] reads the document a single time into a section per concern:
//! [`PluginsSection`] for the plugin loader, [`HooksSection`] for shell hooks and the
//! permission policy (with the top-level `hooks_auto_accept` flag), and [`GatewaySection`]
//! for the gateway. Each loader is handed its section and never goes back to the YAML tree,
//! so a key is read in one place and a misspelt one is reported in one place
//! ([`Config::unknown_keys`]).
//!
//! The model is lenient the way the reference is: a value of the wrong type is a
//! [`Setting::Invalid`], reported once and then treated as unset, and keys hermes does not
//! know are warnings, never errors. Loading always goes on. Hook entries and the gateway's
//! limits are checked by their loaders, which know each entry's place and each limit's range.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Deserializer};
use yaml_serde::{Mapping, Value};

/// One setting of the model: absent (or `null`), set to a value of the right type, or set
/// to one of the wrong type (with the Python type name the reference prints for it).
///
/// ```
/// use hermes_host::config::{Config, Setting};
/// let config = Config::parse("plugins:\n  python: 3\n").unwrap();
/// assert_eq!(config.plugins.python, Setting::Invalid("int"));
/// assert_eq!(config.plugins.isolation_default, Setting::Absent);
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Setting<T> {
    /// Not in the file, or `null`.
    #[default]
    Absent,
    /// A value of the expected type.
    Set(T),
    /// A value of another type: its YAML type, as `yaml_type_name` names it.
    Invalid(&'static str),
}

impl<T> Setting<T> {
    /// The value when it is set and of the right type.
    pub fn get(&self) -> Option<&T> {
        match self {
            Setting::Set(value) => Some(value),
            _ => None,
        }
    }

    /// The type found when the value is of the wrong type.
    pub fn invalid(&self) -> Option<&'static str> {
        match self {
            Setting::Invalid(found) => Some(found),
            _ => None,
        }
    }
}

impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for Setting<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        if value.is_null() {
            return Ok(Setting::Absent);
        }
        let kind = yaml_type_name(&value);
        Ok(match yaml_serde::from_value(value) {
            Ok(typed) => Setting::Set(typed),
            Err(_) => Setting::Invalid(kind),
        })
    }
}

/// A list of plugin names. Numbers count as names (`- 10` is the plugin `10`, as YAML
/// reads it); other items are skipped, as the reference skips them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Names(pub Vec<String>);

impl<'de> Deserialize<'de> for Names {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let items = Vec::<Value>::deserialize(deserializer)?;
        Ok(Names(
            items
                .into_iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect(),
        ))
    }
}

/// The keys of `plugins:`.
pub const PLUGINS_KEYS: &[&str] = &[
    "enabled",
    "disabled",
    "settings",
    "isolation",
    "isolation_default",
    "slow_callback_warning",
    "python",
    "entries",
    "shadow",
];

/// `plugins:`: which plugins load, and how. Read by [`crate::plugins`].
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct PluginsSection {
    /// The plugins that load; when absent or not a list, none does.
    pub enabled: Setting<Names>,
    /// Plugins that never load, even when enabled.
    pub disabled: Setting<Names>,
    /// Per plugin, settings merged over the `config:` of its `plugin.yaml`.
    pub settings: Setting<BTreeMap<String, Value>>,
    /// Per plugin, `in-process` or `process`.
    pub isolation: Setting<BTreeMap<String, Value>>,
    /// Where plugins run unless said otherwise.
    pub isolation_default: Setting<String>,
    /// A duration such as `500ms`, a number of seconds, or `off` / `false`.
    pub slow_callback_warning: Setting<Value>,
    /// The interpreter of Python plugins.
    pub python: Setting<String>,
    /// Plugins whose callbacks run as shadow hooks: their answers recorded, never applied.
    pub shadow: Setting<Names>,
}

impl PluginsSection {
    /// One warning per setting of the wrong type, saying what it must be.
    fn report_wrong_types(&self, report: &mut Vec<String>) {
        let mut wrong = |key: &str, must: &str, found: Option<&'static str>| {
            if let Some(found) = found {
                report.push(format!(
                    "config.yaml: plugins.{key} must be {must}, not {found}; ignored"
                ));
            }
        };
        wrong("enabled", "a list of plugin names", self.enabled.invalid());
        wrong(
            "disabled",
            "a list of plugin names",
            self.disabled.invalid(),
        );
        wrong("shadow", "a list of plugin names", self.shadow.invalid());
        wrong(
            "settings",
            "a mapping of plugin names to settings",
            self.settings.invalid(),
        );
        wrong(
            "isolation",
            "a mapping of plugin names to in-process or process",
            self.isolation.invalid(),
        );
        wrong(
            "isolation_default",
            "in-process or process",
            self.isolation_default.invalid(),
        );
        wrong(
            "python",
            "the path or name of an interpreter",
            self.python.invalid(),
        );
    }

    /// `plugins.enabled` as names: `None` when missing or not a list (nothing enabled).
    pub fn enabled_names(&self) -> Option<Vec<String>> {
        self.enabled.get().map(|n| n.0.clone())
    }

    /// `plugins.disabled` as names (empty when missing).
    pub fn disabled_names(&self) -> Vec<String> {
        self.disabled.get().map(|n| n.0.clone()).unwrap_or_default()
    }

    /// `plugins.shadow` as names (empty when missing): plugins whose callbacks only say
    /// what they would have done.
    pub fn shadow_names(&self) -> Vec<String> {
        self.shadow.get().map(|n| n.0.clone()).unwrap_or_default()
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
    /// let config = hermes_host::config::Config::parse("plugins:\n  settings:\n    guardrail:\n      default_patterns: false\n").unwrap();
    /// let settings = config.plugins.settings_for("guardrail").unwrap().unwrap();
    /// assert_eq!(settings["default_patterns"], false);
    /// assert_eq!(config.plugins.settings_for("memory").unwrap(), None);
    /// ```
    pub fn settings_for(&self, plugin: &str) -> Result<Option<serde_json::Value>, String> {
        let Some(value) = self.settings.get().and_then(|s| s.get(plugin)) else {
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
}

/// The key of `hooks:` that is not an event: the permission policy of every loader.
pub const STRICT_PERMISSIONS_KEY: &str = "strict_permissions";

/// The key of `hooks:` that caps how many times in a row Stop hooks keep the agent working.
pub const MAX_STOP_CONTINUATIONS_KEY: &str = "max_stop_continuations";

/// `hooks:`: shell hooks by event, and the permission policy.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HooksSection {
    /// The entries by event name, in file order, as written: [`crate::shell::config`]
    /// turns them into hook specs with a warning per entry it cannot use. Holds
    /// `strict_permissions` too, which that parser checks for type.
    pub events: Mapping,
    /// `hooks.strict_permissions`: `false` loads files others can write with a warning.
    pub strict_permissions: Setting<bool>,
    /// `hooks.max_stop_continuations`: how many times in a row `format: claude` Stop hooks
    /// may keep the agent working after its final answer (the agent's default when unset).
    pub max_stop_continuations: Setting<u64>,
    /// `hooks_auto_accept` (at the top level, as in the reference): approve (and record)
    /// shell hooks not yet allowlisted. `true`, or a string the reference reads as true
    /// (`yes`, `on`, `1`).
    pub auto_accept: bool,
}

/// The keys of the `gateway:` block, with their JSON types and what they do.
pub const GATEWAY_KEYS: &[(&str, &str, &str)] = &[
    (
        "workers",
        "integer",
        "Async worker threads (default: the number of cores).",
    ),
    (
        "max_blocking",
        "integer",
        "The most threads running turns and hook firings at once (64).",
    ),
    (
        "max_running",
        "integer",
        "The most of those using the CPU at once (the number of cores).",
    ),
    (
        "max_connections",
        "integer",
        "The most clients connected at once (10000).",
    ),
    (
        "max_line_bytes",
        "integer",
        "The longest inbound line (1048576).",
    ),
    (
        "idle_timeout",
        "number",
        "Seconds a partial line may stay unfinished (30).",
    ),
    (
        "write_buffer_bytes",
        "integer",
        "The most bytes of answers queued for one client (8388608).",
    ),
    (
        "shutdown_grace",
        "number",
        "Seconds running turns get after SIGINT or SIGTERM (10).",
    ),
    (
        "spare_transcripts",
        "integer",
        "Empty transcript files kept ready (256; 0 for none).",
    ),
    (
        "history_window",
        "integer",
        "History entries a chat's session keeps in memory (200).",
    ),
    (
        "max_sessions",
        "integer",
        "The most live sessions; a new chat ends the quietest (10000).",
    ),
    (
        "session_idle_timeout",
        "number",
        "Seconds a chat may be quiet before its session ends (86400).",
    ),
    (
        "allowed_users",
        "array",
        "The users allowed to use the gateway (absent: everyone).",
    ),
    (
        "token",
        "string",
        "The token TCP clients send first (16 characters or more).",
    ),
    (
        "events",
        "object",
        "nats: {url, stream, subject_prefix, credentials_file, max_age, ...}: publish every gateway event to NATS JetStream.",
    ),
];

/// `gateway:`: the settings of the `hermes` gateway. The limits are checked for range by
/// the gateway itself, which knows their defaults, so they stay as written.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GatewaySection {
    /// Whether the block is a mapping (`Invalid` names what it is instead).
    pub present: Setting<()>,
    /// Every key of the block as written, in file order.
    pub entries: Mapping,
    /// `gateway.token`: what TCP clients send first.
    pub token: Setting<String>,
    /// `gateway.allowed_users`, as written (the gateway refuses everyone when it is not a
    /// list of ids, so it keeps the raw value to say what was wrong).
    pub allowed_users: Option<Value>,
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

/// The parsed `config.yaml`: one section per concern, and the document in its original key
/// order for the settings of other parts of Hermes.
///
/// ```
/// let config = hermes_host::config::Config::parse("hooks_auto_accept: true\nplugins:\n  enabled: [memory]\n").unwrap();
/// assert!(config.hooks.auto_accept);
/// assert_eq!(config.plugins_enabled(), Some(vec!["memory".to_string()]));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    root: Mapping,
    /// `plugins:`.
    pub plugins: PluginsSection,
    /// `hooks:`.
    pub hooks: HooksSection,
    /// `gateway:`.
    pub gateway: GatewaySection,
    report: Vec<String>,
}

/// The top-level keys hermes reads.
const TOP_KEYS: &[&str] = &["hooks", "plugins", "gateway", "hooks_auto_accept", "bench"];

impl Config {
    /// Parses YAML text. An empty document is an empty config.
    ///
    /// # Errors
    ///
    /// The parser's message (with line and column) when the text is not YAML, nests deeper
    /// than [`crate::nesting`] allows, or when the top level is not a mapping.
    pub fn parse(text: &str) -> Result<Config, String> {
        crate::nesting::check_yaml(text)?;
        let value: Value = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
        match value {
            Value::Null => Ok(Config::default()),
            Value::Mapping(root) => Ok(Config::from_root(root)),
            other => Err(format!(
                "the top level must be a mapping, not {}",
                yaml_type_name(&other)
            )),
        }
    }

    fn from_root(root: Mapping) -> Config {
        let mut report = Vec::new();
        for key in root.keys().filter_map(Value::as_str) {
            if TOP_KEYS.contains(&key) {
                continue;
            }
            // A key that resembles nothing of hermes's is left alone: a Hermes
            // `config.yaml` holds many settings for other parts of Hermes.
            if let Some(close) = crate::pyfmt::close_match(key, TOP_KEYS, 0.75) {
                report.push(format!(
                    "config.yaml: unknown key '{key}' — did you mean '{close}'? (ignored)"
                ));
            }
        }
        let plugins = match root.get("plugins") {
            None | Some(Value::Null) => PluginsSection::default(),
            Some(Value::Mapping(map)) => {
                unknown_in("plugins", map, PLUGINS_KEYS, &mut report);
                let section: PluginsSection =
                    yaml_serde::from_value(Value::Mapping(string_keys(map))).unwrap_or_default();
                section.report_wrong_types(&mut report);
                section
            }
            Some(other) => {
                report.push(format!(
                    "config.yaml: `plugins:` must be a mapping (enabled, disabled, settings, ...), not {}; no plugin is enabled",
                    yaml_type_name(other)
                ));
                PluginsSection::default()
            }
        };
        let auto_accept = match root.get("hooks_auto_accept") {
            Some(Value::Bool(b)) => *b,
            Some(Value::String(s)) => is_truthy(s),
            _ => false,
        };
        let mut hooks = match root.get("hooks") {
            None | Some(Value::Null) => HooksSection::default(),
            Some(Value::Mapping(map)) => HooksSection {
                events: map.clone(),
                strict_permissions: match map.get(STRICT_PERMISSIONS_KEY) {
                    None | Some(Value::Null) => Setting::Absent,
                    Some(Value::Bool(b)) => Setting::Set(*b),
                    Some(other) => Setting::Invalid(yaml_type_name(other)),
                },
                max_stop_continuations: match map.get(MAX_STOP_CONTINUATIONS_KEY) {
                    None | Some(Value::Null) => Setting::Absent,
                    Some(Value::Number(n)) if n.as_u64().is_some_and(|n| n <= 1000) => {
                        Setting::Set(n.as_u64().unwrap_or_default())
                    }
                    Some(other) => {
                        report.push(format!(
                            "config.yaml: hooks.{MAX_STOP_CONTINUATIONS_KEY} must be a whole number from 0 to 1000, not {}; using the default",
                            repr_value(other)
                        ));
                        Setting::Invalid(yaml_type_name(other))
                    }
                },
                auto_accept: false,
            },
            Some(other) => {
                report.push(format!(
                    "config.yaml: `hooks:` must be a mapping of event names to lists of hooks, not {}; no shell hook is loaded",
                    yaml_type_name(other)
                ));
                HooksSection::default()
            }
        };
        let gateway = match root.get("gateway") {
            None | Some(Value::Null) => GatewaySection::default(),
            Some(Value::Mapping(map)) => GatewaySection {
                present: Setting::Set(()),
                entries: map.clone(),
                token: match map.get("token") {
                    None | Some(Value::Null) => Setting::Absent,
                    Some(Value::String(s)) => Setting::Set(s.clone()),
                    Some(other) => Setting::Invalid(yaml_type_name(other)),
                },
                allowed_users: map.get("allowed_users").cloned(),
            },
            Some(other) => GatewaySection {
                present: Setting::Invalid(yaml_type_name(other)),
                ..GatewaySection::default()
            },
        };
        hooks.auto_accept = auto_accept;
        Config {
            root,
            plugins,
            hooks,
            gateway,
            report,
        }
    }

    /// The top-level value under `key`, for settings of other parts of Hermes that hermes
    /// passes through (`bench:` for `hermes bench`).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.root.get(key)
    }

    /// Keys of `config.yaml` that hermes does not know but that look like one it does, keys
    /// it does not know inside `plugins:`, and sections of the wrong type, each as one
    /// warning with the likely intended key. Found once, when the file was parsed. (Unknown
    /// keys of hook entries and of `gateway:` are reported by the loaders of those sections,
    /// with the entry's place.)
    ///
    /// ```
    /// let config = hermes_host::config::Config::parse("hook: {}\nmodel: x\nplugins:\n  enable: [a]\n").unwrap();
    /// assert_eq!(config.unknown_keys(), [
    ///     "config.yaml: unknown key 'hook' — did you mean 'hooks'? (ignored)",
    ///     "config.yaml: unknown key 'plugins.enable' — did you mean 'enabled'? (ignored)",
    /// ]);
    /// ```
    pub fn unknown_keys(&self) -> &[String] {
        &self.report
    }

    /// The whole document's top-level mapping, as written.
    pub(crate) fn root(&self) -> &Mapping {
        &self.root
    }

    /// `plugins.enabled` as names: `None` when missing or not a list (nothing enabled).
    pub fn plugins_enabled(&self) -> Option<Vec<String>> {
        self.plugins.enabled_names()
    }

    /// `plugins.disabled` as names (empty when missing).
    pub fn plugins_disabled(&self) -> Vec<String> {
        self.plugins.disabled_names()
    }

    /// Adds `name` to `plugins.enabled` and removes it from `plugins.disabled`.
    ///
    /// Returns false when it was already enabled and not disabled. This edits the model
    /// only: `config_edit` changes the file, keeping the rest of it byte for byte.
    ///
    /// ```
    /// let mut config = hermes_host::config::Config::default();
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
    /// let mut config = hermes_host::config::Config::default();
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

    /// Edits one list of `plugins:` in the document, then derives the model from it again,
    /// so the two never disagree.
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
        let changed = match list {
            Value::Sequence(items) => edit(items),
            _ => false,
        };
        *self = Config::from_root(std::mem::take(&mut self.root));
        changed
    }
}

/// One warning per key of the `section:` mapping that is not in `known`, with the closest
/// known key or the list of them.
fn unknown_in(section: &str, map: &Mapping, known: &[&str], report: &mut Vec<String>) {
    for key in map.keys() {
        let Some(key) = key.as_str() else {
            report.push(format!(
                "config.yaml: `{section}:` has a key that is not text ({}); ignored",
                yaml_type_name(key)
            ));
            continue;
        };
        if known.contains(&key) {
            continue;
        }
        let hint = crate::pyfmt::close_match(key, known, 0.6)
            .map(|close| format!("did you mean '{close}'?"))
            .unwrap_or_else(|| format!("known: {}", known.join(", ")));
        report.push(format!(
            "config.yaml: unknown key '{section}.{key}' — {hint} (ignored)"
        ));
    }
}

/// The entries of `map` whose keys are text. A derived struct would take a number key as
/// the index of a field (`0:` as `enabled:`), so those never reach it.
fn string_keys(map: &Mapping) -> Mapping {
    map.iter()
        .filter(|(k, _)| k.is_string())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A short text of a value for a warning: the scalar itself, else its type.
fn repr_value(value: &Value) -> String {
    match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Bool(b) => b.to_string(),
        other => yaml_type_name(other).to_string(),
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

/// The Python type name the reference prints for a YAML value (`list`, `dict`, `str`, ...).
///
/// ```
/// use hermes_host::config::yaml_type_name;
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
/// assert!(hermes_host::config::is_truthy(" Yes "));
/// assert!(!hermes_host::config::is_truthy("0"));
/// ```
pub fn is_truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_section_is_read_once_into_its_type_and_wrong_types_are_kept_as_such() {
        let config = Config::parse(
            "plugins:\n  enabled: [a, 10, {x: 1}]\n  disabled: nope\n  python: /usr/bin/python3\n  isolation_default: process\n\
             hooks:\n  strict_permissions: 'no'\n  pre_tool_call: []\n\
             gateway:\n  token: 12345\n  workers: 2\n\
             hooks_auto_accept: 'on'\n",
        )
        .unwrap();
        assert_eq!(
            config.plugins.enabled,
            Setting::Set(Names(vec!["a".into(), "10".into()]))
        );
        assert_eq!(config.plugins.disabled, Setting::Invalid("str"));
        assert_eq!(
            config.unknown_keys(),
            ["config.yaml: plugins.disabled must be a list of plugin names, not str; ignored"]
        );
        assert_eq!(
            config.plugins.python.get().map(String::as_str),
            Some("/usr/bin/python3")
        );
        assert_eq!(config.hooks.strict_permissions, Setting::Invalid("str"));
        assert_eq!(config.hooks.events.len(), 2);
        assert_eq!(config.gateway.token, Setting::Invalid("int"));
        assert_eq!(config.gateway.entries.len(), 2);
        assert!(config.hooks.auto_accept);
    }

    #[test]
    fn hooks_auto_accept_is_true_only_for_true_or_a_truthy_string_as_in_the_reference() {
        for (text, expected) in [
            ("true", true),
            ("' Yes '", true),
            ("'on'", true),
            ("1", false),
            ("'false'", false),
            ("null", false),
        ] {
            let config = Config::parse(&format!("hooks_auto_accept: {text}\n")).unwrap();
            assert_eq!(config.hooks.auto_accept, expected, "{text}");
        }
    }

    #[test]
    fn a_number_key_in_plugins_is_reported_and_never_read_as_a_field() {
        let config = Config::parse("plugins:\n  0: [a]\n  enabled: [b]\n").unwrap();
        assert_eq!(config.plugins_enabled(), Some(vec!["b".to_string()]));
        assert_eq!(
            config.unknown_keys(),
            ["config.yaml: `plugins:` has a key that is not text (int); ignored"]
        );
    }

    #[test]
    fn editing_a_list_keeps_the_model_and_the_document_in_step() {
        let mut config = Config::parse("plugins:\n  disabled: [a]\n").unwrap();
        assert!(config.enable_plugin("a"));
        assert_eq!(config.plugins_disabled(), Vec::<String>::new());
        assert_eq!(config.plugins_enabled(), Some(vec!["a".to_string()]));
        assert_eq!(
            config.root().get("plugins").and_then(|p| p.get("enabled")),
            Some(&Value::Sequence(vec![Value::from("a")]))
        );
    }
}
