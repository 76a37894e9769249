//! `hermes plugins list | enable | disable | install | fire`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use abi_stable::sabi_trait::TD_Opaque;
use anyhow::{Context, bail};
use hermes_hooks_abi::core::HostCalls_TO;
use hermes_host::gateway::{GatewayServices, HostCallsOf};
use hermes_host::payload::OwnedPayload;
use hermes_host::plugins::{HOST_ABI_VERSION, Manifest, PluginReport};
use hermes_host::process;
use hermes_host::registry::FiringRecord;
use serde_json::json;

use crate::app::agent::trace::describe;

use crate::cli::ExitStatus;
use crate::cli::args::PluginsCommand;
use crate::cli::inputs::payload_text;
use crate::cli::load::load_plugins;
use crate::cli::settings::Settings;
use crate::cli::template;

pub fn run(command: PluginsCommand, settings: &Settings) -> anyhow::Result<ExitStatus> {
    match command {
        PluginsCommand::List { json } => list(settings, json),
        PluginsCommand::Enable { name, force, json } => {
            if !force {
                refuse_unloadable(settings, &name)?;
            }
            set_enabled(settings, &name, true, json)
        }
        PluginsCommand::Disable { name, json } => set_enabled(settings, &name, false, json),
        PluginsCommand::Uninstall { name, json } => uninstall(settings, &name, json),
        PluginsCommand::New {
            name,
            hooks,
            gateway,
            python,
            path,
            force,
            author,
            description,
        } => {
            let (name, hooks) = template::Answers::check(&name, hooks.as_deref())?;
            let answers = template::Answers {
                name,
                hooks,
                gateway,
                author,
                description,
                checkout: if python {
                    None
                } else {
                    template::build_checkout()
                },
            };
            if python {
                return new_python(&answers, path.as_deref(), force);
            }
            new(&answers, path.as_deref(), force)
        }
        PluginsCommand::Install {
            crate_dir,
            debug,
            force,
            json,
            plugin,
            yes,
        } => {
            if let Some(found) =
                super::claude_install::claude_plugin_dir(&crate_dir, plugin.as_deref())?
            {
                return super::claude_install::install(settings, &found, &crate_dir, yes, json);
            }
            install(settings, &crate_dir, debug, force, json)
        }
        PluginsCommand::Fire {
            hook,
            payload,
            payload_file,
            json,
        } => {
            let text = payload_text(payload, payload_file)?;
            fire(settings, &hook, &text, json)
        }
    }
}

fn list(settings: &Settings, as_json: bool) -> anyhow::Result<ExitStatus> {
    let hooks = crate::cli::load::list_plugins(settings)?;
    let report = hooks.report();
    if as_json {
        let plugins: Vec<_> = report.plugins.iter().map(plugin_json).collect();
        let out = json!({
            "home": settings.home.root(),
            "host_abi_version": HOST_ABI_VERSION,
            "safe_mode": settings.discover.safe_mode,
            "plugins": plugins,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitStatus::Success);
    }
    let dir = settings.home.plugins_dir();
    if settings.discover.safe_mode {
        println!("Safe mode: plugin discovery is off (--safe-mode or HERMES_SAFE_MODE).");
        return Ok(ExitStatus::Success);
    }
    if report.plugins.is_empty() {
        println!("No plugins found in {}.", dir.display());
        println!("Install one with `hermes plugins install <crate dir>`.");
        return Ok(ExitStatus::Success);
    }
    println!(
        "Plugins in {} (host interface {HOST_ABI_VERSION}):",
        dir.display()
    );
    let uses_bridge = hooks
        .config()
        .plugins
        .enabled_names()
        .is_some_and(|names| names.iter().any(|n| n == hermes_host::plugins::BRIDGE_DIST));
    println!();
    for p in &report.plugins {
        let state = match &p.error {
            None => "enabled".to_string(),
            Some(why) => format!("not loaded: {why}"),
        };
        let version = if p.version.is_empty() {
            String::new()
        } else {
            format!(" {}", p.version)
        };
        println!("  {}{version}  {state}", p.key);
        if p.linked_static {
            println!("      static: linked into this binary");
        }
        if let Some(origin) = &p.origin {
            println!("      from: {origin}");
        }
        for warning in &p.warnings {
            println!("      warning: {warning}");
        }
        if p.kind == hermes_host::plugins::PluginKind::Python {
            let interpreter = p
                .interpreter
                .as_ref()
                .map_or_else(|| "python3".to_string(), |i| i.display().to_string());
            match &p.worker {
                Some(worker) => println!(
                    "      kind: python ({interpreter}, {})",
                    worker_status(worker.as_ref())
                ),
                None => println!("      kind: python ({interpreter})"),
            }
        } else if p.kind == hermes_host::plugins::PluginKind::Claude {
            let data = hermes_host::shell::claude_plugin::data_dir(&settings.home, &p.name);
            println!(
                "      kind: claude code plugin (its hooks run as `format: claude` shell hooks; data: {})",
                data.display()
            );
            if let Ok(plugin) = hermes_host::shell::claude_plugin::read(&p.dir) {
                for line in &plugin.dropped {
                    println!("      not run here: {line}");
                }
            }
        } else if p.isolation == hermes_host::plugins::Isolation::Process {
            match &p.worker {
                Some(worker) => println!(
                    "      isolation: process ({})",
                    worker_status(worker.as_ref())
                ),
                None => println!("      isolation: process"),
            }
        }
        if p.kind == hermes_host::plugins::PluginKind::Native && !p.linked_static {
            // A missing shim matters only to someone who runs these plugins in Hermes Agent.
            let state = hermes_host::plugins::hermes_agent::shim_state(&p.dir);
            if state != hermes_host::plugins::hermes_agent::ShimState::Missing || uses_bridge {
                println!(
                    "      {}",
                    hermes_host::plugins::hermes_agent::describe(state)
                );
            }
        }
        if let Some(lib) = &p.library {
            match (&p.abi_version, &p.build_profile) {
                (Some(abi), Some(profile)) => {
                    println!(
                        "      library: {} (interface {abi}, {profile})",
                        lib.display()
                    )
                }
                _ => println!("      library: {}", lib.display()),
            }
        }
        if p.loaded() || !p.hooks.is_empty() {
            let hooks = if p.hooks.is_empty() {
                "(none)".to_string()
            } else {
                p.hooks.join(", ")
            };
            println!("      hooks: {hooks}");
        }
        if !p.unknown_hooks.is_empty() {
            println!("      unknown to this host: {}", p.unknown_hooks.join(", "));
        }
        if !p.middleware.is_empty() {
            println!("      middleware: {}", p.middleware.join(", "));
        }
        if !p.tools.is_empty() {
            println!("      tools: {}", p.tools.join(", "));
        }
        if !p.commands.is_empty() {
            let commands: Vec<String> = p.commands.iter().map(|c| format!("/{c}")).collect();
            println!("      commands: {}", commands.join(", "));
        }
        if p.settings.is_some() {
            println!(
                "      settings: plugins.settings.{} in {}",
                p.name,
                settings.home.config_path().display()
            );
        }
    }
    Ok(ExitStatus::Success)
}

fn plugin_json(p: &PluginReport) -> serde_json::Value {
    json!({
        "key": p.key,
        "name": p.name,
        "version": p.version,
        "dir": p.dir,
        "library": p.library,
        "enabled": p.loaded(),
        "error": p.error,
        "warnings": p.warnings,
        "hooks": p.hooks,
        "unknown_hooks": p.unknown_hooks,
        "middleware": p.middleware,
        "tools": p.tools,
        "commands": p.commands,
        "abi_version": p.abi_version,
        "build_profile": p.build_profile,
        "config": p.config,
        "settings": p.settings,
        "static": p.linked_static,
        "kind": p.kind.as_str(),
        "interpreter": p.interpreter,
        "origin": p.origin,
        "isolation": p.isolation.as_str(),
        "hermes_agent": (p.kind == hermes_host::plugins::PluginKind::Native && !p.linked_static)
            .then(|| match hermes_host::plugins::hermes_agent::shim_state(&p.dir) {
                hermes_host::plugins::hermes_agent::ShimState::Present => "shim",
                hermes_host::plugins::hermes_agent::ShimState::Missing => "missing",
                hermes_host::plugins::hermes_agent::ShimState::Foreign => "foreign",
            }),
        "worker_pid": p.worker.as_ref().and_then(|w| w.status().0),
        "worker_restarts": p.worker.as_ref().map(|w| w.status().1),
        "worker_last_crash": p.worker.as_ref().and_then(|w| w.status().2),
    })
}

/// `worker pid 123, 2 restarts, last crash: SIGSEGV (signal 11)`.
fn worker_status(worker: &dyn hermes_host::plugins::SupervisedWorker) -> String {
    let (pid, restarts, last_crash) = worker.status();
    let mut text = match pid {
        Some(pid) => format!("worker pid {pid}"),
        None => "no worker running".to_string(),
    };
    text.push_str(&format!(", {restarts} restart(s)"));
    if let Some(cause) = last_crash {
        text.push_str(&format!(", last crash: {cause}"));
    }
    text
}

/// `hermes plugins new --python`: writes a Python plugin into `<path>/<name>`.
fn new_python(
    answers: &template::Answers,
    path: Option<&Path>,
    force: bool,
) -> anyhow::Result<ExitStatus> {
    let files = crate::cli::template_python::render(answers);
    let dir = path.unwrap_or(Path::new(".")).join(&answers.name);
    template::write(&dir, &files, force)?;
    println!(
        "Created Python plugin '{}' in {} (hooks: {}).",
        answers.name,
        dir.display(),
        if answers.hooks.is_empty() {
            "none yet".to_string()
        } else {
            answers.hooks.join(", ")
        }
    );
    println!();
    println!("Next:");
    println!("  cd {}", dir.display());
    println!("  python3 -m unittest");
    println!("  hermes plugins install .");
    println!(
        "  hermes plugins fire pre_tool_call --payload '{{\"tool_name\": \"terminal\", \"args\": {{\"command\": \"rm -rf /\"}}}}'"
    );
    Ok(ExitStatus::Success)
}

/// `hermes plugins new`: renders the embedded template into `<path>/<name>`.
fn new(
    answers: &template::Answers,
    path: Option<&Path>,
    force: bool,
) -> anyhow::Result<ExitStatus> {
    let files = template::render(answers)?;
    let dir = path.unwrap_or(Path::new(".")).join(&answers.name);
    template::write(&dir, &files, force)?;
    let hooks = if answers.hooks.is_empty() {
        "none yet".to_string()
    } else {
        answers.hooks.join(", ")
    };
    let gateway = if answers.gateway {
        " and agent:* (gateway)"
    } else {
        ""
    };
    println!(
        "Created plugin crate '{}' in {} (hooks: {hooks}{gateway}).",
        answers.name,
        dir.display()
    );
    match &answers.checkout {
        Some(checkout) => println!(
            "It builds against the hermes-hooks checkout at {}.",
            checkout.display()
        ),
        None => println!(
            "It builds against the crates.io releases of hermes-hooks-abi and hermes-host."
        ),
    }
    println!();
    println!("Next:");
    println!("  cd {}", dir.display());
    println!("  cargo build --release");
    println!("  hermes plugins install .");
    println!(
        "  hermes plugins fire pre_tool_call --payload '{{\"tool_name\": \"terminal\", \"args\": {{\"command\": \"rm -rf /\"}}}}'"
    );
    Ok(ExitStatus::Success)
}

/// Refuses to enable a plugin that is not installed or would not load, saying why: the
/// plugin is loaded on its own, with the home's settings, as the next run would load it.
fn refuse_unloadable(settings: &Settings, name: &str) -> anyhow::Result<()> {
    let home = &settings.home;
    let (config, problem) = home.load_config();
    if let Some(problem) = problem {
        bail!("{problem}; not changing it");
    }
    let discover = hermes_host::plugins::DiscoverOptions {
        policy: hermes_host::trust::Policy::from_config(&config),
        ..settings.discover.clone()
    };
    let mut installed = hermes_host::plugins::discover(home, &Default::default(), &discover);
    if !installed.iter().any(|c| c.key == name || c.name() == name) {
        // Not a directory: perhaps a pip package of the plugins' interpreter.
        let interpreter = hermes_host::plugins::python::interpreter(&config.plugins);
        let with_pip = hermes_host::plugins::DiscoverOptions {
            list_entry_points: true,
            ..discover.clone()
        };
        installed = hermes_host::plugins::discover_with_pip(
            home,
            &Default::default(),
            &with_pip,
            &interpreter,
        );
    }
    let Some(found) = installed.iter().find(|c| c.key == name || c.name() == name) else {
        bail!(
            "no plugin '{name}' is installed in {}, nor as a pip package of the plugins' interpreter (entry-point group {}); install it with `hermes plugins install <dir>` or `pip install` first, or pass --force to enable it ahead of installing",
            home.plugins_dir().display(),
            hermes_host::plugins::ENTRY_POINT_GROUP
        );
    };
    let mut probe = config.clone();
    for other in probe.plugins_enabled().unwrap_or_default() {
        if other != found.key && other != found.name() {
            probe.disable_plugin(&other);
        }
    }
    probe.enable_plugin(name);
    let mut registry = hermes_host::registry::Registry::new();
    let report = hermes_host::plugins::load_all(home, &probe.plugins, &discover, &mut registry);
    let why = report
        .plugins
        .iter()
        .find(|p| p.key == found.key)
        .and_then(|p| p.error.clone());
    if let Some(why) = why {
        bail!(
            "plugin '{name}' cannot load, so it is not enabled: {why}; fix that, or pass --force to enable it anyway"
        );
    }
    Ok(())
}

/// `plugins uninstall NAME`: the plugin's directory under the home's `plugins/` removed
/// (moved aside first, so a running host never sees half of it), the plugin disabled, a
/// Claude Code plugin's hook approvals revoked. Its data directory stays, for a reinstall.
fn uninstall(settings: &Settings, name: &str, as_json: bool) -> anyhow::Result<ExitStatus> {
    let home = &settings.home;
    let (_, problem) = home.load_config();
    if let Some(problem) = problem {
        bail!("{problem}; not changing it");
    }
    let plugins = home.plugins_dir();
    let found = hermes_host::plugins::discover(home, &Default::default(), &Default::default())
        .into_iter()
        .find(|c| (c.key == name || c.name() == name) && c.dir.starts_with(&plugins));
    let Some(found) = found else {
        bail!(
            "no plugin '{name}' is installed in {}; `hermes plugins list` shows those there",
            plugins.display()
        );
    };
    let mut revoked = 0;
    if let Ok(plugin) = hermes_host::shell::claude_plugin::read(&found.dir) {
        let data = hermes_host::shell::claude_plugin::data_dir(home, &plugin.name);
        let allowlist = hermes_host::shell::consent::Allowlist::new(home);
        for spec in plugin.specs(&found.dir, &data) {
            revoked += allowlist.revoke(&spec.command).map_err(|e| {
                anyhow::anyhow!(
                    "cannot revoke the approval of {} in {}: {}; nothing was removed",
                    spec.command,
                    e.path.display(),
                    e.message
                )
            })?;
        }
    }
    hermes_host::config_edit::set_plugin(home, found.name(), false)
        .map_err(|e| anyhow::anyhow!("{e}; nothing was removed"))?;
    if found.dir.is_symlink() {
        std::fs::remove_file(&found.dir)
            .with_context(|| format!("cannot remove the link {}", found.dir.display()))?;
    } else {
        let aside = plugins.join(format!(
            ".{}.removed-{}",
            found.key.replace('/', "_"),
            std::process::id()
        ));
        std::fs::rename(&found.dir, &aside)
            .with_context(|| format!("cannot move {} aside", found.dir.display()))?;
        std::fs::remove_dir_all(&aside)
            .with_context(|| format!("cannot remove {}", aside.display()))?;
    }
    if as_json {
        println!(
            "{}",
            json!({ "plugin": found.name(), "removed": found.dir, "approvals_revoked": revoked })
        );
    } else {
        println!(
            "Removed plugin '{}' ({}) and disabled it{}.",
            found.name(),
            found.dir.display(),
            if revoked > 0 {
                format!("; {revoked} hook approval(s) revoked")
            } else {
                String::new()
            }
        );
    }
    Ok(ExitStatus::Success)
}

fn set_enabled(
    settings: &Settings,
    name: &str,
    enable: bool,
    as_json: bool,
) -> anyhow::Result<ExitStatus> {
    let home = &settings.home;
    let (_, problem) = home.load_config();
    if let Some(problem) = problem {
        bail!("{problem}; not changing it");
    }
    let known = hermes_host::plugins::discover(home, &Default::default(), &Default::default())
        .iter()
        .any(|c| c.key == name || c.name() == name);
    // Only the two lists change, under the file's lock; every other byte stays.
    let changed = hermes_host::config_edit::set_plugin(home, name, enable)
        .map_err(|e| anyhow::anyhow!("{e}; nothing was changed"))?;
    let verb = if enable { "enabled" } else { "disabled" };
    if as_json {
        println!(
            "{}",
            json!({ "plugin": name, "state": verb, "changed": changed, "installed": known, "config": home.config_path() })
        );
        return Ok(ExitStatus::Success);
    }
    if changed {
        println!(
            "Plugin '{name}' {verb} in {}.",
            home.config_path().display()
        );
    } else {
        println!(
            "Plugin '{name}' is already {verb} in {}.",
            home.config_path().display()
        );
    }
    if !known {
        println!(
            "Note: no plugin '{name}' is installed in {} yet; install it with `hermes plugins install <crate dir>`.",
            home.plugins_dir().display()
        );
    }
    Ok(ExitStatus::Success)
}

fn install(
    settings: &Settings,
    crate_dir: &Path,
    debug: bool,
    force: bool,
    as_json: bool,
) -> anyhow::Result<ExitStatus> {
    let home = &settings.home;
    if !crate_dir.join("Cargo.toml").is_file() && crate_dir.join("__init__.py").is_file() {
        return install_python(settings, crate_dir, as_json);
    }
    if !crate_dir.join("Cargo.toml").is_file() {
        bail!(
            "{} has no Cargo.toml, no __init__.py and no .claude-plugin/; give the directory of a plugin crate (Rust), of a Python plugin (plugin.yaml and __init__.py), or of a Claude Code plugin (.claude-plugin/plugin.json)",
            crate_dir.display()
        );
    }
    let has_manifest = ["plugin.yaml", "plugin.yml"]
        .iter()
        .any(|f| crate_dir.join(f).is_file());
    if !has_manifest {
        bail!(
            "{}: no plugin.yaml; the crate directory needs a plugin.yaml with name, version and library (plugin-template/ has one)",
            crate_dir.display()
        );
    }
    let manifest = Manifest::read(crate_dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Err(why) = hermes_host::trust::plugin_name(&manifest.name) {
        bail!("{}: {why}", crate_dir.join("plugin.yaml").display());
    }
    let dest = home.plugins_dir().join(&manifest.name);
    // Everything below writes inside plugins/<name>/ and nowhere else: not through a
    // symlinked plugin directory, and (see `replace_file`) not through a symlinked file.
    if dest.is_symlink() {
        bail!(
            "{} is a symbolic link; `plugins install` writes only inside plugins/<name>/ itself. Remove the link (or install by hand into where it points) and run install again",
            dest.display()
        );
    }
    let library = build_cdylib(crate_dir, debug)?;
    let file_name = library
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if file_name != manifest.library {
        tracing::warn!(
            "{}: `library: {}` does not match the built file {file_name}; installing with `library: {file_name}`",
            crate_dir.join("plugin.yaml").display(),
            manifest.library
        );
    }
    std::fs::create_dir_all(&dest).with_context(|| format!("cannot create {}", dest.display()))?;
    let manifest_src = std::fs::read_to_string(crate_dir.join("plugin.yaml"))
        .or_else(|_| std::fs::read_to_string(crate_dir.join("plugin.yml")))
        .context("cannot read plugin.yaml")?;
    let manifest_text = rewrite_library(&manifest_src, &file_name)?;
    let installed_yaml = dest.join("plugin.yaml");
    let kept = match InstallRecord::edited(&dest, &installed_yaml) {
        Some(edited) if !force => {
            let installed = Manifest::read(&dest).map(|m| m.library).unwrap_or_default();
            if installed != file_name {
                bail!(
                    "{}: it was edited since the last install and names `library: {installed}`, but the new build is {file_name}; pass --force to replace it with the crate's plugin.yaml, or set `library: {file_name}` in it",
                    edited.display()
                );
            }
            true
        }
        _ => false,
    };
    // Copy then rename: a running host may have the old library mapped, and overwriting a
    // mapped file in place would corrupt it.
    let tmp = dest.join(format!(".{file_name}.tmp"));
    remove_stale(&tmp)?;
    std::fs::copy(&library, &tmp)
        .with_context(|| format!("cannot copy {} to {}", library.display(), tmp.display()))?;
    std::fs::rename(&tmp, dest.join(&file_name))
        .with_context(|| format!("cannot install into {}", dest.display()))?;
    if !kept {
        replace_file(&installed_yaml, manifest_text.as_bytes())?;
        InstallRecord::write(&dest, &manifest_text)?;
    }
    // Hermes Agent reads the same directory: without this file it fails on it.
    let shim = hermes_host::plugins::hermes_agent::write_shim(&dest)
        .with_context(|| format!("cannot write the Hermes Agent shim into {}", dest.display()))?;
    if !shim {
        tracing::warn!(
            "{}: kept the plugin's own __init__.py; Hermes Agent runs that, not this library",
            dest.join(hermes_host::plugins::hermes_agent::FILE)
                .display()
        );
    }
    enable_installed(home, &manifest.name, &dest)?;
    if as_json {
        println!(
            "{}",
            json!({ "plugin": manifest.name, "dir": dest, "library": dest.join(&file_name), "enabled": true, "kept_plugin_yaml": kept, "hermes_agent_shim": shim })
        );
    } else {
        println!(
            "Installed '{}' {} into {} and enabled it.",
            manifest.name,
            manifest.version,
            dest.display()
        );
        if kept {
            println!(
                "Kept your edited {} (it changed since the last install); pass --force to replace it with the crate's.",
                installed_yaml.display()
            );
        }
    }
    Ok(ExitStatus::Success)
}

/// Enables plugin `name`, just installed into `dest`, in `config.yaml` (its lists only).
fn enable_installed(home: &hermes_host::home::Home, name: &str, dest: &Path) -> anyhow::Result<()> {
    let could_not = |why: String| {
        anyhow::anyhow!(
            "installed into {}, but could not enable it: {why}",
            dest.display()
        )
    };
    if let (_, Some(problem)) = home.load_config() {
        return Err(could_not(problem.to_string()));
    }
    hermes_host::config_edit::set_plugin(home, name, true)
        .map(drop)
        .map_err(|e| could_not(e.to_string()))
}

/// `plugins install DIR` for a Python plugin: a copy of the directory (no build), put in
/// place whole, then enabled.
fn install_python(settings: &Settings, dir: &Path, as_json: bool) -> anyhow::Result<ExitStatus> {
    let home = &settings.home;
    let manifest = Manifest::read(dir).map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Err(why) = hermes_host::trust::plugin_name(&manifest.name) {
        bail!("{}: {why}", dir.join("plugin.yaml").display());
    }
    let dest = super::install_files::copy_into_place(home, dir, &manifest.name)?;
    enable_installed(home, &manifest.name, &dest)?;
    if as_json {
        println!(
            "{}",
            json!({ "plugin": manifest.name, "dir": dest, "kind": "python", "enabled": true })
        );
    } else {
        println!(
            "Installed Python plugin '{}' {} into {} and enabled it.",
            manifest.name,
            manifest.version,
            dest.display()
        );
    }
    Ok(ExitStatus::Success)
}

/// Removes a leftover temporary file (or a symlink planted in its place, which writing
/// would follow out of the plugin directory).
fn remove_stale(tmp: &Path) -> anyhow::Result<()> {
    match std::fs::remove_file(tmp) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", tmp.display())),
    }
}

/// Writes `path` through a temporary file beside it and a rename, so a symlink at `path`
/// is replaced, never written through.
fn replace_file(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    remove_stale(&tmp)?;
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// What the last `plugins install` wrote as `plugin.yaml`, kept as its sha256 beside it, so
/// that a reinstall can tell a file the user edited from one it wrote itself.
struct InstallRecord;

impl InstallRecord {
    const FILE: &'static str = ".installed-plugin-yaml.sha256";

    fn sha256(bytes: &[u8]) -> String {
        use sha2::{Digest, Sha256};
        Sha256::digest(bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// `Some(path)` when the installed `plugin.yaml` differs from what the last install
    /// wrote (or there is no record of it, from an older hermes); `None` when there is no
    /// file or it is as written.
    fn edited(dest: &Path, installed: &Path) -> Option<PathBuf> {
        let current = std::fs::read(installed).ok()?;
        let recorded = std::fs::read_to_string(dest.join(Self::FILE)).unwrap_or_default();
        (recorded.trim() != Self::sha256(&current)).then(|| installed.to_path_buf())
    }

    fn write(dest: &Path, text: &str) -> anyhow::Result<()> {
        replace_file(
            &dest.join(Self::FILE),
            (Self::sha256(text.as_bytes()) + "\n").as_bytes(),
        )
    }
}

/// Keeps the manifest as written, with `library:` pointing at the installed file.
fn rewrite_library(manifest: &str, file_name: &str) -> anyhow::Result<String> {
    let mut value: yaml_serde::Value =
        yaml_serde::from_str(manifest).context("plugin.yaml is not valid YAML")?;
    if let yaml_serde::Value::Mapping(map) = &mut value {
        map.insert("library".into(), file_name.into());
    }
    Ok(yaml_serde::to_string(&value)?)
}

/// How much of cargo's JSON output `install` reads.
const CARGO_OUTPUT_CAP: usize = 256 << 20;

/// Runs cargo and returns the cdylib it produced.
fn build_cdylib(crate_dir: &Path, debug: bool) -> anyhow::Result<PathBuf> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.arg("build")
        .arg("--manifest-path")
        .arg(crate_dir.join("Cargo.toml"));
    cmd.arg("--message-format=json-render-diagnostics");
    if !debug {
        cmd.arg("--release");
    }
    cmd.stderr(std::process::Stdio::inherit());
    // Cargo shares hermes's process group, so Ctrl-C stops the build with hermes; its JSON
    // messages are captured (a big workspace prints a few MiB of them), its errors go to the
    // terminal as they happen.
    let how = process::Run::new()
        .capture_stdout(CARGO_OUTPUT_CAP)
        .shared_group();
    let output = match process::run(&mut cmd, &how) {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "cargo was not found on PATH; install Rust (https://rustup.rs) or set CARGO to its path"
            )
        }
        Err(e) => bail!("cannot run cargo: {e}"),
    };
    if !output.status.is_some_and(|s| s.success()) {
        bail!(
            "cargo build failed for {} (its errors are above); fix them and run install again",
            crate_dir.display()
        );
    }
    if output.stdout.dropped > 0 {
        bail!(
            "cargo printed more than {} MiB of build messages for {}; build it with cargo and install the library file",
            CARGO_OUTPUT_CAP >> 20,
            crate_dir.display()
        );
    }
    let stdout = output.stdout.lossy();
    let cdylib = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact")
        .filter(|msg| {
            msg["target"]["crate_types"]
                .as_array()
                .is_some_and(|t| t.iter().any(|k| k == "cdylib"))
        })
        .filter(|msg| {
            let manifest = msg["manifest_path"].as_str().map(PathBuf::from);
            let wanted = crate_dir.join("Cargo.toml").canonicalize().ok();
            manifest.and_then(|m| m.canonicalize().ok()) == wanted
        })
        .flat_map(|msg| msg["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .find(|f| {
            f.file_name().is_some_and(|n| {
                hermes_host::plugins::library_file::is_native(&n.to_string_lossy())
            })
        });
    cdylib.ok_or_else(|| {
        anyhow::anyhow!(
            "{} builds no cdylib; add `[lib] crate-type = [\"cdylib\", \"rlib\"]` to its Cargo.toml",
            crate_dir.display()
        )
    })
}

fn fire(
    settings: &Settings,
    hook: &str,
    payload_text: &str,
    as_json: bool,
) -> anyhow::Result<ExitStatus> {
    let payload: serde_json::Value = serde_json::from_str(payload_text)
        .context("the payload is not valid JSON; give a JSON object")?;
    if !payload.is_object() {
        bail!("the payload must be a JSON object of the hook's fields");
    }
    if hermes_hooks_abi::hooks::spec(hook).is_none() {
        tracing::warn!(
            "'{hook}' is not a hook of interface {HOST_ABI_VERSION} (valid: {}); firing it anyway",
            hermes_hooks_abi::hooks::names_sorted().join(", ")
        );
    }
    let sink = Arc::new(Mutex::new(Vec::<FiringRecord>::new()));
    let registry = load_plugins(settings, Some(sink.clone()))?;
    let owned = OwnedPayload::from_json(hook, &payload);
    // The capabilities the gateway offers pre_gateway_dispatch, checked as it checks them
    // but recorded instead of carried out: there is no gateway here to deliver to.
    let capabilities = DryRunCapabilities::default();
    let fields = owned.fields();
    let offered = HostCallsOf(&capabilities);
    let host = HostCalls_TO::from_const(&offered, TD_Opaque);
    let outcome = registry.fire_with(hook, &fields, host);
    let calls = capabilities.calls();
    let records = sink.lock().map(|r| r.clone()).unwrap_or_default();
    let summary = describe(&outcome);
    if as_json {
        let calls_json: Vec<_> = records
            .iter()
            .map(|r| json!({ "system": r.system, "callback": r.callback, "decision": r.decision, "duration_us": r.duration.as_micros() as u64, "error": r.error }))
            .collect();
        let capability_calls: Vec<_> = calls
            .iter()
            .map(|(capability, args)| json!({ "capability": capability, "args": args, "carried_out": false }))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "hook": hook, "callbacks": calls_json, "capability_calls": capability_calls, "outcome": summary })
            )?
        );
        return Ok(ExitStatus::Success);
    }
    if records.is_empty() {
        println!("No plugin callbacks registered for '{hook}'.");
        return Ok(ExitStatus::Success);
    }
    println!("Fired '{hook}' at {} callback(s):", records.len());
    for r in &records {
        let decision = match &r.error {
            Some(e) => format!("raised: {e}"),
            None => r.decision.clone(),
        };
        println!(
            "  {}  {decision}  ({} µs)",
            r.callback,
            r.duration.as_micros()
        );
    }
    if !calls.is_empty() {
        println!(
            "Capability calls (checked and recorded, not carried out: `plugins fire` runs no gateway to deliver to):"
        );
        for (capability, args) in &calls {
            println!("  {capability} {args}");
        }
    }
    println!("Outcome: {summary}");
    for p in &registry.report().plugins {
        if let Some(worker) = &p.worker {
            let kind = match p.kind {
                hermes_host::plugins::PluginKind::Python => "Python",
                hermes_host::plugins::PluginKind::Claude => "Claude Code",
                hermes_host::plugins::PluginKind::Native => "Isolated",
            };
            println!(
                "{kind} plugin '{}': {}",
                p.name,
                worker_status(worker.as_ref())
            );
        }
    }
    Ok(ExitStatus::Success)
}

/// `gateway.send` and `session.append` for `plugins fire`: the arguments are checked as the
/// gateway checks them, then the call is recorded and answered as a dry run.
#[derive(Default)]
struct DryRunCapabilities(Mutex<Vec<(String, serde_json::Value)>>);

impl DryRunCapabilities {
    fn calls(&self) -> Vec<(String, serde_json::Value)> {
        self.0.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl GatewayServices for DryRunCapabilities {
    fn call(
        &self,
        capability: &str,
        args: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        let required: &[&str] = match capability {
            "gateway.send" => &["platform", "chat_id", "text"],
            "session.append" => &["session_key"],
            other => {
                return Err(format!(
                    "unknown capability '{other}': pre_gateway_dispatch offers gateway.send and session.append"
                ));
            }
        };
        if let Some(missing) = required.iter().find(|k| !args[**k].is_string()) {
            return Err(format!("{capability}: `{missing}` must be a string"));
        }
        if capability == "session.append" && !args["entry"].is_object() {
            return Err("session.append: `entry` must be a JSON object".into());
        }
        if let Ok(mut calls) = self.0.lock() {
            calls.push((capability.to_string(), args.clone()));
        }
        Ok(json!({ "dry_run": true }))
    }
}
