//! The capabilities `pre_gateway_dispatch` callbacks reach through `HostCalls`:
//!
//! | capability | arguments | does |
//! |---|---|---|
//! | `gateway.send` | `{"platform", "chat_id", "text"}` | sends `text` to every connection following that chat (kind `send`); an error when none does |
//! | `session.append` | `{"session_key" \| "session_id", "entry"}` | appends `entry` (a JSON object) as one line to the transcript of the chat's current session; `{"session_id"}` |
//! | `session.get_or_create` | `{"platform", "chat_id"}` | the chat's current session: `{"session_key", "session_id"}` |
//! | `session.update` | `{"session_key"}` | notes activity on the chat (it ends idle later); `{"session_id"}` |
//! | `session.load` | `{"session_id"}` | the session's transcript, a list of its entries |
//!
//! Each answers JSON on success and a message saying what to fix on failure. A session is
//! reached only while it is a chat's current one: a plugin cannot write or read another
//! file. Nothing here can panic across the plugin boundary.
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
            "session.get_or_create" => self.get_or_create(args),
            "session.update" => self.update(args),
            "session.load" => self.load(args),
            other => Err(format!(
                "unknown capability '{other}': pre_gateway_dispatch offers gateway.send, session.append, session.get_or_create, session.update and session.load"
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

    /// The current session a `session_key`, or a `session_id` that is some chat's current
    /// session, names (the reference's store takes the id; earlier plugins here the key).
    fn session_of(&self, args: &Value, capability: &str) -> Result<String, String> {
        if let Some(key) = args["session_key"].as_str() {
            return self
                .core
                .chats
                .session_id(key)
                .or_else(|| self.core.chats.is_current(key).then(|| key.to_string()))
                .ok_or_else(|| format!("{capability}: no session for key {key:?}"));
        }
        let id = text_arg(args, capability, "session_id")?;
        if self.core.chats.is_current(id) {
            Ok(id.to_string())
        } else {
            Err(format!(
                "{capability}: {id:?} is not the current session of any chat here"
            ))
        }
    }

    /// `session_store.get_or_create_session(source)`: the chat's session. This gateway makes
    /// a chat's session when the chat's first message arrives, so the chat of the message
    /// being dispatched always has one.
    fn get_or_create(&self, args: &Value) -> Result<Value, String> {
        let platform = text_arg(args, "session.get_or_create", "platform")?;
        let chat_id = text_arg(args, "session.get_or_create", "chat_id")?;
        if args["force_new"].as_bool() == Some(true) {
            return Err("session.get_or_create: force_new is not offered here; a user's /new starts a new session".into());
        }
        let key = session_key(platform, chat_id);
        match self.core.chats.session_id(&key) {
            Some(id) => Ok(json!({ "session_key": key, "session_id": id })),
            None => Err(format!(
                "session.get_or_create: chat {key} has no session yet; this gateway makes one when the chat's first message arrives"
            )),
        }
    }

    /// `session_store.update_session(key)`: the chat was active now.
    fn update(&self, args: &Value) -> Result<Value, String> {
        let key = text_arg(args, "session.update", "session_key")?;
        let id = self
            .core
            .chats
            .touch(key)
            .ok_or_else(|| format!("session.update: no session for key {key:?}"))?;
        Ok(json!({ "session_id": id }))
    }

    /// `session_store.load_transcript(session_id)`: the entries written so far.
    fn load(&self, args: &Value) -> Result<Value, String> {
        let id = self.session_of(args, "session.load")?;
        let path = self
            .core
            .transcripts
            .path_of(&id)
            .map_err(|e| format!("session.load: {e}"))?;
        let text = match hermes_host::private_file::read_regular(&path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("session.load: {}: {e}", path.display())),
        };
        let entries: Vec<Value> = text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(Value::is_object)
            .collect();
        Ok(Value::Array(entries))
    }

    fn append(&self, args: &Value) -> Result<Value, String> {
        let entry = &args["entry"];
        if !entry.is_object() {
            return Err("session.append: `entry` must be a JSON object".into());
        }
        let session_id = self.session_of(args, "session.append")?;
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
