//! Loads the built plugin into a real host, as `hermes` does, and fires its hooks.
//!
//! `TestHost` (from `hermes_host::testing`) installs the library into a temporary
//! `$HERMES_HOME` and loads it with the real loader. Besides one typed method per hook
//! (`host.pre_tool_call(..)`) and `host.fire(hook, json)`, it gives what a test asserts on:
//! `host.logs()` (the plugin's `tracing` records and the host's warnings), `host.stdout()`
//! (what the plugin printed), `host.firings()` and `host.raised()` (each callback's answer or
//! error), and `host.gateway_event("agent:start", json)` for native gateway callbacks.

{% if hook_pre_tool_call or hook_pre_llm_call or hook_transform_tool_result or hook_on_session_end or hook_pre_gateway_dispatch -%}
use hermes_hooks_abi::hooks::payload::*;
{% endif -%}
use hermes_host::plugins::Manifest;
use hermes_host::testing::{TestHost, built_library};

fn host() -> TestHost {
    let plugin_yaml = concat!(env!("CARGO_MANIFEST_DIR"), "/plugin.yaml");
    TestHost::builder(built_library("{{project-name}}"), "{{project-name}}")
        .plugin_yaml(plugin_yaml)
        .load()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn registers_the_hooks_plugin_yaml_lists() {
    let manifest = Manifest::read(env!("CARGO_MANIFEST_DIR").as_ref()).unwrap();
    let host = host();
    // As sets: a hook may have several callbacks, and plugin.yaml lists it once.
    let mut registered = host.hooks().to_vec();
    registered.sort();
    registered.dedup();
    let mut listed = manifest.provides_hooks.clone();
    listed.sort();
    listed.dedup();
    assert_eq!(registered, listed, "update provides_hooks in plugin.yaml");
    assert_eq!(host.report().version, manifest.version);
}
{%- if hook_pre_tool_call %}

#[test]
fn blocks_a_blocked_terminal_command() {
    let host = host();
    let verdict = host.pre_tool_call(&PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "rm -rf / --no-preserve-root"}"#,
        session_id: "s-1",
        ..Default::default()
    });
    let blocked = verdict.blocked.expect("a block");
    assert_eq!(blocked.message, "{{project-name}}: `rm -rf /` is not allowed here");
    assert_eq!(blocked.by, "{{project-name}}::check_tool_call");
    // The plugin's warning reached the host's log.
    assert!(host.logs().iter().any(|l| l.message.starts_with("blocked")), "{:#?}", host.logs());
}

#[test]
fn lets_other_commands_run() {
    let verdict = host().pre_tool_call(&PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "ls -la"}"#,
        ..Default::default()
    });
    assert_eq!(verdict.blocked, None);
    assert_eq!(verdict.modified_args, None);
}
{%- endif %}
{%- if hook_pre_llm_call %}

#[test]
fn adds_context_on_the_first_turn() {
    let context = host().pre_llm_call(&PreLlmCallEvent {
        is_first_turn: true,
        platform: "cli",
        ..Default::default()
    });
    assert_eq!(context.as_deref(), Some("The user is working on the cli platform."));
}
{%- endif %}
{%- if hook_transform_tool_result %}

#[test]
fn cuts_long_tool_results() {
    let long = "x".repeat(5000);
    let result = host().transform_tool_result(&TransformToolResultEvent {
        tool_name: "read_file",
        result: &long,
        ..Default::default()
    });
    assert!(result.expect("a replacement").len() < long.len());
}
{%- endif %}
{%- if hook_pre_gateway_dispatch %}

#[test]
fn skips_empty_gateway_messages() {
    let verdict = host().pre_gateway_dispatch(&GatewayDispatchEvent {
        platform: "telegram",
        chat_id: "c-1",
        text: "   ",
        ..Default::default()
    });
    match verdict {
        hermes_host::registry::DispatchVerdict::Skip { reason, .. } => {
            assert_eq!(reason, "empty message")
        }
        other => panic!("expected a skip, got {other:?}"),
    }
}
{%- endif %}
{%- for hook in replace_hooks %}

#[test]
fn {{hook}}_leaves_its_input_alone() {
    let host = host();
    host.fire("{{hook}}", &serde_json::json!({}));
    assert!(host.raised().is_empty(), "{:#?}", host.logs());
    assert_eq!(host.firings().len(), 1);
}
{%- endfor %}
{%- for hook in observer_hooks %}

#[test]
fn logs_{{hook}}() {
    let host = host();
    host.fire("{{hook}}", &serde_json::json!({}));
    assert!(host.raised().is_empty(), "{:#?}", host.logs());
    let logs = host.logs();
    assert!(logs.iter().any(|l| l.message == "{{hook}} fired"), "{logs:#?}");
}
{%- endfor %}
{%- if hook_on_session_end %}

#[test]
fn logs_the_end_of_a_session() {
    let host = host();
    host.on_session_end(&SessionEndEvent {
        session_id: "s-1",
        completed: true,
        ..Default::default()
    })
    .unwrap();
    let logs = host.logs();
    let line = logs.iter().find(|l| l.message.starts_with("session ended")).expect("a log line");
    assert_eq!(line.plugin.as_deref(), Some("{{project-name}}"));
    assert!(line.message.contains("session_id=\"s-1\""), "{line}");
}
{%- endif %}
{%- if gateway %}

#[test]
fn logs_agent_gateway_events() {
    let host = host();
    host.gateway_event("agent:start", &serde_json::json!({"platform": "telegram"})).unwrap();
    let logs = host.logs();
    assert!(logs.iter().any(|l| l.message.contains("event=\"agent:start\"")), "{logs:#?}");
}
{%- endif %}
