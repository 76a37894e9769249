//! What crosses the pipe: the JSON payload a hook reads on stdin, and the JSON answer it may
//! print on stdout.
//!
//! # stdin
//!
//! One JSON document, no trailing newline, keys in this order (reference §4.6):
//!
//! ```json
//! {"hook_event_name": "pre_tool_call", "tool_name": "terminal", "tool_input": {"command": "ls"},
//!  "session_id": "s-1", "cwd": "/home/me/project", "extra": {"task_id": "t-1", ...}}
//! ```
//!
//! It is written like Python's `json.dumps(..., ensure_ascii=False)`: separators `", "` and
//! `": "`, non-ASCII text as raw UTF-8.
//!
//! # stdout
//!
//! Optional. Two shapes are accepted and turned into one [`Decision`]:
//!
//! | shape | block a tool (`pre_tool_call`) | rewrite its arguments | add context (other events) |
//! |---|---|---|---|
//! | Hermes ([`HermesAnswerWire`]) | `{"action": "block", "message": "..."}` | `{"action": "modify", "args": {...}}` | `{"context": "..."}` |
//! | Claude Code ([`ClaudeAnswerWire`]) | `{"decision": "block", "reason": "..."}` or `{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "..."}}` | `{"decision": "modify", "tool_input": {...}}` or `{"hookSpecificOutput": {"updatedInput": {...}}}` | `{"hookSpecificOutput": {"additionalContext": "..."}}` |
//!
//! On `pre_tool_call`, `{"action": "approve", "message": "...", "rule_key": "..."}` sends the
//! call to the approval gate; on `pre_verify`, `{"action": "continue", "message": "..."}` or
//! Claude's Stop shape `{"decision": "block", "reason": "..."}` keeps the agent working.
//!
//! Anything else (empty output, `{}`, `{"decision": "allow"}`, a list) means "no opinion".
//! A block always carries a message: the first truthy of the shape's two message fields if it
//! is a non-empty string, else [`DEFAULT_BLOCK_MESSAGE`].

use hermes_hooks_abi::core::{EventView, FieldValue, Reply, action};
use hermes_hooks_abi::sdk::actions;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::pyfmt::{JsonStyle, dumps};

/// The block message when a hook blocks without saying why.
pub const DEFAULT_BLOCK_MESSAGE: &str = "Blocked by shell hook.";

/// The `extra.telemetry_schema_version` every runtime payload carries (the reference's
/// `invoke_hook` adds it; `hermes hooks test` payloads do not have it).
pub const TELEMETRY_SCHEMA_VERSION: &str = "hermes.observer.v1";

/// Keyword arguments promoted to the top level of the payload (and so left out of `extra`).
const TOP_LEVEL_KWARGS: [&str; 4] = ["tool_name", "args", "session_id", "parent_session_id"];

/// The event's fields as the reference's keyword arguments: name → JSON value, in field
/// order. JSON fields (tool args, conversation history) are parsed; text that is not valid
/// JSON stays a string.
///
/// With `runtime`, `telemetry_schema_version` is appended as the reference's dispatcher does.
///
/// ```
/// use hermes_hooks_abi::core::{EventView, Field, no_host_calls};
/// use hermes_host::shell::wire::kwargs_from_view;
/// let fields = [Field::str("tool_name", "terminal"), Field::json("args", r#"{"command":"ls"}"#)];
/// let kwargs = kwargs_from_view(&EventView::new("pre_tool_call", &fields, no_host_calls()), false);
/// assert_eq!(serde_json::Value::Object(kwargs), serde_json::json!({"tool_name": "terminal", "args": {"command": "ls"}}));
/// ```
pub fn kwargs_from_view(view: &EventView<'_>, runtime: bool) -> Map<String, Value> {
    let mut kwargs = Map::new();
    for field in view.fields.iter() {
        let value = match &field.value {
            FieldValue::Null => Value::Null,
            FieldValue::Bool(b) => Value::Bool(*b),
            FieldValue::Int(i) => Value::from(*i),
            FieldValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            FieldValue::Str(s) => Value::String(s.to_string()),
            FieldValue::Json(s) => {
                serde_json::from_str(s.as_str()).unwrap_or_else(|_| Value::String(s.to_string()))
            }
        };
        kwargs.insert(field.name.to_string(), value);
    }
    if runtime && !kwargs.contains_key("telemetry_schema_version") {
        kwargs.insert(
            "telemetry_schema_version".into(),
            TELEMETRY_SCHEMA_VERSION.into(),
        );
    }
    kwargs
}

/// Builds the stdin payload of `event` from keyword arguments, with `cwd` as given.
///
/// ```
/// use hermes_host::shell::wire::payload;
/// let kwargs = serde_json::json!({"tool_name": "terminal", "args": {"command": "ls"}, "task_id": "t", "session_id": "s"});
/// let p = payload("pre_tool_call", kwargs.as_object().unwrap(), "/w");
/// assert_eq!(p.to_string(), r#"{"hook_event_name":"pre_tool_call","tool_name":"terminal","tool_input":{"command":"ls"},"session_id":"s","cwd":"/w","extra":{"task_id":"t"}}"#);
/// ```
pub fn payload(event: &str, kwargs: &Map<String, Value>, cwd: &str) -> Value {
    let tool_input = match kwargs.get("args") {
        Some(args @ Value::Object(_)) => args.clone(),
        _ => Value::Null,
    };
    let session_id = [kwargs.get("session_id"), kwargs.get("parent_session_id")]
        .into_iter()
        .flatten()
        .find(|v| truthy(v))
        .cloned()
        .unwrap_or_else(|| Value::String(String::new()));
    let extra: Map<String, Value> = kwargs
        .iter()
        .filter(|(k, _)| !TOP_LEVEL_KWARGS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut out = Map::new();
    out.insert("hook_event_name".into(), event.into());
    out.insert(
        "tool_name".into(),
        kwargs.get("tool_name").cloned().unwrap_or(Value::Null),
    );
    out.insert("tool_input".into(), tool_input);
    out.insert("session_id".into(), session_id);
    out.insert("cwd".into(), cwd.into());
    out.insert("extra".into(), Value::Object(extra));
    Value::Object(out)
}

/// The stdin text for `event`: [`payload`] with the process's working directory (`""` when
/// it cannot be read), serialised as Python's `json.dumps(..., ensure_ascii=False)`.
///
/// ```
/// let kwargs = serde_json::json!({"session_id": "s", "message": "héllo"});
/// let text = hermes_host::shell::wire::serialize_payload("on_session_start", kwargs.as_object().unwrap());
/// assert!(text.starts_with(r#"{"hook_event_name": "on_session_start", "tool_name": null, "tool_input": null, "session_id": "s", "cwd": "#));
/// assert!(text.ends_with(r#""extra": {"message": "héllo"}}"#));
/// ```
pub fn serialize_payload(event: &str, kwargs: &Map<String, Value>) -> String {
    let cwd = std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    serialize_payload_in(event, kwargs, &cwd)
}

/// [`serialize_payload`] with `cwd` given: the agent's working directory.
///
/// ```
/// let kwargs = serde_json::json!({"session_id": "s"});
/// let text = hermes_host::shell::wire::serialize_payload_in("on_session_start", kwargs.as_object().unwrap(), "/srv/proj");
/// assert!(text.contains(r#""cwd": "/srv/proj""#));
/// ```
pub fn serialize_payload_in(event: &str, kwargs: &Map<String, Value>, cwd: &str) -> String {
    dumps(&payload(event, kwargs, cwd), JsonStyle::default())
}

/// Python truthiness of a JSON value.
pub(crate) fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// The canonical Hermes answer shape.
///
/// Unknown fields are ignored, never rejected, and a known field of the wrong type counts
/// as absent (so `{"action": "block", "message": 42}` blocks with the default message).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct HermesAnswerWire {
    /// `"block"` or `"modify"` (`pre_tool_call`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<Value>,
    /// The block message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Value>,
    /// The block message, when `message` is not truthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Value>,
    /// New tool arguments for `"modify"` (an object merged over the old ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// What an `"approve"` covers (interface 1.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_key: Option<Value>,
    /// Context text for events other than `pre_tool_call` (`pre_llm_call` uses it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Value>,
}

/// The Claude-Code answer shape.
///
/// Unknown fields are ignored, never rejected; a known field of the wrong type counts as
/// absent.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct ClaudeAnswerWire {
    /// `"block"` or `"modify"` (`pre_tool_call`); `"allow"` and anything else mean nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Value>,
    /// The block message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Value>,
    /// The block message, when `reason` is not truthy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Value>,
    /// New tool arguments for `"modify"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_input: Option<Value>,
    /// Claude Code's per-event output.
    #[serde(
        default,
        rename = "hookSpecificOutput",
        skip_serializing_if = "Option::is_none"
    )]
    pub hook_specific_output: Option<HookSpecificOutputWire>,
}

/// `hookSpecificOutput` of the Claude-Code shape. Unknown fields (such as `hookEventName`)
/// are ignored, never rejected.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct HookSpecificOutputWire {
    /// `"deny"` blocks the tool; `"allow"` and `"ask"` mean nothing here.
    #[serde(
        default,
        rename = "permissionDecision",
        skip_serializing_if = "Option::is_none"
    )]
    pub permission_decision: Option<Value>,
    /// The block message for `"deny"`.
    #[serde(
        default,
        rename = "permissionDecisionReason",
        skip_serializing_if = "Option::is_none"
    )]
    pub permission_decision_reason: Option<Value>,
    /// New tool arguments (merged over the old ones).
    #[serde(
        default,
        rename = "updatedInput",
        skip_serializing_if = "Option::is_none"
    )]
    pub updated_input: Option<Value>,
    /// Context text for events other than `pre_tool_call`.
    #[serde(
        default,
        rename = "additionalContext",
        skip_serializing_if = "Option::is_none"
    )]
    pub additional_context: Option<Value>,
}

/// What a hook's answer means to the dispatcher, whichever shape it came in.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Do not run the tool; the message is what the model sees.
    Block(String),
    /// Rewrite the tool arguments: these keys are merged over the old ones.
    Modify(Map<String, Value>),
    /// Add this text as context (kept as written, not stripped).
    Context(String),
    /// `pre_tool_call`: put the call through the approval gate, with this message and
    /// `rule_key`.
    Approve(String, Option<String>),
    /// `pre_verify`: keep the agent working, with this as its next instruction.
    Continue(String),
}

impl Decision {
    /// The canonical Hermes wire shape: `{"action": "block", "message": ...}`,
    /// `{"action": "modify", "args": {...}}` or `{"context": ...}`.
    ///
    /// ```
    /// use hermes_host::shell::wire::Decision;
    /// assert_eq!(Decision::Block("no".into()).to_wire(), serde_json::json!({"action": "block", "message": "no"}));
    /// ```
    pub fn to_wire(&self) -> Value {
        let mut out = Map::new();
        match self {
            Decision::Block(message) => {
                out.insert("action".into(), "block".into());
                out.insert("message".into(), message.clone().into());
            }
            Decision::Modify(args) => {
                out.insert("action".into(), "modify".into());
                out.insert("args".into(), Value::Object(args.clone()));
            }
            Decision::Context(text) => {
                out.insert("context".into(), text.clone().into());
            }
            Decision::Approve(message, rule_key) => {
                out.insert("action".into(), "approve".into());
                out.insert("message".into(), message.clone().into());
                if let Some(key) = rule_key {
                    out.insert("rule_key".into(), key.clone().into());
                }
            }
            Decision::Continue(message) => {
                out.insert("action".into(), "continue".into());
                out.insert("message".into(), message.clone().into());
            }
        }
        Value::Object(out)
    }

    /// The registry reply: `block` + message, `modify` + the args as JSON, `context` + text.
    ///
    /// ```
    /// use hermes_host::shell::wire::Decision;
    /// let args = serde_json::json!({"timeout": 5}).as_object().unwrap().clone();
    /// let reply = Decision::Modify(args).to_reply();
    /// assert_eq!((reply.action.as_str(), reply.json.as_str()), ("modify", r#"{"timeout":5}"#));
    /// ```
    pub fn to_reply(&self) -> Reply {
        match self {
            Decision::Block(message) => Reply::new(action::BLOCK, message.clone()),
            Decision::Context(text) => Reply::new(action::CONTEXT, text.clone()),
            Decision::Modify(args) => {
                let mut reply = Reply::new(action::MODIFY, "");
                reply.json = Value::Object(args.clone()).to_string().into();
                reply
            }
            Decision::Approve(message, rule_key) => {
                let mut reply = Reply::new(actions::APPROVE, message.clone());
                reply.json = serde_json::json!({ "rule_key": rule_key })
                    .to_string()
                    .into();
                reply
            }
            Decision::Continue(message) => Reply::new(actions::CONTINUE, message.clone()),
        }
    }
}

/// What a hook printed on stdout, before interpretation.
#[derive(Clone, Debug, PartialEq)]
pub enum Stdout {
    /// Nothing but whitespace.
    Empty,
    /// Not JSON; holds the first 200 characters of the stripped text.
    NotJson(String),
    /// A JSON document (of any type).
    Json(Value),
}

/// Reads stdout: stripped, then JSON-decoded.
///
/// ```
/// use hermes_host::shell::wire::{read_stdout, Stdout};
/// assert_eq!(read_stdout("  \n"), Stdout::Empty);
/// assert_eq!(read_stdout("oops"), Stdout::NotJson("oops".into()));
/// assert_eq!(read_stdout("[1]"), Stdout::Json(serde_json::json!([1])));
/// ```
pub fn read_stdout(stdout: &str) -> Stdout {
    let text = stdout.trim();
    if text.is_empty() {
        return Stdout::Empty;
    }
    match serde_json::from_str(text) {
        Ok(value) => Stdout::Json(value),
        Err(_) => Stdout::NotJson(text.chars().take(200).collect()),
    }
}

/// Interprets an answer for `event` (see the [module documentation](self) for the table).
/// Block directives count on `pre_tool_call` only; context on every other event.
///
/// ```
/// use hermes_host::shell::wire::{decide, Decision};
/// let claude = serde_json::json!({"decision": "block", "reason": "rm is not allowed"});
/// assert_eq!(decide("pre_tool_call", &claude), Some(Decision::Block("rm is not allowed".into())));
/// assert_eq!(decide("pre_llm_call", &claude), None);
/// let context = serde_json::json!({"context": "Today is Friday"});
/// assert_eq!(decide("pre_llm_call", &context), Some(Decision::Context("Today is Friday".into())));
/// ```
pub fn decide(event: &str, answer: &Value) -> Option<Decision> {
    let Value::Object(_) = answer else {
        return None;
    };
    let hermes: HermesAnswerWire = serde_json::from_value(answer.clone()).unwrap_or_default();
    let claude: ClaudeAnswerWire = claude_wire(answer);
    let specific = claude.hook_specific_output.clone().unwrap_or_default();
    let is = |v: &Option<Value>, text: &str| v.as_ref().and_then(Value::as_str) == Some(text);
    if event == "pre_tool_call" {
        if is(&hermes.action, "block") {
            return Some(Decision::Block(block_message(
                &hermes.message,
                &hermes.reason,
            )));
        }
        if is(&claude.decision, "block") {
            return Some(Decision::Block(block_message(
                &claude.reason,
                &claude.message,
            )));
        }
        if is(&specific.permission_decision, "deny") {
            return Some(Decision::Block(block_message(
                &specific.permission_decision_reason,
                &claude.reason,
            )));
        }
        if is(&hermes.action, "approve") {
            let text = |key: &str| answer.get(key).and_then(Value::as_str).map(str::to_string);
            return Some(Decision::Approve(
                text("message").unwrap_or_default(),
                text("rule_key").filter(|k| !k.is_empty()),
            ));
        }
        let object = |v: &Option<Value>| v.as_ref().and_then(Value::as_object).cloned();
        if is(&hermes.action, "modify") {
            return object(&hermes.args).map(Decision::Modify);
        }
        if is(&claude.decision, "modify") {
            return object(&claude.tool_input).map(Decision::Modify);
        }
        return object(&specific.updated_input).map(Decision::Modify);
    }
    let context = |v: &Option<Value>| match v {
        Some(Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        _ => None,
    };
    if event == "pre_verify" {
        // The reference's parse: `{action|decision: continue|block, message|reason}`.
        let directive = hermes.action.as_ref().or(claude.decision.as_ref());
        let keeps_working = directive
            .and_then(Value::as_str)
            .is_some_and(|d| d == "continue" || d == "block");
        let message = context(&hermes.message).or_else(|| context(&hermes.reason));
        return message.filter(|_| keeps_working).map(Decision::Continue);
    }
    context(&hermes.context)
        .or_else(|| context(&specific.additional_context))
        .map(Decision::Context)
}

/// The Claude shape, tolerating a `hookSpecificOutput` that is not an object.
fn claude_wire(answer: &Value) -> ClaudeAnswerWire {
    serde_json::from_value(answer.clone()).unwrap_or_else(|_| {
        let mut without = answer.clone();
        if let Value::Object(o) = &mut without {
            o.remove("hookSpecificOutput");
        }
        serde_json::from_value(without).unwrap_or_default()
    })
}

/// The reference's `_block_message(primary, secondary)`: the first truthy of the two, if it
/// is a non-empty string; else [`DEFAULT_BLOCK_MESSAGE`].
pub fn block_message(primary: &Option<Value>, secondary: &Option<Value>) -> String {
    let chosen = [primary, secondary]
        .into_iter()
        .flatten()
        .find(|v| truthy(v));
    match chosen {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => DEFAULT_BLOCK_MESSAGE.to_string(),
    }
}

/// The message of an exit-code-2 block: a block answer's message, else a non-empty `message`
/// or `reason` string in the stdout JSON, else the first 400 characters of stderr, else
/// [`DEFAULT_BLOCK_MESSAGE`].
///
/// ```
/// use hermes_host::shell::wire::{exit2_message, read_stdout};
/// assert_eq!(exit2_message(&read_stdout(""), "  rm is not allowed\n"), "rm is not allowed");
/// assert_eq!(exit2_message(&read_stdout(r#"{"reason": "no"}"#), "ignored"), "no");
/// assert_eq!(exit2_message(&read_stdout(""), ""), "Blocked by shell hook.");
/// ```
pub fn exit2_message(stdout: &Stdout, stderr: &str) -> String {
    if let Stdout::Json(value) = stdout {
        if let Some(Decision::Block(message)) = decide("pre_tool_call", value) {
            return message;
        }
        let field = |k: &str| {
            value
                .get(k)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
        };
        if let Some(message) = field("message").or_else(|| field("reason")) {
            return message.to_string();
        }
    }
    let stderr = stderr.trim();
    if stderr.is_empty() {
        DEFAULT_BLOCK_MESSAGE.to_string()
    } else {
        stderr.chars().take(400).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pre(answer: Value) -> Option<Decision> {
        decide("pre_tool_call", &answer)
    }

    #[test]
    fn approve_asks_on_pre_tool_call_and_continue_keeps_pre_verify_working() {
        assert_eq!(
            pre(
                json!({"action": "approve", "message": "deploys need a human", "rule_key": "deploy:prod"})
            ),
            Some(Decision::Approve(
                "deploys need a human".into(),
                Some("deploy:prod".into())
            ))
        );
        let verify = |v: Value| decide("pre_verify", &v);
        assert_eq!(
            verify(json!({"action": "continue", "message": "lint"})),
            Some(Decision::Continue("lint".into()))
        );
        assert_eq!(
            verify(json!({"decision": "block", "reason": "test"})),
            Some(Decision::Continue("test".into()))
        );
        assert_eq!(
            verify(json!({"action": "continue"})),
            None,
            "no message: the agent finishes"
        );
        assert_eq!(verify(json!({"context": "x"})), None);
    }

    #[test]
    fn the_canonical_block_prefers_message_over_reason() {
        assert_eq!(
            pre(json!({"action": "block", "message": "m", "reason": "r"})),
            Some(Decision::Block("m".into()))
        );
        assert_eq!(
            pre(json!({"action": "block", "message": "", "reason": "r"})),
            Some(Decision::Block("r".into()))
        );
    }

    #[test]
    fn the_claude_block_prefers_reason_over_message() {
        assert_eq!(
            pre(json!({"decision": "block", "message": "m", "reason": "r"})),
            Some(Decision::Block("r".into()))
        );
    }

    #[test]
    fn a_truthy_non_string_message_falls_back_to_the_default() {
        // `message: 42` is truthy, so `reason` is never looked at, and 42 is not a string.
        assert_eq!(
            pre(json!({"action": "block", "message": 42, "reason": "r"})),
            Some(Decision::Block(DEFAULT_BLOCK_MESSAGE.into()))
        );
        assert_eq!(
            pre(json!({"action": "block"})),
            Some(Decision::Block(DEFAULT_BLOCK_MESSAGE.into()))
        );
    }

    #[test]
    fn permission_decision_deny_blocks_with_its_reason() {
        let answer = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "nope"}});
        assert_eq!(pre(answer), Some(Decision::Block("nope".into())));
        assert_eq!(
            pre(json!({"hookSpecificOutput": {"permissionDecision": "allow"}})),
            None
        );
    }

    #[test]
    fn modify_comes_in_three_spellings() {
        let args = json!({"command": "ls -la"});
        let want = Some(Decision::Modify(args.as_object().unwrap().clone()));
        assert_eq!(pre(json!({"action": "modify", "args": args})), want);
        assert_eq!(pre(json!({"decision": "modify", "tool_input": args})), want);
        assert_eq!(
            pre(
                json!({"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": args}})
            ),
            want
        );
        assert_eq!(pre(json!({"action": "modify", "args": [1]})), None);
    }

    #[test]
    fn non_decisions_mean_no_opinion() {
        for answer in [
            json!({}),
            json!({"decision": "allow"}),
            json!({"context": "x"}),
            json!([1]),
            json!("block"),
        ] {
            assert_eq!(pre(answer.clone()), None, "{answer}");
        }
    }

    #[test]
    fn context_is_kept_unstripped_and_blank_context_is_nothing() {
        assert_eq!(
            decide("pre_llm_call", &json!({"context": "  hi\n"})),
            Some(Decision::Context("  hi\n".into()))
        );
        assert_eq!(decide("pre_llm_call", &json!({"context": "  "})), None);
        assert_eq!(decide("pre_llm_call", &json!({"context": 5})), None);
        assert_eq!(
            decide(
                "pre_llm_call",
                &json!({"hookSpecificOutput": {"additionalContext": "ctx"}})
            ),
            Some(Decision::Context("ctx".into()))
        );
    }

    #[test]
    fn block_directives_are_ignored_off_pre_tool_call() {
        assert_eq!(
            decide(
                "post_tool_call",
                &json!({"action": "block", "message": "m"})
            ),
            None
        );
    }

    #[test]
    fn a_non_object_hook_specific_output_does_not_hide_the_rest() {
        assert_eq!(
            pre(json!({"decision": "block", "reason": "r", "hookSpecificOutput": 3})),
            Some(Decision::Block("r".into()))
        );
    }

    #[test]
    fn the_payload_keeps_the_reference_key_order_and_promotes_session_ids() {
        let kwargs = json!({"parent_session_id": "parent", "child_role": null, "session_id": "", "duration_ms": 5});
        let p = payload("subagent_stop", kwargs.as_object().unwrap(), "/cwd");
        assert_eq!(
            dumps(&p, JsonStyle::default()),
            r#"{"hook_event_name": "subagent_stop", "tool_name": null, "tool_input": null, "session_id": "parent", "cwd": "/cwd", "extra": {"child_role": null, "duration_ms": 5}}"#
        );
    }

    #[test]
    fn non_object_args_become_a_null_tool_input() {
        let kwargs = json!({"tool_name": "t", "args": "not a dict"});
        assert_eq!(
            payload("pre_tool_call", kwargs.as_object().unwrap(), "")["tool_input"],
            Value::Null
        );
    }

    #[test]
    fn runtime_kwargs_end_with_the_telemetry_version() {
        let fields = [hermes_hooks_abi::core::Field::str("session_id", "s")];
        let view = EventView::new(
            "on_session_start",
            &fields,
            hermes_hooks_abi::core::no_host_calls(),
        );
        let kwargs = kwargs_from_view(&view, true);
        assert_eq!(
            kwargs.keys().next_back().map(String::as_str),
            Some("telemetry_schema_version")
        );
    }
}
