//! Shows both `pre_gateway_dispatch` capability handles: every message is acknowledged in
//! its chat with `ack: <text>` (`gateway.send`) and noted in the session's transcript
//! (`session.append`); the message itself is dispatched unchanged.

use hermes_hooks_abi::prelude::*;

/// Registers the acknowledging callback.
pub fn register(ctx: &mut PluginContext) {
    ctx.named("acknowledge").pre_gateway_dispatch(acknowledge);
}

fn acknowledge(e: &GatewayDispatchEvent<'_, '_>) -> DispatchDecision {
    let sent = e
        .gateway()
        .send(e.platform(), e.chat_id(), &format!("ack: {}", e.text()));
    let mut entry =
        serde_json::json!({ "role": "plugin", "content": format!("ack: {}", e.text()) });
    if let Err(why) = sent {
        entry["send_error"] = why.into();
    }
    if let Err(why) = e.session_store().append(e.session_key(), &entry) {
        tracing::warn!("gateway-ack: session.append failed: {why}");
    }
    DispatchDecision::Continue
}

hermes_hooks_abi::export_plugin!(register);
