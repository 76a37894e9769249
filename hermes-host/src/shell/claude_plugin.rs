//! Claude Code plugins: a directory with `.claude-plugin/plugin.json` whose hooks
//! (`hooks/hooks.json`, or the manifest's `hooks` field) run here as `format: claude` shell
//! hooks of that plugin, unchanged.
//!
//! A command names its files through `${CLAUDE_PLUGIN_ROOT}`, which is replaced by the
//! plugin's directory before consent pins the file the command names, and is also in the
//! hook's environment, with `CLAUDE_PLUGIN_DATA` (a directory of the plugin's own that a
//! reinstall keeps). Events, matchers, timeouts and the `command` and `http` handler types
//! are read as [`claude_import`] reads a settings file; what cannot
//! run here (an event Hermes has no moment for, a `prompt` or `agent` handler, which needs a
//! model) is named with the number of hooks it drops.
//!
//! A marketplace (`.claude-plugin/marketplace.json`) lists plugins by name and source;
//! [`marketplace_entry`] finds one that lives in the marketplace's own directory.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::claude_import::{self, Entry};
use super::config::{self, ShellHookSpec};

/// Where a Claude Code plugin's manifest is, under its directory.
pub const MANIFEST: &str = ".claude-plugin/plugin.json";

/// Where a Claude Code marketplace's list of plugins is, under its directory.
pub const MARKETPLACE: &str = ".claude-plugin/marketplace.json";

/// A Claude Code plugin as read from its directory.
#[derive(Clone, Debug)]
pub struct ClaudePlugin {
    /// `name` of plugin.json.
    pub name: String,
    /// `version`, when it has one.
    pub version: String,
    /// `description`.
    pub description: String,
    /// The plugin's directory.
    pub dir: PathBuf,
    /// Its hooks that run here, in file order.
    pub entries: Vec<Entry>,
    /// What does not run here, one line each (`Notification (2 hook(s)): ...`).
    pub dropped: Vec<String>,
}

/// Whether `dir` holds a Claude Code plugin.
pub fn is_plugin(dir: &Path) -> bool {
    dir.join(MANIFEST).is_file()
}

/// Reads the Claude Code plugin in `dir`.
///
/// # Errors
///
/// plugin.json or a hooks file is missing, not JSON, or lacks `name`; the message names
/// the file.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// std::fs::create_dir_all(dir.path().join(".claude-plugin")).unwrap();
/// std::fs::create_dir_all(dir.path().join("hooks")).unwrap();
/// std::fs::write(dir.path().join(".claude-plugin/plugin.json"), r#"{"name": "safety", "version": "1.0.0"}"#).unwrap();
/// std::fs::write(dir.path().join("hooks/hooks.json"), r#"{"hooks": {"PreToolUse": [{"matcher": "Bash",
///     "hooks": [{"type": "command", "command": "python3 ${CLAUDE_PLUGIN_ROOT}/hooks/check.py"}]}],
///     "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]}}"#).unwrap();
/// let plugin = hermes_host::shell::claude_plugin::read(dir.path()).unwrap();
/// assert_eq!((plugin.name.as_str(), plugin.entries.len()), ("safety", 1));
/// assert!(plugin.dropped[0].starts_with("Notification (1 hook(s))"));
/// ```
pub fn read(dir: &Path) -> Result<ClaudePlugin, String> {
    let manifest_path = dir.join(MANIFEST);
    let manifest = read_json(&manifest_path)?;
    let text = |key: &str| {
        manifest
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let name = text("name");
    if name.trim().is_empty() {
        return Err(format!(
            "{}: no \"name\"; a Claude Code plugin's manifest needs one",
            manifest_path.display()
        ));
    }
    // Hooks: the manifest's `hooks` (a path, a list of paths, or the hooks themselves),
    // else hooks/hooks.json when there is one.
    let mut documents: Vec<(PathBuf, Value)> = Vec::new();
    match manifest.get("hooks") {
        None | Some(Value::Null) => {
            let default = dir.join("hooks/hooks.json");
            if default.is_file() {
                documents.push((default.clone(), read_json(&default)?));
            }
        }
        Some(Value::String(path)) => {
            let path = inside(dir, path, &manifest_path)?;
            documents.push((path.clone(), read_json(&path)?));
        }
        Some(Value::Array(paths)) => {
            for path in paths.iter().filter_map(Value::as_str) {
                let path = inside(dir, path, &manifest_path)?;
                documents.push((path.clone(), read_json(&path)?));
            }
        }
        Some(inline @ Value::Object(_)) => documents.push((manifest_path.clone(), inline.clone())),
        Some(other) => {
            return Err(format!(
                "{}: \"hooks\" must be a path, a list of paths or an object, not {other}",
                manifest_path.display()
            ));
        }
    }
    let mut entries = Vec::new();
    let mut dropped = Vec::new();
    for (path, document) in documents {
        // A hooks file is `{"hooks": {<event>: [...]}}`; an inline `hooks` may be the events
        // themselves.
        let document = if document.get("hooks").is_some_and(Value::is_object) {
            document
        } else {
            serde_json::json!({ "hooks": document })
        };
        let (found, skipped) = claude_import::entries(&document);
        entries.extend(found);
        dropped.extend(
            skipped
                .into_iter()
                .filter(|s| !s.starts_with("the file has no"))
                .map(|s| {
                    if path == manifest_path {
                        s
                    } else {
                        format!("{s} ({})", path.display())
                    }
                }),
        );
    }
    Ok(ClaudePlugin {
        name,
        version: text("version"),
        description: text("description"),
        dir: dir.to_path_buf(),
        entries,
        dropped,
    })
}

impl ClaudePlugin {
    /// The plugin's hooks as shell hooks, for the plugin installed in `root` with its data
    /// directory `data`: `${CLAUDE_PLUGIN_ROOT}` replaced, and both variables set for the
    /// hook's process.
    pub fn specs(&self, root: &Path, data: &Path) -> Vec<ShellHookSpec> {
        // Absolute and canonical, as Claude Code gives them: the hook may run in another
        // directory, and consent pins the command by its text, which must not depend on
        // the directory hermes was started in.
        let root = &canonical(root);
        let data = &canonical(data);
        let mut specs = Vec::new();
        for entry in &self.entries {
            let text = format!("hooks:\n  {}:\n{}", entry.event, entry.yaml());
            let Ok(parsed) = crate::config::Config::parse(&text) else {
                continue;
            };
            for mut spec in config::parse(&parsed.hooks).specs {
                if spec.http.is_none() {
                    spec.written =
                        super::claude::expand_var(&spec.written, "CLAUDE_PLUGIN_ROOT", root);
                    spec.command = spec.written.clone();
                    spec.set_work_dir(None);
                }
                spec.env = vec![
                    ("CLAUDE_PLUGIN_ROOT".into(), root.display().to_string()),
                    ("CLAUDE_PLUGIN_DATA".into(), data.display().to_string()),
                ];
                spec.plugin = Some(self.name.clone());
                specs.push(spec);
            }
        }
        specs
    }
}

/// The data directory of Claude Code plugin `name` in `home`: `plugin-data/claude-<name>`,
/// outside the plugin's own directory so that a reinstall keeps it.
pub fn data_dir(home: &crate::home::Home, name: &str) -> PathBuf {
    home.root()
        .join("plugin-data")
        .join(format!("claude-{name}"))
}

/// The directory of plugin `name` in the marketplace at `dir`.
///
/// # Errors
///
/// No marketplace.json, no plugin of that name (the message lists those there), or a
/// source that is not a directory of the marketplace (a git repository, say: clone it and
/// install the directory).
pub fn marketplace_entry(dir: &Path, name: &str) -> Result<PathBuf, String> {
    let path = dir.join(MARKETPLACE);
    let marketplace = read_json(&path)?;
    let plugins = marketplace
        .get("plugins")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = plugins
        .iter()
        .filter_map(|p| p.get("name").and_then(Value::as_str))
        .collect();
    let Some(plugin) = plugins
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str) == Some(name))
    else {
        return Err(format!(
            "{}: no plugin named '{name}' (it lists: {})",
            path.display(),
            names.join(", ")
        ));
    };
    // `pluginRoot` of the marketplace's metadata prefixes bare sources.
    let root = marketplace
        .pointer("/metadata/pluginRoot")
        .and_then(Value::as_str)
        .unwrap_or(".");
    match plugin.get("source") {
        Some(Value::String(source)) => {
            let source = if source.starts_with("./") || source.starts_with("../") {
                source.clone()
            } else {
                format!("{root}/{source}")
            };
            let found = inside(dir, &source, &path)?;
            if found.is_dir() {
                Ok(found)
            } else {
                Err(format!(
                    "{}: the source of '{name}', {}, is not a directory",
                    path.display(),
                    found.display()
                ))
            }
        }
        Some(other) => Err(format!(
            "{}: '{name}' comes from {other}, not from this directory; fetch it (git clone) and run `hermes plugins install <its directory>`",
            path.display()
        )),
        None => Err(format!("{}: '{name}' has no \"source\"", path.display())),
    }
}

/// `path` made absolute with every `..` and link resolved; for a path that does not exist
/// yet (the copy an install is about to make), its parent's.
fn canonical(path: &Path) -> PathBuf {
    if let Ok(found) = std::fs::canonicalize(path) {
        return found;
    }
    match (path.parent().map(std::fs::canonicalize), path.file_name()) {
        (Some(Ok(parent)), Some(name)) => parent.join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// `relative` (as a manifest names a file) under `dir`; a path that leaves `dir` is refused.
fn inside(dir: &Path, relative: &str, manifest: &Path) -> Result<PathBuf, String> {
    let path = Path::new(relative);
    let escapes = path.is_absolute()
        || path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
    if escapes {
        return Err(format!(
            "{}: {relative} is outside the plugin's directory",
            manifest.display()
        ));
    }
    Ok(dir.join(path))
}

fn read_json(path: &Path) -> Result<Value, String> {
    let bytes = crate::private_file::read_regular(path)
        .map_err(|e| format!("{}: cannot read it: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    crate::nesting::check_json(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", path.display()))
}
