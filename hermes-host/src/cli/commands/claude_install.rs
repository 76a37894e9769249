//! `hermes plugins install DIR` for a Claude Code plugin (or one plugin of a Claude Code
//! marketplace, `--plugin NAME`): lists the hook commands it will run and what it drops,
//! asks (or takes `--yes`), copies the plugin to `plugins/<name>/`, approves and pins its
//! commands as shell hooks, makes its data directory (kept across reinstalls) and enables
//! it.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::bail;
use serde_json::json;

use crate::cli::ExitStatus;
use crate::cli::settings::Settings;
use hermes_host::shell::claude_plugin;

/// The Claude Code plugin `install DIR [--plugin NAME]` is about, if it is about one: `dir`
/// itself, or the marketplace entry `plugin` of `dir`.
///
/// # Errors
///
/// `--plugin` without a marketplace, a marketplace without `--plugin` (the message lists
/// its plugins), or a marketplace entry that cannot be found.
pub(super) fn claude_plugin_dir(
    dir: &Path,
    plugin: Option<&str>,
) -> anyhow::Result<Option<PathBuf>> {
    let marketplace = dir.join(claude_plugin::MARKETPLACE).is_file();
    match (plugin, marketplace) {
        (Some(name), true) => Ok(Some(
            claude_plugin::marketplace_entry(dir, name).map_err(anyhow::Error::msg)?,
        )),
        (Some(_), false) => bail!(
            "{}: --plugin picks a plugin of a Claude Code marketplace, and this directory has no {}",
            dir.display(),
            claude_plugin::MARKETPLACE
        ),
        (None, _) if claude_plugin::is_plugin(dir) => Ok(Some(dir.to_path_buf())),
        (None, true) => {
            // Names the plugins there, whichever of them is asked for.
            let why = claude_plugin::marketplace_entry(dir, "")
                .err()
                .unwrap_or_default();
            bail!(
                "{} is a Claude Code marketplace; say which plugin to install with --plugin NAME ({why})",
                dir.display()
            )
        }
        (None, false) => Ok(None),
    }
}

/// Installs the Claude Code plugin in `dir` (named on the command line as `given`).
pub(super) fn install(
    settings: &Settings,
    dir: &Path,
    given: &Path,
    yes: bool,
    as_json: bool,
) -> anyhow::Result<ExitStatus> {
    let home = &settings.home;
    let plugin = claude_plugin::read(dir).map_err(anyhow::Error::msg)?;
    if let Err(why) = hermes_host::trust::plugin_name(&plugin.name) {
        bail!("{}: {why}", dir.join(claude_plugin::MANIFEST).display());
    }
    let dest = home.plugins_dir().join(&plugin.name);
    let data = claude_plugin::data_dir(home, &plugin.name);
    // Made first, so that the commands shown name them as they will run.
    for dir in [home.plugins_dir(), data.clone()] {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    }
    // The commands as they will run: from the installed copy.
    let specs = plugin.specs(&dest, &data);
    let mut shown = Vec::new();
    for spec in &specs {
        let matcher = spec
            .matcher
            .as_ref()
            .map(|m| format!(" [{}]", m.as_str()))
            .unwrap_or_default();
        shown.push(format!("{}{matcher}: {}", spec.event, spec.command));
    }
    if !as_json {
        println!(
            "Claude Code plugin '{}' {}: {} hook(s) run here as `format: claude` shell hooks:",
            plugin.name,
            plugin.version,
            specs.len()
        );
        for line in &shown {
            println!("  {line}");
        }
        for line in &plugin.dropped {
            println!("  not here: {line}");
        }
    }
    if !yes && !specs.is_empty() {
        if !std::io::stdin().is_terminal() {
            bail!(
                "{} hook command(s) of '{}' need your consent: run again with --yes to accept them (they are listed above)",
                specs.len(),
                plugin.name
            );
        }
        print!("\nInstall '{}' and allow these hooks? [y/N] ", plugin.name);
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("Not installed.");
            return Ok(ExitStatus::Success);
        }
    }
    let dest = super::install_files::copy_into_place(home, dir, &plugin.name)?;
    // Where it came from, for `plugins list`: beside its data, which a reinstall keeps.
    let given = std::path::absolute(given).unwrap_or_else(|_| given.to_path_buf());
    let source = if dir == given.as_path() || std::path::absolute(dir).is_ok_and(|d| d == given) {
        given.display().to_string()
    } else {
        format!(
            "the marketplace {} (--plugin {})",
            given.display(),
            plugin.name
        )
    };
    let origin = json!({ "source": source, "version": plugin.version });
    if let Err(e) = std::fs::write(data.join("installed-from.json"), origin.to_string()) {
        tracing::warn!("cannot record where '{}' came from: {e}", plugin.name);
    }
    // Approved now, with the installed files' contents pinned: a later change to one of
    // them is caught at load as for any shell hook.
    let allowlist = hermes_host::shell::consent::Allowlist::new(home);
    for spec in &specs {
        if let Err(e) = allowlist.approve(&spec.event, &spec.command) {
            bail!(
                "installed into {}, but cannot record the approval of its hooks in {}: {}",
                dest.display(),
                e.path.display(),
                e.message
            );
        }
    }
    if let (_, Some(problem)) = home.load_config() {
        bail!(
            "installed into {}, but could not enable it: {problem}",
            dest.display()
        );
    }
    hermes_host::config_edit::set_plugin(home, &plugin.name, true).map_err(|e| {
        anyhow::anyhow!(
            "installed into {}, but could not enable it: {e}",
            dest.display()
        )
    })?;
    if as_json {
        println!(
            "{}",
            json!({
                "plugin": plugin.name,
                "dir": dest,
                "kind": "claude",
                "version": plugin.version,
                "hooks": shown,
                "dropped": plugin.dropped,
                "data": data,
                "enabled": true,
            })
        );
    } else {
        println!(
            "Installed Claude Code plugin '{}' {} into {} and enabled it; its data directory is {}.",
            plugin.name,
            plugin.version,
            dest.display(),
            data.display()
        );
    }
    Ok(ExitStatus::Success)
}
