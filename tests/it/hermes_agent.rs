//! Rust plugins inside the real Hermes Agent (`hermes-agent` from PyPI, pinned): the
//! `hermes-hooks` Python package built from `hermes-hooks-py/` by maturin and installed
//! into Hermes's virtualenv, and real `hermes -z` turns against a scripted
//! OpenAI-compatible model server of our own on loopback. What the model server was sent
//! is what Hermes did: the tool results and the user message it built.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use hermes_tests::support::{TestHome, built, run_ok, workspace};

/// The Hermes Agent release the tests run against.
const HERMES_AGENT: &str = "hermes-agent==0.19.0";

/// The virtualenv with Hermes Agent and the package built from this checkout, made once
/// per test run (Hermes itself is installed once per checkout and kept in `target/`).
fn venv() -> &'static Path {
    static VENV: OnceLock<PathBuf> = OnceLock::new();
    VENV.get_or_init(|| {
        let root = workspace();
        let venv = root.join("target").join("hermes-agent-venv");
        let python = venv.join("bin/python");
        let has_hermes = Command::new(&python)
            .args(["-c", "import hermes_cli.plugins, maturin"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !has_hermes {
            let _ = std::fs::remove_dir_all(&venv);
            run_ok(Command::new("python3").args(["-m", "venv"]).arg(&venv));
            run_ok(
                Command::new(venv.join("bin/pip"))
                    .args(["install", "-q", HERMES_AGENT, "maturin>=1.7,<2"])
                    .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
            );
        }
        // `pip install <dir>` as a user runs it, with maturin from the venv rather than a
        // fresh download per run, a debug build (the tests' plugins are debug builds too),
        // and the nested-build target directory (the outer `cargo test` holds its own).
        built();
        run_ok(
            Command::new(venv.join("bin/pip"))
                .args([
                    "install",
                    "-q",
                    "--no-build-isolation",
                    "--no-deps",
                    "--force-reinstall",
                ])
                .arg(root.join("hermes-hooks-py"))
                .env("PATH", path_with(&venv))
                .env("MATURIN_PEP517_ARGS", "--profile dev")
                .env("CARGO_TARGET_DIR", built().target_dir())
                .env("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
        );
        venv
    })
}

/// Runs `script` on the virtualenv's Python with `HERMES_HOME` (and `HOME`) set to `home`,
/// as Hermes's own processes run; fails the test when it fails.
fn python_in(home: &Path, script: &str) -> Output {
    let venv = venv();
    run_ok(
        Command::new(venv.join("bin/python"))
            .args(["-c", script])
            .env("HERMES_HOME", home)
            .env("HOME", home)
            .env("PATH", path_with(venv)),
    )
}

fn path_with(venv: &Path) -> String {
    format!(
        "{}:{}",
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// One scripted model answer.
enum Step {
    /// A final answer.
    Text(&'static str),
    /// A call of `tool` with `args`.
    Tool(&'static str, Value),
}

/// An OpenAI-compatible chat-completions server on loopback that answers from a script,
/// streaming as Hermes asks, and keeps every request body it was sent.
struct ModelServer {
    port: u16,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl ModelServer {
    fn start(script: Vec<Step>) -> ModelServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(std::collections::VecDeque::from(script)));
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (seen, script) = (seen.clone(), script.clone());
                std::thread::spawn(move || serve(stream, &seen, &script));
            }
        });
        ModelServer { port, requests }
    }

    /// The chat-completion requests so far.
    fn requests(&self) -> Vec<Value> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    stream: TcpStream,
    seen: &Mutex<Vec<Value>>,
    script: &Mutex<std::collections::VecDeque<Step>>,
) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let mut stream = reader.into_inner();
    if request_line.starts_with("GET") {
        let models = json!({"object": "list", "data": [{"id": "scripted", "object": "model"}]});
        let text = models.to_string();
        let _ = write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
            text.len()
        );
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    seen.lock().unwrap().push(request);
    let step = script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Step::Text("done"));
    let (delta, finish) = match step {
        Step::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Step::Tool(name, args) => (
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": name, "arguments": args.to_string()}}]}),
            "tool_calls",
        ),
    };
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "scripted",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\ndata: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(delta, Value::Null),
        chunk(json!({}), json!(finish))
    );
}

/// A home whose `config.yaml` points Hermes at `server` with no network lookups, enables
/// `hermes-hooks` and `plugins`, and holds those plugins' debug builds with their shims.
fn hermes_home(server: &ModelServer, plugins: &[(&str, Option<&str>)]) -> TestHome {
    let home = TestHome::new();
    let mut enabled = vec!["hermes-hooks".to_string()];
    for (package, config) in plugins {
        let dir = home.install(package, package, None, *config);
        std::fs::write(
            dir.join(hermes_host::plugins::hermes_agent::FILE),
            hermes_host::plugins::hermes_agent::SHIM,
        )
        .unwrap();
        enabled.push(package.to_string());
    }
    home.config(&format!(
        "model:\n  default: scripted\n  provider: custom\n  base_url: http://127.0.0.1:{}/v1\n  api_key: test-key\n  context_length: 128000\n\
         security:\n  tirith_enabled: false\n  allow_lazy_installs: false\n\
         plugins:\n  enabled: [{}]\n",
        server.port,
        enabled.join(", ")
    ));
    home
}

/// `hermes <args>` of Hermes Agent in `home`, from a scratch directory.
fn hermes(home: &TestHome, args: &[&str]) -> Output {
    let venv = venv();
    let work = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(venv.join("bin/hermes"));
    cmd.args(args)
        .current_dir(work.path())
        .env("HERMES_HOME", home.path())
        .env("HOME", home.path())
        .env("PATH", path_with(venv))
        .env_remove("HERMES_PLUGIN_WORKER")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENROUTER_API_KEY");
    cmd.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Hermes's own logs of the home (its warnings go there, not to a `-z` turn's stderr).
fn hermes_logs(home: &TestHome) -> String {
    let mut all = String::new();
    for name in ["agent.log", "errors.log"] {
        all.push_str(
            &std::fs::read_to_string(home.path().join("logs").join(name)).unwrap_or_default(),
        );
    }
    all
}

/// The `tool` messages of the last request: what Hermes told the model its tools did.
fn tool_results(server: &ModelServer) -> Vec<String> {
    let requests = server.requests();
    let last = requests.last().expect("Hermes sent a request");
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn turn_ok(home: &TestHome, prompt: &str) -> String {
    let out = hermes(home, &["-z", prompt]);
    assert!(
        out.status.success(),
        "hermes -z failed ({}):\n{}\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr),
        hermes_logs(home)
    );
    text(&out.stdout)
}

#[test]
fn the_guardrail_plugin_blocks_a_command_inside_hermes_agent() {
    let server = ModelServer::start(vec![
        Step::Tool("terminal", json!({"command": "rm -rf /"})),
        Step::Text("I did not run it."),
    ]);
    let home = hermes_home(&server, &[("guardrail", None)]);
    let stdout = turn_ok(&home, "clean the disk");
    assert_eq!(stdout.trim(), "I did not run it.");
    let results = tool_results(&server);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].contains("Blocked by guardrail: recursive delete of /, ~ or *"),
        "the model should see the guardrail's message as the tool result: {results:?}"
    );
    // Hermes loaded the directory through its shim, under the plugin's own name.
    let logs = hermes_logs(&home);
    assert!(!logs.contains("No __init__.py"), "{logs}");
    assert!(
        !logs.contains("Failed to load plugin 'guardrail'"),
        "{logs}"
    );
}

#[test]
fn the_memory_plugins_context_reaches_the_model_request() {
    let server = ModelServer::start(vec![Step::Text("Twelve.")]);
    let home = hermes_home(&server, &[("memory", None)]);
    std::fs::write(
        home.path().join("plugins/memory/memory.jsonl"),
        "{\"ts\":\"2026-01-02T03:04:05.000Z\",\"session_id\":\"s0\",\"fact\":\"the orion cluster has 12 nodes\"}\n",
    )
    .unwrap();
    assert_eq!(
        turn_ok(&home, "how many nodes does orion have?").trim(),
        "Twelve."
    );
    let requests = server.requests();
    let user = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    assert!(user.contains("the orion cluster has 12 nodes"), "{user}");
    assert!(user.contains("how many nodes does orion have?"), "{user}");
}

#[test]
fn a_panicking_plugin_is_skipped_and_the_turn_completes() {
    let server = ModelServer::start(vec![
        Step::Tool("terminal", json!({"command": "rm -rf /"})),
        Step::Text("Finished."),
    ]);
    // `faulty` panics in pre_tool_call; the guardrail after it still decides. (A `-z` turn
    // turns Hermes's logging off, so what it logged is checked below, without `-z`.)
    let home = hermes_home(&server, &[("faulty", None), ("guardrail", None)]);
    assert_eq!(turn_ok(&home, "clean the disk").trim(), "Finished.");
    let results = tool_results(&server);
    assert!(
        results.iter().any(|r| r.contains("Blocked by guardrail")),
        "the guardrail decided after the panic: {results:?}"
    );
    let first = server.requests()[0]["messages"].to_string();
    assert!(
        first.contains("context from faulty"),
        "faulty's other hooks ran: {first}"
    );
}

#[test]
fn an_isolated_crashing_plugin_is_survived() {
    let server = ModelServer::start(vec![
        Step::Tool("terminal", json!({"command": "echo survived"})),
        Step::Text("Finished."),
    ]);
    let home = hermes_home(&server, &[("crashy", Some("{mode: segfault}"))]);
    assert_eq!(turn_ok(&home, "say hello").trim(), "Finished.");
    let results = tool_results(&server);
    assert!(
        results.iter().any(|r| r.contains("survived")),
        "the tool ran: {results:?}"
    );
    // It was there to crash: Hermes registered its callback, run by the package's worker.
    let out = python_in(
        home.path(),
        r#"
import hermes_cli.plugins as plugins
manager = plugins.get_plugin_manager()
manager.discover_and_load()
print(manager._plugins["crashy"].hooks_registered, manager._plugins["crashy"].error)
"#,
    );
    assert_eq!(text(&out.stdout), "['pre_tool_call'] None\n");
}

#[test]
fn hermes_logs_a_panic_or_a_crash_as_a_failed_callback_and_goes_on() {
    let server = ModelServer::start(Vec::new());
    let home = hermes_home(
        &server,
        &[
            ("faulty", None),
            ("crashy", Some("{mode: segfault}")),
            ("guardrail", None),
        ],
    );
    let stdout = fire_in_hermes_plugin_manager(&home);
    let results = stdout
        .lines()
        .find(|l| l.starts_with("results:"))
        .unwrap_or_default();
    assert_eq!(
        results.matches("Blocked by guardrail").count(),
        1,
        "one guardrail callback after the forced rediscovery: {stdout}"
    );
    assert!(
        stdout.contains("Hook 'pre_tool_call' callback faulty::explode raised: faulty::explode in hook 'pre_tool_call': deliberate panic in pre_tool_call for terminal"),
        "{stdout}"
    );
    // Hermes's line only, once per firing: the library does not log a failure it returns.
    assert_eq!(
        stdout.matches("deliberate panic in pre_tool_call").count(),
        2,
        "{stdout}"
    );
    assert!(
        stdout.contains("Plugin 'crashy' crashed in hook 'pre_tool_call'")
            && stdout.contains("SIGSEGV"),
        "{stdout}"
    );
    assert!(!stdout.contains("No __init__.py"), "{stdout}");
}

/// Hermes's own plugin manager, as its agent loop calls it: discovers and loads the home's
/// plugins (and again, forced), fires `pre_tool_call` twice, and prints the results and every
/// log record of WARNING and above.
fn fire_in_hermes_plugin_manager(home: &TestHome) -> String {
    let script = r#"
import logging
records = []
class Keep(logging.Handler):
    def emit(self, record):
        records.append(record.getMessage())
logging.getLogger().addHandler(Keep())
logging.getLogger().setLevel(logging.WARNING)
import hermes_cli.plugins as plugins
manager = plugins.get_plugin_manager()
manager.discover_and_load()
# A forced rediscovery (config changed) clears Hermes's hooks: the natives come back, once.
manager.discover_and_load(force=True)
for _ in range(2):
    results = manager.invoke_hook("pre_tool_call", tool_name="terminal", args={"command": "rm -rf /"})
print("results:", results)
print(chr(10).join(records))
"#;
    let out = python_in(home.path(), script);
    text(&out.stdout)
}

#[test]
fn a_plugin_that_panics_in_register_fails_to_load_and_hermes_starts() {
    let server = ModelServer::start(Vec::new());
    let home = hermes_home(
        &server,
        &[
            ("faulty", Some("{panic_in_register: true}")),
            ("guardrail", None),
        ],
    );
    let stdout = fire_in_hermes_plugin_manager(&home);
    assert!(stdout.contains("Blocked by guardrail"), "{stdout}");
    assert!(
        stdout.contains("Failed to load plugin 'faulty': Rust plugin 'faulty' did not load:")
            && stdout.contains("deliberate panic in register"),
        "{stdout}"
    );
}

#[test]
fn python_hosts_get_the_facade() {
    let home = TestHome::new();
    home.install("guardrail", "guardrail", None, None);
    home.install("toolbox", "toolbox", None, None);
    home.config("plugins:\n  enabled: [guardrail, toolbox]\n");
    let script = r#"
import sys, hermes_hooks
hooks = hermes_hooks.Hooks(sys.argv[1])
assert [t["name"] for t in hooks.tools()] == ["text_stats"], hooks.tools()
print("tool:", hooks.call_tool("text_stats", {"text": "x y"}, session_id="s1"))
print("command:", hooks.run_command("/toolbox"))
try:
    hooks.call_tool("no_such_tool", {})
except hermes_hooks.HookError as e:
    print("unknown tool:", e)
answer = hooks.fire("pre_tool_call", tool_name="terminal", args={"command": "rm -rf /"})
assert answer["action"] == "block", answer
assert hooks.fire("pre_tool_call", tool_name="terminal", args={"command": "ls"}) is None
assert "pre_tool_call" in [c[0] for c in hooks.callbacks()], hooks.callbacks()
try:
    hermes_hooks.Hooks("/dev/null")
except hermes_hooks.HookError as e:
    print("refused:", e)
print(answer["message"])
"#;
    let out = run_ok(
        Command::new(venv().join("bin/python"))
            .args(["-c", script])
            .arg(home.path()),
    );
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Blocked by guardrail"), "{stdout}");
    assert!(
        stdout.contains("refused: ") && stdout.contains("not a directory"),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#"tool: {"lines":1,"words":2,"bytes":3}"#),
        "{stdout}"
    );
    assert!(
        stdout.contains("command: toolbox: 1 text_stats call(s)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("unknown tool: no plugin offers a tool named 'no_such_tool'"),
        "{stdout}"
    );
}

#[test]
fn hermes_plugins_list_says_what_hermes_agent_sees_and_skips_the_bridge() {
    let server = ModelServer::start(Vec::new());
    let home = hermes_home(&server, &[("guardrail", None)]);
    home.install("memory", "memory", None, None);
    let python = venv().join("bin/python");
    home.config(&format!(
        "plugins:\n  enabled: [hermes-hooks, guardrail, memory]\n  python: {}\n",
        python.display()
    ));
    let run = home.hermes(&["plugins", "list"], &[]);
    run.expect_code(0);
    let out = home.mask(&run.stdout());
    let section = |name: &str| {
        let start = out
            .find(&format!("  {name} "))
            .unwrap_or_else(|| panic!("{name}: {out}"));
        out[start..]
            .lines()
            .skip(1)
            .take_while(|l| l.starts_with("      "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        section("guardrail").contains("in Hermes Agent: runs through the hermes-hooks package"),
        "{out}"
    );
    assert!(
        section("memory").contains("in Hermes Agent: no __init__.py"),
        "{out}"
    );
    // The package's own entry point is found among pip plugins and left alone: its
    // register(ctx) would load the native plugins a second time.
    assert!(
        out.contains("hermes-hooks 0.1.0  not loaded: not loaded here: the hermes-hooks package runs this home's Rust plugins inside Hermes Agent"),
        "{out}"
    );
}

#[test]
fn post_tool_call_from_many_python_threads_at_once_is_recorded_once_each() {
    let server = ModelServer::start(Vec::new());
    let home = hermes_home(&server, &[("audit-log", None)]);
    // Hermes fires post_tool_call from the threads that ran the tools; the GIL is released
    // around native work, so the threads really do meet in the plugin.
    let script = r#"
import threading
import hermes_cli.plugins as plugins
manager = plugins.get_plugin_manager()
manager.discover_and_load()
assert len(manager._hooks["post_tool_call"]) == 1, manager._hooks
def fire(t):
    for i in range(200):
        r = manager.invoke_hook("post_tool_call", tool_name="terminal", args={"command": f"echo {t}-{i}"},
                                result="ok", task_id="t", session_id="s", tool_call_id=f"{t}-{i}",
                                duration_ms=1)
        assert r == [], r
threads = [threading.Thread(target=fire, args=(t,)) for t in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("fired")
"#;
    let out = python_in(home.path(), script);
    assert_eq!(text(&out.stdout).trim(), "fired");
    let log = std::fs::read_to_string(home.path().join("plugins/audit-log/audit.jsonl")).unwrap();
    let mut ids: Vec<String> = log
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l["event"] == "post_tool_call")
        .map(|l| l["tool_call_id"].as_str().unwrap_or_default().to_string())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(
        ids.len(),
        8 * 200,
        "one line per firing: {} lines",
        log.lines().count()
    );
}

#[test]
fn argument_rewrites_and_transforms_of_a_native_plugin_take_effect_in_hermes() {
    let server = ModelServer::start(vec![
        Step::Tool("terminal", json!({"command": "echo original"})),
        Step::Text("Done."),
    ]);
    let scratch = tempfile::tempdir().unwrap();
    let log = scratch.path().join("recorded.log");
    let config = format!(
        "{{log: '{}', tag: rust, answers: {{pre_tool_call: {{action: modify, json: {{command: 'echo rewritten-by-rust'}}}}, transform_llm_output: {{action: replace, text: 'Transformed by Rust.'}}}}}}",
        log.display()
    );
    let home = hermes_home(&server, &[("recorder", Some(config.as_str()))]);
    assert_eq!(
        turn_ok(&home, "run something").trim(),
        "Transformed by Rust."
    );
    let results = tool_results(&server);
    assert!(
        results.iter().any(|r| r.contains("rewritten-by-rust"))
            && !results.iter().any(|r| r.contains("original")),
        "Hermes ran the rewritten command: {results:?}"
    );
    // The callback saw Hermes's own keyword arguments.
    let recorded = std::fs::read_to_string(&log).unwrap();
    let pre = recorded
        .lines()
        .find(|l| l.starts_with("rust pre_tool_call "))
        .unwrap_or_else(|| panic!("{recorded}"));
    assert!(
        pre.contains(r#""tool_name":"terminal""#) && pre.contains("echo original"),
        "{pre}"
    );
}

#[test]
fn every_answer_reaches_hermes_in_the_shape_its_own_helpers_read() {
    let server = ModelServer::start(Vec::new());
    let scratch = tempfile::tempdir().unwrap();
    let config = format!(
        "{{log: '{}', answers: {{\
         pre_tool_call: {{action: approve, text: 'a human should see this', json: {{rule_key: 'terminal:rm'}}}}, \
         pre_llm_call: {{action: context, text: 'recalled'}}, \
         transform_tool_result: {{action: replace, text: 'redacted'}}, \
         pre_verify: {{action: continue, text: 'run the tests'}}, \
         pre_gateway_dispatch: {{action: skip, text: 'spam'}}}}}}",
        scratch.path().join("recorded.log").display()
    );
    let home = hermes_home(&server, &[("recorder", Some(config.as_str()))]);
    let script = r#"
import hermes_cli.plugins as plugins
manager = plugins.get_plugin_manager()
manager.discover_and_load()
d = plugins._get_pre_tool_call_directive_details("terminal", {"command": "rm -rf build"})
print("approve:", d.action, d.message, d.rule_key)
ctx = manager.invoke_hook("pre_llm_call", session_id="s", user_message="hi", conversation_history=[],
                          is_first_turn=True, model="m", platform="cli", sender_id="u")
print("context:", ctx, type(ctx[0]) is dict)
out = manager.invoke_hook("transform_tool_result", tool_name="terminal", args={}, result="secret",
                          task_id="t", session_id="s", tool_call_id="c", duration_ms=1)
print("transform:", out, type(out[0]) is str)
print("verify:", plugins.get_pre_verify_continue_message(session_id="s", attempt=0, changed_paths=["a.py"]))
from gateway.config import Platform
from gateway.platforms.base import MessageEvent
from gateway.session import SessionSource
event = MessageEvent(text="buy cheap pills", message_id="m1",
                     source=SessionSource(platform=Platform.TELEGRAM, chat_id="c9", user_id="u7"))
gw = manager.invoke_hook("pre_gateway_dispatch", event=event, gateway=object(), session_store=None)
print("dispatch:", gw)
"#;
    let out = python_in(home.path(), script);
    assert_eq!(
        text(&out.stdout),
        "approve: approve a human should see this terminal:rm\n\
         context: [{'context': 'recalled'}] True\n\
         transform: ['redacted'] True\n\
         verify: run the tests\n\
         dispatch: [{'action': 'skip', 'reason': 'spam'}]\n"
    );
    // The native callback read the message's fields from Hermes's MessageEvent.
    let recorded = std::fs::read_to_string(scratch.path().join("recorded.log")).unwrap();
    let dispatch = recorded
        .lines()
        .find(|l| l.contains(" pre_gateway_dispatch "))
        .unwrap_or_else(|| panic!("{recorded}"));
    assert!(
        dispatch.ends_with(r#"{"platform":"telegram","chat_id":"c9","user_id":"u7","text":"buy cheap pills","message_id":"m1","session_key":"telegram:c9","chat_type":"dm","user_name":null}"#),
        "{dispatch}"
    );
}

#[test]
fn python_hosts_get_all_three_hook_systems() {
    let home = TestHome::new();
    home.install("memory", "memory", None, None);
    let guard = home.script(
        "guard.sh",
        "#!/bin/sh\necho '{\"decision\": \"block\", \"reason\": \"shell says no\"}'\n",
    );
    home.config(&format!(
        "plugins:\n  enabled: [memory]\nhooks:\n  pre_tool_call:\n    - command: {}\n",
        guard.display()
    ));
    let events = home.path().join("events.log");
    home.gateway_recorder(&events);
    let script = r#"
import sys, time, hermes_hooks
home, events = sys.argv[1], sys.argv[2]
# Unapproved shell hooks do not run unless the host accepts them.
assert hermes_hooks.Hooks(home).fire("pre_tool_call", tool_name="terminal", args={}) is None
hooks = hermes_hooks.Hooks(home, accept_shell_hooks=True, gateway=True)
print(hooks.fire("pre_tool_call", tool_name="terminal", args={"command": "ls"}))
print([(c[0], c[3]) for c in hooks.callbacks()])
hooks.emit("agent:start", {"session_id": "s1", "message": "hello"})
deadline = time.time() + 20
while time.time() < deadline:
    try:
        if "hello" in open(events).read():
            print("gateway hook ran")
            break
    except FileNotFoundError:
        pass
    time.sleep(0.05)
"#;
    let out = run_ok(
        Command::new(venv().join("bin/python"))
            .args(["-c", script])
            .arg(home.path())
            .arg(&events),
    );
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("{'action': 'block', 'message': 'shell says no'}"),
        "{stdout}"
    );
    assert!(stdout.contains("('pre_llm_call', 'memory')"), "{stdout}");
    assert!(stdout.contains("('pre_tool_call', None)"), "{stdout}");
    assert!(stdout.contains("gateway hook ran"), "{stdout}");
}

#[test]
fn a_native_plugins_tool_and_command_work_in_hermes() {
    let server = ModelServer::start(vec![
        Step::Tool("text_stats", json!({"text": "one two three"})),
        Step::Text("Counted."),
    ]);
    let home = hermes_home(&server, &[("toolbox", None)]);
    assert_eq!(turn_ok(&home, "count these words").trim(), "Counted.");
    let offered = server.requests()[0]["tools"].to_string();
    assert!(
        offered.contains(r#""name":"text_stats""#),
        "Hermes offers the tool: {offered}"
    );
    assert_eq!(
        tool_results(&server),
        [r#"{"lines":1,"words":3,"bytes":13}"#]
    );
    // The command, as Hermes's CLI and gateway run a plugin's: its handler with the text.
    let out = python_in(
        home.path(),
        r#"
import hermes_cli.plugins as plugins
manager = plugins.get_plugin_manager()
manager.discover_and_load()
loaded = manager._plugins["toolbox"]
print(loaded.tools_registered, loaded.commands_registered)
from tools.registry import registry
print(registry.dispatch("text_stats", {"text": "a b"}))
print(manager._plugin_commands["toolbox"]["handler"](""))
"#,
    );
    assert_eq!(
        text(&out.stdout),
        "['text_stats'] ['toolbox']\n{\"lines\":1,\"words\":2,\"bytes\":3}\ntoolbox: 1 text_stats call(s), 0 request(s) routed, 0 answered without the model\n"
    );
}

/// Native middleware in Hermes's own chain: the `toolbox` plugin's `llm_request` rewrite
/// routes a short prompt to its small model (the model server sees that model, and the
/// rest of Hermes's request stays as Hermes built it), and the `faulty` plugin's
/// `tool_execution` wrapper runs around a tool, where its second `next` call is refused by
/// Hermes's own single-use rule.
#[test]
fn native_middleware_rewrites_requests_and_wraps_tools_in_hermes() {
    let server = ModelServer::start(vec![Step::Tool("twice", json!({})), Step::Text("Done.")]);
    let home = hermes_home(
        &server,
        &[("toolbox", None), ("faulty", Some("{tools: true}"))],
    );
    // The plugins block ends config.yaml: toolbox's settings go under it.
    let config = home.path().join("config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}  settings:\n    toolbox: {{small_model: tiny-model}}\n"),
    )
    .unwrap();
    assert_eq!(turn_ok(&home, "hi there").trim(), "Done.");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        let keys = |r: &Value| r.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>());
        assert_eq!(request["model"], "tiny-model", "{:?}", keys(request));
        assert_eq!(
            request["stream"],
            true,
            "Hermes's own keys stay: {:?}",
            keys(request)
        );
        assert!(request["tools"].is_array(), "{:?}", keys(request));
    }
    let results = tool_results(&server);
    assert_eq!(results.len(), 1, "{results:?}");
    assert!(
        results[0].starts_with(r#"first: "ran"; second: "#)
            && results[0].contains("called next_call() more than once"),
        "{results:?}"
    );
}
