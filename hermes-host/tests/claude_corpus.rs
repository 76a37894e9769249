//! Claude-Code-format hook scripts, written in the style of published ones
//! (`tests/fixtures/claude-corpus/`), run unchanged with `format: claude` through the three
//! ways a user meets them: `hermes hooks fire` (the registry), `hermes hooks test` (one
//! run, its answer read) and `hermes run` (a scripted agent session with real tools, where
//! each script's effect on the session is asserted).

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// A fresh home with one corpus script installed as a `format: claude` hook, and a work
/// directory (the project) where the agent's tools and the hook run.
struct Corpus {
    home: tempfile::TempDir,
    work: tempfile::TempDir,
}

impl Corpus {
    /// `script` (a file of the corpus) as the hook on `event`, with `matcher` if any.
    fn new(event: &str, matcher: Option<&str>, script: &str) -> Corpus {
        let corpus = Corpus {
            home: tempfile::tempdir().unwrap(),
            work: tempfile::tempdir().unwrap(),
        };
        let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/claude-corpus")
            .join(script);
        // Copied into the home: the host refuses scripts others can write, and a
        // checkout's modes are not the test's to choose.
        let installed = corpus.home().join(script);
        std::fs::copy(&fixture, &installed).unwrap();
        std::fs::set_permissions(&installed, std::fs::Permissions::from_mode(0o755)).unwrap();
        let matcher = matcher.map_or(String::new(), |m| format!("      matcher: '{m}'\n"));
        std::fs::write(
            corpus.home().join("config.yaml"),
            format!(
                "hooks:\n  {event}:\n    - command: {}\n      format: claude\n{matcher}",
                installed.display()
            ),
        )
        .unwrap();
        corpus
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    fn work(&self) -> &Path {
        self.work.path()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.work().join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.file(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn hermes(&self, args: &[&str]) -> Output {
        self.hermes_from(self.work(), args)
    }

    /// [`Corpus::hermes`] started from `dir` rather than the work directory.
    fn hermes_from(&self, dir: &Path, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_hermes"))
            .arg("--home")
            .arg(self.home())
            .arg("--accept-hooks")
            .args(args)
            .current_dir(dir)
            .env_remove("HERMES_HOME")
            .env_remove("RUST_LOG")
            .env("HERMES_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `hermes hooks fire <event> --payload <payload>`.
    fn fire(&self, event: &str, payload: &str) -> Ran {
        Ran(self.hermes(&["hooks", "fire", event, "--payload", payload]))
    }

    /// `hermes hooks test <event> --payload-file <payload>`.
    fn test(&self, event: &str, payload: &str) -> Ran {
        let file = self.write("payload.json", payload);
        Ran(self.hermes(&[
            "hooks",
            "test",
            event,
            "--payload-file",
            file.to_str().unwrap(),
        ]))
    }

    /// `hermes run` of a session script (YAML) with `--approvals <approvals>`, in the work
    /// directory; also returns the JSON trace.
    fn run(&self, session: &str, approvals: &str) -> (Ran, Vec<Value>) {
        let script = self.home().join("session.yaml");
        std::fs::write(&script, session).unwrap();
        let trace = self.home().join("trace.jsonl");
        let out = self.hermes(&[
            "run",
            script.to_str().unwrap(),
            "--cwd",
            self.work().to_str().unwrap(),
            "--approvals",
            approvals,
            "--trace",
            "json",
            "--trace-file",
            trace.to_str().unwrap(),
        ]);
        let trace = std::fs::read_to_string(&trace)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (Ran(out), trace)
    }
}

impl Corpus {
    /// Replaces the hook with `command` (a `format: claude` hook on `pre_tool_call`).
    fn only_hook(&self, command: &str) {
        std::fs::write(
            self.home().join("config.yaml"),
            format!("hooks:\n  pre_tool_call:\n    - command: {command}\n      format: claude\n"),
        )
        .unwrap();
    }

    /// An executable Python script at `path` with `body`.
    fn python_script(path: &Path, body: &str) {
        std::fs::write(path, format!("#!/usr/bin/env python3\n{body}")).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// `hermes run --cwd <work>` of one turn with one terminal call, started from `dir`.
    fn one_tool_call_from(&self, dir: &Path) -> Ran {
        let session = self.home().join("session.yaml");
        std::fs::write(
            &session,
            one_turn(
                "list",
                "      - tool: terminal\n        args: {command: \"true\"}\n      - final: listed\n",
            ),
        )
        .unwrap();
        let run = [
            "run",
            session.to_str().unwrap(),
            "--cwd",
            self.work().to_str().unwrap(),
        ];
        Ran(self.hermes_from(dir, &run))
    }
}

/// A finished `hermes` command, with assertions that print everything on failure.
struct Ran(Output);

impl Ran {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.0.stdout).into_owned()
    }

    fn describe(&self) -> String {
        format!(
            "\n--- exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.0.status.code(),
            self.stdout(),
            String::from_utf8_lossy(&self.0.stderr)
        )
    }

    /// Asserts that stdout has every one of `needles`.
    fn says(&self, needles: &[&str]) -> &Self {
        for needle in needles {
            assert!(
                self.stdout().contains(needle),
                "stdout lacks {needle:?}{}",
                self.describe()
            );
        }
        self
    }

    /// Asserts that stdout has none of `needles`.
    fn never_says(&self, needles: &[&str]) -> &Self {
        for needle in needles {
            assert!(
                !self.stdout().contains(needle),
                "stdout has {needle:?}{}",
                self.describe()
            );
        }
        self
    }

    /// Asserts that stderr has `needle`.
    fn logs(&self, needle: &str) -> &Self {
        assert!(
            String::from_utf8_lossy(&self.0.stderr).contains(needle),
            "stderr lacks {needle:?}{}",
            self.describe()
        );
        self
    }

    /// The `Outcome: ` line of `hooks fire`.
    fn outcome(&self) -> String {
        self.stdout()
            .lines()
            .find_map(|l| l.strip_prefix("Outcome: "))
            .unwrap_or("")
            .to_string()
    }
}

/// The hooks that fired in a trace, in order.
fn fired(trace: &[Value]) -> Vec<&str> {
    trace
        .iter()
        .filter(|r| r["kind"] == "fire")
        .filter_map(|r| r["hook"].as_str())
        .collect()
}

/// A one-turn session script: `steps` (YAML list items, indented for `steps:`).
fn one_turn(user: &str, steps: &str) -> String {
    format!("session_id: corpus-1\nturns:\n  - user: {user:?}\n    steps:\n{steps}")
}

const RM_PAYLOAD: &str = r#"{"tool_name": "terminal", "args": {"command": "rm -rf victim"}, "session_id": "s1", "tool_call_id": "c1"}"#;

#[test]
fn bash_validator_blocks_with_exit_2_and_stderr() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    let ls = r#"{"tool_name": "terminal", "args": {"command": "ls"}}"#;
    assert!(
        c.fire("pre_tool_call", RM_PAYLOAD)
            .outcome()
            .ends_with(": Dangerous command blocked: rm -rf")
    );
    assert_eq!(c.fire("pre_tool_call", ls).outcome(), "allowed");
    c.test("pre_tool_call", RM_PAYLOAD).says(&[
        "exit=2",
        r#"parsed (Hermes wire shape): {"action": "block", "message": "Dangerous command blocked: rm -rf"}"#,
    ]);

    std::fs::create_dir(c.file("victim")).unwrap();
    let (ran, _) = c.run(
        &one_turn(
            "clean up",
            "      - tool: terminal\n        args: {command: rm -rf victim}\n      - tool: terminal\n        args: {command: echo kept > kept.txt}\n      - final: done\n",
        ),
        "once",
    );
    ran.says(&["Dangerous command blocked: rm -rf", "assistant: done"]);
    assert!(c.file("victim").is_dir(), "the blocked command ran");
    assert!(
        c.file("kept.txt").is_file(),
        "the allowed command did not run"
    );
}

#[test]
fn secret_file_guard_denies_writes_to_dotenv_only() {
    let c = Corpus::new("pre_tool_call", Some("Write|Edit"), "protect_secrets.py");
    let env = r#"{"tool_name": "write_file", "args": {"path": ".env", "content": "KEY=1"}}"#;
    assert!(
        c.fire("pre_tool_call", env)
            .outcome()
            .ends_with("/.env holds secrets")
    );
    // `terminal` is `Bash`, which the matcher does not name: the hook does not run.
    assert_eq!(c.fire("pre_tool_call", RM_PAYLOAD).outcome(), "allowed");
    // The path is absolute, as Claude Code passes it: the work directory's `.env`.
    let work = c.work().display().to_string();
    c.test("pre_tool_call", env).says(&[&format!(
        r#"{{"action": "block", "message": "{work}/.env holds secrets"}}"#
    )]);

    let (ran, _) = c.run(
        &one_turn(
            "configure",
            "      - tools:\n          - {tool: write_file, args: {path: .env, content: \"KEY=1\"}}\n          - {tool: write_file, args: {path: notes.txt, content: hi}}\n      - final: done\n",
        ),
        "deny",
    );
    ran.says(&[".env holds secrets"]);
    assert!(!c.file(".env").exists(), "the secret file was written");
    assert_eq!(std::fs::read_to_string(c.file("notes.txt")).unwrap(), "hi");
}

#[test]
fn post_tool_formatter_rewrites_the_written_file() {
    let c = Corpus::new(
        "post_tool_call",
        Some("Write|Edit"),
        "format_after_write.py",
    );
    c.write("a.txt", "x   \ny\t\n");
    let post = r#"{"tool_name": "write_file", "args": {"path": "a.txt", "content": "x"}, "result": "{\"written\": \"a.txt\"}", "status": "ok"}"#;
    c.test("post_tool_call", post).says(&["exit=0"]);
    assert_eq!(std::fs::read_to_string(c.file("a.txt")).unwrap(), "x\ny\n");

    let (ran, _) = c.run(
        &one_turn(
            "write it",
            "      - tool: write_file\n        args: {path: b.txt, content: \"one  \\ntwo \\n\"}\n      - final: written\n",
        ),
        "deny",
    );
    ran.says(&["assistant: written"]);
    assert_eq!(
        std::fs::read_to_string(c.file("b.txt")).unwrap(),
        "one\ntwo\n"
    );
}

#[test]
fn prompt_context_injector_prints_plain_text_the_model_receives() {
    let c = Corpus::new("pre_llm_call", None, "inject_context.py");
    let prompt = r#"{"user_message": "fix the bug", "session_id": "s1"}"#;
    assert_eq!(
        c.fire("pre_llm_call", prompt).outcome(),
        "context: The user asked: fix the bug. Current branch: main"
    );
    c.test("pre_llm_call", prompt)
        .says(&[r#"{"context": "The user asked: fix the bug. Current branch: main"}"#]);

    let (ran, _) = c.run(
        &one_turn("fix the bug", "      - final: on it\n        echo: true\n"),
        "deny",
    );
    ran.says(&[
        "[the model received: fix the bug\n\nThe user asked: fix the bug. Current branch: main]",
    ]);
}

#[test]
fn prompt_blocker_ends_the_turn_and_later_turns_still_run() {
    let c = Corpus::new("pre_llm_call", None, "block_prompt.py");
    let secret = r#"{"user_message": "my password is hunter2", "session_id": "s1"}"#;
    c.fire("pre_llm_call", secret)
        .says(&["stop: ends the turn (Prompt blocked: it contains a password)"]);
    c.test("pre_llm_call", secret)
        .says(&["exit=2", "stop: ends the turn (Prompt blocked"]);

    let session = "session_id: corpus-1\nturns:\n  - user: my password is hunter2\n    steps:\n      - tool: terminal\n        args: {command: echo leaked > leaked.txt}\n      - final: noted\n  - user: what is the time\n    steps:\n      - final: noon\n        echo: true\n";
    let (ran, trace) = c.run(session, "deny");
    ran.says(&[
        "[a hook stopped this turn: Prompt blocked: it contains a password]",
        "assistant: noon\n\n[the model received: what is the time]",
    ])
    .never_says(&["assistant: noted"]);
    assert!(
        !c.file("leaked.txt").exists(),
        "the blocked turn's model ran"
    );
    // The refused turn still ends as a turn; the session starts once.
    let hooks = fired(&trace);
    assert_eq!(
        hooks.iter().filter(|h| **h == "on_session_start").count(),
        1
    );
    assert_eq!(hooks.iter().filter(|h| **h == "on_session_end").count(), 2);
    assert_eq!(hooks.iter().filter(|h| **h == "pre_api_request").count(), 1);
}

#[test]
fn session_start_loader_context_reaches_the_first_model_call() {
    let c = Corpus::new("on_session_start", None, "load_context.py");
    let start = r#"{"session_id": "s9", "model": "m", "platform": "cli"}"#;
    c.test("on_session_start", start)
        .says(&[r#"{"context": "recent commits: none"}"#]);

    let session = "turns:\n  - user: hello\n    steps:\n      - final: hi\n        echo: true\n  - user: again\n    steps:\n      - final: hi again\n        echo: true\n";
    let (ran, _) = c.run(session, "deny");
    ran.says(&[
        "[the model received: hello\n\nrecent commits: none]",
        "[the model received: again]",
    ]);
}

#[test]
fn auto_approver_allow_skips_the_hosts_approval_prompt() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "auto_approve.py");
    let clean = r#"{"tool_name": "terminal", "args": {"command": "rm -rf build"}, "session_id": "s1", "tool_call_id": "c1"}"#;
    c.fire("pre_tool_call", clean).says(&[
        "Outcome: allowed",
        "approval: allow; the host's own approval prompt is skipped for this call",
    ]);
    c.test("pre_tool_call", clean).says(&["approval: allow"]);

    // `--approvals deny` refuses every dangerous command the host asks about; the hook's
    // allow means the host does not ask about this one, while another still goes through
    // the approval step.
    std::fs::create_dir_all(c.file("build/obj")).unwrap();
    std::fs::create_dir_all(c.file("src/old")).unwrap();
    let (ran, trace) = c.run(
        &one_turn(
            "clean",
            "      - tool: terminal\n        args: {command: rm -rf build}\n      - tool: terminal\n        args: {command: rm -rf src}\n      - final: clean\n",
        ),
        "deny",
    );
    ran.says(&["command not run: the user denied it (recursive delete)"]);
    assert!(!c.file("build").exists(), "the allowed command did not run");
    assert!(c.file("src/old").is_dir(), "the unapproved command ran");
    let asked = fired(&trace)
        .iter()
        .filter(|h| **h == "pre_approval_request")
        .count();
    assert_eq!(
        asked, 1,
        "only the command the hook did not allow is asked about"
    );
}

#[test]
fn updated_input_is_mapped_back_to_hermes_arguments() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "add_flags.py");
    let ls = r#"{"tool_name": "terminal", "args": {"command": "ls", "timeout": 30}}"#;
    assert_eq!(
        c.fire("pre_tool_call", ls).outcome(),
        r#"allowed, arguments modified: {"command":"ls -la","timeout":120}"#
    );
    c.test("pre_tool_call", ls)
        .says(&[r#""args": {"command": "ls -la", "timeout": 120}"#]);

    c.write(".hidden", "");
    let (ran, _) = c.run(
        &one_turn(
            "list",
            "      - tool: terminal\n        args: {command: ls}\n      - final: listed\n",
        ),
        "deny",
    );
    ran.says(&[
        r#"-> terminal {"command":"ls -la","timeout":120}"#,
        ".hidden",
    ]);
}

#[test]
fn continue_false_stops_the_call_and_ends_the_run() {
    let c = Corpus::new("pre_tool_call", None, "stop_on_deploy.py");
    let deploy = r#"{"tool_name": "terminal", "args": {"command": "make deploy"}, "session_id": "s1", "tool_call_id": "c1"}"#;
    let fired_once = c.fire("pre_tool_call", deploy);
    assert!(
        fired_once
            .outcome()
            .ends_with(": deploys need a release window")
    );
    fired_once.says(&["stop: ends the run (deploys need a release window)"]);
    c.test("pre_tool_call", deploy)
        .says(&["stop: ends the run (deploys need a release window)"]);

    let session = "turns:\n  - user: ship it\n    steps:\n      - tool: terminal\n        args: {command: echo deploy > deployed.txt}\n      - tool: terminal\n        args: {command: echo after > after.txt}\n      - final: shipped\n  - user: and then\n    steps:\n      - tool: terminal\n        args: {command: echo next > next.txt}\n      - final: done\n";
    let (ran, trace) = c.run(session, "deny");
    ran.says(&["[a hook stopped the run: deploys need a release window]"])
        .never_says(&["assistant: shipped", "user: and then"])
        .logs("stopping: deploy requested");
    for name in ["deployed.txt", "after.txt", "next.txt"] {
        assert!(!c.file(name).exists(), "{name} was written after the stop");
    }
    // The run still ends properly: the turn's end and the session's finalization fire.
    let hooks = fired(&trace);
    assert_eq!(
        hooks[hooks.len() - 2..],
        ["on_session_end", "on_session_finalize"]
    );
}

#[test]
fn jsonl_logger_reads_transcript_path_and_tool_use_id() {
    let c = Corpus::new("post_tool_call", None, "log_tools.py");
    let post = r#"{"tool_name": "terminal", "args": {"command": "ls"}, "result": "a b", "status": "ok", "session_id": "s1", "tool_call_id": "call-7"}"#;
    c.test("post_tool_call", post).says(&["exit=0"]);
    let logged = || -> Vec<Value> {
        std::fs::read_to_string(c.file("tool-log.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let line = &logged()[0];
    assert_eq!(
        (line["tool"].as_str(), line["id"].as_str()),
        (Some("Bash"), Some("call-7"))
    );
    assert!(line["transcript"].is_null(), "no transcript: {line}");
    for key in [
        "cwd",
        "hook_event_name",
        "permission_mode",
        "session_id",
        "tool_input",
        "tool_response",
        "transcript_path",
        "tool_use_id",
    ] {
        assert!(
            line["keys"].as_array().unwrap().iter().any(|k| k == key),
            "{key} missing from {line}"
        );
    }

    std::fs::remove_file(c.file("tool-log.jsonl")).unwrap();
    // Both calls succeed: PostToolUse does not fire after a failed one (that is
    // PostToolUseFailure's).
    c.write("present.txt", "here");
    let (ran, trace) = c.run(
        &one_turn(
            "look",
            "      - tools:\n          - {tool: terminal, args: {command: ls}}\n          - {tool: read_file, args: {path: present.txt}}\n      - final: looked\n",
        ),
        "deny",
    );
    ran.says(&["assistant: looked"]);
    let tools: Vec<(String, String)> = logged()
        .iter()
        .map(|l| {
            (
                l["tool"].as_str().unwrap().into(),
                l["id"].as_str().unwrap().into(),
            )
        })
        .collect();
    let ids: Vec<String> = trace
        .iter()
        .filter(|r| r["kind"] == "fire" && r["hook"] == "post_tool_call")
        .map(|r| {
            r["payload"]["tool_call_id"]
                .as_str()
                .unwrap_or("?")
                .to_string()
        })
        .collect();
    assert_eq!(
        tools,
        [
            ("Bash".to_string(), ids[0].clone()),
            ("Read".to_string(), ids[1].clone())
        ]
    );
}

#[test]
fn ask_goes_through_the_hosts_approval_step() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "ask_risky.py");
    let push = r#"{"tool_name": "terminal", "args": {"command": "git push --force"}, "session_id": "s1", "tool_call_id": "c1"}"#;
    c.fire("pre_tool_call", push).says(&[
        "Outcome: allowed",
        "approval: ask (force-push needs a human); the call goes through the host's approval step",
    ]);
    c.test("pre_tool_call", push)
        .says(&["approval: ask (force-push needs a human)"]);

    let session = one_turn(
        "push",
        "      - tool: terminal\n        args: {command: \"echo git push --force > pushed.txt\"}\n      - final: pushed\n",
    );
    // Headless, with approvals prompted for: nobody can say yes, and the result says so.
    let (ran, trace) = c.run(&session, "prompt");
    ran.says(&[
        "terminal not run: a hook asked for approval (force-push needs a human) and nobody is at a terminal to give it",
    ]);
    assert!(!c.file("pushed.txt").exists());
    assert!(fired(&trace).contains(&"pre_approval_request"));

    // Approved once: the command runs, and the host does not ask about the force-push a
    // second time under its own dangerous-command rule.
    let (ran, trace) = c.run(&session, "once");
    ran.says(&["assistant: pushed"]);
    assert!(c.file("pushed.txt").is_file());
    let approvals: Vec<&Value> = trace
        .iter()
        .filter(|r| r["kind"] == "fire" && r["hook"] == "pre_approval_request")
        .collect();
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(
        approvals[0]["payload"]["description"],
        "force-push needs a human"
    );
}

#[test]
fn a_claude_hook_is_told_the_agents_work_directory_and_runs_there() {
    // `hermes run --cwd WORK` started from another directory: the hook gets WORK as `cwd`
    // and `CLAUDE_PROJECT_DIR`, and runs in WORK, as Claude Code runs a hook in the
    // session's directory.
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    let seen = c.home().join("seen.json");
    let script = c.home().join("where.py");
    Corpus::python_script(
        &script,
        &format!(
            "import json, os, sys\nd = json.load(sys.stdin)\njson.dump({{'cwd': d['cwd'], 'project': os.environ.get('CLAUDE_PROJECT_DIR'), 'pwd': os.getcwd()}}, open({:?}, 'w'))\n",
            seen.display().to_string()
        ),
    );
    c.only_hook(&script.display().to_string());
    let elsewhere = tempfile::tempdir().unwrap();
    c.one_tool_call_from(elsewhere.path())
        .says(&["assistant: listed"]);
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    // Compared after resolving links: a temporary directory may sit behind one.
    let canonical = |key: &str| std::fs::canonicalize(seen[key].as_str().unwrap()).unwrap();
    let work = std::fs::canonicalize(c.work()).unwrap();
    assert_eq!(canonical("cwd"), work, "{seen}");
    assert_eq!(canonical("project"), work, "{seen}");
    assert_eq!(canonical("pwd"), work, "{seen}");
}

/// Makes `dir` a git repository on branch `branch` with one commit.
fn git_repo(dir: &Path, branch: &str) {
    for args in [
        vec!["init", "-q", "-b", branch],
        vec![
            "-c",
            "user.email=t@example.com",
            "-c",
            "user.name=t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    ] {
        let status = Command::new("git")
            .args(&args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
}

#[test]
fn with_cwd_from_elsewhere_a_formatter_and_a_git_branch_check_act_on_the_project() {
    // Both formats, as published: a Hermes-format formatter (bash + jq, the seed's
    // auto-format.sh shape) that gets the path the model wrote, relative, and a Claude
    // PreToolUse check that refuses Bash on the main branch of the tree it runs in.
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    git_repo(c.work(), "main");
    let format = c.home().join("auto-format.sh");
    std::fs::write(
        &format,
        "#!/usr/bin/env bash\nset -euo pipefail\npath=$(jq -r '.tool_input.path')\n[ -f \"$path\" ] || { echo \"no $path in $(pwd)\" >&2; exit 1; }\nsed -i 's/[[:space:]]*$//' \"$path\"\necho '{}'\n",
    )
    .unwrap();
    let branch = c.home().join("branch_guard.sh");
    std::fs::write(
        &branch,
        "#!/usr/bin/env bash\nset -uo pipefail\ncat >/dev/null\nb=$(git rev-parse --abbrev-ref HEAD 2>/dev/null || echo none)\nif [ \"$b\" = main ]; then\n  jq -n --arg r \"no commands on $b\" '{decision: \"block\", reason: $r}'\nfi\n",
    )
    .unwrap();
    for script in [&format, &branch] {
        std::fs::set_permissions(script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(
        c.home().join("config.yaml"),
        format!(
            "hooks:\n  post_tool_call:\n    - command: {}\n      matcher: write_file\n  pre_tool_call:\n    - command: {}\n      format: claude\n      matcher: Bash\n",
            format.display(),
            branch.display()
        ),
    )
    .unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let session = c.home().join("session.yaml");
    std::fs::write(
        &session,
        one_turn(
            "tidy",
            "      - tool: write_file\n        args: {path: notes.txt, content: \"a  \\nb \\n\"}\n      - tool: terminal\n        args: {command: \"touch ran.txt\"}\n      - final: tidied\n",
        ),
    )
    .unwrap();
    let run = [
        "run",
        session.to_str().unwrap(),
        "--cwd",
        c.work().to_str().unwrap(),
        "--approvals",
        "always",
    ];
    let ran = Ran(c.hermes_from(elsewhere.path(), &run));
    ran.says(&["assistant: tidied", "no commands on main"]);
    assert_eq!(
        std::fs::read_to_string(c.file("notes.txt")).unwrap(),
        "a\nb\n",
        "{}",
        ran.describe()
    );
    assert!(!c.file("ran.txt").exists(), "{}", ran.describe());
}

/// A guard as careful ones are published: it resolves `file_path` (symlinks and `..`) and
/// denies anything outside the project or under its `secrets/`.
fn realpath_guard(c: &Corpus) {
    let guard = c.home().join("guard_paths.py");
    Corpus::python_script(
        &guard,
        "import json, os, sys\nd = json.load(sys.stdin)\ni = d['tool_input']\np = i.get('file_path') or i.get('path') or ''\nroot = os.path.realpath(os.environ['CLAUDE_PROJECT_DIR'])\nreal = os.path.realpath(p)\nwhy = None\nif not p.startswith('/'):\n    why = 'not absolute: ' + p\nelif os.path.commonpath([real, root]) != root:\n    why = 'outside the project: ' + p + ' is ' + real\nelif real.startswith(os.path.join(root, 'secrets') + '/'):\n    why = 'secrets/ is off limits: ' + p\nif why:\n    print(json.dumps({'hookSpecificOutput': {'hookEventName': 'PreToolUse', 'permissionDecision': 'deny', 'permissionDecisionReason': why}}))\n",
    );
    std::fs::write(
        c.home().join("config.yaml"),
        format!(
            "hooks:\n  pre_tool_call:\n    - command: {}\n      format: claude\n      matcher: Write|Read\n",
            guard.display()
        ),
    )
    .unwrap();
}

#[test]
fn a_relative_write_path_is_denied_by_a_guard_that_compares_absolute_paths() {
    // Claude Code always passes an absolute `file_path`; guards compare it with the
    // project's protected directories.
    let c = Corpus::new("pre_tool_call", Some("Write"), "validate_bash.py");
    std::fs::create_dir(c.file("secrets")).unwrap();
    std::fs::create_dir(c.file("references")).unwrap();
    realpath_guard(&c);
    let (ran, _) = c.run(
        &one_turn(
            "write",
            "      - tool: write_file\n        args: {path: references/../secrets/key.txt, content: leaked}\n      - final: done\n",
        ),
        "deny",
    );
    // The guard saw the path as the model wrote it, made absolute and nothing else.
    ran.says(&["secrets/ is off limits", "/references/../secrets/key.txt"]);
    assert!(!c.file("secrets/key.txt").exists(), "{}", ran.describe());
}

#[test]
fn a_symlink_behind_dotdot_is_the_file_the_guard_judges_and_the_tool_touches() {
    // `ref -> <outside>/a`: to the kernel `ref/../secret.txt` is `<outside>/secret.txt`.
    // Folding `..` first would show the guard `<project>/secret.txt`, and the tool would
    // then read the file outside.
    let c = Corpus::new("pre_tool_call", Some("Write"), "validate_bash.py");
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(outside.path().join("a")).unwrap();
    std::fs::write(outside.path().join("secret.txt"), "outside secret").unwrap();
    std::fs::write(c.file("secret.txt"), "project file").unwrap();
    std::os::unix::fs::symlink(outside.path().join("a"), c.file("ref")).unwrap();
    realpath_guard(&c);
    let (ran, _) = c.run(
        &one_turn(
            "read and write",
            "      - tool: read_file\n        args: {path: ref/../secret.txt}\n      - tool: write_file\n        args: {path: ref/../planted.txt, content: planted}\n      - tool: read_file\n        args: {path: secret.txt}\n      - final: done\n        echo: true\n",
        ),
        "deny",
    );
    ran.says(&["outside the project", "/ref/../secret.txt", "project file"])
        .never_says(&["outside secret"]);
    assert!(
        !outside.path().join("planted.txt").exists(),
        "{}",
        ran.describe()
    );
    assert!(!c.file("planted.txt").exists(), "{}", ran.describe());
}

#[test]
fn a_published_guard_looking_for_dotdot_sees_the_traversal() {
    // plugin-dev's validate-write.sh, as published: it denies any path with `..` in it.
    let c = Corpus::new("pre_tool_call", Some("Write"), "validate_bash.py");
    let guard = c.home().join("validate-write.sh");
    bash_script(
        &guard,
        "input=$(cat)\nfile_path=$(printf '%s' \"$input\" | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"tool_input\"].get(\"file_path\", \"\"))')\nif [[ \"$file_path\" == *\"..\"* ]]; then\n  echo '{\"decision\": \"deny\", \"reason\": \"Path traversal detected\"}' >&2\n  exit 2\nfi\nexit 0\n",
    );
    hooks_config(
        &c,
        &format!(
            "  pre_tool_call:\n    - command: {}\n      format: claude\n      matcher: Write\n",
            guard.display()
        ),
    );
    // Named after the work directory, so runs beside each other never share it.
    let escape = format!(
        "escape-{}.txt",
        c.work().file_name().unwrap().to_str().unwrap()
    );
    let (ran, _) = c.run(
        &one_turn(
            "escape",
            &format!("      - tool: write_file\n        args: {{path: ../{escape}, content: x}}\n      - tool: write_file\n        args: {{path: inside.txt, content: y}}\n      - final: done\n"),
        ),
        "deny",
    );
    ran.says(&["Path traversal detected"]);
    assert!(
        !c.work().parent().unwrap().join(&escape).exists(),
        "{}",
        ran.describe()
    );
    assert_eq!(
        std::fs::read_to_string(c.file("inside.txt")).unwrap(),
        "y",
        "{}",
        ran.describe()
    );
}

#[test]
fn a_command_naming_claude_project_dir_runs_the_work_directorys_script_and_pins_it() {
    // The canonical project hook of Claude Code's settings: hermes runs commands without a
    // shell, so the variable is replaced with the agent's work directory before consent.
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    let marker = c.home().join("ran.txt");
    let hooks = c.work().join(".claude/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    Corpus::python_script(
        &hooks.join("check.py"),
        &format!(
            "import sys\nsys.stdin.read()\nopen({:?}, 'a').write('project hook\\n')\n",
            marker.display().to_string()
        ),
    );
    c.only_hook("'\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/check.py'");
    let elsewhere = tempfile::tempdir().unwrap();
    c.one_tool_call_from(elsewhere.path())
        .says(&["assistant: listed"]);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "project hook\n");
    // What was approved is the script in that directory, by its full path.
    let allowlist = std::fs::read_to_string(c.home().join("shell-hooks-allowlist.json")).unwrap();
    let approvals: Value = serde_json::from_str(&allowlist).unwrap();
    let command = approvals["approvals"][0]["command"].as_str().unwrap();
    assert_eq!(
        command,
        format!("\"{}\"/.claude/hooks/check.py", c.work().display()),
        "{allowlist}"
    );
    assert!(
        approvals["approvals"][0]["script_sha256"].is_string(),
        "{allowlist}"
    );
}

#[test]
fn a_command_written_for_a_shell_runs_through_one_as_claude_code_runs_it() {
    // A pipe, `&&`, a redirection and `exit`: split into words without a shell, `cat`
    // would look for files named `|` and `grep`, fail, and the call would go through.
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    let marker = c.home().join("project-dir.txt");
    c.only_hook(&format!(
        "'cat | grep -q Bash && echo \"$CLAUDE_PROJECT_DIR\" > {} && echo piped-block >&2 && exit 2'",
        marker.display()
    ));
    let elsewhere = tempfile::tempdir().unwrap();
    c.one_tool_call_from(elsewhere.path())
        .says(&["piped-block"]);
    // The shell saw the project directory, replaced at registration.
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap().trim_end(),
        c.work().display().to_string()
    );
}

/// Every `format: claude` command runs through a shell, as written, and `hooks list` says
/// so; a Hermes-format command runs as words. Each entry stays on one line.
#[test]
fn hooks_list_says_claude_commands_run_through_a_shell_and_keeps_each_on_one_line() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    std::fs::write(
        c.home().join("config.yaml"),
        "hooks:\n  pre_tool_call:\n    - command: \"make lint\\nmake test\"\n      format: claude\n    - command: ./guard.sh --strict\n      format: claude\n    - command: ./hermes-guard.sh\n",
    )
    .unwrap();
    let listed = Ran(c.hermes_from(c.home(), &["hooks", "list"]));
    let stdout = listed.stdout();
    let shell = stdout
        .lines()
        .find(|l| l.contains("make lint"))
        .unwrap_or_else(|| panic!("no entry for the multi-line command{}", listed.describe()));
    assert!(
        shell.contains("make lint\\nmake test") && shell.contains("format=claude, through "),
        "{shell}"
    );
    let plain = stdout
        .lines()
        .find(|l| l.contains("guard.sh --strict"))
        .unwrap();
    assert!(plain.contains("format=claude, through "), "{plain}");
    let hermes = stdout
        .lines()
        .find(|l| l.contains("hermes-guard.sh"))
        .unwrap();
    assert!(!hermes.contains("through"), "{hermes}");
}

#[test]
fn hooks_allow_revoke_and_list_by_the_written_command_act_on_the_command_as_it_runs() {
    // The user copies the command from config.yaml; consent looks it up with the project
    // directory filled in, so that is what `allow` must record and `revoke` remove.
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    let hooks = c.work().join(".claude/hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    Corpus::python_script(&hooks.join("check.py"), "import sys\nsys.stdin.read()\n");
    c.only_hook("'\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/check.py'");
    let written = "\"$CLAUDE_PROJECT_DIR\"/.claude/hooks/check.py";
    let allowlist = c.home().join("shell-hooks-allowlist.json");
    let approved = || -> Vec<String> {
        let text = std::fs::read_to_string(&allowlist).unwrap_or_else(|_| "{}".into());
        let doc: Value = serde_json::from_str(&text).unwrap();
        doc["approvals"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| e["command"].as_str().unwrap().to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    let allowed = Ran(c.hermes_from(c.work(), &["hooks", "allow", written]));
    assert!(allowed.0.status.success(), "{}", allowed.describe());
    assert_eq!(
        approved(),
        vec![format!("\"{}\"/.claude/hooks/check.py", c.work().display())]
    );
    let revoked = Ran(c.hermes_from(c.work(), &["hooks", "revoke", written]));
    assert!(revoked.0.status.success(), "{}", revoked.describe());
    assert_eq!(approved(), Vec::<String>::new());
    // From anywhere else, `--cwd` names the project, as `hermes run --cwd` does.
    let work = c.work().to_str().unwrap();
    let allowed = Ran(c.hermes_from(c.home(), &["hooks", "allow", "--cwd", work, written]));
    assert!(allowed.0.status.success(), "{}", allowed.describe());
    assert_eq!(
        approved(),
        vec![format!("\"{}\"/.claude/hooks/check.py", c.work().display())]
    );
    let listed = Ran(c.hermes_from(c.home(), &["hooks", "list", "--cwd", work]));
    listed.says(&[
        &format!("\"{}\"/.claude/hooks/check.py", c.work().display()),
        "✓ allowed",
    ]);
    let revoked = Ran(c.hermes_from(c.home(), &["hooks", "revoke", "--cwd", work, written]));
    assert!(revoked.0.status.success(), "{}", revoked.describe());
    assert_eq!(approved(), Vec::<String>::new());
}

/// A relative command runs the project's script when the agent works in the project
/// through `--cwd` from elsewhere, as Claude Code runs hooks in the project: the launch
/// directory's namesake never runs, and what consent pinned is the project's file.
#[test]
fn a_relative_hook_command_runs_the_projects_script_as_claude_code_does() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    let started_in = tempfile::tempdir().unwrap();
    let marker = c.home().join("ran.txt");
    let hook = |dir: &Path, who: &str| {
        Corpus::python_script(
            &dir.join("hook.py"),
            &format!(
                "import sys\nsys.stdin.read()\nopen({:?}, 'a').write({who:?} + '\\n')\n",
                marker.display().to_string()
            ),
        );
    };
    hook(started_in.path(), "launch directory");
    hook(c.work(), "project");
    c.only_hook("./hook.py");
    c.one_tool_call_from(started_in.path())
        .says(&["assistant: listed"]);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "project\n");
}

/// A project's imported guard, `bash .claude/scripts/guard.sh` as moo.md-style projects
/// write it, decides with `--cwd` from another directory as it does when hermes starts in
/// the project (it used to fail open: "No such file or directory"), and `hooks doctor`
/// says which file the command resolved to.
#[test]
fn a_projects_relative_guard_decides_under_cwd_and_doctor_names_its_file() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    std::fs::create_dir_all(c.work().join(".claude/scripts")).unwrap();
    bash_script(
        &c.work().join(".claude/scripts/guard.sh"),
        "cat > /dev/null\necho 'project guard: not in this repo' >&2\nexit 2\n",
    );
    c.only_hook("bash .claude/scripts/guard.sh");
    let elsewhere = tempfile::tempdir().unwrap();
    c.one_tool_call_from(elsewhere.path())
        .says(&["project guard: not in this repo"]);
    c.one_tool_call_from(c.work())
        .says(&["project guard: not in this repo"]);
    let doctor = Ran(c.hermes_from(
        elsewhere.path(),
        &["hooks", "doctor", "--cwd", c.work().to_str().unwrap()],
    ));
    doctor.says(&[&format!(
        "runs {} (in the agent's directory)",
        c.work().join(".claude/scripts/guard.sh").display()
    )]);
}

/// Commands run exactly as written, through the shell, as Claude Code runs them: a quoted
/// path with spaces, `./script.sh`, and an interpreter given a script; the file each names
/// is pinned, so a change after approval stops it without changing what runs.
#[test]
fn commands_run_as_written_and_the_file_they_name_is_pinned() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    std::fs::create_dir_all(c.work().join("my hooks")).unwrap();
    let spaced = c.work().join("my hooks/guard.sh");
    bash_script(
        &spaced,
        "cat > /dev/null\necho \"spaced guard in $PWD\" >&2\nexit 2\n",
    );
    c.only_hook(r#""'./my hooks/guard.sh'""#);
    let elsewhere = tempfile::tempdir().unwrap();
    c.one_tool_call_from(elsewhere.path())
        .says(&[&format!("spaced guard in {}", c.work().display())]);
    bash_script(
        &c.work().join("plain.sh"),
        "cat > /dev/null\necho 'plain guard' >&2\nexit 2\n",
    );
    c.only_hook("./plain.sh");
    c.one_tool_call_from(elsewhere.path())
        .says(&["plain guard"]);
    Corpus::python_script(
        &c.work().join("check.py"),
        "import sys\nsys.stdin.read()\nprint('interpreted guard', file=sys.stderr)\nsys.exit(2)\n",
    );
    c.only_hook("python3 check.py --strict");
    c.one_tool_call_from(elsewhere.path())
        .says(&["interpreted guard"]);
    // Changed after its approval: not run, and said so.
    Corpus::python_script(&c.work().join("check.py"), "import sys\nsys.exit(0)\n");
    let ran = c.one_tool_call_from(elsewhere.path());
    ran.never_says(&["interpreted guard"]);
    assert!(
        String::from_utf8_lossy(&ran.0.stderr).contains("changed since it was approved"),
        "{}",
        ran.describe()
    );
}

/// Published safety hooks' commands run as written: `env NAME=/dir bash -c '...'` needs no
/// shell of ours (its metacharacters are quoted), and neither the `env` assignment nor the
/// `-c` text (each a word with a slash) may be taken for a relative script and rewritten.
#[test]
fn env_assignments_and_bash_c_texts_run_as_written() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    c.only_hook(
        r#""env GUARD_DIR=/tmp/guard bash -c 'read -r line; case \"$line\" in *Bash*) echo \"blocked by a/b guard in $GUARD_DIR\" >&2; exit 2;; esac'""#,
    );
    let elsewhere = tempfile::tempdir().unwrap();
    c.one_tool_call_from(elsewhere.path())
        .says(&["blocked by a/b guard in /tmp/guard"]);
    // The `-c` text alone is the first word with a slash: it stays the shell's program.
    c.only_hook(r#""bash -c 'read -r line; echo \"a/b guard: no\" >&2; exit 2'""#);
    c.one_tool_call_from(elsewhere.path())
        .says(&["a/b guard: no"]);
}

/// `config.yaml` of the corpus home: `body` under `hooks:`.
fn hooks_config(c: &Corpus, body: &str) {
    std::fs::write(c.home().join("config.yaml"), format!("hooks:\n{body}")).unwrap();
}

/// An executable bash script at `path` with `body`.
fn bash_script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/usr/bin/env bash\n{body}")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn a_stop_hook_keeps_the_agent_working_twice_then_lets_it_stop() {
    // A loop driver as published: it counts its runs in the project and lets the agent
    // stop on the third, or at once when it is already continuing past its budget.
    let c = Corpus::new("post_llm_call", None, "validate_bash.py");
    let hook = c.home().join("keep_going.py");
    Corpus::python_script(
        &hook,
        "import json, os, sys\nd = json.load(sys.stdin)\nstate = os.path.join(d['cwd'], 'stops.txt')\nseen = open(state).read().splitlines() if os.path.exists(state) else []\nopen(state, 'a').write(f\"{d['hook_event_name']} {d['stop_hook_active']}\\n\")\nif len(seen) < 2:\n    print(json.dumps({'decision': 'block', 'reason': f'not done yet ({len(seen) + 1})'}))\n",
    );
    hooks_config(
        &c,
        &format!(
            "  post_llm_call:\n    - command: {}\n      format: claude\n",
            hook.display()
        ),
    );
    let session = "session_id: stop-1\nturns:\n  - user: build it\n    steps:\n      - final: first try\n    continuations:\n      - steps:\n          - tool: write_file\n            args: {path: built.txt, content: yes}\n          - final: second try\n            echo: true\n      - steps:\n          - final: third try\n      - steps:\n          - final: never\n";
    let (ran, trace) = c.run(session, "deny");
    ran.says(&[
        "assistant: first try",
        "[a Stop hook keeps the agent working: not done yet (1)]",
        "assistant: second try\n\n[the model received: not done yet (1)]",
        "[a Stop hook keeps the agent working: not done yet (2)]",
        "assistant: third try",
    ])
    .never_says(&["never"]);
    assert_eq!(
        std::fs::read_to_string(c.file("stops.txt")).unwrap(),
        "Stop False\nStop True\nStop True\n"
    );
    assert!(c.file("built.txt").exists());
    assert_eq!(
        fired(&trace)
            .iter()
            .filter(|h| **h == "post_llm_call")
            .count(),
        3
    );
}

#[test]
fn continuations_are_capped_with_a_log_line_and_exit_2_is_a_block_too() {
    let c = Corpus::new("post_llm_call", None, "validate_bash.py");
    let hook = c.home().join("never_done.sh");
    bash_script(
        &hook,
        "cat >/dev/null\necho 'there are TODOs left' >&2\nexit 2\n",
    );
    hooks_config(
        &c,
        &format!(
            "  max_stop_continuations: 1\n  post_llm_call:\n    - command: {}\n      format: claude\n",
            hook.display()
        ),
    );
    let session = one_turn(
        "finish",
        "      - final: done\n    continuations:\n      - steps:\n          - final: really done\n      - steps:\n          - final: past the cap\n",
    );
    let (ran, _) = c.run(&session, "deny");
    ran.says(&[
        "assistant: done",
        "[a Stop hook keeps the agent working: there are TODOs left]",
        "assistant: really done",
    ])
    .never_says(&["past the cap"])
    .logs("hooks.max_stop_continuations is 1");
}

#[test]
fn a_hermes_format_stop_hook_stays_an_observer() {
    let c = Corpus::new("post_llm_call", None, "validate_bash.py");
    let hook = c.home().join("block.sh");
    bash_script(
        &hook,
        "cat >/dev/null\necho '{\"decision\": \"block\", \"reason\": \"again\"}'\n",
    );
    hooks_config(
        &c,
        &format!("  post_llm_call:\n    - command: {}\n", hook.display()),
    );
    let session = one_turn(
        "hi",
        "      - final: hello\n    continuations:\n      - steps:\n          - final: once more\n",
    );
    let (ran, _) = c.run(&session, "deny");
    ran.says(&["assistant: hello"])
        .never_says(&["once more", "keeps the agent working"]);
}

#[test]
fn a_subagent_stop_hook_keeps_a_delegated_child_working() {
    let c = Corpus::new("subagent_stop", None, "validate_bash.py");
    let hook = c.home().join("child_check.py");
    Corpus::python_script(
        &hook,
        "import json, sys\nd = json.load(sys.stdin)\nassert d['hook_event_name'] == 'SubagentStop'\nif not d['stop_hook_active']:\n    print(json.dumps({'decision': 'block', 'reason': 'write the report first'}))\n",
    );
    hooks_config(
        &c,
        &format!(
            "  subagent_stop:\n    - command: {}\n      format: claude\n",
            hook.display()
        ),
    );
    std::fs::write(
        c.home().join("child.yaml"),
        "turns:\n  - user: research\n    steps:\n      - final: found it\n    continuations:\n      - steps:\n          - tool: write_file\n            args: {path: report.md, content: findings}\n          - final: report written\n",
    )
    .unwrap();
    let session = one_turn(
        "delegate",
        "      - tool: delegate_task\n        args: {tasks: [{script: child.yaml, role: researcher}]}\n      - final: delegated\n        echo: true\n",
    );
    let (ran, _) = c.run(&session, "deny");
    ran.says(&[r#""summary":"report written""#, "assistant: delegated"]);
    assert_eq!(
        std::fs::read_to_string(c.file("report.md")).unwrap(),
        "findings"
    );
}

#[test]
fn post_tool_use_feedback_reaches_the_model_after_the_tools_output() {
    // additionalContext (Python), a block's reason (bash + jq) and exit 2's stderr, in
    // registry order after the tool's own output.
    let c = Corpus::new("post_tool_call", None, "validate_bash.py");
    let context = c.home().join("lint_context.py");
    Corpus::python_script(
        &context,
        "import json, sys\nd = json.load(sys.stdin)\nprint(json.dumps({'hookSpecificOutput': {'hookEventName': 'PostToolUse', 'additionalContext': 'lint: ' + d['tool_input']['file_path'] + ' has 2 warnings'}}))\n",
    );
    let block = c.home().join("review.sh");
    bash_script(
        &block,
        "f=$(jq -r '.tool_input.file_path')\njq -n --arg f \"$f\" '{decision: \"block\", reason: (\"review \" + $f + \" before going on\")}'\n",
    );
    let exit2 = c.home().join("exit2.sh");
    bash_script(
        &exit2,
        "cat >/dev/null\necho 'tests failed: 1' >&2\nexit 2\n",
    );
    hooks_config(
        &c,
        &format!(
            "  post_tool_call:\n    - command: {}\n      format: claude\n      matcher: Write\n    - command: {}\n      format: claude\n      matcher: Write\n    - command: {}\n      format: claude\n      matcher: Write\n",
            context.display(),
            block.display(),
            exit2.display()
        ),
    );
    let session = one_turn(
        "write",
        "      - tool: write_file\n        args: {path: a.py, content: x}\n      - final: written\n        echo: true\n",
    );
    let (ran, _) = c.run(&session, "deny");
    let work = c.work().display().to_string();
    ran.says(&[&format!(
        "[a tool result the model received: {{\"written\":\"a.py\",\"bytes\":1}}\n\nlint: {work}/a.py has 2 warnings\n\nreview {work}/a.py before going on\n\ntests failed: 1]"
    )]);
}

#[test]
fn post_tool_use_fires_as_in_claude_code_and_failure_hooks_apart() {
    // A blocked call fires nothing; a failed one fires only PostToolUseFailure hooks; a
    // successful one only PostToolUse hooks. A Hermes-format hook sees all three.
    let c = Corpus::new("post_tool_call", None, "validate_bash.py");
    let log = c.home().join("log.txt");
    let record = |name: &str| {
        let path = c.home().join(format!("{name}.py"));
        Corpus::python_script(
            &path,
            &format!(
                "import json, sys\nd = json.load(sys.stdin)\nname = d.get('hook_event_name')\nstatus = (d.get('extra') or {{}}).get('status', '')\nopen({:?}, 'a').write(f'{name} {{name}} {{status}}\\n')\n",
                log.display().to_string()
            ),
        );
        path
    };
    let (ok, failed, plain) = (record("ok"), record("failed"), record("hermes"));
    let guard = c.home().join("guard.sh");
    bash_script(&guard, "cat >/dev/null\necho 'no rm' >&2\nexit 2\n");
    hooks_config(
        &c,
        &format!(
            "  pre_tool_call:\n    - command: {}\n      format: claude\n      matcher: Bash\n  post_tool_call:\n    - command: {}\n      format: claude\n    - command: {}\n      format: claude\n      claude_event: PostToolUseFailure\n    - command: {}\n",
            guard.display(),
            ok.display(),
            failed.display(),
            plain.display()
        ),
    );
    let session = one_turn(
        "go",
        "      - tool: terminal\n        args: {command: rm -rf x}\n      - tool: read_file\n        args: {path: missing.txt}\n      - tool: write_file\n        args: {path: fine.txt, content: ok}\n      - final: went\n",
    );
    let (ran, _) = c.run(&session, "deny");
    ran.says(&["assistant: went"]);
    // Hooks of one priority run together, so the lines of one call come in any order.
    let mut lines: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "failed PostToolUseFailure ",
            "hermes post_tool_call blocked",
            "hermes post_tool_call error",
            "hermes post_tool_call ok",
            "ok PostToolUse ",
        ],
        "{}",
        ran.describe()
    );
}

#[test]
fn a_stop_hook_reads_the_sessions_transcript_in_claude_codes_shape() {
    // As published Stop hooks do: find the last assistant text in transcript_path and keep
    // the agent working until it says the tests pass; also keep a copy of the transcript.
    let c = Corpus::new("post_llm_call", None, "validate_bash.py");
    let copy = c.home().join("copy.jsonl");
    let hook = c.home().join("tests_pass.py");
    Corpus::python_script(
        &hook,
        &format!(
            "import json, shutil, sys\nd = json.load(sys.stdin)\npath = d['transcript_path']\nshutil.copy(path, {:?})\nlast = ''\nfor line in open(path):\n    e = json.loads(line)\n    if e.get('type') == 'assistant':\n        for part in e['message']['content']:\n            if part.get('type') == 'text':\n                last = part['text']\nif 'tests pass' not in last:\n    print(json.dumps({{'decision': 'block', 'reason': 'run the tests first'}}))\n",
            copy.display().to_string()
        ),
    );
    hooks_config(
        &c,
        &format!(
            "  post_llm_call:\n    - command: {}\n      format: claude\n",
            hook.display()
        ),
    );
    let session = "session_id: transcript-1\nturns:\n  - user: fix it\n    steps:\n      - tool: terminal\n        args: {command: echo fixed}\n      - final: fixed it\n    continuations:\n      - steps:\n          - final: all tests pass\n";
    let (ran, _) = c.run(session, "deny");
    ran.says(&[
        "assistant: fixed it",
        "[a Stop hook keeps the agent working: run the tests first]",
        "assistant: all tests pass",
    ]);
    let transcript = c.home().join("sessions/transcript-1.jsonl");
    let lines: Vec<Value> = std::fs::read_to_string(&transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let shape: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            let content = &l["message"]["content"];
            let kind = match content {
                Value::String(_) => "text".to_string(),
                other => other[0]["type"].as_str().unwrap().to_string(),
            };
            (l["type"].as_str().unwrap().to_string(), kind)
        })
        .collect();
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        shape,
        pairs(&[
            ("user", "text"),
            ("assistant", "tool_use"),
            ("user", "tool_result"),
            ("assistant", "text"),
            ("user", "text"),
            ("assistant", "text"),
        ])
    );
    assert_eq!(lines[1]["message"]["content"][0]["name"], "Bash");
    assert!(lines.iter().all(|l| l["sessionId"] == "transcript-1"));
    // The hook's last copy, at the second Stop, already held the answer it stopped on.
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap(),
        std::fs::read_to_string(&transcript).unwrap()
    );
}

#[test]
fn hooks_test_keeps_a_supplied_transcript_path() {
    let c = Corpus::new("post_llm_call", None, "validate_bash.py");
    let hook = c.home().join("echo_path.py");
    Corpus::python_script(
        &hook,
        "import json, sys\nd = json.load(sys.stdin)\nprint('saw ' + str(d['transcript_path']), file=sys.stderr)\n",
    );
    hooks_config(
        &c,
        &format!(
            "  post_llm_call:\n    - command: {}\n      format: claude\n",
            hook.display()
        ),
    );
    c.test(
        "post_llm_call",
        r#"{"session_id": "s1", "transcript_path": "/tmp/given.jsonl", "hook_event_name": "Stop", "stop_hook_active": false}"#,
    )
    .says(&["saw /tmp/given.jsonl"]);
}

#[test]
fn an_export_written_to_claude_env_file_reaches_later_terminal_commands() {
    let c = Corpus::new("on_session_start", None, "validate_bash.py");
    let hook = c.home().join("env_setup.sh");
    // `set -u`: a script that needs the variable fails loudly without it.
    bash_script(
        &hook,
        "set -euo pipefail\ncat >/dev/null\necho 'export GREETING=\"hello from SessionStart\"' >> \"$CLAUDE_ENV_FILE\"\n",
    );
    hooks_config(
        &c,
        &format!(
            "  on_session_start:\n    - command: {}\n      format: claude\n",
            hook.display()
        ),
    );
    let session = one_turn(
        "greet",
        "      - tool: terminal\n        args: {command: 'echo \"$GREETING\"'}\n      - final: greeted\n",
    );
    let (ran, _) = c.run(&session, "deny");
    ran.says(&["hello from SessionStart", "assistant: greeted"]);
}

/// A project's four imported hooks in the moo.md style, each `bash .claude/scripts/<x>.sh`
/// relative to the project: a session surface (SessionStart context from a project file), a
/// reference guard (no reading `refs/`), a roadmap guard (no writing `ROADMAP.md`) and a Stop
/// reminder (a note in the project). Run with `--cwd` from another directory they decide
/// as they do when hermes starts in the project.
#[test]
fn a_projects_moo_style_hooks_decide_the_same_under_cwd_as_in_the_project() {
    let c = Corpus::new("pre_tool_call", Some("Bash"), "validate_bash.py");
    let scripts = c.work().join(".claude/scripts");
    std::fs::create_dir_all(&scripts).unwrap();
    std::fs::create_dir_all(c.work().join("refs")).unwrap();
    std::fs::write(c.work().join("refs/paper.md"), "long reference").unwrap();
    std::fs::write(c.work().join(".claude/state.md"), "phase 2 of 3").unwrap();
    bash_script(
        &scripts.join("session-surface.sh"),
        "cat >/dev/null\necho \"Project state: $(cat .claude/state.md)\"\n",
    );
    bash_script(
        &scripts.join("reference-guard.sh"),
        "input=$(cat)\ncase \"$input\" in *'/refs/'*) echo 'reference guard: read refs/SUMMARY.md instead' >&2; exit 2;; esac\n",
    );
    bash_script(
        &scripts.join("roadmap-guard.sh"),
        "input=$(cat)\ncase \"$input\" in *ROADMAP.md*) echo 'roadmap guard: the roadmap is edited by people' >&2; exit 2;; esac\n",
    );
    bash_script(
        &scripts.join("stop-reminder.sh"),
        "cat >/dev/null\necho reminded >> .claude/reminders.log\n",
    );
    std::fs::write(
        c.home().join("config.yaml"),
        "hooks:\n  on_session_start:\n    - command: bash .claude/scripts/session-surface.sh\n      format: claude\n  pre_tool_call:\n    - command: bash .claude/scripts/reference-guard.sh\n      matcher: Read\n      format: claude\n    - command: bash .claude/scripts/roadmap-guard.sh\n      matcher: Write\n      format: claude\n  post_llm_call:\n    - command: bash .claude/scripts/stop-reminder.sh\n      format: claude\n",
    )
    .unwrap();
    let session = c.home().join("moo.yaml");
    std::fs::write(
        &session,
        one_turn(
            "work",
            "      - tool: read_file\n        args: {path: refs/paper.md}\n      - tool: write_file\n        args: {path: ROADMAP.md, content: mine}\n      - final: done\n        echo: true\n",
        ),
    )
    .unwrap();
    let run_from = |dir: &Path| {
        let ran = Ran(c.hermes_from(
            dir,
            &[
                "run",
                session.to_str().unwrap(),
                "--cwd",
                c.work().to_str().unwrap(),
            ],
        ));
        ran.says(&[
            "reference guard: read refs/SUMMARY.md instead",
            "roadmap guard: the roadmap is edited by people",
            "Project state: phase 2 of 3",
            "assistant: done",
        ]);
        ran.0.stdout
    };
    let in_project = run_from(c.work());
    let elsewhere = tempfile::tempdir().unwrap();
    let from_elsewhere = run_from(elsewhere.path());
    assert_eq!(
        String::from_utf8_lossy(&in_project).replace(&c.work().display().to_string(), "<p>"),
        String::from_utf8_lossy(&from_elsewhere).replace(&c.work().display().to_string(), "<p>"),
    );
    assert!(!c.work().join("ROADMAP.md").exists());
    assert_eq!(
        std::fs::read_to_string(c.work().join(".claude/reminders.log")).unwrap(),
        "reminded\nreminded\n"
    );
}
