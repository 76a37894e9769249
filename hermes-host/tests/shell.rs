//! Shell hooks end to end: real scripts in a temporary `$HERMES_HOME`, run by the real
//! `hermes` binary (and, where a test needs to reach inside one process, by the library).

// Test helpers outside `#[test]` functions: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hermes_host::home::Home;
use hermes_host::registry::Registry;
use hermes_host::shell::{self, Consent, consent::Allowlist};

/// A fresh `$HERMES_HOME` with helpers to write scripts and config and to run `hermes`.
struct TestHome {
    dir: tempfile::TempDir,
}

impl TestHome {
    fn new() -> TestHome {
        TestHome {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes an executable script and returns its path as text.
    fn script(&self, name: &str, body: &str) -> String {
        let path = self.path().join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    fn config(&self, yaml: &str) {
        std::fs::write(self.path().join("config.yaml"), yaml).unwrap();
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
        cmd.arg("--home").arg(self.path()).args(args);
        cmd.current_dir(self.path());
        cmd.env_remove("HERMES_HOME")
            .env_remove("HERMES_ACCEPT_HOOKS")
            .env_remove("HERMES_SAFE_MODE");
        cmd.env_remove("RUST_LOG")
            .env("HERMES_LOG", "warn")
            .env("NO_COLOR", "1");
        cmd.stdin(Stdio::null());
        cmd
    }

    fn hermes(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("hermes runs")
    }

    /// Replaces the home path with `$H`, so outputs compare as text.
    fn mask(&self, text: &str) -> String {
        text.replace(&self.path().display().to_string(), "$H")
    }

    fn allowlist(&self) -> Allowlist {
        Allowlist::new(&Home::at(self.path()))
    }

    /// Fails with the command, the directory listing, stdout and stderr framed.
    fn fail(&self, what: &str, out: &Output) -> ! {
        let listing: Vec<String> = std::fs::read_dir(self.path())
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let line = "-".repeat(79);
        panic!(
            "{what}\n{line}\nexit: {:?}\nhome: {listing:?}\n{line}\nstdout:\n{}\n{line}\nstderr:\n{}\n{line}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    fn expect_stdout(&self, out: &Output, expected: &str) {
        let got = mask_times(&self.mask(&String::from_utf8_lossy(&out.stdout)));
        if got != expected {
            let line = "=".repeat(79);
            self.fail(
                &format!(
                    "stdout differs\n{line}\nexpected:\n{expected}\n{line}\ngot:\n{got}\n{line}"
                ),
                out,
            );
        }
    }

    fn expect_stderr_has(&self, out: &Output, needle: &str) {
        if !String::from_utf8_lossy(&out.stderr).contains(needle) {
            self.fail(&format!("stderr lacks: {needle}"), out);
        }
    }

    fn expect_code(&self, out: &Output, code: i32) {
        if out.status.code() != Some(code) {
            self.fail(&format!("expected exit code {code}"), out);
        }
    }
}

/// Masks timestamps and elapsed seconds, which change from run to run.
fn mask_times(text: &str) -> String {
    let ts = regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z").unwrap();
    let secs = regex::Regex::new(r"(elapsed=|, |after )\d+\.\d+s").unwrap();
    let text = ts.replace_all(text, "<TS>");
    secs.replace_all(&text, "${1}<S>s").into_owned()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `hermes hooks fire <event> --payload <json> --accept-hooks`: the full registry path.
fn fire(home: &TestHome, event: &str, payload: &str) -> Output {
    home.hermes(&[
        "hooks",
        "fire",
        event,
        "--payload",
        payload,
        "--accept-hooks",
    ])
}

const RM: &str = r#"{"tool_name": "terminal", "args": {"command": "rm -rf /"}}"#;

// ----------------------------------------------------------------------------------------
// Config validation (issue point 1)

#[test]
fn every_validation_warning_names_the_entry_and_skips_it() {
    let home = TestHome::new();
    home.config(
        "hooks:
  pre_tool_cal:
    - command: a
  nonsense_event:
    - command: a
  post_tool_call: {command: a}
  pre_llm_call:
    - just-a-string
    - {timeout: 5}
    - {command: ctx, matcher: terminal}
  pre_tool_call:
    - {command: m1, matcher: 5}
    - {command: t1, timeout: thirty}
    - {command: t2, timeout: 0}
    - {command: t3, timeout: 301}
    - {command: r1, matcher: 'a('}
    - {command: f1, fail_closed: 'yes'}
    - {command: p1, priority: high}
  on_session_end:
    - {command: f2, fail_closed: true}
",
    );
    let out = home.hermes(&["hooks", "list"]);
    home.expect_code(&out, 0);
    let valid = hermes_hooks_abi::hooks::names_sorted().join(", ");
    for warning in [
        "unknown hook event 'pre_tool_cal' in hooks: config — did you mean 'pre_tool_call'?".to_string(),
        format!("unknown hook event 'nonsense_event' in hooks: config (valid: {valid})"),
        "hooks.post_tool_call must be a list of hook definitions; got dict".into(),
        "hooks.pre_llm_call[0] must be a mapping with a 'command' key; got str".into(),
        "hooks.pre_llm_call[1] is missing a non-empty 'command' field".into(),
        "hooks.pre_llm_call[2].matcher='terminal' will be ignored at runtime — the matcher field is only honored for pre_tool_call / post_tool_call.  The hook will fire on every pre_llm_call event.".into(),
        "hooks.pre_tool_call[0].matcher must be a string regex; ignoring".into(),
        "hooks.pre_tool_call[1].timeout must be an int (got 'thirty'); using default 60s".into(),
        "hooks.pre_tool_call[2].timeout must be >=1; using default 60s".into(),
        "hooks.pre_tool_call[3].timeout=301s exceeds max 300s; clamping".into(),
        "shell hook matcher 'a(' is invalid (unclosed group) — treating as literal equality".into(),
        "hooks.pre_tool_call[5].fail_closed must be a bool (got 'yes'); using false".into(),
        "hooks.pre_tool_call[6].priority must be an int (got 'high'); using 0".into(),
        "hooks.on_session_end[0].fail_closed=True will be ignored — only pre_tool_call hooks can block, so only they can fail closed".into(),
    ] {
        home.expect_stderr_has(&out, &warning);
    }
    // Parse warnings go to the log; stdout lists the surviving entries, events sorted, entries in order.
    home.expect_stdout(
        &out,
        "Configured shell hooks (9 total):

  [on_session_end]
    - f2 (timeout=60s, ✗ not allowlisted)

  [pre_llm_call]
    - ctx (timeout=60s, ✗ not allowlisted)

  [pre_tool_call]
    - m1 (timeout=60s, ✗ not allowlisted)
    - t1 (timeout=60s, ✗ not allowlisted)
    - t2 (timeout=60s, ✗ not allowlisted)
    - t3 (timeout=300s, ✗ not allowlisted)
    - r1 matcher='a(' (timeout=60s, ✗ not allowlisted)
    - f1 (timeout=60s, ✗ not allowlisted)
    - p1 (timeout=60s, ✗ not allowlisted)

",
    );
}

// ----------------------------------------------------------------------------------------
// Payload (issue point 2)

#[test]
fn the_test_payload_has_the_reference_keys_in_order() {
    let home = TestHome::new();
    let script = home.script(
        "dump.sh",
        "#!/bin/sh\ncat > \"$(dirname \"$0\")/payload.json\"\n",
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {script}\n"
    ));
    let out = home.hermes(&["hooks", "test", "pre_tool_call"]);
    home.expect_code(&out, 0);
    let payload = std::fs::read_to_string(home.path().join("payload.json")).unwrap();
    assert_eq!(
        home.mask(&payload),
        r#"{"hook_event_name": "pre_tool_call", "tool_name": "terminal", "tool_input": {"command": "echo hello"}, "session_id": "test-session", "cwd": "$H", "extra": {"task_id": "test-task", "tool_call_id": "test-call"}}"#
    );
}

#[test]
fn the_runtime_payload_is_utf8_and_carries_the_telemetry_version() {
    let home = TestHome::new();
    let script = home.script(
        "dump.sh",
        "#!/bin/sh\ncat > \"$(dirname \"$0\")/payload.json\"\n",
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {script}\n"
    ));
    let out = fire(
        &home,
        "pre_tool_call",
        r#"{"tool_name": "terminal", "args": {"command": "héllo ☃"}, "session_id": "s-1", "task_id": "t"}"#,
    );
    home.expect_code(&out, 0);
    let payload = std::fs::read_to_string(home.path().join("payload.json")).unwrap();
    assert_eq!(
        home.mask(&payload),
        r#"{"hook_event_name": "pre_tool_call", "tool_name": "terminal", "tool_input": {"command": "héllo ☃"}, "session_id": "s-1", "cwd": "$H", "extra": {"task_id": "t", "tool_call_id": "", "turn_id": null, "api_request_id": null, "middleware_trace": [], "telemetry_schema_version": "hermes.observer.v1"}}"#
    );
}

#[test]
fn subagent_payloads_promote_the_parent_session_id() {
    let home = TestHome::new();
    let script = home.script(
        "dump.sh",
        "#!/bin/sh\ncat > \"$(dirname \"$0\")/payload.json\"\n",
    );
    home.config(&format!(
        "hooks:\n  subagent_stop:\n    - command: {script}\n"
    ));
    home.hermes(&["hooks", "test", "subagent_stop"]);
    let payload = std::fs::read_to_string(home.path().join("payload.json")).unwrap();
    assert_eq!(
        home.mask(&payload),
        r#"{"hook_event_name": "subagent_stop", "tool_name": null, "tool_input": null, "session_id": "parent-sess", "cwd": "$H", "extra": {"child_role": null, "child_summary": "Synthetic summary for hooks test", "child_status": "completed", "duration_ms": 1234}}"#
    );
}

// ----------------------------------------------------------------------------------------
// Answers (issue point 4)

fn one_hook(home: &TestHome, event: &str, body: &str, extra: &str) -> String {
    let script = home.script("hook.sh", body);
    home.config(&format!(
        "hooks:\n  {event}:\n    - command: {script}\n{extra}"
    ));
    format!("shell_hook[{event}:{script}]")
}

fn outcome(out: &Output) -> String {
    stdout(out)
        .lines()
        .find_map(|l| l.strip_prefix("Outcome: "))
        .unwrap_or("")
        .to_string()
}

#[test]
fn both_answer_shapes_block_a_tool() {
    let shapes = [
        (
            r#"{"action": "block", "message": "canonical"}"#,
            "canonical",
        ),
        (r#"{"decision": "block", "reason": "claude"}"#, "claude"),
        (
            r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "denied"}}"#,
            "denied",
        ),
        (r#"{"action": "block"}"#, "Blocked by shell hook."),
    ];
    for (answer, message) in shapes {
        let home = TestHome::new();
        let label = one_hook(
            &home,
            "pre_tool_call",
            &format!("#!/bin/sh\ncat >/dev/null\necho '{answer}'\n"),
            "",
        );
        let out = fire(&home, "pre_tool_call", RM);
        assert_eq!(
            outcome(&out),
            format!("blocked by {label}: {message}"),
            "{answer}"
        );
    }
}

#[test]
fn non_decisions_leave_the_tool_alone() {
    for answer in [
        r#"{"decision": "allow"}"#,
        "{}",
        r#"{"context": "x"}"#,
        "[1]",
        "",
    ] {
        let home = TestHome::new();
        one_hook(
            &home,
            "pre_tool_call",
            &format!("#!/bin/sh\necho '{answer}'\n"),
            "",
        );
        assert_eq!(
            outcome(&fire(&home, "pre_tool_call", RM)),
            "allowed",
            "{answer}"
        );
    }
}

#[test]
fn both_answer_shapes_add_context() {
    for answer in [
        r#"{"context": "Today is Friday"}"#,
        r#"{"hookSpecificOutput": {"additionalContext": "Today is Friday"}}"#,
    ] {
        let home = TestHome::new();
        one_hook(
            &home,
            "pre_llm_call",
            &format!("#!/bin/sh\necho '{answer}'\n"),
            "",
        );
        assert_eq!(
            outcome(&fire(&home, "pre_llm_call", "{}")),
            "context: Today is Friday",
            "{answer}"
        );
    }
}

#[test]
fn exit_code_2_blocks_with_stdout_then_stderr_then_the_default() {
    let cases = [
        (
            "echo '{\"reason\": \"from stdout\"}'; echo 'from stderr' >&2; exit 2",
            "from stdout",
        ),
        ("echo 'from stderr' >&2; exit 2", "from stderr"),
        ("exit 2", "Blocked by shell hook."),
    ];
    for (body, message) in cases {
        let home = TestHome::new();
        let label = one_hook(&home, "pre_tool_call", &format!("#!/bin/sh\n{body}\n"), "");
        let out = fire(&home, "pre_tool_call", RM);
        assert_eq!(
            outcome(&out),
            format!("blocked by {label}: {message}"),
            "{body}"
        );
        home.expect_stderr_has(&out, "shell hook exited 2 (event=pre_tool_call command=");
    }
}

#[test]
fn exit_1_with_a_block_answer_still_blocks_and_exit_2_elsewhere_is_nothing() {
    let home = TestHome::new();
    let label = one_hook(
        &home,
        "pre_tool_call",
        "#!/bin/sh\necho '{\"action\":\"block\",\"message\":\"m\"}'\nexit 1\n",
        "",
    );
    assert_eq!(
        outcome(&fire(&home, "pre_tool_call", RM)),
        format!("blocked by {label}: m")
    );
    let home = TestHome::new();
    one_hook(&home, "pre_llm_call", "#!/bin/sh\nexit 2\n", "");
    assert_eq!(outcome(&fire(&home, "pre_llm_call", "{}")), "no context");
}

#[test]
fn fail_closed_turns_failures_into_blocks_naming_the_hook() {
    let cases = [
        ("#!/bin/sh\nexit 1\n", "exited 1"),
        ("#!/bin/sh\necho 'not json'\n", "stdout was not valid JSON"),
        ("#!/bin/sh\nsleep 5\n", "timed out after 1s"),
    ];
    for (body, reason) in cases {
        let home = TestHome::new();
        let script = home.script("hook.sh", body);
        home.config(&format!(
            "hooks:\n  pre_tool_call:\n    - {{command: {script}, timeout: 1, fail_closed: true}}\n"
        ));
        let out = fire(&home, "pre_tool_call", RM);
        assert_eq!(
            outcome(&out),
            format!(
                "blocked by shell_hook[pre_tool_call:{script}]: hook {script} failed closed: {reason}"
            ),
            "{body}"
        );
        // The same hook without fail_closed fails open.
        home.config(&format!(
            "hooks:\n  pre_tool_call:\n    - {{command: {script}, timeout: 1}}\n"
        ));
        assert_eq!(
            outcome(&fire(&home, "pre_tool_call", RM)),
            "allowed",
            "{body}"
        );
    }
}

#[test]
fn fail_closed_blocks_when_the_script_is_missing() {
    let home = TestHome::new();
    let missing = home.path().join("missing.sh").display().to_string();
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - {{command: {missing}, failClosed: true}}\n"
    ));
    let out = fire(&home, "pre_tool_call", RM);
    assert_eq!(
        outcome(&out),
        format!(
            "blocked by shell_hook[pre_tool_call:{missing}]: hook {missing} failed closed: command not found"
        )
    );
    home.expect_stderr_has(
        &out,
        &format!("shell hook failed (event=pre_tool_call command={missing}): command not found"),
    );
}

#[test]
fn spawn_errors_are_warnings_and_the_agent_continues() {
    let home = TestHome::new();
    let not_exec = home.path().join("plain.sh");
    std::fs::write(&not_exec, "#!/bin/sh\necho '{\"action\":\"block\"}'\n").unwrap();
    let not_exec = not_exec.display().to_string();
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {not_exec}\n    - command: \"echo 'unclosed\"\n    - command: /nonexistent/hook.sh\n"
    ));
    let out = fire(&home, "pre_tool_call", RM);
    assert_eq!(outcome(&out), "allowed");
    home.expect_stderr_has(
        &out,
        &format!(
            "shell hook failed (event=pre_tool_call command={not_exec}): command not executable"
        ),
    );
    home.expect_stderr_has(
        &out,
        "shell hook failed (event=pre_tool_call command=echo 'unclosed): command \"echo 'unclosed\" cannot be parsed: No closing quotation",
    );
    home.expect_stderr_has(
        &out,
        "shell hook failed (event=pre_tool_call command=/nonexistent/hook.sh): command not found",
    );
}

#[test]
fn modify_answers_rewrite_the_arguments_merged_in_registry_order() {
    let home = TestHome::new();
    let a = home.script("a.sh", "#!/bin/sh\necho '{\"action\": \"modify\", \"args\": {\"command\": \"ls\", \"timeout\": 5}}'\n");
    let b = home.script("b.sh", "#!/bin/sh\necho '{\"hookSpecificOutput\": {\"permissionDecision\": \"allow\", \"updatedInput\": {\"timeout\": 9}}}'\n");
    let c = home.script(
        "c.sh",
        "#!/bin/sh\necho '{\"decision\": \"modify\", \"tool_input\": {\"cwd\": \"/tmp\"}}'\n",
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {a}\n    - command: {b}\n    - command: {c}\n"
    ));
    let out = fire(&home, "pre_tool_call", RM);
    assert_eq!(
        outcome(&out),
        r#"allowed, arguments modified: {"command":"ls","timeout":9,"cwd":"/tmp"}"#
    );
}

// ----------------------------------------------------------------------------------------
// Matcher rules

#[test]
fn matchers_must_match_the_whole_tool_name() {
    let home = TestHome::new();
    let block = home.script(
        "block.sh",
        "#!/bin/sh\necho '{\"action\":\"block\",\"message\":\"hit\"}'\n",
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - {{command: {block}, matcher: 'terminal|file'}}\n    - {{command: {block} literal, matcher: 'a('}}\n"
    ));
    let tool = |name: &str| format!(r#"{{"tool_name": "{name}", "args": {{}}}}"#);
    assert!(outcome(&fire(&home, "pre_tool_call", &tool("terminal"))).ends_with(": hit"));
    assert!(outcome(&fire(&home, "pre_tool_call", &tool("file"))).ends_with(": hit"));
    assert_eq!(
        outcome(&fire(&home, "pre_tool_call", &tool("terminal2"))),
        "allowed"
    );
    // The invalid regex matches its own text literally.
    assert!(outcome(&fire(&home, "pre_tool_call", &tool("a("))).ends_with(": hit"));

    let out = home.hermes(&["hooks", "test", "pre_tool_call", "--for-tool", "terminal2"]);
    home.expect_stdout(&out, "No shell hooks configured for event: pre_tool_call\n(with matcher filter --for-tool=terminal2)\n");
}

// ----------------------------------------------------------------------------------------
// Process execution (issue point 3)

#[test]
fn a_grandchild_holding_stdout_is_killed_with_the_group_once_the_hook_exits() {
    let home = TestHome::new();
    let marker = home.path().join("grandchild-survived");
    let script = home.script(
        "slow.sh",
        &format!(
            "#!/bin/bash\n(sleep 3; touch {}) &\necho '{{\"action\":\"block\"}}'\n",
            marker.display()
        ),
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - {{command: {script}, timeout: 60}}\n"
    ));
    let out = fire(&home, "pre_tool_call", RM);
    // Decided on what it printed, once it exited; nothing timed out.
    assert!(
        outcome(&out).ends_with("Blocked by shell hook."),
        "{}",
        outcome(&out)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("timed out"), "{stderr}");
    std::thread::sleep(Duration::from_millis(3500));
    assert!(
        !marker.exists(),
        "the grandchild was not killed with the group"
    );
}

#[test]
fn a_printed_block_counts_when_a_background_child_keeps_stdout_open() {
    let home = TestHome::new();
    let script = home.script(
        "guard.sh",
        "#!/bin/bash\ncat >/dev/null\nsleep 600 &\necho '{\"action\": \"block\", \"message\": \"no deletes\"}'\nexit 0\n",
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - {{command: {script}, timeout: 60}}\n"
    ));
    let out = fire(&home, "pre_tool_call", RM);
    assert!(outcome(&out).contains("no deletes"), "{}", outcome(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("timed out"), "{stderr}");
}

#[test]
fn the_timeout_reports_in_hooks_test() {
    let home = TestHome::new();
    let script = home.script("slow.sh", "#!/bin/sh\nsleep 10\n");
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - {{command: {script}, timeout: 1}}\n"
    ));
    let started = Instant::now();
    let out = home.hermes(&["hooks", "test", "pre_tool_call"]);
    assert!(started.elapsed() < Duration::from_secs(8));
    home.expect_stdout(&out, "Firing 1 hook(s) for event 'pre_tool_call':\n\n  → $H/slow.sh\n      ✗ timed out after <S>s\n\n");
}

#[test]
fn a_50_mb_output_flood_is_capped_and_reported() {
    let home = TestHome::new();
    one_hook(
        &home,
        "pre_tool_call",
        "#!/bin/sh\nhead -c 52428800 /dev/zero | tr '\\000' 'a'\n",
        "",
    );
    let out = fire(&home, "pre_tool_call", RM);
    home.expect_code(&out, 0);
    assert_eq!(outcome(&out), "allowed");
    home.expect_stderr_has(
        &out,
        "shell hook stdout exceeded 1048576 bytes; dropped the remaining 51380224 bytes",
    );
    home.expect_stderr_has(
        &out,
        "shell hook stdout was not valid JSON (event=pre_tool_call): aaaa",
    );
}

#[test]
fn a_script_that_never_reads_stdin_still_answers() {
    let home = TestHome::new();
    let label = one_hook(
        &home,
        "pre_tool_call",
        "#!/bin/sh\necho '{\"action\":\"block\",\"message\":\"unread\"}'\n",
        "",
    );
    // A 1 MB payload cannot fit in the pipe: writing it meets a closed pipe.
    let big = format!(
        r#"{{"tool_name": "terminal", "args": {{"command": "{}"}}}}"#,
        "x".repeat(1 << 20)
    );
    let payload_file = home.path().join("big.json");
    std::fs::write(&payload_file, big).unwrap();
    let out = home.hermes(&[
        "hooks",
        "fire",
        "pre_tool_call",
        "--payload-file",
        &payload_file.display().to_string(),
        "--accept-hooks",
    ]);
    home.expect_code(&out, 0);
    assert_eq!(outcome(&out), format!("blocked by {label}: unread"));
}

#[test]
fn commands_are_split_into_words_without_a_shell() {
    let home = TestHome::new();
    let dir = home.path().join("dir with space");
    std::fs::create_dir(&dir).unwrap();
    let script = dir.join("args.py");
    std::fs::write(
        &script,
        "import json, sys\nprint(json.dumps({'context': '|'.join(sys.argv[1:])}))\n",
    )
    .unwrap();
    home.config(&format!(
        "hooks:\n  pre_llm_call:\n    - command: python3 \"{}\" a 'b c' '$HOME' '*' '#x'\n",
        script.display()
    ));
    assert_eq!(
        outcome(&fire(&home, "pre_llm_call", "{}")),
        "context: a|b c|$HOME|*|#x"
    );
}

// ----------------------------------------------------------------------------------------
// Concurrency and priority (issue point 5)

#[test]
fn hooks_of_one_event_run_concurrently_and_combine_in_config_order() {
    let home = TestHome::new();
    let slow = home.script(
        "slow.sh",
        "#!/bin/sh\nsleep 1\necho '{\"context\": \"slow\"}'\n",
    );
    let mid = home.script(
        "mid.sh",
        "#!/bin/sh\nsleep 1\necho '{\"context\": \"mid\"}'\n",
    );
    let fast = home.script("fast.sh", "#!/bin/sh\necho '{\"context\": \"fast\"}'\n");
    home.config(&format!("hooks:\n  pre_llm_call:\n    - command: {slow}\n    - command: {mid}\n    - command: {fast}\n"));
    let started = Instant::now();
    let out = fire(&home, "pre_llm_call", "{}");
    let took = started.elapsed();
    assert_eq!(outcome(&out), "context: slow");
    assert!(
        stdout(&out).contains("context: slow\n\nmid\n\nfast"),
        "{}",
        stdout(&out)
    );
    assert!(
        took < Duration::from_millis(1900),
        "two 1 s hooks took {took:?}: not concurrent"
    );
}

#[test]
fn a_lower_priority_group_finishes_before_the_next_starts() {
    let home = TestHome::new();
    let log = home.path().join("order.log");
    let late = home.script(
        "late.sh",
        &format!("#!/bin/sh\necho late >> {}\n", log.display()),
    );
    let early = home.script(
        "early.sh",
        &format!("#!/bin/sh\nsleep 0.5\necho early >> {}\n", log.display()),
    );
    home.config(&format!(
        "hooks:\n  post_tool_call:\n    - {{command: {late}, priority: 1}}\n    - {{command: {early}, priority: 0}}\n"
    ));
    fire(&home, "post_tool_call", "{}");
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "early\nlate\n");
}

// ----------------------------------------------------------------------------------------
// Consent (issue point 6)

#[test]
fn a_non_tty_run_refuses_unapproved_hooks_with_the_reference_warning() {
    let home = TestHome::new();
    let script = one_hook(
        &home,
        "pre_tool_call",
        "#!/bin/sh\necho '{\"action\":\"block\"}'\n",
        "",
    );
    let command = script
        .trim_start_matches("shell_hook[pre_tool_call:")
        .trim_end_matches(']')
        .to_string();
    let out = home.hermes(&["hooks", "fire", "pre_tool_call", "--payload", RM]);
    assert_eq!(outcome(&out), "allowed");
    home.expect_stderr_has(
        &out,
        &format!("shell hook for pre_tool_call ({command}) not allowlisted — skipped. Use --accept-hooks / HERMES_ACCEPT_HOOKS=1 / hooks_auto_accept: true, or approve at the TTY prompt next run."),
    );
    assert!(home.allowlist().approvals().is_empty());
}

#[test]
fn each_escape_hatch_records_the_approval() {
    type Setup<'a> = (&'a str, &'a str, &'a [(&'a str, &'a str)], &'a [&'a str]);
    let setups: [Setup<'_>; 3] = [
        ("flag", "", &[], &["--accept-hooks"]),
        ("env", "", &[("HERMES_ACCEPT_HOOKS", "yes")], &[]),
        ("config", "hooks_auto_accept: true\n", &[], &[]),
    ];
    for (name, extra, env, flags) in setups {
        let home = TestHome::new();
        one_hook(
            &home,
            "pre_tool_call",
            "#!/bin/sh\necho '{\"action\":\"block\"}'\n",
            extra,
        );
        let mut cmd = home.command(&["hooks", "fire", "pre_tool_call", "--payload", RM]);
        cmd.args(flags);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert!(
            outcome(&out).starts_with("blocked by"),
            "{name}: {}",
            stdout(&out)
        );
        let approvals = home.allowlist().approvals();
        assert_eq!(approvals.len(), 1, "{name}");
        assert!(
            matches!(approvals[0].script_sha256, Some(Some(_))),
            "{name}: the approval is pinned"
        );
        // The next run needs no escape hatch.
        let again = home.hermes(&["hooks", "fire", "pre_tool_call", "--payload", RM]);
        assert!(outcome(&again).starts_with("blocked by"), "{name}");
    }
}

#[test]
fn a_tty_run_prompts_with_the_reference_text_and_records_a_yes() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: util-linux `script` is not installed");
        return;
    }
    let home = TestHome::new();
    let label = one_hook(
        &home,
        "pre_tool_call",
        "#!/bin/sh\necho '{\"action\":\"block\",\"message\":\"tty\"}'\n",
        "",
    );
    let command = label
        .trim_start_matches("shell_hook[pre_tool_call:")
        .trim_end_matches(']')
        .to_string();
    let inner = format!(
        "{} --home {} hooks fire pre_tool_call --payload '{}'",
        env!("CARGO_BIN_EXE_hermes"),
        home.path().display(),
        RM
    );
    let run = |answer: &str| {
        let mut child = Command::new("script")
            .args(["-qec", &inner, "/dev/null"])
            .env("NO_COLOR", "1")
            .env_remove("HERMES_ACCEPT_HOOKS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(answer.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = run("n\n");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    let prompt = format!(
        "\n⚠ Hermes is about to register a shell hook that will run a\n  command on your behalf.\n\n    Event:   pre_tool_call\n    Command: {command}\n\n  Commands run with your full user credentials.  Only approve\n  commands you trust.\nAllow this hook to run? [y/N]: "
    );
    assert!(text.contains(&prompt), "{text}");
    assert!(text.contains("not allowlisted — skipped"), "{text}");
    assert!(home.allowlist().approvals().is_empty());

    let out = run("y\n");
    let text = String::from_utf8_lossy(&out.stdout).replace("\r\n", "\n");
    assert!(
        text.contains(&format!("Outcome: blocked by {label}: tty")),
        "{text}"
    );
    assert_eq!(home.allowlist().approvals().len(), 1);
}

#[test]
fn an_edited_script_is_not_run_until_approved_again() {
    let home = TestHome::new();
    let script = home.script(
        "guard.sh",
        "#!/bin/sh\necho '{\"action\":\"block\",\"message\":\"v1\"}'\n",
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {script}\n"
    ));
    let label = format!("shell_hook[pre_tool_call:{script}]");
    assert_eq!(
        outcome(&fire(&home, "pre_tool_call", RM)),
        format!("blocked by {label}: v1")
    );

    home.script(
        "guard.sh",
        "#!/bin/sh\necho '{\"action\":\"block\",\"message\":\"v2\"}'\n",
    );
    // Even --accept-hooks does not re-approve changed content.
    let out = fire(&home, "pre_tool_call", RM);
    assert_eq!(outcome(&out), "allowed");
    home.expect_stderr_has(
        &out,
        &format!("shell hook for pre_tool_call ({script}) not run: its script {script} changed since it was approved. Review the change, then run `hermes hooks allow {script} --event pre_tool_call` to approve it again."),
    );
    let doctor = home.hermes(&["hooks", "doctor"]);
    assert!(
        stdout(&doctor).contains(
            "✗ script content changed since approval — hook will NOT fire until re-approved"
        ),
        "{}",
        stdout(&doctor)
    );

    let allow = home.hermes(&["hooks", "allow", &script, "--event", "pre_tool_call"]);
    home.expect_code(&allow, 0);
    assert_eq!(
        outcome(&fire(&home, "pre_tool_call", RM)),
        format!("blocked by {label}: v2")
    );
}

#[test]
fn an_edited_fail_closed_gate_keeps_blocking() {
    let home = TestHome::new();
    let script = home.script("guard.sh", "#!/bin/sh\nexit 0\n");
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - {{command: {script}, fail_closed: true}}\n"
    ));
    assert_eq!(outcome(&fire(&home, "pre_tool_call", RM)), "allowed");
    home.script("guard.sh", "#!/bin/sh\nexit 0 # edited\n");
    assert_eq!(
        outcome(&fire(&home, "pre_tool_call", RM)),
        format!(
            "blocked by shell_hook[pre_tool_call:{script}]: hook {script} failed closed: script changed since approval"
        )
    );
}

#[test]
fn a_script_edited_after_registration_is_refused_at_run_time() {
    let home = TestHome::new();
    let script = home.script(
        "guard.sh",
        "#!/bin/sh\necho '{\"action\":\"block\",\"message\":\"v1\"}'\n",
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {script}\n"
    ));
    let h = Home::at(home.path());
    let (config, _) = h.load_config();
    let mut registry = Registry::new();
    let report = shell::register_from_config(&h, &config.hooks, Consent::Accept, &mut registry);
    assert_eq!(report.registered.len(), 1);
    let event = hermes_hooks_abi::hooks::payload::PreToolCallEvent {
        tool_name: "terminal",
        args: "{}",
        ..Default::default()
    };
    assert_eq!(
        registry.pre_tool_call(&event).blocked.map(|b| b.message),
        Some("v1".into())
    );
    home.script(
        "guard.sh",
        "#!/bin/sh\necho '{\"action\":\"block\",\"message\":\"v2\"}'\n",
    );
    assert_eq!(registry.pre_tool_call(&event).blocked, None);
    // Registering again is a no-op: the hook is already in the registry.
    let again = shell::register_from_config(&h, &config.hooks, Consent::Accept, &mut registry);
    assert!(again.registered.is_empty());
    assert_eq!(registry.entries("pre_tool_call").len(), 1);
}

#[test]
fn thirty_two_concurrent_approvers_lose_no_entry() {
    // Threads.
    let home = TestHome::new();
    let list = Arc::new(home.allowlist());
    std::thread::scope(|s| {
        for i in 0..32 {
            let list = list.clone();
            s.spawn(move || {
                list.approve("pre_tool_call", &format!("thread-{i}"))
                    .unwrap()
            });
        }
    });
    assert_eq!(list.approvals().len(), 32);

    // Processes.
    let children: Vec<_> = (0..32)
        .map(|i| {
            home.command(&[
                "hooks",
                "allow",
                &format!("process-{i}"),
                "--event",
                "post_tool_call",
            ])
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    let approvals = list.approvals();
    assert_eq!(approvals.len(), 64);
    for i in 0..32 {
        assert!(
            approvals
                .iter()
                .any(|a| a.command == format!("process-{i}")),
            "process-{i} lost"
        );
    }
    let mode = std::fs::metadata(list.path()).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn a_corrupt_allowlist_counts_as_empty_with_a_warning() {
    let home = TestHome::new();
    one_hook(&home, "pre_tool_call", "#!/bin/sh\n", "");
    std::fs::write(home.allowlist().path(), "{oops").unwrap();
    let out = home.hermes(&["hooks", "list"]);
    home.expect_stderr_has(&out, "shell-hooks-allowlist.json: not valid JSON (");
    home.expect_stderr_has(&out, "treating the shell hook allowlist as empty");
    assert!(stdout(&out).contains("✗ not allowlisted"));
}

// ----------------------------------------------------------------------------------------
// CLI outputs (issue point 7)

#[test]
fn hooks_without_a_subcommand_prints_the_usage() {
    let home = TestHome::new();
    let out = home.hermes(&["hooks"]);
    home.expect_code(&out, 0);
    home.expect_stdout(
        &out,
        "Usage: hermes hooks {list|test|revoke|doctor}\nRun 'hermes hooks --help' for details.\n",
    );
    let out = home.hermes(&["hooks", "frobnicate"]);
    home.expect_code(&out, 2);
}

#[test]
fn list_without_hooks_names_the_real_config_path() {
    let home = TestHome::new();
    for alias in ["list", "ls"] {
        let out = home.hermes(&["hooks", alias]);
        home.expect_stdout(
            &out,
            "No shell hooks configured in $H/config.yaml.\nSee `hermes hooks --help` or\n    website/docs/user-guide/features/hooks.md\nfor the config schema and worked examples.\n",
        );
    }
}

#[test]
fn list_shows_approval_times_and_drift() {
    let home = TestHome::new();
    let guard = home.script("guard.sh", "#!/bin/sh\n");
    let ctx = home.script("ctx.sh", "#!/bin/sh\n");
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - {{command: {guard}, matcher: \"terminal|it's\", timeout: 5}}\n  pre_llm_call:\n    - command: {ctx}\n"
    ));
    home.hermes(&["hooks", "allow", &guard]);
    // Make the script newer than at approval, with other content.
    std::thread::sleep(Duration::from_millis(20));
    home.script("guard.sh", "#!/bin/sh\n# edited\n");
    let out = home.hermes(&["hooks", "list"]);
    home.expect_stdout(
        &out,
        "Configured shell hooks (2 total):

  [pre_llm_call]
    - $H/ctx.sh (timeout=60s, ✗ not allowlisted)

  [pre_tool_call]
    - $H/guard.sh matcher=\"terminal|it's\" (timeout=5s, ✓ allowed)
      approved_at: <TS>
      ⚠ script modified since approval (was <TS>, now <TS>) — run `hermes hooks doctor` to re-validate
      ✗ script content changed since approval — it will not run until re-approved: hermes hooks allow $H/guard.sh --event pre_tool_call

",
    );
    let json: serde_json::Value =
        serde_json::from_slice(&home.hermes(&["hooks", "list", "--json"]).stdout).unwrap();
    assert_eq!(json["hooks"][0]["event"], "pre_tool_call");
    assert_eq!(json["hooks"][0]["allowlisted"], true);
    assert_eq!(json["hooks"][0]["modified_since_approval"], true);
    assert_eq!(json["hooks"][0]["content_changed"], true);
    assert_eq!(json["hooks"][1]["allowlisted"], false);
}

#[test]
fn test_prints_each_run_and_its_parsed_answer() {
    let home = TestHome::new();
    let block = home.script("block.sh", "#!/bin/sh\ncat >/dev/null\necho '{\"decision\": \"block\", \"reason\": \"nö\"}'\necho warn >&2\nexit 1\n");
    let quiet = home.script("quiet.sh", "#!/bin/sh\n");
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {block}\n    - {{command: {quiet}, matcher: file}}\n    - command: /nonexistent/x.sh\n"
    ));
    let out = home.hermes(&["hooks", "test", "pre_tool_call"]);
    home.expect_stdout(
        &out,
        "Firing 3 hook(s) for event 'pre_tool_call':

  → $H/block.sh
      exit=1  elapsed=<S>s
      stdout: {\"decision\": \"block\", \"reason\": \"nö\"}
      stderr: warn
      parsed (Hermes wire shape): {\"action\": \"block\", \"message\": \"n\\u00f6\"}

  → $H/quiet.sh
      exit=0  elapsed=<S>s
      parsed: <none — hook contributed nothing to the dispatcher>

  → /nonexistent/x.sh
      ✗ error: command not found

",
    );
    // --for-tool keeps matching tool hooks only, and sets tool_name.
    let out = home.hermes(&["hooks", "test", "pre_tool_call", "--for-tool", "file"]);
    assert!(
        stdout(&out).starts_with("Firing 3 hook(s)"),
        "the hooks without a matcher stay"
    );
    let out = home.hermes(&["hooks", "test", "pre_tool_call", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["hooks"][0]["parsed"],
        serde_json::json!({"action": "block", "message": "nö"})
    );
    assert_eq!(json["hooks"][0]["returncode"], 1);
}

#[test]
fn test_reports_unknown_events_and_payload_file_problems() {
    let home = TestHome::new();
    let ctx = home.script("ctx.sh", "#!/bin/sh\ncat\n");
    home.config(&format!("hooks:\n  pre_llm_call:\n    - command: {ctx}\n"));
    let valid = hermes_hooks_abi::hooks::names_sorted().join(", ");
    let out = home.hermes(&["hooks", "test", "pre_llm_cal"]);
    home.expect_code(&out, 0);
    home.expect_stdout(
        &out,
        &format!("Unknown event: 'pre_llm_cal'\nValid events: {valid}\n"),
    );

    let out = home.hermes(&[
        "hooks",
        "test",
        "pre_llm_call",
        "--payload-file",
        "missing.json",
    ]);
    home.expect_stdout(
        &out,
        "Error reading payload file: [Errno 2] No such file or directory: 'missing.json'\n",
    );

    std::fs::write(home.path().join("list.json"), "[1]").unwrap();
    let out = home.hermes(&[
        "hooks",
        "test",
        "pre_llm_call",
        "--payload-file",
        "list.json",
    ]);
    assert!(stdout(&out).starts_with("Warning: list.json is not a JSON object; ignoring\nFiring 1 hook(s) for event 'pre_llm_call':\n"), "{}", stdout(&out));

    std::fs::write(
        home.path().join("ctx.json"),
        r#"{"user_message": "x", "session_id": "custom"}"#,
    )
    .unwrap();
    let out = home.hermes(&[
        "hooks",
        "test",
        "pre_llm_call",
        "--payload-file",
        "ctx.json",
    ]);
    assert!(
        stdout(&out).contains(r#""session_id": "custom""#),
        "{}",
        stdout(&out)
    );

    let out = home.hermes(&["hooks", "test", "on_session_start"]);
    home.expect_stdout(
        &out,
        "No shell hooks configured for event: on_session_start\n",
    );
}

#[test]
fn revoke_and_its_aliases_report_what_they_removed() {
    let home = TestHome::new();
    let out = home.hermes(&["hooks", "revoke", "./x.sh"]);
    home.expect_stdout(&out, "No allowlist entry found for command: ./x.sh\n");
    home.hermes(&["hooks", "allow", "./x.sh", "--event", "pre_tool_call"]);
    home.hermes(&["hooks", "allow", "./x.sh", "--event", "post_tool_call"]);
    let out = home.hermes(&["hooks", "rm", "./x.sh"]);
    home.expect_stdout(
        &out,
        "Removed 2 allowlist entry/entries for: ./x.sh\nNote: currently running CLI / gateway processes keep their already-registered callbacks until they restart.\n",
    );
    let out = home.hermes(&["hooks", "remove", "./x.sh", "--json"]);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        serde_json::json!({"command": "./x.sh", "removed": 0})
    );
}

#[test]
fn doctor_checks_every_hook() {
    let home = TestHome::new();
    let out = home.hermes(&["hooks", "doctor"]);
    home.expect_stdout(&out, "No shell hooks configured — nothing to check.\n");

    let good = home.script("good.sh", "#!/bin/sh\ncat >/dev/null\necho '{}'\n");
    let quiet = home.script("quiet.sh", "#!/bin/sh\n");
    let noisy = home.script("noisy.sh", "#!/bin/sh\necho 'hello there'\n");
    let slow = home.script("slow.sh", "#!/bin/sh\nsleep 5\n");
    let unapproved = home.script(
        "new.sh",
        "#!/bin/sh\necho must-not-run > \"$(dirname \"$0\")/ran\"\n",
    );
    home.config(&format!(
        "hooks:
  pre_tool_call:
    - command: {good}
    - command: {quiet}
    - command: {noisy}
    - {{command: {slow}, timeout: 1}}
    - command: {unapproved}
    - command: /nonexistent/gone.sh
"
    ));
    for cmd in [&good, &quiet, &noisy, &slow] {
        home.hermes(&["hooks", "allow", cmd]);
    }
    home.hermes(&[
        "hooks",
        "allow",
        "/nonexistent/gone.sh",
        "--event",
        "pre_tool_call",
    ]);
    let out = home.hermes(&["hooks", "doctor"]);
    home.expect_stdout(
        &out,
        "Checking 6 configured shell hook(s)...

  [pre_tool_call] $H/good.sh
      ✓ script exists and is executable
      ✓ allowlisted (approved <TS>)
      ✓ script unchanged since approval
      ✓ script content matches the approved sha256
      ✓ produced valid JSON on synthetic payload (exit=0, <S>s)

  [pre_tool_call] $H/quiet.sh
      ✓ script exists and is executable
      ✓ allowlisted (approved <TS>)
      ✓ script unchanged since approval
      ✓ script content matches the approved sha256
      ✓ ran clean with empty stdout (exit=0, <S>s) — hook is observer-only

  [pre_tool_call] $H/noisy.sh
      ✓ script exists and is executable
      ✓ allowlisted (approved <TS>)
      ✓ script unchanged since approval
      ✓ script content matches the approved sha256
      ✗ stdout was not valid JSON (exit=0, <S>s): hello there

  [pre_tool_call] $H/slow.sh
      ✓ script exists and is executable
      ✓ allowlisted (approved <TS>)
      ✓ script unchanged since approval
      ✓ script content matches the approved sha256
      ✗ timed out after <S>s on synthetic payload (timeout=1s)

  [pre_tool_call] $H/new.sh
      ✓ script exists and is executable
      ✗ not allowlisted — hook will NOT fire at runtime (run with --accept-hooks once, or confirm at the TTY prompt)
      ℹ skipped JSON smoke test — not allowlisted yet. Approve the hook first (via TTY prompt or --accept-hooks), then re-run `hermes hooks doctor`.

  [pre_tool_call] /nonexistent/gone.sh
      ✗ script missing or not executable (chmod +x the file, or fix the path)
      ✓ allowlisted (approved <TS>)

4 issue(s) found.  Fix before relying on these hooks.
",
    );
    assert!(
        !home.path().join("ran").exists(),
        "doctor ran an unapproved script"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&home.hermes(&["hooks", "doctor", "--json"]).stdout).unwrap();
    assert_eq!(json["problems"], 4);
}

#[test]
fn doctor_reports_healthy_hooks() {
    let home = TestHome::new();
    let good = home.script("good.sh", "#!/bin/sh\necho '[1]'\n");
    home.config(&format!(
        "hooks:\n  on_session_start:\n    - command: bash {good}\n"
    ));
    home.hermes(&["hooks", "allow", &format!("bash {good}")]);
    let out = home.hermes(&["hooks", "doctor"]);
    assert!(
        stdout(&out).contains("      ✓ produced valid JSON on synthetic payload (exit=0, "),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).ends_with("\nAll shell hooks look healthy.\n"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn allow_approves_configured_commands_headlessly() {
    let home = TestHome::new();
    let guard = home.script("guard.sh", "#!/bin/sh\n");
    home.config(&format!("hooks:\n  pre_tool_call:\n    - command: {guard}\n  post_tool_call:\n    - command: {guard}\n"));
    let out = home.hermes(&["hooks", "allow", &guard]);
    home.expect_code(&out, 0);
    home.expect_stdout(
        &out,
        "Approved 2 entry/entries for: $H/guard.sh\n  [pre_tool_call]\n  [post_tool_call]\n",
    );
    let out = home.hermes(&["hooks", "approve", &guard]);
    home.expect_stdout(
        &out,
        "[pre_tool_call] $H/guard.sh is already allowlisted.\n[post_tool_call] $H/guard.sh is already allowlisted.\nNothing to do.\n",
    );
    let out = home.hermes(&["hooks", "allow", "./other.sh"]);
    home.expect_code(&out, 1);
    home.expect_stdout(
        &out,
        "No hook in $H/config.yaml uses the command: ./other.sh\nCheck the spelling (it must match the config exactly), or pass --event <event> to approve it anyway.\n",
    );
    let out = home.hermes(&["hooks", "allow", "./other.sh", "--event", "pre_tool_cal"]);
    home.expect_code(&out, 1);
    assert!(stdout(&out).starts_with("Unknown event: 'pre_tool_cal'\nValid events: "));
    let out = home.hermes(&[
        "hooks",
        "allow",
        "./other.sh",
        "--event",
        "pre_tool_call",
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["approved"], serde_json::json!(["pre_tool_call"]));
}

#[test]
fn profiles_have_their_own_allowlist() {
    let home = TestHome::new();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
    cmd.args([
        "-p",
        "work",
        "hooks",
        "allow",
        "./x.sh",
        "--event",
        "pre_tool_call",
    ]);
    cmd.env("HOME", home.path())
        .env_remove("HERMES_HOME")
        .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    assert!(out.status.success());
    let list = Allowlist::new(&Home::at(home.path().join(".hermes/profiles/work")));
    assert_eq!(list.approvals().len(), 1);
}

#[test]
fn an_approval_that_cannot_be_saved_still_registers_for_this_run() {
    let dir = tempfile::tempdir().unwrap();
    // The home's parent is a regular file, so neither the home nor the allowlist can exist.
    std::fs::write(dir.path().join("file"), "").unwrap();
    let home = Home::at(dir.path().join("file").join("home"));
    let config = hermes_host::config::Config::parse(
        r#"hooks:
  pre_llm_call:
    - command: "echo '{\"context\": \"hi\"}'"
"#,
    )
    .unwrap();
    let mut registry = Registry::new();
    let report = shell::register_from_config(&home, &config.hooks, Consent::Accept, &mut registry);
    assert_eq!(report.registered.len(), 1);
    let persist = report
        .warnings
        .iter()
        .find(|w| w.starts_with("Failed to persist shell hook allowlist to "));
    let warning = persist.unwrap_or_else(|| panic!("{:?}", report.warnings));
    assert!(
        warning.contains(": [Errno 20] Not a directory: '"),
        "{warning}"
    );
    assert!(
        warning.ends_with("The approval is in-memory for this run, but the next startup will re-prompt (or skip registration on non-TTY runs without --accept-hooks / HERMES_ACCEPT_HOOKS)."),
        "{warning}"
    );
    assert_eq!(
        registry.pre_llm_call(&Default::default()),
        Some("hi".into())
    );
}

#[test]
fn the_prompt_is_asked_in_process_through_an_injected_terminal() {
    let home = TestHome::new();
    let script = home.script("ctx.sh", "#!/bin/sh\necho '{\"context\": \"approved\"}'\n");
    home.config(&format!(
        "hooks:\n  pre_llm_call:\n    - command: {script}\n"
    ));
    let h = Home::at(home.path());
    let (config, _) = h.load_config();
    let mut screen = Vec::new();
    let mut prompt = shell::consent::TextPrompt::new(&b"yes\n"[..], &mut screen);
    let mut registry = Registry::new();
    let report =
        shell::register_from_config(&h, &config.hooks, Consent::Ask(&mut prompt), &mut registry);
    assert_eq!(report.registered.len(), 1);
    let screen = String::from_utf8(screen).unwrap();
    assert_eq!(
        screen,
        format!(
            "{}{}",
            shell::consent::prompt_text("pre_llm_call", &script),
            shell::consent::PROMPT_QUESTION
        )
    );
    assert_eq!(home.allowlist().approvals().len(), 1);
    assert_eq!(
        registry.pre_llm_call(&Default::default()),
        Some("approved".into())
    );
}

// ----------------------------------------------------------------------------------------
// Claude-Code-format hooks (`format: claude`) beyond the corpus of published-style
// scripts, which runs in tests/claude_corpus.rs.

/// One `format: claude` hook on `event` running `python3 <script>`; `matcher` optional.
fn claude_hook(home: &TestHome, event: &str, matcher: Option<&str>, name: &str, body: &str) {
    let script = home.script(name, &format!("#!/usr/bin/env python3\n{body}"));
    let matcher = matcher.map_or(String::new(), |m| format!("      matcher: '{m}'\n"));
    home.config(&format!(
        "hooks:\n  {event}:\n    - command: {script}\n      format: claude\n{matcher}"
    ));
}

#[test]
fn hooks_test_takes_a_claude_shaped_payload_file_and_rejects_unknown_keys() {
    let home = TestHome::new();
    claude_hook(
        &home,
        "pre_tool_call",
        Some("Bash"),
        "validate_bash.py",
        r#"import json, sys
data = json.load(sys.stdin)
if "rm -rf" in data["tool_input"]["command"]:
    print("no rm -rf", file=sys.stderr)
    sys.exit(2)
"#,
    );
    let claude = home.path().join("claude.json");
    std::fs::write(&claude, r#"{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf /tmp/x"}}"#).unwrap();
    let out = home.hermes(&[
        "hooks",
        "test",
        "pre_tool_call",
        "--payload-file",
        claude.to_str().unwrap(),
    ]);
    assert!(stdout(&out).contains("no rm -rf"), "{}", stdout(&out));
    let typo = home.path().join("typo.json");
    std::fs::write(&typo, r#"{"tool_nmae": "terminal"}"#).unwrap();
    let out = home.hermes(&[
        "hooks",
        "test",
        "pre_tool_call",
        "--payload-file",
        typo.to_str().unwrap(),
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("unknown top-level key(s) tool_nmae") && text.contains("tool_input"),
        "{text}"
    );
}

#[test]
fn hooks_import_claude_adds_entries_keeps_the_rest_and_approves_nothing() {
    let home = TestHome::new();
    let validator = home.script(
        "validate.py",
        "#!/usr/bin/env python3\nimport json, sys\nif 'rm -rf' in json.load(sys.stdin)['tool_input']['command']:\n    print('no rm -rf', file=sys.stderr)\n    sys.exit(2)\n",
    );
    let settings = home.path().join("settings.json");
    std::fs::write(
        &settings,
        serde_json::json!({"hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": validator, "timeout": 20}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "notify-send hi"}]}]
        }})
        .to_string(),
    )
    .unwrap();
    let original = "# my config\nplugins:\n  enabled: []  # none yet\n";
    home.config(original);

    // Not a terminal and no --yes: shown, not written.
    let out = home.hermes(&["hooks", "import", "claude", settings.to_str().unwrap()]);
    home.expect_code(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains(
            "not imported: Notification (1 hook(s)): Hermes has no event for Claude's notifications"
        ),
        "{text}"
    );
    assert!(
        text.contains("+     format: claude") || text.contains("+       format: claude"),
        "{text}"
    );
    assert!(text.contains("run again with --yes"), "{text}");
    assert_eq!(
        std::fs::read_to_string(home.path().join("config.yaml")).unwrap(),
        original
    );

    let out = home.hermes(&[
        "hooks",
        "import",
        "claude",
        settings.to_str().unwrap(),
        "--yes",
    ]);
    home.expect_code(&out, 0);
    let written = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    assert!(
        written.starts_with(original),
        "the old text stays as it was:\n{written}"
    );
    let list = stdout(&home.hermes(&["hooks", "list"]));
    assert!(
        list.contains(&format!(
            "matcher='Bash' (timeout=20s, format=claude, through {}, ✗ not allowlisted)",
            hermes_host::shell::claude::shell()
        )),
        "{list}"
    );
    // Importing again adds nothing.
    let again = stdout(&home.hermes(&[
        "hooks",
        "import",
        "claude",
        settings.to_str().unwrap(),
        "--yes",
    ]));
    assert!(again.contains("Nothing to add"), "{again}");
    // Once approved, the imported hook runs unchanged.
    assert!(outcome(&fire(&home, "pre_tool_call", RM)).ends_with(": no rm -rf"));
}

#[test]
fn hooks_import_keeps_post_tool_use_failure_apart_and_says_everything_it_does_not_do_as_claude() {
    let home = TestHome::new();
    let settings = home.path().join("settings.json");
    std::fs::write(
        &settings,
        serde_json::json!({"hooks": {
            "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "/opt/fmt.sh", "async": true}]}],
            "Stop": [{"hooks": [{"type": "command", "command": "/opt/e.sh", "asyncRewake": true}]}],
            "PostToolUseFailure": [{"hooks": [{"type": "command", "command": "/opt/fmt.sh"}]}],
            "PreCompact": [{"hooks": [{"type": "command", "command": "/opt/a.sh"}, {"type": "command", "command": "/opt/b.sh"}]}],
            "SubagentStart": [{"hooks": [{"type": "command", "command": "/opt/c.sh"}]}],
            "Whatever": [{"hooks": [{"type": "command", "command": "/opt/d.sh"}]}]
        }})
        .to_string(),
    )
    .unwrap();
    let out = home.hermes(&[
        "hooks",
        "import",
        "claude",
        settings.to_str().unwrap(),
        "--yes",
    ]);
    home.expect_code(&out, 0);
    let text = stdout(&out);
    for needle in [
        "not imported: PreCompact (2 hook(s)): Hermes does not compact the conversation",
        "not imported: Whatever (1 hook(s)): not an event Hermes maps",
        "note: Stop \"/opt/e.sh\" has asyncRewake: true; it runs in the background as async: true",
    ] {
        assert!(text.contains(needle), "{needle:?} missing:\n{text}");
    }
    assert!(!text.contains("not imported: PostToolUseFailure"), "{text}");
    // SubagentStart has a Hermes event since interface 1.3.
    assert!(!text.contains("not imported: SubagentStart"), "{text}");
    // The same command twice, apart: one for successes, one for failures.
    let written = std::fs::read_to_string(home.path().join("config.yaml")).unwrap();
    let (config, _) = Home::at(home.path()).load_config();
    let specs = shell::config::parse(&config.hooks).specs;
    assert_eq!(specs.len(), 4, "{written}");
    // async hooks stay async: the PostToolUse one and the Stop one (asyncRewake).
    let background: Vec<&str> = specs
        .iter()
        .filter(|s| s.background)
        .map(|s| s.event.as_str())
        .collect();
    assert_eq!(background, ["post_tool_call", "post_llm_call"], "{written}");
    assert!(written.contains("subagent_start:"), "{written}");
    assert!(
        written.contains("claude_event: PostToolUseFailure"),
        "{written}"
    );
    assert_eq!(
        specs.iter().filter(|s| s.failure_only).count(),
        1,
        "{written}"
    );
    assert_eq!(
        specs.iter().filter(|s| s.command == "/opt/fmt.sh").count(),
        2,
        "{written}"
    );
}

#[test]
fn claude_session_start_context_reaches_that_sessions_first_model_call_only() {
    use hermes_hooks_abi::core::Field;
    let home = TestHome::new();
    // In the style of published SessionStart hooks: plain stdout (the git branch, say) and
    // the JSON form, one of each.
    let plain = home.script(
        "branch.py",
        "#!/usr/bin/env python3\nimport json, sys\nd = json.load(sys.stdin)\nassert d['hook_event_name'] == 'SessionStart'\nprint('branch: main for ' + d['session_id'])\n",
    );
    let json_form = home.script(
        "ctx.py",
        "#!/usr/bin/env python3\nimport json\nprint(json.dumps({'hookSpecificOutput': {'hookEventName': 'SessionStart', 'additionalContext': 'open issues: 3'}}))\n",
    );
    home.config(&format!(
        "hooks:\n  on_session_start:\n    - command: {plain}\n      format: claude\n    - command: {json_form}\n      format: claude\n"
    ));
    let h = Home::at(home.path());
    let (config, _) = h.load_config();
    let mut registry = Registry::new();
    let report = shell::register_from_config(&h, &config.hooks, Consent::Accept, &mut registry);
    assert_eq!(report.registered.len(), 2, "{:?}", report.warnings);
    // Registering again adds neither the hooks nor the carrier twice.
    shell::register_from_config(&h, &config.hooks, Consent::Accept, &mut registry);
    assert_eq!(registry.entries("pre_llm_call").len(), 1);

    let start = |session: &str| {
        registry.fire("on_session_start", &[Field::str("session_id", session)]);
    };
    let first_call =
        |session: &str| registry.fire("pre_llm_call", &[Field::str("session_id", session)]);
    start("sess-a");
    // Another session's first call gets nothing of sess-a's.
    assert_eq!(
        first_call("sess-b"),
        hermes_host::registry::Outcome::Context(None)
    );
    assert_eq!(
        first_call("sess-a"),
        hermes_host::registry::Outcome::Context(Some(
            "branch: main for sess-a\n\nopen issues: 3".into()
        ))
    );
    // Handed over once: the next turn's call has no stale copy.
    assert_eq!(
        first_call("sess-a"),
        hermes_host::registry::Outcome::Context(None)
    );
}

#[test]
fn a_shell_hook_waited_on_in_a_run_pool_lets_the_next_job_use_the_cpu() {
    use hermes_host::cpu_slots::RunPool;
    let home = TestHome::new();
    // The hook blocks until the second job has run: it can only finish if its wait does
    // not count as running (one place, and patience far longer than the test).
    let flag = home.path().join("second-ran");
    let script = home.script(
        "wait.sh",
        &format!(
            "#!/bin/sh\ncat >/dev/null\ni=0\nwhile [ ! -e '{}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n[ -e '{}' ] && echo '{{}}' || echo '{{\"action\": \"block\", \"message\": \"gave up\"}}'\n",
            flag.display(),
            flag.display()
        ),
    );
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {script}\n      timeout: 60\n"
    ));
    let h = Home::at(home.path());
    let (config, _) = h.load_config();
    let mut registry = Registry::new();
    let report = shell::register_from_config(&h, &config.hooks, Consent::Accept, &mut registry);
    assert_eq!(report.registered.len(), 1);
    let registry = Arc::new(registry);
    let pool = RunPool::new("test-turns", 1, 4, Duration::from_secs(600));
    let (done, finished) = std::sync::mpsc::channel();
    {
        let (registry, done) = (registry.clone(), done.clone());
        pool.spawn(move || {
            let event = hermes_hooks_abi::hooks::payload::PreToolCallEvent {
                tool_name: "terminal",
                args: "{}",
                ..Default::default()
            };
            let blocked = registry.pre_tool_call(&event).blocked.is_some();
            done.send(if blocked { "hook gave up" } else { "hook" })
                .unwrap();
        });
    }
    let second = flag.clone();
    pool.spawn(move || {
        std::fs::write(&second, "").unwrap();
        done.send("second").unwrap();
    });
    let order: Vec<&str> = finished.iter().take(2).collect();
    assert_eq!(order, vec!["second", "hook"]);
}

#[test]
fn loading_reads_the_allowlist_once_however_many_hooks() {
    let home = TestHome::new();
    let mut entries = String::new();
    for (i, event) in [
        "pre_tool_call",
        "post_tool_call",
        "pre_llm_call",
        "on_session_start",
    ]
    .iter()
    .enumerate()
    {
        let script = home.script(&format!("h{i}.sh"), "#!/bin/sh\ncat >/dev/null\n");
        entries.push_str(&format!("  {event}:\n    - command: {script}\n"));
        home.allowlist().approve(event, &script).unwrap();
    }
    home.config(&format!("hooks:\n{entries}"));
    // The allowlist becomes a FIFO that is written once: a second read would wait for a
    // writer that never comes, and the load would not finish.
    let path = home.path().join("shell-hooks-allowlist.json");
    let content = std::fs::read(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
    let writer = std::thread::spawn(move || {
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &content))
    });
    let script = home.path().join("s.yaml");
    std::fs::write(
        &script,
        "turns:\n  - user: hi\n    steps:\n      - final: ok\n",
    )
    .unwrap();
    let mut child = home
        .command(&["run", script.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = child.wait_with_output().unwrap();
    assert!(
        status.is_some_and(|s| s.success()),
        "the load waited on a second read of the allowlist: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    writer.join().unwrap().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("not allowlisted"), "{stderr}");
}

#[test]
fn a_corrupt_allowlist_is_kept_every_time_and_its_readable_approvals_carried_over() {
    let home = TestHome::new();
    let allowlist = home.allowlist();
    let mut scripts = Vec::new();
    for i in 0..3 {
        let script = home.script(&format!("h{i}.sh"), "#!/bin/sh\ncat >/dev/null\n");
        allowlist.approve("pre_tool_call", &script).unwrap();
        scripts.push(script);
    }
    let path = allowlist.path().to_path_buf();
    // Cut inside the third entry, and an orphan temporary file a killed writer left.
    let text = std::fs::read_to_string(&path).unwrap();
    let cut = text.rfind("\"command\"").unwrap();
    std::fs::write(&path, &text[..cut]).unwrap();
    let orphan = path.with_file_name("shell-hooks-allowlist.json.4242.0.tmp");
    std::fs::write(&orphan, "{").unwrap();
    let fresh = home.script("fresh.sh", "#!/bin/sh\ncat >/dev/null\n");
    let out = home.hermes(&["hooks", "allow", &fresh, "--event", "pre_tool_call"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("2 approval(s) read from it were kept, 1 could not be read and are lost"),
        "{stderr}"
    );
    let commands: Vec<String> = allowlist
        .approvals()
        .into_iter()
        .map(|a| a.command)
        .collect();
    assert!(
        commands.contains(&scripts[0]) && commands.contains(&scripts[1]),
        "{commands:?}"
    );
    assert!(
        commands.contains(&fresh) && !commands.contains(&scripts[2]),
        "{commands:?}"
    );
    assert!(!orphan.exists(), "the orphan temporary file was removed");
    // A second corruption is kept beside the first, not over it.
    std::fs::write(&path, "{oops").unwrap();
    let again = home.script("again.sh", "#!/bin/sh\ncat >/dev/null\n");
    std::thread::sleep(Duration::from_millis(5));
    let out = home.hermes(&["hooks", "allow", &again, "--event", "pre_tool_call"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let copies: Vec<String> = std::fs::read_dir(home.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("shell-hooks-allowlist.json.corrupt-"))
        .collect();
    assert_eq!(copies.len(), 2, "{copies:?}");
}

/// `async: true`, as Claude Code runs it: the hook runs in the background, so it cannot
/// block (an async guard's exit 2 lets the call run) and the agent does not wait for it
/// (this one waits for a file the agent's next tool makes, which a synchronous run would
/// never see); the context it prints reaches the session's next model call (the tool waits
/// for the hook's log line, then a second for its output to be read), and the run waits for
/// it at exit.
#[test]
fn async_hooks_run_in_the_background_and_their_context_reaches_the_next_model_call() {
    let home = TestHome::new();
    let after = home.script(
        "after.sh",
        "#!/bin/sh\ninput=$(cat)\ncase \"$input\" in *first*) ;; *) exit 0 ;; esac\nwhile [ ! -f go.flag ]; do sleep 0.05; done\necho ran >> after.log\necho '{\"hookSpecificOutput\": {\"hookEventName\": \"PostToolUse\", \"additionalContext\": \"3 tests failed\"}}'\n",
    );
    let late = home.script(
        "late.sh",
        "#!/bin/sh\ncat >/dev/null\nsleep 0.5\necho late >> late.log\n",
    );
    home.config(&format!(
        "hooks_auto_accept: true\nhooks:\n  pre_tool_call:\n    - command: 'echo nope >&2; exit 2'\n      format: claude\n      async: true\n      matcher: Bash\n  post_tool_call:\n    - command: {after}\n      format: claude\n      async: true\n      timeout: 20\n  on_session_end:\n    - command: {late}\n      async: true\n"
    ));
    let script = home.path().join("s.yaml");
    std::fs::write(
        &script,
        "turns:\n  - user: build\n    steps:\n      - tool: terminal\n        args: {command: echo first}\n      - tool: terminal\n        args: {command: 'touch go.flag; while [ ! -f after.log ]; do sleep 0.05; done; sleep 1'}\n      - final: built\n  - user: status?\n    steps:\n      - final: ok\n        echo: true\n",
    )
    .unwrap();
    let out = home.hermes(&["run", script.to_str().unwrap()]);
    if !out.status.success() {
        home.fail("the run failed", &out);
    }
    let said = stdout(&out);
    assert!(
        said.contains("\"output\":\"first\\n\""),
        "the async guard blocked:\n{said}"
    );
    assert!(
        said.contains("[the model received: status?\n\n3 tests failed]"),
        "{said}"
    );
    let read = |f: &str| std::fs::read_to_string(home.path().join(f)).unwrap_or_default();
    assert_eq!(read("after.log"), "ran\n");
    // on_session_end ends each turn: the last one's hook ran after the run's last model
    // call, and the run waited for it before exiting.
    assert_eq!(read("late.log"), "late\nlate\n");
}

/// `hermes hooks fire` of an event with an async hook answers at once (no opinion) and
/// still lets the hook finish before the process ends.
#[test]
fn hooks_fire_lets_an_async_hook_finish_before_it_exits() {
    let home = TestHome::new();
    let hook = home.script(
        "slow.sh",
        "#!/bin/sh\ncat >/dev/null\nsleep 0.3\necho done >> slow.log\n",
    );
    home.config(&format!(
        "hooks:\n  post_tool_call:\n    - command: {hook}\n      async: true\n"
    ));
    let out = fire(&home, "post_tool_call", RM);
    home.expect_code(&out, 0);
    assert_eq!(
        std::fs::read_to_string(home.path().join("slow.log")).unwrap_or_default(),
        "done\n"
    );
}

/// A flood of firings of an async hook: at most `MAX_RUNNING` run at once, the rest are
/// dropped (the firing still returns at once and decides nothing), and every started one
/// finishes once it can; nothing waits on the firing thread.
#[test]
fn a_flood_of_async_firings_runs_a_bounded_number_and_drops_the_rest() {
    use hermes_host::shell::background;
    let home = TestHome::new();
    let dir = home.path().display().to_string();
    let hook = home.script(
        "held.sh",
        &format!("#!/bin/sh\ncat >/dev/null\nwhile [ ! -f '{dir}/release' ]; do sleep 0.02; done\necho ran >> '{dir}/ran.log'\n"),
    );
    home.config(&format!(
        "hooks:\n  post_tool_call:\n    - command: {hook}\n      async: true\n      timeout: 60\n"
    ));
    let h = Home::at(home.path());
    let (config, _) = h.load_config();
    let mut registry = Registry::new();
    let report = shell::register_from_config(&h, &config.hooks, Consent::Accept, &mut registry);
    assert_eq!(report.registered.len(), 1);
    let event = hermes_hooks_abi::hooks::payload::PostToolCallEvent {
        tool_name: "terminal",
        args: "{}",
        result: "{}",
        ..Default::default()
    };
    let fired = background::MAX_RUNNING + 36;
    for _ in 0..fired {
        registry.fire("post_tool_call", &event.fields());
    }
    assert_eq!(background::running(), background::MAX_RUNNING);
    std::fs::write(home.path().join("release"), "").unwrap();
    assert_eq!(background::wait_idle(Duration::from_secs(60)), 0);
    let ran = std::fs::read_to_string(home.path().join("ran.log")).unwrap_or_default();
    assert_eq!(ran.lines().count(), background::MAX_RUNNING);
}
