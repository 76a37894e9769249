//! The smallest agent host: loads the hooks of `$HERMES_HOME` (default `~/.hermes`) with
//! the library's facade, and asks them whether the `terminal` tool may run the command given
//! on the command line. Exit 0: allowed, 1: blocked, 2: bad usage or no home.

use std::process::ExitCode;

use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
use hermes_host::{Hooks, LoadOptions, home::Home};

fn main() -> ExitCode {
    hermes_host::isolation::run_worker_if_asked(); // plugins with `isolation: process` run here
    let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    if command.is_empty() {
        eprintln!("usage: embed COMMAND...");
        return ExitCode::from(2);
    }
    let hooks = match Hooks::load(&Home::from_env(), &LoadOptions::default()) {
        Ok(hooks) => hooks,
        Err(e) => {
            eprintln!("embed: {e}");
            return ExitCode::from(2);
        }
    };
    for problem in &hooks.report().problems {
        eprintln!("embed: {problem}");
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
