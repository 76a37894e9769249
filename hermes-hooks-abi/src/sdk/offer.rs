//! Tools, slash commands and request middleware from native plugins (interface 1.3).
//!
//! The frozen core knows one kind of callback, the hook, so an offer crosses as a hook
//! callback under a reserved name that no hook can have: `@tool/<name>`,
//! `@command/<name>` or `@middleware/<kind>`. The host asks an offer to describe itself
//! once, at load (a firing whose `describe` field is true, answered with a
//! [`DESCRIBE`] reply), and from then on calls it with the fields below. Nothing of the
//! frozen core changed, so an offer also works in an isolated plugin's worker, and a host
//! older than 1.3 reports the names as unknown hooks, never fired.
//!
//! | offer | fields | answer |
//! |---|---|---|
//! | tool | `name`, `args` (JSON), `context` (JSON: `task_id`, `session_id`, `tool_call_id`, ...) | [`RESULT`] with the result text, or an error |
//! | command | `name`, `raw_args` | [`RESULT`] with the reply text, no opinion, or an error |
//! | middleware | `kind`, `payload` (the request or the tool arguments), `original`, `context` | no opinion, `replace` (`json` the new payload, `text` the reason), or [`RESULT`] (`json` the answer) |
//!
//! While a tool or command runs, the host offers [`DISPATCH`] (run another tool through
//! every gate); while an execution middleware runs, [`NEXT`] (the rest of the chain).

use abi_stable::std_types::{RStr, RString};
use serde_json::{Value, json};

use super::{Guarded, PluginContext};
use crate::core::{EventView, HookCallback_TO, HookCallbackBox, Reply, action};

/// The hook-name prefix of a tool.
pub const TOOL: &str = "@tool/";
/// The hook-name prefix of a slash command.
pub const COMMAND: &str = "@command/";
/// The hook-name prefix of a middleware (`@middleware/llm_request`).
pub const MIDDLEWARE: &str = "@middleware/";
/// The field (true) and the reply action of a description.
pub const DESCRIBE: &str = "describe";
/// The reply action of a tool's result, a command's reply or a middleware's own answer.
pub const RESULT: &str = "result";
/// The capability that runs another tool: `{"name", "args"}`, answered with its result.
pub const DISPATCH: &str = "tool.dispatch";
/// The capability that runs the rest of an execution chain: the payload, answered with
/// the downstream result (JSON).
pub const NEXT: &str = "middleware.next";

/// A middleware kind, as Hermes's `ctx.register_middleware` names them.
///
/// ```
/// use hermes_hooks_abi::sdk::offer::MiddlewareKind;
/// assert_eq!(MiddlewareKind::LlmRequest.name(), "llm_request");
/// assert_eq!(MiddlewareKind::parse("tool_execution"), Some(MiddlewareKind::ToolExecution));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MiddlewareKind {
    /// Rewrites a tool call's arguments before hooks, approvals and the tool see them.
    ToolRequest,
    /// Wraps a tool's run: call [`MiddlewareCall::next`] at most once, or answer yourself.
    ToolExecution,
    /// Rewrites a model request (messages, tools, model), or answers it without the model.
    LlmRequest,
    /// Wraps the model request: call [`MiddlewareCall::next`] at most once, or answer.
    LlmExecution,
}

impl MiddlewareKind {
    /// The reference's name.
    pub fn name(self) -> &'static str {
        match self {
            MiddlewareKind::ToolRequest => "tool_request",
            MiddlewareKind::ToolExecution => "tool_execution",
            MiddlewareKind::LlmRequest => "llm_request",
            MiddlewareKind::LlmExecution => "llm_execution",
        }
    }

    /// The kind called `name`.
    pub fn parse(name: &str) -> Option<MiddlewareKind> {
        [
            MiddlewareKind::ToolRequest,
            MiddlewareKind::ToolExecution,
            MiddlewareKind::LlmRequest,
            MiddlewareKind::LlmExecution,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// What a middleware decided.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum MiddlewareOutcome {
    /// No change: a request goes on as it is; an execution goes on down the chain (the
    /// result of [`MiddlewareCall::next`] stands when the callback called it).
    #[default]
    Continue,
    /// A request middleware replaces the request (or the tool arguments) with `payload`;
    /// `reason` goes to the hooks' `middleware_trace`.
    Replace {
        /// The new request or arguments (a JSON object).
        payload: Value,
        /// Why, for the trace.
        reason: Option<String>,
    },
    /// The answer itself: an execution middleware's result, or an `llm_request`
    /// middleware's response that spares the model call (`"text"`, or
    /// `{"content", "tool_calls"}`).
    Respond(Value),
}

/// Reads an offer's fields and reaches the host's capabilities.
#[derive(Clone, Copy)]
struct Fields<'a, 'v> {
    view: &'a EventView<'v>,
}

impl Fields<'_, '_> {
    fn json(&self, name: &str) -> Value {
        self.view
            .get_str(name)
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or(Value::Null)
    }

    fn call(&self, capability: &str, args: &str) -> Result<String, String> {
        self.view
            .host
            .call(RStr::from(capability), RStr::from(args))
            .map(RString::into_string)
            .map_err(RString::into_string)
            .into_result()
    }

    fn dispatch(&self, tool: &str, args: &Value) -> String {
        let request = json!({ "name": tool, "args": args }).to_string();
        self.call(DISPATCH, &request)
            .unwrap_or_else(|why| json!({ "error": why }).to_string())
    }
}

/// One call of a plugin tool.
///
/// ```
/// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
/// let host = LocalHost::register("x", |ctx| {
///     ctx.tool("shout", serde_json::json!({"description": "Upper-cases `text`."}), |call| {
///         Ok(call.args()["text"].as_str().unwrap_or_default().to_uppercase().into())
///     });
/// });
/// let out = host.fire("@tool/shout", &[field::json("args", r#"{"text": "hi"}"#)]);
/// assert_eq!(out[0].as_ref().unwrap().as_ref().unwrap().text.as_str(), "HI");
/// ```
pub struct ToolCall<'a, 'v> {
    fields: Fields<'a, 'v>,
}

impl ToolCall<'_, '_> {
    /// The tool's name.
    pub fn name(&self) -> &str {
        self.fields.view.get_str("name").unwrap_or_default()
    }

    /// The arguments the model sent (a JSON object), after every middleware and hook.
    pub fn args(&self) -> Value {
        self.fields.json("args")
    }

    /// The call's ids: `task_id`, `session_id`, `tool_call_id`, `turn_id`, ...
    pub fn context(&self) -> Value {
        self.fields.json("context")
    }

    /// Runs another tool as the model's calls run: through middleware, `pre_tool_call`
    /// hooks and approvals. Returns its result text (`{"error": ...}` when it could not run).
    pub fn dispatch(&self, tool: &str, args: &Value) -> String {
        self.fields.dispatch(tool, args)
    }
}

/// One run of a plugin's slash command.
///
/// ```
/// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
/// let host = LocalHost::register("x", |ctx| {
///     ctx.command("echo", "Says it back.", |cmd| Ok(Some(cmd.raw_args().to_string())));
/// });
/// let out = host.fire("@command/echo", &[field::str("raw_args", "hello")]);
/// assert_eq!(out[0].as_ref().unwrap().as_ref().unwrap().text.as_str(), "hello");
/// ```
pub struct CommandCall<'a, 'v> {
    fields: Fields<'a, 'v>,
}

impl CommandCall<'_, '_> {
    /// The command's name, without the slash.
    pub fn name(&self) -> &str {
        self.fields.view.get_str("name").unwrap_or_default()
    }

    /// The text after the command.
    pub fn raw_args(&self) -> &str {
        self.fields.view.get_str("raw_args").unwrap_or_default()
    }

    /// Runs a tool through every gate, as [`ToolCall::dispatch`].
    pub fn dispatch(&self, tool: &str, args: &Value) -> String {
        self.fields.dispatch(tool, args)
    }
}

/// One call of a middleware.
///
/// ```
/// use hermes_hooks_abi::sdk::offer::{MiddlewareKind, MiddlewareOutcome};
/// use hermes_hooks_abi::sdk::testing::{LocalHost, field};
/// let host = LocalHost::register("x", |ctx| {
///     ctx.middleware(MiddlewareKind::LlmRequest, |m| {
///         let mut request = m.payload();
///         request["model"] = "small-model".into();
///         Ok(MiddlewareOutcome::Replace { payload: request, reason: Some("cheaper".into()) })
///     });
/// });
/// let out = host.fire("@middleware/llm_request", &[field::json("payload", r#"{"model": "big"}"#)]);
/// let reply = out[0].as_ref().unwrap().as_ref().unwrap();
/// assert_eq!(reply.json.as_str(), r#"{"model":"small-model"}"#);
/// ```
pub struct MiddlewareCall<'a, 'v> {
    kind: MiddlewareKind,
    fields: Fields<'a, 'v>,
}

impl MiddlewareCall<'_, '_> {
    /// The kind this callback was registered for.
    pub fn kind(&self) -> MiddlewareKind {
        self.kind
    }

    /// The current request (model kinds: `{"model", "messages", "tools"}`) or tool
    /// arguments (tool kinds), as earlier middleware left it.
    pub fn payload(&self) -> Value {
        self.fields.json("payload")
    }

    /// The payload before any middleware.
    pub fn original(&self) -> Value {
        self.fields.json("original")
    }

    /// The call's correlation fields (`task_id`, `session_id`, `turn_id`, `tool_name`, ...).
    pub fn context(&self) -> Value {
        self.fields.json("context")
    }

    /// The rest of the chain, for execution kinds: the tool's result or the model's
    /// response to `payload`. At most once per call; a second call is an error.
    ///
    /// # Errors
    ///
    /// What the rest of the chain failed with, or that this is not an execution kind.
    pub fn next(&self, payload: &Value) -> Result<Value, String> {
        let answer = self.fields.call(NEXT, &payload.to_string())?;
        serde_json::from_str(&answer).map_err(|e| format!("the host's answer to next: {e}"))
    }
}

impl PluginContext<'_> {
    /// Offers the model a tool (interface 1.3), as Hermes's `ctx.register_tool`. In logs
    /// it is `<plugin>::<name>` (or the name given to [`named`](PluginContext::named)).
    ///
    /// `schema` is the tool's JSON schema (`{"description", "parameters"}`; its `name` is
    /// set to `name`). The handler gets the arguments and answers the result: a string is
    /// the result text, any other value its JSON. An `Err` is the result
    /// `{"error": "<message>"}`, as is a panic. The host runs the tool as its own, through
    /// middleware, `pre_tool_call` hooks, approvals, `post_tool_call` and
    /// `transform_tool_result`; see [`ToolCall`] for an example.
    pub fn tool<F>(&mut self, name: &str, schema: Value, handler: F) -> &mut Self
    where
        F: Fn(&ToolCall<'_, '_>) -> Result<Value, String> + Send + Sync + 'static,
    {
        let mut schema = if schema.is_object() {
            schema
        } else {
            json!({})
        };
        schema["name"] = json!(name);
        let description = json!({
            "name": name,
            "toolset": self.plugin_name(),
            "description": schema["description"].as_str().unwrap_or_default(),
            "schema": schema,
        });
        let label = self.next_name.take().unwrap_or_else(|| name.to_string());
        self.offer(&format!("{TOOL}{name}"), &label, description, move |view| {
            let call = ToolCall {
                fields: Fields { view },
            };
            let text = match handler(&call)? {
                Value::String(text) => text,
                other => other.to_string(),
            };
            Ok(Some(Reply::new(RESULT, text)))
        })
    }

    /// Adds a slash command, `/name args` (interface 1.3), as Hermes's
    /// `ctx.register_command`: a user message that starts with it runs the handler instead
    /// of a model turn, and the reply text (if any) is the answer. See [`CommandCall`] for
    /// an example.
    pub fn command<F>(&mut self, name: &str, description: &str, handler: F) -> &mut Self
    where
        F: Fn(&CommandCall<'_, '_>) -> Result<Option<String>, String> + Send + Sync + 'static,
    {
        let description = json!({ "name": name, "description": description, "args_hint": "" });
        let label = self.take_name::<F>();
        self.offer(
            &format!("{COMMAND}{name}"),
            &label,
            description,
            move |view| {
                let call = CommandCall {
                    fields: Fields { view },
                };
                Ok(handler(&call)?.map(|text| Reply::new(RESULT, text)))
            },
        )
    }

    /// Adds a request middleware of `kind` (interface 1.3), with the chaining rules of
    /// Hermes's `ctx.register_middleware`: request rewrites chain in registry order, each
    /// seeing the current payload and the original; execution wrappers nest, the first
    /// registered outermost, and each calls [`MiddlewareCall::next`] at most once. See
    /// [`MiddlewareCall`] for an example.
    pub fn middleware<F>(&mut self, kind: MiddlewareKind, handler: F) -> &mut Self
    where
        F: Fn(&MiddlewareCall<'_, '_>) -> Result<MiddlewareOutcome, String> + Send + Sync + 'static,
    {
        let description = json!({ "kind": kind.name() });
        let label = self
            .next_name
            .take()
            .unwrap_or_else(|| kind.name().to_string());
        self.offer(
            &format!("{MIDDLEWARE}{}", kind.name()),
            &label,
            description,
            move |view| {
                let call = MiddlewareCall {
                    kind,
                    fields: Fields { view },
                };
                Ok(match handler(&call)? {
                    MiddlewareOutcome::Continue => None,
                    MiddlewareOutcome::Replace { payload, reason } => {
                        let mut reply = Reply::new(action::REPLACE, reason.unwrap_or_default());
                        reply.json = payload.to_string().into();
                        Some(reply)
                    }
                    MiddlewareOutcome::Respond(answer) => {
                        let mut reply = Reply::new(RESULT, "");
                        reply.json = answer.to_string().into();
                        Some(reply)
                    }
                })
            },
        )
    }

    /// Registers an offer: `call` answers its firings, and a `describe` firing answers
    /// `description`.
    fn offer<F>(&mut self, hook: &str, label: &str, description: Value, call: F) -> &mut Self
    where
        F: Fn(&EventView<'_>) -> Result<Option<Reply>, String> + Send + Sync + 'static,
    {
        let description = description.to_string();
        let callback = move |view: &EventView<'_>| {
            if view.get_bool(DESCRIBE) == Some(true) {
                return Ok(Some(Reply::new(DESCRIBE, description.as_str())));
            }
            call(view)
        };
        let boxed: HookCallbackBox =
            HookCallback_TO::from_value(Guarded(callback), abi_stable::sabi_trait::TD_Opaque);
        self.registrar
            .register_hook(RStr::from(hook), RStr::from(label), boxed);
        self
    }
}
