//! A plugin with a bug of the kind `config.mode` names, on every `pre_tool_call`:
//! `segfault`, `abort`, `exit` (status 3), `loop` (forever), `sleep` (60 s), `slow` (400 ms,
//! then a block), `alloc` (until
//! memory runs out), `panic`, `print` (100 MB to stdout, then no opinion); anything else
//! blocks with "crashy blocks". The isolation tests load it in a worker process.

use hermes_hooks_abi::prelude::*;
use std::io::Write as _;

/// Registers the one callback.
pub fn register(ctx: &mut PluginContext) {
    let mode = ctx.config()["mode"].as_str().unwrap_or("block").to_string();
    ctx.pre_tool_call(move |_e| misbehave(&mode));
}

fn misbehave(mode: &str) -> ToolDecision {
    match mode {
        "segfault" => {
            // SAFETY: none; reading address 0 is the bug this mode is for.
            let v = unsafe { std::ptr::null::<u8>().read_volatile() };
            ToolDecision::block(format!("read {v}"))
        }
        "abort" => std::process::abort(),
        "exit" => std::process::exit(3),
        "loop" => loop {
            std::hint::spin_loop();
        },
        "sleep" => {
            std::thread::sleep(std::time::Duration::from_secs(60));
            ToolDecision::Continue
        }
        "alloc" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1u8; 16 << 20]);
            }
        }
        "slow" => {
            std::thread::sleep(std::time::Duration::from_millis(400));
            ToolDecision::block("crashy blocks, slowly")
        }
        "panic" => panic!("crashy panics on purpose"),
        "print" => {
            let line = "x".repeat(1023) + "\n";
            let mut out = std::io::stdout().lock();
            for _ in 0..100 * 1024 {
                let _ = out.write_all(line.as_bytes());
            }
            ToolDecision::Continue
        }
        _ => {
            tracing::info!("crashy blocks a terminal call");
            ToolDecision::block("crashy blocks")
        }
    }
}

hermes_hooks_abi::export_plugin!(register);
