//! Where the plugin keeps its file: the configured `path`, else a fixed name in the
//! plugin's directory, in `$HERMES_HOME`, or in the working directory.

use std::{
    ffi::OsStr,
    path::{Path, PathBuf},
};

use serde_json::Value;

/// The file to use, called `file_name` unless the config names one.
///
/// In order: the config key `path` (a relative path is taken from the plugin's directory
/// when there is one), then `<plugin_dir>/<file_name>`, then `<hermes_home>/<file_name>`,
/// then `./<file_name>`. Empty values count as absent.
pub fn resolve(
    config: &Value,
    plugin_dir: Option<&Path>,
    hermes_home: Option<&OsStr>,
    file_name: &str,
) -> PathBuf {
    let plugin_dir = plugin_dir.filter(|dir| !dir.as_os_str().is_empty());
    if let Some(configured) = config
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    {
        return match plugin_dir {
            Some(dir) if Path::new(configured).is_relative() => dir.join(configured),
            _ => PathBuf::from(configured),
        };
    }
    if let Some(dir) = plugin_dir {
        return dir.join(file_name);
    }
    match hermes_home.filter(|home| !home.is_empty()) {
        Some(home) => Path::new(home).join(file_name),
        None => Path::new(".").join(file_name),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NAME: &str = "audit.jsonl";

    #[test]
    fn configured_path_wins_over_every_fallback() {
        let config = json!({"path": "/var/log/hermes/audit.jsonl"});
        let path = resolve(&config, Some(Path::new("/p")), Some(OsStr::new("/h")), NAME);
        assert_eq!(path, Path::new("/var/log/hermes/audit.jsonl"));
    }

    #[test]
    fn relative_configured_path_is_taken_from_the_plugin_directory() {
        let config = json!({"path": "logs/calls.jsonl"});
        let path = resolve(&config, Some(Path::new("/p")), None, NAME);
        assert_eq!(path, Path::new("/p/logs/calls.jsonl"));
    }

    #[test]
    fn plugin_directory_comes_before_hermes_home() {
        let path = resolve(
            &Value::Null,
            Some(Path::new("/p")),
            Some(OsStr::new("/h")),
            NAME,
        );
        assert_eq!(path, Path::new("/p/audit.jsonl"));
    }

    #[test]
    fn hermes_home_comes_before_the_working_directory() {
        let path = resolve(&json!({}), None, Some(OsStr::new("/h")), NAME);
        assert_eq!(path, Path::new("/h/audit.jsonl"));
    }

    #[test]
    fn working_directory_is_the_last_resort() {
        let config = json!({"path": ""});
        let path = resolve(&config, Some(Path::new("")), Some(OsStr::new("")), NAME);
        assert_eq!(path, Path::new("./audit.jsonl"));
    }
}
