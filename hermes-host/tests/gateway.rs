//! Gateway hooks, end to end: real hook directories in a temporary `HERMES_HOME`, real
//! `python3` workers, real executables, the native example built with cargo, and a local
//! HTTP listener for the webhook example.
//!
//! The Python tests need `python3` on `PATH` and fail (they never skip) without it.

// Test helpers: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use hermes_host::gateway::{GatewayHooks, GatewayOptions, HookKind, MemoryLog};
use hermes_host::home::Home;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Helpers

/// A fresh `HERMES_HOME`.
struct TestHome {
    dir: tempfile::TempDir,
}

impl TestHome {
    fn new() -> TestHome {
        TestHome {
            dir: tempfile::tempdir().expect("a temp dir"),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn home(&self) -> Home {
        Home::at(self.root())
    }

    /// `hooks/<dir>/` with `HOOK.yaml` (when given) and other files.
    fn hook(&self, dir: &str, manifest: Option<&str>, files: &[(&str, &str)]) -> PathBuf {
        let path = self.root().join("hooks").join(dir);
        std::fs::create_dir_all(&path).unwrap();
        if let Some(manifest) = manifest {
            std::fs::write(path.join("HOOK.yaml"), manifest).unwrap();
        }
        for (name, text) in files {
            std::fs::write(path.join(name), text).unwrap();
            if *name == "handler" {
                std::fs::set_permissions(path.join(name), std::fs::Permissions::from_mode(0o755))
                    .unwrap();
            }
        }
        path
    }

    /// A `handler.py` hook that appends `<event_type> <context as JSON>` to `<home>/<dir>.out`.
    fn recording_hook(&self, dir: &str, events: &str) {
        require_python3();
        self.hook(
            dir,
            Some(&format!("events: {events}\n")),
            &[("handler.py", &recorder_py(dir))],
        );
    }

    fn discover(&self) -> (GatewayHooks, Arc<MemoryLog>) {
        self.discover_with(&GatewayOptions::default())
    }

    fn discover_with(&self, options: &GatewayOptions) -> (GatewayHooks, Arc<MemoryLog>) {
        let log = Arc::new(MemoryLog::default());
        let hooks = GatewayHooks::discover_with(&self.home(), log.clone(), options);
        (hooks, log)
    }

    /// The lines a recording hook wrote.
    fn records(&self, dir: &str) -> Vec<String> {
        match std::fs::read_to_string(self.root().join(format!("{dir}.out"))) {
            Ok(text) => text.lines().map(str::to_string).collect(),
            Err(_) => Vec::new(),
        }
    }

    fn wait_for_records(&self, dir: &str, n: usize) -> Vec<String> {
        wait_until(
            &format!("{n} records from {dir}"),
            Duration::from_secs(30),
            || self.records(dir).len() >= n,
        );
        self.records(dir)
    }
}

fn recorder_py(dir: &str) -> String {
    format!(
        r#"import json, os
OUT = os.path.join(os.environ["HERMES_HOME"], "{dir}.out")
def handle(event_type, context):
    with open(OUT, "a") as f:
        f.write(event_type + " " + json.dumps(context, sort_keys=True) + "\n")
"#
    )
}

/// Fails the test loudly when python3 is missing: CI installs it, and these tests must not
/// pass by skipping.
fn require_python3() {
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let result = CHECKED.get_or_init(|| match Command::new("python3").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "python3 --version failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
        Err(e) => Err(e.to_string()),
    });
    if let Err(e) = result {
        panic!(
            "these gateway tests need python3 on PATH to run handler.py hooks, and it is not usable ({e}); install Python 3 (CI does)"
        );
    }
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn names(hooks: &GatewayHooks, event: &str) -> Vec<String> {
    hooks
        .resolve(event)
        .iter()
        .map(|h| h.name.clone())
        .collect()
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

fn example(name: &str) -> PathBuf {
    workspace_root().join("examples/gateway-hooks").join(name)
}

/// Copies an example hook directory (its files, not sub-directories) into the home.
fn install_example(home: &TestHome, name: &str) -> PathBuf {
    let dest = home.root().join("hooks").join(name);
    std::fs::create_dir_all(&dest).unwrap();
    for entry in std::fs::read_dir(example(name)).unwrap() {
        let entry = entry.unwrap();
        if entry.path().is_file() {
            std::fs::copy(entry.path(), dest.join(entry.file_name())).unwrap();
        }
    }
    dest
}

/// Builds `examples/gateway-hooks/activity-logger` once per test run, in a target
/// directory of its own so the nested cargo does not wait for the outer one's lock.
fn activity_logger_library() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let target = workspace_root().join("target/it-gateway");
            let out = Command::new(cargo)
                .args(["build", "-p", "activity-logger", "--target-dir"])
                .arg(&target)
                .current_dir(workspace_root())
                .output()
                .expect("cargo runs");
            assert!(
                out.status.success(),
                "building activity-logger failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let lib = target.join("debug/libactivity_logger.so");
            assert!(lib.is_file(), "{} was not built", lib.display());
            lib
        })
        .clone()
}

// ---------------------------------------------------------------------------------------
// Discovery

#[test]
fn no_hooks_directory_loads_nothing_and_says_nothing() {
    let home = TestHome::new();
    let (hooks, log) = home.discover();
    assert!(hooks.loaded().is_empty());
    assert!(hooks.skipped().is_empty());
    assert!(log.lines().is_empty());
    hooks.emit("agent:start", json!({}));
    assert_eq!(hooks.stats().emitted, 1);
}

#[test]
fn discovery_follows_the_reference_rules_and_messages_in_sorted_order() {
    require_python3();
    let home = TestHome::new();
    let good = "def handle(event_type, context):\n    pass\n";
    // Created out of order: discovery sorts by name, bytes order (upper case first).
    home.hook(
        "k-good",
        Some("events:\n  - agent:start\n  - command:*\n"),
        &[("handler.py", good)],
    );
    home.hook(
        "d-invalid",
        Some("- agent:start\n"),
        &[("handler.py", good)],
    );
    home.hook("e-empty", Some(""), &[("handler.py", good)]);
    home.hook("f-empty-map", Some("{}\n"), &[("handler.py", good)]);
    home.hook(
        "g-no-events",
        Some("name: renamed-g\nevents: []\n"),
        &[("handler.py", good)],
    );
    home.hook(
        "g2-missing-events",
        Some("description: nothing\n"),
        &[("handler.py", good)],
    );
    home.hook(
        "h-no-handle",
        Some("events: [agent:start]\n"),
        &[("handler.py", "x = 1\n")],
    );
    home.hook(
        "i-import-error",
        Some("events: [agent:start]\n"),
        &[("handler.py", "raise ValueError('broken at import')\n")],
    );
    home.hook(
        "j-yaml-syntax",
        Some("events: [agent:start\n"),
        &[("handler.py", good)],
    );
    home.hook(
        "l-named",
        Some("name: custom\ndescription: Named hook\nevents: [agent:end]\n"),
        &[("handler.py", good)],
    );
    home.hook(
        "m-events-string",
        Some("events: agent:end\n"),
        &[("handler.py", good)],
    );
    home.hook("n-events-int", Some("events: 5\n"), &[("handler.py", good)]);
    home.hook("b-no-handler", Some("events: [agent:start]\n"), &[]);
    home.hook("c-no-manifest", None, &[("handler.py", good)]);
    home.hook(
        "B-upper",
        Some("events: [session:start]\n"),
        &[("handler.py", good)],
    );
    std::fs::write(home.root().join("hooks/a-file"), "not a directory").unwrap();

    let (hooks, log) = home.discover();
    let lines = log.lines();
    let yaml_error = lines
        .iter()
        .find(|l| l.starts_with("[hooks] Error loading hook j-yaml-syntax: "))
        .cloned();
    assert!(
        yaml_error
            .as_ref()
            .is_some_and(|l| l.len() > "[hooks] Error loading hook j-yaml-syntax: ".len()),
        "{lines:#?}"
    );
    assert_eq!(
        lines,
        vec![
            "[hooks] Loaded hook 'B-upper' for events: ['session:start']".to_string(),
            "[hooks] Skipping d-invalid: invalid HOOK.yaml".into(),
            "[hooks] Skipping e-empty: invalid HOOK.yaml".into(),
            "[hooks] Skipping f-empty-map: invalid HOOK.yaml".into(),
            "[hooks] Skipping renamed-g: no events declared".into(),
            "[hooks] Skipping g2-missing-events: no events declared".into(),
            "[hooks] Skipping h-no-handle: no 'handle' function found".into(),
            "[hooks] Error loading hook i-import-error: broken at import".into(),
            yaml_error.unwrap_or_default(),
            "[hooks] Loaded hook 'k-good' for events: ['agent:start', 'command:*']".into(),
            "[hooks] Loaded hook 'custom' for events: ['agent:end']".into(),
            "[hooks] Loaded hook 'm-events-string' for events: ['agent:end']".into(),
            "[hooks] Error loading hook n-events-int: 'int' object is not iterable".into(),
        ]
    );
    let loaded: Vec<_> = hooks
        .loaded()
        .iter()
        .map(|h| (h.name.as_str(), h.kind, h.description.as_str()))
        .collect();
    assert_eq!(
        loaded,
        vec![
            ("B-upper", HookKind::Python, ""),
            ("k-good", HookKind::Python, ""),
            ("custom", HookKind::Python, "Named hook"),
            ("m-events-string", HookKind::Python, ""),
        ]
    );
    assert_eq!(hooks.loaded()[1].events, vec!["agent:start", "command:*"]);
    assert_eq!(hooks.loaded()[2].path, home.root().join("hooks/l-named"));
    // The silent skips are still explained, for `hermes gateway hooks`.
    let silent: Vec<_> = hooks
        .skipped()
        .iter()
        .filter(|s| s.line.is_none())
        .map(|s| {
            (
                s.path.file_name().unwrap().to_string_lossy().into_owned(),
                s.reason.clone(),
            )
        })
        .collect();
    assert_eq!(
        silent,
        vec![
            (
                "b-no-handler".to_string(),
                "no handler (add handler.py, an executable `handler`, or a native library)"
                    .to_string()
            ),
            ("c-no-manifest".to_string(), "no HOOK.yaml".to_string()),
        ]
    );
}

#[test]
fn handler_py_is_imported_at_load_as_hermes_hook_name() {
    require_python3();
    let home = TestHome::new();
    let handler = r#"import os
HOME = os.environ["HERMES_HOME"]
with open(os.path.join(HOME, "imported.out"), "a") as f:
    f.write(__name__ + " " + os.getcwd() + "\n")
def handle(event_type, context):
    with open(os.path.join(HOME, "named.out"), "a") as f:
        f.write(__name__ + " " + os.environ["HERMES_HOOK_NAME"] + " " + os.environ["HERMES_HOOK_CONFIG"] + "\n")
"#;
    let dir = home.hook(
        "dir-name",
        Some("name: my-hook\nevents: [agent:start]\nconfig: {greeting: hi}\n"),
        &[("handler.py", handler)],
    );
    let (hooks, _log) = home.discover();
    // The module body ran at discovery, before any event, in the hook's directory.
    let imported = std::fs::read_to_string(home.root().join("imported.out")).unwrap();
    assert_eq!(imported, format!("hermes_hook_my-hook {}\n", dir.display()));
    hooks.emit("agent:start", json!({}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(10)).undelivered_total(),
        0
    );
    let named = std::fs::read_to_string(home.root().join("named.out")).unwrap();
    assert_eq!(named, "hermes_hook_my-hook my-hook {\"greeting\":\"hi\"}\n");
}

#[test]
fn a_missing_python3_skips_handler_py_hooks_with_a_message() {
    let home = TestHome::new();
    home.hook(
        "needs-python",
        Some("events: [agent:start]\n"),
        &[("handler.py", "def handle(e, c): pass\n")],
    );
    home.hook(
        "shell",
        Some("events: [agent:start]\n"),
        &[("handler", "#!/bin/sh\ncat > /dev/null\n")],
    );
    let options = GatewayOptions {
        python: PathBuf::from("/nonexistent/python3"),
        ..Default::default()
    };
    let (hooks, log) = home.discover_with(&options);
    assert_eq!(
        log.lines(),
        vec![
            "[hooks] Skipping needs-python: /nonexistent/python3 was not found; install Python 3 to run handler.py hooks",
            "[hooks] Loaded hook 'shell' for events: ['agent:start']",
        ]
    );
    assert_eq!(
        hooks.skipped()[0].reason,
        "/nonexistent/python3 was not found; install Python 3 to run handler.py hooks"
    );
}

// ---------------------------------------------------------------------------------------
// Resolution

#[test]
fn wildcards_resolve_exact_subscribers_first_then_prefix_star_and_never_globally() {
    let home = TestHome::new();
    let sh = [("handler", "#!/bin/sh\ncat > /dev/null\n")];
    home.hook("bare", Some("events: [command]\n"), &sh);
    home.hook("both", Some("events: ['command:*', command:model]\n"), &sh);
    home.hook("exact", Some("events: [command:model]\n"), &sh);
    home.hook("star", Some("events: ['*']\n"), &sh);
    home.hook("wild", Some("events: ['command:*']\n"), &sh);
    home.hook("nested", Some("events: ['command:sub:*']\n"), &sh);
    let (hooks, _log) = home.discover();
    assert_eq!(
        names(&hooks, "command:model"),
        vec!["both", "exact", "both", "wild"]
    );
    assert_eq!(names(&hooks, "command:reset"), vec!["both", "wild"]);
    assert_eq!(names(&hooks, "command:sub:x"), vec!["both", "wild"]);
    assert_eq!(
        names(&hooks, "command:sub:*"),
        vec!["nested", "both", "wild"]
    );
    assert_eq!(names(&hooks, "command"), vec!["bare"]);
    assert!(names(&hooks, "agent:start").is_empty(), "no global '*'");
    assert_eq!(names(&hooks, "*"), vec!["star"]);
}

#[test]
fn a_hook_subscribed_exactly_and_by_wildcard_gets_the_event_twice_exact_first() {
    let home = TestHome::new();
    home.recording_hook("twice", "['command:*', command:model]");
    let (hooks, log) = home.discover();
    hooks.emit(
        "command:model",
        json!({"command": "model", "args": "gpt-4"}),
    );
    hooks.emit("command:reset", json!({"command": "reset"}));
    hooks.emit("agent:start", json!({}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    assert_eq!(
        home.records("twice"),
        vec![
            r#"command:model {"args": "gpt-4", "command": "model"}"#,
            r#"command:model {"args": "gpt-4", "command": "model"}"#,
            r#"command:reset {"command": "reset"}"#,
        ]
    );
    assert_eq!(
        log.lines(),
        vec!["[hooks] Loaded hook 'twice' for events: ['command:*', 'command:model']"]
    );
}

// ---------------------------------------------------------------------------------------
// Handler kinds

#[test]
fn python_handlers_may_be_sync_or_async() {
    require_python3();
    let home = TestHome::new();
    home.recording_hook("sync", "[agent:start]");
    let async_handler = r#"import asyncio, json, os
OUT = os.path.join(os.environ["HERMES_HOME"], "async.out")
async def handle(event_type, context):
    await asyncio.sleep(0.01)
    print("stdout of a handler must not break the protocol")
    with open(OUT, "a") as f:
        f.write(event_type + " " + json.dumps(context) + "\n")
"#;
    home.hook(
        "async",
        Some("events: [agent:start]\n"),
        &[("handler.py", async_handler)],
    );
    let (hooks, log) = home.discover();
    hooks.emit(
        "agent:start",
        json!({"platform": "telegram", "user_id": "42"}),
    );
    hooks.emit("agent:start", json!(null));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    assert_eq!(
        home.records("sync"),
        vec![
            r#"agent:start {"platform": "telegram", "user_id": "42"}"#,
            "agent:start {}"
        ]
    );
    assert_eq!(
        home.records("async"),
        vec![
            r#"agent:start {"platform": "telegram", "user_id": "42"}"#,
            "agent:start {}"
        ]
    );
    assert!(
        !log.lines().iter().any(|l| l.contains("Error")),
        "{:#?}",
        log.lines()
    );
}

#[test]
fn a_handler_that_raises_is_reported_and_later_events_still_arrive() {
    require_python3();
    let home = TestHome::new();
    let handler = r#"import os
def handle(event_type, context):
    if context.get("fail"):
        raise RuntimeError("boom: " + context["fail"])
    with open(os.path.join(os.environ["HERMES_HOME"], "raiser.out"), "a") as f:
        f.write(event_type + "\n")
"#;
    home.hook(
        "raiser",
        Some("events: ['agent:*']\n"),
        &[("handler.py", handler)],
    );
    let (hooks, log) = home.discover();
    hooks.emit("agent:start", json!({"fail": "bad input"}));
    hooks.emit("agent:end", json!({}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    assert_eq!(home.records("raiser"), vec!["agent:end"]);
    assert_eq!(
        log.lines(),
        vec![
            "[hooks] Loaded hook 'raiser' for events: ['agent:*']",
            "[hooks] Error in handler for 'agent:start': boom: bad input",
        ]
    );
    let stats = &hooks.stats().hooks[0];
    assert_eq!((stats.delivered, stats.failed), (1, 1));
}

#[test]
fn an_executable_handler_reads_the_event_as_one_json_line_on_stdin() {
    let home = TestHome::new();
    let script =
        "#!/bin/sh\n{ cat; echo \" $HERMES_HOOK_NAME $(pwd)\"; } >> \"$HERMES_HOME/exec.out\"\n";
    let dir = home.hook(
        "exec",
        Some("name: exec-hook\nevents: ['agent:*']\n"),
        &[("handler", script)],
    );
    let (hooks, log) = home.discover();
    assert_eq!(hooks.loaded()[0].kind, HookKind::Executable);
    hooks.emit(
        "agent:start",
        json!({"user_id": "u1", "message": "line one\nline two"}),
    );
    hooks.emit("agent:end", json!({}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    assert_eq!(
        home.records("exec"),
        vec![
            format!(
                r#"{{"event_type":"agent:start","context":{{"user_id":"u1","message":"line one\nline two"}}}} exec-hook {}"#,
                dir.display()
            ),
            format!(
                r#"{{"event_type":"agent:end","context":{{}}}} exec-hook {}"#,
                dir.display()
            ),
        ]
    );
    assert_eq!(
        log.lines(),
        vec!["[hooks] Loaded hook 'exec-hook' for events: ['agent:*']"]
    );
}

#[test]
fn an_executable_that_fails_or_outlives_its_timeout_is_reported_and_its_group_killed() {
    let home = TestHome::new();
    home.hook(
        "fails",
        Some("events: [agent:start]\n"),
        &[("handler", "#!/bin/sh\ncat > /dev/null\nexit 3\n")],
    );
    // Starts a grandchild that would outlive the handler, records its pid, then hangs.
    let hanging = "#!/bin/sh\nsleep 300 &\necho $! > \"$HERMES_HOME/grandchild.pid\"\nsleep 300\n";
    // Room for the script to start and record its grandchild on a busy machine.
    home.hook(
        "hangs",
        Some("events: [agent:start]\ntimeout: 2\n"),
        &[("handler", hanging)],
    );
    let (hooks, log) = home.discover();
    let started = Instant::now();
    hooks.emit("agent:start", json!({}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the timeout was not enforced: {:?}",
        started.elapsed()
    );
    let mut lines = log.lines();
    lines.sort();
    assert_eq!(
        lines,
        vec![
            "[hooks] Error in handler for 'agent:start': handler exited with status 3",
            "[hooks] Error in handler for 'agent:start': handler timed out after 2s; its process group was killed",
            "[hooks] Loaded hook 'fails' for events: ['agent:start']",
            "[hooks] Loaded hook 'hangs' for events: ['agent:start']",
        ]
    );
    let pid = std::fs::read_to_string(home.root().join("grandchild.pid")).unwrap();
    let stat = Path::new("/proc").join(pid.trim()).join("stat");
    wait_until(
        "the grandchild to die with its group",
        Duration::from_secs(5),
        || std::fs::read_to_string(&stat).map_or(true, |s| s.split(' ').nth(2) == Some("Z")),
    );
}

#[test]
fn a_native_handler_from_the_activity_logger_example_logs_every_event() {
    let library = activity_logger_library();
    let home = TestHome::new();
    let dir = install_example(&home, "activity-logger");
    std::fs::copy(&library, dir.join("libactivity_logger.so")).unwrap();
    let (hooks, log) = home.discover();
    assert_eq!(
        log.lines(),
        vec![
            "[hooks] Loaded hook 'activity-logger' for events: ['gateway:*', 'session:*', 'agent:*', 'command:*']"
        ]
    );
    assert_eq!(hooks.loaded()[0].kind, HookKind::Native);
    hooks.emit("gateway:startup", json!({"platforms": ["telegram"]}));
    for i in 0..1000 {
        hooks.emit("agent:step", json!({"iteration": i, "session_id": "s1"}));
    }
    hooks.emit("message:received", json!({}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    let text = std::fs::read_to_string(home.root().join("logs/activity.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1001);
    assert_eq!(lines[0]["event"], "gateway:startup");
    assert_eq!(lines[0]["platforms"], json!(["telegram"]));
    for (i, line) in lines[1..].iter().enumerate() {
        assert_eq!(
            (line["event"].as_str(), line["iteration"].as_u64()),
            (Some("agent:step"), Some(i as u64))
        );
    }
}

#[test]
fn a_native_handler_error_is_printed_and_unreachable_callbacks_are_flagged() {
    let library = activity_logger_library();
    let home = TestHome::new();
    let target = home.root().join("a-directory");
    std::fs::create_dir_all(&target).unwrap();
    let manifest = format!(
        "name: activity\nevents: ['agent:*', session:start]\nlibrary: libactivity_logger.so\nconfig:\n  path: {}\n",
        target.display()
    );
    let dir = home.hook("activity", Some(&manifest), &[]);
    std::fs::copy(&library, dir.join("libactivity_logger.so")).unwrap();
    let (hooks, log) = home.discover();
    hooks.emit("agent:start", json!({}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    let lines = log.lines();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    assert_eq!(
        lines[..3],
        [
            "[hooks] Warning: hook 'activity' registered a handler for 'gateway:*', which none of its HOOK.yaml events delivers; add it to `events`",
            "[hooks] Warning: hook 'activity' registered a handler for 'command:*', which none of its HOOK.yaml events delivers; add it to `events`",
            "[hooks] Loaded hook 'activity' for events: ['agent:*', 'session:start']",
        ]
    );
    let prefix = format!(
        "[hooks] Error in handler for 'agent:start': cannot append to {}: ",
        target.display()
    );
    assert!(lines[3].starts_with(&prefix), "{}", lines[3]);
    assert_eq!(hooks.stats().hooks[0].failed, 1);
}

#[test]
fn a_native_library_that_does_not_load_is_reported_with_the_directory_name() {
    let home = TestHome::new();
    home.hook(
        "broken-native",
        Some("events: [agent:start]\nlibrary: libmissing.so\n"),
        &[],
    );
    let (hooks, log) = home.discover();
    assert!(hooks.loaded().is_empty());
    let lines = log.lines();
    assert!(
        lines[0].starts_with("[hooks] Error loading hook broken-native: "),
        "{lines:#?}"
    );
    assert!(lines[0].contains("libmissing.so"), "{lines:#?}");
}

// ---------------------------------------------------------------------------------------
// Delivery

#[test]
fn a_hanging_handler_delays_only_its_own_hook_and_emit_stays_fast() {
    require_python3();
    let home = TestHome::new();
    home.hook(
        "hang",
        Some("events: [agent:step]\n"),
        &[(
            "handler.py",
            "import time\ndef handle(e, c):\n    time.sleep(3600)\n",
        )],
    );
    home.recording_hook("live", "[agent:step]");
    let (hooks, log) = home.discover();
    let mut slowest = Duration::ZERO;
    for i in 0..200 {
        let start = Instant::now();
        hooks.emit("agent:step", json!({"iteration": i}));
        slowest = slowest.max(start.elapsed());
    }
    assert!(
        slowest < Duration::from_millis(20),
        "an emit took {slowest:?}"
    );
    let records = home.wait_for_records("live", 200);
    assert_eq!(records[199], r#"agent:step {"iteration": 199}"#);
    wait_until(
        "all of hang's events to wait behind the first",
        Duration::from_secs(10),
        || hooks.stats().hooks[0].queued == 200,
    );
    let started = Instant::now();
    let report = hooks.shutdown(Duration::from_millis(300));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown overran its deadline: {:?}",
        started.elapsed()
    );
    assert_eq!(report.undelivered.len(), 1);
    assert_eq!(
        (
            report.undelivered[0].name.as_str(),
            report.undelivered[0].events
        ),
        ("hang", 200)
    );
    assert_eq!(
        log.lines().last().map(String::as_str),
        Some("[hooks] Shutdown: 200 event(s) not delivered within 0.3s: hang (200)")
    );
}

#[test]
fn a_python_worker_that_dies_is_reported_and_restarted_for_the_next_event() {
    require_python3();
    let home = TestHome::new();
    let handler = r#"import os
HOME = os.environ["HERMES_HOME"]
with open(os.path.join(HOME, "imports.out"), "a") as f:
    f.write("import\n")
def handle(event_type, context):
    if context.get("die"):
        os._exit(7)
    with open(os.path.join(HOME, "crashy.out"), "a") as f:
        f.write(context["n"] + "\n")
"#;
    home.hook(
        "crashy",
        Some("events: [agent:step]\n"),
        &[("handler.py", handler)],
    );
    let (hooks, log) = home.discover();
    hooks.emit("agent:step", json!({"n": "before"}));
    hooks.emit("agent:step", json!({"die": true}));
    hooks.emit("agent:step", json!({"n": "after"}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    assert_eq!(home.records("crashy"), vec!["before", "after"]);
    assert_eq!(
        std::fs::read_to_string(home.root().join("imports.out")).unwrap(),
        "import\nimport\n"
    );
    assert_eq!(
        log.lines(),
        vec![
            "[hooks] Loaded hook 'crashy' for events: ['agent:step']",
            "[hooks] Error in handler for 'agent:step': the python worker of hook 'crashy' exited with status 7; it starts again for the next event",
        ]
    );
    let stats = &hooks.stats().hooks[0];
    assert_eq!(
        (stats.delivered, stats.failed, stats.worker_restarts),
        (2, 1, 1)
    );
}

#[test]
fn a_worker_that_cannot_be_restarted_fails_its_events_without_a_restart_storm() {
    require_python3();
    let home = TestHome::new();
    let handler = r#"import os
HOME = os.environ["HERMES_HOME"]
with open(os.path.join(HOME, "imports.out"), "a") as f:
    f.write("import\n")
if os.path.exists(os.path.join(HOME, "break-import")):
    raise ImportError("cannot import after the crash")
def handle(event_type, context):
    if context.get("die"):
        open(os.path.join(HOME, "break-import"), "w").close()
        os._exit(1)
"#;
    home.hook(
        "fragile",
        Some("events: [agent:step]\n"),
        &[("handler.py", handler)],
    );
    let (hooks, log) = home.discover();
    hooks.emit("agent:step", json!({"die": true}));
    hooks.emit("agent:step", json!({"n": 1}));
    hooks.emit("agent:step", json!({"n": 2}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    assert_eq!(
        log.lines(),
        vec![
            "[hooks] Loaded hook 'fragile' for events: ['agent:step']",
            "[hooks] Error in handler for 'agent:step': the python worker of hook 'fragile' exited with status 1; it starts again for the next event",
            "[hooks] Error in handler for 'agent:step': restarting the python worker: cannot import after the crash",
            "[hooks] Error in handler for 'agent:step': restarting the python worker: cannot import after the crash",
        ]
    );
    // One failed restart, then the backoff: no interpreter per event.
    assert_eq!(
        std::fs::read_to_string(home.root().join("imports.out")).unwrap(),
        "import\nimport\n"
    );
    let stats = &hooks.stats().hooks[0];
    assert_eq!(
        (stats.delivered, stats.failed, stats.worker_restarts),
        (0, 3, 1)
    );
}

#[test]
fn a_burst_of_ten_thousand_events_arrives_complete_and_in_order() {
    require_python3();
    let home = TestHome::new();
    let handler = r#"import os
OUT = open(os.path.join(os.environ["HERMES_HOME"], "burst.out"), "a", buffering=1)
def handle(event_type, context):
    OUT.write(str(context["seq"]) + "\n")
"#;
    home.hook(
        "burst",
        Some("events: [agent:step]\n"),
        &[("handler.py", handler)],
    );
    let (hooks, log) = home.discover();
    let start = Instant::now();
    for seq in 0..10_000 {
        hooks.emit("agent:step", json!({"seq": seq}));
    }
    let emitting = start.elapsed();
    assert!(
        emitting < Duration::from_secs(2),
        "10 000 emits took {emitting:?}"
    );
    let report = hooks.shutdown(Duration::from_secs(120));
    assert_eq!(report.undelivered_total(), 0);
    assert_eq!(hooks.stats().dropped(), 0);
    let expected: Vec<String> = (0..10_000).map(|n: i32| n.to_string()).collect();
    assert_eq!(home.records("burst"), expected);
    assert_eq!(log.lines().len(), 1, "{:#?}", log.lines());
}

#[test]
fn a_full_queue_drops_the_oldest_events_and_says_so() {
    require_python3();
    let home = TestHome::new();
    let handler = r#"import os, time
HOME = os.environ["HERMES_HOME"]
def handle(event_type, context):
    if context["seq"] == 0:
        open(os.path.join(HOME, "started"), "w").close()
        while not os.path.exists(os.path.join(HOME, "release")):
            time.sleep(0.01)
    with open(os.path.join(HOME, "slow.out"), "a") as f:
        f.write(str(context["seq"]) + "\n")
"#;
    home.hook(
        "slow",
        Some("events: [agent:step]\n"),
        &[("handler.py", handler)],
    );
    let options = GatewayOptions {
        queue_capacity: 5,
        ..Default::default()
    };
    let (hooks, log) = home.discover_with(&options);
    hooks.emit("agent:step", json!({"seq": 0}));
    wait_until(
        "the first event to be in the handler",
        Duration::from_secs(20),
        || home.root().join("started").exists(),
    );
    for seq in 1..=20 {
        hooks.emit("agent:step", json!({"seq": seq}));
    }
    wait_until(
        "the router to hand every event on",
        Duration::from_secs(10),
        || hooks.stats().routing == 0,
    );
    let stats = &hooks.stats().hooks[0];
    assert_eq!((stats.dropped, stats.queued, stats.capacity), (15, 6, 5));
    std::fs::write(home.root().join("release"), "").unwrap();
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    assert_eq!(
        home.records("slow"),
        vec!["0", "16", "17", "18", "19", "20"]
    );
    assert_eq!(
        log.lines(),
        vec![
            "[hooks] Loaded hook 'slow' for events: ['agent:step']",
            "[hooks] Queue of hook 'slow' is full (5 events): dropped 1 oldest event(s) so far; its handler is falling behind",
            "[hooks] Hook 'slow' lost 15 event(s) in total because its queue was full",
        ]
    );
}

#[test]
fn shutdown_delivers_what_is_queued_and_later_emits_are_counted() {
    require_python3();
    let home = TestHome::new();
    let handler = r#"import os, time
def handle(event_type, context):
    time.sleep(0.02)
    with open(os.path.join(os.environ["HERMES_HOME"], "queued.out"), "a") as f:
        f.write(str(context["seq"]) + "\n")
"#;
    home.hook(
        "queued",
        Some("events: [session:end]\n"),
        &[("handler.py", handler)],
    );
    let (hooks, log) = home.discover();
    for seq in 0..30 {
        hooks.emit("session:end", json!({"seq": seq}));
    }
    assert!(
        hooks.stats().queued() > 10,
        "the events should still be queued"
    );
    let report = hooks.shutdown(Duration::from_secs(30));
    assert_eq!(report.undelivered_total(), 0);
    assert!(
        report.elapsed >= Duration::from_millis(300),
        "{:?}",
        report.elapsed
    );
    assert_eq!(
        home.records("queued"),
        (0..30).map(|n: i32| n.to_string()).collect::<Vec<_>>()
    );
    hooks.emit("session:end", json!({"seq": 30}));
    hooks.emit("session:end", json!({"seq": 31}));
    assert_eq!(hooks.stats().rejected, 2);
    assert_eq!(
        log.lines().last().map(String::as_str),
        Some(
            "[hooks] Gateway hooks are shut down: event 'session:end' was not delivered (later ones are only counted)"
        )
    );
}

// ---------------------------------------------------------------------------------------
// Examples

#[test]
fn the_session_webhook_example_posts_to_its_configured_url() {
    require_python3();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hermes-events", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        let mut bodies = Vec::new();
        for _ in 0..2 {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut length = 0;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                if let Some((name, value)) = header.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap();
                    }
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let mut stream = stream;
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
                .unwrap();
            bodies.push((
                request_line.trim().to_string(),
                String::from_utf8(body).unwrap(),
            ));
        }
        bodies
    });
    let home = TestHome::new();
    let dir = install_example(&home, "session-webhook");
    let manifest = std::fs::read_to_string(dir.join("HOOK.yaml")).unwrap();
    let manifest = manifest.replace("https://your-service.example.com/hermes-events", &url);
    std::fs::write(dir.join("HOOK.yaml"), manifest).unwrap();
    let (hooks, log) = home.discover();
    assert_eq!(
        log.lines(),
        vec![
            "[hooks] Loaded hook 'session-webhook' for events: ['session:start', 'session:reset']"
        ]
    );
    let context = json!({"platform": "telegram", "user_id": "42", "session_id": "s-1", "session_key": "telegram:42"});
    hooks.emit("session:start", context.clone());
    hooks.emit("session:end", context.clone());
    hooks.emit(
        "session:reset",
        json!({"platform": "telegram", "user_id": "42", "session_key": "telegram:42"}),
    );
    assert_eq!(
        hooks.shutdown(Duration::from_secs(30)).undelivered_total(),
        0
    );
    let bodies = server.join().unwrap();
    assert_eq!(bodies[0].0, "POST /hermes-events HTTP/1.1");
    let first: Value = serde_json::from_str(&bodies[0].1).unwrap();
    let second: Value = serde_json::from_str(&bodies[1].1).unwrap();
    assert_eq!(
        first,
        json!({"event": "session:start", "platform": "telegram", "user_id": "42", "session_id": "s-1", "session_key": "telegram:42"})
    );
    assert_eq!(
        second,
        json!({"event": "session:reset", "platform": "telegram", "user_id": "42", "session_key": "telegram:42"})
    );
    assert_eq!(log.lines().len(), 1, "{:#?}", log.lines());
}

#[test]
fn the_command_logger_example_logs_every_slash_command() {
    let home = TestHome::new();
    install_example(&home, "command-logger");
    let (hooks, log) = home.discover();
    assert_eq!(
        log.lines(),
        vec!["[hooks] Loaded hook 'command-logger' for events: ['command:*']"]
    );
    hooks.emit(
        "command:model",
        json!({"platform": "cli", "user_id": "me", "command": "model", "args": "gpt-4"}),
    );
    hooks.emit("agent:start", json!({}));
    hooks.emit(
        "command:reset",
        json!({"platform": "cli", "user_id": "me", "command": "reset", "args": ""}),
    );
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    let text = std::fs::read_to_string(home.root().join("logs/command_usage.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["event_type"], "command:model");
    assert_eq!(lines[0]["context"]["args"], "gpt-4");
    assert_eq!(lines[1]["event_type"], "command:reset");
    assert!(lines[1]["ts"].as_str().is_some_and(|ts| ts.ends_with('Z')));
}

#[test]
fn the_long_task_alert_example_alerts_once_per_session_at_the_threshold() {
    require_python3();
    let home = TestHome::new();
    let dir = install_example(&home, "long-task-alert");
    let manifest = std::fs::read_to_string(dir.join("HOOK.yaml"))
        .unwrap()
        .replace("threshold: 10", "threshold: 3");
    std::fs::write(dir.join("HOOK.yaml"), manifest).unwrap();
    let (hooks, _log) = home.discover();
    for i in 1..=6 {
        hooks.emit("agent:step", json!({"platform": "cli", "session_id": "s1", "iteration": i, "tool_names": ["terminal", "read_file"]}));
    }
    for i in 1..=2 {
        hooks.emit(
            "agent:step",
            json!({"session_id": "s2", "iteration": i, "tool_names": []}),
        );
    }
    hooks.emit(
        "agent:step",
        json!({"session_id": "s2", "iteration": 3, "tool_names": ["web_search"]}),
    );
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    let text = std::fs::read_to_string(home.root().join("logs/long-tasks.log")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].ends_with(
            "session=s1 ⚠️ Agent has been running for 3 steps. Last tools: terminal, read_file"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[1]
            .ends_with("session=s2 ⚠️ Agent has been running for 3 steps. Last tools: web_search"),
        "{}",
        lines[1]
    );
}

// ---------------------------------------------------------------------------------------
// CLI

fn hermes(home: &TestHome, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hermes"))
        .arg("--home")
        .arg(home.root())
        .args(args)
        .env_remove("HERMES_HOME")
        .output()
        .expect("hermes runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn cli_gateway_emit_prints_the_reference_lines_and_waits_for_delivery() {
    require_python3();
    let home = TestHome::new();
    home.recording_hook("rec", "['command:*']");
    home.hook("bad", Some("- nope\n"), &[("handler.py", "")]);
    home.hook(
        "raiser",
        Some("events: [command:model]\n"),
        &[(
            "handler.py",
            "def handle(e, c):\n    raise KeyError('model')\n",
        )],
    );
    let (code, stdout, stderr) = hermes(
        &home,
        &[
            "gateway",
            "emit",
            "command:model",
            "--context",
            r#"{"command": "model", "args": "gpt-4"}"#,
        ],
    );
    assert_eq!(
        stdout,
        "[hooks] Skipping bad: invalid HOOK.yaml\n\
         [hooks] Loaded hook 'raiser' for events: ['command:model']\n\
         [hooks] Loaded hook 'rec' for events: ['command:*']\n\
         Emitting 'command:model' to: raiser, rec\n\
         [hooks] Error in handler for 'command:model': 'model'\n\
         Delivered: 1, failed: 1, not delivered: 0\n",
        "stderr: {stderr}"
    );
    assert_eq!(code, 1);
    assert_eq!(
        home.records("rec"),
        vec![r#"command:model {"args": "gpt-4", "command": "model"}"#]
    );

    let (code, stdout, _) = hermes(&home, &["gateway", "emit", "agent:start"]);
    assert_eq!(code, 0);
    assert!(
        stdout.ends_with("No gateway hook listens to 'agent:start'.\n"),
        "{stdout}"
    );

    let (code, _, stderr) = hermes(
        &home,
        &["gateway", "emit", "agent:start", "--context", "[1]"],
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--context must be a JSON object"),
        "{stderr}"
    );
}

#[test]
fn cli_gateway_hooks_lists_what_loaded_and_why_the_rest_did_not() {
    require_python3();
    let home = TestHome::new();
    home.hook(
        "alpha",
        Some("description: First\nevents: [agent:start, agent:end]\n"),
        &[("handler.py", "def handle(e, c): pass\n")],
    );
    home.hook(
        "beta",
        Some("events: []\n"),
        &[("handler.py", "def handle(e, c): pass\n")],
    );
    home.hook("gamma", Some("events: [x:y]\n"), &[]);
    let (code, stdout, _) = hermes(&home, &["gateway", "hooks"]);
    assert_eq!(code, 0);
    let hooks_dir = home.root().join("hooks");
    assert_eq!(
        stdout,
        format!(
            "Gateway hooks in {d}:\n\n  alpha  [python]  events: agent:start, agent:end\n      First\n      handler: {d}/alpha/handler.py\n\nNot loaded:\n  beta: no events declared\n  gamma: no handler (add handler.py, an executable `handler`, or a native library)\n",
            d = hooks_dir.display()
        )
    );
    let (code, stdout, _) = hermes(&home, &["gateway", "hooks", "--json"]);
    assert_eq!(code, 0);
    let listing: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(listing["loaded"][0]["name"], "alpha");
    assert_eq!(listing["loaded"][0]["kind"], "python");
    assert_eq!(
        listing["loaded"][0]["events"],
        json!(["agent:start", "agent:end"])
    );
    assert_eq!(
        listing["skipped"][0]["message"],
        "[hooks] Skipping beta: no events declared"
    );
    assert_eq!(listing["skipped"][1]["message"], Value::Null);
}

#[test]
fn a_python_handler_past_its_timeout_has_its_workers_group_killed() {
    require_python3();
    let home = TestHome::new();
    // Starts a grandchild that would outlive the worker, records its pid, then hangs.
    let handler = "import os, subprocess, time\n\
def handle(event_type, context):\n    \
    child = subprocess.Popen(['sleep', '300'])\n    \
    with open(os.path.join(os.environ['HERMES_HOME'], 'grandchild.pid'), 'w') as f:\n        \
        f.write(str(child.pid))\n    \
    time.sleep(3600)\n";
    // The timeout bounds the import too: it must leave room for an interpreter started
    // on a busy machine (both cores taken by other work, as in CI), and still end a hang.
    home.hook(
        "hangs",
        Some("events: [agent:start]\ntimeout: 3\n"),
        &[("handler.py", handler)],
    );
    let (hooks, log) = home.discover();
    let started = Instant::now();
    hooks.emit("agent:start", json!({}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the timeout was not enforced: {:?}",
        started.elapsed()
    );
    assert_eq!(
        log.lines().last().map(String::as_str),
        Some(
            "[hooks] Error in handler for 'agent:start': handler timed out after 3s; its python worker was killed and starts again for the next event"
        )
    );
    let pid = std::fs::read_to_string(home.root().join("grandchild.pid")).unwrap();
    let stat = Path::new("/proc").join(pid.trim()).join("stat");
    wait_until(
        "the python worker's grandchild to die with its group",
        Duration::from_secs(5),
        || std::fs::read_to_string(&stat).map_or(true, |s| s.split(' ').nth(2) == Some("Z")),
    );
}

// ---------------------------------------------------------------------------------------
// Calls back to the gateway, and Python logging

/// The capabilities a gateway would offer, recording every call; `slow` takes half a
/// second.
#[derive(Default)]
struct Services {
    calls: std::sync::Mutex<Vec<(String, Value)>>,
}

impl hermes_host::gateway::GatewayServices for Services {
    fn call(&self, capability: &str, args: &Value) -> Result<Value, String> {
        self.calls
            .lock()
            .unwrap()
            .push((capability.to_string(), args.clone()));
        match capability {
            "gateway.model" => Ok(json!({"model": "model-from-gateway"})),
            "gateway.runtime" => Ok(json!({"provider": "scripted"})),
            "agent.run_once" => Ok(
                json!({"final_response": format!("ran: {}", args["prompt"].as_str().unwrap_or("?"))}),
            ),
            "slow" => {
                std::thread::sleep(Duration::from_millis(500));
                Ok(json!({}))
            }
            other => Err(format!("unknown capability '{other}'")),
        }
    }
}

#[test]
fn python_handlers_call_the_gateway_from_handle_and_threads_and_log_through_logging() {
    require_python3();
    let home = TestHome::new();
    let handler = r#"import logging, os, threading, time
from gateway.run import _resolve_gateway_model, _resolve_runtime_agent_kwargs
from run_agent import AIAgent
OUT = os.path.join(os.environ["HERMES_HOME"], "calls.out")
log = logging.getLogger("hooks.caller")
log.info("module loaded")
log.debug("debug records stay out")

def _later():
    time.sleep(0.3)
    with open(OUT, "a") as f:
        f.write("thread: " + _resolve_gateway_model() + "\n")

def handle(event_type, context):
    agent = AIAgent(model=_resolve_gateway_model(), **_resolve_runtime_agent_kwargs(), platform="gateway", quiet_mode=True, max_iterations=3)
    result = agent.run_conversation(context["prompt"])
    with open(OUT, "a") as f:
        f.write("handle: " + result["final_response"] + "\n")
    log.warning("handled %s", event_type)
    threading.Thread(target=_later, daemon=True).start()
"#;
    home.hook(
        "caller",
        Some("events: [agent:start]\n"),
        &[("handler.py", handler)],
    );
    let (hooks, log) = home.discover();
    let services = Arc::new(Services::default());
    let dynamic: Arc<dyn hermes_host::gateway::GatewayServices> = services.clone();
    hooks.provide(Arc::downgrade(&dynamic));
    hooks.emit("agent:start", json!({"prompt": "check"}));
    assert_eq!(
        hooks.shutdown(Duration::from_secs(20)).undelivered_total(),
        0
    );
    // The daemon thread finished before the worker exited: shutdown waited for it.
    assert_eq!(
        home.records("calls"),
        vec!["handle: ran: check", "thread: model-from-gateway"]
    );
    let calls = services.calls.lock().unwrap().clone();
    let run_once = calls
        .iter()
        .find(|(c, _)| c == "agent.run_once")
        .map(|(_, a)| a.clone());
    assert_eq!(
        run_once,
        Some(
            json!({"prompt": "check", "platform": "gateway", "max_iterations": 3, "model": "model-from-gateway"})
        )
    );
    let lines = log.lines();
    assert!(
        lines.contains(&"INFO hooks.caller: module loaded".to_string()),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&"WARNING hooks.caller: handled agent:start".to_string()),
        "{lines:#?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("debug records")),
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.contains("Error")), "{lines:#?}");
}

#[test]
fn a_python_handler_flooding_calls_gets_errors_beyond_the_bound_and_the_rest_answered() {
    require_python3();
    let home = TestHome::new();
    let handler = r#"import os, threading, sys
OUT = os.path.join(os.environ["HERMES_HOME"], "flood.out")
worker = sys.modules["__main__"]
N = 20
barrier = threading.Barrier(N)
lock = threading.Lock()

def _one():
    barrier.wait()
    try:
        worker._HOST.call("slow", {})
        line = "ok"
    except RuntimeError as e:
        line = "error: " + str(e)
    with lock, open(OUT, "a") as f:
        f.write(line + "\n")

def handle(event_type, context):
    for _ in range(N):
        threading.Thread(target=_one).start()
"#;
    home.hook(
        "flood",
        Some("events: [agent:start]\n"),
        &[("handler.py", handler)],
    );
    let (hooks, _log) = home.discover();
    let services = Arc::new(Services::default());
    let dynamic: Arc<dyn hermes_host::gateway::GatewayServices> = services.clone();
    hooks.provide(Arc::downgrade(&dynamic));
    hooks.emit("agent:start", json!({}));
    let records = home.wait_for_records("flood", 20);
    hooks.shutdown(Duration::from_secs(20));
    let ok = records.iter().filter(|r| *r == "ok").count();
    let refused = records
        .iter()
        .filter(|r| r.contains("more than 8 calls of this hook are running"))
        .count();
    assert_eq!(ok + refused, 20, "{records:#?}");
    assert!((8..20).contains(&ok), "{records:#?}");
    assert!(services.calls.lock().unwrap().len() <= 20);
}
