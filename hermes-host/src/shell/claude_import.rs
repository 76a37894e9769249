//! Claude Code's hook settings as `config.yaml` entries: what `hermes hooks import claude`
//! adds, without the file lookup and the prompt (those are the CLI's).
//!
//! [`entries`] reads a Claude settings document (`.claude/settings.json`) into the hooks
//! Hermes can run with `format: claude` (event, matcher, timeout; a `type: http` hook as a
//! `url:` hook), and says why it leaves out the rest. [`insert`] adds them to the text of
//! a `config.yaml`, so that every key and comment already there stays as it was.
//!
//! A command is written as a double-quoted YAML scalar with every line break and control
//! character escaped, so that it reads back exactly: a settings file's command may hold
//! several lines (`"make lint\nmake test"` runs two commands), and a plain or single-quoted
//! scalar would fold them into one (`make lint make test`, a different command).
//!
//! ```
//! use hermes_host::config::Config;
//! use hermes_host::shell::{claude_import, config};
//!
//! let settings = serde_json::json!({"hooks": {"PreToolUse": [
//!     {"matcher": "Bash", "hooks": [{"type": "command", "command": "make lint\nmake test"}]}
//! ]}});
//! let (entries, skipped) = claude_import::entries(&settings);
//! assert!(skipped.is_empty());
//! let text = claude_import::insert("", &entries).unwrap();
//! let specs = config::parse(&Config::parse(&text).unwrap().hooks).specs;
//! assert_eq!(specs[0].command, "make lint\nmake test");
//! assert_eq!(specs[0].format, config::Format::Claude);
//! ```

use serde_json::Value;

use super::claude;

/// One hook to add under `hooks.<event>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The Hermes event (`pre_tool_call`, ...).
    pub event: &'static str,
    /// `("command", ...)` or `("url", ...)`: the key and its value.
    pub target: (&'static str, String),
    /// The matcher, on the events Claude Code matches on.
    pub matcher: Option<String>,
    /// The timeout in seconds, when the settings give one.
    pub timeout: Option<u64>,
    /// Imported from `PostToolUseFailure`: written with `claude_event: PostToolUseFailure`,
    /// so it runs after failed calls only, as in Claude Code.
    pub failure_only: bool,
    /// `async: true` (or `asyncRewake`) on a command: it runs in the background.
    pub background: bool,
    /// What the import tells the user about this hook (an `asyncRewake` whose wake-up
    /// hermes does not do).
    pub note: Option<String>,
}

impl Entry {
    /// The entry's lines under `  <event>:`.
    pub fn yaml(&self) -> String {
        let mut text = format!("    - {}: {}\n", self.target.0, quote(&self.target.1));
        text.push_str("      format: claude\n");
        if self.failure_only {
            text.push_str("      claude_event: PostToolUseFailure\n");
        }
        if let Some(m) = &self.matcher {
            text.push_str(&format!("      matcher: {}\n", quote(m)));
        }
        if let Some(t) = self.timeout {
            text.push_str(&format!("      timeout: {t}\n"));
        }
        if self.background {
            text.push_str("      async: true\n");
        }
        text
    }
}

/// `text` as a double-quoted YAML scalar that reads back exactly. Line breaks, tabs and
/// every other control or non-printing character YAML could take as a break or refuse
/// (C0, DEL, C1 including NEL, the Unicode line and paragraph separators, the byte order
/// mark, U+FFFE and U+FFFF) are escapes, so the scalar is one line.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control()
                || matches!(
                    c,
                    '\u{2028}' | '\u{2029}' | '\u{feff}' | '\u{fffe}' | '\u{ffff}'
                ) =>
            {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The entries of a Claude settings document, and what could not be mapped.
pub fn entries(settings: &Value) -> (Vec<Entry>, Vec<String>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let Some(hooks) = settings.get("hooks").and_then(Value::as_object) else {
        skipped.push("the file has no \"hooks\" object".to_string());
        return (out, skipped);
    };
    for (claude_event, groups) in hooks {
        let Some(event) = claude::hermes_event(claude_event) else {
            let count = groups
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|g| g.get("hooks").and_then(Value::as_array))
                .map(Vec::len)
                .sum::<usize>();
            skipped.push(format!(
                "{claude_event} ({count} hook(s)): {}",
                unmapped_reason(claude_event)
            ));
            continue;
        };
        let failure_only = claude_event == "PostToolUseFailure";
        // Claude Code ignores a matcher on the events it does not match on (`Stop`,
        // `UserPromptSubmit`): so does the import.
        let matches = claude::matcher_applies(event);
        for group in groups.as_array().into_iter().flatten() {
            let matcher = group
                .get("matcher")
                .and_then(Value::as_str)
                .filter(|m| !m.trim().is_empty() && m.trim() != "*")
                .map(str::to_string);
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
                // Trimmed, as config.yaml's parser reads it; blank is missing.
                let text = |key: &'static str| {
                    hook.get(key)
                        .and_then(Value::as_str)
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(|t| (key, t))
                };
                let target = match kind {
                    "command" => text("command"),
                    "http" => text("url"),
                    "prompt" | "agent" => {
                        skipped.push(format!(
                            "{claude_event}: a hook of type {kind:?}, which asks a model; hermes's hooks have no model to ask"
                        ));
                        continue;
                    }
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
                let flag = |key: &str| hook.get(key) == Some(&Value::Bool(true));
                let background = (flag("async") || flag("asyncRewake")) && key == "command";
                let note = flag("asyncRewake").then(|| {
                    format!(
                        "{claude_event} {target:?} has asyncRewake: true; it runs in the background as async: true, and hermes does not wake the model when it exits 2"
                    )
                });
                out.push(Entry {
                    event,
                    target: (key, target.to_string()),
                    matcher: matcher.clone().filter(|_| matches),
                    timeout: hook.get("timeout").and_then(Value::as_u64),
                    failure_only,
                    background,
                    note,
                });
            }
        }
    }
    (out, skipped)
}

/// Why a Claude Code event has no Hermes event to run on.
fn unmapped_reason(claude_event: &str) -> String {
    let why = match claude_event {
        "Notification" => {
            "Hermes has no event for Claude's notifications (waiting for input, a permission prompt shown)"
        }
        "PreCompact" => {
            "Hermes does not compact the conversation, so there is nothing to run before"
        }
        "PermissionRequest" => {
            "Hermes's approval prompts fire pre_approval_request, which has another payload; write a Hermes-format hook for it"
        }
        _ => "",
    };
    if why.is_empty() {
        format!(
            "not an event Hermes maps (it maps {})",
            claude::EVENTS
                .iter()
                .map(|(_, c)| *c)
                .chain(["PostToolUseFailure"])
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        why.to_string()
    }
}

/// `config` with `entries` inserted into its `hooks:` block, as text: an event's entries
/// go after the ones it has, a new event at the end of the block, and a missing block at
/// the end of the file.
///
/// # Errors
///
/// When `hooks:` is not a block this can extend (written inline), with what to change.
pub fn insert(config: &str, entries: &[Entry]) -> Result<String, String> {
    let mut lines: Vec<String> = config.lines().map(str::to_string).collect();
    let hooks_at = lines.iter().position(|l| l.trim_end() == "hooks:");
    if hooks_at.is_none() && lines.iter().any(|l| l.starts_with("hooks:")) {
        return Err(
            "config.yaml's hooks: is written inline; rewrite it as a block (one `event:` per line under `hooks:`) and import again"
                .to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::shell;

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
                .any(|s| s.starts_with("Notification (1 hook(s)): Hermes has no event"))
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
        let parsed = shell::config::parse(&Config::parse(&merged).unwrap().hooks);
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
            shell::config::parse(&Config::parse(&empty).unwrap().hooks)
                .specs
                .len(),
            3
        );
        assert!(insert("hooks: {}\n", &entries).is_err());
    }

    #[test]
    fn commands_with_line_breaks_quotes_and_control_characters_read_back_exactly() {
        let commands = [
            "make lint\nmake test",
            "echo 'it''s' \"quoted\" \\ back\tslash\r\n",
            "a\u{85}b\u{2028}c\u{2029}d\u{feff}e\u{1}f\u{7f}g\u{9f}h\u{fffe}",
            "  leading and trailing  ",
            "#not a comment: [x] {y} & *z ! % @ `",
            "",
            "ünïcödé ✓ 𝄞",
        ];
        let hooks: Vec<Value> = commands
            .iter()
            .map(|c| serde_json::json!({"type": "command", "command": c}))
            .collect();
        let settings =
            serde_json::json!({"hooks": {"PreToolUse": [{"matcher": "a\nb", "hooks": hooks}]}});
        let (entries, _) = entries(&settings);
        let merged = insert(
            "hooks:\n  pre_tool_call:\n    - command: ./old.sh\n",
            &entries,
        )
        .unwrap();
        let parsed = shell::config::parse(&Config::parse(&merged).unwrap().hooks);
        let read: Vec<&str> = parsed
            .specs
            .iter()
            .skip(1)
            .map(|s| s.command.as_str())
            .collect();
        // As config.yaml's parser reads a command: trimmed, and a blank one is none.
        let want: Vec<&str> = commands
            .iter()
            .map(|c| c.trim())
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(read, want, "{merged}");
        assert_eq!(merged.lines().count(), 3 + 3 * want.len(), "{merged}");
        assert!(
            parsed
                .specs
                .iter()
                .skip(1)
                .all(|s| s.matcher.as_ref().map(|m| m.as_str()) == Some("a\nb"))
        );
    }
}
