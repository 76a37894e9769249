//! Claude Code's hook protocol, spoken by shell hooks with `format: claude`.
//!
//! Most published hook scripts are written for Claude Code: they read `tool_name: "Bash"`
//! and `tool_input.command`, and answer with an exit code 2 or a JSON object holding
//! `decision`, `hookSpecificOutput.permissionDecision`, `updatedInput` or
//! `additionalContext`. A hook with `format: claude` gets that payload and is read with
//! those rules, so such a script runs unchanged.
//!
//! [`TOOLS`] is the one table between Hermes tools and Claude tools, used both ways: to
//! build `tool_name` and `tool_input`, to match a hook's `matcher`, and to map an
//! `updatedInput` back to Hermes argument names. [`EVENTS`] maps the events.
//!
//! Hermes events with no Claude equivalent (`on_session_finalize`, `on_session_reset`,
//! `pre_gateway_dispatch`, the approval, API-request and transform hooks) cannot take a
//! `format: claude` hook; config loading says so. Claude's `PreCompact` and
//! `Notification` have no Hermes event, so hooks for them cannot be imported.

use serde_json::{Map, Value, json};

use super::spawn::RunResult;
use super::wire::{self, Decision, Stdout};
use crate::run_control::{Permission, Stop};

/// How a Hermes argument's value becomes the Claude one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    /// The same value.
    Same,
    /// Seconds in Hermes, milliseconds in Claude (`terminal`'s `timeout`).
    SecondsToMs,
}

/// One Hermes tool and its Claude name and argument names.
#[derive(Debug)]
pub struct ToolMap {
    /// The Hermes tool.
    pub hermes: &'static str,
    /// Claude Code's name for it.
    pub claude: &'static str,
    /// `(hermes argument, claude argument, scale)`; arguments not listed keep their name.
    pub args: &'static [(&'static str, &'static str, Scale)],
}

/// The tools both agents have.
pub const TOOLS: &[ToolMap] = &[
    ToolMap {
        hermes: "terminal",
        claude: "Bash",
        args: &[
            ("command", "command", Scale::Same),
            ("timeout", "timeout", Scale::SecondsToMs),
            ("description", "description", Scale::Same),
        ],
    },
    ToolMap {
        hermes: "read_file",
        claude: "Read",
        args: &[
            ("path", "file_path", Scale::Same),
            ("offset", "offset", Scale::Same),
            ("limit", "limit", Scale::Same),
        ],
    },
    ToolMap {
        hermes: "write_file",
        claude: "Write",
        args: &[
            ("path", "file_path", Scale::Same),
            ("content", "content", Scale::Same),
        ],
    },
    ToolMap {
        hermes: "patch",
        claude: "Edit",
        args: &[
            ("path", "file_path", Scale::Same),
            ("old_string", "old_string", Scale::Same),
            ("new_string", "new_string", Scale::Same),
        ],
    },
    ToolMap {
        hermes: "search_files",
        claude: "Grep",
        args: &[
            ("pattern", "pattern", Scale::Same),
            ("path", "path", Scale::Same),
        ],
    },
    ToolMap {
        hermes: "glob_files",
        claude: "Glob",
        args: &[
            ("pattern", "pattern", Scale::Same),
            ("path", "path", Scale::Same),
        ],
    },
    ToolMap {
        hermes: "web_search",
        claude: "WebSearch",
        args: &[("query", "query", Scale::Same)],
    },
    ToolMap {
        hermes: "web_extract",
        claude: "WebFetch",
        args: &[
            ("url", "url", Scale::Same),
            ("prompt", "prompt", Scale::Same),
        ],
    },
    ToolMap {
        hermes: "delegate_task",
        claude: "Task",
        args: &[
            ("goal", "prompt", Scale::Same),
            ("context", "description", Scale::Same),
        ],
    },
];

/// `(hermes event, claude event)`. `post_tool_call` is `PostToolUseFailure` when the tool
/// failed.
pub const EVENTS: &[(&str, &str)] = &[
    ("pre_tool_call", "PreToolUse"),
    ("post_tool_call", "PostToolUse"),
    ("pre_llm_call", "UserPromptSubmit"),
    ("on_session_start", "SessionStart"),
    ("on_session_end", "SessionEnd"),
    ("post_llm_call", "Stop"),
    ("subagent_stop", "SubagentStop"),
    ("subagent_start", "SubagentStart"),
    ("api_request_error", "StopFailure"),
];

/// Claude's name for a Hermes event, if it has one.
///
/// ```
/// use hermes_host::shell::claude::event_name;
/// assert_eq!(event_name("pre_tool_call"), Some("PreToolUse"));
/// assert_eq!(event_name("pre_gateway_dispatch"), None);
/// ```
pub fn event_name(hermes: &str) -> Option<&'static str> {
    EVENTS.iter().find(|(h, _)| *h == hermes).map(|(_, c)| *c)
}

/// The Hermes event of a Claude event name (`PostToolUseFailure` is `post_tool_call`).
///
/// ```
/// assert_eq!(hermes_host::shell::claude::hermes_event("UserPromptSubmit"), Some("pre_llm_call"));
/// ```
pub fn hermes_event(claude: &str) -> Option<&'static str> {
    if claude == "PostToolUseFailure" {
        return Some("post_tool_call");
    }
    EVENTS.iter().find(|(_, c)| *c == claude).map(|(h, _)| *h)
}

/// The value a Claude hook's `matcher` is compared with on Hermes `event`, read from its
/// keyword arguments through `field`: what Claude Code matches on for that event, as this
/// host's payload says it. `None` for an event where Claude Code ignores matchers
/// (`UserPromptSubmit`, `Stop`).
///
/// | Claude event | matched on |
/// | --- | --- |
/// | `PreToolUse`, `PostToolUse(Failure)` | `tool_name` (`Bash`, `Write`, `mcp__...`) |
/// | `SessionStart` | `source`: `clear` for the session a gateway `/new` or `/reset` started, else `startup` (no resume or compaction here) |
/// | `SessionEnd` | `reason`: always `other` here |
/// | `SubagentStart`, `SubagentStop` | `agent_type`: the child's role |
/// | `StopFailure` | `error`: `rate_limit`, `authentication_failed`, ... |
///
/// ```
/// use hermes_host::shell::claude::matched_value;
/// let kwargs = serde_json::json!({"tool_name": "terminal", "reason": "rate_limit"});
/// let field = |k: &str| kwargs.get(k).and_then(|v| v.as_str());
/// assert_eq!(matched_value("pre_tool_call", field), Some("Bash"));
/// assert_eq!(matched_value("on_session_start", field), Some("startup"));
/// assert_eq!(matched_value("api_request_error", field), Some("rate_limit"));
/// assert_eq!(matched_value("pre_llm_call", field), None);
/// ```
pub fn matched_value<'a>(event: &str, field: impl Fn(&str) -> Option<&'a str>) -> Option<&'a str> {
    match event {
        "pre_tool_call" | "post_tool_call" => field("tool_name").map(tool_name),
        "on_session_start" => Some(crate::run_control::session_source(
            field("session_id").unwrap_or_default(),
        )),
        "on_session_end" => Some(SESSION_END_REASON),
        "subagent_start" | "subagent_stop" => Some(field("child_role").unwrap_or_default()),
        "api_request_error" => Some(error_kind(field("reason").unwrap_or_default())),
        _ => None,
    }
}

/// Whether Claude Code matches on Hermes `event` at all (see [`matched_value`]).
///
/// ```
/// use hermes_host::shell::claude::matcher_applies;
/// assert!(matcher_applies("pre_tool_call") && matcher_applies("on_session_start"));
/// assert!(!matcher_applies("post_llm_call"));
/// ```
pub fn matcher_applies(event: &str) -> bool {
    matched_value(event, |_| Some("")).is_some()
}

/// `SessionEnd`'s `reason`: none of Claude's named reasons is a Hermes run's end.
const SESSION_END_REASON: &str = "other";

/// Claude's `StopFailure` error kind for a Hermes `api_request_error` reason.
fn error_kind(reason: &str) -> &'static str {
    match reason {
        "rate_limit" => "rate_limit",
        "auth" => "authentication_failed",
        "bad_request" => "invalid_request",
        "server_error" => "server_error",
        _ => "unknown",
    }
}

fn tool(hermes: &str) -> Option<&'static ToolMap> {
    TOOLS.iter().find(|t| t.hermes == hermes)
}

/// Claude's name for a Hermes tool; an unmapped tool keeps its name.
///
/// ```
/// use hermes_host::shell::claude::tool_name;
/// assert_eq!(tool_name("write_file"), "Write");
/// assert_eq!(tool_name("mcp__github__create_issue"), "mcp__github__create_issue");
/// ```
pub fn tool_name(hermes: &str) -> &str {
    tool(hermes).map_or(hermes, |t| t.claude)
}

/// The Hermes tool of a Claude tool name; an unmapped name is kept.
///
/// ```
/// assert_eq!(hermes_host::shell::claude::hermes_tool_name("Bash"), "terminal");
/// ```
pub fn hermes_tool_name(claude: &str) -> &str {
    TOOLS
        .iter()
        .find(|t| t.claude == claude)
        .map_or(claude, |t| t.hermes)
}

fn scale(value: &Value, scale: Scale, to_claude: bool) -> Value {
    match (scale, value.as_f64()) {
        (Scale::SecondsToMs, Some(n)) if to_claude => json!((n * 1000.0).round() as i64),
        (Scale::SecondsToMs, Some(n)) => {
            let seconds = n / 1000.0;
            if seconds.fract() == 0.0 {
                json!(seconds as i64)
            } else {
                json!(seconds)
            }
        }
        _ => value.clone(),
    }
}

/// A Hermes tool's arguments as Claude's `tool_input`.
///
/// ```
/// use hermes_host::shell::claude::tool_input;
/// let args = serde_json::json!({"command": "ls", "timeout": 60});
/// let input = tool_input("terminal", args.as_object().unwrap());
/// assert_eq!(serde_json::Value::Object(input), serde_json::json!({"command": "ls", "timeout": 60000}));
/// ```
pub fn tool_input(hermes_tool: &str, args: &Map<String, Value>) -> Map<String, Value> {
    let Some(map) = tool(hermes_tool) else {
        return args.clone();
    };
    args.iter()
        .map(|(k, v)| match map.args.iter().find(|(h, _, _)| h == k) {
            Some((_, c, s)) => ((*c).to_string(), scale(v, *s, true)),
            None => (k.clone(), v.clone()),
        })
        .collect()
}

/// Claude's `tool_input` (an `updatedInput`) as the Hermes tool's arguments.
///
/// ```
/// use hermes_host::shell::claude::hermes_args;
/// let input = serde_json::json!({"file_path": "/tmp/x", "content": "hi"});
/// let args = hermes_args("write_file", input.as_object().unwrap());
/// assert_eq!(serde_json::Value::Object(args), serde_json::json!({"path": "/tmp/x", "content": "hi"}));
/// ```
pub fn hermes_args(hermes_tool: &str, input: &Map<String, Value>) -> Map<String, Value> {
    let Some(map) = tool(hermes_tool) else {
        return input.clone();
    };
    input
        .iter()
        .map(|(k, v)| match map.args.iter().find(|(_, c, _)| c == k) {
            Some((h, _, s)) => ((*h).to_string(), scale(v, *s, false)),
            None => (k.clone(), v.clone()),
        })
        .collect()
}

/// The Hermes name of a Claude tool; an unknown name is kept.
///
/// ```
/// assert_eq!(hermes_host::shell::claude::hermes_tool("Bash"), "terminal");
/// ```
pub fn hermes_tool(claude: &str) -> &str {
    TOOLS
        .iter()
        .find(|t| t.claude == claude)
        .map_or(claude, |t| t.hermes)
}

/// The top-level keys of a Claude payload.
pub const PAYLOAD_KEYS: &[&str] = &[
    "session_id",
    "transcript_path",
    "cwd",
    "hook_event_name",
    "permission_mode",
    "tool_name",
    "tool_input",
    "tool_use_id",
    "tool_response",
    "error",
    "prompt",
    "source",
    "reason",
    "stop_hook_active",
    "agent_id",
    "agent_type",
];

/// A Claude-shaped payload's keys as Hermes keyword arguments: `tool_name` and
/// `tool_input` mapped through [`TOOLS`], `tool_use_id` as `tool_call_id`,
/// `tool_response` as `result`, `prompt` as `user_message`, `agent_type` and `agent_id`
/// as `child_role` and `child_subagent_id`. Keys the host fills itself
/// (`cwd`, `transcript_path`, `hook_event_name`, ...) are dropped; others are kept.
///
/// ```
/// let claude = serde_json::json!({"tool_name": "Bash", "tool_input": {"command": "ls", "timeout": 5000}});
/// let kwargs = hermes_host::shell::claude::hermes_kwargs(claude.as_object().unwrap());
/// assert_eq!(serde_json::Value::Object(kwargs), serde_json::json!({"tool_name": "terminal", "args": {"command": "ls", "timeout": 5}}));
/// ```
pub fn hermes_kwargs(payload: &Map<String, Value>) -> Map<String, Value> {
    let tool = payload
        .get("tool_name")
        .and_then(Value::as_str)
        .map(hermes_tool)
        .unwrap_or_default()
        .to_string();
    let mut out = Map::new();
    for (key, value) in payload {
        match key.as_str() {
            "tool_name" => {
                out.insert("tool_name".into(), json!(tool));
            }
            "tool_input" => {
                let args = value
                    .as_object()
                    .map(|i| hermes_args(&tool, i))
                    .unwrap_or_default();
                out.insert("args".into(), Value::Object(args));
            }
            "tool_use_id" => {
                out.insert("tool_call_id".into(), value.clone());
            }
            "tool_response" => {
                let text = value
                    .as_str()
                    .map_or_else(|| value.to_string(), str::to_string);
                out.insert("result".into(), json!(text));
            }
            "prompt" => {
                out.insert("user_message".into(), value.clone());
            }
            "agent_type" => {
                out.insert("child_role".into(), value.clone());
            }
            "agent_id" => {
                out.insert("child_subagent_id".into(), value.clone());
            }
            "error" => {
                out.insert("error_message".into(), value.clone());
                out.insert("status".into(), json!("error"));
            }
            "cwd" | "transcript_path" | "hook_event_name" | "permission_mode" | "source"
            | "reason" | "stop_hook_active" => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    out
}

/// What the payload needs besides the event's keyword arguments.
#[derive(Clone, Debug, Default)]
pub struct Context {
    /// The directory the agent works in.
    pub cwd: String,
    /// The session's transcript file, when it has one.
    pub transcript_path: Option<String>,
    /// Claude's `permission_mode` for how this run approves tools (`default`,
    /// `bypassPermissions`, ...).
    pub permission_mode: String,
}

/// The Claude payload of Hermes `event` with keyword arguments `kwargs`.
///
/// ```
/// use hermes_host::shell::claude::{payload, Context};
/// let kwargs = serde_json::json!({"tool_name": "terminal", "args": {"command": "rm -rf /"}, "session_id": "s1", "tool_call_id": "c1"});
/// let p = payload("pre_tool_call", kwargs.as_object().unwrap(), &Context::default());
/// assert_eq!(p["hook_event_name"], "PreToolUse");
/// assert_eq!(p["tool_name"], "Bash");
/// assert_eq!(p["tool_input"]["command"], "rm -rf /");
/// assert_eq!(p["tool_use_id"], "c1");
/// ```
pub fn payload(event: &str, kwargs: &Map<String, Value>, context: &Context) -> Value {
    let text = |key: &str| kwargs.get(key).and_then(Value::as_str).unwrap_or_default();
    let failed = event == "post_tool_call" && text("status") == "error";
    let name = match (event_name(event), failed) {
        (_, true) => "PostToolUseFailure",
        (Some(name), false) => name,
        (None, false) => event,
    };
    let mut out = Map::new();
    out.insert("session_id".into(), json!(session_of(kwargs)));
    out.insert(
        "transcript_path".into(),
        context
            .transcript_path
            .as_deref()
            .map_or(Value::Null, |p| json!(p)),
    );
    out.insert("cwd".into(), json!(context.cwd));
    out.insert("permission_mode".into(), json!(context.permission_mode));
    out.insert("hook_event_name".into(), json!(name));
    if event == "pre_tool_call" || event == "post_tool_call" {
        let hermes_tool = text("tool_name");
        let args = match kwargs.get("args") {
            Some(Value::Object(args)) => args.clone(),
            Some(Value::String(s)) => serde_json::from_str(s).unwrap_or_default(),
            _ => Map::new(),
        };
        out.insert("tool_name".into(), json!(tool_name(hermes_tool)));
        let mut input = tool_input(hermes_tool, &args);
        absolute_paths(&mut input, &context.cwd);
        out.insert("tool_input".into(), Value::Object(input));
        out.insert("tool_use_id".into(), json!(text("tool_call_id")));
        if event == "post_tool_call" {
            let result = text("result");
            let response = serde_json::from_str::<Value>(result)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| json!(result));
            out.insert("tool_response".into(), response);
            if failed {
                out.insert("error".into(), json!(text("error_message")));
            }
        }
    }
    match event {
        "pre_llm_call" => {
            out.insert("prompt".into(), json!(text("user_message")));
        }
        "on_session_start" => {
            out.insert(
                "source".into(),
                json!(crate::run_control::session_source(session_of(kwargs))),
            );
        }
        "on_session_end" => {
            out.insert("reason".into(), json!(SESSION_END_REASON));
        }
        "post_llm_call" => {
            let active = crate::run_control::stop_hook_active(session_of(kwargs));
            out.insert("stop_hook_active".into(), json!(active));
        }
        "subagent_stop" => {
            let active = crate::run_control::stop_hook_active(session_of(kwargs));
            out.insert("stop_hook_active".into(), json!(active));
            // What a matcher on SubagentStop compares, and the child's answer.
            out.insert("agent_type".into(), json!(text("child_role")));
            out.insert(
                "last_assistant_message".into(),
                json!(text("child_summary")),
            );
        }
        "subagent_start" => {
            out.insert("agent_id".into(), json!(text("child_subagent_id")));
            out.insert("agent_type".into(), json!(text("child_role")));
        }
        "api_request_error" => {
            // Claude's StopFailure names the error by its kind.
            out.insert("error".into(), json!(error_kind(text("reason"))));
            out.insert("error_details".into(), json!(text("error")));
            out.insert("last_assistant_message".into(), json!(""));
        }
        _ => {}
    }
    Value::Object(out)
}

/// Makes the path keys of a Claude `tool_input` (`file_path`, `path`, `notebook_path`)
/// absolute, as Claude Code always passes them: a relative path is joined to the agent's
/// directory `cwd`, exactly as the tools join it, and nothing is folded. Folding `..` here
/// would lie twice: `ref/../x` with `ref` a symlink is not `<cwd>/x` to the kernel, and a
/// guard that looks for `..` would never see the traversal. The tool opens this very
/// string, so what the hook judged is what is touched.
///
/// ```
/// let mut input = serde_json::json!({"file_path": "references/../secrets/key.pem", "content": "x"});
/// hermes_host::shell::claude::absolute_paths(input.as_object_mut().unwrap(), "/srv/proj");
/// assert_eq!(input["file_path"], "/srv/proj/references/../secrets/key.pem");
/// ```
pub fn absolute_paths(input: &mut Map<String, Value>, cwd: &str) {
    for key in ["file_path", "path", "notebook_path"] {
        let Some(Value::String(path)) = input.get_mut(key) else {
            continue;
        };
        if path.is_empty() || path.starts_with('~') || !cwd.starts_with('/') {
            continue;
        }
        let joined = std::path::Path::new(cwd).join(path.as_str());
        *path = joined.display().to_string();
    }
}

/// The session a firing belongs to: `session_id`, else `parent_session_id` (SubagentStop
/// fires on the parent, whose session a continuation keeps working).
pub fn session_of(kwargs: &Map<String, Value>) -> &str {
    ["session_id", "parent_session_id"]
        .iter()
        .filter_map(|k| kwargs.get(*k).and_then(Value::as_str))
        .find(|s| !s.is_empty())
        .unwrap_or_default()
}

/// What a Claude-format hook's run means.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answer {
    /// The decision in Hermes terms, if any.
    pub decision: Option<Decision>,
    /// `systemMessage`: a line for the user.
    pub system_message: Option<String>,
    /// `continue: false` (the run ends) or a blocked prompt (the turn ends), with the
    /// reason the user sees.
    pub stop: Option<Stop>,
    /// `permissionDecision: ask` (the call goes through the host's approval step) or
    /// `allow` (it skips that step).
    pub permission: Option<Permission>,
    /// What the run deserves to have logged.
    pub warnings: Vec<String>,
    /// PostToolUse: what the model is told after the tool's output (`additionalContext`,
    /// the reason of `decision: "block"` or of exit 2).
    pub feedback: Vec<String>,
    /// Stop and SubagentStop: the agent keeps working, with this as its next instruction
    /// (`decision: "block"` with `reason`, or exit 2 with stderr).
    pub continue_with: Option<String>,
}

/// Whether `event` reads plain stdout as context (Claude: UserPromptSubmit and
/// SessionStart; here the context goes to the turn's `pre_llm_call`).
fn plain_stdout_is_context(event: &str) -> bool {
    event == "pre_llm_call" || event == "on_session_start"
}

/// Reads a finished run with Claude Code's rules, for Hermes `event` with the tool
/// `hermes_tool` (for mapping an `updatedInput` back).
///
/// - exit 2: block, with stderr as the reason;
/// - `decision: "block"` with `reason`: block;
/// - `hookSpecificOutput.permissionDecision`: `deny` blocks with its reason; `ask` and
///   `allow` are reported in [`Answer::permission`], for the host's approval step;
/// - `hookSpecificOutput.updatedInput`: a modify, with Hermes argument names;
/// - `additionalContext`, or plain stdout with exit 0 on prompt and session-start events:
///   context;
/// - `continue: false` with `stopReason`: [`Answer::stop`] ending the run (and a block on
///   tool events, so the call does not run); exit 2 or `decision: "block"` on a prompt
///   event: [`Answer::stop`] ending the turn, so the model never sees the prompt;
/// - on PostToolUse, `additionalContext` and the reason of a block or of exit 2:
///   [`Answer::feedback`] for the model;
/// - on Stop and SubagentStop, a block or exit 2: [`Answer::continue_with`];
/// - `systemMessage`: [`Answer::system_message`]. `suppressOutput` changes nothing here:
///   stdout is never shown.
///
/// ```
/// use hermes_host::shell::{claude::decide, spawn::RunResult, wire::Decision};
/// let run = RunResult { returncode: Some(2), stderr: "rm is not allowed".into(), ..Default::default() };
/// assert_eq!(decide("pre_tool_call", "terminal", &run).decision, Some(Decision::Block("rm is not allowed".into())));
/// ```
pub fn decide(event: &str, hermes_tool: &str, run: &RunResult) -> Answer {
    let mut answer = Answer::default();
    let rc = run.returncode.unwrap_or(0);
    let tool_event = event == "pre_tool_call";
    if rc == 2 {
        let reason = run.stderr.trim();
        let reason = if reason.is_empty() {
            "blocked by a hook (exit code 2)"
        } else {
            reason
        };
        if tool_event {
            answer.decision = Some(Decision::Block(reason.to_string()));
        } else if event == "pre_llm_call" {
            answer.stop = Some(Stop::turn(reason));
        } else if event == "post_tool_call" {
            answer.feedback.push(reason.to_string());
        } else if event == "post_llm_call" || event == "subagent_stop" {
            answer.continue_with = Some(reason.to_string());
        } else {
            answer
                .warnings
                .push(format!("claude-format hook exited 2 on {event}: {reason}"));
        }
        return answer;
    }
    let value = match wire::read_stdout(&run.stdout) {
        Stdout::Empty => return answer,
        Stdout::NotJson(_) if rc == 0 && plain_stdout_is_context(event) => {
            answer.decision = Some(Decision::Context(run.stdout.trim_end().to_string()));
            return answer;
        }
        Stdout::NotJson(head) => {
            if rc == 0 {
                answer.warnings.push(format!(
                    "claude-format hook stdout was not JSON on {event}: {head}"
                ));
            }
            return answer;
        }
        Stdout::Json(value) => value,
    };
    let specific = value
        .get("hookSpecificOutput")
        .cloned()
        .unwrap_or(Value::Null);
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    answer.system_message = text(&value, "systemMessage");
    if value.get("continue") == Some(&Value::Bool(false)) {
        let reason = text(&value, "stopReason").unwrap_or_else(|| "a hook stopped the run".into());
        if tool_event {
            answer.decision = Some(Decision::Block(reason.clone()));
        }
        answer.stop = Some(Stop::run(reason));
        return answer;
    }
    let permission = text(&specific, "permissionDecision");
    let permission_reason = text(&specific, "permissionDecisionReason");
    match permission.as_deref() {
        Some("deny") if tool_event => {
            answer.decision = Some(Decision::Block(
                permission_reason.unwrap_or_else(|| "denied by a hook".into()),
            ));
            return answer;
        }
        Some("ask") if tool_event => {
            let why = permission_reason.unwrap_or_else(|| "a hook asks for approval".into());
            answer.permission = Some(Permission::Ask(why));
        }
        Some("allow") if tool_event => answer.permission = Some(Permission::Allow),
        _ => {}
    }
    if value.get("decision").and_then(Value::as_str) == Some("block") {
        let reason = text(&value, "reason").unwrap_or_else(|| "blocked by a hook".into());
        match event {
            "pre_tool_call" => {
                answer.decision = Some(Decision::Block(reason));
                return answer;
            }
            "pre_llm_call" => {
                answer.stop = Some(Stop::turn(reason));
                return answer;
            }
            "post_tool_call" => answer.feedback.push(reason),
            "post_llm_call" | "subagent_stop" => {
                answer.continue_with = Some(reason);
                return answer;
            }
            _ => {}
        }
    }
    if tool_event {
        if let Some(Value::Object(input)) = specific.get("updatedInput") {
            answer.decision = Some(Decision::Modify(hermes_args(hermes_tool, input)));
            return answer;
        }
    }
    if let Some(context) = text(&specific, "additionalContext") {
        if event == "pre_llm_call" || event == "on_session_start" {
            answer.decision = Some(Decision::Context(context));
        } else if event == "post_tool_call" {
            answer.feedback.push(context);
        }
    }
    answer
}

/// Whether `command` needs a shell to mean what it says: an operator (`|`, `&`, `;`, `<`,
/// `>`, `(`, `)`), a line break, a glob (`*`, `?`, `[`), an expansion (`$`, a backquote),
/// or a word starting with `~` (after the first) or `#` (a comment), outside single quotes
/// and not escaped (inside double quotes only `$` and the backquote count, as in a
/// shell). Claude Code runs every hook command through a shell, and
/// published hooks rely on it (`jq -r '.tool_input.file_path' | xargs prettier --write`);
/// Hermes runs a `format: claude` command through one only when it needs it, since a
/// shell costs a process start, and runs the others as words, as it runs its own hooks.
///
/// ```
/// use hermes_host::shell::claude::needs_shell;
/// assert!(needs_shell("jq -r '.tool_input.file_path' | xargs prettier --write"));
/// assert!(needs_shell("make lint && make test"));
/// assert!(needs_shell("echo \"$HOME\""));
/// assert!(!needs_shell("\"/home/me/proj\"/.claude/hooks/check.sh --strict"));
/// assert!(!needs_shell("python3 -c 'import sys; print(sys.stdin.read())'"));
/// assert!(!needs_shell("echo a\\|b"));
/// assert!(needs_shell("python3 ~/hooks/guard.py"));
/// assert!(!needs_shell("~/hooks/guard.sh --x a~b"));
/// assert!(needs_shell("./guard.sh # the project's guard"));
/// ```
pub fn needs_shell(command: &str) -> bool {
    #[derive(PartialEq)]
    enum In {
        Plain,
        Single,
        Double,
    }
    let mut state = In::Plain;
    let mut chars = command.chars();
    // Whether the next character starts a word, and whether a word was seen: Hermes
    // expands a `~` that starts the command itself, a shell one that starts any word.
    let (mut word_start, mut first_word) = (true, true);
    while let Some(c) = chars.next() {
        let starts_word =
            std::mem::replace(&mut word_start, state == In::Plain && c.is_whitespace());
        if starts_word && !c.is_whitespace() {
            if c == '#' || (c == '~' && !first_word) {
                return true;
            }
            first_word = false;
        }
        match (&state, c) {
            (In::Plain | In::Double, '\\') => {
                chars.next();
            }
            (In::Plain, '\'') => state = In::Single,
            (In::Single, '\'') => state = In::Plain,
            (In::Plain, '"') => state = In::Double,
            (In::Double, '"') => state = In::Plain,
            (In::Plain | In::Double, '$' | '`') => return true,
            (In::Plain, '|' | '&' | ';' | '<' | '>' | '(' | ')' | '\n' | '*' | '?' | '[') => {
                return true;
            }
            _ => {}
        }
    }
    false
}

/// The relative script a command written for a shell names after changing directory
/// (`cd tools && ./check.sh`), if any. Consent pins the script word of a command as found
/// from the directory hermes starts in, so for such a command it pins a file other than
/// the one the shell runs; the caller warns. The test is on the text (a `cd` or `pushd`
/// starting any part between `;`, `&`, `|`, `(` and line breaks), good enough for a
/// warning.
///
/// ```
/// use hermes_host::shell::claude::script_after_cd;
/// assert_eq!(script_after_cd("cd tools && ./check.sh --strict").as_deref(), Some("./check.sh"));
/// assert_eq!(script_after_cd("cd /srv/app && /srv/app/check.sh"), None);
/// assert_eq!(script_after_cd("./check.sh && cd .."), Some("./check.sh".to_string()));
/// assert_eq!(script_after_cd("make lint && make test"), None);
/// ```
pub fn script_after_cd(command: &str) -> Option<String> {
    if !needs_shell(command) {
        return None;
    }
    let changes_dir = command
        .split([';', '&', '|', '(', '\n'])
        .map(str::trim_start)
        .any(|part| {
            let first = part.split_whitespace().next().unwrap_or_default();
            first == "cd" || first == "pushd"
        });
    if !changes_dir {
        return None;
    }
    let script = super::script::script_path(command);
    let relative = !script.starts_with('/') && !script.starts_with('~');
    let names_a_file = script.contains('/') || script.contains('.');
    (relative && names_a_file && script != "cd" && script != "pushd").then_some(script)
}

/// The argv a `format: claude` command runs as: `[shell(), "-c", command]` when it
/// [`needs_shell`], else its words, as Hermes runs its own hooks.
///
/// # Errors
///
/// The words' error ([`super::spawn::argv`]): an unbalanced quote, or no word.
///
/// ```
/// use hermes_host::shell::claude::{argv, shell};
/// assert_eq!(argv("./check.sh --strict").unwrap(), ["./check.sh", "--strict"]);
/// assert_eq!(argv("make lint && make test").unwrap(), [shell(), "-c", "make lint && make test"]);
/// ```
pub fn argv(command: &str) -> Result<Vec<String>, String> {
    if needs_shell(command) {
        Ok(vec![shell().to_string(), "-c".into(), command.to_string()])
    } else {
        super::spawn::argv(command)
    }
}

/// The argv a `format: claude` hook command runs as: `[shell(), "-c", command]`, the
/// command exactly as written, as Claude Code runs every hook command through a shell.
/// Nothing in it is split or rewritten: `env NAME=/x cmd`, `bash -c '...'`, a quoted path
/// with spaces and `./script.sh` all mean what they mean in Claude Code.
///
/// # Errors
///
/// An empty command.
///
/// ```
/// use hermes_host::shell::claude::{argv_as_written, shell};
/// assert_eq!(argv_as_written("./check.sh --strict").unwrap(), [shell(), "-c", "./check.sh --strict"]);
/// ```
pub fn argv_as_written(command: &str) -> Result<Vec<String>, String> {
    if command.trim().is_empty() {
        return Err("the command is empty".into());
    }
    Ok(vec![shell().to_string(), "-c".into(), command.to_string()])
}

/// The shell a `format: claude` command that [`needs_shell`] runs through: `bash`, which
/// Claude Code uses, when it is on `PATH`, else `/bin/sh`. Looked up once per process.
pub fn shell() -> &'static str {
    static SHELL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SHELL.get_or_init(|| {
        let on_path = std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("bash"))
                .find(|bash| {
                    use std::os::unix::fs::PermissionsExt as _;
                    std::fs::metadata(bash)
                        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                })
        });
        on_path.map_or_else(|| "/bin/sh".to_string(), |bash| bash.display().to_string())
    })
}

/// `command` with every `$CLAUDE_PROJECT_DIR` and `${CLAUDE_PROJECT_DIR}` replaced by
/// `dir`, as the shell Claude Code runs a hook command with would expand it: not inside
/// single quotes, not after a backslash. The canonical project hook,
/// `"$CLAUDE_PROJECT_DIR"/.claude/hooks/check.sh`, names its script this way. Hermes
/// splits a command into words without a shell, so the variable is replaced here, before
/// consent resolves and pins the script the command names. Inside the replacement, `\` and
/// `"` are escaped, so that a directory holding them reads back as itself when the command
/// is split.
///
/// ```
/// use std::path::Path;
/// use hermes_host::shell::claude::expand_project_dir;
/// let dir = Path::new("/home/me/proj");
/// assert_eq!(
///     expand_project_dir("\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/check.sh", dir),
///     "\"/home/me/proj\"/.claude/hooks/check.sh"
/// );
/// assert_eq!(expand_project_dir("${CLAUDE_PROJECT_DIR}/x.py --y", dir), "/home/me/proj/x.py --y");
/// assert_eq!(expand_project_dir("echo '$CLAUDE_PROJECT_DIR' \\$CLAUDE_PROJECT_DIR", dir), "echo '$CLAUDE_PROJECT_DIR' \\$CLAUDE_PROJECT_DIR");
/// assert_eq!(expand_project_dir("$CLAUDE_PROJECT_DIRS", dir), "$CLAUDE_PROJECT_DIRS");
/// ```
pub fn expand_project_dir(command: &str, dir: &std::path::Path) -> String {
    expand_var(command, "CLAUDE_PROJECT_DIR", dir)
}

/// [`expand_project_dir`] for any variable naming a directory: `$NAME` and `${NAME}`
/// replaced by `dir` where a shell would expand them. A Claude Code plugin's commands name
/// their files through `${CLAUDE_PLUGIN_ROOT}`.
///
/// ```
/// use std::path::Path;
/// use hermes_host::shell::claude::expand_var;
/// let root = Path::new("/home/me/.hermes/plugins/safety");
/// assert_eq!(
///     expand_var("python3 \"${CLAUDE_PLUGIN_ROOT}/hooks/check.py\"", "CLAUDE_PLUGIN_ROOT", root),
///     "python3 \"/home/me/.hermes/plugins/safety/hooks/check.py\""
/// );
/// ```
pub fn expand_var(command: &str, name: &str, dir: &std::path::Path) -> String {
    let value = dir
        .display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    let mut out = String::with_capacity(command.len());
    let (mut single, mut double, mut escaped) = (false, false, false);
    let mut rest = command;
    while let Some(c) = rest.chars().next() {
        let after = &rest[c.len_utf8()..];
        if escaped {
            escaped = false;
        } else if c == '\\' && !single {
            escaped = true;
        } else if c == '\'' && !double {
            single = !single;
        } else if c == '"' && !single {
            double = !double;
        } else if c == '$' && !single {
            let braced = after
                .strip_prefix('{')
                .and_then(|a| a.strip_prefix(name))
                .and_then(|a| a.strip_prefix('}'));
            let bare = after
                .strip_prefix(name)
                .filter(|a| !a.starts_with(|n: char| n.is_ascii_alphanumeric() || n == '_'));
            if let Some(tail) = braced.or(bare) {
                out.push_str(&value);
                rest = tail;
                continue;
            }
        }
        out.push(c);
        rest = after;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rc: i32, stdout: &str, stderr: &str) -> RunResult {
        RunResult {
            returncode: Some(rc),
            stdout: stdout.into(),
            stderr: stderr.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_failed_request_is_claude_stop_failure_and_a_child_subagent_start() {
        let kwargs = json!({"session_id": "s1", "reason": "rate_limit", "error": "429 slow down"});
        let p = payload(
            "api_request_error",
            kwargs.as_object().unwrap(),
            &Context::default(),
        );
        assert_eq!(p["hook_event_name"], "StopFailure");
        assert_eq!(
            (p["error"].as_str(), p["error_details"].as_str()),
            (Some("rate_limit"), Some("429 slow down"))
        );
        let kwargs =
            json!({"parent_session_id": "p1", "child_subagent_id": "sub-1", "child_role": "leaf"});
        let p = payload(
            "subagent_start",
            kwargs.as_object().unwrap(),
            &Context::default(),
        );
        assert_eq!(p["hook_event_name"], "SubagentStart");
        assert_eq!(
            (
                p["session_id"].as_str(),
                p["agent_id"].as_str(),
                p["agent_type"].as_str()
            ),
            (Some("p1"), Some("sub-1"), Some("leaf"))
        );
    }

    #[test]
    fn every_mapped_tool_round_trips_its_arguments() {
        for map in TOOLS {
            let args: Map<String, Value> = map
                .args
                .iter()
                .map(|(h, _, _)| ((*h).to_string(), json!(7)))
                .chain([("extra".to_string(), json!("kept"))])
                .collect();
            let input = tool_input(map.hermes, &args);
            for (_, c, _) in map.args {
                assert!(input.contains_key(*c), "{} lost {c}", map.hermes);
            }
            assert_eq!(input["extra"], "kept");
            assert_eq!(hermes_args(map.hermes, &input), args, "{}", map.hermes);
        }
        let unmapped = json!({"a": 1});
        assert_eq!(
            tool_input("mcp__x", unmapped.as_object().unwrap()),
            *unmapped.as_object().unwrap()
        );
    }

    #[test]
    fn names_are_unique_both_ways() {
        for (i, a) in TOOLS.iter().enumerate() {
            for b in &TOOLS[i + 1..] {
                assert!(a.hermes != b.hermes && a.claude != b.claude);
            }
        }
        for (h, c) in EVENTS {
            assert_eq!(hermes_event(c), Some(*h));
        }
    }

    #[test]
    fn the_payload_of_each_event_has_claude_keys() {
        let ctx = Context {
            cwd: "/w".into(),
            transcript_path: Some("/h/sessions/s.jsonl".into()),
            permission_mode: "default".into(),
        };
        let post = json!({"tool_name": "read_file", "args": {"path": "a.txt"}, "result": "{\"content\": \"x\"}", "status": "error", "error_message": "boom", "session_id": "s"});
        let p = payload("post_tool_call", post.as_object().unwrap(), &ctx);
        assert_eq!(p["hook_event_name"], "PostToolUseFailure");
        assert_eq!(p["tool_input"], json!({"file_path": "/w/a.txt"}));
        assert_eq!(p["tool_response"], json!({"content": "x"}));
        assert_eq!(p["transcript_path"], "/h/sessions/s.jsonl");
        let prompt = json!({"user_message": "hi", "session_id": "s"});
        let p = payload("pre_llm_call", prompt.as_object().unwrap(), &ctx);
        assert_eq!(
            (p["hook_event_name"].as_str(), p["prompt"].as_str()),
            (Some("UserPromptSubmit"), Some("hi"))
        );
    }

    #[test]
    fn answers_follow_claude_semantics() {
        let d = |event: &str, r: RunResult| decide(event, "write_file", &r);
        assert_eq!(
            d("pre_tool_call", run(2, "", "")).decision,
            Some(Decision::Block("blocked by a hook (exit code 2)".into()))
        );
        let deny = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": ".env is secret"}}"#;
        assert_eq!(
            d("pre_tool_call", run(0, deny, "")).decision,
            Some(Decision::Block(".env is secret".into()))
        );
        let ask = r#"{"hookSpecificOutput": {"permissionDecision": "ask", "permissionDecisionReason": "risky"}}"#;
        let a = d("pre_tool_call", run(0, ask, ""));
        assert_eq!(
            (a.permission, a.decision),
            (Some(Permission::Ask("risky".into())), None)
        );
        let allow = r#"{"hookSpecificOutput": {"permissionDecision": "allow"}}"#;
        let a = d("pre_tool_call", run(0, allow, ""));
        assert_eq!((a.permission, a.decision), (Some(Permission::Allow), None));
        let updated = r#"{"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"file_path": "/safe/x", "content": "c"}}}"#;
        assert_eq!(
            d("pre_tool_call", run(0, updated, "")).decision,
            Some(Decision::Modify(
                json!({"path": "/safe/x", "content": "c"})
                    .as_object()
                    .unwrap()
                    .clone()
            ))
        );
        assert_eq!(
            d("pre_llm_call", run(0, "Today is Tuesday.\n", "")).decision,
            Some(Decision::Context("Today is Tuesday.".into()))
        );
        assert_eq!(d("pre_tool_call", run(0, "not json", "")).decision, None);
        let stop =
            r#"{"continue": false, "stopReason": "budget spent", "systemMessage": "stopping"}"#;
        let a = d("pre_tool_call", run(0, stop, ""));
        assert_eq!(
            (a.stop, a.system_message.as_deref()),
            (Some(Stop::run("budget spent")), Some("stopping"))
        );
        assert_eq!(a.decision, Some(Decision::Block("budget spent".into())));
        let context = r#"{"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": "branch main"}}"#;
        assert_eq!(
            d("on_session_start", run(0, context, "")).decision,
            Some(Decision::Context("branch main".into()))
        );
        let block = r#"{"decision": "block", "reason": "no secrets in prompts"}"#;
        assert_eq!(
            d("pre_llm_call", run(0, block, "")).stop,
            Some(Stop::turn("no secrets in prompts"))
        );
        assert_eq!(
            d("pre_llm_call", run(2, "", "prompt refused\n")).stop,
            Some(Stop::turn("prompt refused"))
        );
        let ended = r#"{"continue": false, "stopReason": "done for today"}"#;
        assert_eq!(
            d("post_tool_call", run(0, ended, "")).stop,
            Some(Stop::run("done for today"))
        );
    }
}
