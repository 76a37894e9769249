//! {{description}}

use hermes_hooks_abi::prelude::*;

/// Registers the plugin's hooks; the host calls it once, when it loads the plugin.
{%- if any_hook %}
pub fn register(ctx: &mut PluginContext) {
{%- if hook_pre_tool_call %}
    let blocked = blocked_commands(&ctx.config());
    ctx.named("check_tool_call").pre_tool_call(move |e| check_tool_call(&blocked, e));
{%- endif %}
{%- if hook_pre_llm_call %}
    ctx.pre_llm_call(add_context);
{%- endif %}
{%- if hook_transform_tool_result %}
    ctx.transform_tool_result(shorten_result);
{%- endif %}
{%- for hook in replace_hooks %}
    // Return `Some(text)` to replace what the agent sees; `None` leaves it as it is.
    ctx.named("{{hook}}").{{hook}}(|_e| None);
{%- endfor %}
{%- if hook_pre_gateway_dispatch %}
    ctx.pre_gateway_dispatch(route_message);
{%- endif %}
{%- if hook_pre_verify %}
    // After the agent edited files: `VerifyDecision::keep_working("run the tests")` keeps it
    // going with that instruction; check `e.attempt()` so it asks once.
    ctx.named("verify_changes").pre_verify(|_e| VerifyDecision::Finish);
{%- endif %}
{%- for hook in observer_hooks %}
    ctx.named("log_{{hook}}").{{hook}}(|_e| {
        tracing::debug!("{{hook}} fired");
    });
{%- endfor %}
{%- if hook_on_session_end %}
    ctx.on_session_end(log_session_end);
{%- endif %}
{%- if gateway %}
    ctx.on_gateway_event("agent:*", log_agent_event);
{%- endif %}
}
{%- else %}
pub fn register(_ctx: &mut PluginContext) {
    // Register hooks here, for example:
    // ctx.pre_tool_call(|e| ToolDecision::Continue);
}
{%- endif %}
{%- if hook_pre_tool_call %}

/// The `blocked_commands` list of the plugin's settings (`rm -rf /` when there is none).
fn blocked_commands(config: &serde_json::Value) -> Vec<String> {
    match config["blocked_commands"].as_array() {
        Some(list) => list.iter().filter_map(|c| c.as_str().map(str::to_string)).collect(),
        None => vec!["rm -rf /".to_string()],
    }
}

/// Blocks a `terminal` command that contains a blocked one; lets every other call run.
fn check_tool_call(blocked: &[String], e: &PreToolCallEvent<'_, '_>) -> ToolDecision {
    if e.tool_name() != "terminal" {
        return ToolDecision::Continue;
    }
    let args = e.args().value();
    let command = args["command"].as_str().unwrap_or_default();
    match blocked.iter().find(|b| command.contains(b.as_str())) {
        Some(b) => {
            tracing::warn!(session_id = e.session_id(), command, "blocked");
            ToolDecision::block(format!("{{project-name}}: `{b}` is not allowed here"))
        }
        None => ToolDecision::Continue,
    }
}
{%- endif %}
{%- if hook_pre_llm_call %}

/// On the first turn of a session, adds a line of context to the user's message.
fn add_context(e: &PreLlmCallEvent<'_, '_>) -> Option<String> {
    e.is_first_turn().then(|| format!("The user is working on the {} platform.", e.platform()))
}
{%- endif %}
{%- if hook_transform_tool_result %}

/// The longest tool result the model sees, in characters.
const MAX_RESULT_CHARS: usize = 4000;

/// Cuts tool results longer than [`MAX_RESULT_CHARS`]; leaves shorter ones alone.
fn shorten_result(e: &TransformToolResultEvent<'_, '_>) -> Option<String> {
    let result = e.result();
    if result.chars().count() <= MAX_RESULT_CHARS {
        return None;
    }
    let kept: String = result.chars().take(MAX_RESULT_CHARS).collect();
    Some(format!("{kept}\n[cut to {MAX_RESULT_CHARS} characters by {{project-name}}]"))
}
{%- endif %}
{%- if hook_pre_gateway_dispatch %}

/// Drops gateway messages that are only whitespace; every other message goes on as usual.
fn route_message(e: &GatewayDispatchEvent<'_, '_>) -> DispatchDecision {
    if e.text().trim().is_empty() {
        DispatchDecision::Skip("empty message".to_string())
    } else {
        DispatchDecision::Continue
    }
}
{%- endif %}
{%- if hook_on_session_end %}

/// Logs the end of every run of the agent loop (`HERMES_LOG=info` shows it).
fn log_session_end(e: &SessionEndEvent<'_, '_>) {
    tracing::info!(
        session_id = e.session_id(),
        completed = e.completed(),
        interrupted = e.interrupted(),
        "session ended"
    );
}
{%- endif %}
{%- if gateway %}

/// Logs every `agent:*` gateway event (`agent:start`, `agent:step`, `agent:end`).
fn log_agent_event(e: &GatewayEvent<'_, '_>) {
    tracing::info!(event = e.event_type(), "gateway event");
}
{%- endif %}

hermes_hooks_abi::export_plugin!(register);

#[cfg(test)]
mod tests {
{%- if any_hook %}
    use hermes_hooks_abi::sdk::testing::{LocalHost, field};
{%- else %}
    use hermes_hooks_abi::sdk::testing::LocalHost;
{%- endif %}

    use super::*;

    fn host() -> LocalHost {
        LocalHost::register("{{project-name}}", register)
    }

    #[test]
    fn registers_without_an_error() {
        assert_eq!(host().register_error(), None);
    }
{%- if hook_pre_tool_call %}

    fn terminal(host: &LocalHost, command: &str) -> Option<hermes_hooks_abi::sdk::testing::Reply> {
        let args = serde_json::json!({ "command": command }).to_string();
        host.fire_one(
            "pre_tool_call",
            &[field::str("tool_name", "terminal"), field::json("args", &args)],
        )
    }

    #[test]
    fn blocks_a_blocked_terminal_command() {
        let reply = terminal(&host(), "sudo rm -rf / --no-preserve-root").expect("a block");
        assert_eq!(reply.action.as_str(), "block");
        assert_eq!(reply.text.as_str(), "{{project-name}}: `rm -rf /` is not allowed here");
    }

    #[test]
    fn lets_other_commands_and_tools_run() {
        assert!(terminal(&host(), "ls -la").is_none());
        let args = r#"{"path": "rm -rf /"}"#;
        let reply = host().fire_one(
            "pre_tool_call",
            &[field::str("tool_name", "read_file"), field::json("args", args)],
        );
        assert!(reply.is_none());
    }

    #[test]
    fn blocked_commands_come_from_the_config() {
        let host = LocalHost::builder("{{project-name}}")
            .config(serde_json::json!({ "blocked_commands": ["git push --force"] }))
            .register(register);
        assert!(terminal(&host, "git push --force origin main").is_some());
        assert!(terminal(&host, "rm -rf /").is_none());
    }
{%- endif %}
{%- if hook_pre_llm_call %}

    #[test]
    fn adds_context_on_the_first_turn_only() {
        let first = [field::bool("is_first_turn", true), field::str("platform", "cli")];
        let reply = host().fire_one("pre_llm_call", &first).expect("context");
        assert_eq!(reply.text.as_str(), "The user is working on the cli platform.");
        let later = [field::bool("is_first_turn", false), field::str("platform", "cli")];
        assert!(host().fire_one("pre_llm_call", &later).is_none());
    }
{%- endif %}
{%- if hook_transform_tool_result %}

    #[test]
    fn cuts_long_tool_results_only() {
        let long = "x".repeat(MAX_RESULT_CHARS + 10);
        let reply = host()
            .fire_one("transform_tool_result", &[field::str("result", &long)])
            .expect("a replacement");
        assert!(reply.text.as_str().starts_with(&"x".repeat(MAX_RESULT_CHARS)));
        assert!(reply.text.as_str().ends_with("by {{project-name}}]"));
        assert!(
            host().fire_one("transform_tool_result", &[field::str("result", "short")]).is_none()
        );
    }
{%- endif %}
{%- if hook_pre_gateway_dispatch %}

    #[test]
    fn skips_empty_gateway_messages_only() {
        let reply = host().fire_one("pre_gateway_dispatch", &[field::str("text", "  ")]);
        assert_eq!(reply.expect("a skip").action.as_str(), "skip");
        assert!(host().fire_one("pre_gateway_dispatch", &[field::str("text", "hi")]).is_none());
    }
{%- endif %}
{%- if hook_pre_verify %}

    #[test]
    fn lets_the_agent_finish_after_it_edited_files() {
        assert!(host().fire_one("pre_verify", &[]).is_none());
    }
{%- endif %}
{%- for hook in replace_hooks %}

    #[test]
    fn {{hook}}_leaves_its_input_alone() {
        assert!(host().fire_one("{{hook}}", &[]).is_none());
    }
{%- endfor %}
{%- for hook in observer_hooks %}

    #[test]
    fn observes_{{hook}}() {
        assert!(host().fire_one("{{hook}}", &[]).is_none());
    }
{%- endfor %}
{%- if hook_on_session_end %}

    #[test]
    fn observes_the_end_of_a_session() {
        let fields = [field::str("session_id", "s-1"), field::bool("completed", true)];
        assert!(host().fire_one("on_session_end", &fields).is_none());
    }
{%- endif %}
{%- if gateway %}

    #[test]
    fn observes_agent_gateway_events() {
        let fields = [field::str("event_type", "agent:start"), field::json("context", "{}")];
        assert!(host().fire_one("agent:*", &fields).is_none());
    }
{%- endif %}
}
