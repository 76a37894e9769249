//! Soak run: what crosses the ABI a million times must not stay behind. Fires, through the
//! registry, into the release build of the `soak` test plugin:
//!
//! - `transform_tool_result` returning a 16 KiB string, 10^6 times;
//! - `pre_tool_call` blocking with a message, 10^6 times;
//! - `pre_tool_call` panicking inside the plugin (caught there, reported as an error), 10^6
//!   times;
//! - a one-shot shell hook (`sh` printing a block answer), 10^4 times: a process, three pipes
//!   and a payload per firing.
//!
//! For each phase it prints the process's RSS (`VmRSS`) and open file descriptors
//! (`/proc/self/fd`) before and after, and the plugin's own live allocations (its counting
//! allocator). Targets: RSS growth at most 1 MiB and no file descriptor gained per phase,
//! and the plugin's live allocations unchanged; the run exits 1 when one is missed.
//! "Before" is taken after a warm-up of 1% of the firings, so first-touch pages and lazily
//! initialised statics are not counted as growth.
//!
//! Run: `cargo bench -p hermes-tests --bench soak` (about a minute on 2 cores);
//! `-- --quick` divides every count by 100.

// In benches a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use hermes_hooks_abi::hooks::payload::{PreToolCallEvent, TransformToolResultEvent};
use hermes_host::registry::Registry;
use hermes_host::shell::{self, Consent};
use hermes_tests::support::{TestHome, soak_plugin_live};

const LEN: usize = 16 << 10;
const RSS_BUDGET_KIB: i64 = 1024;

fn rss_kib() -> i64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(-1)
}

fn open_fds() -> i64 {
    std::fs::read_dir("/proc/self/fd").map_or(-1, |d| d.count() as i64)
}

struct Phase<'a> {
    name: &'a str,
    firings: usize,
    fire: Box<dyn Fn() + 'a>,
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let scale = if quick { 100 } else { 1 };

    let home = TestHome::new();
    home.install_release("soak", "soak", None, Some(&format!("{{len: {LEN}}}")));
    let script = home.script(
        "block.sh",
        "#!/bin/sh\ncat > /dev/null\necho '{\"action\": \"block\", \"message\": \"shell blocks\"}'\n",
    );
    home.config(&format!(
        "plugins:\n  enabled: [soak]\nhooks:\n  pre_tool_call:\n    - command: {}\n      matcher: shell\n",
        script.display()
    ));
    let (plugins, report) = home.load();
    assert!(report.plugins[0].loaded(), "{:?}", report.plugins);
    let mut shell_registry = Registry::new();
    let h = home.home();
    let (config, _) = h.load_config();
    let shell_report = shell::register_from_config(
        &h,
        &config.hooks,
        Consent::AcceptForThisRun,
        &mut shell_registry,
    );
    assert_eq!(
        shell_report.registered.len(),
        1,
        "{:?}",
        shell_report.warnings
    );

    let transform = TransformToolResultEvent {
        tool_name: "read_file",
        args: "{}",
        result: "short",
        ..Default::default()
    };
    let block = PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "ls"}"#,
        session_id: "s",
        ..Default::default()
    };
    let panic = PreToolCallEvent {
        tool_name: "panic",
        ..block
    };
    let shell_call = PreToolCallEvent {
        tool_name: "shell",
        ..block
    };
    let phases = [
        Phase {
            name: "transform, 16 KiB string returned",
            firings: 1_000_000 / scale,
            fire: Box::new(|| {
                assert_eq!(
                    plugins.transform_tool_result(&transform).map(|s| s.len()),
                    Some(LEN)
                );
            }),
        },
        Phase {
            name: "pre_tool_call, blocks with a message",
            firings: 1_000_000 / scale,
            fire: Box::new(|| assert!(plugins.pre_tool_call(&block).blocked.is_some())),
        },
        Phase {
            name: "pre_tool_call, panics in the plugin",
            firings: 1_000_000 / scale,
            fire: Box::new(|| assert!(plugins.pre_tool_call(&panic).blocked.is_none())),
        },
        Phase {
            name: "shell hook, one process per firing",
            firings: 10_000 / scale,
            fire: Box::new(|| {
                let verdict = shell_registry.pre_tool_call(&shell_call);
                assert_eq!(
                    verdict.blocked.map(|b| b.message).as_deref(),
                    Some("shell blocks")
                );
            }),
        },
    ];

    println!(
        "soak run{} on {} cores; targets per phase: RSS growth <= {RSS_BUDGET_KIB} KiB, fds gained 0, plugin live allocations unchanged\n",
        if quick {
            " (--quick: counts / 100)"
        } else {
            ""
        },
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "{:<38} {:>9} {:>9} {:>10} {:>10} {:>7} {:>5} {:>5} {:>14} {:>14}",
        "phase",
        "firings",
        "secs",
        "rss KiB",
        "rss end",
        "growth",
        "fds",
        "end",
        "plugin live",
        "plugin end"
    );
    let mut missed = Vec::new();
    for phase in &phases {
        let warm = (phase.firings / 100).max(1);
        for _ in 0..warm {
            (phase.fire)();
        }
        let (rss0, fds0, live0) = (rss_kib(), open_fds(), soak_plugin_live(&plugins));
        let start = Instant::now();
        for _ in 0..phase.firings {
            (phase.fire)();
        }
        let secs = start.elapsed().as_secs_f64();
        let (rss1, fds1, live1) = (rss_kib(), open_fds(), soak_plugin_live(&plugins));
        println!(
            "{:<38} {:>9} {:>9.2} {:>10} {:>10} {:>7} {:>5} {:>5} {:>14} {:>14}",
            phase.name,
            phase.firings,
            secs,
            rss0,
            rss1,
            rss1 - rss0,
            fds0,
            fds1,
            format!("{}/{}B", live0.0, live0.1),
            format!("{}/{}B", live1.0, live1.1),
        );
        if rss1 - rss0 > RSS_BUDGET_KIB {
            missed.push(format!("{}: RSS grew {} KiB", phase.name, rss1 - rss0));
        }
        if fds1 > fds0 {
            missed.push(format!(
                "{}: {} file descriptors gained",
                phase.name,
                fds1 - fds0
            ));
        }
        if live1 != live0 {
            missed.push(format!(
                "{}: plugin live allocations {live0:?} -> {live1:?}",
                phase.name
            ));
        }
    }
    if missed.is_empty() {
        println!("\nall targets met");
    } else {
        println!("\ntargets missed:\n  {}", missed.join("\n  "));
        std::process::exit(1);
    }
}
