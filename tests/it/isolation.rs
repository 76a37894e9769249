//! `isolation: process`: the crashy test plugin in a worker process, failing in each way a
//! native plugin can, beside the guardrail plugin in-process. The host survives, names the
//! plugin, hook, callback and cause, and the other plugin's decision stands.

use std::time::{Duration, Instant};

use hermes_tests::support::{TestHome, built};

const RM: &str = r#"{"tool_name": "terminal", "args": {"command": "rm -rf /"}}"#;
const LS: &str = r#"{"tool_name": "terminal", "args": {"command": "ls"}}"#;

/// A home with crashy (isolated, in `mode`) and guardrail (in-process).
fn home_with(mode: &str) -> TestHome {
    let home = TestHome::new();
    home.install("crashy", "crashy", None, Some(&format!("{{mode: {mode}}}")));
    if mode == "alloc" {
        // Reaching the memory limit takes page faults, which a busy machine can stretch
        // past the 1 s timeout; what this case checks is the out-of-memory abort.
        let manifest = home.path().join("plugins/crashy/plugin.yaml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(text.contains("timeout: 1\n"), "{text}");
        std::fs::write(&manifest, text.replace("timeout: 1\n", "timeout: 15\n")).unwrap();
    }
    home.install("guardrail", "guardrail", None, None);
    home.config("plugins:\n  enabled: [crashy, guardrail]\n");
    home
}

#[test]
fn every_way_an_isolated_plugin_dies_is_named_and_the_other_plugin_still_decides() {
    let cases = [
        ("segfault", "SIGSEGV (signal 11)"),
        ("abort", "SIGABRT (signal 6)"),
        ("exit", "exit status 3"),
        ("loop", "killed after timeout 1 s"),
        ("sleep", "killed after timeout 1 s"),
        (
            "alloc",
            "SIGABRT (signal 6); out of memory? its memory_limit is 256 MiB",
        ),
    ];
    for (mode, cause) in cases {
        let home = home_with(mode);
        let started = Instant::now();
        let run = home.hermes(&["plugins", "fire", "pre_tool_call", "--payload", RM], &[]);
        run.expect_code(0);
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{mode}: {:?}",
            started.elapsed()
        );
        let stderr = run.stderr();
        let line = "Plugin 'crashy' crashed in hook 'pre_tool_call' (callback crashy::";
        assert!(
            stderr.contains(line) && stderr.contains(cause),
            "{mode}:{}",
            run.describe()
        );
        assert!(
            run.stdout().contains("Outcome: blocked by guardrail::"),
            "{mode}: the in-process plugin's block was lost:{}",
            run.describe()
        );
        assert!(
            run.stdout().contains(&format!(
                "Isolated plugin 'crashy': no worker running, 0 restart(s), last crash: {cause}"
            )) && run.stdout().contains(cause),
            "{mode}:{}",
            run.describe()
        );
    }
}

#[test]
fn a_panic_is_an_error_answer_and_100_mb_of_prints_never_reach_the_protocol() {
    let home = home_with("panic");
    let run = home.hermes(&["plugins", "fire", "pre_tool_call", "--payload", RM], &[]);
    run.expect_code(0);
    assert!(
        run.stderr().contains("crashy panics on purpose"),
        "{}",
        run.describe()
    );
    assert!(
        !run.stderr().contains("crashed in hook"),
        "{}",
        run.describe()
    );

    let home = home_with("print");
    let run = home.hermes(&["plugins", "fire", "pre_tool_call", "--payload", LS], &[]);
    run.expect_code(0);
    assert!(run.stdout().contains("crashy::"), "{}", &run.stdout());
    assert!(!run.stderr().contains("crashed in hook"));
    assert!(
        run.stderr().len() >= 100 << 20,
        "the prints went somewhere else"
    );
}

#[test]
fn an_isolated_plugin_decides_exactly_as_in_process_and_list_shows_its_worker() {
    let home = home_with("block");
    let run = home.hermes(&["plugins", "fire", "pre_tool_call", "--payload", LS], &[]);
    run.expect_code(0);
    assert!(
        run.stdout().contains("Outcome: blocked by crashy::"),
        "{}",
        run.describe()
    );
    let list = home.hermes(&["plugins", "list"], &[]);
    assert!(
        list.stdout().contains("isolation: process (worker pid ")
            && list.stdout().contains(", 0 restart(s))"),
        "{}",
        list.describe()
    );
    // The same library in-process, by config: the same decision.
    home.config("plugins:\n  enabled: [crashy, guardrail]\n  isolation:\n    crashy: in-process\n");
    let run = home.hermes(&["plugins", "fire", "pre_tool_call", "--payload", LS], &[]);
    assert!(
        run.stdout().contains("Outcome: blocked by crashy::"),
        "{}",
        run.describe()
    );
    let list = home.hermes(&["plugins", "list", "--json"], &[]);
    assert!(
        list.stdout().contains(r#""isolation": "in-process""#),
        "{}",
        list.describe()
    );
}

#[test]
fn a_plugin_that_keeps_crashing_restarts_with_backoff_then_is_disabled() {
    let home = home_with("exit");
    let run = home.hermes(
        &[
            "bench",
            "pre_tool_call",
            "--system",
            "native",
            "--duration",
            "6s",
            "--warmup",
            "0",
        ],
        &[("HERMES_LOG", "warn")],
    );
    run.expect_code(0);
    let stderr = run.stderr();
    let crashes = stderr.matches("Plugin 'crashy' crashed in hook").count();
    assert_eq!(crashes, 5, "{}", run.describe());
    assert!(
        stderr.contains(
            "Plugin 'crashy' crashed 5 times within 60s and is disabled for the rest of this run"
        ),
        "{}",
        run.describe()
    );
}

#[test]
fn a_worker_does_not_outlive_a_host_killed_with_sigkill() {
    let home = home_with("block");
    let mut child = std::process::Command::new(built().hermes())
        .arg("--home")
        .arg(home.path())
        .args(["bench", "pre_tool_call", "--duration", "60s"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let host = child.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    let worker = loop {
        let found = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let ppid: u32 = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            (ppid == host).then_some(pid)
        });
        if let Some(pid) = found {
            break pid;
        }
        assert!(Instant::now() < deadline, "no worker started");
        std::thread::sleep(Duration::from_millis(50));
    };
    // SAFETY: signalling our own child.
    unsafe { libc::kill(host as i32, libc::SIGKILL) };
    let _ = child.wait();
    let stat = format!("/proc/{worker}/stat");
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::fs::read_to_string(&stat).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
            != Some("Z")
    }) {
        assert!(
            Instant::now() < deadline,
            "the worker {worker} outlived its host"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_fail_closed_plugin_blocks_while_it_cannot_answer_and_its_logs_reach_the_host() {
    let home = TestHome::new();
    let dir = home.install("crashy", "crashy", None, Some("{mode: segfault}"));
    let manifest = std::fs::read_to_string(dir.join("plugin.yaml")).unwrap();
    std::fs::write(
        dir.join("plugin.yaml"),
        format!("{manifest}fail_closed: true\n"),
    )
    .unwrap();
    home.config("plugins:\n  enabled: [crashy]\n");
    let run = home.hermes(&["plugins", "fire", "pre_tool_call", "--payload", LS], &[]);
    run.expect_code(0);
    assert!(
        run.stdout().contains(
            "Outcome: blocked by crashy::"
        ) && run.stdout().contains("blocked: plugin 'crashy' guards this tool call and is not answering (SIGSEGV (signal 11))"),
        "{}",
        run.describe()
    );

    let home = home_with("block");
    let run = home.hermes(
        &["plugins", "fire", "pre_tool_call", "--payload", LS],
        &[("HERMES_LOG", "info")],
    );
    assert!(
        run.stderr().contains("crashy blocks a terminal call"),
        "the worker's plugin log did not reach the host's stderr:{}",
        run.describe()
    );
}

#[test]
fn an_in_process_crash_names_the_plugin_and_keeps_the_signals_exit_status() {
    use std::os::unix::process::ExitStatusExt;
    for (mode, signal, name) in [
        ("segfault", 11, "SIGSEGV (signal 11)"),
        ("abort", 6, "SIGABRT (signal 6)"),
    ] {
        let home = home_with(mode);
        home.config(
            "plugins:\n  enabled: [crashy, guardrail]\n  isolation:\n    crashy: in-process\n",
        );
        let out = std::process::Command::new(built().hermes())
            .arg("--home")
            .arg(home.path())
            .args(["plugins", "fire", "pre_tool_call", "--payload", LS])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.signal(),
            Some(signal),
            "{mode}: {:?}\n{stderr}",
            out.status
        );
        assert!(
            stderr.contains(&format!(
                "hermes: {name} in plugin 'crashy' (callback crashy::"
            )) && stderr.contains("hook 'pre_tool_call'")
                && stderr.contains("set `isolation: process` in its plugin.yaml"),
            "{mode}:\n{stderr}"
        );
    }
}

#[test]
fn a_slow_in_process_callback_is_named_with_the_way_to_bound_it() {
    let home = home_with("slow");
    home.config(
        "plugins:\n  enabled: [crashy]\n  isolation:\n    crashy: in-process\n  slow_callback_warning: 100ms\n",
    );
    let run = home.hermes(&["plugins", "fire", "pre_tool_call", "--payload", LS], &[]);
    run.expect_code(0);
    assert!(
        run.stderr().contains("Plugin callback crashy::")
            && run.stderr().contains("in hook 'pre_tool_call', and an in-process callback cannot be stopped; set `isolation: process`"),
        "{}",
        run.describe()
    );
    home.config(
        "plugins:\n  enabled: [crashy]\n  isolation:\n    crashy: in-process\n  slow_callback_warning: off\n",
    );
    let run = home.hermes(&["plugins", "fire", "pre_tool_call", "--payload", LS], &[]);
    assert!(
        !run.stderr().contains("cannot be stopped"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_hanging_in_process_callback_is_named_while_it_hangs() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let home = home_with("loop");
    home.config(
        "plugins:\n  enabled: [crashy]\n  isolation:\n    crashy: in-process\n  slow_callback_warning: 100ms\n",
    );
    let mut child = Command::new(built().hermes())
        .arg("--home")
        .arg(home.path())
        .args(["plugins", "fire", "pre_tool_call", "--payload", LS])
        .env_remove("HERMES_LOG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The callback never returns: the warning can only come from the watchdog.
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let named = line.contains("Plugin callback crashy::")
            && line.contains("has been running for")
            && line
                .contains("in hook 'pre_tool_call', and an in-process callback cannot be stopped");
        lines.push(line);
        if named {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        lines
            .last()
            .is_some_and(|l| l.contains("has been running for")),
        "no warning while the callback hung:\n{}",
        lines.join("\n")
    );
}

#[test]
fn an_isolated_callbacks_host_capabilities_cross_the_boundary() {
    let home = TestHome::new();
    home.install("gateway-ack", "gateway-ack", None, None);
    home.config("plugins:\n  enabled: [gateway-ack]\n  isolation_default: process\n");
    let payload = r#"{"platform": "telegram", "chat_id": "c-1", "text": "hi", "session_key": "telegram:c-1"}"#;
    let run = home.hermes(
        &[
            "plugins",
            "fire",
            "pre_gateway_dispatch",
            "--payload",
            payload,
            "--json",
        ],
        &[],
    );
    run.expect_code(0);
    let out: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    assert_eq!(
        out["capability_calls"][0]["capability"],
        "gateway.send",
        "{}",
        run.describe()
    );
    assert_eq!(
        out["capability_calls"][1]["args"]["entry"]["content"],
        "ack: hi"
    );
    let list = home.hermes(&["plugins", "list"], &[]);
    assert!(
        list.stdout().contains("isolation: process"),
        "{}",
        list.describe()
    );
}

#[test]
fn an_agent_run_goes_on_when_an_isolated_plugin_dies_mid_session() {
    let home = home_with("segfault");
    let run = home.terminal_session(&["echo still-here", "echo again"], &[]);
    run.expect_code(0);
    assert!(run.stdout().contains("still-here"), "{}", run.describe());
    assert!(
        run.stderr()
            .contains("Plugin 'crashy' crashed in hook 'pre_tool_call' (callback crashy::"),
        "{}",
        run.describe()
    );
}

#[test]
fn gateway_emit_reaches_a_plugins_gateway_callbacks_isolated_or_not() {
    for isolation in ["process", "in-process"] {
        let home = TestHome::new();
        home.install("noisy", "noisy", None, None);
        home.config(&format!(
            "plugins:\n  enabled: [noisy]\n  isolation:\n    noisy: {isolation}\n"
        ));
        let run = home.hermes(&["gateway", "emit", "agent:start", "--deadline", "10"], &[]);
        run.expect_code(0);
        let printed = format!("{}{}", run.stdout(), run.stderr());
        assert!(
            printed.contains("noisy: gateway agent:start"),
            "{isolation}:{}",
            run.describe()
        );
        assert!(
            run.stdout().contains("Delivered: 1"),
            "{isolation}:{}",
            run.describe()
        );
    }
}
