//! Registers `config.count` no-op `pre_tool_call` callbacks (default 1): the cost of a
//! dispatch with nothing but the boundary in it.

use hermes_hooks_abi::prelude::*;

/// Registers the callbacks.
pub fn register(ctx: &mut PluginContext) {
    let count = ctx.config()["count"].as_u64().unwrap_or(1);
    for _ in 0..count {
        ctx.pre_tool_call(noop);
    }
}

fn noop(e: &PreToolCallEvent<'_, '_>) -> ToolDecision {
    std::hint::black_box(e.tool_name());
    ToolDecision::Continue
}

hermes_hooks_abi::export_plugin!(register);
