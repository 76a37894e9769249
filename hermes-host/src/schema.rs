//! JSON Schemas of what crosses a shell hook's pipe: the payload it reads on stdin and the
//! answer it may print on stdout, one pair per event.
//!
//! The schemas are generated, never written by hand, from the definitions the host itself
//! uses, so they cannot drift from what the host sends and reads:
//!
//! - **payloads** from the hook table (`hermes_hooks_abi::hooks::HOOKS`: each event's
//!   fields, their kinds and docs) run through the shell module's own payload builder
//!   ([`wire::kwargs_from_view`] and [`wire::payload`]), which decides which fields are
//!   promoted to the top level and which stay in `extra`, in which order;
//! - **answers** from the wire types the host parses stdout with
//!   ([`wire::HermesAnswerWire`], [`wire::ClaudeAnswerWire`] and
//!   [`wire::HookSpecificOutputWire`]), with the event's combining rule deciding which fields
//!   mean something for it.
//!
//! The repository commits every schema under `schema/shell/` (a test regenerates and diffs
//! them), and `hermes hooks schema <event>` prints one.
//!
//! # Compatibility
//!
//! The schemas describe this host exactly, but they are open (`additionalProperties: true`):
//! a later interface version may add keys to the payload (as 1.1 added `extra.turn_id`), and
//! the host ignores keys it does not know in an answer. A script that validates its stdin
//! with them keeps working after an upgrade.
//!
//! # Example
//!
//! ```
//! use hermes_host::schema::{answer_schema, payload_schema};
//!
//! let payload = payload_schema("pre_tool_call").unwrap();
//! assert_eq!(payload["properties"]["hook_event_name"]["const"], "pre_tool_call");
//! assert_eq!(payload["properties"]["extra"]["required"], serde_json::json!(["task_id", "tool_call_id", "turn_id", "api_request_id", "middleware_trace"]));
//!
//! let answer = answer_schema("pre_tool_call").unwrap();
//! assert_eq!(answer["$defs"]["hermes"]["properties"]["action"]["enum"], serde_json::json!(["block", "modify", "approve"]));
//! assert!(payload_schema("pre_tool_use").is_err());
//! ```

use hermes_hooks_abi::core::{EventView, no_host_calls};
use hermes_hooks_abi::hooks::{self, FieldKind, HookSpec, OutcomeKind};
use serde_json::{Map, Value, json};

use crate::payload::OwnedPayload;
use crate::shell::wire;

/// The JSON Schema dialect of every schema here.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// The directory under the repository root where the generated files are committed.
pub const SCHEMA_DIR: &str = "schema/shell";

/// An event this host has no schema for.
///
/// ```
/// let err = hermes_host::schema::payload_schema("pre_tool_use").unwrap_err();
/// assert_eq!(err.to_string(), "unknown hook event 'pre_tool_use'; did you mean 'pre_tool_call'?");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    event: String,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = hooks::names_sorted();
        match crate::pyfmt::close_match(&self.event, &names, 0.6) {
            Some(close) => write!(
                f,
                "unknown hook event '{}'; did you mean '{close}'?",
                self.event
            ),
            None => write!(
                f,
                "unknown hook event '{}' (valid: {})",
                self.event,
                names.join(", ")
            ),
        }
    }
}

impl std::error::Error for SchemaError {}

/// Every event a shell hook can subscribe to, in the hook table's order.
///
/// ```
/// let events = hermes_host::schema::events();
/// assert_eq!(events[0], "pre_tool_call");
/// assert_eq!(events.len(), hermes_hooks_abi::hooks::HOOKS.len());
/// ```
pub fn events() -> Vec<&'static str> {
    hooks::HOOKS.iter().map(|h| h.name).collect()
}

fn spec(event: &str) -> Result<&'static HookSpec, SchemaError> {
    hooks::spec(event).ok_or_else(|| SchemaError {
        event: event.to_string(),
    })
}

/// The schema of the JSON a shell hook for `event` reads on stdin.
///
/// ```
/// let schema = hermes_host::schema::payload_schema("subagent_stop").unwrap();
/// let extra = &schema["properties"]["extra"]["properties"];
/// // parent_session_id is promoted to the top-level session_id, so it is not in extra.
/// assert!(extra.get("parent_session_id").is_none());
/// assert_eq!(extra["duration_ms"]["type"], "integer");
/// ```
///
/// # Errors
///
/// When `event` is not a hook of this host.
pub fn payload_schema(event: &str) -> Result<Value, SchemaError> {
    let spec = spec(event)?;
    let layout = PayloadLayout::of(spec);
    let field_schema = |name: &str| -> Value {
        spec.field(name)
            .map_or(json!({}), |f| kind_schema(f.kind, f.doc))
    };
    let tool_name = match layout.tool_name {
        Some(name) => field_schema(name),
        None => {
            json!({"type": "null", "description": "Always null: this event is not about a tool."})
        }
    };
    let tool_input = match layout.tool_input {
        Some(name) => {
            let doc = spec.field(name).map_or("", |f| f.doc);
            json!({"type": ["object", "null"], "description": format!("{doc} Null when they are not a JSON object.")})
        }
        None => {
            json!({"type": "null", "description": "Always null: this event is not about a tool."})
        }
    };
    let session_from = if layout.session_id.is_empty() {
        "Always the empty string: this event has no session id.".to_string()
    } else {
        let names: Vec<String> = layout.session_id.iter().map(|n| format!("`{n}`")).collect();
        format!(
            "The {} keyword argument, or the empty string when it is empty or null.",
            names.join(" or else the ")
        )
    };
    let mut extra_props = Map::new();
    for name in &layout.extra {
        extra_props.insert(name.to_string(), field_schema(name));
    }
    extra_props.insert(
        "telemetry_schema_version".into(),
        json!({
            "const": wire::TELEMETRY_SCHEMA_VERSION,
            "description": "Present when the agent fires the hook; absent from `hermes hooks test` and `hermes hooks doctor` payloads."
        }),
    );
    let mut properties = Map::new();
    properties.insert(
        "hook_event_name".into(),
        json!({"const": event, "description": "The event that fired."}),
    );
    properties.insert("tool_name".into(), tool_name);
    properties.insert("tool_input".into(), tool_input);
    properties.insert(
        "session_id".into(),
        json!({"type": "string", "description": session_from}),
    );
    properties.insert("cwd".into(), json!({"type": "string", "description": "The agent's working directory (empty when it cannot be read)."}));
    properties.insert(
        "extra".into(),
        json!({
            "type": "object",
            "description": "The event's other fields, in this order. Later interface versions may add keys.",
            "properties": Value::Object(extra_props),
            "required": layout.extra,
            "additionalProperties": true,
        }),
    );
    Ok(json!({
        "$schema": DIALECT,
        "title": format!("{event} shell-hook payload"),
        "description": format!(
            "What a shell hook for `{event}` reads on stdin: one JSON document, keys in this order. {}",
            one_paragraph(spec.doc)
        ),
        "type": "object",
        "properties": Value::Object(properties),
        "required": ["hook_event_name", "tool_name", "tool_input", "session_id", "cwd", "extra"],
        "additionalProperties": true,
    }))
}

/// Where each field of an event's payload lands, found by running the host's own payload
/// builder on a payload with every field set.
struct PayloadLayout {
    /// The field promoted to `tool_name`.
    tool_name: Option<&'static str>,
    /// The field promoted to `tool_input`.
    tool_input: Option<&'static str>,
    /// The fields `session_id` is taken from, in order of preference.
    session_id: Vec<&'static str>,
    /// The fields left in `extra`, in payload order.
    extra: Vec<&'static str>,
}

impl PayloadLayout {
    fn of(spec: &'static HookSpec) -> PayloadLayout {
        let owned = OwnedPayload::from_json(spec.name, &json!({}));
        let fields = owned.fields();
        let view = EventView::new(spec.name, &fields, no_host_calls());
        let kwargs = wire::kwargs_from_view(&view, false);
        let built = wire::payload(spec.name, &kwargs, "");
        let extra_keys: Vec<&str> = built["extra"]
            .as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default();
        // The promoted fields are the ones the builder took out of `extra`; which top-level
        // key each went to is fixed by the wire format (reference §4.6).
        let promoted = |name: &str| {
            spec.field(name)
                .filter(|_| !extra_keys.contains(&name))
                .map(|f| f.name)
        };
        PayloadLayout {
            tool_name: promoted("tool_name"),
            tool_input: promoted("args"),
            session_id: ["session_id", "parent_session_id"]
                .into_iter()
                .filter_map(promoted)
                .collect(),
            extra: spec
                .fields
                .iter()
                .map(|f| f.name)
                .filter(|n| extra_keys.contains(n))
                .collect(),
        }
    }
}

/// The schema of a field of kind `kind`, described by `doc`.
fn kind_schema(kind: FieldKind, doc: &str) -> Value {
    let ty = match kind {
        FieldKind::Str => json!("string"),
        FieldKind::OptStr => json!(["string", "null"]),
        FieldKind::Json => json!(["object", "array"]),
        FieldKind::Int => json!("integer"),
        FieldKind::OptInt => json!(["integer", "null"]),
        FieldKind::Bool => json!("boolean"),
        FieldKind::Float => json!("number"),
    };
    json!({"type": ty, "description": doc})
}

/// `doc` as one paragraph (the hook docs are wrapped source comments).
fn one_paragraph(doc: &str) -> String {
    doc.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What the answer fields mean, keyed by their wire names. `tool` fields count on
/// `pre_tool_call`, `context` fields on the other events.
struct AnswerField {
    wire: &'static str,
    on_tool: bool,
    schema: fn() -> Value,
}

/// The fields of [`wire::HermesAnswerWire`].
const HERMES_FIELDS: &[AnswerField] = &[
    AnswerField {
        wire: "action",
        on_tool: true,
        schema: || json!({"enum": ["block", "modify", "approve"], "description": "`block`: the tool does not run. `modify`: it runs with `args` merged over its arguments. `approve`: it runs only once the user approves it (a denial or a timeout blocks it)."}),
    },
    AnswerField {
        wire: "message",
        on_tool: true,
        schema: || json!({"type": "string", "description": "The block message the model sees. When empty or absent, `reason` is used, else `Blocked by shell hook.`"}),
    },
    AnswerField {
        wire: "reason",
        on_tool: true,
        schema: || json!({"type": "string", "description": "The block message when `message` is empty or absent."}),
    },
    AnswerField {
        wire: "args",
        on_tool: true,
        schema: || json!({"type": "object", "description": "For `modify`: keys merged over the tool's arguments (answers of several hooks merge in registry order)."}),
    },
    AnswerField {
        wire: "rule_key",
        on_tool: true,
        schema: || json!({"type": "string", "description": "For `approve`: what the approval covers, shown with the request."}),
    },
    AnswerField {
        wire: "context",
        on_tool: false,
        schema: || json!({"type": "string", "description": "Text added to the context (on `pre_llm_call`, appended to the user's message); blank text is ignored."}),
    },
];

/// The top-level fields of [`wire::ClaudeAnswerWire`] (`hookSpecificOutput` is built apart).
const CLAUDE_FIELDS: &[AnswerField] = &[
    AnswerField {
        wire: "decision",
        on_tool: true,
        schema: || json!({"enum": ["block", "modify", "allow"], "description": "`block`: the tool does not run. `modify`: it runs with `tool_input` merged over its arguments. `allow`: no opinion."}),
    },
    AnswerField {
        wire: "reason",
        on_tool: true,
        schema: || json!({"type": "string", "description": "The block message the model sees. When empty or absent, `message` is used, else `Blocked by shell hook.`"}),
    },
    AnswerField {
        wire: "message",
        on_tool: true,
        schema: || json!({"type": "string", "description": "The block message when `reason` is empty or absent."}),
    },
    AnswerField {
        wire: "tool_input",
        on_tool: true,
        schema: || json!({"type": "object", "description": "For `modify`: keys merged over the tool's arguments."}),
    },
];

/// The fields of [`wire::HookSpecificOutputWire`].
const HOOK_SPECIFIC_FIELDS: &[AnswerField] = &[
    AnswerField {
        wire: "permissionDecision",
        on_tool: true,
        schema: || json!({"enum": ["allow", "deny", "ask"], "description": "`deny`: the tool does not run. `allow` and `ask` mean no opinion."}),
    },
    AnswerField {
        wire: "permissionDecisionReason",
        on_tool: true,
        schema: || json!({"type": "string", "description": "The block message for `deny` (else the top-level `reason`, else `Blocked by shell hook.`)."}),
    },
    AnswerField {
        wire: "updatedInput",
        on_tool: true,
        schema: || json!({"type": "object", "description": "Keys merged over the tool's arguments."}),
    },
    AnswerField {
        wire: "additionalContext",
        on_tool: false,
        schema: || json!({"type": "string", "description": "Text added to the context (on `pre_llm_call`, appended to the user's message); blank text is ignored."}),
    },
];

fn properties(fields: &[AnswerField], on_tool: bool) -> Map<String, Value> {
    fields
        .iter()
        .filter(|f| f.on_tool == on_tool)
        .map(|f| (f.wire.to_string(), (f.schema)()))
        .collect()
}

/// What an answer does on `event`, in one sentence.
fn answer_effect(spec: &HookSpec) -> &'static str {
    match spec.outcome {
        OutcomeKind::ToolDecision => {
            "A block stops the tool (the first block in registry order wins, and the model sees its message); a modify rewrites the tool's arguments. Exit code 2 also blocks, with the message from this JSON, else from stderr."
        }
        OutcomeKind::Context => {
            "The context of every hook is appended to the user's message, joined with a blank line in registry order."
        }
        OutcomeKind::Verify => {
            "A continue with a message keeps the agent working, with the message as its next instruction (the first in registry order wins, at most `agent.max_verify_nudges` times in a row)."
        }
        OutcomeKind::Observer
        | OutcomeKind::Replace
        | OutcomeKind::ReplaceNonEmpty
        | OutcomeKind::Dispatch => {
            "On this event a shell hook is an observer: the answer is read (and a malformed one logged) but changes nothing."
        }
    }
}

/// The schema of the JSON a shell hook for `event` may print on stdout: the canonical Hermes
/// shape or the Claude-Code shape (the host accepts both).
///
/// Printing nothing means "no opinion" and needs no schema; so does JSON that is not an
/// object. On `pre_tool_call` the shapes block or modify the call; on every other event they
/// carry context, which only `pre_llm_call` uses.
///
/// ```
/// let schema = hermes_host::schema::answer_schema("pre_llm_call").unwrap();
/// assert_eq!(schema["$defs"]["hermes"]["required"], serde_json::json!(["context"]));
/// let claude = &schema["$defs"]["claude"]["properties"]["hookSpecificOutput"]["properties"];
/// assert_eq!(claude["additionalContext"]["type"], "string");
/// ```
///
/// # Errors
///
/// When `event` is not a hook of this host.
pub fn answer_schema(event: &str) -> Result<Value, SchemaError> {
    let spec = spec(event)?;
    if spec.outcome == OutcomeKind::Verify {
        return Ok(verify_answer_schema(event, spec));
    }
    let on_tool = spec.outcome == OutcomeKind::ToolDecision;
    let hermes_required = if on_tool {
        json!(["action"])
    } else {
        json!(["context"])
    };
    let mut claude_props = properties(CLAUDE_FIELDS, on_tool);
    claude_props.insert(
        "hookSpecificOutput".into(),
        json!({
            "type": "object",
            "description": "Claude Code's per-event output (`hookEventName` and other keys are ignored).",
            "properties": Value::Object(properties(HOOK_SPECIFIC_FIELDS, on_tool)),
            "additionalProperties": true,
        }),
    );
    let claude_required = if on_tool {
        json!([{"required": ["decision"]}, {"required": ["hookSpecificOutput"]}])
    } else {
        json!([{"required": ["hookSpecificOutput"]}])
    };
    Ok(either_shape(
        event,
        spec,
        json!({
            "title": "Hermes shape",
            "type": "object",
            "properties": Value::Object(properties(HERMES_FIELDS, on_tool)),
            "required": hermes_required,
            "additionalProperties": true,
        }),
        json!({
            "title": "Claude Code shape",
            "type": "object",
            "properties": Value::Object(claude_props),
            "anyOf": claude_required,
            "additionalProperties": true,
        }),
    ))
}

/// An answer schema that accepts the Hermes shape or the Claude Code shape of `event`.
fn either_shape(event: &str, spec: &HookSpec, hermes: Value, claude: Value) -> Value {
    json!({
        "$schema": DIALECT,
        "title": format!("{event} shell-hook answer"),
        "description": format!(
            "What a shell hook for `{event}` may print on stdout, in either shape. Printing nothing means no opinion. {} Unknown keys are ignored.",
            answer_effect(spec)
        ),
        "anyOf": [{"$ref": "#/$defs/hermes"}, {"$ref": "#/$defs/claude"}],
        "$defs": { "hermes": hermes, "claude": claude },
    })
}

/// The answer of `pre_verify`: the reference's `{action|decision: continue|block,
/// message|reason}`.
fn verify_answer_schema(event: &str, spec: &HookSpec) -> Value {
    let text = |d: &str| json!({"type": "string", "description": d});
    either_shape(
        event,
        spec,
        json!({
            "title": "Hermes shape",
            "type": "object",
            "properties": {
                "action": {"enum": ["continue"], "description": "`continue`: keep working."},
                "message": text("The agent's next instruction; without one the agent finishes."),
            },
            "required": ["action"],
            "additionalProperties": true,
        }),
        json!({
            "title": "Claude Code Stop shape",
            "type": "object",
            "properties": {
                "decision": {"enum": ["block"], "description": "`block`: the stop is refused, so the agent keeps working."},
                "reason": text("The agent's next instruction; without one the agent finishes."),
            },
            "required": ["decision"],
            "additionalProperties": true,
        }),
    )
}

/// Every generated schema file: `(file name under [SCHEMA_DIR], text)`, payload then answer
/// for each event, each text pretty-printed JSON with a final newline.
///
/// ```
/// let files = hermes_host::schema::files();
/// assert_eq!(files[0].0, "pre_tool_call.payload.schema.json");
/// assert_eq!(files[1].0, "pre_tool_call.answer.schema.json");
/// assert!(files.iter().all(|(_, text)| text.ends_with("}\n")));
/// ```
pub fn files() -> Vec<(String, String)> {
    let pretty = |v: Value| format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default());
    let mut out = Vec::new();
    for event in events() {
        if let (Ok(payload), Ok(answer)) = (payload_schema(event), answer_schema(event)) {
            out.push((format!("{event}.payload.schema.json"), pretty(payload)));
            out.push((format!("{event}.answer.schema.json"), pretty(answer)));
        }
    }
    out
}

/// Where the schema of `config.yaml` is committed, from the repository root.
pub const CONFIG_SCHEMA_FILE: &str = "schema/config.schema.json";

/// The JSON Schema of `config.yaml`, for editors: every key hermes reads, with its type.
/// Entries of `hooks:` and the blocks `plugins:` and `gateway:` admit no other keys (a
/// misspelt key is how a guard silently fails open); the top level admits any, since a
/// Hermes `config.yaml` holds settings for the rest of Hermes too.
///
/// ```
/// let schema = hermes_host::schema::config_schema();
/// assert_eq!(schema["properties"]["hooks"]["properties"]["pre_tool_call"]["items"]["$ref"], "#/$defs/hook");
/// ```
pub fn config_schema() -> Value {
    let hook = json!({
        "type": "object",
        "description": "One shell hook: a command (or a url) and how it runs.",
        "properties": {
            "command": {"type": "string", "description": "The command line: a script and its arguments, split as a shell splits words (`format: claude`: run through a shell when it needs one)."},
            "url": {"type": "string", "description": "POST the payload to this http(s) URL instead of running a command."},
            "matcher": {"type": "string", "description": "pre_tool_call and post_tool_call only: a regex that must match the whole tool name (format: claude: Claude Code's rules, also on the session, subagent and StopFailure events)."},
            "timeout": {"type": "number", "description": "Seconds the hook may take (default 60, at most 300)."},
            "fail_closed": {"type": "boolean", "description": "pre_tool_call only: a crash, timeout or junk output blocks the tool call."},
            "priority": {"type": "integer", "description": "Hooks of equal priority run together; lower ones first (0)."},
            "persistent": {"type": "boolean", "description": "Keep the command running and send it one payload per line."},
            "instances": {"type": "integer", "description": "Persistent hooks: how many copies run (1 to 16)."},
            "format": {"enum": ["hermes", "claude"], "description": "The payload and answer shape: Hermes's (default) or Claude Code's."},
            "shadow": {"type": "boolean", "description": "Run at the real moment with the real payload and record the answer (logs/shadow.jsonl), never apply it."},
            "async": {"type": "boolean", "description": "Run a one-shot command in the background: never waited for, never blocks; context it gives reaches the session's next model call."},
            "claude_event": {"enum": ["PostToolUse", "PostToolUseFailure"], "description": "format: claude on post_tool_call: run after calls that succeeded (PostToolUse, default) or failed (PostToolUseFailure); neither runs after a blocked call."},
            "headers": {"type": "object", "description": "url hooks: HTTP headers ($VAR expanded from allowed_env_vars)."},
            "allowed_env_vars": {"type": "array", "items": {"type": "string"}, "description": "url hooks: the variables headers may expand."},
        },
        "additionalProperties": false,
    });
    let mut events = Map::new();
    for name in hooks::names_sorted() {
        events.insert(
            name.to_string(),
            json!({"type": ["array", "null"], "items": {"$ref": "#/$defs/hook"}}),
        );
    }
    events.insert(
        crate::trust::STRICT_PERMISSIONS_KEY.to_string(),
        json!({"type": "boolean", "description": "false: files others can write are loaded with a warning instead of refused."}),
    );
    events.insert(
        crate::config::MAX_STOP_CONTINUATIONS_KEY.to_string(),
        json!({"type": "integer", "minimum": 0, "maximum": 1000, "description": "How many times in a row format: claude Stop hooks may keep the agent working after its final answer (8)."}),
    );
    let mut gateway = Map::new();
    for (key, kind, doc) in crate::config::GATEWAY_KEYS {
        gateway.insert(key.to_string(), json!({"type": kind, "description": doc}));
    }
    json!({
        "$schema": DIALECT,
        "title": "config.yaml",
        "description": "The settings hermes reads from $HERMES_HOME/config.yaml. Generated by hermes_host::schema::config_schema.",
        "type": "object",
        "properties": {
            "hooks": {
                "type": "object",
                "description": "Shell hooks by event, and the permission policy.",
                "properties": Value::Object(events),
                "additionalProperties": false,
            },
            "hooks_auto_accept": {"type": "boolean", "description": "Approve (and record) shell hooks not yet allowlisted."},
            "plugins": {
                "type": "object",
                "description": "Which plugins load, and how.",
                "properties": {
                    "enabled": {"type": "array", "items": {"type": "string"}, "description": "The plugins that load (missing: none)."},
                    "disabled": {"type": "array", "items": {"type": "string"}, "description": "Plugins that never load, even when enabled."},
                    "settings": {"type": "object", "description": "Per plugin, settings merged over the config: of its plugin.yaml."},
                    "isolation": {"type": "object", "description": "Per plugin, in-process or process."},
                    "isolation_default": {"enum": ["in-process", "process"], "description": "Where plugins run unless said otherwise."},
                    "slow_callback_warning": {"type": ["string", "number", "boolean"], "description": "A duration such as 500ms, or off."},
                    "python": {"type": "string", "description": "The interpreter of Python plugins (default: python3 on PATH)."},
                    "entries": {"type": "object", "description": "Per plugin, Hermes's plugins.entries.<name>: its settings (ctx.get_config) and grants."},
                    "shadow": {"type": "array", "items": {"type": "string"}, "description": "Plugins whose callbacks run as shadow hooks: what they answer is recorded (logs/shadow.jsonl), never applied."},
                },
                "additionalProperties": false,
            },
            "gateway": {
                "type": "object",
                "description": "The gateway's limits and settings (hermes gateway run).",
                "properties": Value::Object(gateway),
                "additionalProperties": false,
            },
            "bench": {"type": "object", "description": "hermes bench settings (budgets)."},
        },
        "additionalProperties": true,
        "$defs": {"hook": hook},
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shell::wire::{ClaudeAnswerWire, HermesAnswerWire, HookSpecificOutputWire};

    fn wire_keys<T: serde::Serialize>(value: T) -> Vec<String> {
        let v = serde_json::to_value(value).unwrap();
        v.as_object().unwrap().keys().cloned().collect()
    }

    fn names(fields: &[AnswerField]) -> Vec<String> {
        fields.iter().map(|f| f.wire.to_string()).collect()
    }

    #[test]
    fn answer_fields_are_exactly_the_wire_fields() {
        let some = || Some(Value::Null);
        let hermes = HermesAnswerWire {
            action: some(),
            message: some(),
            reason: some(),
            args: some(),
            rule_key: some(),
            context: some(),
        };
        assert_eq!(names(HERMES_FIELDS), wire_keys(hermes));
        let specific = HookSpecificOutputWire {
            permission_decision: some(),
            permission_decision_reason: some(),
            updated_input: some(),
            additional_context: some(),
        };
        assert_eq!(names(HOOK_SPECIFIC_FIELDS), wire_keys(specific.clone()));
        let claude = ClaudeAnswerWire {
            decision: some(),
            reason: some(),
            message: some(),
            tool_input: some(),
            hook_specific_output: Some(specific),
        };
        let mut claude_names = names(CLAUDE_FIELDS);
        claude_names.push("hookSpecificOutput".into());
        assert_eq!(claude_names, wire_keys(claude));
    }

    #[test]
    fn the_payload_follows_the_reference_key_order() {
        let schema = payload_schema("pre_llm_call").unwrap();
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "hook_event_name",
                "tool_name",
                "tool_input",
                "session_id",
                "cwd",
                "extra"
            ]
        );
        let extra: Vec<&String> = schema["properties"]["extra"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(
            extra,
            [
                "user_message",
                "conversation_history",
                "is_first_turn",
                "model",
                "platform",
                "sender_id",
                "turn_id",
                "task_id",
                "telemetry_schema_version"
            ]
        );
        assert_eq!(schema["properties"]["tool_name"]["type"], "null");
    }

    #[test]
    fn tool_events_promote_tool_name_and_args() {
        let schema = payload_schema("post_tool_call").unwrap();
        assert_eq!(schema["properties"]["tool_name"]["type"], "string");
        assert_eq!(
            schema["properties"]["tool_input"]["type"],
            json!(["object", "null"])
        );
        let extra = schema["properties"]["extra"]["properties"]
            .as_object()
            .unwrap();
        assert!(
            !extra.contains_key("args")
                && !extra.contains_key("tool_name")
                && !extra.contains_key("session_id")
        );
        assert_eq!(extra["error_type"]["type"], json!(["string", "null"]));
    }

    #[test]
    fn events_without_a_session_say_so() {
        let schema = payload_schema("pre_approval_request").unwrap();
        assert_eq!(
            schema["properties"]["session_id"]["description"],
            "Always the empty string: this event has no session id."
        );
        let schema = payload_schema("subagent_stop").unwrap();
        assert_eq!(
            schema["properties"]["session_id"]["description"],
            "The `parent_session_id` keyword argument, or the empty string when it is empty or null."
        );
    }

    #[test]
    fn only_pre_tool_call_answers_block() {
        let tool = answer_schema("pre_tool_call").unwrap();
        assert!(
            tool["$defs"]["hermes"]["properties"]
                .get("context")
                .is_none()
        );
        let observer = answer_schema("post_tool_call").unwrap();
        assert!(
            observer["$defs"]["hermes"]["properties"]
                .get("action")
                .is_none()
        );
        assert!(
            observer["description"]
                .as_str()
                .unwrap()
                .contains("observer")
        );
    }

    #[test]
    fn an_unknown_event_suggests_a_close_one() {
        assert_eq!(
            payload_schema("pre_tool_cal").unwrap_err().to_string(),
            "unknown hook event 'pre_tool_cal'; did you mean 'pre_tool_call'?"
        );
        let err = answer_schema("nonsense").unwrap_err().to_string();
        assert!(
            err.starts_with(
                "unknown hook event 'nonsense' (valid: api_request_error, kanban_task_blocked, "
            ),
            "{err}"
        );
    }
}
