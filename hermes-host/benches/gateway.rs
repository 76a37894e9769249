//! Gateway hooks: what `emit` costs the caller, and how fast a `handler.py` hook is served.
//!
//! - `gateway_emit/*`: the time one `emit` takes on the caller's thread when ten hooks
//!   (native or `handler.py`) receive the event (target: < 5 µs). `burst_*` emits 1 000
//!   events back to back; `idle_*` emits one event when every thread is asleep, so the caller
//!   pays for waking the router. Only the emits are timed: the queues are drained, untimed,
//!   between bursts, so no event is dropped.
//! - `gateway_python_delivery/worker` and `.../process_per_event`: events per second a
//!   `handler.py` hook handles through its long-lived worker, against the same handler run by
//!   one `python3` process per event (an executable `handler` that imports it), side by side
//!   (target: at least 20x).
//!
//! Run: `cargo bench -p hermes-host --bench gateway`. The native hooks use the
//! `activity-logger` example, built by this bench into `target/it-gateway`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use hermes_host::gateway::{GatewayHooks, GatewayOptions, MemoryLog};
use hermes_host::home::Home;
use serde_json::json;

const BURST: u64 = 1_000;

const NOOP_PY: &str = "def handle(event_type, context):\n    return None\n";

/// One `python3` per event: import the hook's module the way the worker does, call
/// `handle` once with the event read from stdin, exit.
const ONE_SHOT: &str = r#"
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("hermes_hook_oneshot", os.path.join(os.path.dirname(os.path.abspath(__file__)), "impl.py"))
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
request = json.load(sys.stdin)
module.handle(request["event_type"], request["context"])
"#;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn activity_logger_library() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = workspace_root().join("target/it-gateway");
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "-p",
            "activity-logger",
            "--target-dir",
        ])
        .arg(&target)
        .current_dir(workspace_root())
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "building activity-logger failed"
    );
    target.join("release/libactivity_logger.so")
}

fn hook(home: &Path, name: &str, manifest: &str, files: &[(&str, &str, u32)]) {
    let dir = home.join("hooks").join(name);
    std::fs::create_dir_all(&dir).expect("hook dir");
    std::fs::write(dir.join("HOOK.yaml"), manifest).expect("HOOK.yaml");
    for (file, text, mode) in files {
        std::fs::write(dir.join(file), text).expect("handler file");
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir.join(file), std::fs::Permissions::from_mode(*mode))
            .expect("chmod");
    }
}

fn delivered(hooks: &GatewayHooks) -> u64 {
    hooks
        .stats()
        .hooks
        .iter()
        .map(|h| h.delivered + h.failed)
        .sum()
}

fn wait_delivered(hooks: &GatewayHooks, target: u64) {
    let start = Instant::now();
    while delivered(hooks) < target {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "hooks stopped delivering"
        );
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// Times `iters` emits to `hooks` in bursts of `burst`, waiting (untimed) for every hook to
/// handle each burst, then for `idle` so that every thread is asleep again.
fn timed_emits(
    hooks: &GatewayHooks,
    hook_count: u64,
    iters: u64,
    burst: u64,
    idle: Duration,
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    let mut expected = delivered(hooks);
    while left > 0 {
        let n = left.min(burst);
        let contexts: Vec<_> = (0..n)
            .map(|i| json!({"platform": "telegram", "user_id": "42", "session_id": "s-1", "iteration": i, "tool_names": ["terminal"]}))
            .collect();
        let start = Instant::now();
        for context in contexts {
            hooks.emit("agent:step", context);
        }
        total += start.elapsed();
        expected += n * hook_count;
        wait_delivered(hooks, expected);
        std::thread::sleep(idle);
        left -= n;
    }
    total
}

fn bench_emit(c: &mut Criterion) {
    let library = activity_logger_library();
    let native_home = tempfile::tempdir().expect("temp dir");
    let python_home = tempfile::tempdir().expect("temp dir");
    for i in 0..10 {
        let name = format!("native-{i}");
        // One library, loaded once; each hook registers its own callbacks from it.
        let manifest = format!(
            "events: ['agent:*']\nlibrary: {}\nconfig: {{path: /dev/null}}\n",
            library.display()
        );
        hook(native_home.path(), &name, &manifest, &[]);
        hook(
            python_home.path(),
            &format!("python-{i}"),
            "events: ['agent:*']\n",
            &[("handler.py", NOOP_PY, 0o644)],
        );
    }
    let native = GatewayHooks::discover(
        &Home::at(native_home.path()),
        Arc::new(MemoryLog::default()),
    );
    let python = GatewayHooks::discover(
        &Home::at(python_home.path()),
        Arc::new(MemoryLog::default()),
    );
    assert_eq!(
        (native.loaded().len(), python.loaded().len()),
        (10, 10),
        "all hooks must load"
    );

    let mut group = c.benchmark_group("gateway_emit");
    group.throughput(Throughput::Elements(1));
    group.sample_size(10);
    // Bursts: the router and the delivery threads are awake most of the time.
    group
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(300));
    group.bench_function("burst_10_native_hooks", |b| {
        b.iter_custom(|iters| timed_emits(&native, 10, iters, BURST, Duration::ZERO))
    });
    group
        .warm_up_time(Duration::from_millis(20))
        .measurement_time(Duration::from_millis(50));
    group.bench_function("burst_10_python_hooks", |b| {
        b.iter_custom(|iters| timed_emits(&python, 10, iters, BURST, Duration::ZERO))
    });
    // One event at a time, every thread asleep when it comes: the caller pays a wake-up.
    group.bench_function("idle_10_native_hooks", |b| {
        b.iter_custom(|iters| timed_emits(&native, 10, iters, 1, Duration::from_millis(1)))
    });
    group.bench_function("idle_10_python_hooks", |b| {
        b.iter_custom(|iters| timed_emits(&python, 10, iters, 1, Duration::from_millis(1)))
    });
    group.finish();
    assert_eq!(native.stats().dropped() + python.stats().dropped(), 0);
}

/// The interpreter `python3` really is (not a version manager's shim), so both sides start
/// the same binary.
fn real_python3() -> PathBuf {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output();
    let out = out.expect("python3 is needed for this benchmark");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn bench_python_delivery(c: &mut Criterion) {
    let python = real_python3();
    let home = tempfile::tempdir().expect("temp dir");
    hook(
        home.path(),
        "worker",
        "events: [agent:step]\n",
        &[("handler.py", NOOP_PY, 0o644)],
    );
    let one_shot = format!("#!{}{ONE_SHOT}", python.display());
    hook(
        home.path(),
        "zz-process-per-event",
        "events: [session:start]\n",
        &[("impl.py", NOOP_PY, 0o644), ("handler", &one_shot, 0o755)],
    );
    let options = GatewayOptions {
        python,
        ..Default::default()
    };
    let hooks = GatewayHooks::discover_with(
        &Home::at(home.path()),
        Arc::new(MemoryLog::default()),
        &options,
    );
    assert_eq!(hooks.loaded().len(), 2, "both hooks must load");

    let run = |event: &'static str, iters: u64| {
        let before = delivered(&hooks);
        let start = Instant::now();
        for i in 0..iters {
            hooks.emit(
                event,
                json!({"platform": "telegram", "user_id": "42", "iteration": i}),
            );
        }
        wait_delivered(&hooks, before + iters);
        start.elapsed()
    };
    let mut group = c.benchmark_group("gateway_python_delivery");
    group.throughput(Throughput::Elements(1));
    group
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    group.bench_function("worker", |b| {
        b.iter_custom(|iters| run("agent:step", iters))
    });
    group
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("process_per_event", |b| {
        b.iter_custom(|iters| run("session:start", iters))
    });
    group.finish();
    let failed: u64 = hooks.stats().hooks.iter().map(|h| h.failed).sum();
    assert_eq!(failed, 0, "no handler call may fail");
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    bench_emit(&mut c);
    bench_python_delivery(&mut c);
    c.final_summary();
}
