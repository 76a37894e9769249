//! Finding plugin directories and deciding which may load. Reads files; runs nothing.

use std::path::{Path, PathBuf};

use hermes_hooks_abi::sdk::statics::{StaticPlugin, static_plugins};

use super::entry_points::EntryPoint;
use super::manifest::{Manifest, PluginKind, manifest_path};
use crate::trust::{self, Policy, Role};
use crate::{config::PluginsSection, home::Home};

/// The pip distribution that runs native plugins inside Hermes Agent (the `hermes-hooks`
/// Python package): its entry point is never loaded as a Python plugin here.
pub const BRIDGE_DIST: &str = "hermes-hooks";

/// How the reason of a plugin this host leaves to another begins (a Python plugin when
/// only native ones load, the [`BRIDGE_DIST`] package): skipped by choice, not a problem.
pub const NOT_LOADED_HERE: &str = "not loaded here:";

/// Where plugins are looked for, resolved by the caller.
#[derive(Clone, Debug, Default)]
pub struct DiscoverOptions {
    /// `--safe-mode` / `HERMES_SAFE_MODE`: discover nothing at all.
    pub safe_mode: bool,
    /// `./.hermes/plugins`, when `HERMES_ENABLE_PROJECT_PLUGINS` is set.
    pub project_dir: Option<PathBuf>,
    /// Whether plugin files others can write are refused (the default) or loaded with a
    /// warning: `hooks.strict_permissions` of `config.yaml`.
    pub policy: Policy,
    /// `config.yaml` as JSON, for Python plugins' `hermes_cli.config.load_config()`.
    pub host_config: Option<std::sync::Arc<str>>,
    /// pip-installed plugins, as the plugins' interpreter lists them:
    /// they follow the directories, and one with a directory plugin's key takes its place.
    pub entry_points: Vec<EntryPoint>,
    /// Whether loading asks the interpreter for pip-installed plugins even when
    /// `plugins.enabled` names none that no directory provides (`hermes plugins list`).
    pub list_entry_points: bool,
    /// Load Rust plugins only: a Python or Claude Code plugin is reported and left alone,
    /// and pip-installed plugins are not looked for. This is how Hermes Agent loads this
    /// home's native plugins through the `hermes-hooks` package: Hermes loads the Python
    /// plugins itself.
    pub native_only: bool,
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
    /// Ownership and permission problems let through by `hooks.strict_permissions: false`
    /// (see [`trust`](crate::trust)); with the default policy they are a [`Status::Skipped`].
    pub warnings: Vec<String>,
    /// For a pip-installed plugin, its entry point (`dir` is then where its package is
    /// installed).
    pub entry_point: Option<EntryPoint>,
    /// The directory the scan started from (`plugins/` of the home, or the project's).
    root: PathBuf,
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
    /// Enabled but refused for what its files are (a name that is not plain, a library
    /// outside its directory, files others can write), and why: a warning at load.
    Refused(String),
}

/// Scans the user and project plugin directories in sorted order, one level of category
/// folders deep, and applies `plugins.enabled` / `plugins.disabled`.
///
/// A project plugin with the same key as a user plugin replaces it, at the user plugin's
/// position. Two plugins whose manifests declare the same name: the second is skipped.
///
/// ```
/// use hermes_host::{config::Config, home::Home, plugins::{discover, DiscoverOptions, Status}};
/// let dir = tempfile::tempdir().unwrap();
/// let home = Home::at(dir.path());
/// std::fs::create_dir_all(home.plugins_dir().join("audit")).unwrap();
/// std::fs::write(home.plugins_dir().join("audit/plugin.yaml"), "library: libaudit.so\n").unwrap();
/// let config = Config::parse("plugins:\n  enabled: [audit]\n").unwrap();
/// let found = discover(&home, &config.plugins, &DiscoverOptions::default());
/// assert_eq!(found[0].key, "audit");
/// assert_eq!(found[0].status, Status::Enabled);
/// ```
pub fn discover(
    home: &Home,
    plugins: &PluginsSection,
    options: &DiscoverOptions,
) -> Vec<Candidate> {
    if options.safe_mode {
        return Vec::new();
    }
    let mut found: Vec<Candidate> = Vec::new();
    let mut sources = vec![home.plugins_dir()];
    sources.extend(options.project_dir.clone());
    for source in sources {
        for (key, dir, has_manifest) in scan(&source) {
            let manifest = if has_manifest {
                Manifest::read(&dir)
            } else {
                Err(format!(
                    "{}: no plugin.yaml, so it is not a plugin: add one (`name`, `version`, and `library: <file>` for a Rust plugin; a Python plugin has an `__init__.py` beside it), or move the directory out of plugins/",
                    dir.display()
                ))
            };
            let candidate = Candidate {
                key: key.clone(),
                dir,
                manifest,
                status: Status::Enabled,
                linked: None,
                warnings: Vec::new(),
                entry_point: None,
                root: source.clone(),
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
                root: home.plugins_dir(),
                dir,
                manifest,
                status: Status::Enabled,
                linked: Some(plugin),
                warnings: Vec::new(),
                entry_point: None,
            },
        );
    }
    // pip packages last, as in the reference. There a package also replaces a directory
    // plugin of the same name; here the directory wins, since a load asks the interpreter
    // only for names no directory provides (asking costs 0.1 to 0.6 s).
    for ep in &options.entry_points {
        if let Some(dir) = found.iter().find(|c| c.key == ep.name) {
            tracing::warn!(
                "pip package {} {} declares plugin '{}', which {} provides already; the directory plugin loads: rename or remove one of them",
                ep.dist,
                ep.version,
                ep.name,
                dir.dir.display()
            );
            continue;
        }
        let dir = ep.location.clone().unwrap_or_default();
        let candidate = Candidate {
            key: ep.name.clone(),
            root: dir.clone(),
            manifest: Ok(Manifest {
                name: ep.name.clone(),
                version: ep.version.clone(),
                kind: PluginKind::Python,
                ..Manifest::default()
            }),
            dir,
            status: Status::Enabled,
            linked: None,
            warnings: Vec::new(),
            entry_point: Some(ep.clone()),
        };
        found.push(candidate);
    }
    let enabled = plugins.enabled_names();
    let disabled = plugins.disabled_names();
    let policy = options.policy;
    let mut names_seen: Vec<(String, PathBuf)> = Vec::new();
    for c in &mut found {
        let name = c.name().to_string();
        let listed = |list: &[String]| list.iter().any(|n| *n == c.key || *n == name);
        c.status = if let Err(e) = &c.manifest {
            Status::Skipped(e.clone())
        } else if let Err(why) = plain_names(c) {
            Status::Refused(why)
        } else if listed(&disabled) {
            Status::Skipped("disabled via config".into())
        } else if c
            .entry_point
            .as_ref()
            .is_some_and(|ep| ep.dist == BRIDGE_DIST)
        {
            // Its register(ctx) would load this home's native plugins a second time, inside
            // the Python worker.
            Status::Skipped(format!(
                "{NOT_LOADED_HERE} the {BRIDGE_DIST} package runs this home's Rust plugins inside Hermes Agent; hermes loads them itself"
            ))
        } else if options.native_only
            && c.manifest
                .as_ref()
                .is_ok_and(|m| m.kind != PluginKind::Native)
        {
            Status::Skipped(format!(
                "{NOT_LOADED_HERE} a {} plugin, which Hermes Agent loads itself",
                c.manifest.as_ref().map_or("", |m| m.kind.as_str())
            ))
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
            match trusted(c, &policy) {
                Ok(warnings) => {
                    c.warnings = warnings;
                    Status::Enabled
                }
                Err(why) => Status::Refused(why),
            }
        };
        if c.status == Status::Enabled {
            names_seen.push((name, c.dir.clone()));
        }
    }
    found
}

/// The manifest name and every directory name of the key must be plain: a name is where a
/// plugin installs (`plugins/<name>/`) and how `config.yaml` refers to it.
fn plain_names(c: &Candidate) -> Result<(), String> {
    let manifest = manifest_path(&c.dir).unwrap_or_else(|| c.dir.join("plugin.yaml"));
    let names = std::iter::once(c.name()).chain(c.key.split('/'));
    for name in names {
        trust::plugin_name(name).map_err(|why| format!("{}: {why}", manifest.display()))?;
    }
    Ok(())
}

/// Library confinement, then ownership and permissions of everything from the home down to
/// the library. A plugin linked into this binary has no files to check.
fn trusted(c: &Candidate, policy: &Policy) -> Result<Vec<String>, String> {
    let (Ok(manifest), None) = (&c.manifest, c.linked) else {
        return Ok(Vec::new());
    };
    // A pip package is as trusted as the interpreter's environment it is installed in,
    // which the operator chose (`plugins.python`).
    if c.entry_point.is_some() {
        return Ok(Vec::new());
    }
    let plugin_yaml = manifest_path(&c.dir).unwrap_or_else(|| c.dir.join("plugin.yaml"));
    // What runs: the library, or a Python plugin's `__init__.py` (its sibling modules live
    // in the same directory, which is checked too).
    let library = match manifest.kind {
        PluginKind::Native => trust::confine(&c.dir, "library", &manifest.library)
            .map_err(|why| format!("{}: {why}", plugin_yaml.display()))?,
        PluginKind::Python => c.dir.join("__init__.py"),
        PluginKind::Claude => plugin_yaml.clone(),
    };
    let mut paths: Vec<(&Path, Role)> = Vec::new();
    if let Some(home) = c.root.parent() {
        paths.push((home, Role::Root));
    }
    paths.push((&c.root, Role::Root));
    let category = c.dir.parent().filter(|p| *p != c.root);
    paths.extend(category.map(|p| (p, Role::Root)));
    paths.push((&c.dir, Role::PluginDir));
    paths.push((&library, Role::PluginLibrary));
    policy
        .check(&paths)
        .map_err(|why| format!("plugin '{}' not loaded: {why}", c.name()))
}

/// `(key, dir, has a manifest)` of every plugin directory under `root`, sorted, categories
/// one level deep. A top-level directory with neither a manifest nor a directory inside is
/// listed too (without a manifest), so that it is reported rather than passed over in
/// silence; hidden directories (an install in progress) and `__pycache__` are not.
fn scan(root: &Path) -> Vec<(String, PathBuf, bool)> {
    let mut out = Vec::new();
    for (name, dir) in crate::home::sorted_subdirs(root) {
        if name.starts_with('.') || name == "__pycache__" {
            continue;
        }
        if manifest_path(&dir).is_some() {
            out.push((name, dir, true));
            continue;
        }
        // A directory without a manifest is a category: look one level deeper, no further.
        // One with no directory inside is a plugin that lacks its manifest.
        let inner_dirs = crate::home::sorted_subdirs(&dir);
        if inner_dirs.is_empty() {
            out.push((name, dir, false));
            continue;
        }
        for (inner, inner_dir) in inner_dirs {
            if manifest_path(&inner_dir).is_some() {
                out.push((format!("{name}/{inner}"), inner_dir, true));
            }
        }
    }
    out
}
