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
    if ctx.config()["tools"] == true {
        faulty_offers(ctx);
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

/// With `config: {tools: true}`, only offers that misbehave (interface 1.3): a tool that
/// sleeps `seconds`, a tool that panics, a command that fails, and a `tool_execution`
/// wrapper that calls `next` twice when the tool is `twice`.
fn faulty_offers(ctx: &mut PluginContext) {
    ctx.tool("sleepy", serde_json::json!({}), |call| {
        let seconds = call.args()["seconds"].as_f64().unwrap_or(1.0);
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
        Ok("woke up".into())
    });
    ctx.tool("panicky", serde_json::json!({}), |_call| {
        panic!("deliberate panic in a tool")
    });
    ctx.tool("twice", serde_json::json!({}), |_call| Ok("ran".into()));
    ctx.command("boom", "Fails.", |_cmd| {
        Err("the command blew up".to_string())
    });
    ctx.middleware(MiddlewareKind::ToolExecution, |m| {
        if m.context()["tool_name"] != "twice" {
            return Ok(MiddlewareOutcome::Continue);
        }
        let first = m.next(&m.payload())?;
        let second = m.next(&m.payload());
        Ok(MiddlewareOutcome::Respond(serde_json::json!(format!(
            "first: {first}; second: {}",
            second.err().unwrap_or_default()
        ))))
    });
}

fn explode(e: &PreToolCallEvent<'_, '_>) -> ToolDecision {
    panic!("deliberate panic in pre_tool_call for {}", e.tool_name());
}

hermes_hooks_abi::export_plugin!(register);
