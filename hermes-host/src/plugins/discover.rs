//! Finding plugin directories and deciding which may load. Reads files; runs nothing.

use std::path::{Path, PathBuf};

use hermes_hooks_abi::sdk::statics::{StaticPlugin, static_plugins};

use super::manifest::{Manifest, manifest_path};
use crate::home::{Config, Home};

/// Where plugins are looked for, resolved by the caller.
#[derive(Clone, Debug, Default)]
pub struct DiscoverOptions {
    /// `--safe-mode` / `HERMES_SAFE_MODE`: discover nothing at all.
    pub safe_mode: bool,
    /// `./.hermes/plugins`, when `HERMES_ENABLE_PROJECT_PLUGINS` is set.
    pub project_dir: Option<PathBuf>,
}

/// One plugin directory found on disk.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// `<name>` or `<category>/<name>`: the directory path under `plugins/`.
    pub key: String,
    /// The plugin directory.
    pub dir: PathBuf,
    /// Its manifest, or why it could not be read.
    pub manifest: Result<Manifest, String>,
    /// Whether it may load, and if not, why.
    pub status: Status,
    /// For a plugin linked into this binary (no library to load), its registration.
    pub linked: Option<&'static StaticPlugin>,
}

impl Candidate {
    /// The manifest name, or the key when the manifest is broken.
    pub fn name(&self) -> &str {
        self.manifest
            .as_ref()
            .map_or(self.key.as_str(), |m| m.name.as_str())
    }
}

/// Whether a plugin may load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Listed in `plugins.enabled` and not disabled.
    Enabled,
    /// Not loaded, and why (the reference's texts).
    Skipped(String),
}

/// Scans the user and project plugin directories in sorted order, one level of category
/// folders deep, and applies `plugins.enabled` / `plugins.disabled`.
///
/// A project plugin with the same key as a user plugin replaces it, at the user plugin's
/// position. Two plugins whose manifests declare the same name: the second is skipped.
///
/// ```
/// use hermes_host::{home::{Home, Config}, plugins::{discover, DiscoverOptions, Status}};
/// let dir = tempfile::tempdir().unwrap();
/// let home = Home::at(dir.path());
/// std::fs::create_dir_all(home.plugins_dir().join("audit")).unwrap();
/// std::fs::write(home.plugins_dir().join("audit/plugin.yaml"), "library: libaudit.so\n").unwrap();
/// let config = Config::parse("plugins:\n  enabled: [audit]\n").unwrap();
/// let found = discover(&home, &config, &DiscoverOptions::default());
/// assert_eq!(found[0].key, "audit");
/// assert_eq!(found[0].status, Status::Enabled);
/// ```
pub fn discover(home: &Home, config: &Config, options: &DiscoverOptions) -> Vec<Candidate> {
    if options.safe_mode {
        return Vec::new();
    }
    let mut found: Vec<Candidate> = Vec::new();
    let mut sources = vec![home.plugins_dir()];
    sources.extend(options.project_dir.clone());
    for source in sources {
        for (key, dir) in scan(&source) {
            let manifest = Manifest::read(&dir);
            let candidate = Candidate {
                key: key.clone(),
                dir,
                manifest,
                status: Status::Enabled,
                linked: None,
            };
            match found.iter_mut().find(|c| c.key == key) {
                Some(existing) => *existing = candidate,
                None => found.push(candidate),
            }
        }
    }
    // Plugins linked into this binary take their place in name order among the user's,
    // and from there on follow the same rules (enabled, disabled, duplicate names).
    let mut linked = static_plugins();
    linked.sort_by_key(|p| p.crate_name);
    for plugin in linked {
        let dir = home.plugins_dir().join(plugin.crate_name);
        let manifest = Manifest::parse(plugin.manifest, &dir).map_err(|e| {
            format!(
                "the plugin.yaml built into static plugin '{}': {e}",
                plugin.crate_name
            )
        });
        let key = manifest
            .as_ref()
            .map_or(plugin.crate_name, |m| m.name.as_str())
            .to_string();
        let at = found
            .iter()
            .position(|c| c.key > key)
            .unwrap_or(found.len());
        found.insert(
            at,
            Candidate {
                key,
                dir,
                manifest,
                status: Status::Enabled,
                linked: Some(plugin),
            },
        );
    }
    let enabled = config.plugins_enabled();
    let disabled = config.plugins_disabled();
    let mut names_seen: Vec<(String, PathBuf)> = Vec::new();
    for c in &mut found {
        let name = c.name().to_string();
        let listed = |list: &[String]| list.iter().any(|n| *n == c.key || *n == name);
        c.status = if let Err(e) = &c.manifest {
            Status::Skipped(e.clone())
        } else if listed(&disabled) {
            Status::Skipped("disabled via config".into())
        } else if !enabled.as_deref().is_some_and(listed) {
            tracing::debug!("Skipping '{}' (not in plugins.enabled)", c.key);
            Status::Skipped(format!(
                "not enabled in config (run `hermes plugins enable {}` to activate)",
                c.key
            ))
        } else if let Some((_, first)) = names_seen.iter().find(|(n, _)| *n == name) {
            Status::Skipped(format!(
                "duplicate plugin name '{name}': {} declares the same name as {}; rename one of them",
                c.dir.join("plugin.yaml").display(),
                first.join("plugin.yaml").display()
            ))
        } else {
            Status::Enabled
        };
        if c.status == Status::Enabled {
            names_seen.push((name, c.dir.clone()));
        }
    }
    found
}

/// `(key, dir)` of every plugin directory under `root`, sorted, categories one level deep.
fn scan(root: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for (name, dir) in crate::home::sorted_subdirs(root) {
        if manifest_path(&dir).is_some() {
            out.push((name, dir));
            continue;
        }
        // A directory without a manifest is a category: look one level deeper, no further.
        for (inner, inner_dir) in crate::home::sorted_subdirs(&dir) {
            if manifest_path(&inner_dir).is_some() {
                out.push((format!("{name}/{inner}"), inner_dir));
            }
        }
    }
    out
}
