//! A plugin that misbehaves in every way a callback can, to prove the host contains it.

use hermes_hooks_abi::core::Reply;
use hermes_hooks_abi::prelude::*;

/// Registers a panicking callback, junk answers, an unknown hook, and log lines at two
/// levels. With `config: {panic_in_register: true}` it panics in `register` instead, after
/// registering one hook.
pub fn register(ctx: &mut PluginContext) {
    tracing::info!("faulty plugin registering");
    tracing::debug!("faulty debug detail");
    if ctx.config()["panic_in_register"] == true {
        ctx.on_session_start(|_e| {});
        panic!("deliberate panic in register");
    }
    if ctx.config()["fail_register"] == true {
        return;
    }
    ctx.pre_tool_call(explode);
    ctx.register_raw("pre_tool_call", "empty_block", |_v| {
        Ok(Some(Reply::new("block", "")))
    });
    ctx.register_raw("pre_tool_call", "bad_modify", |_v| {
        let mut r = Reply::new("modify", "");
        r.json = "[1, 2, 3]".into();
        Ok(Some(r))
    });
    ctx.register_raw("pre_tool_call", "unknown_action", |_v| {
        Ok(Some(Reply::new("frobnicate", "x")))
    });
    ctx.register_raw("pre_llm_call", "returns_error", |_v| {
        Err("the memory backend is down".to_string())
    });
    ctx.pre_llm_call(|e| {
        tracing::info!(session = e.session_id(), "faulty saw pre_llm_call");
        tracing::debug!("faulty pre_llm_call debug detail");
        Some("context from faulty".to_string())
    });
    ctx.register_raw("pre_tool_use", "misspelled", |_v| Ok(None));
    ctx.transform_llm_output(|_e| Some(String::new()));
}

fn explode(e: &PreToolCallEvent<'_, '_>) -> ToolDecision {
    panic!("deliberate panic in pre_tool_call for {}", e.tool_name());
}

hermes_hooks_abi::export_plugin!(register);
