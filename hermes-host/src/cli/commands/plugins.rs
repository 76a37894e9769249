//! `hermes plugins list | enable | disable | install | fire`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use anyhow::{Context, bail};
use hermes_host::home::Config;
use hermes_host::payload::OwnedPayload;
use hermes_host::plugins::{HOST_ABI_VERSION, LoadReport, Manifest, PluginReport, load_all};
use hermes_host::registry::{FiringRecord, Registry};
use serde_json::json;

use hermes_host::agent::trace::describe;

use crate::cli::ExitStatus;
use crate::cli::args::PluginsCommand;
use crate::cli::inputs::payload_text;
use crate::cli::settings::Settings;

pub fn run(command: PluginsCommand, settings: &Settings) -> anyhow::Result<ExitStatus> {
    match command {
        PluginsCommand::List { json } => list(settings, json),
        PluginsCommand::Enable { name, json } => set_enabled(settings, &name, true, json),
        PluginsCommand::Disable { name, json } => set_enabled(settings, &name, false, json),
        PluginsCommand::Install {
            crate_dir,
            debug,
            json,
        } => install(settings, &crate_dir, debug, json),
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

fn load(settings: &Settings, registry: &mut Registry) -> (Config, LoadReport) {
    let (config, problem) = settings.home.load_config();
    if let Some(problem) = problem {
        tracing::warn!("{problem}");
    }
    let report = load_all(&settings.home, &config, &settings.discover, registry);
    (config, report)
}

fn list(settings: &Settings, as_json: bool) -> anyhow::Result<ExitStatus> {
    let mut registry = Registry::new();
    let (_, report) = load(settings, &mut registry);
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
        "hooks": p.hooks,
        "unknown_hooks": p.unknown_hooks,
        "abi_version": p.abi_version,
        "build_profile": p.build_profile,
    })
}

fn set_enabled(
    settings: &Settings,
    name: &str,
    enable: bool,
    as_json: bool,
) -> anyhow::Result<ExitStatus> {
    let home = &settings.home;
    let (mut config, problem) = home.load_config();
    if let Some(problem) = problem {
        bail!("{problem}; not changing it");
    }
    let known = hermes_host::plugins::discover(home, &Config::default(), &Default::default())
        .iter()
        .any(|c| c.key == name || c.name() == name);
    let changed = if enable {
        config.enable_plugin(name)
    } else {
        config.disable_plugin(name)
    };
    if changed {
        home.save_config(&config)?;
    }
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
    as_json: bool,
) -> anyhow::Result<ExitStatus> {
    let home = &settings.home;
    if !crate_dir.join("Cargo.toml").is_file() {
        bail!(
            "{} has no Cargo.toml; give the directory of the plugin crate",
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
    let dest = home.plugins_dir().join(&manifest.name);
    std::fs::create_dir_all(&dest).with_context(|| format!("cannot create {}", dest.display()))?;
    // Copy then rename: a running host may have the old library mapped, and overwriting a
    // mapped file in place would corrupt it.
    let tmp = dest.join(format!(".{file_name}.tmp"));
    std::fs::copy(&library, &tmp)
        .with_context(|| format!("cannot copy {} to {}", library.display(), tmp.display()))?;
    std::fs::rename(&tmp, dest.join(&file_name))
        .with_context(|| format!("cannot install into {}", dest.display()))?;
    let manifest_src = std::fs::read_to_string(crate_dir.join("plugin.yaml"))
        .or_else(|_| std::fs::read_to_string(crate_dir.join("plugin.yml")))
        .context("cannot read plugin.yaml")?;
    let manifest_text = rewrite_library(&manifest_src, &file_name)?;
    std::fs::write(dest.join("plugin.yaml"), manifest_text).context("cannot write plugin.yaml")?;
    let (mut config, problem) = home.load_config();
    if let Some(problem) = problem {
        bail!(
            "installed into {}, but could not enable it: {problem}",
            dest.display()
        );
    }
    if config.enable_plugin(&manifest.name) {
        home.save_config(&config)?;
    }
    if as_json {
        println!(
            "{}",
            json!({ "plugin": manifest.name, "dir": dest, "library": dest.join(&file_name), "enabled": true })
        );
    } else {
        println!(
            "Installed '{}' {} into {} and enabled it.",
            manifest.name,
            manifest.version,
            dest.display()
        );
    }
    Ok(ExitStatus::Success)
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
    let output = match cmd.output() {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!(
                "cargo was not found on PATH; install Rust (https://rustup.rs) or set CARGO to its path"
            )
        }
        Err(e) => bail!("cannot run cargo: {e}"),
    };
    if !output.status.success() {
        bail!(
            "cargo build failed for {} (its errors are above); fix them and run install again",
            crate_dir.display()
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
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
            f.extension()
                .is_some_and(|e| e == "so" || e == "dylib" || e == "dll")
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
    let mut registry = Registry::new();
    let sink = Arc::new(Mutex::new(Vec::<FiringRecord>::new()));
    registry.set_trace(sink.clone());
    load(settings, &mut registry);
    let owned = OwnedPayload::from_json(hook, &payload);
    let outcome = registry.fire(hook, &owned.fields());
    let records = sink.lock().map(|r| r.clone()).unwrap_or_default();
    let summary = describe(&outcome);
    if as_json {
        let calls: Vec<_> = records
            .iter()
            .map(|r| json!({ "system": r.system, "callback": r.callback, "decision": r.decision, "duration_us": r.duration.as_micros() as u64, "error": r.error }))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &json!({ "hook": hook, "callbacks": calls, "outcome": summary })
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
    println!("Outcome: {summary}");
    Ok(ExitStatus::Success)
}
