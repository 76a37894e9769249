//! Shell-hook overhead: one `pre_tool_call` shell hook fired through the registry against
//! spawning the same script directly with `std::process`, and ten hooks on one event against
//! ten sequential spawns, once with a trivial (CPU-bound) script and once with a script that
//! waits 20 ms (as a hook calling a service would).
//!
//! Run with `cargo bench -p hermes-host --bench shell -- --warm-up-time 1 --measurement-time 3`.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use criterion::{Criterion, criterion_group, criterion_main};
use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
use hermes_host::registry::Registry;
use hermes_host::shell::{self, Consent, wire};
use hermes_host::{config::Config, home::Home};

/// A trivial hook: reads its stdin, answers nothing. Pure bash, no child process.
const SCRIPT: &str = "#!/bin/bash\nread -r -d '' payload\nexit 0\n";

/// A hook that waits 20 ms before answering nothing.
const WAITING_SCRIPT: &str = "#!/bin/bash\nread -r -d '' payload\nsleep 0.02\n";

fn event() -> PreToolCallEvent<'static> {
    PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "ls -la"}"#,
        task_id: "t-1",
        session_id: "s-1",
        tool_call_id: "c-1",
        turn_id: None,
        api_request_id: None,
        middleware_trace: "[]",
    }
}

/// A home with `n` copies of the script, each configured as a `pre_tool_call` hook, and a
/// registry holding them.
fn setup(n: usize, body: &str) -> (tempfile::TempDir, Vec<String>, Registry) {
    let dir = tempfile::tempdir().unwrap();
    let mut yaml = String::from("hooks:\n  pre_tool_call:\n");
    let mut scripts = Vec::new();
    for i in 0..n {
        let path = dir.path().join(format!("hook{i}.sh"));
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        yaml.push_str(&format!("    - command: {}\n", path.display()));
        scripts.push(path.display().to_string());
    }
    let home = Home::at(dir.path());
    let config = Config::parse(&yaml).unwrap();
    let mut registry = Registry::new();
    let report = shell::register_from_config(&home, &config.hooks, Consent::Accept, &mut registry);
    assert_eq!(report.registered.len(), n);
    (dir, scripts, registry)
}

/// The same work without the host: spawn, write the payload, close stdin, collect output.
fn bare_spawn(script: &str, payload: &[u8]) {
    let mut child = Command::new(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(payload);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
}

fn payload() -> Vec<u8> {
    let fields = event().fields();
    let view = hermes_hooks_abi::core::EventView::new(
        "pre_tool_call",
        &fields,
        hermes_hooks_abi::core::no_host_calls(),
    );
    wire::serialize_payload("pre_tool_call", &wire::kwargs_from_view(&view, true)).into_bytes()
}

fn one_hook(c: &mut Criterion) {
    let (_dir, scripts, registry) = setup(1, SCRIPT);
    let payload = payload();
    let mut group = c.benchmark_group("one pre_tool_call hook");
    group.bench_function("bare std::process spawn", |b| {
        b.iter(|| bare_spawn(&scripts[0], &payload))
    });
    group.bench_function("host work without the spawn", |b| {
        let spec = shell::ShellHookSpec::new("pre_tool_call", &scripts[0]);
        let run = shell::spawn::RunResult {
            returncode: Some(0),
            ..Default::default()
        };
        b.iter(|| {
            let fields = event().fields();
            let view = hermes_hooks_abi::core::EventView::new(
                "pre_tool_call",
                &fields,
                hermes_hooks_abi::core::no_host_calls(),
            );
            let stdin =
                wire::serialize_payload("pre_tool_call", &wire::kwargs_from_view(&view, true));
            let pin = shell::script::sha256(&spec.command);
            let evaluation = shell::evaluate(&spec, &run);
            (stdin.len(), pin, evaluation)
        })
    });
    group.bench_function("shell hook via registry", |b| {
        b.iter(|| {
            let verdict = registry.pre_tool_call(&event());
            assert!(verdict.blocked.is_none());
        })
    });
    group.finish();
}

fn ten_hooks(c: &mut Criterion) {
    for (name, body) in [
        ("ten pre_tool_call hooks", SCRIPT),
        ("ten pre_tool_call hooks waiting 20 ms", WAITING_SCRIPT),
    ] {
        let (_dir, scripts, registry) = setup(10, body);
        let payload = payload();
        let mut group = c.benchmark_group(name);
        group.sample_size(10);
        group.bench_function("10 sequential bare spawns", |b| {
            b.iter(|| {
                for script in &scripts {
                    bare_spawn(script, &payload);
                }
            })
        });
        group.bench_function("10 shell hooks via registry", |b| {
            b.iter(|| {
                let verdict = registry.pre_tool_call(&event());
                assert!(verdict.blocked.is_none());
            })
        });
        group.finish();
    }
}

criterion_group!(benches, one_hook, ten_hooks);
criterion_main!(benches);
