//! A plugin built against interface 1.1: it registers `pre_api_request` (added in 1.1) and
//! reads `turn_id` (a field added in 1.1), so it shows how a newer plugin behaves in an
//! older host: the unknown hook is reported and kept, the unknown field reads as `None`.
//! It also registers what interface 1.3 added (a `pre_verify` hook and a tool), which a
//! 1.0 host reports the same way and never fires.

use hermes_hooks_abi::prelude::*;

/// Registers a 1.0 hook that reads a 1.1 field, and a 1.1 hook.
pub fn register(ctx: &mut PluginContext) {
    ctx.pre_tool_call(|e| {
        ToolDecision::block(format!(
            "v1.1 plugin saw {} with turn_id={:?}",
            e.tool_name(),
            e.turn_id()
        ))
    });
    ctx.pre_api_request(|e| tracing::info!(model = e.model(), "pre_api_request"));
    ctx.pre_verify(|_e| VerifyDecision::keep_working("a 1.3 plugin asks for one more pass"));
    ctx.tool(
        "compat_echo",
        serde_json::json!({"description": "Echoes its arguments."}),
        |call| Ok(call.args()),
    );
}

hermes_hooks_abi::export_plugin!(register);
