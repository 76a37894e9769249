//! Payloads built from JSON, for hooks fired by hand (`hermes plugins fire`, tests) and for
//! anything that receives a payload as data rather than as a typed struct.

use hermes_hooks_abi::core::Field;
use hermes_hooks_abi::hooks::{self, FieldKind};
use serde_json::{Value, json};

/// The JSON fields whose value is a list: their empty value is `[]`, not `{}`.
const LISTS: &[&str] = &[
    "conversation_history",
    "pattern_keys",
    "request_messages",
    "middleware_trace",
];

/// The empty value of JSON field `name` when a payload leaves it out: `[]` for the fields
/// that hold lists, `{}` for the others.
///
/// ```
/// assert_eq!(hermes_host::payload::empty_json("conversation_history"), "[]");
/// assert_eq!(hermes_host::payload::empty_json("args"), "{}");
/// ```
pub fn empty_json(name: &str) -> &'static str {
    if LISTS.contains(&name) { "[]" } else { "{}" }
}

/// A payload that owns its text, so it can be built from JSON and lent out as fields.
///
/// Fields of the hook's spec come first, in spec order (missing ones get their empty value:
/// `""`, `0`, `false`, `{}`, null); keys the spec does not know follow, in the object's order.
///
/// ```
/// use hermes_host::payload::OwnedPayload;
/// let p = OwnedPayload::from_json("pre_tool_call", &serde_json::json!({"tool_name": "terminal", "args": {"command": "ls"}}));
/// let fields = p.fields();
/// assert_eq!(fields[0].name.as_str(), "tool_name");
/// assert_eq!(fields[1].value.as_str(), Some(r#"{"command":"ls"}"#));
/// ```
#[derive(Clone, Debug, Default)]
pub struct OwnedPayload {
    values: Vec<(String, Owned)>,
}

#[derive(Clone, Debug)]
enum Owned {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Json(String),
}

impl OwnedPayload {
    /// Builds the payload of `hook` from a JSON object (a non-object counts as `{}`).
    pub fn from_json(hook: &str, object: &serde_json::Value) -> OwnedPayload {
        let empty = serde_json::Map::new();
        let object = object.as_object().unwrap_or(&empty);
        let mut values = Vec::new();
        let spec_fields = hooks::spec(hook).map_or(&[][..], |s| s.fields);
        for f in spec_fields {
            let value = object.get(f.name);
            let owned = match (f.kind, value) {
                (FieldKind::Str, None) => Owned::Str(String::new()),
                (FieldKind::Int, None) => Owned::Int(0),
                (FieldKind::Bool, None) => Owned::Bool(false),
                (FieldKind::Float, None) => Owned::Float(0.0),
                (FieldKind::Float, Some(serde_json::Value::Number(n))) => {
                    Owned::Float(n.as_f64().unwrap_or(0.0))
                }
                (FieldKind::Json, None) => Owned::Json(empty_json(f.name).into()),
                (FieldKind::OptStr | FieldKind::OptInt, None) => Owned::Null,
                (FieldKind::Json, Some(v)) => Owned::Json(v.to_string()),
                (FieldKind::Str | FieldKind::OptStr, Some(serde_json::Value::String(s))) => {
                    Owned::Str(s.clone())
                }
                (_, Some(v)) => from_value(v),
            };
            values.push((f.name.to_string(), owned));
        }
        for (k, v) in object {
            if !spec_fields.iter().any(|f| f.name == k) {
                values.push((k.clone(), from_value(v)));
            }
        }
        OwnedPayload { values }
    }

    /// The payload as borrowed fields.
    pub fn fields(&self) -> Vec<Field<'_>> {
        self.values
            .iter()
            .map(|(name, v)| match v {
                Owned::Null => Field::null(name),
                Owned::Bool(b) => Field::bool(name, *b),
                Owned::Int(i) => Field::int(name, *i),
                Owned::Float(f) => Field {
                    name: name.as_str().into(),
                    value: hermes_hooks_abi::core::FieldValue::Float(*f),
                },
                Owned::Str(s) => Field::str(name, s),
                Owned::Json(s) => Field::json(name, s),
            })
            .collect()
    }
}

fn from_value(v: &serde_json::Value) -> Owned {
    match v {
        serde_json::Value::Null => Owned::Null,
        serde_json::Value::Bool(b) => Owned::Bool(*b),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Owned::Int)
            .unwrap_or_else(|| Owned::Float(n.as_f64().unwrap_or(0.0))),
        serde_json::Value::String(s) => Owned::Str(s.clone()),
        other => Owned::Json(other.to_string()),
    }
}

/// The reference's synthetic keyword arguments of `event` (`hermes hooks test`'s payloads,
/// also what `hermes bench` fires by default): a `terminal` call for tool events, a test
/// session for session events. `None` for events the reference has none for.
///
/// ```
/// let p = hermes_host::payload::synthetic("pre_tool_call").unwrap();
/// assert_eq!(p["tool_name"], "terminal");
/// assert!(hermes_host::payload::synthetic("transform_llm_output").is_none());
/// ```
pub fn synthetic(event: &str) -> Option<Value> {
    let tool = json!({
        "tool_name": "terminal", "args": {"command": "echo hello"},
        "session_id": "test-session", "task_id": "test-task", "tool_call_id": "test-call",
    });
    let session = json!({"session_id": "test-session"});
    Some(match event {
        "pre_tool_call" => tool,
        "post_tool_call" => {
            let mut v = tool;
            v["result"] = json!("{\"output\": \"hello\"}");
            v["duration_ms"] = json!(42);
            v
        }
        "pre_llm_call" => json!({
            "session_id": "test-session", "user_message": "What is the weather?",
            "conversation_history": [], "is_first_turn": true, "model": "gpt-4", "platform": "cli",
        }),
        "post_llm_call" => {
            json!({"session_id": "test-session", "model": "gpt-4", "platform": "cli"})
        }
        "on_session_start" | "on_session_end" | "on_session_finalize" | "on_session_reset" => {
            session
        }
        "pre_api_request" => json!({
            "session_id": "test-session", "task_id": "test-task", "platform": "cli",
            "model": "claude-sonnet-4-6", "provider": "anthropic",
            "base_url": "https://api.anthropic.com", "api_mode": "anthropic_messages",
            "api_call_count": 1, "message_count": 4, "tool_count": 12,
            "approx_input_tokens": 2048, "request_char_count": 8192, "max_tokens": 4096,
        }),
        "post_api_request" => json!({
            "session_id": "test-session", "task_id": "test-task", "platform": "cli",
            "model": "claude-sonnet-4-6", "provider": "anthropic",
            "base_url": "https://api.anthropic.com", "api_mode": "anthropic_messages",
            "api_call_count": 1, "api_duration": 1.234,
            "finish_reason": "stop", "message_count": 4, "response_model": "claude-sonnet-4-6",
            "usage": {"input_tokens": 2048, "output_tokens": 512},
        }),
        "subagent_stop" => json!({
            "parent_session_id": "parent-sess", "child_role": null,
            "child_summary": "Synthetic summary for hooks test", "child_status": "completed",
            "duration_ms": 1234,
        }),
        _ => return None,
    })
}
