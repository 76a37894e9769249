//! An agent host with the guardrail plugin linked in: `Hooks::load` finds it among the
//! plugins built into the binary, registers it under the same `plugins.enabled` rules as a
//! library in `$HERMES_HOME/plugins/`, and it blocks with no plugin file on disk. Prints the
//! plugins it has, then whether the `terminal` tool may run the command given.

use std::process::ExitCode;

use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
use hermes_host::{Hooks, LoadOptions, home::Home};

// Linking the crate is what registers it; nothing of it is called by name.
use guardrail as _;

fn main() -> ExitCode {
    let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let hooks = match Hooks::load(&Home::from_env(), &LoadOptions::default()) {
        Ok(hooks) => hooks,
        Err(e) => {
            eprintln!("static-host: {e}");
            return ExitCode::from(2);
        }
    };
    for plugin in &hooks.report().plugins {
        let how = if plugin.linked_static {
            "static"
        } else {
            "library"
        };
        let state = plugin.error.as_deref().unwrap_or("enabled");
        println!("plugin {} {} ({how}): {state}", plugin.name, plugin.version);
    }
    let args = serde_json::json!({ "command": command }).to_string();
    let event = PreToolCallEvent {
        tool_name: "terminal",
        args: &args,
        ..Default::default()
    };
    match hooks.pre_tool_call(&event).blocked {
        Some(blocked) => {
            println!("blocked by {}: {}", blocked.by, blocked.message);
            ExitCode::from(1)
        }
        None => {
            println!("allowed");
            ExitCode::SUCCESS
        }
    }
}
