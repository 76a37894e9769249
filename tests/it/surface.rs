//! The plugin surface of interface 1.3, in real `hermes run` sessions: a native plugin's
//! tool, command and `llm_request` middleware (in process and in a worker), the hooks
//! Hermes added since the seed for each kind of author (native, Python, shell), the
//! `approve` answer of `pre_tool_call`, and offers that fail or hang.

use std::path::Path;

use hermes_tests::support::{Run, TestHome, built};

/// Runs `script` (session YAML) in a fresh work directory of `home`, approvals denied.
fn session(home: &TestHome, work: &Path, script: &str, extra: &[&str]) -> Run {
    let file = work.join("s.yaml");
    std::fs::write(&file, script).unwrap();
    let mut args = vec![
        "--accept-hooks",
        "run",
        file.to_str().unwrap(),
        "--cwd",
        work.to_str().unwrap(),
        "--approvals",
        "deny",
        "--trace",
        "off",
    ];
    args.extend_from_slice(extra);
    home.hermes(&args, &[])
}

/// The toolbox plugin with routing on ("hi" goes to `small`), a shell hook that keeps
/// `read_file` away from secret.txt, and a work directory with two files.
fn toolbox_home(isolation: Option<&str>) -> (TestHome, tempfile::TempDir) {
    let home = TestHome::new();
    home.install("toolbox", "toolbox", None, None);
    let guard = home.script(
        "guard.sh",
        "#!/bin/sh\ngrep -q secret.txt && echo '{\"action\": \"block\", \"message\": \"secret.txt is off limits\"}'\nexit 0\n",
    );
    let isolation = isolation
        .map(|i| format!("  isolation:\n    toolbox: {i}\n"))
        .unwrap_or_default();
    home.config(&format!(
        "plugins:\n  enabled: [toolbox]\n  settings:\n    toolbox: {{small_model: small, short_message_chars: 2}}\n{isolation}hooks:\n  pre_tool_call:\n    - matcher: read_file\n      command: {}\n",
        guard.display()
    ));
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.txt"), "one two\nthree\n").unwrap();
    std::fs::write(work.path().join("secret.txt"), "hunter2\n").unwrap();
    (home, work)
}

const TOOLBOX_SESSION: &str = r#"
turns:
  - user: count the words in my notes, please
    steps:
      - tool: text_stats
        args: {path: notes.txt}
      - tool: text_stats
        args: {path: secret.txt}
      - final: counted
  - user: ping
    steps:
      - final: the model was asked
  - user: hi
    steps:
      - final: hello
        echo: true
  - user: /toolbox
"#;

fn assert_toolbox_session(run: &Run) {
    run.expect_code(0);
    let out = run.stdout();
    assert!(
        out.contains(r#"<- {"lines":2,"words":3,"bytes":14,"path":"notes.txt"}"#),
        "{}",
        run.describe()
    );
    // The plugin's read went through the user's guard, as the model's own would.
    assert!(
        out.contains("tool 'text_stats' of plugin 'toolbox' failed: cannot read secret.txt: secret.txt is off limits"),
        "{}",
        run.describe()
    );
    assert!(!out.contains("hunter2"), "{}", run.describe());
    // Answered by the middleware: the scripted model was never asked.
    assert!(out.contains("assistant: pong\n"), "{}", run.describe());
    assert!(!out.contains("the model was asked"), "{}", run.describe());
    // Routed by the middleware, and the tool is offered to the model.
    let routed = out
        .lines()
        .find(|l| l.contains("[the request after middleware: "))
        .unwrap_or_else(|| panic!("{}", run.describe()));
    assert!(routed.contains(r#""model":"small""#), "{routed}");
    assert!(routed.contains(r#""text_stats""#), "{routed}");
    assert!(
        out.contains(
            "toolbox: 2 text_stats call(s), 1 request(s) routed, 1 answered without the model"
        ),
        "{}",
        run.describe()
    );
}

#[test]
fn a_native_plugin_tool_command_and_middleware_serve_a_real_session() {
    let (home, work) = toolbox_home(None);
    let listed = home.hermes(&["plugins", "list", "--json"], &[]);
    let list: serde_json::Value = serde_json::from_str(&listed.stdout()).unwrap();
    let plugin = &list["plugins"][0];
    assert_eq!(
        plugin["tools"],
        serde_json::json!(["text_stats"]),
        "{list:#}"
    );
    assert_eq!(
        plugin["commands"],
        serde_json::json!(["toolbox"]),
        "{list:#}"
    );
    assert_eq!(
        plugin["middleware"],
        serde_json::json!(["llm_request"]),
        "{list:#}"
    );
    let run = session(&home, work.path(), TOOLBOX_SESSION, &[]);
    assert_toolbox_session(&run);
}

#[test]
fn the_same_offers_run_in_an_isolated_plugins_worker() {
    let (home, work) = toolbox_home(Some("process"));
    let run = session(&home, work.path(), TOOLBOX_SESSION, &[]);
    assert_toolbox_session(&run);
}

fn faulty_home(timeout: &str) -> TestHome {
    let home = TestHome::new();
    let manifest = format!(
        "name: faulty\nversion: 0.1.0\nlibrary: libfaulty.so\ntimeout: {timeout}\nconfig: {{tools: true}}\n"
    );
    home.install_lib("faulty", &built().lib("faulty"), &manifest, None, None);
    home.config("plugins:\n  enabled: [faulty]\n");
    home
}

#[test]
fn a_tool_that_hangs_panics_or_runs_twice_is_contained_and_the_session_goes_on() {
    let home = faulty_home("1");
    let work = tempfile::tempdir().unwrap();
    let run = session(
        &home,
        work.path(),
        r#"
turns:
  - user: go
    steps:
      - tool: sleepy
        args: {seconds: 0.1}
      - tool: sleepy
        args: {seconds: 30}
      - tool: panicky
      - tool: twice
      - final: still here
  - user: /boom
"#,
        &[],
    );
    run.expect_code(0);
    let out = run.stdout();
    assert!(out.contains("<- woke up\n"), "{}", run.describe());
    assert!(
        out.contains("timed out after 1 s (the `timeout` of plugin 'faulty')"),
        "{}",
        run.describe()
    );
    assert!(
        out.contains("failed: deliberate panic in a tool"),
        "{}",
        run.describe()
    );
    // The wrapper's second `next` was refused: the tool ran once.
    assert!(
        out.contains(r#"<- first: "ran"; second: Middleware 'tool_execution' callback of faulty called next_call() more than once"#),
        "{}",
        run.describe()
    );
    assert!(out.contains("assistant: still here"), "{}", run.describe());
    assert!(out.contains("the command blew up"), "{}", run.describe());
}

/// A Python plugin that records, in `seen.jsonl` of its directory, what the hooks added
/// since the seed gave it, and asks for approval of `deploy` commands.
const WATCHER: &str = r#"
import json, os
LOG = os.path.join(os.path.dirname(__file__), "seen.jsonl")
def _log(hook, **fields):
    with open(LOG, "a") as f:
        f.write(json.dumps({"hook": hook, **fields}) + "\n")
def on_delta(delta, kind, **kw): _log("on_stream_delta", delta=delta, delta_kind=kind)
def on_end(final_text, finished, error, **kw): _log("on_stream_end", final_text=final_text, finished=finished)
def on_interim(text, already_streamed, **kw): _log("on_interim_message", text=text)
def on_error(status_code, reason, error, retryable, **kw):
    _log("api_request_error", status_code=status_code, reason=reason, error=error, retryable=retryable)
def on_child(parent_session_id, child_role, child_goal, child_subagent_id, **kw):
    _log("subagent_start", role=child_role, goal=child_goal)
def on_claimed(task_id, board, run_id, **kw): _log("kanban_task_claimed", task_id=task_id, board=board, run_id=run_id)
def verify(attempt, changed_paths, final_response, coding, **kw):
    _log("pre_verify", attempt=attempt, changed_paths=changed_paths, final=final_response)
def gate(tool_name, args, **kw):
    if tool_name == "terminal" and "deploy" in args.get("command", ""):
        return {"action": "approve", "message": "deploys need a human", "rule_key": "deploy:prod"}
def register(ctx):
    ctx.register_hook("on_stream_delta", on_delta)
    ctx.register_hook("on_stream_end", on_end)
    ctx.register_hook("on_interim_message", on_interim)
    ctx.register_hook("api_request_error", on_error)
    ctx.register_hook("subagent_start", on_child)
    ctx.register_hook("kanban_task_claimed", on_claimed)
    ctx.register_hook("pre_verify", verify)
    ctx.register_hook("pre_tool_call", gate)
"#;

fn seen(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("seen.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_kind_of_author_gets_the_new_hooks_at_their_real_moment() {
    let home = TestHome::new();
    let watcher = home.path().join("plugins/watcher");
    std::fs::create_dir_all(&watcher).unwrap();
    std::fs::write(
        watcher.join("plugin.yaml"),
        "name: watcher\nversion: 0.1.0\n",
    )
    .unwrap();
    std::fs::write(watcher.join("__init__.py"), WATCHER).unwrap();
    // A shell hook in Claude's Stop shape keeps the agent working once, a native one once
    // more: two nudges, each answered by a scripted continuation.
    let nudge = home.script(
        "nudge.sh",
        "#!/bin/sh\ngrep -q '\"attempt\": 1' && echo '{\"decision\": \"block\", \"reason\": \"run the linter\"}'\nexit 0\n",
    );
    home.install("toolbox", "toolbox", None, None);
    home.config(&format!(
        "plugins:\n  enabled: [toolbox, watcher]\n  settings:\n    toolbox: {{verify_reminder: now the tests}}\nhooks:\n  pre_verify:\n    - command: {}\n",
        nudge.display()
    ));
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("child.yaml"),
        "turns:\n  - user: count the files\n    steps:\n      - final: three\n",
    )
    .unwrap();
    let run = session(
        &home,
        work.path(),
        r#"
turns:
  - user: write the file
    steps:
      - tool: write_file
        args: {path: out.txt, content: hi}
        interim: "Writing it now."
      - stream: ["Do", "ne", "."]
    continuations:
      - steps:
          - final: linted
      - steps:
          - tool: terminal
            args: {command: "echo deploy"}
          - final: tests pass
  - user: delegate
    steps:
      - tool: delegate_task
        args: {tasks: [{script: child.yaml, role: counter}]}
      - final: ok
  - user: fail
    steps:
      - error: rate limited
        status: 429
"#,
        &[],
    );
    run.expect_code(0);
    let out = run.stdout();
    // toolbox (native) first, in plugin order; its reminder, then the shell hook's.
    assert!(
        out.contains("[a pre_verify hook keeps the agent working: now the tests]"),
        "{}",
        run.describe()
    );
    assert!(
        out.contains("[a pre_verify hook keeps the agent working: run the linter]"),
        "{}",
        run.describe()
    );
    assert!(
        out.contains("assistant (interim): Writing it now."),
        "{}",
        run.describe()
    );
    assert!(out.contains("assistant: tests pass"), "{}", run.describe());
    assert!(
        !out.contains("assistant: Done."),
        "held back while nudged: {}",
        run.describe()
    );
    // The approve answer sent the deploy to the approval gate, which denied it.
    assert!(
        out.contains("terminal not run: a hook asked for approval (deploys need a human)"),
        "{}",
        run.describe()
    );
    let seen = seen(&watcher);
    let of = |hook: &str| -> Vec<&serde_json::Value> {
        seen.iter().filter(|e| e["hook"] == hook).collect()
    };
    let deltas: Vec<&str> = of("on_stream_delta")
        .iter()
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["Do", "ne", "."]);
    assert_eq!(of("on_stream_delta")[0]["delta_kind"], "text");
    assert_eq!(of("on_stream_end")[0]["final_text"], "Done.");
    assert_eq!(of("on_interim_message")[0]["text"], "Writing it now.");
    let verified: Vec<(i64, &str)> = of("pre_verify")
        .iter()
        .map(|e| (e["attempt"].as_i64().unwrap(), e["final"].as_str().unwrap()))
        .collect();
    assert_eq!(verified, [(0, "Done."), (1, "linted"), (2, "tests pass")]);
    assert_eq!(
        of("pre_verify")[0]["changed_paths"],
        serde_json::json!(["out.txt"])
    );
    assert_eq!(of("subagent_start")[0]["role"], "counter");
    assert_eq!(of("subagent_start")[0]["goal"], "count the files");
    let failed = of("api_request_error");
    assert_eq!(failed[0]["status_code"], 429);
    assert_eq!(failed[0]["reason"], "rate_limit");
    assert_eq!(failed[0]["retryable"], false);
    // A host without a task board: the kanban hooks fire by hand.
    let fired = home.hermes(
        &[
            "plugins",
            "fire",
            "kanban_task_claimed",
            "--payload",
            r#"{"task_id": "T-7", "board": "ops", "run_id": 3, "profile_name": "worker"}"#,
        ],
        &[],
    );
    fired.expect_code(0);
    let claimed = self::seen(&watcher)
        .into_iter()
        .find(|e| e["hook"] == "kanban_task_claimed")
        .unwrap_or_else(|| panic!("{}", fired.describe()));
    assert_eq!(claimed["task_id"], "T-7");
    assert_eq!(claimed["run_id"], 3);
}

#[test]
fn a_bound_on_nudges_lets_an_always_continuing_hook_finish() {
    let home = TestHome::new();
    let always = home.script(
        "always.sh",
        "#!/bin/sh\necho '{\"action\": \"continue\", \"message\": \"again\"}'\n",
    );
    home.config(&format!(
        "agent:\n  max_verify_nudges: 1\nhooks:\n  pre_verify:\n    - command: {}\n",
        always.display()
    ));
    let work = tempfile::tempdir().unwrap();
    let run = session(
        &home,
        work.path(),
        r#"
turns:
  - user: write
    steps:
      - tool: write_file
        args: {path: a.txt, content: x}
      - final: first
    continuations:
      - steps: [{final: second}]
      - steps: [{final: third}]
"#,
        &[],
    );
    run.expect_code(0);
    let out = run.stdout();
    assert_eq!(
        out.matches("[a pre_verify hook keeps the agent working: again]")
            .count(),
        1,
        "{}",
        run.describe()
    );
    assert!(out.contains("assistant: second"), "{}", run.describe());
    assert!(
        run.stderr().contains("agent.max_verify_nudges is 1"),
        "{}",
        run.describe()
    );
}

#[test]
fn hermes_bench_measures_a_plugin_tool_through_its_gates_beside_the_tool_alone() {
    let home = TestHome::new();
    home.install("toolbox", "toolbox", None, None);
    home.config("plugins:\n  enabled: [toolbox]\n");
    let payload = home.path().join("args.json");
    std::fs::write(&payload, r#"{"args": {"text": "one two three"}}"#).unwrap();
    let run = home.hermes(
        &[
            "bench",
            "@tool/text_stats",
            "--payload-file",
            payload.to_str().unwrap(),
            "--iterations",
            "50",
            "--json",
        ],
        &[],
    );
    run.expect_code(0);
    let doc: serde_json::Value = serde_json::from_str(&run.stdout()).unwrap();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            hermes_tests::support::workspace().join("schema/bench.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    crate::schema::validate(&schema, &schema, &doc).unwrap_or_else(|e| panic!("{e}\n{doc:#}"));
    let row = doc["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["measure"] == "tool")
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(row["hook"], "toolbox::text_stats", "{row:#}");
    assert_eq!(
        (row["n"].as_u64(), row["errors"].as_u64()),
        (Some(50), Some(0)),
        "{row:#}"
    );
    assert!(row["bare_p50_ns"].as_u64().unwrap() > 0, "{row:#}");
    let unknown = home.hermes(&["bench", "@tool/nope"], &[]);
    unknown.expect_code(2);
    assert!(
        unknown
            .stderr()
            .contains("no plugin offers tool 'nope' (tools: text_stats)"),
        "{}",
        unknown.describe()
    );
}
