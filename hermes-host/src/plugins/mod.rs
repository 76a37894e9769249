//! Plugins, native and Python: discovery, loading, enable/disable.
//!
//! Data flows one way: [`discover`] reads directories and manifests, [`load_all`] loads the
//! enabled libraries and runs their `register` (a Python plugin's in its worker, see
//! [`python`]), and the callbacks go into the
//! [`crate::registry::Registry`]. Nothing here fires a hook. One broken plugin
//! (bad manifest, missing or incompatible library, failing `register`) is reported with the
//! file it concerns, and every other plugin still loads.

mod discover;
mod elf;
mod entry_points;
pub mod hermes_agent;
pub mod isolation;
pub mod library_file;
mod load;
mod manifest;
mod offers;
pub mod python;
mod supervisor;

use std::path::{Path, PathBuf};

pub use discover::{BRIDGE_DIST, Candidate, DiscoverOptions, NOT_LOADED_HERE, Status, discover};
pub use elf::check_elf;
pub use entry_points::{EntryPoint, GROUP as ENTRY_POINT_GROUP};
pub use load::{HOST_ABI_VERSION, Library, Registration, load_library, register};
pub use manifest::{Isolation, Manifest, PluginKind, parse_size};
pub use supervisor::{CRASH_WINDOW, DEFAULT_TIMEOUT, MAX_CRASHES};

use crate::registry::Registry;
use crate::{config::PluginsSection, home::Home};

/// What happened to one discovered plugin.
#[derive(Clone, Debug)]
pub struct PluginReport {
    /// `<name>` or `<category>/<name>`.
    pub key: String,
    /// The manifest name (the key when the manifest is broken).
    pub name: String,
    /// The manifest version.
    pub version: String,
    /// The plugin directory.
    pub dir: PathBuf,
    /// The library path, when the manifest names one.
    pub library: Option<PathBuf>,
    /// Native or Python.
    pub kind: PluginKind,
    /// For a Python plugin, the interpreter its worker runs on.
    pub interpreter: Option<PathBuf>,
    /// For a pip-installed plugin, where it came from: `pip package <dist> <version>
    /// (entry point <value>)`.
    pub origin: Option<String>,
    /// `None` when loaded; otherwise why not.
    pub error: Option<String>,
    /// Problems with its files that `hooks.strict_permissions: false` let through.
    pub warnings: Vec<String>,
    /// The plugin hooks it registered, in order.
    pub hooks: Vec<String>,
    /// The middleware kinds it registered, one per callback, in order.
    pub middleware: Vec<String>,
    /// The tools it offers the model.
    pub tools: Vec<String>,
    /// The slash commands it added, without the slash.
    pub commands: Vec<String>,
    /// Hook names it registered that this host does not know.
    pub unknown_hooks: Vec<String>,
    /// The interface version it was built against, when loaded.
    pub abi_version: Option<String>,
    /// `debug` or `release`, when loaded.
    pub build_profile: Option<String>,
    /// The settings `register` saw: the `config:` of `plugin.yaml` with
    /// `plugins.settings.<name>` of `config.yaml` merged over it (`Null` when not loaded).
    pub config: serde_json::Value,
    /// `plugins.settings.<name>` of `config.yaml`, when there is one.
    pub settings: Option<serde_json::Value>,
    /// Linked into this binary (its crate built with the `static` feature), not loaded
    /// from a library; `library` is then `None`.
    pub linked_static: bool,
    /// Where its callbacks run (see [`crate::plugins::isolation`]).
    pub isolation: Isolation,
    /// For an isolated or Python plugin, its worker's pid at load.
    pub worker_pid: Option<u32>,
    /// For an isolated or Python plugin, its worker: pid now, restarts, last crash.
    pub worker: Option<std::sync::Arc<dyn SupervisedWorker>>,
}

/// A plugin whose callbacks run in a supervised worker process (an isolated native plugin,
/// or a Python plugin).
pub trait SupervisedWorker: Send + Sync + std::fmt::Debug {
    /// The running worker's pid, how often it was restarted, and the last crash's cause.
    fn status(&self) -> (Option<u32>, u64, Option<String>);
    /// Stops the worker; the next firing starts a new one on the plugin's current code.
    fn restart(&self);
}

impl PluginReport {
    /// Whether the plugin loaded and registered.
    pub fn loaded(&self) -> bool {
        self.error.is_none()
    }
}

/// A native gateway handler a plugin registered (a hook name with a colon).
pub struct GatewayHandler {
    /// The plugin's name.
    pub plugin: String,
    /// The event or `prefix:*` wildcard.
    pub event: String,
    /// The callback's name.
    pub callback_name: String,
    /// The plugin's library.
    pub library: PathBuf,
    /// The callback.
    pub callback: hermes_hooks_abi::core::HookCallbackBox,
}

/// Everything loading produced besides the registry's callbacks.
#[derive(Default)]
pub struct LoadReport {
    /// One report per discovered plugin, in discovery order.
    pub plugins: Vec<PluginReport>,
    /// Native gateway handlers, in load order.
    pub gateway_handlers: Vec<GatewayHandler>,
}

/// [`discover`], with the pip-installed plugins of `interpreter` when they are wanted: when
/// `plugins.enabled` names a plugin no directory provides, or when
/// [`DiscoverOptions::list_entry_points`] asks. Asking costs an interpreter start, so a
/// home whose enabled plugins are all directories never pays it. A failed scan is a warning;
/// the directory plugins load all the same.
pub fn discover_with_pip(
    home: &Home,
    config: &PluginsSection,
    options: &DiscoverOptions,
    interpreter: &std::path::Path,
) -> Vec<Candidate> {
    let found = discover(home, config, options);
    if options.safe_mode || options.native_only {
        return found;
    }
    let provided = |name: &String| found.iter().any(|c| c.key == *name || c.name() == name);
    let wanted = options.list_entry_points
        || config
            .enabled_names()
            .is_some_and(|names| names.iter().any(|n| !provided(n)));
    if !wanted {
        return found;
    }
    let cache = home.root().join("cache").join("pip-plugins.json");
    match entry_points::scan_cached(interpreter, &cache) {
        Ok(eps) if eps.is_empty() => found,
        Ok(eps) => {
            let options = DiscoverOptions {
                entry_points: eps,
                ..options.clone()
            };
            discover(home, config, &options)
        }
        Err(why) => {
            tracing::warn!("{why}");
            found
        }
    }
}

/// Discovers, loads and registers every enabled plugin, appending its callbacks to
/// `registry` in load order. Warnings go to the log with the reference's texts.
///
/// ```no_run
/// use hermes_host::{home::Home, plugins::{load_all, DiscoverOptions}, registry::Registry};
/// let home = Home::from_env();
/// let (config, _) = home.load_config();
/// let mut registry = Registry::new();
/// let options = DiscoverOptions { policy: hermes_host::trust::Policy::from_config(&config), ..Default::default() };
/// let report = load_all(&home, &config.plugins, &options, &mut registry);
/// for p in &report.plugins {
///     println!("{} {}", p.name, if p.loaded() { "loaded" } else { "not loaded" });
/// }
/// ```
pub fn load_all(
    home: &Home,
    config: &PluginsSection,
    options: &DiscoverOptions,
    registry: &mut Registry,
) -> LoadReport {
    let mut report = LoadReport::default();
    let interpreter = python::interpreter(config);
    let candidates = discover_with_pip(home, config, options, &interpreter);
    // Every Python worker starts now, before any waits for its hello, so their interpreters
    // start in parallel; each is then taken up at its plugin's place in the order.
    // `.env` is read (and judged) only when a Python plugin will start.
    let to_start: Vec<(usize, python::ToStart<'_>)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match (&c.status, &c.manifest) {
            (Status::Enabled, Ok(m)) if m.kind == PluginKind::Python => {
                let isolation = isolation_of(config, &m.name, m.isolation).unwrap_or_default();
                Some((
                    i,
                    python::ToStart {
                        manifest: m,
                        key: &c.key,
                        dir: &c.dir,
                        entry_point: c.entry_point.as_ref(),
                        isolated: isolation == Isolation::Process,
                    },
                ))
            }
            _ => None,
        })
        .collect();
    let mut launching: Vec<Option<python::Launching>> = candidates.iter().map(|_| None).collect();
    if !to_start.is_empty() {
        let context = python::WorkerContext::new(home.root(), options.host_config.clone());
        let starts: Vec<python::ToStart<'_>> = to_start.iter().map(|(_, s)| *s).collect();
        for ((i, _), started) in
            to_start
                .iter()
                .zip(python::launch(&starts, &interpreter, &context))
        {
            launching[*i] = Some(started);
        }
    }
    for (index, candidate) in candidates.into_iter().enumerate() {
        let mut entry = PluginReport {
            key: candidate.key.clone(),
            name: candidate.name().to_string(),
            version: candidate
                .manifest
                .as_ref()
                .map(|m| m.version.clone())
                .unwrap_or_default(),
            dir: candidate.dir.clone(),
            library: candidate
                .manifest
                .as_ref()
                .ok()
                .filter(|m| candidate.linked.is_none() && m.kind == PluginKind::Native)
                .map(|m| candidate.dir.join(&m.library)),
            kind: candidate
                .manifest
                .as_ref()
                .map_or(PluginKind::Native, |m| m.kind),
            interpreter: None,
            origin: candidate.entry_point.as_ref().map(EntryPoint::origin),
            warnings: candidate.warnings.clone(),
            error: None,
            hooks: Vec::new(),
            middleware: Vec::new(),
            tools: Vec::new(),
            commands: Vec::new(),
            unknown_hooks: Vec::new(),
            abi_version: None,
            build_profile: None,
            config: serde_json::Value::Null,
            settings: None,
            linked_static: candidate.linked.is_some(),
            isolation: Isolation::InProcess,
            worker_pid: None,
            worker: None,
        };
        let manifest = match (&candidate.status, &candidate.manifest) {
            (Status::Enabled, Ok(manifest)) => manifest,
            (Status::Refused(why), _) | (Status::Skipped(why), Err(_)) => {
                tracing::warn!("{why}");
                entry.error = Some(why.clone());
                report.plugins.push(entry);
                continue;
            }
            (Status::Skipped(why), Ok(_)) | (Status::Enabled, Err(why)) => {
                if why.starts_with("duplicate") {
                    tracing::warn!("{why}");
                }
                entry.error = Some(why.clone());
                report.plugins.push(entry);
                continue;
            }
        };
        for warning in &entry.warnings {
            tracing::warn!("plugin '{}': {warning}", entry.name);
        }
        if let Some(started) = launching.get_mut(index).and_then(Option::take) {
            let effective = effective_manifest(home, config, manifest, &mut entry);
            entry.interpreter = Some(interpreter.clone());
            load_python(started, &effective, &mut entry, registry);
            report.plugins.push(entry);
            continue;
        }
        // A Claude Code plugin's hooks are shell hooks: the shell loader registers them,
        // under consent, after config.yaml's (see `Hooks::load`).
        if manifest.kind == PluginKind::Claude {
            entry.hooks = manifest.provides_hooks.clone();
            let record = crate::shell::claude_plugin::data_dir(home, &manifest.name)
                .join("installed-from.json");
            entry.origin = crate::private_file::read_regular(&record)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
                .and_then(|v| v["source"].as_str().map(str::to_string))
                .map(|source| format!("Claude Code plugin, installed from {source}"));
            report.plugins.push(entry);
            continue;
        }
        let path = candidate.dir.join(&manifest.library);
        entry.isolation = match isolation_of(config, &manifest.name, manifest.isolation) {
            Ok(isolation) => isolation,
            Err(why) => {
                tracing::warn!("{why}");
                manifest.isolation.unwrap_or_default()
            }
        };
        if entry.isolation == Isolation::Process && candidate.linked.is_none() {
            let effective = effective_manifest(home, config, manifest, &mut entry);
            load_isolated(
                &effective,
                &candidate.dir,
                &mut entry,
                &mut report,
                registry,
                &path,
            );
            report.plugins.push(entry);
            continue;
        }
        // A plugin linked into this binary has no library to load and check.
        let register_entry = match candidate.linked {
            Some(linked) => {
                entry.abi_version = Some(hermes_hooks_abi::sdk::ABI_VERSION.to_string());
                let profile = if cfg!(debug_assertions) {
                    "debug"
                } else {
                    "release"
                };
                entry.build_profile = Some(profile.to_string());
                linked.register
            }
            None => {
                let library = match load_library(&path, &manifest.name) {
                    Ok(library) => {
                        // An in-process library can crash or stall the host; name it if it
                        // does.
                        crate::fatal::install();
                        crate::fatal::set_slow_threshold(slow_threshold(config));
                        library
                    }
                    Err(why) => {
                        tracing::warn!("Failed to load plugin '{}': {why}", manifest.name);
                        entry.error = Some(why);
                        report.plugins.push(entry);
                        continue;
                    }
                };
                entry.abi_version = Some(library.abi_version().to_string());
                entry.build_profile = Some(library.build_profile().to_string());
                if let Some(warning) =
                    load::newer_interface_warning(&path, &manifest.name, library.abi_version())
                {
                    tracing::warn!("{warning}");
                }
                if let Some(warning) = debug_build_warning(
                    &path,
                    &manifest.name,
                    library.build_profile(),
                    !cfg!(debug_assertions),
                ) {
                    tracing::warn!("{warning}");
                }
                library.register_entry()
            }
        };
        let effective = effective_manifest(home, config, manifest, &mut entry);
        let registration = load::register_fn(register_entry, &effective, &candidate.dir);
        add_registration(
            &mut report,
            &mut entry,
            registration,
            registry,
            &effective,
            &path,
        );
        report.plugins.push(entry);
    }
    report
}

/// The manifest `register` sees: `config:` with `plugins.settings.<name>` of `config.yaml`
/// merged over it (recorded in `entry`); settings that are not a mapping are one warning.
fn effective_manifest(
    home: &Home,
    config: &PluginsSection,
    manifest: &Manifest,
    entry: &mut PluginReport,
) -> Manifest {
    let settings = match config.settings_for(&manifest.name) {
        Ok(settings) => settings,
        Err(why) => {
            tracing::warn!(
                "{}: {why}; plugin '{}' loads with the config of its plugin.yaml",
                home.config_path().display(),
                manifest.name
            );
            None
        }
    };
    let mut effective = manifest.clone();
    if let Some(settings) = &settings {
        merge_settings(&mut effective.config, settings);
    }
    entry.config = effective.config.clone();
    entry.settings = settings;
    effective
}

/// Waits for a Python plugin's worker, then puts its callbacks in the registry: one group
/// per hook, one entry per callback, in registration order.
fn load_python(
    started: python::Launching,
    manifest: &Manifest,
    entry: &mut PluginReport,
    registry: &mut Registry,
) {
    let (plugin, hello) = match started.finish() {
        Ok(started) => started,
        Err(why) => {
            tracing::warn!("Failed to load plugin '{}': {why}", manifest.name);
            entry.error = Some(why);
            return;
        }
    };
    // A plugin that failed before registering anything has nothing to run: its worker
    // goes (when `plugin` is dropped) rather than idling for the rest of the run.
    let offers = !hello.callbacks.is_empty()
        || !hello.middleware.is_empty()
        || !hello.sections.is_empty()
        || !hello.tools.is_empty()
        || !hello.commands.is_empty();
    if hello.error.is_none() || offers {
        entry.worker_pid = SupervisedWorker::status(&*plugin).0;
        entry.worker = Some(plugin.clone());
    }
    for warning in &hello.warnings {
        tracing::warn!("{warning}");
        entry.warnings.push(warning.clone());
    }
    let mut hooks: Vec<(&str, Vec<String>)> = Vec::new();
    for (hook, callback) in &hello.callbacks {
        let label = format!("{}::{callback}", manifest.name);
        match hooks.iter_mut().find(|(h, _)| h == hook) {
            Some((_, labels)) => labels.push(label),
            None => hooks.push((hook, vec![label])),
        }
        if hermes_hooks_abi::hooks::spec(hook).is_none() {
            warn_unknown_hook(&manifest.name, hook);
            entry.unknown_hooks.push(hook.clone());
        }
        entry.hooks.push(hook.clone());
    }
    let text = |v: &serde_json::Value, key: &str| v[key].as_str().unwrap_or_default().to_string();
    for tool in &hello.tools {
        let spec = crate::tools::ToolSpec {
            name: text(tool, "name"),
            toolset: text(tool, "toolset"),
            schema: tool["schema"].clone(),
            description: text(tool, "description"),
            source: manifest.name.clone(),
        };
        let name = spec.name.clone();
        let handler = std::sync::Arc::new(python::ToolGroup {
            plugin: plugin.clone(),
        });
        match registry.add_tool(spec, handler) {
            Ok(()) => entry.tools.push(name),
            Err(why) => tracing::warn!("{why}"),
        }
    }
    for command in &hello.commands {
        let spec = crate::commands::CommandSpec {
            name: crate::commands::normalize(&text(command, "name")),
            description: text(command, "description"),
            args_hint: text(command, "args_hint"),
            source: manifest.name.clone(),
        };
        let name = spec.name.clone();
        let handler = std::sync::Arc::new(python::CommandGroup {
            plugin: plugin.clone(),
        });
        match registry.add_command(spec, handler) {
            Ok(()) => entry.commands.push(name),
            Err(why) => tracing::warn!("{why}"),
        }
    }
    for section in &hello.sections {
        let spec = crate::prompt_sections::SectionSpec {
            id: text(section, "id"),
            position: text(section, "position"),
            max_chars: section["max_chars"]
                .as_u64()
                .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX)),
            source: manifest.name.clone(),
        };
        let source = std::sync::Arc::new(python::SectionGroup {
            plugin: plugin.clone(),
            content: section["content"].as_str().map(str::to_string),
        });
        if let Err(why) = registry.add_prompt_section(spec, source) {
            tracing::warn!("{why}");
            entry.warnings.push(why);
        }
    }
    // Middleware: one link per kind, holding all of the plugin's callbacks of that kind.
    let mut kinds: Vec<(crate::middleware::Kind, Vec<String>)> = Vec::new();
    for (kind, callback) in &hello.middleware {
        let Some(kind) = crate::middleware::Kind::parse(kind).filter(|k| k.name() == kind) else {
            continue; // warned about in the worker, kept there, never run: as the reference
        };
        let label = format!("{}::{callback}", manifest.name);
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, labels)) => labels.push(label),
            None => kinds.push((kind, vec![label])),
        }
        entry.middleware.push(kind.name().to_string());
    }
    for (kind, labels) in kinds {
        let group = python::MiddlewareGroup {
            plugin: plugin.clone(),
            label: labels.join(", "),
        };
        registry.add_middleware(kind, std::sync::Arc::new(group));
    }
    for (hook, labels) in hooks {
        let group = python::HookGroup::new(plugin.clone(), labels.len(), labels.join(", "));
        registry.add_group(
            hook,
            crate::registry::Source::Python(manifest.name.as_str().into()),
            labels,
            std::sync::Arc::new(group),
        );
    }
    if let Some(error) = hello.error {
        // An error of the worker names the directory already; one of the plugin's code gets
        // the file it came from.
        let error = if error.starts_with(&entry.dir.display().to_string()) {
            error
        } else {
            format!("{}: {error}", entry.dir.join("__init__.py").display())
        };
        tracing::warn!("Failed to load plugin '{}': {error}", manifest.name);
        entry.error = Some(error);
    }
}

/// Takes a native plugin's tool, command or middleware (see [`offers`]) into the registry
/// and its report.
fn add_offer(
    entry: &mut PluginReport,
    registry: &mut Registry,
    plugin: &str,
    hook: &str,
    label: &str,
    callback: hermes_hooks_abi::core::HookCallbackBox,
    timeout: Option<std::time::Duration>,
) {
    match offers::add(registry, plugin, hook, label, callback, timeout) {
        Ok(("tool", name)) => entry.tools.push(name),
        Ok(("command", name)) => entry.commands.push(name),
        Ok((_, kind)) => entry.middleware.push(kind),
        Err(why) => {
            tracing::warn!("{why}");
            entry.warnings.push(why);
        }
    }
}

/// The reference's line for a hook name this host does not know, then the closest name
/// when there is one.
fn warn_unknown_hook(plugin: &str, hook: &str) {
    let names = hermes_hooks_abi::hooks::names_sorted();
    let hint = crate::pyfmt::close_match(hook, &names, 0.6)
        .map(|close| format!("; did you mean '{close}'?"))
        .unwrap_or_default();
    tracing::warn!(
        "Plugin '{plugin}' registered unknown hook '{hook}' (valid: {}){hint}",
        names.join(", ")
    );
}

/// Merges the user's `settings` over a plugin's `config`: mappings key by key, all the way
/// down; any other value (a list, a number) replaces the default whole.
fn merge_settings(config: &mut serde_json::Value, settings: &serde_json::Value) {
    match (config, settings) {
        (serde_json::Value::Object(base), serde_json::Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(slot) => merge_settings(slot, value),
                    None => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (slot, value) => *slot = value.clone(),
    }
}

/// The warning for a plugin built in debug mode loaded into a release host, where it
/// matters: its hooks run unoptimised on the agent's hot path. `None` when there is nothing
/// to say (a release plugin, or a debug host, where tests and development run).
fn debug_build_warning(
    library: &Path,
    plugin: &str,
    profile: &str,
    host_is_release: bool,
) -> Option<String> {
    (profile == "debug" && host_is_release).then(|| {
        format!(
            "{}: plugin '{plugin}' is a debug build loaded into a release host; it works, but its hooks run unoptimised: rebuild it with `cargo build --release` (or reinstall it with `hermes plugins install <crate dir>`)",
            library.display()
        )
    })
}

/// What `register` returned, as one line that names the library; a panic also says how to
/// find where it happened (the plugin's panic hook logs the location at debug level).
fn register_error(library: &Path, error: &str) -> String {
    if error.starts_with("register() panicked: ") {
        format!(
            "{}: {error}; run with HERMES_LOG=debug to see where",
            library.display()
        )
    } else {
        format!("{}: register() failed: {error}", library.display())
    }
}

/// `plugins.slow_callback_warning` of `config.yaml`: a duration such as `500ms` or `2s`,
/// or `off`; the default when missing or unreadable (with a warning).
fn slow_threshold(plugins: &PluginsSection) -> Option<std::time::Duration> {
    let Some(value) = plugins.slow_callback_warning.get() else {
        return Some(crate::fatal::DEFAULT_SLOW);
    };
    let text = match value {
        yaml_serde::Value::String(s) => s.clone(),
        yaml_serde::Value::Bool(false) => return None,
        yaml_serde::Value::Number(n) => format!("{n}s"),
        _ => String::new(),
    };
    if text == "off" {
        return None;
    }
    let parsed = text
        .strip_suffix("ms")
        .and_then(|n| n.trim().parse::<f64>().ok().map(|ms| ms / 1000.0))
        .or_else(|| {
            text.strip_suffix('s')
                .and_then(|n| n.trim().parse::<f64>().ok())
        })
        .filter(|s| s.is_finite() && *s > 0.0);
    match parsed {
        Some(secs) => Some(std::time::Duration::from_secs_f64(secs)),
        None => {
            tracing::warn!(
                "plugins.slow_callback_warning in config.yaml must be a duration such as 500ms or 2s, or off; using {} ms",
                crate::fatal::DEFAULT_SLOW.as_millis()
            );
            Some(crate::fatal::DEFAULT_SLOW)
        }
    }
}

/// `plugins.isolation.<name>`, else the manifest's `isolation`, else
/// `plugins.isolation_default`, else in-process.
fn isolation_of(
    plugins: &PluginsSection,
    name: &str,
    manifest: Option<Isolation>,
) -> Result<Isolation, String> {
    if let Some(t) = plugins
        .isolation
        .get()
        .and_then(|i| i.get(name))
        .and_then(yaml_serde::Value::as_str)
    {
        return Isolation::parse(t)
            .map_err(|e| format!("plugins.isolation.{name} in config.yaml: {e}"));
    }
    if let Some(isolation) = manifest {
        return Ok(isolation);
    }
    match plugins.isolation_default.get() {
        Some(t) => Isolation::parse(t)
            .map_err(|e| format!("plugins.isolation_default in config.yaml: {e}")),
        None => Ok(Isolation::InProcess),
    }
}

/// Starts an isolated plugin's worker and puts a proxy per callback in the registry.
fn load_isolated(
    manifest: &Manifest,
    dir: &Path,
    entry: &mut PluginReport,
    report: &mut LoadReport,
    registry: &mut Registry,
    library: &Path,
) {
    let started = match isolation::Isolated::start(manifest, dir) {
        Ok(started) => started,
        Err(why) => {
            tracing::warn!("Failed to load plugin '{}': {why}", manifest.name);
            entry.error = Some(why);
            return;
        }
    };
    entry.worker_pid = Some(started.pid);
    entry.worker = Some(started.plugin.clone());
    entry.abi_version = Some(HOST_ABI_VERSION.to_string());
    for (index, (hook, callback_name)) in started.callbacks.iter().enumerate() {
        let label = format!("{}::{callback_name}", manifest.name);
        let proxy = isolation::Proxy {
            plugin: started.plugin.clone(),
            index,
            label: label.clone(),
        };
        if offers::is_offer(hook) {
            // The proxy runs it in the worker, with the worker's timeout and recovery.
            let callback = hermes_hooks_abi::core::HookCallback_TO::from_value(
                proxy,
                abi_stable::sabi_trait::TD_Opaque,
            );
            add_offer(
                entry,
                registry,
                &manifest.name,
                hook,
                callback_name,
                callback,
                None,
            );
            continue;
        }
        if hook.contains(':') {
            report.gateway_handlers.push(GatewayHandler {
                plugin: manifest.name.clone(),
                event: hook.clone(),
                callback_name: callback_name.clone(),
                library: library.to_path_buf(),
                callback: hermes_hooks_abi::core::HookCallback_TO::from_value(
                    proxy,
                    abi_stable::sabi_trait::TD_Opaque,
                ),
            });
            continue;
        }
        entry.hooks.push(hook.clone());
        registry.add_external(
            hook,
            crate::registry::Source::Plugin(manifest.name.as_str().into()),
            label,
            std::sync::Arc::new(proxy),
        );
    }
    if let Some(error) = started.error {
        let error = register_error(library, &error);
        tracing::warn!("Failed to load plugin '{}': {error}", manifest.name);
        entry.error = Some(error);
    }
}

fn add_registration(
    report: &mut LoadReport,
    entry: &mut PluginReport,
    registration: Registration,
    registry: &mut Registry,
    manifest: &Manifest,
    library: &Path,
) {
    let plugin = manifest.name.as_str();
    for (hook, callback_name, callback) in registration.hooks {
        if offers::is_offer(&hook) {
            let timeout = manifest
                .timeout
                .filter(|t| t.is_finite() && *t > 0.0)
                .map(std::time::Duration::from_secs_f64);
            add_offer(
                entry,
                registry,
                plugin,
                &hook,
                &callback_name,
                callback,
                timeout,
            );
            continue;
        }
        if hook.contains(':') {
            report.gateway_handlers.push(GatewayHandler {
                plugin: plugin.to_string(),
                event: hook,
                callback_name,
                library: library.to_path_buf(),
                callback,
            });
            continue;
        }
        if hermes_hooks_abi::hooks::spec(&hook).is_none() {
            warn_unknown_hook(plugin, &hook);
            entry.unknown_hooks.push(hook.clone());
        }
        entry.hooks.push(hook.clone());
        registry.add_native(&hook, plugin, &callback_name, callback);
    }
    if let Some(error) = registration.error {
        let error = register_error(library, &error);
        tracing::warn!("Failed to load plugin '{plugin}': {error}");
        entry.error = Some(error);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_merge_over_the_manifest_config_key_by_key() {
        let mut config = serde_json::json!({"a": 1, "nested": {"x": 1, "y": 2}, "list": [1, 2]});
        let settings = serde_json::json!({"b": 2, "nested": {"y": 3}, "list": [9]});
        merge_settings(&mut config, &settings);
        assert_eq!(
            config,
            serde_json::json!({"a": 1, "nested": {"x": 1, "y": 3}, "list": [9], "b": 2})
        );
        let mut none = serde_json::Value::Null;
        merge_settings(&mut none, &serde_json::json!({"k": true}));
        assert_eq!(none, serde_json::json!({"k": true}));
    }

    #[test]
    fn a_debug_plugin_in_a_release_host_is_one_line_with_the_fix() {
        let warning =
            debug_build_warning(Path::new("/h/plugins/x/libx.so"), "x", "debug", true).unwrap();
        assert_eq!(
            warning,
            "/h/plugins/x/libx.so: plugin 'x' is a debug build loaded into a release host; it works, but its hooks run unoptimised: rebuild it with `cargo build --release` (or reinstall it with `hermes plugins install <crate dir>`)"
        );
        assert_eq!(warning.lines().count(), 1);
    }

    #[test]
    fn a_debug_plugin_is_no_matter_in_a_debug_host_nor_a_release_plugin_anywhere() {
        let lib = Path::new("libx.so");
        assert_eq!(debug_build_warning(lib, "x", "debug", false), None);
        assert_eq!(debug_build_warning(lib, "x", "release", true), None);
        assert_eq!(debug_build_warning(lib, "x", "release", false), None);
    }

    #[test]
    fn register_errors_name_the_library_and_a_panic_says_how_to_find_it() {
        let lib = Path::new("/h/plugins/x/libx.so");
        assert_eq!(
            register_error(lib, "register() panicked: boom"),
            "/h/plugins/x/libx.so: register() panicked: boom; run with HERMES_LOG=debug to see where"
        );
        assert_eq!(
            register_error(lib, "needs config.log"),
            "/h/plugins/x/libx.so: register() failed: needs config.log"
        );
    }
}
