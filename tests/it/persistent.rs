//! `persistent: true` shell hooks through the real binary: one process for many firings,
//! answers matched to their firing, timeouts and exits restarted, disabled after 5 exits.

use hermes_tests::support::{Run, TestHome};

/// A Python policy kept running: records each start, blocks `rm`, prints junk before
/// answering `bad`, sleeps on `slow`, answers a stale firing id before answering `stale`,
/// prints bytes that are not UTF-8 (on stdout and stderr) before answering `binary`, and a
/// line longer than the 1 MiB output cap before answering `huge`.
const POLICY: &str = r#"#!/usr/bin/env python3
import json, os, sys, time
with open(os.path.join(os.environ["HERMES_HOME"], "starts.log"), "a") as f:
    f.write(f"{os.getpid()}\n")
for line in sys.stdin:
    payload = json.loads(line)
    command = payload.get("tool_input", {}).get("command", "") or payload.get("args", {}).get("command", "")
    fid = payload["hook_firing_id"]
    if "slow" in command:
        time.sleep(5)
    if "bad" in command:
        print("this is not json", flush=True)
    if "binary" in command:
        sys.stdout.buffer.write(b"\xff\xfe{not utf-8}\n"); sys.stdout.flush()
        sys.stderr.buffer.write(b"err \xff\n"); sys.stderr.flush()
    if "huge" in command:
        print("x" * (2 << 20), flush=True)
    if "stale" in command:
        print(json.dumps({"hook_firing_id": fid - 1, "decision": "block", "reason": "stale"}), flush=True)
    if "rm" in command:
        print(json.dumps({"hook_firing_id": fid, "decision": "block", "reason": "no rm, says the policy"}), flush=True)
    else:
        print("{}", flush=True)
"#;

fn policy_home(timeout: u64) -> TestHome {
    let home = TestHome::new();
    let policy = home.script("policy.py", POLICY).display().to_string();
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {policy}\n      persistent: true\n      timeout: {timeout}\n"
    ));
    home.hermes(&["hooks", "allow", &policy], &[])
        .expect_code(0);
    home
}

fn session(home: &TestHome, commands: &[&str]) -> Run {
    home.terminal_session(commands, &[("HERMES_LOG", "warn")])
}

fn starts(home: &TestHome) -> usize {
    std::fs::read_to_string(home.path().join("starts.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

#[test]
fn one_process_answers_every_firing_and_junk_or_stale_lines_are_discarded() {
    let home = policy_home(10);
    let run = session(
        &home,
        &[
            "echo one",
            "rm -rf junk",
            "echo bad",
            "echo stale",
            "echo binary",
            "echo huge",
            "echo two",
            "rm -rf again",
        ],
    );
    run.expect_code(0);
    // Bytes that are not UTF-8 and an endless line neither end the reader nor count as an
    // exit: the same process answers to the end.
    assert_eq!(starts(&home), 1, "{}", run.describe());
    assert_eq!(
        run.stdout().matches("no rm, says the policy").count(),
        2,
        "{}",
        run.describe()
    );
    let out = run.stdout();
    assert!(out.contains("no rm, says the policy"), "{}", run.describe());
    assert!(
        out.contains("one") && out.contains("two"),
        "{}",
        run.describe()
    );
    // `echo stale` ran: the stale block for the previous firing was not applied to it.
    assert!(!out.contains("\"stale\""), "{}", run.describe());
    let err = run.stderr();
    assert!(
        err.contains("printed a line that is not JSON; discarded: this is not json"),
        "{}",
        run.describe()
    );
    assert!(
        err.contains("during firing") && err.contains("discarded"),
        "{}",
        run.describe()
    );
    assert!(
        err.contains("printed a line that is not JSON; discarded: \u{fffd}\u{fffd}{not utf-8}"),
        "{}",
        run.describe()
    );
    assert!(
        err.contains("printed a line longer than 1048576 bytes; discarded"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_timeout_kills_the_process_and_the_next_firing_starts_it_again() {
    let home = policy_home(1);
    let run = session(&home, &["echo slow", "rm -rf junk"]);
    run.expect_code(0);
    assert!(
        run.stderr().contains("shell hook timed out after"),
        "{}",
        run.describe()
    );
    assert!(
        run.stdout().contains("no rm, says the policy"),
        "{}",
        run.describe()
    );
    assert_eq!(starts(&home), 2, "{}", run.describe());
}

#[test]
fn a_hook_that_keeps_exiting_is_restarted_then_disabled() {
    let home = TestHome::new();
    let hook = home
        .script("dies.sh", "#!/bin/sh\nread line\nexit 3\n")
        .display()
        .to_string();
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {hook}\n      persistent: true\n"
    ));
    home.hermes(&["hooks", "allow", &hook], &[]).expect_code(0);
    let run = home.hermes(
        &[
            "bench",
            "pre_tool_call",
            "--system",
            "shell",
            "--duration",
            "4s",
            "--warmup",
            "0",
        ],
        &[("HERMES_LOG", "warn")],
    );
    run.expect_code(0);
    assert!(
        run.stderr()
            .contains("exited 5 times within 60s and is disabled for the rest of this run"),
        "{}",
        run.describe()
    );
    assert!(
        run.stdout()
            .contains("the persistent hook exited with status 3"),
        "{}",
        run.describe()
    );
}

#[test]
fn doctor_flags_a_one_shot_python_hook_on_every_tool_call_and_not_a_persistent_one() {
    let home = TestHome::new();
    let once = home.script(
        "once.py",
        "#!/usr/bin/env python3\nimport sys\nsys.stdin.read()\nprint('{}')\n",
    );
    let kept = home.script("kept.py", POLICY);
    let (once, kept) = (once.display().to_string(), kept.display().to_string());
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - command: {once}\n    - command: {kept}\n      persistent: true\n"
    ));
    home.hermes(&["hooks", "allow", &once], &[]).expect_code(0);
    home.hermes(&["hooks", "allow", &kept], &[]).expect_code(0);
    let run = home.hermes(&["hooks", "doctor"], &[]);
    let out = run.stdout();
    assert_eq!(
        out.matches("starts a new python3 on every tool call")
            .count(),
        1,
        "{}",
        run.describe()
    );
    let flagged = out.find("starts a new python3").unwrap();
    let once_at = out.find(&once).unwrap();
    let kept_at = out.find(&kept).unwrap();
    assert!(
        once_at < flagged && (kept_at < once_at || flagged < kept_at),
        "{}",
        run.describe()
    );
}

#[test]
fn a_persistent_hook_whose_script_changed_does_not_run_until_approved_again() {
    let home = policy_home(10);
    let policy = home.path().join("policy.py");
    let text = std::fs::read_to_string(&policy).unwrap();
    std::fs::write(&policy, format!("{text}# edited\n")).unwrap();
    let run = session(&home, &["rm -rf junk"]);
    run.expect_code(0);
    assert!(
        run.stderr().contains("changed since it was approved"),
        "{}",
        run.describe()
    );
    assert!(
        !run.stdout().contains("no rm, says the policy"),
        "{}",
        run.describe()
    );
    assert_eq!(starts(&home), 0, "a changed script was started");
    let command = policy.display().to_string();
    home.hermes(&["hooks", "allow", &command], &[])
        .expect_code(0);
    let run = session(&home, &["rm -rf junk"]);
    assert!(
        run.stdout().contains("no rm, says the policy"),
        "{}",
        run.describe()
    );
}

#[test]
fn instances_keeps_a_pool_for_concurrent_callers() {
    for (instances, expected) in [(1, 1), (2, 2)] {
        let home = TestHome::new();
        let hook = home.script("pool.py",
            "#!/usr/bin/env python3\nimport os, sys, time\nopen(os.path.join(os.environ['HERMES_HOME'], 'starts.log'), 'a').write(f'{os.getpid()}\\n')\nfor line in sys.stdin:\n    time.sleep(0.005)\n    print('{}', flush=True)\n",
        )
        .display()
        .to_string();
        home.config(&format!(
            "hooks:\n  pre_tool_call:\n    - command: {hook}\n      persistent: true\n      instances: {instances}\n"
        ));
        home.hermes(&["hooks", "allow", &hook], &[]).expect_code(0);
        let run = home.hermes(
            &[
                "bench",
                "pre_tool_call",
                "--concurrency",
                "4",
                "--duration",
                "500ms",
                "--json",
            ],
            &[],
        );
        run.expect_code(0);
        assert_eq!(
            starts(&home),
            expected,
            "instances: {instances}{}",
            run.describe()
        );
        assert!(run.stdout().contains("\"errors\": 0"), "{}", run.describe());
    }
}
