//! The audit line of each tool-call event.

use std::time::SystemTime;

use hermes_hooks_abi::hooks::{PostToolCallEvent, PreToolCallEvent};
use serde_json::{Value, json};

use crate::timestamp;

/// The line for a tool call about to run: who asked for which tool, with which arguments.
pub fn before(e: &PreToolCallEvent<'_, '_>, at: SystemTime) -> Value {
    json!({
        "ts": timestamp::rfc3339(at),
        "event": "pre_tool_call",
        "session_id": e.session_id(),
        "tool_name": e.tool_name(),
        "tool_call_id": e.tool_call_id(),
        "args": e.args().value(),
    })
}

/// The line for a tool call that ran or was blocked: the same fields plus its duration, its
/// status and the length of its result in characters.
pub fn after(e: &PostToolCallEvent<'_, '_>, at: SystemTime) -> Value {
    json!({
        "ts": timestamp::rfc3339(at),
        "event": "post_tool_call",
        "session_id": e.session_id(),
        "tool_name": e.tool_name(),
        "tool_call_id": e.tool_call_id(),
        "args": e.args().value(),
        "duration_ms": e.duration_ms(),
        "status": e.status(),
        "result_chars": e.result().chars().count(),
    })
}
