//! `hermes run`: scripted sessions run by the real binary, with real tools and real shell
//! hooks, whose hook firings are checked against the documented order.

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Env {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        }
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    fn work(&self) -> &Path {
        self.work.path()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.work().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A shell hook script that appends `<event> <payload>` lines to `events.log`, and
    /// answers with `answer` (JSON) when given.
    fn recorder_hook(&self, answer: Option<&str>) -> String {
        let log = self.home().join("events.log");
        let script = self.home().join("record.sh");
        let answer = answer
            .map(|a| format!("printf '%s' '{a}'\n"))
            .unwrap_or_default();
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\npayload=$(cat)\nprintf '%s\\n' \"$payload\" >> '{}'\n{answer}",
                log.display()
            ),
        )
        .unwrap();
        let mut perms = std::fs::metadata(&script).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&script, perms).unwrap();
        script.display().to_string()
    }

    fn config(&self, text: &str) {
        std::fs::write(self.home().join("config.yaml"), text).unwrap();
    }

    /// Payloads the recorder hook saw, as JSON.
    fn recorded(&self) -> Vec<Value> {
        std::fs::read_to_string(self.home().join("events.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn run(&self, script: &Path, extra: &[&str]) -> (Output, Vec<Value>) {
        let trace = self.work().join("trace.jsonl");
        let out = self.command(script, &trace, extra).output().unwrap();
        (out, read_trace(&trace))
    }

    fn command(&self, script: &Path, trace: &Path, extra: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
        cmd.arg("--home")
            .arg(self.home())
            .arg("--accept-hooks")
            .arg("run")
            .arg(script);
        cmd.arg("--cwd")
            .arg(self.work())
            .args(["--trace", "json", "--trace-file"])
            .arg(trace);
        cmd.args(extra).stdin(Stdio::null());
        cmd.env_remove("HERMES_LOG").env_remove("RUST_LOG");
        cmd
    }
}

fn read_trace(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The hooks that fired, in order (one `fire` record per firing).
fn fired(trace: &[Value]) -> Vec<String> {
    trace
        .iter()
        .filter(|r| r["kind"] == "fire")
        .map(|r| r["hook"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn describe(out: &Output) -> String {
    format!(
        "\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

const TURN_END: &[&str] = &[
    "pre_api_request",
    "post_api_request",
    "transform_llm_output",
    "post_llm_call",
    "on_session_end",
];

#[test]
fn every_hook_fires_at_its_documented_point_in_order() {
    let env = Env::new();
    let script = env.write(
        "s.yaml",
        "turns:
  - user: hello
    steps:
      - final: hi
  - user: write and run
    steps:
      - tool: write_file
        args: {path: a.txt, content: one}
      - tool: terminal
        args: {command: cat a.txt}
      - final: done
",
    );
    let (out, trace) = env.run(&script, &["--approvals", "deny"]);
    assert!(out.status.success(), "{}", describe(&out));
    let mut expected: Vec<&str> = vec!["on_session_start", "pre_llm_call"];
    expected.extend(TURN_END);
    expected.extend(["pre_llm_call", "pre_api_request", "post_api_request"]);
    expected.extend(["pre_tool_call", "post_tool_call", "transform_tool_result"]);
    expected.extend(["pre_api_request", "post_api_request"]);
    expected.extend([
        "pre_tool_call",
        "transform_terminal_output",
        "post_tool_call",
        "transform_tool_result",
    ]);
    expected.extend(TURN_END);
    expected.push("on_session_finalize");
    assert_eq!(fired(&trace), expected);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#"<- {"output":"one","exit_code":0}"#),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_shell_hook_block_stops_the_tool_and_the_model_sees_the_error() {
    let env = Env::new();
    let hook = env.recorder_hook(Some(
        r#"{"decision": "block", "reason": "no writing today"}"#,
    ));
    env.config(&format!("hooks:\n  pre_tool_call:\n    - command: {hook}\n      matcher: write_file\n  post_tool_call:\n    - command: {hook}\n"));
    let script = env.write("s.yaml", "turns:\n  - user: x\n    steps:\n      - tool: write_file\n        args: {path: a.txt, content: one}\n      - final: ok\n");
    let (out, trace) = env.run(&script, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        !env.work().join("a.txt").exists(),
        "the blocked tool must not run"
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(r#"<- {"error": "no writing today"}"#),
        "{}",
        describe(&out)
    );
    let post = env
        .recorded()
        .into_iter()
        .find(|p| p["hook_event_name"] == "post_tool_call")
        .expect("post_tool_call fired");
    assert_eq!(post["extra"]["status"], "blocked");
    assert_eq!(post["extra"]["result"], r#"{"error": "no writing today"}"#);
    let block = trace
        .iter()
        .find(|r| r["kind"] == "callback" && r["hook"] == "pre_tool_call")
        .unwrap();
    assert_eq!(block["system"], "shell");
    assert_eq!(block["decision"], "block: no writing today");
}

#[test]
fn pre_llm_call_context_reaches_the_model_but_not_the_history() {
    let env = Env::new();
    let hook = env.recorder_hook(Some(r#"{"context": "The user is called Ada."}"#));
    env.config(&format!("hooks:\n  pre_llm_call:\n    - command: {hook}\n"));
    let script = env.write("s.yaml", "turns:\n  - user: who am I?\n    steps:\n      - final: You are Ada.\n        echo: true\n  - user: again\n    steps:\n      - final: ok\n");
    let (out, _) = env.run(&script, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("[the model received: who am I?\n\nThe user is called Ada.]"),
        "{}",
        describe(&out)
    );
    let second = env
        .recorded()
        .into_iter()
        .filter(|p| p["hook_event_name"] == "pre_llm_call")
        .nth(1)
        .unwrap();
    let history = &second["extra"]["conversation_history"];
    assert_eq!(
        history[0],
        serde_json::json!({"role": "user", "content": "who am I?"}),
        "context is never persisted"
    );
}

#[test]
fn approvals_follow_the_mode() {
    for (mode, runs, choice) in [
        ("once", true, "once"),
        ("session", true, "session"),
        ("always", true, "always"),
        ("deny", false, "deny"),
        ("prompt", false, "deny"),
    ] {
        let env = Env::new();
        let hook = env.recorder_hook(None);
        env.config(&format!("hooks:\n  pre_approval_request:\n    - command: {hook}\n  post_approval_response:\n    - command: {hook}\n"));
        std::fs::create_dir(env.work().join("junk")).unwrap();
        let script = env.write(
            "s.yaml",
            "turns:\n  - user: clean\n    steps:\n      - tool: terminal\n        args: {command: rm -rf junk}\n      - tool: terminal\n        args: {command: rm -r junk2 || true}\n      - final: ok\n",
        );
        let (out, trace) = env.run(&script, &["--approvals", mode]);
        assert!(out.status.success(), "{mode}: {}", describe(&out));
        assert_eq!(!env.work().join("junk").exists(), runs, "{mode}");
        let seen = env.recorded();
        let response = seen
            .iter()
            .find(|p| p["hook_event_name"] == "post_approval_response")
            .unwrap();
        assert_eq!(response["extra"]["choice"], choice, "{mode}");
        assert_eq!(response["extra"]["pattern_key"], "recursive_delete");
        assert_eq!(response["extra"]["surface"], "cli");
        // A session or always approval covers the same pattern later in the session.
        let requests = fired(&trace)
            .iter()
            .filter(|h| *h == "pre_approval_request")
            .count();
        let expected = if matches!(mode, "session" | "always") {
            1
        } else {
            2
        };
        assert_eq!(requests, expected, "{mode}");
    }
}

#[test]
fn an_unanswered_prompt_times_out_and_denies() {
    let env = Env::new();
    let hook = env.recorder_hook(None);
    env.config(&format!(
        "hooks:\n  post_approval_response:\n    - command: {hook}\n"
    ));
    std::fs::create_dir(env.work().join("junk")).unwrap();
    let script = env.write("s.yaml", "turns:\n  - user: clean\n    steps:\n      - tool: terminal\n        args: {command: rm -rf junk}\n      - final: ok\n");
    let trace = env.work().join("trace.jsonl");
    let cmd = env.command(
        &script,
        &trace,
        &["--approvals", "prompt", "--approval-timeout", "1"],
    );
    let line = format!("{:?}", cmd).replace('"', "'");
    // `script` gives the run a terminal, so the prompt is shown and nobody answers it.
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux script");
    // Hold the terminal's input open and silent: nobody answers.
    let _silent = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    assert!(env.work().join("junk").exists(), "{}", describe(&out));
    let seen = env.recorded();
    assert_eq!(seen[0]["extra"]["choice"], "timeout", "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Dangerous command (recursive delete)"),
        "{}",
        describe(&out)
    );
}

#[test]
fn sigint_mid_turn_ends_the_session_as_interrupted() {
    let env = Env::new();
    let hook = env.recorder_hook(None);
    env.config(&format!("hooks:\n  on_session_end:\n    - command: {hook}\n  on_session_finalize:\n    - command: {hook}\n"));
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: wait\n    steps:\n      - tool: terminal\n        args: {command: sleep 30}\n      - final: never\n  - user: never asked\n    steps:\n      - final: no\n",
    );
    let trace = env.work().join("trace.jsonl");
    let child = env
        .command(&script, &trace, &[])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Wait until the command is running, then interrupt.
    while !read_trace(&trace)
        .iter()
        .any(|r| r["hook"] == "pre_tool_call" && r["kind"] == "fire")
    {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the tool never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the interrupt did not stop `sleep 30`"
    );
    assert_eq!(out.status.code(), Some(130), "{}", describe(&out));
    let seen = env.recorded();
    let events: Vec<&str> = seen
        .iter()
        .map(|p| p["hook_event_name"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(events, ["on_session_end", "on_session_finalize"]);
    assert_eq!(
        (
            seen[0]["extra"]["completed"].as_bool(),
            seen[0]["extra"]["interrupted"].as_bool()
        ),
        (Some(false), Some(true))
    );
    let hooks = fired(&read_trace(&trace));
    assert!(
        !hooks.contains(&"post_llm_call".to_string()),
        "no post_llm_call after an interrupt: {hooks:?}"
    );
}

#[test]
fn delegation_runs_three_children_and_reports_each_once_after_all_finished() {
    let env = Env::new();
    let hook = env.recorder_hook(None);
    env.config(&format!("hooks:\n  subagent_stop:\n    - command: {hook}\n  on_session_start:\n    - command: {hook}\n"));
    for (i, delay) in [(1, "0.3"), (2, "0.1"), (3, "0.2")] {
        env.write(
            &format!("child{i}.yaml"),
            &format!("turns:\n  - user: task {i}\n    steps:\n      - tool: terminal\n        args: {{command: sleep {delay}}}\n      - final: child {i} done\n"),
        );
    }
    let script = env.write(
        "parent.yaml",
        "session_id: parent-1\nturns:\n  - user: split it\n    steps:\n      - tool: delegate_task\n        args: {tasks: [{script: child1.yaml, role: a}, {script: child2.yaml, role: b}, {script: child3.yaml, role: c}]}\n      - final: all done\n",
    );
    let started = Instant::now();
    let (out, trace) = env.run(&script, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let seen = env.recorded();
    let stops: Vec<&Value> = seen
        .iter()
        .filter(|p| p["hook_event_name"] == "subagent_stop")
        .collect();
    assert_eq!(stops.len(), 3);
    for (stop, (role, summary)) in stops.iter().zip([
        ("a", "child 1 done"),
        ("b", "child 2 done"),
        ("c", "child 3 done"),
    ]) {
        assert_eq!(stop["session_id"], "parent-1");
        assert_eq!(stop["extra"]["child_role"], role);
        assert_eq!(stop["extra"]["child_summary"], summary);
        assert_eq!(stop["extra"]["child_status"], "completed");
    }
    // Four sessions started: the parent and three children.
    assert_eq!(
        seen.iter()
            .filter(|p| p["hook_event_name"] == "on_session_start")
            .count(),
        4
    );
    // subagent_stop fired only after every child finalized.
    let hooks = fired(&trace);
    let first_stop = hooks.iter().position(|h| h == "subagent_stop").unwrap();
    assert_eq!(
        hooks[..first_stop]
            .iter()
            .filter(|h| *h == "on_session_finalize")
            .count(),
        3
    );
    // The children ran concurrently: well under the sum of their sleeps plus overhead.
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn a_malformed_script_is_one_clear_error() {
    let env = Env::new();
    let script = env.write(
        "bad.yaml",
        "turns:\n  - user: x\n    steps:\n      - nothing: here\n",
    );
    let (out, _) = env.run(&script, &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!("hermes: {}: ", script.display())),
        "{stderr}"
    );
}

#[test]
fn a_modify_answer_changes_the_arguments_the_tool_runs_with() {
    let env = Env::new();
    let hook = env.recorder_hook(Some(
        r#"{"action": "modify", "args": {"content": "rewritten by a hook"}}"#,
    ));
    env.config(&format!("hooks:\n  pre_tool_call:\n    - command: {hook}\n      matcher: write_file\n  post_tool_call:\n    - command: {hook}\n      matcher: write_file\n"));
    let script = env.write("s.yaml", "turns:\n  - user: x\n    steps:\n      - tool: write_file\n        args: {path: a.txt, content: original}\n      - final: ok\n");
    let (out, _) = env.run(&script, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(env.work().join("a.txt")).unwrap(),
        "rewritten by a hook"
    );
    let post = env
        .recorded()
        .into_iter()
        .find(|p| p["hook_event_name"] == "post_tool_call")
        .unwrap();
    assert_eq!(
        post["tool_input"],
        serde_json::json!({"path": "a.txt", "content": "rewritten by a hook"})
    );
}

#[test]
fn the_text_trace_names_system_hook_decision_and_time() {
    let env = Env::new();
    let hook = env.recorder_hook(Some(r#"{"context": "ctx"}"#));
    env.config(&format!("hooks:\n  pre_llm_call:\n    - command: {hook}\n"));
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: x\n    steps:\n      - final: ok\n",
    );
    let out = Command::new(env!("CARGO_BIN_EXE_hermes"))
        .arg("--home")
        .arg(env.home())
        .args(["--accept-hooks", "run"])
        .arg(&script)
        .arg("--cwd")
        .arg(env.work())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("shell_hook[pre_llm_call:"))
        .unwrap_or_default();
    assert!(
        line.starts_with("[trace]   shell   shell_hook[pre_llm_call:")
            && line.contains(": context: ctx  ("),
        "{stderr}"
    );
    assert!(line.ends_with(" ms)"), "{line}");
    assert!(
        stderr.contains("[trace] pre_llm_call -> context: ctx  ("),
        "{stderr}"
    );
}

/// Whether the process whose pid is in `file` is gone (or a zombie) within 5 s.
fn dies_within_5s(file: &Path) -> bool {
    let pid = std::fs::read_to_string(file).unwrap_or_default();
    let stat = Path::new("/proc").join(pid.trim()).join("stat");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        let running = std::fs::read_to_string(&stat)
            .is_ok_and(|s| s.rsplit(')').next().and_then(|r| r.split(' ').nth(1)) != Some("Z"));
        if !running {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn the_terminal_tool_kills_the_commands_group_at_its_timeout_and_when_it_exits() {
    let env = Env::new();
    let script = env.write(
        "s.yaml",
        "turns:
  - user: hang
    steps:
      - tool: terminal
        args: {command: 'sleep 300 & echo $! > hung.pid; sleep 300', timeout: 1}
      - tool: terminal
        args: {command: 'sleep 300 & echo $! > left.pid; echo started'}
      - final: done
",
    );
    let started = Instant::now();
    let (out, _) = env.run(&script, &[]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "a terminal command outlived its timeout"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#""error":"command timed out""#),
        "{}",
        describe(&out)
    );
    assert!(
        stdout.contains(r#"<- {"output":"started\n","exit_code":0}"#),
        "{}",
        describe(&out)
    );
    assert!(
        dies_within_5s(&env.work().join("hung.pid")),
        "the timed-out command's background child survived"
    );
    assert!(
        dies_within_5s(&env.work().join("left.pid")),
        "the finished command's background child survived"
    );
}
