//! The `hooks:` block of `config.yaml`: parsing and validation.
//!
//! Parsing never fails. Every problem is a warning that names the entry
//! (`hooks.<event>[<i>]...`) and the entry is skipped, with the reference's exact texts.
//! Warnings are returned as data and also logged (`tracing::warn!`), in the order the
//! reference logs them. Specs come back in config order: events in mapping order, entries in
//! list order.
//!
//! ```yaml
//! hooks:
//!   pre_tool_call:
//!     - command: ~/.hermes/agent-hooks/guard.sh
//!       matcher: terminal|write_file   # regex, full match, tool events only
//!       timeout: 10                    # seconds, default 60, at most 300
//!       fail_closed: true              # a crash, timeout or bad output blocks the tool
//!       priority: 0                    # equal priorities run together, lower first
//!       persistent: true               # started once; one JSON line in and out per firing
//!       instances: 2                   # persistent only: processes for concurrent callers
//!   post_tool_call:
//!     - command: ./audit.sh
//!       async: true                    # in the background: never waited for, never blocks
//!   pre_llm_call:
//!     - command: python3 ~/.hermes/agent-hooks/context.py
//!     - url: https://policy.internal/hermes   # POST the payload; the body is the answer
//!       headers: {Authorization: "Bearer ${POLICY_TOKEN}"}
//!       allowed_env_vars: [POLICY_TOKEN]     # the only variables a header may name
//! hooks_auto_accept: false
//! ```
//!
//! A `format: claude` hook's matcher follows Claude Code instead: its rules (names, or a
//! regex found anywhere) on every event Claude matches on (`SessionStart: startup|resume`).

use yaml_serde::Value;

use super::http::{HttpSpec, is_http_url};
use super::matcher::Matcher;
use crate::config::{HooksSection, yaml_type_name};
use crate::pyfmt::{close_match, repr_str, repr_yaml};

/// The timeout of an entry that sets none (seconds).
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// The largest timeout; larger values are clamped (seconds).
pub const MAX_TIMEOUT_SECS: u64 = 300;
/// The events whose hooks may have a `matcher` (and see a tool name).
pub const TOOL_EVENTS: [&str; 2] = ["pre_tool_call", "post_tool_call"];
/// The events Claude Code fires for its main session only (SessionStart, UserPromptSubmit,
/// Stop, SessionEnd): a subagent has SubagentStart and SubagentStop instead.
const MAIN_SESSION_ONLY: [&str; 4] = [
    "on_session_start",
    "pre_llm_call",
    "post_llm_call",
    "on_session_end",
];
/// The events on which a hook can block, and so `fail_closed` and exit code 2 mean something.
pub const BLOCKING_EVENTS: [&str; 1] = ["pre_tool_call"];

/// One validated entry of the `hooks:` block.
///
/// ```
/// let config = hermes_host::config::Config::parse(
///     "hooks:\n  pre_tool_call:\n    - command: ' ./guard.sh '\n      matcher: terminal\n",
/// ).unwrap();
/// let parsed = hermes_host::shell::config::parse(&config.hooks);
/// let spec = &parsed.specs[0];
/// assert_eq!((spec.event.as_str(), spec.command.as_str(), spec.timeout), ("pre_tool_call", "./guard.sh", 60));
/// assert!(spec.matches_tool(Some("terminal")) && !spec.matches_tool(None));
/// assert_eq!(spec.label(), "shell_hook[pre_tool_call:./guard.sh]");
/// ```
#[derive(Clone, Debug)]
pub struct ShellHookSpec {
    /// The hook event (a name from `hermes_hooks_abi::hooks::names_sorted()`).
    pub event: String,
    /// The command line, stripped of surrounding whitespace; for an HTTP hook, its URL (the
    /// allowlist, labels and messages name a hook by this text). For a `format: claude`
    /// hook, `$CLAUDE_PROJECT_DIR` in it is already replaced by the project directory (see
    /// [`ShellHookSpec::set_work_dir`]).
    pub command: String,
    /// The command line (or URL) as `config.yaml` has it, trimmed: `command` before
    /// `$CLAUDE_PROJECT_DIR` was replaced.
    pub written: String,
    /// The matcher: of tool events for a Hermes hook; of every event Claude Code matches on
    /// for a `format: claude` hook.
    pub matcher: Option<Matcher>,
    /// Seconds, 1 to [`MAX_TIMEOUT_SECS`].
    pub timeout: u64,
    /// Whether a failure of this hook blocks the tool instead of being ignored
    /// (`pre_tool_call` only).
    pub fail_closed: bool,
    /// Hooks of one event with equal priority run together; lower priorities run first.
    pub priority: i64,
    /// `persistent: true`: the command is started once and answers one JSON line per
    /// firing on its stdout (see [`crate::shell::persistent`]).
    pub persistent: bool,
    /// `instances: N` for a persistent hook: processes kept for concurrent callers
    /// (default 1, at most 16).
    pub instances: usize,
    /// `url:` instead of `command:`: an HTTP hook (see [`crate::shell::http`]).
    pub http: Option<HttpSpec>,
    /// The protocol the hook speaks (`format:`): Hermes's, or Claude Code's.
    pub format: Format,
    /// `claude_event: PostToolUseFailure` on a `format: claude` `post_tool_call` hook: it
    /// runs after failed calls only. Without it such a hook is Claude's `PostToolUse` and
    /// runs after calls that succeeded only; neither runs after a blocked call.
    pub failure_only: bool,
    /// The directory the agent works in (`--cwd` of `hermes run` and `hermes gateway
    /// run`), when it is not the process's. A `format: claude` hook gets it as its
    /// payload's `cwd` and as `CLAUDE_PROJECT_DIR`, as Claude Code gives a hook the
    /// session's directory. Hooks of both formats run there and are told it (payload `cwd`,
    /// `CLAUDE_PROJECT_DIR`). A Hermes hook's relative script path names the file from the
    /// process's directory, where consent resolved and pinned it, and runs by its absolute
    /// path; a Claude hook's is this directory's, as in Claude Code (see
    /// [`script_file`](ShellHookSpec::script_file)). `None`: the process's working directory.
    pub work_dir: Option<std::path::PathBuf>,
    /// Variables the hook's process gets besides the host's (a Claude Code plugin's
    /// `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PLUGIN_DATA`).
    pub env: Vec<(String, String)>,
    /// The plugin the hook came with (a Claude Code plugin), `None` for `config.yaml`'s.
    pub plugin: Option<String>,
    /// `shadow: true`: the hook runs at its real moment with the real payload, and what it
    /// answers is recorded, never applied (see [`Registry::add_shadow`](crate::registry::Registry::add_shadow)).
    pub shadow: bool,
    /// `async: true` (Claude Code's key): the command runs in the background and the event
    /// goes on without waiting. It cannot block or change anything; context it gives
    /// reaches the session's next model call (see [`crate::shell::background`]). One-shot
    /// commands only: not with `url:`, `persistent` or `shadow`.
    pub background: bool,
}

/// The protocol a shell hook speaks, both ways.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Hermes's payload and answers (the reference's).
    #[default]
    Hermes,
    /// Claude Code's payload, tool names and answers (see [`crate::shell::claude`]).
    Claude,
}

impl ShellHookSpec {
    /// A spec with the defaults: no matcher, 60 s, fail-open, priority 0.
    ///
    /// ```
    /// let spec = hermes_host::shell::config::ShellHookSpec::new("on_session_start", "./log.sh");
    /// assert_eq!(spec.timeout, 60);
    /// ```
    pub fn new(event: &str, command: &str) -> ShellHookSpec {
        ShellHookSpec {
            event: event.to_string(),
            command: command.to_string(),
            written: command.to_string(),
            matcher: None,
            timeout: DEFAULT_TIMEOUT_SECS,
            fail_closed: false,
            priority: 0,
            persistent: false,
            instances: 1,
            http: None,
            format: Format::Hermes,
            failure_only: false,
            work_dir: None,
            env: Vec::new(),
            plugin: None,
            shadow: false,
            background: false,
        }
    }

    /// An HTTP hook spec for `url` with the defaults and no headers.
    ///
    /// ```
    /// let spec = hermes_host::shell::config::ShellHookSpec::http("pre_tool_call", "http://127.0.0.1:8080/hook");
    /// assert_eq!((spec.command.as_str(), spec.noun()), ("http://127.0.0.1:8080/hook", "HTTP hook"));
    /// ```
    pub fn http(event: &str, url: &str) -> ShellHookSpec {
        ShellHookSpec {
            http: Some(HttpSpec {
                url: url.to_string(),
                ..HttpSpec::default()
            }),
            ..ShellHookSpec::new(event, url)
        }
    }

    /// Sets the directory the agent works in (`None`: the process's). A `format: claude`
    /// command gets `$CLAUDE_PROJECT_DIR` replaced by it, as Claude Code's shell would
    /// expand it, so that consent resolves, pins and runs the script the command names
    /// there (see [`crate::shell::claude::expand_project_dir`]).
    ///
    /// ```
    /// use std::path::PathBuf;
    /// use hermes_host::shell::config::{Format, ShellHookSpec};
    /// let mut spec = ShellHookSpec::new("pre_tool_call", "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/check.sh");
    /// spec.format = Format::Claude;
    /// spec.set_work_dir(Some(PathBuf::from("/srv/proj")));
    /// assert_eq!(spec.command, "\"/srv/proj\"/.claude/hooks/check.sh");
    /// assert_eq!(spec.written, "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/check.sh");
    /// ```
    pub fn set_work_dir(&mut self, dir: Option<std::path::PathBuf>) {
        if self.format == Format::Claude && self.http.is_none() {
            let project = dir
                .clone()
                .or_else(|| std::env::current_dir().ok())
                .unwrap_or_default();
            self.command = crate::shell::claude::expand_project_dir(&self.written, &project);
        }
        self.work_dir = dir;
    }

    /// The script file the command names, as it will run: a relative path is the agent's
    /// directory's for a `format: claude` hook (Claude Code runs hooks in the project, so
    /// `bash .claude/scripts/guard.sh` is the project's guard), and the process's for a
    /// Hermes hook, whose relative script consent resolved where hermes started. `None`
    /// for an HTTP hook or an empty command.
    ///
    /// ```
    /// use hermes_host::shell::config::{Format, ShellHookSpec};
    /// let mut spec = ShellHookSpec::new("pre_tool_call", "bash .claude/scripts/guard.sh");
    /// spec.format = Format::Claude;
    /// spec.set_work_dir(Some("/work/project".into()));
    /// assert_eq!(spec.script_file().unwrap(), std::path::Path::new("/work/project/.claude/scripts/guard.sh"));
    /// ```
    pub fn script_file(&self) -> Option<std::path::PathBuf> {
        if self.http.is_some() {
            return None;
        }
        let path = crate::shell::script::resolved_path(&self.command)?;
        let base = match (&self.work_dir, self.format) {
            (Some(dir), Format::Claude) if path.is_relative() => dir.clone(),
            _ => return Some(std::path::absolute(&path).unwrap_or(path)),
        };
        Some(base.join(path))
    }

    /// The sha256 of [`script_file`](ShellHookSpec::script_file), the content consent pins;
    /// `None` when it is not a readable regular file.
    pub fn script_sha256(&self) -> Option<String> {
        crate::shell::script::sha256_file(&self.script_file()?)
    }

    /// What messages call this hook: `shell hook`, or `HTTP hook` for a `url:` entry.
    pub fn noun(&self) -> &'static str {
        if self.http.is_some() {
            "HTTP hook"
        } else {
            "shell hook"
        }
    }

    /// Whether the hook wants a call of `tool_name`: always without a matcher; never when the
    /// tool name is missing; otherwise the matcher decides.
    pub fn matches_tool(&self, tool_name: Option<&str>) -> bool {
        match (&self.matcher, tool_name) {
            (None, _) => true,
            (Some(_), None) => false,
            // A Claude-format matcher names Claude's tools (`Bash`, `Write|Edit`).
            (Some(m), Some(tool)) if self.format == Format::Claude => {
                m.matches(crate::shell::claude::tool_name(tool))
            }
            (Some(m), Some(tool)) => m.matches(tool),
        }
    }

    /// Whether the hook wants this firing of its event, whose keyword arguments `field`
    /// reads: always without a matcher; a Hermes hook's matcher compares the tool name; a
    /// Claude hook's compares what Claude Code matches on for the event
    /// ([`matched_value`](crate::shell::claude::matched_value)). A Claude hook of an event
    /// Claude Code fires for its main session only (SessionStart, UserPromptSubmit, Stop,
    /// SessionEnd) also passes over a delegated child's firings
    /// ([`is_subagent`](crate::run_control::is_subagent)).
    ///
    /// ```
    /// use hermes_host::shell::config::{Format, ShellHookSpec};
    /// use hermes_host::shell::matcher::Matcher;
    /// let mut spec = ShellHookSpec::new("on_session_start", "./load.sh");
    /// spec.format = Format::Claude;
    /// spec.matcher = Matcher::claude("clear|compact").0;
    /// assert!(!spec.matches_event(|_| None));
    /// spec.matcher = Matcher::claude("startup|resume").0;
    /// assert!(spec.matches_event(|_| None));
    /// ```
    pub fn matches_event<'a>(&self, field: impl Fn(&str) -> Option<&'a str>) -> bool {
        if self.format == Format::Claude
            && MAIN_SESSION_ONLY.contains(&self.event.as_str())
            && crate::run_control::is_subagent(field("session_id").unwrap_or_default())
        {
            return false;
        }
        match &self.matcher {
            None => true,
            Some(m) if self.format == Format::Claude => {
                crate::shell::claude::matched_value(&self.event, field).is_none_or(|v| m.matches(v))
            }
            Some(_) => !self.is_tool_event() || self.matches_tool(field("tool_name")),
        }
    }

    /// Whether the hook runs after a call that ended with `status` (`ok`, `error`,
    /// `blocked`). Hermes-format hooks run after every call, as in the reference. A
    /// `format: claude` hook runs as Claude Code's events fire: `PostToolUse` after a call
    /// that succeeded, `PostToolUseFailure` (`claude_event:`) after one that failed, and
    /// nothing after a call a hook blocked.
    ///
    /// ```
    /// use hermes_host::shell::config::{Format, ShellHookSpec};
    /// let mut spec = ShellHookSpec::new("post_tool_call", "./fmt.sh");
    /// assert!(spec.runs_after(Some("blocked")));
    /// spec.format = Format::Claude;
    /// assert!(spec.runs_after(Some("ok")) && !spec.runs_after(Some("error")) && !spec.runs_after(Some("blocked")));
    /// spec.failure_only = true;
    /// assert!(!spec.runs_after(Some("ok")) && spec.runs_after(Some("error")));
    /// ```
    pub fn runs_after(&self, status: Option<&str>) -> bool {
        if self.format != Format::Claude || self.event != "post_tool_call" {
            return true;
        }
        match status {
            Some("blocked") => false,
            Some("error") => self.failure_only,
            _ => !self.failure_only,
        }
    }

    /// The callback label: `shell_hook[<event>:<command>]`.
    pub fn label(&self) -> String {
        format!("shell_hook[{}:{}]", self.event, self.command)
    }

    /// Whether this hook's event is a tool event (its matcher applies).
    pub fn is_tool_event(&self) -> bool {
        TOOL_EVENTS.contains(&self.event.as_str())
    }
}

/// The specs of a `hooks:` block and the warnings about the entries that were skipped or
/// corrected.
#[derive(Clone, Debug, Default)]
pub struct ParsedHooks {
    /// The valid entries, in config order.
    pub specs: Vec<ShellHookSpec>,
    /// Every warning, in the order it was logged.
    pub warnings: Vec<String>,
}

impl ParsedHooks {
    fn warn(&mut self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }
}

/// Parses the `hooks:` block of `config.yaml` into hook specs. A missing block, or one that
/// is not a mapping, has no hooks (the config reports the latter).
///
/// ```
/// let config = hermes_host::config::Config::parse("hooks:\n  pre_tool_cal:\n    - command: x\n").unwrap();
/// let parsed = hermes_host::shell::config::parse(&config.hooks);
/// assert!(parsed.specs.is_empty());
/// assert_eq!(parsed.warnings, ["unknown hook event 'pre_tool_cal' in hooks: config — did you mean 'pre_tool_call'?"]);
/// ```
pub fn parse(section: &HooksSection) -> ParsedHooks {
    let mut out = ParsedHooks::default();
    let hooks = &section.events;
    let valid = hermes_hooks_abi::hooks::names_sorted();
    for (key, entries) in hooks {
        // Not an event: the permission policy of every loader (see `trust`).
        if key.as_str() == Some(crate::trust::STRICT_PERMISSIONS_KEY) {
            if !entries.is_bool() {
                out.warn(format!(
                    "hooks.{} must be true or false; got {}, so permissions stay strict",
                    crate::trust::STRICT_PERMISSIONS_KEY,
                    yaml_type_name(entries)
                ));
            }
            continue;
        }
        // Read by the agent (see `config::HooksSection`), which reports a bad value.
        if key.as_str() == Some(crate::config::MAX_STOP_CONTINUATIONS_KEY) {
            continue;
        }
        let event = match key {
            Value::String(s) if valid.contains(&s.as_str()) => s.clone(),
            other => {
                let text = match other {
                    Value::String(s) => s.clone(),
                    other => repr_yaml(other),
                };
                match close_match(&text, &valid, 0.6) {
                    Some(suggestion) => out.warn(format!(
                        "unknown hook event {} in hooks: config — did you mean {}?",
                        repr_yaml(other),
                        repr_str(suggestion)
                    )),
                    None => out.warn(format!(
                        "unknown hook event {} in hooks: config (valid: {})",
                        repr_yaml(other),
                        valid.join(", ")
                    )),
                }
                continue;
            }
        };
        let items = match entries {
            Value::Null => continue,
            Value::Sequence(items) => items,
            other => {
                out.warn(format!(
                    "hooks.{event} must be a list of hook definitions; got {}",
                    yaml_type_name(other)
                ));
                continue;
            }
        };
        for (i, raw) in items.iter().enumerate() {
            if let Some(spec) = parse_entry(&event, i, raw, &mut out) {
                out.specs.push(spec);
            }
        }
    }
    out
}

/// The keys a hook entry may have.
const ENTRY_KEYS: &[&str] = &[
    "command",
    "url",
    "matcher",
    "timeout",
    "fail_closed",
    "priority",
    "persistent",
    "instances",
    "format",
    "claude_event",
    "headers",
    "allowed_env_vars",
    "shadow",
    "async",
];

/// A `true`/`false` key of an entry (missing: false), with a warning for anything else.
fn flag(
    entry: &yaml_serde::Mapping,
    key: &str,
    event: &str,
    i: usize,
    out: &mut ParsedHooks,
) -> bool {
    match entry.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            out.warn(format!(
                "hooks.{event}[{i}].{key} must be true or false (got {}); using false",
                repr_yaml(other)
            ));
            false
        }
    }
}

fn parse_entry(event: &str, i: usize, raw: &Value, out: &mut ParsedHooks) -> Option<ShellHookSpec> {
    let Value::Mapping(entry) = raw else {
        out.warn(format!(
            "hooks.{event}[{i}] must be a mapping with a 'command' key; got {}",
            yaml_type_name(raw)
        ));
        return None;
    };
    // A misspelt key is not a harmless extra: `fail_close: true` or `timout: 1` leaves a
    // guard failing open after the default 60 s, and `matchr:` runs it on every tool.
    for key in entry.keys() {
        let name = match key {
            Value::String(s) => s.clone(),
            other => repr_yaml(other),
        };
        if ENTRY_KEYS.contains(&name.as_str()) {
            continue;
        }
        let hint = close_match(&name, ENTRY_KEYS, 0.6)
            .map(|close| format!("did you mean '{close}'?"))
            .unwrap_or_else(|| format!("known: {}", ENTRY_KEYS.join(", ")));
        out.warn(format!(
            "hooks.{event}[{i}]: unknown key '{name}' — {hint} (ignored)"
        ));
    }
    let http = match entry.get("url") {
        None | Some(Value::Null) => None,
        Some(raw) => Some(parse_http(event, i, raw, entry, out)?),
    };
    let command = match (entry.get("command"), &http) {
        (Some(_), Some(_)) => {
            out.warn(format!(
                "hooks.{event}[{i}] has both 'command' and 'url'; a hook is one or the other — skipped"
            ));
            return None;
        }
        (_, Some(http)) => http.url.clone(),
        (Some(Value::String(c)), None) if !c.trim().is_empty() => c.trim().to_string(),
        _ => {
            out.warn(format!(
                "hooks.{event}[{i}] is missing a non-empty 'command' field"
            ));
            return None;
        }
    };

    let mut matcher_text = match entry.get("matcher") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m.clone()),
        Some(_) => {
            out.warn(format!(
                "hooks.{event}[{i}].matcher must be a string regex; ignoring"
            ));
            None
        }
    };
    // Claude Code matches on more events than tools (a session's source, a subagent's type,
    // an error's kind); a `format: claude` hook keeps its matcher wherever Claude would
    // use it, and is read by Claude's rules (see `Matcher::claude`).
    let claude = matches!(entry.get("format"), Some(Value::String(f)) if f == "claude");
    let claude_matches = claude && crate::shell::claude::matcher_applies(event);
    if let Some(m) = &matcher_text {
        if !TOOL_EVENTS.contains(&event) && !claude_matches {
            out.warn(format!(
                "hooks.{event}[{i}].matcher={} will be ignored at runtime — the matcher field is \
                 only honored for pre_tool_call / post_tool_call.  The hook will fire on every \
                 {event} event.",
                repr_str(m)
            ));
            matcher_text = None;
        }
    }

    let timeout = parse_timeout(event, i, entry.get("timeout"), out);
    let fail_closed = parse_fail_closed(event, i, entry, out);
    let priority = match entry.get("priority") {
        None | Some(Value::Null) => 0,
        Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64().unwrap_or(0),
        Some(other) => {
            out.warn(format!(
                "hooks.{event}[{i}].priority must be an int (got {}); using 0",
                repr_yaml(other)
            ));
            0
        }
    };

    let shadow = flag(entry, "shadow", event, i, out);

    let persistent = flag(entry, "persistent", event, i, out);

    let instances = match entry.get("instances") {
        None | Some(Value::Null) => 1,
        Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (1..=16).contains(&n)) => {
            n.as_u64().unwrap_or(1) as usize
        }
        Some(other) => {
            out.warn(format!(
                "hooks.{event}[{i}].instances must be an int from 1 to 16 (got {}); using 1",
                repr_yaml(other)
            ));
            1
        }
    };

    let background = flag(entry, "async", event, i, out);
    let background = if background && (http.is_some() || persistent || shadow) {
        let what = if http.is_some() {
            "a url"
        } else if persistent {
            "a persistent command"
        } else {
            "a shadow hook"
        };
        out.warn(format!(
            "hooks.{event}[{i}]: async applies to one-shot commands, not to {what}; the hook runs synchronously"
        ));
        false
    } else {
        background
    };
    if background && fail_closed {
        out.warn(format!(
            "hooks.{event}[{i}]: fail_closed has no effect on an async hook, which never blocks; drop async: true to make it a guard"
        ));
    }

    let (persistent, instances) = if http.is_some() && (persistent || instances != 1) {
        out.warn(format!(
            "hooks.{event}[{i}]: persistent and instances apply to commands, not to a url; ignoring them (connections to the URL are kept alive anyway)"
        ));
        (false, 1)
    } else {
        (persistent, instances)
    };

    let format = match entry.get("format") {
        None | Some(Value::Null) => Format::Hermes,
        Some(Value::String(f)) if f == "hermes" => Format::Hermes,
        Some(Value::String(f)) if f == "claude" => {
            if crate::shell::claude::event_name(event).is_none() {
                out.warn(format!(
                    "hooks.{event}[{i}]: format: claude has no Claude Code event for {event} (it has: {}) — skipped",
                    crate::shell::claude::EVENTS
                        .iter()
                        .map(|(h, c)| format!("{h} as {c}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                return None;
            }
            Format::Claude
        }
        Some(other) => {
            out.warn(format!(
                "hooks.{event}[{i}].format must be 'hermes' or 'claude' (got {}) — skipped",
                repr_yaml(other)
            ));
            return None;
        }
    };

    let failure_only = match entry.get("claude_event") {
        None | Some(Value::Null) => false,
        Some(Value::String(e)) if format == Format::Claude && event == "post_tool_call" => {
            match e.as_str() {
                "PostToolUse" => false,
                "PostToolUseFailure" => true,
                other => {
                    out.warn(format!(
                        "hooks.{event}[{i}].claude_event must be PostToolUse or PostToolUseFailure (got {}) — skipped",
                        repr_str(other)
                    ));
                    return None;
                }
            }
        }
        Some(other) => {
            out.warn(format!(
                "hooks.{event}[{i}].claude_event={} is for `format: claude` hooks on post_tool_call only (PostToolUse or PostToolUseFailure) — skipped",
                repr_yaml(other)
            ));
            return None;
        }
    };

    // The reference compiles the matcher when it builds the spec, after the checks above.
    let matcher = match matcher_text {
        Some(text) => {
            let (matcher, warning) = if format == Format::Claude {
                Matcher::claude(&text)
            } else {
                Matcher::new(&text)
            };
            if let Some(warning) = warning {
                out.warn(warning);
            }
            matcher
        }
        None => None,
    };
    let mut spec = ShellHookSpec {
        event: event.to_string(),
        written: command.clone(),
        command,
        matcher,
        timeout,
        fail_closed,
        priority,
        persistent,
        instances,
        http,
        format,
        failure_only,
        work_dir: None,
        env: Vec::new(),
        plugin: None,
        shadow,
        background,
    };
    // A Claude command naming `$CLAUDE_PROJECT_DIR` runs in the process's directory until
    // the host says where the agent works.
    spec.set_work_dir(None);
    if spec.format == Format::Claude && spec.http.is_none() {
        if let Some(script) = crate::shell::claude::script_after_cd(&spec.command) {
            out.warn(format!(
                "hooks.{event}[{i}]: the command changes directory before it runs {script}, but \
                 consent pins {script} as found from the directory hermes starts in, not the \
                 file the command runs; name the script by an absolute path, or as \
                 \"$CLAUDE_PROJECT_DIR\"/..."
            ));
        }
    }
    Some(spec)
}

/// The `url:`, `headers:` and `allowed_env_vars:` of an HTTP hook entry; `None` (with a
/// warning) when the URL is unusable.
fn parse_http(
    event: &str,
    i: usize,
    raw: &Value,
    entry: &yaml_serde::Mapping,
    out: &mut ParsedHooks,
) -> Option<HttpSpec> {
    let url = match raw {
        Value::String(u) if is_http_url(u.trim()) => u.trim().to_string(),
        other => {
            out.warn(format!(
                "hooks.{event}[{i}].url must be an http:// or https:// URL (got {}) — skipped",
                repr_yaml(other)
            ));
            return None;
        }
    };
    let allowed_env_vars = match entry.get("allowed_env_vars") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Sequence(items)) => items
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.clone()),
                other => {
                    out.warn(format!(
                        "hooks.{event}[{i}].allowed_env_vars entries must be variable names (got {}); ignoring it",
                        repr_yaml(other)
                    ));
                    None
                }
            })
            .collect(),
        Some(other) => {
            out.warn(format!(
                "hooks.{event}[{i}].allowed_env_vars must be a list of variable names (got {}); ignoring it",
                repr_yaml(other)
            ));
            Vec::new()
        }
    };
    let mut headers = Vec::new();
    match entry.get("headers") {
        None | Some(Value::Null) => {}
        Some(Value::Mapping(map)) => {
            for (name, value) in map {
                let value = match value {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Bool(b) => b.to_string(),
                    other => {
                        out.warn(format!(
                            "hooks.{event}[{i}].headers.{} must be a string (got {}); not sent",
                            repr_yaml(name),
                            repr_yaml(other)
                        ));
                        continue;
                    }
                };
                match name {
                    Value::String(name) if valid_header_name(name) => {
                        headers.push((name.clone(), value))
                    }
                    other => out.warn(format!(
                        "hooks.{event}[{i}].headers has an invalid header name {}; not sent",
                        repr_yaml(other)
                    )),
                }
            }
        }
        Some(other) => out.warn(format!(
            "hooks.{event}[{i}].headers must be a mapping of header names to values (got {}); ignoring it",
            repr_yaml(other)
        )),
    }
    let http = HttpSpec {
        url,
        headers,
        allowed_env_vars,
    };
    for (header, var) in http.unlisted_vars() {
        out.warn(format!(
            "hooks.{event}[{i}].headers.{header} names ${{{var}}}, which is not in allowed_env_vars; it is sent empty (add {var} to allowed_env_vars to send its value)"
        ));
    }
    Some(http)
}

/// An HTTP token (RFC 9110 `tchar`s), which is what a header name may be.
fn valid_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// `int(value)` with the reference's warnings, then the 1..=300 range.
fn parse_timeout(event: &str, i: usize, raw: Option<&Value>, out: &mut ParsedHooks) -> u64 {
    let default = DEFAULT_TIMEOUT_SECS;
    let value = match raw {
        None => i128::from(default),
        Some(v) => match python_int(v) {
            Some(n) => n,
            None => {
                out.warn(format!(
                    "hooks.{event}[{i}].timeout must be an int (got {}); using default {default}s",
                    repr_yaml(v)
                ));
                i128::from(default)
            }
        },
    };
    if value < 1 {
        out.warn(format!(
            "hooks.{event}[{i}].timeout must be >=1; using default {default}s"
        ));
        return default;
    }
    if value > i128::from(MAX_TIMEOUT_SECS) {
        out.warn(format!(
            "hooks.{event}[{i}].timeout={value}s exceeds max {MAX_TIMEOUT_SECS}s; clamping"
        ));
        return MAX_TIMEOUT_SECS;
    }
    value as u64
}

/// Python's `int(value)` for a YAML value: booleans are 0/1, floats truncate toward zero,
/// strings must be a (possibly signed, underscore-grouped, space-padded) decimal integer.
/// `None` where Python raises.
fn python_int(value: &Value) -> Option<i128> {
    match value {
        Value::Bool(b) => Some(i128::from(*b)),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(i128::from(i))
            } else if let Some(u) = n.as_u64() {
                Some(i128::from(u))
            } else {
                let f = n.as_f64()?;
                f.is_finite().then(|| f.trunc() as i128)
            }
        }
        Value::String(s) => {
            let s = s.trim();
            let (negative, digits) = match s.as_bytes().first() {
                Some(b'-') => (true, &s[1..]),
                Some(b'+') => (false, &s[1..]),
                _ => (false, s),
            };
            let groups_ok = !digits.is_empty()
                && digits
                    .split('_')
                    .all(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()));
            if !groups_ok {
                return None;
            }
            let n: i128 = digits.replace('_', "").parse().ok()?;
            Some(if negative { -n } else { n })
        }
        _ => None,
    }
}

/// `fail_closed` (alias `failClosed`; the canonical spelling wins): a boolean, meaningful on
/// blocking events only.
fn parse_fail_closed(
    event: &str,
    i: usize,
    entry: &yaml_serde::Mapping,
    out: &mut ParsedHooks,
) -> bool {
    let (key, raw) = match (entry.get("fail_closed"), entry.get("failClosed")) {
        (Some(v), _) => ("fail_closed", v),
        (None, Some(v)) => ("failClosed", v),
        (None, None) => return false,
    };
    let value = match raw {
        Value::Bool(b) => *b,
        Value::Null => false,
        other => {
            out.warn(format!(
                "hooks.{event}[{i}].{key} must be a bool (got {}); using false",
                repr_yaml(other)
            ));
            false
        }
    };
    if value && !BLOCKING_EVENTS.contains(&event) {
        out.warn(format!(
            "hooks.{event}[{i}].{key}=True will be ignored — only pre_tool_call hooks can block, \
             so only they can fail closed"
        ));
        return false;
    }
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_yaml(text: &str) -> ParsedHooks {
        parse(&crate::config::Config::parse(text).unwrap().hooks)
    }

    fn one_entry(entry: &str) -> ParsedHooks {
        parse_yaml(&format!("hooks:\n  pre_tool_call:\n    - {entry}\n"))
    }

    #[test]
    fn a_claude_command_that_changes_directory_before_a_relative_script_is_warned_about() {
        let parsed = one_entry("{command: 'cd tools && ./check.sh', format: claude}");
        assert_eq!(parsed.specs.len(), 1, "the hook is still registered");
        assert_eq!(parsed.warnings.len(), 1, "{:?}", parsed.warnings);
        assert!(
            parsed.warnings[0].starts_with(
                "hooks.pre_tool_call[0]: the command changes directory before it runs ./check.sh"
            ) && parsed.warnings[0].contains("$CLAUDE_PROJECT_DIR"),
            "{}",
            parsed.warnings[0]
        );
        // Hermes's own format runs no shell, and a script named absolutely is pinned right.
        for quiet in [
            "{command: 'cd tools && ./check.sh'}",
            "{command: 'cd tools && \"$CLAUDE_PROJECT_DIR\"/check.sh', format: claude}",
        ] {
            assert_eq!(one_entry(quiet).warnings, Vec::<String>::new(), "{quiet}");
        }
    }

    #[test]
    fn a_missing_or_non_mapping_block_has_no_hooks_and_no_warning() {
        for text in ["", "hooks: null", "hooks: [1, 2]", "hooks: text"] {
            let parsed = parse_yaml(text);
            assert!(
                parsed.specs.is_empty() && parsed.warnings.is_empty(),
                "{text}"
            );
        }
    }

    #[test]
    fn an_unknown_event_without_a_close_match_lists_the_valid_ones() {
        let parsed = parse_yaml("hooks:\n  zzz:\n    - command: x\n");
        let valid = hermes_hooks_abi::hooks::names_sorted().join(", ");
        assert_eq!(
            parsed.warnings,
            [format!(
                "unknown hook event 'zzz' in hooks: config (valid: {valid})"
            )]
        );
    }

    #[test]
    fn event_names_are_case_sensitive() {
        let parsed = parse_yaml("hooks:\n  Pre_Tool_Call:\n    - command: x\n");
        assert!(parsed.specs.is_empty());
        assert_eq!(parsed.warnings.len(), 1);
    }

    #[test]
    fn a_null_event_is_skipped_silently_and_a_non_list_warns() {
        let parsed = parse_yaml("hooks:\n  pre_tool_call:\n  post_tool_call: {command: x}\n");
        assert_eq!(
            parsed.warnings,
            ["hooks.post_tool_call must be a list of hook definitions; got dict"]
        );
    }

    #[test]
    fn entries_need_a_mapping_with_a_non_empty_command() {
        let parsed = parse_yaml(
            "hooks:\n  pre_tool_call:\n    - just-a-string\n    - {command: '   '}\n    - {command: 5}\n    - {timeout: 5}\n",
        );
        assert_eq!(
            parsed.warnings,
            [
                "hooks.pre_tool_call[0] must be a mapping with a 'command' key; got str",
                "hooks.pre_tool_call[1] is missing a non-empty 'command' field",
                "hooks.pre_tool_call[2] is missing a non-empty 'command' field",
                "hooks.pre_tool_call[3] is missing a non-empty 'command' field",
            ]
        );
    }

    #[test]
    fn a_claude_hook_keeps_its_matcher_where_claude_code_matches_and_reads_it_as_claude_does() {
        let parsed = parse_yaml(
            "hooks:\n  on_session_start:\n    - {command: a, format: claude, matcher: 'clear|compact'}\n  post_llm_call:\n    - {command: b, format: claude, matcher: x}\n  pre_tool_call:\n    - {command: c, format: claude, matcher: 'Edit.*'}\n",
        );
        let [start, stop, tool] = &parsed.specs[..] else {
            panic!("{:?}", parsed.specs)
        };
        assert!(!start.matches_event(|_| None), "a fresh session starts");
        assert!(stop.matcher.is_none());
        assert_eq!(parsed.warnings.len(), 1, "{:?}", parsed.warnings);
        assert!(
            parsed.warnings[0].starts_with("hooks.post_llm_call[0].matcher='x' will be ignored")
        );
        let patch = serde_json::json!({"tool_name": "patch"});
        assert!(tool.matches_event(|k| patch.get(k).and_then(|v| v.as_str())));
        assert!(tool.matches_tool(Some("patch")) && !tool.matches_tool(Some("terminal")));
    }

    #[test]
    fn async_is_for_one_shot_commands_and_never_a_guard() {
        let parsed = parse_yaml(
            "hooks:\n  pre_tool_call:\n    - {command: a, async: true, fail_closed: true}\n    - {command: b, async: true, persistent: true}\n    - {command: c, async: yes}\n",
        );
        let background: Vec<bool> = parsed.specs.iter().map(|s| s.background).collect();
        assert_eq!(background, [true, false, false]);
        assert_eq!(
            parsed.warnings,
            [
                "hooks.pre_tool_call[0]: fail_closed has no effect on an async hook, which never blocks; drop async: true to make it a guard",
                "hooks.pre_tool_call[1]: async applies to one-shot commands, not to a persistent command; the hook runs synchronously",
                "hooks.pre_tool_call[2].async must be true or false (got 'yes'); using false",
            ]
        );
    }

    #[test]
    fn a_non_string_matcher_is_ignored_with_a_warning() {
        let parsed = one_entry("{command: x, matcher: 5}");
        assert!(parsed.specs[0].matcher.is_none());
        assert_eq!(
            parsed.warnings,
            ["hooks.pre_tool_call[0].matcher must be a string regex; ignoring"]
        );
    }

    #[test]
    fn a_matcher_on_a_non_tool_event_is_dropped_with_the_reference_warning() {
        let parsed = parse_yaml("hooks:\n  pre_llm_call:\n    - {command: x, matcher: terminal}\n");
        assert!(parsed.specs[0].matcher.is_none());
        assert_eq!(
            parsed.warnings,
            [
                "hooks.pre_llm_call[0].matcher='terminal' will be ignored at runtime — the matcher field is only honored for pre_tool_call / post_tool_call.  The hook will fire on every pre_llm_call event."
            ]
        );
    }

    #[test]
    fn timeouts_follow_python_int_semantics() {
        let cases = [
            ("true", 1),
            ("2.9", 2),
            ("'30'", 30),
            ("' 45 '", 45),
            ("'1_0'", 10),
            ("300", 300),
        ];
        for (raw, want) in cases {
            let parsed = one_entry(&format!("{{command: x, timeout: {raw}}}"));
            assert_eq!(parsed.specs[0].timeout, want, "{raw}");
            assert!(parsed.warnings.is_empty(), "{raw}: {:?}", parsed.warnings);
        }
    }

    #[test]
    fn bad_timeouts_warn_with_the_reference_texts() {
        let cases = [
            (
                "thirty",
                "hooks.pre_tool_call[0].timeout must be an int (got 'thirty'); using default 60s",
                60,
            ),
            (
                "'2.5'",
                "hooks.pre_tool_call[0].timeout must be an int (got '2.5'); using default 60s",
                60,
            ),
            (
                "null",
                "hooks.pre_tool_call[0].timeout must be an int (got None); using default 60s",
                60,
            ),
            (
                "[1, 2]",
                "hooks.pre_tool_call[0].timeout must be an int (got [1, 2]); using default 60s",
                60,
            ),
            (
                "0",
                "hooks.pre_tool_call[0].timeout must be >=1; using default 60s",
                60,
            ),
            (
                "false",
                "hooks.pre_tool_call[0].timeout must be >=1; using default 60s",
                60,
            ),
            (
                "-5",
                "hooks.pre_tool_call[0].timeout must be >=1; using default 60s",
                60,
            ),
            (
                "301",
                "hooks.pre_tool_call[0].timeout=301s exceeds max 300s; clamping",
                300,
            ),
            (
                "'9999'",
                "hooks.pre_tool_call[0].timeout=9999s exceeds max 300s; clamping",
                300,
            ),
        ];
        for (raw, warning, want) in cases {
            let parsed = one_entry(&format!("{{command: x, timeout: {raw}}}"));
            assert_eq!(parsed.warnings, [warning], "{raw}");
            assert_eq!(parsed.specs[0].timeout, want, "{raw}");
        }
    }

    #[test]
    fn fail_closed_accepts_the_claude_alias_and_the_canonical_spelling_wins() {
        assert!(one_entry("{command: x, failClosed: true}").specs[0].fail_closed);
        assert!(
            !one_entry("{command: x, fail_closed: false, failClosed: true}").specs[0].fail_closed
        );
        let parsed = one_entry("{command: x, fail_closed: 'yes'}");
        assert!(!parsed.specs[0].fail_closed);
        assert_eq!(
            parsed.warnings,
            ["hooks.pre_tool_call[0].fail_closed must be a bool (got 'yes'); using false"]
        );
    }

    #[test]
    fn fail_closed_on_a_non_blocking_event_is_ignored_with_a_warning() {
        let parsed =
            parse_yaml("hooks:\n  post_tool_call:\n    - {command: x, fail_closed: true}\n");
        assert!(!parsed.specs[0].fail_closed);
        assert_eq!(
            parsed.warnings,
            [
                "hooks.post_tool_call[0].fail_closed=True will be ignored — only pre_tool_call hooks can block, so only they can fail closed"
            ]
        );
    }

    #[test]
    fn priority_must_be_an_integer() {
        assert_eq!(
            one_entry("{command: x, priority: -3}").specs[0].priority,
            -3
        );
        let parsed = one_entry("{command: x, priority: high}");
        assert_eq!(parsed.specs[0].priority, 0);
        assert_eq!(
            parsed.warnings,
            ["hooks.pre_tool_call[0].priority must be an int (got 'high'); using 0"]
        );
    }

    #[test]
    fn config_order_is_kept_across_events_and_entries() {
        let parsed = parse_yaml(
            "hooks:\n  post_tool_call:\n    - {command: a}\n    - {command: b}\n  pre_tool_call:\n    - {command: c}\n",
        );
        let order: Vec<_> = parsed.specs.iter().map(|s| s.command.as_str()).collect();
        assert_eq!(order, ["a", "b", "c"]);
    }

    #[test]
    fn the_invalid_matcher_warning_comes_after_the_timeout_warning() {
        let parsed = one_entry("{command: x, matcher: 'a(', timeout: 0}");
        assert_eq!(parsed.warnings.len(), 2);
        assert!(parsed.warnings[0].contains("timeout must be >=1"));
        assert!(parsed.warnings[1].starts_with("shell hook matcher 'a(' is invalid"));
    }

    #[test]
    fn a_non_string_event_key_is_reported_with_its_python_repr() {
        let parsed = parse_yaml("hooks:\n  5:\n    - command: x\n");
        assert!(parsed.warnings[0].starts_with("unknown hook event 5 in hooks: config (valid: "));
    }

    #[test]
    fn a_url_entry_is_an_http_hook_named_by_its_url() {
        let parsed = one_entry(
            "{url: ' http://127.0.0.1:8080/h ', headers: {Authorization: 'Bearer ${T}', X-Retries: 3}, allowed_env_vars: [T], timeout: 5}",
        );
        assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
        let spec = &parsed.specs[0];
        assert_eq!(spec.command, "http://127.0.0.1:8080/h");
        let http = spec.http.as_ref().unwrap();
        assert_eq!(
            http.headers,
            [
                ("Authorization".to_string(), "Bearer ${T}".to_string()),
                ("X-Retries".to_string(), "3".to_string())
            ]
        );
        assert_eq!(http.allowed_env_vars, ["T"]);
        assert_eq!(spec.timeout, 5);
    }

    #[test]
    fn bad_url_entries_are_skipped_or_corrected_with_a_warning() {
        for (entry, warning) in [
            (
                "{url: 'ftp://x/h'}",
                "hooks.pre_tool_call[0].url must be an http:// or https:// URL (got 'ftp://x/h') — skipped",
            ),
            (
                "{url: 5}",
                "hooks.pre_tool_call[0].url must be an http:// or https:// URL (got 5) — skipped",
            ),
            (
                "{url: 'http://x', command: './h.sh'}",
                "hooks.pre_tool_call[0] has both 'command' and 'url'; a hook is one or the other — skipped",
            ),
        ] {
            let parsed = one_entry(entry);
            assert!(parsed.specs.is_empty(), "{entry}");
            assert_eq!(parsed.warnings, [warning], "{entry}");
        }
        let parsed = one_entry(
            "{url: 'http://x', headers: {A: '${SECRET}', 'bad name': v}, persistent: true}",
        );
        assert_eq!(parsed.specs.len(), 1);
        assert!(!parsed.specs[0].persistent);
        assert_eq!(parsed.specs[0].http.as_ref().unwrap().headers.len(), 1);
        assert_eq!(parsed.warnings.len(), 3, "{:?}", parsed.warnings);
        assert!(parsed.warnings[0].contains("invalid header name 'bad name'"));
        assert!(parsed.warnings[1].contains("names ${SECRET}, which is not in allowed_env_vars"));
        assert!(parsed.warnings[2].contains("persistent and instances apply to commands"));
    }
}
