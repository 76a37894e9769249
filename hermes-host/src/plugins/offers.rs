//! Tools, slash commands and middleware from native plugins (interface 1.3): the callbacks
//! a plugin registered under `@tool/<name>`, `@command/<name>` and `@middleware/<kind>`
//! (see `hermes_hooks_abi::sdk::offer`) become entries of the same tool, command and
//! middleware registries a Python plugin's `register_tool` fills, so a host runs them as
//! it runs any: through every gate, whatever kind of plugin answers.
//!
//! The callback is the same boxed hook callback for an in-process plugin and for an
//! isolated one (whose proxy runs it in the plugin's worker, with its timeout and crash
//! recovery), so this module needs to know neither. Every call runs on a helper thread,
//! off the agent's, while the agent's thread serves what the handler asks of the host
//! (running another tool, the rest of a middleware chain); past the plugin's `timeout:`
//! the agent gets an error result and goes on, while an in-process handler finishes in
//! the background.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RResult, RStr, RString};
use hermes_hooks_abi::core::{EventView, Field, HookCallbackBox, HostCalls, HostCalls_TO, Reply};
use hermes_hooks_abi::sdk::offer;
use serde_json::{Map, Value, json};

use crate::commands::{CommandHandler, CommandSpec};
use crate::middleware::{Kind, Middleware, Next, Rewrite};
use crate::registry::Registry;
use crate::tools::{Dispatch, ToolHandler, ToolSpec};

/// Whether `hook` names an offer rather than a hook.
pub(crate) fn is_offer(hook: &str) -> bool {
    hook.starts_with('@')
}

/// Puts the offer `hook` of `plugin` into `registry`; returns what the plugin report lists
/// (`("tool", name)`, ...) or the warning that says why it was not taken.
pub(crate) fn add(
    registry: &mut Registry,
    plugin: &str,
    hook: &str,
    label: &str,
    callback: HookCallbackBox,
    timeout: Option<Duration>,
) -> Result<(&'static str, String), String> {
    let offer = Arc::new(Offer {
        callback: Arc::new(callback),
        label: format!("{plugin}::{label}"),
        plugin: plugin.to_string(),
        timeout,
    });
    let refused =
        |why: String| format!("Plugin '{plugin}' offers '{hook}', which was not taken: {why}");
    if let Some(name) = hook.strip_prefix(offer::TOOL) {
        let described = offer.describe().map_err(refused)?;
        let text = |key: &str| described[key].as_str().unwrap_or_default().to_string();
        let spec = ToolSpec {
            name: name.to_string(),
            toolset: text("toolset"),
            schema: described["schema"].clone(),
            description: text("description"),
            source: plugin.to_string(),
        };
        registry.add_tool(spec, offer)?;
        return Ok(("tool", name.to_string()));
    }
    if let Some(name) = hook.strip_prefix(offer::COMMAND) {
        let described = offer.describe().map_err(refused)?;
        let text = |key: &str| described[key].as_str().unwrap_or_default().to_string();
        let name = crate::commands::normalize(name);
        let spec = CommandSpec {
            name: name.clone(),
            description: text("description"),
            args_hint: text("args_hint"),
            source: plugin.to_string(),
        };
        registry.add_command(spec, offer)?;
        return Ok(("command", name));
    }
    if let Some(kind) = hook.strip_prefix(offer::MIDDLEWARE) {
        let Some(kind) = Kind::parse(kind).filter(|k| k.name() == kind) else {
            return Err(refused(format!(
                "'{kind}' is not a middleware kind (tool_request, tool_execution, llm_request, llm_execution)"
            )));
        };
        registry.add_middleware(kind, offer);
        return Ok(("middleware", kind.name().to_string()));
    }
    Err(refused(
        "this host knows tools (@tool/), commands (@command/) and middleware (@middleware/)".into(),
    ))
}

/// One offer of a native plugin.
struct Offer {
    callback: Arc<HookCallbackBox>,
    label: String,
    plugin: String,
    timeout: Option<Duration>,
}

/// The capabilities a host offers a running offer: [`offer::DISPATCH`] (run a tool) and
/// [`offer::NEXT`] (the rest of an execution chain).
type Capability<'a> = dyn FnMut(&str, &str) -> Result<String, String> + 'a;

impl Offer {
    /// What the offer says about itself.
    fn describe(&self) -> Result<Value, String> {
        let fields = [Field::bool(offer::DESCRIBE, true)];
        let view = EventView::new(
            "@describe",
            &fields,
            hermes_hooks_abi::core::no_host_calls(),
        );
        match self.callback.call(&view).into_result() {
            Ok(abi_stable::std_types::ROption::RSome(reply))
                if reply.action.as_str() == offer::DESCRIBE =>
            {
                serde_json::from_str(reply.text.as_str())
                    .map_err(|e| format!("its description is not JSON ({e})"))
            }
            Ok(_) => Err("it answered no description; build it with hermes-hooks-abi 1.3 or later's ctx.tool / ctx.command".into()),
            Err(why) => Err(format!("describing it failed: {why}")),
        }
    }

    /// Calls the offer with `fields` on a helper thread, serving `capability` on this one
    /// while it runs (so what the host does for it, running a tool or the rest of a chain,
    /// happens where the host expects), and gives up past the plugin's timeout.
    fn call(
        &self,
        hook: &str,
        fields: Vec<(&'static str, OwnedValue)>,
        capability: &mut Capability<'_>,
    ) -> Result<Option<Reply>, String> {
        let callback = self.callback.clone();
        let (tx, rx) = mpsc::channel::<Message>();
        let hook_name = hook.to_string();
        let worker_tx = tx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("offer {}", self.label))
            .spawn(move || {
                let host = Forward(std::sync::Mutex::new(worker_tx.clone()));
                let answer = call_owned(&callback, &hook_name, &fields, &host);
                let _ = worker_tx.send(Message::Done(answer));
            });
        if let Err(e) = spawned {
            return Err(format!("cannot start a thread for it: {e}"));
        }
        drop(tx);
        let mut deadline = self.timeout.map(|t| Instant::now() + t);
        loop {
            let message = match deadline {
                Some(at) => rx.recv_timeout(at.saturating_duration_since(Instant::now())),
                None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
            };
            match message {
                Ok(Message::Done(answer)) => return answer,
                Ok(Message::Call(cap, args, reply)) => {
                    // Time the host spends on the call (a tool waiting for approval) is not
                    // the handler's.
                    let started = Instant::now();
                    let _ = reply.send(capability(&cap, &args));
                    if let Some(at) = &mut deadline {
                        *at += started.elapsed();
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "timed out after {} s (the `timeout` of plugin '{}'); it goes on in the background and its result is dropped",
                        self.timeout.unwrap_or_default().as_secs_f64(),
                        self.plugin
                    ));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("its thread ended without an answer".into());
                }
            }
        }
    }
}

enum Message {
    Done(Result<Option<Reply>, String>),
    Call(String, String, mpsc::Sender<Result<String, String>>),
}

/// An owned field value, for a call that may run on another thread.
enum OwnedValue {
    Str(String),
    Json(String),
}

fn call_owned<H: HostCalls>(
    callback: &HookCallbackBox,
    hook: &str,
    fields: &[(&'static str, OwnedValue)],
    host: &H,
) -> Result<Option<Reply>, String> {
    let fields: Vec<Field<'_>> = fields
        .iter()
        .map(|(name, value)| match value {
            OwnedValue::Str(s) => Field::str(name, s),
            OwnedValue::Json(s) => Field::json(name, s),
        })
        .collect();
    let host = HostCalls_TO::from_const(host, TD_Opaque);
    let view = EventView::new(hook, &fields, host);
    callback
        .call(&view)
        .map(Into::into)
        .map_err(RString::into_string)
        .into_result()
}

/// Sends capabilities from a helper thread to the thread that waits for it.
struct Forward(std::sync::Mutex<mpsc::Sender<Message>>);

impl HostCalls for Forward {
    fn call(&self, capability: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, RString> {
        let (tx, rx) = mpsc::channel();
        let sent = self.0.lock().map(|to_host| {
            to_host.send(Message::Call(
                capability.to_string(),
                args_json.to_string(),
                tx,
            ))
        });
        if !matches!(sent, Ok(Ok(()))) {
            return RResult::RErr("the host gave up on this call (timeout)".into());
        }
        match rx.recv() {
            Ok(answer) => answer.map(RString::from).map_err(RString::from).into(),
            Err(_) => RResult::RErr("the host gave up on this call (timeout)".into()),
        }
    }
}

fn json_text(value: &Value) -> OwnedValue {
    OwnedValue::Json(value.to_string())
}

/// Serves [`offer::DISPATCH`] with `dispatch`; refuses anything else.
fn dispatching<'a>(
    dispatch: Dispatch<'a>,
) -> impl FnMut(&str, &str) -> Result<String, String> + 'a {
    move |capability, args| {
        if capability != offer::DISPATCH {
            return Err(format!(
                "unknown capability '{capability}': tools and commands offer `{}`",
                offer::DISPATCH
            ));
        }
        let request: Value =
            serde_json::from_str(args).map_err(|e| format!("{}: {e}", offer::DISPATCH))?;
        let name = request["name"].as_str().unwrap_or_default();
        Ok(dispatch(name, &request["args"]))
    }
}

impl ToolHandler for Offer {
    fn call(
        &self,
        name: &str,
        args: &Value,
        context: &Map<String, Value>,
        dispatch: Dispatch<'_>,
    ) -> String {
        let fields = vec![
            ("name", OwnedValue::Str(name.to_string())),
            ("args", json_text(args)),
            (
                "context",
                OwnedValue::Json(Value::Object(context.clone()).to_string()),
            ),
        ];
        let hook = format!("{}{name}", offer::TOOL);
        match Offer::call(self, &hook, fields, &mut dispatching(dispatch)) {
            Ok(Some(reply)) if reply.action.as_str() == offer::RESULT => reply.text.into_string(),
            Ok(_) => json!({ "error": format!("tool '{name}' of plugin '{}' answered no result", self.plugin) }).to_string(),
            Err(why) => json!({ "error": format!("tool '{name}' of plugin '{}' failed: {why}", self.plugin) }).to_string(),
        }
    }
}

impl CommandHandler for Offer {
    fn run(
        &self,
        name: &str,
        raw_args: &str,
        dispatch: Dispatch<'_>,
    ) -> Result<Option<String>, String> {
        let fields = vec![
            ("name", OwnedValue::Str(name.to_string())),
            ("raw_args", OwnedValue::Str(raw_args.to_string())),
        ];
        let hook = format!("{}{name}", offer::COMMAND);
        match Offer::call(self, &hook, fields, &mut dispatching(dispatch))? {
            Some(reply) if reply.action.as_str() == offer::RESULT => {
                Ok(Some(reply.text.into_string()))
            }
            _ => Ok(None),
        }
    }
}

impl Middleware for Offer {
    fn source(&self) -> &str {
        &self.plugin
    }

    fn rewrite(
        &self,
        kind: Kind,
        payload: Value,
        original: &Value,
        context: &Map<String, Value>,
    ) -> Rewrite {
        let fields = middleware_fields(kind, &payload, original, context);
        let hook = format!("{}{}", offer::MIDDLEWARE, kind.name());
        let mut none = |cap: &str, _: &str| {
            Err(format!(
                "unknown capability '{cap}': request middleware offers none"
            ))
        };
        let mut out = Rewrite {
            payload,
            ..Rewrite::default()
        };
        match Offer::call(self, &hook, fields, &mut none) {
            Ok(None) => {}
            Ok(Some(reply)) => match (reply.action.as_str(), serde_json::from_str::<Value>(reply.json.as_str())) {
                (hermes_hooks_abi::core::action::REPLACE, Ok(new)) if new.is_object() => {
                    let mut entry = Map::new();
                    entry.insert("source".into(), json!(self.plugin));
                    if !reply.text.is_empty() {
                        entry.insert("reason".into(), json!(reply.text.as_str()));
                    }
                    entry.insert("name".into(), json!(self.label));
                    out.payload = new;
                    out.trace.push(Value::Object(entry));
                }
                (offer::RESULT, Ok(answer)) if kind == Kind::LlmRequest => {
                    out.response = Some(answer);
                    let mut entry = Map::new();
                    entry.insert("source".into(), json!(self.plugin));
                    entry.insert("reason".into(), json!("answered without the model"));
                    entry.insert("name".into(), json!(self.label));
                    out.trace.push(Value::Object(entry));
                }
                (act, _) => out.failures.push(format!(
                    "Middleware '{}' callback {} raised: an unusable answer ('{act}'; a request middleware replaces the payload with a JSON object)",
                    kind.name(),
                    self.label
                )),
            },
            Err(why) => out.failures.push(format!("Middleware '{}' callback {} raised: {why}", kind.name(), self.label)),
        }
        out
    }

    fn execute(
        &self,
        kind: Kind,
        payload: Value,
        original: &Value,
        context: &Map<String, Value>,
        next: &mut Next<'_>,
    ) -> Result<Value, String> {
        let fields = middleware_fields(kind, &payload, original, context);
        let hook = format!("{}{}", offer::MIDDLEWARE, kind.name());
        let mut downstream: Option<Result<Value, String>> = None;
        let answer = {
            let mut serve = |cap: &str, args: &str| -> Result<String, String> {
                if cap != offer::NEXT {
                    return Err(format!(
                        "unknown capability '{cap}': execution middleware offers `{}`",
                        offer::NEXT
                    ));
                }
                let passed: Value =
                    serde_json::from_str(args).map_err(|e| format!("{}: {e}", offer::NEXT))?;
                let result = next(passed);
                downstream = Some(result.clone());
                result.map(|v| v.to_string())
            };
            Offer::call(self, &hook, fields, &mut serve)
        };
        match answer {
            Ok(Some(reply)) if reply.action.as_str() == offer::RESULT => {
                serde_json::from_str(reply.json.as_str()).map_err(|e| {
                    format!(
                        "Middleware '{}' callback {} answered a result that is not JSON: {e}",
                        kind.name(),
                        self.label
                    )
                })
            }
            // No answer of its own: the chain's result stands, or the chain runs now.
            Ok(_) => match downstream {
                Some(result) => result,
                None => next(payload),
            },
            Err(why) => {
                tracing::warn!(
                    "Middleware '{}' callback {} raised: {why}",
                    kind.name(),
                    self.label
                );
                match downstream {
                    Some(result) => result,
                    None => next(payload),
                }
            }
        }
    }
}

fn middleware_fields(
    kind: Kind,
    payload: &Value,
    original: &Value,
    context: &Map<String, Value>,
) -> Vec<(&'static str, OwnedValue)> {
    vec![
        ("kind", OwnedValue::Str(kind.name().to_string())),
        ("payload", json_text(payload)),
        ("original", json_text(original)),
        (
            "context",
            OwnedValue::Json(Value::Object(context.clone()).to_string()),
        ),
    ]
}
