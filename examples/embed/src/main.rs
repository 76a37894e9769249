//! The smallest agent host: loads the hooks of `$HERMES_HOME` (default `~/.hermes`) with
//! the library's facade, and runs one tool call through every gate: middleware,
//! `pre_tool_call`, approval, the tool, `post_tool_call` and `transform_tool_result`.
//! `embed COMMAND...` asks about the `terminal` tool (which this host only pretends to
//! run); `embed --tool NAME ARGS` calls a plugin's tool and prints its result.
//! Exit 0: it ran, 1: blocked or failed, 2: bad usage or no home.

use std::process::ExitCode;

use hermes_host::tool_call::{Call, HostTools};
use hermes_host::{Hooks, LoadOptions, home::Home};

/// This host's one tool: `terminal`, which answers `allowed` instead of running anything.
struct DryRun;

impl HostTools for DryRun {
    fn run(&self, tool: &str, _args: &serde_json::Value) -> Option<String> {
        (tool == "terminal").then(|| "allowed".to_string())
    }
}

fn main() -> ExitCode {
    hermes_host::isolation::run_worker_if_asked(); // plugins with `isolation: process` run here
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let call = match argv.as_slice() {
        [] => {
            eprintln!("usage: embed COMMAND... | embed --tool NAME ARGS_JSON");
            return ExitCode::from(2);
        }
        [flag, tool, args] if flag == "--tool" => {
            Call::new(tool, serde_json::from_str(args).unwrap_or_default())
        }
        words => Call::new(
            "terminal",
            serde_json::json!({ "command": words.join(" ") }),
        ),
    };
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
    let done = hooks.call_tool(&call, &DryRun);
    match &done.blocked {
        Some(blocked) => println!("blocked by {}: {}", blocked.by, blocked.message),
        None => println!("{}", done.result),
    }
    ExitCode::from(u8::from(done.status != "ok"))
}
