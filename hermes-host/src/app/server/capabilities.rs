//! The capabilities `pre_gateway_dispatch` callbacks reach through `HostCalls`:
//!
//! | capability | arguments | does |
//! |---|---|---|
//! | `gateway.send` | `{"platform", "chat_id", "text"}` | sends `text` to every connection following that chat (kind `send`); an error when none does |
//! | `session.append` | `{"session_key", "entry"}` | appends `entry` (a JSON object) as one line to the transcript of the chat's current session |
//!
//! Both answer `{"delivered": n}` / `{"session_id": ..}` as JSON on success, and a message
//! saying what to fix on failure. Nothing here can panic across the plugin boundary.
//!
//! Gateway hook handlers (native ones through `HostCalls`, `handler.py` through the
//! worker's compatibility modules) reach the running gateway through
//! [`GatewayServices`], implemented by [`Core`]:
//!
//! | capability | arguments | answers |
//! |---|---|---|
//! | `agent.run_once` | `{"prompt", "platform"?, "model"?, "max_iterations"?}` | runs one agent turn in a fresh session (platform `gateway` by default) with the gateway's scripted model, tools and hooks, its history to the session's transcript; `{"final_response", "messages", "api_calls", "completed", "interrupted", "session_id"}`, or the model's error |
//! | `gateway.model` | `{}` | `{"model": <the gateway's model>}` |
//! | `gateway.runtime` | `{}` | the provider keyword arguments a Python `AIAgent` takes: `{"provider", "base_url", "api_key", "api_mode"}` |
//! | `gateway.send` | `{"platform"?, "chat_id", "text"}` | as above; `platform` defaults to the gateway's |

use serde_json::{Value, json};

use super::Core;
use super::wire::{Outbound, OutboundKind, session_key};
use crate::app::agent::Session;
use hermes_host::gateway::GatewayServices;

/// The host side of the capability handles, for one firing (offered to callbacks through
/// [`HostCallsOf`](hermes_host::gateway::HostCallsOf)).
pub(crate) struct Capabilities<'a> {
    pub(crate) core: &'a Core,
}

impl GatewayServices for Capabilities<'_> {
    fn call(&self, capability: &str, args: &Value) -> Result<Value, String> {
        match capability {
            "gateway.send" => self.send(args),
            "session.append" => self.append(args),
            other => Err(format!(
                "unknown capability '{other}': pre_gateway_dispatch offers gateway.send and session.append"
            )),
        }
    }
}

fn text_arg<'v>(args: &'v Value, capability: &str, name: &str) -> Result<&'v str, String> {
    args[name]
        .as_str()
        .ok_or_else(|| format!("{capability}: `{name}` must be a string"))
}

impl Capabilities<'_> {
    fn send(&self, args: &Value) -> Result<Value, String> {
        text_arg(args, "gateway.send", "platform")?;
        self.core.send(args)
    }

    fn append(&self, args: &Value) -> Result<Value, String> {
        let key = text_arg(args, "session.append", "session_key")?;
        let entry = &args["entry"];
        if !entry.is_object() {
            return Err("session.append: `entry` must be a JSON object".into());
        }
        let Some(session_id) = self.core.chats.session_id(key) else {
            return Err(format!("session.append: no session for key {key:?}"));
        };
        self.core
            .transcripts
            .append(&session_id, entry)
            .map_err(|e| format!("session.append: {e}"))?;
        Ok(json!({ "session_id": session_id }))
    }
}

impl Core {
    /// `gateway.send`: `text` to every connection following the chat.
    fn send(&self, args: &Value) -> Result<Value, String> {
        let platform = match args.get("platform") {
            None | Some(Value::Null) => self.options.platform.as_str(),
            Some(_) => text_arg(args, "gateway.send", "platform")?,
        };
        let chat_id = text_arg(args, "gateway.send", "chat_id")?;
        let text = text_arg(args, "gateway.send", "text")?;
        let key = session_key(platform, chat_id);
        let message = Outbound {
            platform: platform.to_string(),
            chat_id: chat_id.to_string(),
            kind: OutboundKind::Send,
            text: text.to_string(),
            session_id: self.chats.session_id(&key),
            reply_to: None,
        };
        match self.router.send(&message) {
            0 => Err(format!("gateway.send: no connection follows chat {key}")),
            n => Ok(json!({ "delivered": n })),
        }
    }

    /// `agent.run_once`: one turn of a fresh session, finalized at once.
    fn run_once(&self, args: &Value) -> Result<Value, String> {
        let prompt = text_arg(args, "agent.run_once", "prompt")?;
        let platform = args["platform"].as_str().unwrap_or("gateway");
        let model = args["model"].as_str().unwrap_or(&self.script.model);
        let max_iterations = args["max_iterations"].as_u64().map_or(usize::MAX, |n| {
            usize::try_from(n.max(1)).unwrap_or(usize::MAX)
        });
        let mut session = Session::new(model, platform, &self.options.cwd);
        if !self.script.dir.as_os_str().is_empty() {
            session.script_dir = self.script.dir.clone();
        }
        let mut steps = self.script.steps_for(prompt);
        steps.truncate(max_iterations);
        let agent = self.agent();
        let result = agent.run_turn(&mut session, prompt, &steps);
        let mut transcript = self.recorder(&session.id);
        for entry in &session.history {
            transcript.record(entry.clone());
        }
        agent.finalize(&session);
        if let Some(error) = result.error {
            transcript
                .record(json!({ "role": "system", "content": format!("[model error: {error}]") }));
            return Err(format!("the model failed: {error}"));
        }
        let api_calls = session
            .history
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count();
        Ok(json!({
            "final_response": result.response.unwrap_or_default(),
            "messages": session.history,
            "api_calls": api_calls,
            "completed": result.completed,
            "interrupted": result.interrupted,
            "stopped": result.stopped.map(|s| s.reason),
            "session_id": session.id,
        }))
    }
}

impl GatewayServices for Core {
    fn call(&self, capability: &str, args: &Value) -> Result<Value, String> {
        match capability {
            "agent.run_once" => self.run_once(args),
            "gateway.model" => Ok(json!({ "model": self.script.model })),
            // The scripted model needs no credentials; the keys are those the reference's
            // `_resolve_runtime_agent_kwargs` returns, so `AIAgent(**kwargs)` accepts them.
            "gateway.runtime" => Ok(json!({
                "provider": "scripted",
                "base_url": "",
                "api_key": "",
                "api_mode": "chat_completions",
            })),
            "gateway.send" => self.send(args),
            other => Err(format!(
                "unknown capability '{other}': the gateway offers agent.run_once, gateway.model, gateway.runtime and gateway.send"
            )),
        }
    }
}
