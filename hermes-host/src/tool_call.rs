//! One tool call through every gate, for hosts that embed the library: `tool_request`
//! middleware, `pre_tool_call` (a block, argument rewrites, an `approve`), the host's
//! approval, `tool_execution` middleware around the run, `post_tool_call` and
//! `transform_tool_result`, in the reference's order. The run itself is a plugin's tool
//! from the [`ToolRegistry`](crate::tools::ToolRegistry) or one of the host's own, and a
//! plugin tool that runs another tool (`ctx.dispatch_tool`, `call.dispatch`) goes through
//! the same gates.
//!
//! ```
//! use hermes_host::{registry::Registry, tool_call::{Call, HostTools}};
//! use hermes_hooks_abi::core::Reply;
//! use std::sync::Arc;
//!
//! let mut registry = Registry::new();
//! registry.add_in_process("pre_tool_call", "guard", Arc::new(|e| {
//!     Ok((e.get_str("args").unwrap_or_default().contains("rm -rf")).then(|| Reply::new("block", "no rm -rf")))
//! }));
//! struct Shell;
//! impl HostTools for Shell {
//!     fn run(&self, tool: &str, args: &serde_json::Value) -> Option<String> {
//!         (tool == "terminal").then(|| format!("ran {}", args["command"]))
//!     }
//! }
//! let ok = registry.call_tool(&Call::new("terminal", serde_json::json!({"command": "ls"})), &Shell);
//! assert_eq!((ok.result.as_str(), ok.status), (r#"ran "ls""#, "ok"));
//! let no = registry.call_tool(&Call::new("terminal", serde_json::json!({"command": "rm -rf /"})), &Shell);
//! assert_eq!((no.result.as_str(), no.status), (r#"{"error": "no rm -rf"}"#, "blocked"));
//! ```

use std::time::Instant;

use hermes_hooks_abi::hooks::payload::{
    PostToolCallEvent, PreToolCallEvent, TransformToolResultEvent,
};
use serde_json::{Map, Value, json};

use crate::middleware::Kind;
use crate::registry::{Blocked, Registry};

/// A tool call, with the ids the hooks carry.
#[derive(Clone, Debug, Default)]
pub struct Call {
    /// The tool's name.
    pub tool: String,
    /// Its arguments (a JSON object).
    pub args: Value,
    /// The session id.
    pub session_id: String,
    /// The task (agent run) id.
    pub task_id: String,
    /// The model's id for this call.
    pub tool_call_id: String,
    /// The turn, when the host has turns.
    pub turn_id: Option<String>,
    /// The model request that asked for it.
    pub api_request_id: Option<String>,
}

impl Call {
    /// A call of `tool` with `args` and empty ids.
    pub fn new(tool: &str, args: Value) -> Call {
        Call {
            tool: tool.to_string(),
            args,
            ..Call::default()
        }
    }
}

/// What the host brings to a call: its own tools and its approval step.
pub trait HostTools {
    /// Runs the host's own tool `tool`; `None` when the host has no such tool (then a
    /// plugin's tool of that name runs, if there is one).
    fn run(&self, tool: &str, args: &Value) -> Option<String>;

    /// Asks the user to approve a call a `pre_tool_call` hook answered `approve` for
    /// (`asked.message` says why, `asked.approval` holds its `rule_key`). `true`: approved.
    /// The default approves nothing: a host without a user to ask must not run what a hook
    /// wanted a human to see.
    fn approve(&self, call: &Call, asked: &Blocked) -> bool {
        let _ = (call, asked);
        false
    }
}

/// A host with no tools of its own: only plugins' tools run, and nothing is approved.
impl HostTools for () {
    fn run(&self, _tool: &str, _args: &Value) -> Option<String> {
        None
    }
}

/// How a call went.
#[derive(Clone, Debug, PartialEq)]
pub struct Done {
    /// What the model sees: the result after `transform_tool_result`.
    pub result: String,
    /// `ok`, `error` or `blocked`, as `post_tool_call` saw it.
    pub status: &'static str,
    /// The arguments it ran with, after middleware and hooks.
    pub args: Value,
    /// The `pre_tool_call` block that stopped it, when one did.
    pub blocked: Option<Blocked>,
}

impl Registry {
    /// Runs `call` through every gate (see [`crate::tool_call`]), with `host`'s own tools
    /// and approval.
    pub fn call_tool(&self, call: &Call, host: &dyn HostTools) -> Done {
        let chain = self.middleware();
        let context = context(call);
        let rewritten = chain.rewrite(Kind::ToolRequest, call.args.clone(), &context);
        let trace = rewritten.trace_json();
        let args_text = rewritten.payload.to_string();
        let verdict = self.pre_tool_call(&PreToolCallEvent {
            tool_name: &call.tool,
            args: &args_text,
            task_id: &call.task_id,
            session_id: &call.session_id,
            tool_call_id: &call.tool_call_id,
            turn_id: call.turn_id.as_deref(),
            api_request_id: call.api_request_id.as_deref(),
            middleware_trace: &trace,
        });
        let args = verdict.apply(&rewritten.payload);
        let started = Instant::now();
        let refused = match verdict.approval() {
            Some(asked) => (!host.approve(call, asked)).then(|| {
                json!({ "error": format!("{} not run: a hook asked for approval ({}) and it was not given", call.tool, asked.message) }).to_string()
            }),
            None => verdict.error_result(),
        };
        let (result, status) = match refused {
            Some(result) => (result, "blocked"),
            None => {
                let dispatch = |tool: &str, args: &Value| {
                    let inner = Call {
                        tool: tool.to_string(),
                        args: args.clone(),
                        ..call.clone()
                    };
                    self.call_tool(&inner, host).result
                };
                let mut run = |args: Value| -> Result<Value, String> {
                    let result = host
                        .run(&call.tool, &args)
                        .or_else(|| {
                            self.tools()
                                .dispatch(&call.tool, &args, &context, &dispatch)
                        })
                        .unwrap_or_else(|| {
                            json!({ "error": format!("unknown tool '{}'", call.tool) }).to_string()
                        });
                    Ok(Value::String(result))
                };
                let result = if chain.has(Kind::ToolExecution) {
                    match chain.execute(
                        Kind::ToolExecution,
                        args.clone(),
                        &rewritten.original,
                        &context,
                        &mut run,
                    ) {
                        Ok(Value::String(result)) => result,
                        Ok(other) => other.to_string(),
                        Err(why) => json!({ "error": format!("{}: {why}", call.tool) }).to_string(),
                    }
                } else {
                    match run(args.clone()) {
                        Ok(Value::String(result)) => result,
                        Ok(other) => other.to_string(),
                        Err(why) => why,
                    }
                };
                let failed = serde_json::from_str::<Value>(&result)
                    .ok()
                    .is_some_and(|v| v.get("error").is_some());
                (result, if failed { "error" } else { "ok" })
            }
        };
        let duration_ms = started.elapsed().as_millis() as i64;
        let args_text = args.to_string();
        let error_message = (status == "error")
            .then(|| serde_json::from_str::<Value>(&result).ok())
            .flatten()
            .and_then(|v| v["error"].as_str().map(str::to_string));
        let error_type = error_message.as_ref().map(|_| "ToolError");
        self.fire(
            PostToolCallEvent::HOOK,
            &PostToolCallEvent {
                tool_name: &call.tool,
                args: &args_text,
                result: &result,
                task_id: &call.task_id,
                session_id: &call.session_id,
                tool_call_id: &call.tool_call_id,
                duration_ms,
                status,
                error_type,
                error_message: error_message.as_deref(),
                turn_id: call.turn_id.as_deref(),
                api_request_id: call.api_request_id.as_deref(),
                middleware_trace: &trace,
            }
            .fields(),
        );
        let shown = self
            .transform_tool_result(&TransformToolResultEvent {
                tool_name: &call.tool,
                args: &args_text,
                result: &result,
                task_id: &call.task_id,
                session_id: &call.session_id,
                tool_call_id: &call.tool_call_id,
                duration_ms,
                status,
                error_type,
                error_message: error_message.as_deref(),
                turn_id: call.turn_id.as_deref(),
                api_request_id: call.api_request_id.as_deref(),
            })
            .unwrap_or(result);
        Done {
            result: shown,
            status,
            args,
            blocked: verdict.blocked.filter(|_| status == "blocked").map(|b| *b),
        }
    }

    /// Runs a model request through `llm_request` middleware and then, unless a middleware
    /// answered it itself, through `llm_execution` middleware around `send` (which sends it
    /// to the model). `context` holds the request's correlation fields.
    ///
    /// # Errors
    ///
    /// What `send` or a wrapper failed with.
    ///
    /// ```
    /// let registry = hermes_host::registry::Registry::new();
    /// let request = serde_json::json!({"model": "m", "messages": []});
    /// let answer = registry.send_request(request, &Default::default(), &mut |r| Ok(serde_json::json!({"content": r["model"]})));
    /// assert_eq!(answer.unwrap()["content"], "m");
    /// ```
    pub fn send_request(
        &self,
        request: Value,
        context: &Map<String, Value>,
        send: &mut crate::middleware::Next<'_>,
    ) -> Result<Value, String> {
        let chain = self.middleware();
        let rewritten = chain.rewrite(Kind::LlmRequest, request, context);
        if let Some(answer) = rewritten.response {
            return Ok(answer);
        }
        chain.execute(
            Kind::LlmExecution,
            rewritten.payload,
            &rewritten.original,
            context,
            send,
        )
    }
}

/// The correlation context middleware and plugin tools get, as the reference passes it.
fn context(call: &Call) -> Map<String, Value> {
    let mut context = Map::new();
    context.insert("tool_name".into(), json!(call.tool));
    context.insert("task_id".into(), json!(call.task_id));
    context.insert("session_id".into(), json!(call.session_id));
    context.insert("tool_call_id".into(), json!(call.tool_call_id));
    context.insert("turn_id".into(), json!(call.turn_id));
    context.insert("api_request_id".into(), json!(call.api_request_id));
    context
}
