//! `plugin.yaml`: what a plugin says about itself.

use std::path::{Path, PathBuf};

use yaml_serde::Value;

use crate::home::yaml_type_name;

/// A parsed `plugin.yaml`.
///
/// ```
/// use hermes_host::plugins::Manifest;
/// let m = Manifest::parse("name: audit\nversion: 1.2\nlibrary: libaudit.so\n", "dir".as_ref()).unwrap();
/// assert_eq!((m.name.as_str(), m.version.as_str(), m.library.as_str()), ("audit", "1.2", "libaudit.so"));
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifest {
    /// `name`, default the directory name.
    pub name: String,
    /// `version`, stringified (`1.2` and `"1.2"` are the same).
    pub version: String,
    /// `description`.
    pub description: String,
    /// `author`.
    pub author: String,
    /// `library`: the shared library's file name, relative to the plugin directory.
    pub library: String,
    /// `provides_hooks`: informational, compared with what `register` really registers.
    pub provides_hooks: Vec<String>,
    /// `config`: the plugin's own settings, handed to it as JSON.
    pub config: serde_json::Value,
}

impl Manifest {
    /// Reads `<dir>/plugin.yaml` (or `plugin.yml`).
    ///
    /// # Errors
    ///
    /// A message naming the file when it cannot be read, is not YAML, is not a mapping, or
    /// lacks `library`.
    pub fn read(dir: &Path) -> Result<Manifest, String> {
        let path = manifest_path(dir).unwrap_or_else(|| dir.join("plugin.yaml"));
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("Failed to parse {}: {e}", path.display()))?;
        Manifest::parse(&text, dir).map_err(|e| format!("Failed to parse {}: {e}", path.display()))
    }

    /// Parses manifest text for the plugin directory `dir`.
    ///
    /// # Errors
    ///
    /// What is wrong, with the fix.
    pub fn parse(text: &str, dir: &Path) -> Result<Manifest, String> {
        let value: Value = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
        let map = match value {
            Value::Mapping(map) => map,
            Value::Null => {
                return Err("the file is empty; it needs at least `name` and `library`".into());
            }
            other => {
                return Err(format!(
                    "the top level must be a mapping, not {}",
                    yaml_type_name(&other)
                ));
            }
        };
        let text_of = |key: &str| -> String {
            match map.get(key) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                Some(Value::Bool(b)) => {
                    if *b {
                        "True".into()
                    } else {
                        "False".into()
                    }
                }
                _ => String::new(),
            }
        };
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = Some(text_of("name"))
            .filter(|n| !n.trim().is_empty())
            .unwrap_or(dir_name);
        let library = text_of("library");
        if library.trim().is_empty() {
            let guess = super::library_file::for_crate(&name);
            return Err(format!(
                "missing the `library` field; add `library: {guess}` (the file cargo builds in target/release/)"
            ));
        }
        let provides_hooks = match map.get("provides_hooks") {
            Some(Value::Sequence(items)) => items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect(),
            _ => Vec::new(),
        };
        let config = match map.get("config") {
            Some(v) => serde_json::to_value(v)
                .map_err(|e| format!("`config` cannot be read as JSON: {e}"))?,
            None => serde_json::Value::Null,
        };
        Ok(Manifest {
            name,
            version: text_of("version"),
            description: text_of("description"),
            author: text_of("author"),
            library,
            provides_hooks,
            config,
        })
    }
}

/// `<dir>/plugin.yaml` or `<dir>/plugin.yml`, whichever exists.
pub(crate) fn manifest_path(dir: &Path) -> Option<PathBuf> {
    ["plugin.yaml", "plugin.yml"]
        .iter()
        .map(|f| dir.join(f))
        .find(|p| p.is_file())
}
