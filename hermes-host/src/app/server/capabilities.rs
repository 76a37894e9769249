//! The capabilities `pre_gateway_dispatch` callbacks reach through `HostCalls`:
//!
//! | capability | arguments | does |
//! |---|---|---|
//! | `gateway.send` | `{"platform", "chat_id", "text"}` | sends `text` to every connection following that chat (kind `send`); an error when none does |
//! | `session.append` | `{"session_key", "entry"}` | appends `entry` (a JSON object) as one line to the transcript of the chat's current session |
//!
//! Both answer `{"delivered": n}` / `{"session_id": ..}` as JSON on success, and a message
//! saying what to fix on failure. Nothing here can panic across the plugin boundary.

use abi_stable::std_types::{RResult, RStr, RString};
use hermes_hooks_abi::core::HostCalls;
use serde_json::{Value, json};

use super::Core;
use super::wire::{Outbound, OutboundKind, session_key};

/// The host side of the capability handles, for one firing.
pub(crate) struct Capabilities<'a> {
    pub(crate) core: &'a Core,
}

impl HostCalls for Capabilities<'_> {
    fn call(&self, capability: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, RString> {
        let args: Value = match serde_json::from_str(args_json.as_str()) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                return RResult::RErr(
                    format!("{capability}: the arguments must be a JSON object").into(),
                );
            }
        };
        let answer = match capability.as_str() {
            "gateway.send" => self.send(&args),
            "session.append" => self.append(&args),
            other => Err(format!(
                "unknown capability '{other}': pre_gateway_dispatch offers gateway.send and session.append"
            )),
        };
        match answer {
            Ok(value) => RResult::ROk(value.to_string().into()),
            Err(message) => RResult::RErr(message.into()),
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
        let platform = text_arg(args, "gateway.send", "platform")?;
        let chat_id = text_arg(args, "gateway.send", "chat_id")?;
        let text = text_arg(args, "gateway.send", "text")?;
        let key = session_key(platform, chat_id);
        let message = Outbound {
            platform: platform.to_string(),
            chat_id: chat_id.to_string(),
            kind: OutboundKind::Send,
            text: text.to_string(),
            session_id: self.core.chats.session_id(&key),
            reply_to: None,
        };
        match self.core.router.send(&message) {
            0 => Err(format!("gateway.send: no connection follows chat {key}")),
            n => Ok(json!({ "delivered": n })),
        }
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
