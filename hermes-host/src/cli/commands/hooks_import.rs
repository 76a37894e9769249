//! `hermes hooks import claude [SETTINGS_JSON]`: Claude Code's hooks as `config.yaml`
//! entries with `format: claude`.
//!
//! The settings file is the argument, else `.claude/settings.json` in the working
//! directory, else `~/.claude/settings.json`. Every hook that has a Hermes equivalent
//! becomes an entry (event, matcher, timeout; `type: http` as a `url:` hook); everything
//! else is listed with the reason. The new lines are inserted into `config.yaml` as text,
//! so every key and comment already there stays as it was; the lines are shown first,
//! and written only after a yes (or with `--yes`). Nothing is approved: the imported
//! hooks go through consent like any other.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::Value;

use crate::cli::ExitStatus;
use crate::cli::settings::Settings;
use hermes_host::config::Config;
use hermes_host::shell::{self, claude_import};

/// Where the settings come from.
fn settings_file(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(path) = given {
        return Ok(path.to_path_buf());
    }
    let project = PathBuf::from(".claude/settings.json");
    if project.is_file() {
        return Ok(project);
    }
    if let Some(home) = std::env::var_os("HOME") {
        let user = PathBuf::from(home).join(".claude/settings.json");
        if user.is_file() {
            return Ok(user);
        }
    }
    bail!(
        "no Claude Code settings found (.claude/settings.json here, or ~/.claude/settings.json); name the file: `hermes hooks import claude PATH`"
    )
}

/// `hermes hooks import claude`.
pub fn import(
    settings: &Settings,
    source: &str,
    file: Option<&Path>,
    yes: bool,
) -> anyhow::Result<ExitStatus> {
    if source != "claude" {
        bail!("hooks can be imported from: claude (got {source:?})");
    }
    let file = settings_file(file)?;
    let text = std::fs::read_to_string(&file)
        .with_context(|| format!("cannot read {}", file.display()))?;
    hermes_host::nesting::check_json(&text)
        .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
    let claude_settings: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", file.display()))?;
    let (mut found, skipped) = claude_import::entries(&claude_settings);

    let config_path = settings.home.config_path();
    let current = match std::fs::read_to_string(&config_path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", config_path.display())),
    };
    let before = Config::parse(&current).map_err(|e| {
        anyhow::anyhow!(
            "{} does not parse ({e}); fix it before importing into it",
            config_path.display()
        )
    })?;
    let existing = shell::config::parse(&before.hooks).specs;
    found.retain(|e| {
        !existing.iter().any(|s| {
            s.event == e.event && s.written == e.target.1 && s.failure_only == e.failure_only
        })
    });

    println!("Importing Claude Code hooks from {}", file.display());
    for reason in &skipped {
        println!("  not imported: {reason}");
    }
    for note in found.iter().filter_map(|e| e.note.as_deref()) {
        println!("  note: {note}");
    }
    if found.is_empty() {
        println!("Nothing to add to {}.", config_path.display());
        return Ok(ExitStatus::Success);
    }
    let merged = claude_import::insert(&current, &found).map_err(anyhow::Error::msg)?;
    let after = Config::parse(&merged).map_err(|e| {
        anyhow::anyhow!("the merged config.yaml would not parse ({e}); nothing written")
    })?;
    let parsed = shell::config::parse(&after.hooks);
    if parsed.specs.len() != existing.len() + found.len() {
        bail!(
            "the merged config.yaml would hold {} hooks instead of {}; nothing written ({})",
            parsed.specs.len(),
            existing.len() + found.len(),
            parsed.warnings.join("; ")
        );
    }
    // Each hook must read back as the settings wrote it: a command changed on the way (a
    // line break folded into a space, say) would run something nobody asked for.
    if let Some(lost) = found.iter().find(|e| {
        !parsed.specs.iter().any(|s| {
            s.event == e.event && s.written == e.target.1 && s.failure_only == e.failure_only
        })
    }) {
        bail!(
            "the merged config.yaml would not hold the {} hook {:?} as written; nothing written",
            lost.event,
            lost.target.1
        );
    }
    println!("\nThese lines would be added to {}:", config_path.display());
    let old: std::collections::HashSet<&str> = current.lines().collect();
    for line in merged.lines() {
        if old.contains(line) {
            continue;
        }
        println!("+ {line}");
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            println!(
                "\nNot written: run again with --yes to write them (stdin is not a terminal)."
            );
            return Ok(ExitStatus::Failure);
        }
        print!(
            "\nWrite {} hook(s) to {}? [y/N] ",
            found.len(),
            config_path.display()
        );
        let _ = std::io::stdout().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("Not written.");
            return Ok(ExitStatus::Success);
        }
    }
    // Written under the file's lock, and only onto the text the lines were shown against:
    // a change made meanwhile (another command, an editor) is not overwritten.
    hermes_host::config_edit::update(&settings.home, |now| {
        if now == current {
            Ok((merged.clone(), ()))
        } else {
            Err("it changed since the lines above were made; run the import again".into())
        }
    })
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "Wrote {} hook(s) to {}. None is approved: each asks for consent at its first run (or `hermes hooks allow`).",
        found.len(),
        config_path.display()
    );
    Ok(ExitStatus::Success)
}
