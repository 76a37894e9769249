//! Plugin dispatch and loading cost, with real plugin libraries.
//!
//! `pre_tool_call` to 0, 1 and 10 native callbacks (the `noop` test plugin, built from
//! source in release mode), beside the same number of no-op closures in a plain `Vec<Box<dyn Fn>>` loop,
//! in the same run, and beside that loop handed the payload as the plugin interface lays
//! it out (named fields and a view, built per firing); and loading 20 plugins from fresh
//! copies of a library. One callback again in a registry that also holds a plugin's tool,
//! command and middleware: what they cost a hook that does not use them.
//!
//! Run: `cargo bench -p hermes-tests --bench dispatch`

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use hermes_hooks_abi::core::{EventView, no_host_calls};
use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
use hermes_hooks_abi::sdk::ToolDecision;
use hermes_host::registry::Registry;
use hermes_tests::support::TestHome;

const ARGS: &str = r#"{"command": "ls -la /tmp", "timeout": 60}"#;

fn event() -> PreToolCallEvent<'static> {
    PreToolCallEvent {
        tool_name: "terminal",
        args: ARGS,
        task_id: "task-1",
        session_id: "sess-1",
        tool_call_id: "call-1",
        turn_id: None,
        api_request_id: None,
        middleware_trace: "[]",
    }
}

fn native_registry(home: &TestHome, callbacks: usize, read_field: bool) -> Registry {
    if callbacks > 0 {
        let config = format!("{{count: {callbacks}, read_field: {read_field}}}");
        home.install_release("noop", "noop", None, Some(&config));
        home.config("plugins:\n  enabled: [noop]\n");
    }
    let (registry, report) = home.load();
    assert!(report.plugins.iter().all(|p| p.loaded()));
    assert_eq!(registry.entries("pre_tool_call").len(), callbacks);
    registry
}

type PlainHook = Box<dyn Fn(&PreToolCallEvent<'_>) -> ToolDecision + Send + Sync>;

type ViewHook = Box<dyn Fn(&EventView<'_>) -> ToolDecision + Send + Sync>;

/// The plain loop, handed the payload the way the plugin interface must hand it: the
/// fields laid out by name and a view over them, built per firing. What this costs over
/// [`plain_dispatch`] is the interface's floor, not the registry's.
fn plain_dispatch_over_a_view(hooks: &[ViewHook], event: &PreToolCallEvent<'_>) -> Option<String> {
    let fields = event.fields();
    let view = EventView::new(PreToolCallEvent::HOOK, &fields, no_host_calls());
    let mut blocked = None;
    for hook in hooks {
        if let ToolDecision::Block(message) = hook(&view) {
            blocked.get_or_insert(message);
        }
    }
    blocked
}

/// The baseline: the same aggregation (first block wins) over plain Rust closures.
fn plain_dispatch(hooks: &[PlainHook], event: &PreToolCallEvent<'_>) -> Option<String> {
    let mut blocked = None;
    for hook in hooks {
        if let ToolDecision::Block(message) = hook(event) {
            blocked.get_or_insert(message);
        }
    }
    blocked
}

fn dispatch(c: &mut Criterion) {
    let mut group = c.benchmark_group("pre_tool_call");
    let ev = event();
    for n in [0usize, 1, 10] {
        let home = TestHome::new();
        let registry = native_registry(&home, n, false);
        group.bench_with_input(BenchmarkId::new("native_plugin", n), &n, |b, _| {
            b.iter(|| black_box(registry.pre_tool_call(black_box(&ev))))
        });
        let plain: Vec<PlainHook> = (0..n)
            .map(|_| -> PlainHook { Box::new(|_e| ToolDecision::Continue) })
            .collect();
        group.bench_with_input(BenchmarkId::new("plain_rust_loop", n), &n, |b, _| {
            b.iter(|| black_box(plain_dispatch(&plain, black_box(&ev))))
        });
        let over_view: Vec<ViewHook> = (0..n)
            .map(|_| -> ViewHook { Box::new(|_v| ToolDecision::Continue) })
            .collect();
        group.bench_with_input(
            BenchmarkId::new("plain_rust_loop_over_the_payload_view", n),
            &n,
            |b, _| b.iter(|| black_box(plain_dispatch_over_a_view(&over_view, black_box(&ev)))),
        );
    }
    // One callback in a registry that also holds the plugin's tool, command and a middleware
    // of each kind: what they add to a hook that does not use them.
    {
        let home = TestHome::new();
        home.install_release("noop", "noop", None, Some("{count: 1, offers: true}"));
        home.config("plugins:\n  enabled: [noop]\n");
        let (registry, report) = home.load();
        assert_eq!(report.plugins[0].tools, ["noop_tool"]);
        assert_eq!(report.plugins[0].middleware.len(), 4);
        group.bench_function("native_plugin_beside_tools_and_middleware/1", |b| {
            b.iter(|| black_box(registry.pre_tool_call(black_box(&ev))))
        });
    }
    // One callback while another thread fires the same hook without pause, as two turn
    // threads of a gateway do: what the firings share (the watchdog's state) shows here.
    {
        let home = TestHome::new();
        let registry = native_registry(&home, 1, false);
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    black_box(registry.pre_tool_call(black_box(&ev)));
                }
            });
            group.bench_function("native_plugin_beside_another_firing_thread/1", |b| {
                b.iter(|| black_box(registry.pre_tool_call(black_box(&ev))))
            });
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
    // The same ten callbacks, each reading one field: by name through the view for the
    // plugin, a struct field for the plain closure.
    let home = TestHome::new();
    let registry = native_registry(&home, 10, true);
    group.bench_function("native_plugin_reading_a_field/10", |b| {
        b.iter(|| black_box(registry.pre_tool_call(black_box(&ev))))
    });
    let plain: Vec<PlainHook> = (0..10)
        .map(|_| -> PlainHook {
            Box::new(|e| {
                black_box(e.tool_name);
                ToolDecision::Continue
            })
        })
        .collect();
    group.bench_function("plain_rust_loop_reading_a_field/10", |b| {
        b.iter(|| black_box(plain_dispatch(&plain, black_box(&ev))))
    });
    group.finish();
}

fn loading(c: &mut Criterion) {
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.bench_function("20_plugins", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // Fresh copies each time: a library is loaded once per process per path.
                let home = TestHome::new();
                let mut names = Vec::new();
                for i in 0..20 {
                    let name = format!("noop{i:02}");
                    home.install_release(&name, "noop", Some(&name), None);
                    names.push(name);
                }
                home.config(&format!("plugins:\n  enabled: [{}]\n", names.join(", ")));
                let started = Instant::now();
                let (registry, report) = home.load();
                total += started.elapsed();
                assert_eq!(report.plugins.len(), 20);
                black_box(registry);
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, dispatch, loading);
criterion_main!(benches);
