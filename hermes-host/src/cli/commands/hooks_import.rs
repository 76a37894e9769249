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
use hermes_host::home::Config;
use hermes_host::shell::{self, claude};

/// One entry to add under `hooks.<event>`.
#[derive(Debug, PartialEq)]
struct Entry {
    event: &'static str,
    /// `command: ...` or `url: ...`.
    target: (&'static str, String),
    matcher: Option<String>,
    timeout: Option<u64>,
}

impl Entry {
    fn yaml(&self) -> String {
        let mut text = format!("    - {}: {}\n", self.target.0, quote(&self.target.1));
        text.push_str("      format: claude\n");
        if let Some(m) = &self.matcher {
            text.push_str(&format!("      matcher: {}\n", quote(m)));
        }
        if let Some(t) = self.timeout {
            text.push_str(&format!("      timeout: {t}\n"));
        }
        text
    }
}

/// A YAML scalar in single quotes (doubled inside), which never needs escapes.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

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

/// The entries of a Claude settings document, and what could not be mapped.
fn entries(settings: &Value) -> (Vec<Entry>, Vec<String>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else {
        skipped.push("the file has no \"hooks\" object".to_string());
        return (out, skipped);
    };
    for (claude_event, groups) in hooks {
        let Some(event) = claude::hermes_event(claude_event) else {
            skipped.push(format!(
                "{claude_event}: Hermes has no such event (it maps {})",
                claude::EVENTS
                    .iter()
                    .map(|(_, c)| *c)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        };
        if claude_event == "PostToolUseFailure" {
            // Hermes fires post_tool_call for both; the payload's hook_event_name says which.
            skipped.push(
                "PostToolUseFailure: imported as post_tool_call, which also fires after successful calls; the script sees hook_event_name"
                    .to_string(),
            );
        }
        let tool_event = event == "pre_tool_call" || event == "post_tool_call";
        for group in groups.as_array().into_iter().flatten() {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .filter(|m| !m.is_empty() && *m != "*")
                .map(str::to_string);
            if let (Some(m), false) = (&matcher, tool_event) {
                skipped.push(format!(
                    "{claude_event} matcher {m:?}: Hermes matches only tool events; the hook is imported without it and fires for every {event}"
                ));
            }
            for hook in group
                .get("hooks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let kind = hook
                    .get("type")
                    .and_then(Value::as_str)
                    .unwrap_or("command");
                let target = match kind {
                    "command" => hook
                        .get("command")
                        .and_then(Value::as_str)
                        .map(|c| ("command", c)),
                    "http" => hook.get("url").and_then(Value::as_str).map(|u| ("url", u)),
                    other => {
                        skipped.push(format!(
                            "{claude_event}: a hook of type {other:?} (only command and http hooks can be imported)"
                        ));
                        continue;
                    }
                };
                let Some((key, target)) = target else {
                    skipped.push(format!("{claude_event}: a {kind} hook without its {kind}"));
                    continue;
                };
                out.push(Entry {
                    event,
                    target: (key, target.to_string()),
                    matcher: matcher.clone().filter(|_| tool_event),
                    timeout: hook.get("timeout").and_then(Value::as_u64),
                });
            }
        }
    }
    (out, skipped)
}

/// `config` with `entries` inserted into its `hooks:` block, as text: an event's entries
/// go after the ones it has, a new event at the end of the block, and a missing block at
/// the end of the file. Fails when `hooks:` is not a block this can extend.
fn insert(config: &str, entries: &[Entry]) -> anyhow::Result<String> {
    let mut lines: Vec<String> = config.lines().map(str::to_string).collect();
    let hooks_at = lines.iter().position(|l| l.trim_end() == "hooks:");
    if hooks_at.is_none() && lines.iter().any(|l| l.starts_with("hooks:")) {
        bail!(
            "config.yaml's hooks: is written inline; rewrite it as a block (one `event:` per line under `hooks:`) and import again"
        );
    }
    let Some(hooks_at) = hooks_at else {
        let mut text = config.to_string();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("hooks:\n");
        for event in unique(entries) {
            text.push_str(&format!("  {event}:\n"));
            for entry in entries.iter().filter(|e| e.event == event) {
                text.push_str(&entry.yaml());
            }
        }
        return Ok(text);
    };
    // The block runs until the next line that is not blank, not a comment and not indented.
    let block_end = lines[hooks_at + 1..]
        .iter()
        .position(|l| !l.trim().is_empty() && !l.starts_with(' ') && !l.starts_with('#'))
        .map_or(lines.len(), |i| hooks_at + 1 + i);
    let mut additions_at_end = String::new();
    let mut inserts: Vec<(usize, String)> = Vec::new();
    for event in unique(entries) {
        let text: String = entries
            .iter()
            .filter(|e| e.event == event)
            .map(Entry::yaml)
            .collect();
        let key = format!("  {event}:");
        match (hooks_at + 1..block_end).find(|&i| lines[i].trim_end() == key) {
            Some(at) => {
                let end = (at + 1..block_end)
                    .find(|&i| {
                        let l = &lines[i];
                        !l.trim().is_empty() && !l.starts_with("   ") && !l.starts_with("  -")
                    })
                    .unwrap_or(block_end);
                inserts.push((end, text));
            }
            None => additions_at_end.push_str(&format!("{key}\n{text}")),
        }
    }
    if !additions_at_end.is_empty() {
        inserts.push((block_end, additions_at_end));
    }
    inserts.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
    for (at, text) in inserts {
        let new: Vec<String> = text.lines().map(str::to_string).collect();
        lines.splice(at..at, new);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

fn unique(entries: &[Entry]) -> Vec<&'static str> {
    let mut events = Vec::new();
    for e in entries {
        if !events.contains(&e.event) {
            events.push(e.event);
        }
    }
    events
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
    let claude_settings: Value = serde_json::from_str(&text)
        .with_context(|| format!("{} is not valid JSON", file.display()))?;
    let (mut found, skipped) = entries(&claude_settings);

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
    let existing = shell::config::parse(&before).specs;
    found.retain(|e| {
        !existing
            .iter()
            .any(|s| s.event == e.event && s.command == e.target.1)
    });

    println!("Importing Claude Code hooks from {}", file.display());
    for reason in &skipped {
        println!("  not imported: {reason}");
    }
    if found.is_empty() {
        println!("Nothing to add to {}.", config_path.display());
        return Ok(ExitStatus::Success);
    }
    let merged = insert(&current, &found)?;
    let after = Config::parse(&merged).map_err(|e| {
        anyhow::anyhow!("the merged config.yaml would not parse ({e}); nothing written")
    })?;
    let parsed = shell::config::parse(&after);
    if parsed.specs.len() != existing.len() + found.len() {
        bail!(
            "the merged config.yaml would hold {} hooks instead of {}; nothing written ({})",
            parsed.specs.len(),
            existing.len() + found.len(),
            parsed.warnings.join("; ")
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
    let tmp = config_path.with_extension("yaml.import-tmp");
    std::fs::write(&tmp, &merged).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &config_path)
        .with_context(|| format!("cannot replace {}", config_path.display()))?;
    println!(
        "Wrote {} hook(s) to {}. None is approved: each asks for consent at its first run (or `hermes hooks allow`).",
        found.len(),
        config_path.display()
    );
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> Value {
        serde_json::json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "~/.claude/hooks/validate.py", "timeout": 30}]},
                           {"matcher": "Write|Edit", "hooks": [{"type": "http", "url": "http://127.0.0.1:9/guard"}]}],
            "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo 'it''s'"}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "notify-send x"}]}],
            "Stop": [{"hooks": [{"type": "prompt", "prompt": "check"}]}]
        }})
    }

    #[test]
    fn every_mappable_hook_becomes_an_entry_and_the_rest_say_why() {
        let (entries, skipped) = entries(&settings());
        assert_eq!(entries.len(), 3);
        assert_eq!(entries[0].matcher.as_deref(), Some("Bash"));
        assert_eq!(entries[0].timeout, Some(30));
        assert_eq!(entries[1].target.0, "url");
        assert!(
            skipped
                .iter()
                .any(|s| s.starts_with("Notification: Hermes has no such event"))
        );
        assert!(skipped.iter().any(|s| s.contains("type \"prompt\"")));
    }

    #[test]
    fn entries_go_into_the_existing_block_and_everything_else_stays() {
        let (entries, _) = entries(&settings());
        let config = "# my settings\nplugins:\n  enabled: [a]   # keep me\nhooks:\n  pre_tool_call:\n    - command: ./old.sh\n      timeout: 5\n  # a comment in the block\nhooks_auto_accept: false\n";
        let merged = insert(config, &entries).unwrap();
        for line in config.lines() {
            assert!(merged.contains(line), "lost {line:?}:\n{merged}");
        }
        let parsed = shell::config::parse(&Config::parse(&merged).unwrap());
        assert_eq!(parsed.specs.len(), 4, "{merged}\n{:?}", parsed.warnings);
        assert_eq!(parsed.specs[0].command, "./old.sh");
        assert!(
            parsed
                .specs
                .iter()
                .skip(1)
                .all(|s| s.format == shell::config::Format::Claude)
        );
        let empty = insert("", &entries).unwrap();
        assert_eq!(
            shell::config::parse(&Config::parse(&empty).unwrap())
                .specs
                .len(),
            3
        );
        assert!(insert("hooks: {}\n", &entries).is_err());
    }
}
