//! The plugin's settings, read from its config: where the store lives and how much to recall.

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
};

use serde_json::Value;

use crate::location;

/// How many memories `pre_llm_call` recalls when the config does not say.
pub const DEFAULT_MAX_ITEMS: usize = 3;

/// The resolved settings.
#[derive(Debug, PartialEq)]
pub struct Settings {
    /// The store file (config `path`, else `memory.jsonl` in the plugin's directory).
    pub path: PathBuf,
    /// At most this many memories per turn (config `max_items`).
    pub max_items: usize,
}

impl Settings {
    /// Reads the settings from the config, with one warning per value that was ignored.
    pub fn resolve(
        config: &Value,
        plugin_dir: Option<&Path>,
        hermes_home: Option<&OsStr>,
    ) -> (Settings, Vec<String>) {
        let mut warnings = Vec::new();
        let path = location::resolve(config, plugin_dir, hermes_home, "memory.jsonl");
        let max_items = match config.get("max_items") {
            None | Some(Value::Null) => DEFAULT_MAX_ITEMS,
            Some(value) => match value.as_u64().and_then(|n| usize::try_from(n).ok()) {
                Some(n) => n,
                None => {
                    warnings.push(format!(
                        "config `max_items` must be a whole number, not {value}; using {DEFAULT_MAX_ITEMS}"
                    ));
                    DEFAULT_MAX_ITEMS
                }
            },
        };
        (Settings { path, max_items }, warnings)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_are_the_plugin_directory_and_three_items() {
        let (settings, warnings) = Settings::resolve(&Value::Null, Some(Path::new("/p")), None);
        assert_eq!(
            settings,
            Settings {
                path: "/p/memory.jsonl".into(),
                max_items: 3
            }
        );
        assert!(warnings.is_empty());
    }

    #[test]
    fn configured_values_win() {
        let config = json!({"path": "/srv/mem.jsonl", "max_items": 5});
        let (settings, _) = Settings::resolve(&config, Some(Path::new("/p")), None);
        assert_eq!(
            settings,
            Settings {
                path: "/srv/mem.jsonl".into(),
                max_items: 5
            }
        );
    }

    #[test]
    fn a_bad_max_items_falls_back_to_three_with_a_warning() {
        let (settings, warnings) = Settings::resolve(&json!({"max_items": -1}), None, None);
        assert_eq!(settings.max_items, 3);
        assert_eq!(
            warnings,
            vec!["config `max_items` must be a whole number, not -1; using 3"]
        );
    }
}
