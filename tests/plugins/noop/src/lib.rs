//! Registers `config.count` no-op `pre_tool_call` callbacks (default 1): the cost of a
//! dispatch with nothing but the boundary in it. With `config.offers: true` it also offers
//! a tool, a command and a no-op middleware of each kind, to show they cost the hooks
//! nothing; with `config.stream: true`, a no-op `on_stream_delta` observer.

use hermes_hooks_abi::prelude::*;

/// Registers the callbacks; with `config.read_field: true` each one reads `tool_name`.
pub fn register(ctx: &mut PluginContext) {
    let count = ctx.config()["count"].as_u64().unwrap_or(1);
    let read_field = ctx.config()["read_field"] == true;
    for _ in 0..count {
        if read_field {
            ctx.pre_tool_call(read_tool_name);
        } else {
            ctx.pre_tool_call(noop);
        }
    }
    if ctx.config()["offers"] == true {
        ctx.tool("noop_tool", serde_json::json!({}), |_call| Ok("ok".into()));
        ctx.command("noop", "Does nothing.", |_cmd| Ok(None));
        for kind in [
            MiddlewareKind::ToolRequest,
            MiddlewareKind::ToolExecution,
            MiddlewareKind::LlmRequest,
            MiddlewareKind::LlmExecution,
        ] {
            ctx.middleware(kind, |_m| Ok(MiddlewareOutcome::Continue));
        }
    }
    if ctx.config()["stream"] == true {
        ctx.on_stream_delta(|e| {
            std::hint::black_box(e.delta());
        });
    }
}

fn noop(_e: &PreToolCallEvent<'_, '_>) -> ToolDecision {
    ToolDecision::Continue
}

fn read_tool_name(e: &PreToolCallEvent<'_, '_>) -> ToolDecision {
    std::hint::black_box(e.tool_name());
    ToolDecision::Continue
}

hermes_hooks_abi::export_plugin!(register);
