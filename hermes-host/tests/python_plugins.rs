//! Hermes Python plugins (`plugin.yaml` + `__init__.py`), run by the real `hermes` binary and
//! loaded by the library, against a real `python3`: the keyword arguments of every hook as
//! the agent and the gateway fire them, the reference's return rules, module state, faults
//! (import errors, raises, crashes, hangs, print floods), logging, and the CLI.
//!
//! The tests need `python3` on `PATH` and fail (they never skip) without it.

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hermes_hooks_abi::hooks::payload::{
    PreLlmCallEvent, PreToolCallEvent, TransformLlmOutputEvent, TransformTerminalOutputEvent,
    TransformToolResultEvent,
};
use hermes_host::registry::{DispatchVerdict, Outcome};
use hermes_host::{Hooks, LoadOptions, home::Home};
use serde_json::{Value, json};

/// A fresh `HERMES_HOME` with a work directory beside it.
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

    /// `plugins/<dir>/` with `plugin.yaml` and the given files.
    fn plugin(&self, dir: &str, manifest: &str, files: &[(&str, &str)]) -> PathBuf {
        let path = self.home().join("plugins").join(dir);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("plugin.yaml"), manifest).unwrap();
        for (name, text) in files {
            std::fs::write(path.join(name), text).unwrap();
        }
        path
    }

    fn config(&self, text: &str) {
        let path = self.home().join("config.yaml");
        std::fs::write(&path, text).unwrap();
        let mut perms = std::fs::metadata(&path).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o600);
        std::fs::set_permissions(&path, perms).unwrap();
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.work().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    fn hermes(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
        cmd.arg("--home").arg(self.home()).current_dir(self.work());
        for var in ["HERMES_HOME", "HERMES_SAFE_MODE", "RUST_LOG", "HERMES_LOG"] {
            cmd.env_remove(var);
        }
        cmd.env("NO_COLOR", "1").stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.hermes();
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    }

    /// `hermes plugins fire pre_tool_call --payload <payload>` with `vars` set.
    fn fire_tool(&self, payload: &str, vars: &[(&str, &str)]) -> Output {
        self.run(
            &["plugins", "fire", "pre_tool_call", "--payload", payload],
            vars,
        )
    }

    /// `hermes gateway run --stdin` fed `messages`: its output, and every JSON line of its
    /// stdout. The run must succeed.
    fn gateway_stdin(&self, messages: &[Value]) -> (Output, Vec<Value>) {
        let mut cmd = self.hermes();
        cmd.args(["gateway", "run", "--stdin"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        let mut stdin = child.stdin.take().unwrap();
        for m in messages {
            writeln!(stdin, "{m}").unwrap();
        }
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let lines = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        (out, lines)
    }

    fn load(&self) -> Hooks {
        Hooks::load(&Home::at(self.home()), &LoadOptions::default()).unwrap()
    }

    /// Lines of `<home>/<name>` as JSON.
    fn json_lines(&self, name: &str) -> Vec<Value> {
        std::fs::read_to_string(self.home().join(name))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn text(out: &Output) -> String {
    format!(
        "\n--- stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn tool_call<'a>(tool: &'a str, args: &'a str) -> PreToolCallEvent<'a> {
    PreToolCallEvent {
        tool_name: tool,
        args,
        task_id: "t1",
        session_id: "s1",
        tool_call_id: "c1",
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------
// Keyword arguments: every hook, fired for real by `hermes run` and `hermes gateway run`

const ALL_HOOKS: [&str; 17] = [
    "pre_tool_call",
    "post_tool_call",
    "pre_llm_call",
    "post_llm_call",
    "on_session_start",
    "on_session_end",
    "on_session_finalize",
    "on_session_reset",
    "subagent_stop",
    "pre_gateway_dispatch",
    "pre_approval_request",
    "post_approval_response",
    "transform_tool_result",
    "transform_terminal_output",
    "transform_llm_output",
    "pre_api_request",
    "post_api_request",
];

/// A plugin that records, for every hook, the names and Python types of its keyword
/// arguments (and, for `pre_gateway_dispatch`, of the event's attributes).
const KWARGS_PLUGIN: &str = r#"
import json, os
from .hooks import ALL

OUT = os.path.join(os.environ["HERMES_HOME"], "kwargs.jsonl")

def _record(hook):
    def record(**kwargs):
        seen = {k: type(v).__name__ for k, v in kwargs.items()}
        if hook == "pre_gateway_dispatch":
            e = kwargs["event"]
            seen = {"event." + k: type(getattr(e, k)).__name__ for k in ("text", "message_id", "internal")}
            for k in ("platform", "chat_id", "chat_type", "user_id", "user_name"):
                seen["event.source." + k] = type(getattr(e.source, k)).__name__
            seen["gateway.adapters"] = type(kwargs["gateway"].adapters).__name__
            seen["session_store.append_to_transcript"] = callable(kwargs["session_store"].append_to_transcript)
            seen["keys"] = sorted(kwargs)
            seen["chat_type"] = e.source.chat_type
        with open(OUT, "a") as f:
            f.write(json.dumps({"hook": hook, "kwargs": seen}) + "\n")
    record.__name__ = "record_" + hook
    return record

def register(ctx):
    for hook in ALL:
        ctx.register_hook(hook, _record(hook))
"#;

/// What every hook's keyword arguments were, recorded once for all the tests below.
fn recorded_kwargs() -> &'static Vec<Value> {
    static RECORDED: OnceLock<Vec<Value>> = OnceLock::new();
    RECORDED.get_or_init(|| {
        let env = Env::new();
        let all = ALL_HOOKS
            .iter()
            .map(|h| format!("{h:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        env.plugin(
            "kwargs",
            "name: kwargs\nversion: 1.0\n",
            &[
                ("__init__.py", KWARGS_PLUGIN),
                ("hooks.py", &format!("ALL = [{all}]\n")),
            ],
        );
        env.config("plugins:\n  enabled: [kwargs]\n");
        env.write(
            "child.yaml",
            "turns:\n  - user: sub\n    steps:\n      - final: child done\n",
        );
        std::fs::create_dir(env.work().join("junk")).unwrap();
        let script = env.write(
            "s.yaml",
            "turns:\n  - user: hello\n    steps:\n      - tool: write_file\n        args: {path: a.txt, content: one}\n      - tool: terminal\n        args: {command: cat a.txt}\n      - tool: terminal\n        args: {command: rm -rf junk}\n      - tool: delegate_task\n        args: {tasks: [{script: child.yaml, role: helper}]}\n      - final: done\n",
        );
        let out = env.run(
            &["run", script.to_str().unwrap(), "--approvals", "deny"],
            &[],
        );
        assert!(out.status.success(), "{}", text(&out));
        env.gateway_stdin(&[
            json!({"chat_id": "c1", "user_id": "u1", "text": "hi", "chat_type": "group", "user_name": "Ann", "message_id": 7}),
            json!({"chat_id": "c1", "user_id": "u1", "text": "/reset"}),
            json!({"chat_id": "c1", "user_id": "u1", "text": "again"}),
        ]);
        env.json_lines("kwargs.jsonl")
    })
}

/// The keyword arguments `hook` got first: name -> Python type name.
fn kwargs_of(hook: &str) -> serde_json::Map<String, Value> {
    recorded_kwargs()
        .iter()
        .find(|r| r["hook"] == hook)
        .unwrap_or_else(|| panic!("{hook} never reached the plugin"))["kwargs"]
        .as_object()
        .unwrap()
        .clone()
}

/// Asserts `hook`'s keyword arguments: `expected` `(name, type)` pairs, in the reference's
/// order, are all there with those types (`str|NoneType` accepts either).
fn assert_kwargs(hook: &str, expected: &[(&str, &str)]) {
    let seen = kwargs_of(hook);
    let names: Vec<&str> = seen.keys().map(String::as_str).collect();
    let wanted: Vec<&str> = expected.iter().map(|(n, _)| *n).collect();
    let in_order: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| wanted.contains(n))
        .collect();
    assert_eq!(in_order, wanted, "{hook}: names, in order; got {names:?}");
    for (name, ty) in expected {
        let got = seen[*name].as_str().unwrap();
        assert!(
            ty.split('|').any(|t| t == got),
            "{hook}: {name} is a {got}, want {ty}"
        );
    }
}

#[test]
fn kwargs_pre_tool_call() {
    assert_kwargs(
        "pre_tool_call",
        &[
            ("tool_name", "str"),
            ("args", "dict"),
            ("task_id", "str"),
            ("session_id", "str"),
            ("tool_call_id", "str"),
        ],
    );
}

#[test]
fn kwargs_post_tool_call() {
    assert_kwargs(
        "post_tool_call",
        &[
            ("tool_name", "str"),
            ("args", "dict"),
            ("result", "str"),
            ("task_id", "str"),
            ("session_id", "str"),
            ("tool_call_id", "str"),
            ("duration_ms", "int"),
            ("status", "str"),
            ("error_type", "str|NoneType"),
            ("error_message", "str|NoneType"),
        ],
    );
}

#[test]
fn kwargs_pre_llm_call() {
    assert_kwargs(
        "pre_llm_call",
        &[
            ("session_id", "str"),
            ("user_message", "str"),
            ("conversation_history", "list"),
            ("is_first_turn", "bool"),
            ("model", "str"),
            ("platform", "str"),
            ("sender_id", "str|NoneType"),
        ],
    );
}

#[test]
fn kwargs_post_llm_call() {
    assert_kwargs(
        "post_llm_call",
        &[
            ("session_id", "str"),
            ("user_message", "str"),
            ("assistant_response", "str"),
            ("conversation_history", "list"),
            ("model", "str"),
            ("platform", "str"),
        ],
    );
}

#[test]
fn kwargs_on_session_start() {
    assert_kwargs(
        "on_session_start",
        &[("session_id", "str"), ("model", "str"), ("platform", "str")],
    );
}

#[test]
fn kwargs_on_session_end() {
    assert_kwargs(
        "on_session_end",
        &[
            ("session_id", "str"),
            ("completed", "bool"),
            ("interrupted", "bool"),
            ("model", "str"),
            ("platform", "str"),
        ],
    );
}

#[test]
fn kwargs_on_session_finalize() {
    assert_kwargs(
        "on_session_finalize",
        &[("session_id", "str|NoneType"), ("platform", "str")],
    );
}

#[test]
fn kwargs_on_session_reset() {
    assert_kwargs(
        "on_session_reset",
        &[("session_id", "str"), ("platform", "str")],
    );
}

#[test]
fn kwargs_subagent_stop() {
    assert_kwargs(
        "subagent_stop",
        &[
            ("parent_session_id", "str"),
            ("child_role", "str|NoneType"),
            ("child_summary", "str"),
            ("child_status", "str"),
            ("duration_ms", "int"),
        ],
    );
}

#[test]
fn kwargs_pre_gateway_dispatch() {
    let seen = kwargs_of("pre_gateway_dispatch");
    assert_eq!(
        seen["keys"],
        json!([
            "event",
            "gateway",
            "session_store",
            "telemetry_schema_version"
        ]),
        "{seen:?}"
    );
    for (name, ty) in [
        ("event.text", "str"),
        ("event.message_id", "str"),
        ("event.internal", "bool"),
        ("event.source.platform", "Platform"),
        ("event.source.chat_id", "str"),
        ("event.source.chat_type", "str"),
        ("event.source.user_id", "str"),
        ("event.source.user_name", "str"),
        ("gateway.adapters", "_Adapters"),
    ] {
        assert_eq!(seen[name], ty, "{name}: {seen:?}");
    }
    assert_eq!(seen["session_store.append_to_transcript"], true);
    assert_eq!(
        seen["chat_type"], "group",
        "the adapter's chat_type reaches the plugin"
    );
}

#[test]
fn kwargs_pre_approval_request() {
    assert_kwargs(
        "pre_approval_request",
        &[
            ("command", "str"),
            ("description", "str"),
            ("pattern_key", "str"),
            ("pattern_keys", "list"),
            ("session_key", "str"),
            ("surface", "str"),
        ],
    );
}

#[test]
fn kwargs_post_approval_response() {
    assert_kwargs(
        "post_approval_response",
        &[
            ("command", "str"),
            ("description", "str"),
            ("pattern_key", "str"),
            ("pattern_keys", "list"),
            ("session_key", "str"),
            ("surface", "str"),
            ("choice", "str"),
        ],
    );
}

#[test]
fn kwargs_transform_tool_result() {
    assert_kwargs(
        "transform_tool_result",
        &[
            ("tool_name", "str"),
            ("args", "dict"),
            ("result", "str"),
            ("task_id", "str"),
            ("session_id", "str"),
            ("tool_call_id", "str"),
            ("duration_ms", "int"),
        ],
    );
}

#[test]
fn kwargs_transform_terminal_output() {
    assert_kwargs(
        "transform_terminal_output",
        &[
            ("command", "str"),
            ("output", "str"),
            ("returncode", "int"),
            ("task_id", "str"),
            ("env_type", "str"),
        ],
    );
}

#[test]
fn kwargs_transform_llm_output() {
    assert_kwargs(
        "transform_llm_output",
        &[
            ("response_text", "str"),
            ("session_id", "str"),
            ("model", "str"),
            ("platform", "str"),
        ],
    );
}

#[test]
fn kwargs_pre_api_request() {
    assert_kwargs(
        "pre_api_request",
        &[
            ("session_id", "str"),
            ("task_id", "str"),
            ("platform", "str"),
            ("model", "str"),
            ("provider", "str"),
            ("api_call_count", "int"),
            ("message_count", "int"),
            ("tool_count", "int"),
            ("approx_input_tokens", "int"),
        ],
    );
}

#[test]
fn kwargs_post_api_request() {
    assert_kwargs(
        "post_api_request",
        &[
            ("session_id", "str"),
            ("task_id", "str"),
            ("platform", "str"),
            ("model", "str"),
            ("provider", "str"),
            ("api_call_count", "int"),
            ("api_duration_ms", "int"),
            ("finish_reason", "str"),
            ("usage", "dict"),
        ],
    );
}

// ---------------------------------------------------------------------------------------
// Keyword arguments: the names the reference passes, from its source

/// Per hook, every keyword name the reference passes at any of its call sites, plus what
/// its `invoke_hook` adds to all of them: `fixtures/reference/kwargs.json`, made from the
/// source of `hermes-agent` 0.19.0 by `scripts/reference-kwargs.py`.
fn reference_names(hook: &str) -> Vec<String> {
    static FIXTURE: OnceLock<Value> = OnceLock::new();
    let fixture = FIXTURE.get_or_init(|| {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference/kwargs.json");
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    });
    let mut names: Vec<String> = fixture["added_to_every_call"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_string())
        .collect();
    let sites = fixture["hooks"][hook]
        .as_array()
        .unwrap_or_else(|| panic!("the reference has no call site for {hook}"));
    for site in sites {
        for name in site["kwargs"].as_array().unwrap() {
            let name = name.as_str().unwrap().to_string();
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    names
}

/// Names this host passes beyond the reference's, each for a reason.
const OURS_ONLY: &[(&str, &str)] = &[
    // interface 1.1 named it so before the reference's `api_duration` (seconds) arrived.
    ("post_api_request", "api_duration_ms"),
    // Observability plugins read it there (issue 43); 0.19.0 passes it only to the API hooks.
    ("post_llm_call", "api_call_count"),
];

/// Asserts that `hook`, fired for real, handed Python plugins every name the reference
/// passes, and nothing more but [`OURS_ONLY`].
fn assert_reference_names(hook: &str) {
    let seen = kwargs_of(hook);
    let ours: Vec<String> = match seen.get("keys") {
        Some(keys) if hook == "pre_gateway_dispatch" => keys
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap().to_string())
            .collect(),
        _ => seen.keys().cloned().collect(),
    };
    let reference = reference_names(hook);
    let missing: Vec<&String> = reference.iter().filter(|n| !ours.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "{hook}: the reference passes {missing:?}, this host does not (it passes {ours:?})"
    );
    let extra: Vec<&String> = ours
        .iter()
        .filter(|n| !reference.contains(n) && !OURS_ONLY.contains(&(hook, n.as_str())))
        .collect();
    assert!(
        extra.is_empty(),
        "{hook}: this host passes {extra:?}, which the reference does not"
    );
}

macro_rules! reference_kwargs_tests {
    ($($hook:ident),* $(,)?) => {
        mod reference_kwargs {
            $(
                #[test]
                fn $hook() {
                    super::assert_reference_names(stringify!($hook));
                }
            )*
        }
    };
}

reference_kwargs_tests!(
    pre_tool_call,
    post_tool_call,
    pre_llm_call,
    post_llm_call,
    on_session_start,
    on_session_end,
    on_session_finalize,
    on_session_reset,
    subagent_stop,
    pre_gateway_dispatch,
    pre_approval_request,
    post_approval_response,
    transform_tool_result,
    transform_terminal_output,
    transform_llm_output,
    pre_api_request,
    post_api_request,
);

/// An observability plugin as published ones are written: a span per model request keyed
/// on `api_request_id`, tool spans under their request, a turn span keyed on `turn_id`,
/// all closed by the matching end hook; the assistant message read as the SDK object.
const SPANS_PLUGIN: &str = r#"
import json, os

OUT = os.path.join(os.environ["HERMES_HOME"], "spans.json")
OPEN = {}
CLOSED = []
PROBLEMS = []

def _open(kind, key, **attrs):
    if not key:
        PROBLEMS.append(f"{kind}: no id")
    OPEN[(kind, key)] = attrs

def _close(kind, key, **attrs):
    if (kind, key) not in OPEN:
        PROBLEMS.append(f"{kind} {key!r} closed but never opened")
        return
    CLOSED.append({"kind": kind, "key": key, **OPEN.pop((kind, key)), **attrs})

def pre_llm_call(turn_id, task_id, **kw):
    _open("turn", turn_id, task_id=task_id)

def pre_api_request(turn_id, api_request_id, api_call_count, telemetry_schema_version, **kw):
    if not isinstance(api_request_id, str):
        PROBLEMS.append("api_request_id is not a str")
    _open("request", api_request_id, turn_id=turn_id, n=api_call_count, schema=telemetry_schema_version)

def post_api_request(api_request_id, turn_id, assistant_message, assistant_content_chars,
                     assistant_tool_call_count, api_duration, started_at, ended_at, **kw):
    calls = [c.function.name for c in (assistant_message.tool_calls or [])]
    if len(calls) != assistant_tool_call_count:
        PROBLEMS.append(f"{len(calls)} tool calls, count says {assistant_tool_call_count}")
    if len(assistant_message.content or "") != assistant_content_chars:
        PROBLEMS.append("assistant_content_chars does not match the content")
    if not ended_at >= started_at or api_duration < 0:
        PROBLEMS.append("times out of order")
    _close("request", api_request_id, turn_id=turn_id, tools=calls)

def pre_tool_call(tool_call_id, api_request_id, turn_id, **kw):
    _open("tool", tool_call_id, api_request_id=api_request_id, turn_id=turn_id)

def post_tool_call(tool_call_id, api_request_id, turn_id, **kw):
    _close("tool", tool_call_id, api_request_id=api_request_id, closing_turn=turn_id)

def post_llm_call(turn_id, task_id, api_call_count, **kw):
    _close("turn", turn_id, calls=api_call_count, closing_task=task_id)

def on_session_end(turn_id, task_id, **kw):
    with open(OUT, "w") as f:
        json.dump({"open": [list(k) for k in OPEN], "closed": CLOSED, "problems": PROBLEMS}, f)

def register(ctx):
    for hook in ("pre_llm_call", "pre_api_request", "post_api_request", "pre_tool_call",
                 "post_tool_call", "post_llm_call", "on_session_end"):
        ctx.register_hook(hook, globals()[hook])
"#;

#[test]
fn an_observer_keying_spans_on_the_correlation_ids_closes_every_span() {
    let env = Env::new();
    env.plugin(
        "spans",
        "name: spans\nversion: 1.0\n",
        &[("__init__.py", SPANS_PLUGIN)],
    );
    env.config("plugins:\n  enabled: [spans]\n");
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: hello\n    steps:\n      - tool: write_file\n        args: {path: a.txt, content: one}\n      - tool: terminal\n        args: {command: cat a.txt}\n      - final: done\n",
    );
    let out = env.run(&["run", script.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let spans: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home().join("spans.json")).unwrap())
            .unwrap();
    assert_eq!(spans["problems"], json!([]), "{spans:#}");
    assert_eq!(spans["open"], json!([]), "every span is closed: {spans:#}");
    let closed = spans["closed"].as_array().unwrap();
    let of = |kind: &str| {
        closed
            .iter()
            .filter(|s| s["kind"] == kind)
            .collect::<Vec<_>>()
    };
    let (turns, requests, tools) = (of("turn"), of("request"), of("tool"));
    assert_eq!(
        (turns.len(), requests.len(), tools.len()),
        (1, 3, 2),
        "{spans:#}"
    );
    let turn_id = &turns[0]["key"];
    assert_eq!(
        turns[0]["calls"], 3,
        "post_llm_call's api_call_count: {spans:#}"
    );
    assert_eq!(turns[0]["task_id"], turns[0]["closing_task"]);
    for request in &requests {
        assert_eq!(&request["turn_id"], turn_id, "{spans:#}");
        assert_eq!(request["schema"], "hermes.observer.v1");
    }
    let keys: Vec<&Value> = requests.iter().map(|r| &r["key"]).collect();
    assert!(
        keys[0] != keys[1] && keys[1] != keys[2],
        "request ids are unique: {keys:?}"
    );
    assert_eq!(requests[0]["tools"], json!(["write_file"]));
    // Each tool call carries the id of the request that asked for it.
    assert_eq!(&tools[0]["api_request_id"], keys[0], "{spans:#}");
    assert_eq!(&tools[1]["api_request_id"], keys[1], "{spans:#}");
    for tool in &tools {
        assert_eq!(&tool["turn_id"], turn_id);
        assert_eq!(&tool["closing_turn"], turn_id);
    }
}

// ---------------------------------------------------------------------------------------
// Settings and state: ctx.get_config / set_config over config.yaml, ctx.state on disk

const TUNER_PLUGIN: &str = r#"
import json, os

CTX = None
OUT = os.path.join(os.environ["HERMES_HOME"], "tuner.jsonl")

def pre_llm_call(**kw):
    before = CTX.get_config("level")
    CTX.set_config("level", "high")
    CTX.set_config("retry.policy", {"tries": 3})
    after = [CTX.get_config("level"), CTX.get_config("retry.policy.tries"), CTX.get_config("missing", "dflt")]
    errors = []
    for bad in ("plugins.x", "../up", "a/b", "settings", "", "model.name"):
        try:
            CTX.set_config(bad, 1)
            errors.append("set_config accepted " + repr(bad))
        except ValueError:
            pass
    try:
        CTX.set_config("obj", object())
        errors.append("set_config accepted an object")
    except ValueError:
        pass
    runs = CTX.state.get("runs", 0) + 1
    CTX.state.set("runs", runs)
    for key, value in (("../x", 1), ("big", "x" * (11 * 1024 * 1024))):
        try:
            CTX.state.set(key, value)
            errors.append("state.set accepted " + key)
        except ValueError:
            pass
    with open(OUT, "a") as f:
        f.write(json.dumps({"before": before, "after": after, "errors": errors, "runs": runs,
                            "path": str(CTX.state.path)}) + "\n")

def register(ctx):
    global CTX
    CTX = ctx
    ctx.set_config("registered", True)
    ctx.register_hook("pre_llm_call", pre_llm_call)
"#;

#[test]
fn set_config_writes_the_plugins_settings_keeping_the_file_and_state_persists_privately() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    env.plugin(
        "tuner",
        "name: tuner\nversion: 1.0\n",
        &[("__init__.py", TUNER_PLUGIN)],
    );
    env.config(
        "# my settings\nplugins:\n  enabled: [tuner]  # keep me\n  entries:\n    tuner:\n      settings:\n        level: low  # the old level\n",
    );
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: hi\n    steps:\n      - final: ok\n",
    );
    for _ in 0..2 {
        let out = env.run(&["run", script.to_str().unwrap()], &[]);
        assert!(out.status.success(), "{}", text(&out));
    }
    let runs = env.json_lines("tuner.jsonl");
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert_eq!(runs[0]["before"], "low");
    assert_eq!(runs[0]["after"], json!(["high", 3, "dflt"]));
    assert_eq!(runs[0]["errors"], json!([]), "{runs:?}");
    // The second run reads what the first wrote, from config.yaml and from its state.
    assert_eq!(runs[1]["before"], "high");
    assert_eq!(
        (runs[0]["runs"].as_i64(), runs[1]["runs"].as_i64()),
        (Some(1), Some(2))
    );
    let config = std::fs::read_to_string(env.home().join("config.yaml")).unwrap();
    for kept in [
        "# my settings\n",
        "  enabled: [tuner]  # keep me\n",
        "        level: high  # the old level\n",
    ] {
        assert!(config.contains(kept), "{kept:?} is gone:\n{config}");
    }
    let parsed: Value = yaml_serde::from_str(&config).unwrap();
    let settings = &parsed["plugins"]["entries"]["tuner"]["settings"];
    assert_eq!(settings["retry"]["policy"]["tries"], 3, "{config}");
    assert_eq!(
        settings["registered"], true,
        "set_config works in register(): {config}"
    );
    // The reference's place for it, so a Hermes home copied over keeps its plugins' state.
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(b"tuner");
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let dir = env
        .home()
        .join("plugin-data")
        .join(format!("agent-plugin-tuner-{hex}"));
    assert_eq!(
        runs[0]["path"],
        dir.join("state.json").display().to_string()
    );
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(state, json!({"runs": 2}));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&dir), mode(&dir.join("state.json"))), (0o700, 0o600));
}

// ---------------------------------------------------------------------------------------
// Return values, by the reference's rules

const RULES_PLUGIN: &str = r#"
def modify(tool_name, args, **kwargs):
    if tool_name == "modify":
        return {"action": "modify", "args": {"timeout": 5}}

def not_a_block(tool_name, **kwargs):
    if tool_name == "blocked":
        return {"action": "block", "message": 42}

def raises(tool_name, **kwargs):
    if tool_name == "blocked":
        raise ValueError("boom")

def block(tool_name, **kwargs):
    if tool_name == "blocked":
        return {"action": "block", "message": "second block wins: the first was no string"}

def later_block(tool_name, **kwargs):
    if tool_name == "blocked":
        return {"action": "block", "message": "too late"}

def context_dict(**kwargs):
    return {"context": 42}

def context_blank(**kwargs):
    return "   "

def context_str(**kwargs):
    return "plain"

def not_a_string(**kwargs):
    return 7

def replace(result, **kwargs):
    return result.upper()

def empty(**kwargs):
    return ""

async def first_non_empty(response_text, **kwargs):
    return response_text + "!"

def dispatch_rewrite_no_text(**kwargs):
    return {"action": "rewrite", "text": None}

def dispatch_skip(**kwargs):
    return {"action": "skip", "reason": "never reached"}

def observer(**kwargs):
    return {"action": "block", "message": "observers are not asked"}

def register(ctx):
    ctx.register_hook("pre_tool_call", modify)
    ctx.register_hook("pre_tool_call", not_a_block)
    ctx.register_hook("pre_tool_call", raises)
    ctx.register_hook("pre_tool_call", block)
    ctx.register_hook("pre_tool_call", later_block)
    ctx.register_hook("pre_llm_call", context_dict)
    ctx.register_hook("pre_llm_call", context_blank)
    ctx.register_hook("pre_llm_call", context_str)
    ctx.register_hook("transform_tool_result", not_a_string)
    ctx.register_hook("transform_tool_result", replace)
    ctx.register_hook("transform_terminal_output", empty)
    ctx.register_hook("transform_llm_output", empty)
    ctx.register_hook("transform_llm_output", first_non_empty)
    ctx.register_hook("pre_gateway_dispatch", dispatch_rewrite_no_text)
    ctx.register_hook("pre_gateway_dispatch", dispatch_skip)
    ctx.register_hook("on_session_start", observer)
"#;

#[test]
fn return_values_are_applied_by_the_reference_rules_for_every_hook() {
    let env = Env::new();
    env.plugin("rules", "name: rules\n", &[("__init__.py", RULES_PLUGIN)]);
    env.config("plugins:\n  enabled: [rules]\n");
    let hooks = env.load();
    assert!(
        hooks.report().plugins[0].loaded(),
        "{:?}",
        hooks.report().plugins
    );

    // pre_tool_call: a block needs a non-empty string message; a raise is skipped; the
    // first real block wins; modifies merge.
    let verdict = hooks.pre_tool_call(&tool_call("blocked", "{}"));
    let blocked = verdict.blocked.unwrap();
    assert_eq!(
        (blocked.message.as_str(), blocked.by.as_str()),
        ("second block wins: the first was no string", "rules::block")
    );
    let verdict = hooks.pre_tool_call(&tool_call("modify", r#"{"command": "ls"}"#));
    assert!(verdict.blocked.is_none());
    assert_eq!(
        verdict.apply(&json!({"command": "ls"})),
        json!({"command": "ls", "timeout": 5})
    );
    assert!(
        hooks
            .pre_tool_call(&tool_call("terminal", "{}"))
            .blocked
            .is_none()
    );

    // pre_llm_call: a dict's truthy context as str(), a non-blank string; blanks skipped.
    let context = hooks.pre_llm_call(&PreLlmCallEvent {
        session_id: "s",
        user_message: "hi",
        conversation_history: "[]",
        ..Default::default()
    });
    assert_eq!(context.as_deref(), Some("42\n\nplain"));

    // Transforms: the first string wins (a non-string is ignored); an empty string
    // replaces terminal output, but not the LLM output; async callbacks are awaited.
    let result = hooks.transform_tool_result(&TransformToolResultEvent {
        tool_name: "read_file",
        args: "{}",
        result: "abc",
        ..Default::default()
    });
    assert_eq!(result.as_deref(), Some("ABC"));
    let output = hooks.transform_terminal_output(&TransformTerminalOutputEvent {
        command: "ls",
        output: "x",
        ..Default::default()
    });
    assert_eq!(output.as_deref(), Some(""));
    let llm = hooks.transform_llm_output(&TransformLlmOutputEvent {
        response_text: "done",
        ..Default::default()
    });
    assert_eq!(llm.as_deref(), Some("done!"));

    // pre_gateway_dispatch: a rewrite whose text is not a string stops the scan (an
    // allow), so the later skip is ignored.
    let outcome = hooks.fire(
        "pre_gateway_dispatch",
        &hermes_host::payload::OwnedPayload::from_json(
            "pre_gateway_dispatch",
            &json!({"platform": "local", "chat_id": "c", "user_id": "u", "text": "t"}),
        )
        .fields(),
    );
    assert!(
        matches!(outcome, Outcome::Dispatch(DispatchVerdict::Allow { ref by }) if by == "rules::dispatch_rewrite_no_text"),
        "{outcome:?}"
    );
    // Observers' answers are ignored.
    let outcome = hooks.fire("on_session_start", &[]);
    assert_eq!(outcome, Outcome::Observed);
}

#[test]
fn a_raising_callback_gets_the_reference_warning_and_the_next_one_runs() {
    let env = Env::new();
    env.plugin("rules", "name: rules\n", &[("__init__.py", RULES_PLUGIN)]);
    env.config("plugins:\n  enabled: [rules]\n");
    let out = env.fire_tool(r#"{"tool_name": "blocked"}"#, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Hook 'pre_tool_call' callback rules::raises raised: boom"),
        "{}",
        text(&out)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Outcome: blocked by rules::block: second block wins"),
        "{}",
        text(&out)
    );
}

// ---------------------------------------------------------------------------------------
// State, order, imports

#[test]
fn module_state_lives_as_long_as_the_worker_across_hooks() {
    let env = Env::new();
    env.plugin(
        "memo",
        "name: memo\n",
        &[(
            "__init__.py",
            "STARTED = {}\n\
             def start(session_id, **kw):\n    STARTED[session_id] = len(STARTED) + 1\n\
             def recall(session_id, **kw):\n    return {'context': f'session {session_id} was number {STARTED.get(session_id)}'}\n\
             def register(ctx):\n    ctx.register_hook('on_session_start', start)\n    ctx.register_hook('pre_llm_call', recall)\n",
        )],
    );
    env.config("plugins:\n  enabled: [memo]\n");
    let script = env.write(
        "s.yaml",
        "session_id: first\nturns:\n  - user: hi\n    steps:\n      - final: hello\n        echo: true\n  - user: again\n    steps:\n      - final: hello\n        echo: true\n",
    );
    let out = env.run(&["run", script.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.matches("session first was number 1").count(),
        2,
        "the dict filled in on_session_start is there on both turns: {}",
        text(&out)
    );
}

#[test]
fn python_plugins_run_alphabetically_with_shell_hooks_after_them() {
    let env = Env::new();
    for name in ["b-py", "d-py"] {
        env.plugin(
            name,
            &format!("name: {name}\n"),
            &[(
                "__init__.py",
                &format!("def block(**kw):\n    return {{'action': 'block', 'message': 'by {name}'}}\ndef register(ctx):\n    ctx.register_hook('pre_tool_call', block)\n"),
            )],
        );
    }
    // Native plugins take their alphabetical places among these (tests/it/plugins.rs).
    let hook = env.write("shell.sh", "#!/bin/sh\ncat >/dev/null\n");
    let mut perms = std::fs::metadata(&hook).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&hook, perms).unwrap();
    env.config(&format!(
        "plugins:\n  enabled: [d-py, b-py]\nhooks:\n  pre_tool_call:\n    - command: {}\n",
        hook.display()
    ));
    let hooks = Hooks::load(
        &Home::at(env.home()),
        &LoadOptions {
            consent: hermes_host::ConsentPolicy::AcceptForThisRun,
            ..LoadOptions::default()
        },
    )
    .unwrap();
    let labels: Vec<&str> = hooks
        .entries("pre_tool_call")
        .iter()
        .map(|e| e.label.as_str())
        .collect();
    assert_eq!(labels.len(), 3, "{labels:?}");
    assert_eq!(&labels[..2], ["b-py::block", "d-py::block"]);
    assert!(
        labels[2].starts_with("shell_hook[pre_tool_call:"),
        "{labels:?}"
    );
    let verdict = hooks.pre_tool_call(&tool_call("terminal", "{}"));
    assert_eq!(verdict.blocked.unwrap().message, "by b-py");
}

#[test]
fn a_plugin_imports_sibling_modules_and_a_subpackage_as_hermes_plugins_name() {
    let env = Env::new();
    let dir = env.plugin(
        "my-guard",
        "name: my-guard\n",
        &[
            (
                "__init__.py",
                "from .policy import DENY\nfrom .lib.words import first\nimport json\n\
                 def guard(tool_name, args, **kw):\n    if first(args.get('command', '')) in DENY:\n        return {'action': 'block', 'message': __name__ + ' denies ' + json.dumps(args)}\n\
                 def register(ctx):\n    ctx.register_hook('pre_tool_call', guard)\n",
            ),
            ("policy.py", "DENY = {'sudo'}\n"),
        ],
    );
    std::fs::create_dir(dir.join("lib")).unwrap();
    std::fs::write(dir.join("lib/__init__.py"), "").unwrap();
    std::fs::write(
        dir.join("lib/words.py"),
        "def first(text):\n    return text.split()[0] if text.split() else ''\n",
    )
    .unwrap();
    env.config("plugins:\n  enabled: [my-guard]\n");
    let hooks = env.load();
    let verdict = hooks.pre_tool_call(&tool_call("terminal", r#"{"command": "sudo ls"}"#));
    assert_eq!(
        verdict.blocked.unwrap().message,
        r#"hermes_plugins.my_guard denies {"command": "sudo ls"}"#
    );
}

#[test]
fn modules_in_the_launch_directory_never_run_in_a_worker() {
    let env = Env::new();
    // What a cloned repository (or a model with write_file) leaves where hermes starts.
    for module in ["json", "logging", "types", "policy"] {
        env.write(
            &format!("{module}.py"),
            "import os\nopen(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'PLANTED'), 'a').write(__name__ + '\\n')\n",
        );
    }
    env.plugin(
        "guard",
        "name: guard\n",
        &[
            (
                "__init__.py",
                // `import policy`: the plugin's own directory is on the path, last.
                "import json, policy\n\
                 def guard(tool_name, args, **kw):\n    if args.get('command') in policy.DENY:\n        return {'action': 'block', 'message': json.dumps(policy.DENY)}\n\
                 def register(ctx):\n    ctx.register_hook('pre_tool_call', guard)\n",
            ),
            ("policy.py", "DENY = ['sudo ls']\n"),
        ],
    );
    env.config("plugins:\n  enabled: [guard]\n");
    let payload = r#"{"tool_name": "terminal", "args": {"command": "sudo ls"}}"#;
    // A relative PYTHONPATH entry names the launch directory as well; it is not searched.
    let out = env.fire_tool(payload, &[("PYTHONPATH", ".")]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(r#"["sudo ls"]"#),
        "{}",
        text(&out)
    );
    let out = env.run(&["plugins", "list"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !env.work().join("PLANTED").exists(),
        "a module of the launch directory ran: {}",
        std::fs::read_to_string(env.work().join("PLANTED")).unwrap_or_default()
    );
}

#[test]
fn an_answer_over_the_bound_is_ignored_with_a_warning_and_the_original_kept() {
    let env = Env::new();
    env.plugin(
        "bloat",
        "name: bloat\n",
        &[(
            "__init__.py",
            "def grow(tool_name, args, result, **kw):\n    return 'x' * (5 << 20)\n\
             def register(ctx):\n    ctx.register_hook('transform_tool_result', grow)\n",
        )],
    );
    env.config("plugins:\n  enabled: [bloat]\n");
    let hooks = env.load();
    let result = hooks.transform_tool_result(&TransformToolResultEvent {
        tool_name: "read_file",
        args: "{}",
        result: "the original",
        ..Default::default()
    });
    assert_eq!(
        result.map(|r| r.len()),
        None,
        "the 5 MiB answer was used instead of the original"
    );
}

// ---------------------------------------------------------------------------------------
// Published plugins' shapes: `ctx` probed with getattr, Hermes's own modules, `.env`

#[test]
fn ctx_has_the_reference_members_only_and_hermes_modules_answer_from_this_home() {
    let env = Env::new();
    env.plugin(
        "prober",
        "name: prober\nversion: 1.2.3\ndescription: probes ctx\nauthor: {name: Ada, email: ada@example.org}\n",
        &[(
            "__init__.py",
            "import json, os\n\
             from hermes_constants import get_hermes_home\n\
             from hermes_cli.config import load_config, cfg_get\n\
             from hermes_cli.profiles import get_active_profile_name\n\
             def register(ctx):\n\
             \x20   out = {}\n\
             \x20   out['config'] = repr(getattr(ctx, 'config', None))\n\
             \x20   out['llm'] = bool(getattr(ctx, 'llm', None))\n\
             \x20   m = ctx.manifest\n\
             \x20   out['manifest'] = [type(m).__name__, m.name, m.version, m.description, m.author, m.key]\n\
             \x20   try:\n\
             \x20       ctx.no_such_member\n\
             \x20       out['unknown'] = 'answered'\n\
             \x20   except AttributeError:\n\
             \x20       out['unknown'] = 'AttributeError'\n\
             \x20   cfg = getattr(ctx, 'config', None) or load_config()\n\
             \x20   out['threshold'] = cfg_get(cfg, 'plugins.entries.prober.settings.threshold', default=1)\n\
             \x20   out['nested'] = cfg_get(cfg, 'plugins', 'entries', 'prober', 'settings', 'threshold')\n\
             \x20   out['get_config'] = ctx.get_config('threshold', 0)\n\
             \x20   out['home'] = str(get_hermes_home())\n\
             \x20   out['profile'] = [get_active_profile_name(), ctx.profile_name, ctx.plugin_id]\n\
             \x20   out['token'] = os.environ.get('PROBE_TOKEN')\n\
             \x20   out['kept'] = os.environ.get('PROBE_KEPT')\n\
             \x20   out['leaked'] = [k for k in os.environ if k.startswith('HERMES_HOOKS_')]\n\
             \x20   out['register_tool'] = callable(getattr(ctx, 'register_tool', None))\n\
             \x20   ctx.register_skill('lookup', '/nowhere/SKILL.md')\n\
             \x20   ctx.register_hook('pre_tool_call', lambda **kw: None)\n\
             \x20   open(os.path.join(os.environ['HERMES_HOME'], 'probe.json'), 'w').write(json.dumps(out))\n",
        )],
    );
    env.config("plugins:\n  enabled: [prober]\n  entries:\n    prober:\n      settings:\n        threshold: 7\n");
    let dotenv = env.home().join(".env");
    std::fs::write(
        &dotenv,
        "# credentials\nexport PROBE_TOKEN=\"secret value\"\nPROBE_KEPT=from-dotenv\n",
    )
    .unwrap();
    std::fs::set_permissions(&dotenv, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    // The host's own environment wins over .env.
    let out = env.run(
        &["plugins", "list", "--json"],
        &[("PROBE_KEPT", "from-the-shell")],
    );
    assert!(out.status.success(), "{}", text(&out));
    let probe: Value =
        serde_json::from_str(&std::fs::read_to_string(env.home().join("probe.json")).unwrap())
            .unwrap();
    assert_eq!(probe["config"], "None", "{probe:#}");
    assert_eq!(probe["llm"], false, "{probe:#}");
    assert_eq!(
        probe["manifest"],
        json!([
            "PluginManifest",
            "prober",
            "1.2.3",
            "probes ctx",
            "Ada, ada@example.org",
            "prober"
        ])
    );
    assert_eq!(probe["unknown"], "AttributeError");
    assert_eq!(probe["threshold"], 7);
    assert_eq!(probe["nested"], 7);
    assert_eq!(probe["get_config"], 7);
    assert_eq!(probe["home"], env.home().display().to_string());
    assert_eq!(probe["profile"], json!(["custom", "custom", "prober"]));
    assert_eq!(probe["token"], "secret value");
    assert_eq!(probe["kept"], "from-the-shell");
    assert_eq!(probe["leaked"], json!([]));
    assert_eq!(probe["register_tool"], true);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = list["plugins"][0]["warnings"].to_string();
    assert!(
        warnings.contains(
            "Plugin 'prober' called ctx.register_skill(), which hermes-hooks does not offer"
        ) && warnings.contains("ctx.llm()"),
        "{warnings}"
    );
}

#[test]
fn a_gateway_policy_comparing_platform_value_decides_behind_a_real_gateway() {
    // The reference's `event.source.platform` is its `Platform` enum: a Discord policy
    // compares `.value`, another the member, a third the plain string.
    let env = Env::new();
    env.plugin(
        "discord-quiet",
        "name: discord-quiet\n",
        &[(
            "__init__.py",
            "import enum\n\
             def policy(event, **kw):\n\
             \x20   p = event.source.platform\n\
             \x20   if p.value == 'discord' and p == 'discord' and isinstance(p, enum.Enum) and p.name == 'DISCORD':\n\
             \x20       return {'action': 'skip', 'reason': 'discord is muted'}\n\
             \x20   if p.value == 'irc' and p.name == 'IRC':\n\
             \x20       return {'action': 'rewrite', 'text': 'from irc: ' + event.text}\n\
             def register(ctx):\n    ctx.register_hook('pre_gateway_dispatch', policy)\n",
        )],
    );
    env.config("plugins:\n  enabled: [discord-quiet]\n");
    let (out, lines) = env.gateway_stdin(&[
        json!({"platform": "discord", "chat_id": "d1", "user_id": "u1", "text": "hello"}),
        json!({"platform": "irc", "chat_id": "i1", "user_id": "u1", "text": "hi"}),
        json!({"platform": "local", "chat_id": "l1", "user_id": "u1", "text": "plain"}),
    ]);
    // Chats answer in any order.
    let mut replies: Vec<(String, String)> = lines
        .iter()
        .filter(|l| l["kind"] == "reply")
        .map(|l| {
            (
                l["chat_id"].as_str().unwrap_or_default().to_string(),
                l["text"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    replies.sort();
    assert_eq!(
        replies,
        [
            ("i1".to_string(), "from irc: hi".to_string()),
            ("l1".to_string(), "plain".to_string())
        ],
        "{}",
        text(&out)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("reason=discord is muted"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_gateway_handler_imports_hermes_constants_too() {
    let env = Env::new();
    let hook = env.home().join("hooks/home-writer");
    std::fs::create_dir_all(&hook).unwrap();
    std::fs::write(
        hook.join("HOOK.yaml"),
        "name: home-writer\nevents: [\"agent:start\"]\n",
    )
    .unwrap();
    std::fs::write(
        hook.join("handler.py"),
        "import sys\nfrom hermes_constants import get_hermes_home\nfrom hermes_cli.profiles import get_active_profile_name\n\
         from hermes_cli.config import load_config, cfg_get\n\
         def handle(event_type, context):\n    window = cfg_get(load_config(), 'gateway.history_window')\n\
         \x20   (get_hermes_home() / 'seen.txt').write_text(f\"{event_type} {get_active_profile_name()} {window} {'yaml' in sys.modules}\")\n\
         \x20   import os\n    (get_hermes_home() / 'env.txt').write_text(os.environ.get('GATEWAY_PROBE', 'unset'))\n",
    )
    .unwrap();
    env.config("gateway:\n  history_window: 50\n");
    // `.env` reaches handler.py as it reaches plugins (credentials of observability hooks).
    let dotenv = env.home().join(".env");
    std::fs::write(&dotenv, "export GATEWAY_PROBE=\"from dotenv\"\n").unwrap();
    std::fs::set_permissions(&dotenv, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let (out, _) = env.gateway_stdin(&[json!({"chat_id": "c1", "user_id": "u1", "text": "hi"})]);
    // The config came from the host as parsed there: no YAML parser was needed (`False`).
    assert_eq!(
        std::fs::read_to_string(env.home().join("seen.txt")).unwrap_or_default(),
        "agent:start custom 50 False",
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read_to_string(env.home().join("env.txt")).unwrap_or_default(),
        "from dotenv"
    );
}

// ---------------------------------------------------------------------------------------
// Faults

#[test]
fn an_import_error_or_a_raising_register_is_reported_and_other_plugins_load() {
    let env = Env::new();
    env.plugin(
        "a-broken",
        "name: a-broken\n",
        &[("__init__.py", "import no_such_module_here\n")],
    );
    env.plugin(
        "b-raises",
        "name: b-raises\n",
        &[(
            "__init__.py",
            "def register(ctx):\n    raise RuntimeError('needs an API key')\n",
        )],
    );
    env.plugin("c-noreg", "name: c-noreg\n", &[("__init__.py", "X = 1\n")]);
    env.plugin(
        "d-good",
        "name: d-good\n",
        &[(
            "__init__.py",
            "def block(**kw):\n    return {'action': 'block', 'message': 'good'}\n\
             def register(ctx):\n    ctx.register_skill('x', {}, None)\n    ctx.register_platform('y')\n    ctx.register_hook('pre_tool_call', block)\n    ctx.register_hook('pre_tool_cal', block)\n",
        )],
    );
    env.config("plugins:\n  enabled: [a-broken, b-raises, c-noreg, d-good]\n");
    let out = env.run(&["plugins", "list", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by = |key: &str| {
        list["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["key"] == key)
            .unwrap()
            .clone()
    };
    let error = |key: &str| by(key)["error"].as_str().unwrap_or_default().to_string();
    assert!(
        error("a-broken").ends_with("ModuleNotFoundError: No module named 'no_such_module_here'"),
        "{}",
        error("a-broken")
    );
    assert!(
        error("b-raises").ends_with("RuntimeError: needs an API key"),
        "{}",
        error("b-raises")
    );
    assert!(
        error("c-noreg").ends_with("no register() function"),
        "{}",
        error("c-noreg")
    );
    let good = by("d-good");
    assert_eq!(good["enabled"], true, "{good:#}");
    assert_eq!(good["kind"], "python");
    assert!(good["worker_pid"].as_u64().is_some(), "{good:#}");
    assert_eq!(good["hooks"], json!(["pre_tool_call", "pre_tool_cal"]));
    assert_eq!(good["unknown_hooks"], json!(["pre_tool_cal"]));
    let warnings = good["warnings"].to_string();
    assert!(warnings.contains("ctx.register_skill()"), "{warnings}");
    assert!(warnings.contains("ctx.register_platform()"), "{warnings}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Plugin 'd-good' registered unknown hook 'pre_tool_cal' (valid: "),
        "{stderr}"
    );
    // A plugin that failed before registering anything keeps no worker.
    assert!(by("a-broken")["worker_pid"].is_null());
}

/// A plugin whose `pre_tool_call` does what `action` says for tool `crash`, and blocks
/// tool `alive` with the worker's pid.
fn faulty_plugin(env: &Env, manifest_extra: &str, action: &str) {
    env.plugin(
        "faulty",
        &format!("name: faulty\n{manifest_extra}"),
        &[(
            "__init__.py",
            &format!(
                "import os, sys, time, signal\n\
                 def guard(tool_name, **kw):\n    if tool_name == 'crash':\n        {action}\n    return {{'action': 'block', 'message': 'alive ' + str(os.getpid())}}\n\
                 def register(ctx):\n    ctx.register_hook('pre_tool_call', guard)\n"
            ),
        )],
    );
    env.config("plugins:\n  enabled: [faulty]\n");
}

fn pid_of_block(hooks: &Hooks) -> u32 {
    let verdict = hooks.pre_tool_call(&tool_call("alive", "{}"));
    let message = verdict.blocked.expect("the worker answers").message;
    message.strip_prefix("alive ").unwrap().parse().unwrap()
}

/// Fires `crash`, expecting no opinion, then waits for the restarted worker to answer.
fn crash_and_recover(hooks: &Hooks) -> (u32, u32) {
    let before = pid_of_block(hooks);
    let verdict = hooks.pre_tool_call(&tool_call("crash", "{}"));
    assert!(verdict.blocked.is_none(), "a crash counts as no opinion");
    let started = Instant::now();
    loop {
        let verdict = hooks.pre_tool_call(&tool_call("alive", "{}"));
        if let Some(blocked) = verdict.blocked {
            let after: u32 = blocked
                .message
                .strip_prefix("alive ")
                .unwrap()
                .parse()
                .unwrap();
            return (before, after);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the worker never came back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_worker_that_exits_is_survived_and_restarted() {
    let env = Env::new();
    faulty_plugin(&env, "", "os._exit(1)");
    let hooks = env.load();
    let (before, after) = crash_and_recover(&hooks);
    assert_ne!(before, after, "a new worker answers");
}

#[test]
fn a_worker_killed_by_a_signal_is_survived_and_restarted() {
    let env = Env::new();
    faulty_plugin(&env, "", "os.kill(os.getpid(), 9)");
    let hooks = env.load();
    let (before, after) = crash_and_recover(&hooks);
    assert_ne!(before, after);
}

#[test]
fn a_hung_worker_is_killed_at_the_timeout_and_fail_closed_blocks() {
    let env = Env::new();
    faulty_plugin(&env, "timeout: 1\nfail_closed: true\n", "time.sleep(3600)");
    let hooks = env.load();
    let before = pid_of_block(&hooks);
    let started = Instant::now();
    let verdict = hooks.pre_tool_call(&tool_call("crash", "{}"));
    let took = started.elapsed();
    let blocked = verdict.blocked.expect("fail_closed blocks");
    assert!(
        blocked.message.contains(
            "plugin 'faulty' guards this tool call and is not answering (killed after timeout 1 s)"
        ),
        "{}",
        blocked.message
    );
    assert!(
        took < Duration::from_secs(30),
        "held past the timeout: {took:?}"
    );
    // The hung worker is gone.
    let gone = Instant::now();
    while Path::new(&format!("/proc/{before}")).exists() {
        let stat = std::fs::read_to_string(format!("/proc/{before}/stat")).unwrap_or_default();
        if stat.contains(") Z ") {
            break;
        }
        assert!(
            gone.elapsed() < Duration::from_secs(10),
            "worker {before} still runs"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn five_crashes_in_a_minute_disable_the_plugin_with_a_message_naming_it() {
    let env = Env::new();
    faulty_plugin(&env, "", "os._exit(3)");
    let out = env.fire_tool(r#"{"tool_name": "crash"}"#, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Plugin 'faulty' crashed in hook 'pre_tool_call' (callback faulty::guard): exit status 3"),
        "{}",
        text(&out)
    );
    let hooks = env.load();
    for _ in 0..5 {
        crash_and_recover_or_disabled(&hooks);
    }
    // Disabled now: no worker runs or starts, every firing is no opinion at once.
    let worker = hooks.report().plugins[0].worker.clone().unwrap();
    let (pid, _, last_crash) = worker.status();
    assert_eq!(pid, None);
    assert_eq!(last_crash.as_deref(), Some("exit status 3"));
    std::thread::sleep(Duration::from_secs(4));
    let verdict = hooks.pre_tool_call(&tool_call("alive", "{}"));
    assert!(verdict.blocked.is_none());
    assert_eq!(worker.status().0, None, "no worker was started again");
}

fn crash_and_recover_or_disabled(hooks: &Hooks) {
    let _ = hooks.pre_tool_call(&tool_call("crash", "{}"));
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if hooks
            .pre_tool_call(&tool_call("alive", "{}"))
            .blocked
            .is_some()
        {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_print_flood_never_reaches_the_protocol_and_the_answer_arrives() {
    let env = Env::new();
    faulty_plugin(
        &env,
        "",
        "for i in range(200000):\n            print('{\"answers\": [null]} flood', i)\n        sys.stderr.write('x' * 100000 + '\\n')\n        return {'action': 'block', 'message': 'after the flood'}",
    );
    let hooks = env.load();
    let before = pid_of_block(&hooks);
    let verdict = hooks.pre_tool_call(&tool_call("crash", "{}"));
    assert_eq!(verdict.blocked.unwrap().message, "after the flood");
    assert_eq!(
        pid_of_block(&hooks),
        before,
        "the same worker answers after the flood"
    );
}

// ---------------------------------------------------------------------------------------
// One interpreter for the plugins of a home

/// A plugin that records its worker's pid when it registers, blocks `alive` naming
/// itself and its pid when `blocks`, and runs `crash` (Python statements) on a tool called
/// `crash`.
fn neighbour(env: &Env, name: &str, manifest_extra: &str, blocks: bool, crash: &str) {
    let answer = if blocks {
        format!("return {{'action': 'block', 'message': '{name} ' + str(os.getpid())}}")
    } else {
        "return None".to_string()
    };
    env.plugin(
        name,
        &format!("name: {name}\n{manifest_extra}"),
        &[(
            "__init__.py",
            &format!(
                "import os\n\
                 def guard(tool_name, **kw):\n    if tool_name == 'crash':\n        {crash}\n    {answer}\n\
                 def register(ctx):\n    with open(os.path.join(os.environ['HERMES_HOME'], 'pids'), 'a') as f:\n        f.write('{name} %d\\n' % os.getpid())\n    ctx.register_hook('pre_tool_call', guard)\n"
            ),
        )],
    );
}

fn pids(env: &Env) -> std::collections::BTreeMap<String, String> {
    std::fs::read_to_string(env.home().join("pids"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, pid)| (name.to_string(), pid.to_string()))
        .collect()
}

/// The Python plugins of a home run in one interpreter, as in Hermes (one process, not
/// one per plugin); a plugin with `isolation: process` keeps a worker of its own. The
/// callbacks of neighbours answer in one round trip and still in the registry's order,
/// each under its own label: the first block wins.
#[test]
fn the_plugins_of_a_home_share_one_interpreter_and_an_isolated_one_has_its_own() {
    let env = Env::new();
    for name in ["a-one", "b-two", "c-three"] {
        neighbour(&env, name, "", name != "a-one", "pass");
    }
    neighbour(&env, "d-alone", "isolation: process\n", true, "pass");
    env.config("plugins:\n  enabled: [a-one, b-two, c-three, d-alone]\n");
    let hooks = env.load();
    let pids = pids(&env);
    assert_eq!(pids.len(), 4, "{pids:?}");
    assert_eq!(pids["a-one"], pids["b-two"]);
    assert_eq!(pids["a-one"], pids["c-three"]);
    assert_ne!(pids["a-one"], pids["d-alone"]);
    let workers: Vec<Option<u32>> = hooks
        .report()
        .plugins
        .iter()
        .map(|p| p.worker_pid)
        .collect();
    assert_eq!(workers[0], workers[1]);
    assert_eq!(workers[0], workers[2]);
    assert_ne!(workers[0], workers[3]);
    let labels: Vec<&str> = hooks
        .entries("pre_tool_call")
        .iter()
        .map(|e| e.label.as_str())
        .collect();
    assert_eq!(
        labels,
        [
            "a-one::guard",
            "b-two::guard",
            "c-three::guard",
            "d-alone::guard"
        ]
    );
    let verdict = hooks.pre_tool_call(&tool_call("alive", "{}"));
    assert_eq!(
        verdict.blocked.unwrap().message,
        format!("b-two {}", pids["b-two"])
    );
}

/// A crash in the shared interpreter is reported naming the plugin whose callback was
/// running (not its neighbours), the interpreter comes back at the next firing, and after
/// five crashes the plugin is disabled while its neighbours go on in a new interpreter.
#[test]
fn a_crash_in_the_shared_interpreter_names_its_plugin_and_the_others_come_back() {
    let env = Env::new();
    neighbour(&env, "a-calm", "", false, "pass");
    neighbour(&env, "b-bad", "", false, "os._exit(3)");
    neighbour(&env, "c-calm", "", true, "pass");
    env.config("plugins:\n  enabled: [a-calm, b-bad, c-calm]\n");
    let out = env.fire_tool(r#"{"tool_name": "crash"}"#, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "Plugin 'b-bad' crashed in hook 'pre_tool_call' (callback b-bad::guard): exit status 3"
        ),
        "{}",
        text(&out)
    );
    assert!(!stderr.contains("Plugin 'a-calm' crashed"), "{stderr}");
    assert!(!stderr.contains("Plugin 'c-calm' crashed"), "{stderr}");
    let hooks = env.load();
    let alive = |hooks: &Hooks| {
        hooks
            .pre_tool_call(&tool_call("alive", "{}"))
            .blocked
            .map(|b| b.message)
    };
    let first = alive(&hooks).expect("c-calm answers");
    for _ in 0..5 {
        let _ = hooks.pre_tool_call(&tool_call("crash", "{}"));
        let started = Instant::now();
        while alive(&hooks).is_none() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // b-bad is disabled; the interpreter of the other two runs on, a new one.
    let report = hooks.report();
    let bad = report.plugins.iter().find(|p| p.name == "b-bad").unwrap();
    assert_eq!(
        bad.worker.as_ref().unwrap().status().2.as_deref(),
        Some("exit status 3")
    );
    let now = alive(&hooks).expect("c-calm still answers");
    assert_ne!(now, first, "a new interpreter answers");
    let verdict = hooks.pre_tool_call(&tool_call("crash", "{}"));
    assert!(
        verdict.blocked.is_some(),
        "b-bad no longer runs, c-calm answers"
    );
}

/// A plugin whose import kills the interpreter is named with the cause and left out; its
/// neighbours load in a new interpreter and decide.
#[test]
fn a_plugin_whose_import_kills_the_interpreter_does_not_take_its_neighbours_down() {
    let env = Env::new();
    env.plugin(
        "a-dies",
        "name: a-dies\n",
        &[("__init__.py", "import os\nos._exit(5)\n")],
    );
    neighbour(&env, "b-fine", "", true, "pass");
    env.config("plugins:\n  enabled: [a-dies, b-fine]\n");
    let out = env.fire_tool(r#"{"tool_name": "alive"}"#, &[]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("Outcome: blocked by b-fine::guard"),
        "{shown}"
    );
    assert!(
        shown.contains("plugins/a-dies: the Python worker failed while loading the plugin (closed its end of the protocol; exit status 5)"),
        "{shown}"
    );
    let list = text(&env.run(&["plugins", "list"], &[]));
    let dies = list
        .lines()
        .skip_while(|l| !l.contains("a-dies"))
        .take(6)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(dies.contains("exit status 5"), "{list}");
}

/// What plugins sharing an interpreter print or log is filed under each one's name.
#[test]
fn neighbours_logs_and_prints_are_filed_under_their_own_names() {
    let env = Env::new();
    for name in ["p-one", "p-two"] {
        env.plugin(
            name,
            &format!("name: {name}\n"),
            &[(
                "__init__.py",
                &format!(
                    "import logging\ndef cb(**kw):\n    print('printed by {name}')\n    logging.getLogger('x').warning('logged by {name}')\n\
                     def register(ctx):\n    ctx.register_hook('pre_tool_call', cb)\n"
                ),
            )],
        );
    }
    env.config("plugins:\n  enabled: [p-one, p-two]\n");
    let out = env.fire_tool(r#"{"tool_name": "x"}"#, &[("HERMES_LOG", "info")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for name in ["p-one", "p-two"] {
        for what in ["printed", "logged"] {
            let line = stderr
                .lines()
                .find(|l| l.contains(&format!("{what} by {name}")))
                .unwrap_or_else(|| panic!("{what} by {name}: {stderr}"));
            assert!(line.contains(&format!("plugin=\"{name}\"")), "{line}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Logging

#[test]
fn logging_and_print_reach_the_host_log_at_their_level_under_the_plugin_name() {
    let env = Env::new();
    env.plugin(
        "audit",
        "name: audit\n",
        &[(
            "__init__.py",
            "import json, logging\nlogger = logging.getLogger(__name__)\n\
             def audit_tool_call(tool_name, args, task_id, **kwargs):\n    logger.info('TOOL_CALL session=%s tool=%s args=%s', task_id, tool_name, json.dumps(args)[:200])\n    logger.debug('debug detail')\n    print(f'Executing potentially dangerous tool: {tool_name}')\n\
             def register(ctx):\n    ctx.register_hook('pre_tool_call', audit_tool_call)\n",
        )],
    );
    env.config("plugins:\n  enabled: [audit]\n");
    let fire = |level: &str| {
        let out = env.fire_tool(
            r#"{"tool_name": "terminal", "args": {"command": "ls"}, "task_id": "t9"}"#,
            &[("HERMES_LOG", level)],
        );
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let info = fire("info");
    let line = info
        .lines()
        .find(|l| l.contains("TOOL_CALL session=t9 tool=terminal"))
        .unwrap_or_else(|| panic!("{info}"));
    assert!(
        line.contains("INFO") && line.contains("plugin=\"audit\""),
        "{line}"
    );
    assert!(line.contains("module=\"hermes_plugins.audit\""), "{line}");
    assert!(
        info.lines().any(
            |l| l.contains("Executing potentially dangerous tool: terminal")
                && l.contains("plugin=\"audit\"")
        ),
        "{info}"
    );
    assert!(!info.contains("debug detail"), "{info}");
    let warn = fire("warn");
    assert!(!warn.contains("TOOL_CALL"), "{warn}");
}

// ---------------------------------------------------------------------------------------
// CLI

#[test]
fn plugins_new_python_writes_a_plugin_whose_test_passes_and_install_enables_it() {
    let env = Env::new();
    let out = env.run(
        &[
            "plugins",
            "new",
            "my-guard",
            "--python",
            "--path",
            env.work().to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    let dir = env.work().join("my-guard");
    let unittest = Command::new("python3")
        .args(["-m", "unittest", "-v"])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(unittest.status.success(), "{}", text(&unittest));
    assert!(
        String::from_utf8_lossy(&unittest.stderr).contains("Ran 2 tests"),
        "{}",
        text(&unittest)
    );
    let out = env.run(&["plugins", "install", dir.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(env.home().join("plugins/my-guard/__init__.py").is_file());
    let out = env.fire_tool(
        r#"{"tool_name": "terminal", "args": {"command": "rm -rf /"}}"#,
        &[],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(
            "Outcome: blocked by my-guard::on_pre_tool_call: refusing to delete the filesystem"
        ),
        "{}",
        text(&out)
    );
    let out = env.run(&["plugins", "list"], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("kind: python (python3, worker pid "),
        "{stdout}"
    );
    assert!(
        stdout.contains("hooks: pre_tool_call, on_session_end"),
        "{stdout}"
    );
}

#[test]
fn plugins_enable_turns_a_python_plugin_on_and_disable_off() {
    let env = Env::new();
    env.plugin(
        "quiet",
        "name: quiet\n",
        &[(
            "__init__.py",
            "def register(ctx):\n    ctx.register_hook('on_session_start', lambda **kw: None)\n",
        )],
    );
    env.config("model: x\n");
    let listed = |env: &Env| -> Value {
        let out = env.run(&["plugins", "list", "--json"], &[]);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["plugins"][0].clone()
    };
    let before = listed(&env);
    assert_eq!(before["enabled"], false);
    assert!(
        before["error"]
            .as_str()
            .unwrap()
            .contains("hermes plugins enable quiet"),
        "{before:#}"
    );
    assert!(
        env.run(&["plugins", "enable", "quiet"], &[])
            .status
            .success()
    );
    let after = listed(&env);
    assert_eq!(
        (after["enabled"].clone(), after["kind"].clone()),
        (json!(true), json!("python"))
    );
    assert_eq!(after["hooks"], json!(["on_session_start"]));
    assert!(
        env.run(&["plugins", "disable", "quiet"], &[])
            .status
            .success()
    );
    assert_eq!(listed(&env)["error"], "disabled via config");
}

#[test]
fn a_directory_that_is_neither_kind_says_both_ways_to_make_it_one() {
    let env = Env::new();
    env.plugin("half", "name: half\nversion: 1\n", &[]);
    env.config("plugins:\n  enabled: [half]\n");
    let out = env.run(&["plugins", "list", "--json"], &[]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = list["plugins"][0]["error"].as_str().unwrap();
    assert!(
        error.contains("add `library: libhalf.so` for a Rust plugin"),
        "{error}"
    );
    assert!(
        error.contains("or an `__init__.py` with `register(ctx)`"),
        "{error}"
    );
}

#[test]
fn project_plugins_load_with_hermes_enable_project_plugins() {
    let env = Env::new();
    let project = env.work().join(".hermes/plugins/proj");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("plugin.yaml"), "name: proj\n").unwrap();
    std::fs::write(
        project.join("__init__.py"),
        "def register(ctx):\n    ctx.register_hook('pre_tool_call', lambda **kw: {'action': 'block', 'message': 'project plugin'})\n",
    )
    .unwrap();
    env.config("plugins:\n  enabled: [proj]\n");
    let payload = r#"{"tool_name": "terminal"}"#;
    let off = env.fire_tool(payload, &[]);
    assert!(
        !String::from_utf8_lossy(&off.stdout).contains("project plugin"),
        "{}",
        text(&off)
    );
    let on = env.fire_tool(payload, &[("HERMES_ENABLE_PROJECT_PLUGINS", "1")]);
    assert!(
        String::from_utf8_lossy(&on.stdout).contains("blocked by proj::<lambda>: project plugin"),
        "{}",
        text(&on)
    );
}

// ---------------------------------------------------------------------------------------
// The seed's examples, copied unchanged (tests/fixtures/seed-plugins)

/// A home with every example of the seed document installed and enabled, and a stand-in
/// `httpx` module (the one third-party import of the examples) in a directory for
/// `PYTHONPATH`, answering recall with one memory.
fn seed_home(enabled: &[&str]) -> (Env, PathBuf) {
    let env = Env::new();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/seed-plugins");
    let mut all = Vec::new();
    for entry in std::fs::read_dir(&fixtures).unwrap() {
        let entry = entry.unwrap();
        if !entry.file_type().unwrap().is_dir() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let files: Vec<(String, String)> = std::fs::read_dir(entry.path())
            .unwrap()
            .map(|f| {
                let f = f.unwrap();
                (
                    f.file_name().to_string_lossy().into_owned(),
                    std::fs::read_to_string(f.path()).unwrap(),
                )
            })
            .filter(|(n, _)| n != "plugin.yaml")
            .collect();
        let manifest = std::fs::read_to_string(entry.path().join("plugin.yaml")).unwrap();
        let borrowed: Vec<(&str, &str)> = files
            .iter()
            .map(|(n, t)| (n.as_str(), t.as_str()))
            .collect();
        env.plugin(&name, &manifest, &borrowed);
        all.push(name);
    }
    assert_eq!(all.len(), 18, "the seed has 18 plugin examples: {all:?}");
    let enabled: Vec<String> = if enabled.is_empty() {
        all
    } else {
        enabled.iter().map(|s| s.to_string()).collect()
    };
    env.config(&format!("plugins:\n  enabled: [{}]\n", enabled.join(", ")));
    let site = env.work().join("site-packages");
    std::fs::create_dir(&site).unwrap();
    std::fs::write(
        site.join("httpx.py"),
        "import json as _json, os\n\
         class Response:\n    def __init__(self, data):\n        self._data = data\n    def json(self):\n        return self._data\n\
         def post(url, json=None, timeout=None):\n    with open(os.path.join(os.environ['HERMES_HOME'], 'httpx.log'), 'a') as f:\n        f.write(_json.dumps({'url': url, 'json': json}) + '\\n')\n    return Response({'results': [{'text': 'the staging database is atlas'}]})\n",
    )
    .unwrap();
    (env, site)
}

#[test]
fn the_seed_examples_decide_in_hermes_run_as_in_hermes() {
    let (env, site) = seed_home(&[]);
    env.write(
        "child.yaml",
        "turns:\n  - user: sub\n    steps:\n      - final: child done\n",
    );
    std::fs::create_dir(env.work().join("junk")).unwrap();
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: Which staging database should I use?\n    steps:\n      - tool: write_file\n        args: {path: key.txt, content: \"token sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789ab end\"}\n      - tool: read_file\n        args: {path: key.txt}\n      - tool: terminal\n        args: {command: rm -rf junk}\n      - tool: delegate_task\n        args: {tasks: [{script: child.yaml, role: helper}]}\n      - final: Use atlas!\n        echo: true\n",
    );
    let out = env.run(
        &["run", script.to_str().unwrap(), "--approvals", "deny"],
        &[
            ("HERMES_LOG", "info"),
            ("SPONGEBOB_MODE", "on"),
            ("PYTHONPATH", site.to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // pre_llm_call: guardrails, then recall (alphabetical), joined with a blank line.
    assert!(
        stdout.contains("Which staging database should I use?\n\nNever execute commands that delete files without explicit user confirmation.\n\nRecalled context:\n- the staging database is atlas"),
        "{}",
        text(&out)
    );
    // transform_tool_result: the secret never reaches the model.
    assert!(
        stdout.contains(r#"<- {"content":"token [REDACTED] end"}"#),
        "{}",
        text(&out)
    );
    // transform_llm_output: SPONGEBOB_MODE=on.
    assert!(
        stdout.contains("assistant: Use atlas!! Tartar sauce!"),
        "{}",
        text(&out)
    );
    // The observers log, each under its plugin's name.
    for (plugin, line) in [
        ("audit-tool-call", "TOOL_CALL session="),
        (
            "warn-dangerous",
            "⚠ Executing potentially dangerous tool: terminal",
        ),
        ("log-response-length", "RESPONSE session="),
        ("session-duration", "SESSION_DURATION session="),
        ("log-subagent", "SUBAGENT parent="),
        ("log-decision", "approval deny: rm -rf junk for session"),
    ] {
        assert!(
            stderr
                .lines()
                .any(|l| l.contains(line) && l.contains(&format!("plugin=\"{plugin}\""))),
            "{plugin}: {line}\n{stderr}"
        );
    }
    // notify_approval runs osascript, which Linux has not: the reference's warning.
    assert!(
        stderr.contains("Hook 'pre_approval_request' callback notify-approval::notify_approval raised: [Errno 2] No such file or directory: 'osascript'"),
        "{stderr}"
    );
    // recall and sync_memory called their memory service through the user's httpx.
    let calls = env.json_lines("httpx.log");
    let urls: Vec<&str> = calls.iter().filter_map(|c| c["url"].as_str()).collect();
    assert!(
        urls.contains(&"https://your-memory-api.example.com/recall"),
        "{urls:?}"
    );
    assert!(
        urls.contains(&"https://your-memory-api.example.com/store"),
        "{urls:?}"
    );
    assert!(
        env.work().join("junk").exists(),
        "the denied rm -rf did not run"
    );
}

/// Runs `hermes gateway run --stdin` on `messages` and returns the replies' texts by chat.
fn gateway_replies(env: &Env, messages: &[Value]) -> (Vec<(String, String)>, Output) {
    let (out, lines) = env.gateway_stdin(messages);
    let replies = lines
        .iter()
        .filter(|v| v["kind"] == "reply")
        .map(|v| {
            (
                v["chat_id"].as_str().unwrap_or_default().to_string(),
                v["text"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    (replies, out)
}

#[test]
fn the_seed_dm_policy_drops_strangers_dms_behind_a_real_gateway() {
    let (env, _) = seed_home(&["deny-unauthorized-dms"]);
    let (mut replies, out) = gateway_replies(
        &env,
        &[
            json!({"chat_id": "dm-stranger", "user_id": "stranger", "text": "let me in", "chat_type": "dm"}),
            json!({"chat_id": "dm-owner", "user_id": "owner", "text": "hello owner", "chat_type": "dm"}),
            json!({"chat_id": "room", "user_id": "stranger", "text": "hello room", "chat_type": "group"}),
        ],
    );
    // Chats are served concurrently: their answers come in any order.
    replies.sort();
    assert_eq!(
        replies,
        [
            ("dm-owner".to_string(), "hello owner".to_string()),
            ("room".to_string(), "hello room".to_string())
        ],
        "{}",
        text(&out)
    );
}

#[test]
fn the_seed_buffer_rewrites_ambient_messages_into_one_prompt_on_a_mention() {
    let (env, _) = seed_home(&["buffer-or-rewrite"]);
    let (replies, out) = gateway_replies(
        &env,
        &[
            json!({"chat_id": "room", "user_id": "a", "text": "first", "chat_type": "group"}),
            json!({"chat_id": "other", "user_id": "b", "text": "elsewhere", "chat_type": "group"}),
            json!({"chat_id": "room", "user_id": "b", "text": "second", "chat_type": "group"}),
            json!({"chat_id": "room", "user_id": "a", "text": "@hermes sum up", "chat_type": "group"}),
        ],
    );
    assert_eq!(
        replies,
        [(
            "room".to_string(),
            "first\nsecond\n@hermes sum up".to_string()
        )],
        "{}",
        text(&out)
    );
}

#[test]
fn gateway_send_and_append_to_transcript_reach_the_real_gateway() {
    let env = Env::new();
    env.plugin(
        "handoff",
        "name: handoff\n",
        &[(
            "__init__.py",
            "def handoff(event, gateway, session_store, **kwargs):\n\
             \x20   if event.text.startswith('human:'):\n\
             \x20       session_store.append_to_transcript(event.session_key, {'role': 'user', 'content': event.text, 'collected': True})\n\
             \x20       gateway.adapters[event.source.platform].send(event.source.chat_id, 'a human will answer ' + (event.source.user_name or '?'))\n\
             \x20       return {'action': 'skip', 'reason': 'handed off'}\n\
             def register(ctx):\n    ctx.register_hook('pre_gateway_dispatch', handoff)\n",
        )],
    );
    env.config("plugins:\n  enabled: [handoff]\n");
    let (out, lines) = env.gateway_stdin(&[
        json!({"chat_id": "c1", "user_id": "u1", "text": "hi"}),
        json!({"chat_id": "c1", "user_id": "u1", "user_name": "Ann", "text": "human: help"}),
    ]);
    let sent: Vec<&Value> = lines.iter().filter(|v| v["kind"] == "send").collect();
    assert_eq!(sent.len(), 1, "{}", text(&out));
    assert_eq!(sent[0]["text"], "a human will answer Ann");
    let session = lines.iter().find(|v| v["kind"] == "reply").unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let transcript =
        std::fs::read_to_string(env.home().join(format!("sessions/{session}.jsonl"))).unwrap();
    assert!(
        transcript
            .lines()
            .any(|l| l.contains("\"collected\":true") && l.contains("human: help")),
        "{transcript}"
    );
}

/// A gateway policy as published ones keep a group's ambient talk: messages that do not
/// mention the bot go into the chat's session transcript through the reference's
/// `SessionStore` (`get_or_create_session`, `append_to_transcript` by session id,
/// `update_session`) and are skipped; a mention is answered, and the plugin can read what it
/// kept with `load_transcript`.
#[test]
fn an_ambient_group_policy_keeps_unmentioned_messages_through_the_reference_session_store() {
    let env = Env::new();
    env.plugin(
        "ambient",
        "name: ambient\n",
        &[(
            "__init__.py",
            r#"import json, os
OUT = os.path.join(os.environ["HERMES_HOME"], "ambient.jsonl")

def dispatch(event, gateway, session_store, **kwargs):
    source = event.source
    if source.chat_type != "group":
        return None
    entry = session_store.get_or_create_session(source)
    if "@bot" in event.text:
        kept = session_store.load_transcript(entry.session_id)
        with open(OUT, "a") as f:
            f.write(json.dumps({"kept": [m.get("content") for m in kept if m.get("ambient")],
                                "key": entry.session_key, "platform": entry.platform.value}) + "\n")
        return {"action": "allow"}
    session_store.append_to_transcript(
        entry.session_id, {"role": "user", "content": f"[{source.user_name}] {event.text}", "ambient": True})
    session_store.update_session(entry.session_key)
    return {"action": "skip", "reason": "ambient"}

def register(ctx):
    ctx.register_hook("pre_gateway_dispatch", dispatch)
"#,
        )],
    );
    env.config("plugins:\n  enabled: [ambient]\n");
    let group = |user: &str, text: &str| json!({"chat_id": "g1", "user_id": user, "user_name": user, "chat_type": "group", "text": text});
    let (out, lines) = env.gateway_stdin(&[
        group("Ann", "lunch at noon?"),
        group("Bob", "sure"),
        group("Ann", "@bot book a table"),
    ]);
    let replies: Vec<&Value> = lines.iter().filter(|v| v["kind"] == "reply").collect();
    assert_eq!(
        replies.len(),
        1,
        "only the mention is answered: {}",
        text(&out)
    );
    let seen = env.json_lines("ambient.jsonl");
    assert_eq!(seen.len(), 1, "{}", text(&out));
    assert_eq!(
        seen[0]["kept"],
        json!(["[Ann] lunch at noon?", "[Bob] sure"])
    );
    assert_eq!(seen[0]["platform"], "local");
    let session = replies[0]["session_id"].as_str().unwrap();
    let transcript =
        std::fs::read_to_string(env.home().join(format!("sessions/{session}.jsonl"))).unwrap();
    let ambient = transcript
        .lines()
        .filter(|l| l.contains("\"ambient\":true"))
        .count();
    assert_eq!(
        ambient, 2,
        "the ambient messages are in the session's transcript:\n{transcript}"
    );
}

// ---------------------------------------------------------------------------------------
// Middleware: ctx.register_middleware, run on the real requests of `hermes run`

/// A context pruner as published: `llm_request` middleware only, keeping the last two
/// messages. The model receives the pruned request (`echo: true` shows it), and
/// `pre_api_request` carries the trace.
#[test]
fn an_llm_request_pruner_changes_what_the_model_receives_and_leaves_a_trace() {
    let env = Env::new();
    env.plugin(
        "pruner",
        "name: pruner\n",
        &[(
            "__init__.py",
            r#"import json, os
def prune(request, original_request, api_request_id, middleware_schema_version, **kw):
    messages = request.get("messages") or []
    if len(messages) <= 2:
        return None
    assert original_request["messages"] == messages, "the first middleware sees the original"
    return {"request": dict(request, messages=messages[-2:]), "reason": "kept the last 2 of %d" % len(messages), "source": "pruner"}

def seen(middleware_trace, request_messages, **kw):
    with open(os.path.join(os.environ["HERMES_HOME"], "api.jsonl"), "a") as f:
        f.write(json.dumps({"trace": middleware_trace, "count": len(request_messages)}) + "\n")

def register(ctx):
    ctx.register_middleware("llm_request", prune)
    ctx.register_hook("pre_api_request", seen)
"#,
        )],
    );
    env.config("plugins:\n  enabled: [pruner]\n");
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: one\n    steps:\n      - final: first\n  - user: two\n    steps:\n      - final: second\n  - user: three\n    steps:\n      - final: third\n        echo: true\n",
    );
    let out = env.run(&["run", script.to_str().unwrap()], &[]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("[the request after middleware: {")
            && shown.contains(r#""messages":[{"role":"assistant","content":"second"},{"role":"user","content":"three"}]"#),
        "{shown}"
    );
    let api = env.json_lines("api.jsonl");
    assert_eq!(api.len(), 3, "{api:?}");
    assert_eq!(api[0]["trace"], json!([]));
    assert_eq!(
        api[2]["trace"],
        json!([{"reason": "kept the last 2 of 5", "source": "pruner"}])
    );
    assert_eq!(api[2]["count"], 2, "request_messages is what was sent");
}

/// `tool_request` rewrites the arguments before hooks and the tool see them;
/// `tool_execution` wraps the run: it changes the result, answers from a cache without
/// running the tool, and a second `next_call` is refused. While a wrapper waits for the
/// tool, the same plugin's hooks fired by the tool (`transform_terminal_output`) answer.
#[test]
fn tool_middleware_rewrites_wraps_and_short_circuits_real_tool_calls() {
    let env = Env::new();
    env.plugin(
        "toolmw",
        "name: toolmw\n",
        &[(
            "__init__.py",
            r#"import json, os
OUT = os.path.join(os.environ["HERMES_HOME"], "toolmw.jsonl")
def log(**record):
    with open(OUT, "a") as f:
        f.write(json.dumps(record) + "\n")

def rewrite(tool_name, args, original_args, tool_call_id, **kw):
    if tool_name == "terminal" and args.get("command") == "echo hi":
        return {"args": dict(args, command="echo rewritten"), "name": "rewriter"}

def broken(tool_name, args, **kw):
    raise ValueError("boom")

def wrap(tool_name, args, next_call, **kw):
    command = args.get("command")
    if command == "cached":
        return json.dumps({"output": "from the cache", "exit_code": 0})
    if command == "twice":
        next_call(args)
        return next_call(args)
    return next_call(args).replace("rewritten", "rewritten+wrapped")

def pre(tool_name, args, middleware_trace, **kw):
    log(hook="pre_tool_call", command=args.get("command"), trace=middleware_trace)

def terminal_output(command, output, **kw):
    log(hook="transform_terminal_output", command=command)

def register(ctx):
    ctx.register_middleware("tool_request", rewrite)
    ctx.register_middleware("tool_request", broken)
    ctx.register_middleware("tool_execution", wrap)
    ctx.register_middleware("tool_exec", wrap)
    ctx.register_hook("pre_tool_call", pre)
    ctx.register_hook("transform_terminal_output", terminal_output)
"#,
        )],
    );
    env.config("plugins:\n  enabled: [toolmw]\n");
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: go\n    steps:\n      - tool: terminal\n        args: {command: echo hi}\n      - tool: terminal\n        args: {command: cached}\n      - tool: terminal\n        args: {command: twice}\n      - final: done\n        echo: true\n",
    );
    let out = env.run(
        &["run", script.to_str().unwrap()],
        &[("HERMES_LOG", "warn")],
    );
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("rewritten+wrapped"),
        "the wrapper changed the result: {shown}"
    );
    assert!(shown.contains("from the cache"), "{shown}");
    assert!(
        !shown.contains("cached: not found"),
        "the cached command never ran: {shown}"
    );
    assert!(
        shown.contains("called next_call() more than once"),
        "{shown}"
    );
    assert!(
        shown.contains("Middleware 'tool_request' callback toolmw::broken raised: boom"),
        "{shown}"
    );
    assert!(
        shown.contains("registered unknown middleware 'tool_exec'"),
        "{shown}"
    );
    let log = env.json_lines("toolmw.jsonl");
    let pre: Vec<&Value> = log
        .iter()
        .filter(|r| r["hook"] == "pre_tool_call")
        .collect();
    assert_eq!(pre[0]["command"], "echo rewritten");
    assert_eq!(pre[0]["trace"], json!([{"name": "rewriter"}]));
    assert_eq!(pre[1]["trace"], json!([]));
    let ran: Vec<&Value> = log
        .iter()
        .filter(|r| r["hook"] == "transform_terminal_output")
        .map(|r| &r["command"])
        .collect();
    assert_eq!(
        ran,
        [&json!("echo rewritten"), &json!("twice")],
        "the tool ran once per call, never for the cached one"
    );
}

/// `llm_execution` wraps the model request: a cache answers one prompt itself, the model
/// answers the others.
#[test]
fn an_llm_execution_wrapper_answers_from_its_cache_or_passes_the_request_on() {
    let env = Env::new();
    env.plugin(
        "cache",
        "name: cache\n",
        &[(
            "__init__.py",
            r#"def cache(request, next_call, **kw):
    if request["messages"][-1]["content"] == "what is cached?":
        return {"content": "answered by the cache", "tool_calls": []}
    response = next_call(request)
    return dict(response, content=response["content"] + " (through the wrapper)")

def register(ctx):
    ctx.register_middleware("llm_execution", cache)
"#,
        )],
    );
    env.config("plugins:\n  enabled: [cache]\n");
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: what is cached?\n    steps:\n      - final: the model's answer\n  - user: other\n    steps:\n      - final: model two\n",
    );
    let out = env.run(&["run", script.to_str().unwrap()], &[]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("assistant: answered by the cache"),
        "{shown}"
    );
    assert!(!shown.contains("the model's answer"), "{shown}");
    assert!(
        shown.contains("assistant: model two (through the wrapper)"),
        "{shown}"
    );
}

// ---------------------------------------------------------------------------------------
// Tools and commands: ctx.register_tool, ctx.register_command

const WEATHER_PLUGIN: &str = r#"import json, os
SCHEMA = {"name": "weather", "description": "The forecast for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}

def handle(args, **kw):
    return json.dumps({"city": args["city"], "forecast": "sunny", "has_task_id": bool(kw.get("task_id"))})

def broken(args, **kw):
    raise ValueError("no data")

def guard(tool_name, args, **kw):
    if tool_name == "weather" and args.get("city") == "Nowhere":
        return {"action": "block", "message": "no forecast for Nowhere"}

def seen(tool_name, result, status, **kw):
    with open(os.path.join(os.environ["HERMES_HOME"], "tools.jsonl"), "a") as f:
        f.write(json.dumps({"tool": tool_name, "status": status}) + "\n")

def checked(tool_name, result, **kw):
    if tool_name == "weather" and "sunny" in result:
        return result + " (checked)"

def register(ctx):
    ctx.register_tool(name="weather", toolset="demo", schema=SCHEMA, handler=handle, check_fn=lambda: True, emoji="W")
    ctx.register_tool("weather_broken", "demo", dict(SCHEMA, name="weather_broken"), broken)
    ctx.register_tool("weather_off", "demo", dict(SCHEMA, name="weather_off"), handle, check_fn=lambda: False)
    ctx.register_hook("pre_tool_call", guard)
    ctx.register_hook("post_tool_call", seen)
    ctx.register_hook("transform_tool_result", checked)
    ctx.register_command("forecast", lambda raw: f"forecast for {raw}: sunny", description="the forecast", args_hint="<city>")
    ctx.register_command("quiet", lambda raw: None)
"#;

/// A home with the weather plugin enabled.
fn weather_home() -> Env {
    let env = Env::new();
    env.plugin(
        "weather",
        "name: weather\n",
        &[("__init__.py", WEATHER_PLUGIN)],
    );
    env.config("plugins:\n  enabled: [weather]\n");
    env
}

/// A plugin tool as published ones register it: the model calls it by name and it goes
/// through `pre_tool_call` (a guard blocks it), `post_tool_call` and
/// `transform_tool_result` like a built-in; a raising handler and an unavailable tool are
/// error results, as in the reference's dispatch.
#[test]
fn a_plugin_tool_is_called_by_the_model_through_the_hooks() {
    let env = weather_home();
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: forecast?\n    steps:\n      - tool: weather\n        args: {city: Paris}\n      - tool: weather\n        args: {city: Nowhere}\n      - tool: weather_broken\n        args: {}\n      - tool: weather_off\n        args: {}\n      - tool: nosuchtool\n        args: {}\n      - final: done\n",
    );
    let out = env.run(&["run", script.to_str().unwrap()], &[]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains(
            r#"<- {"city": "Paris", "forecast": "sunny", "has_task_id": true} (checked)"#
        ),
        "{shown}"
    );
    assert!(
        shown.contains(r#"<- {"error": "no forecast for Nowhere"}"#),
        "{shown}"
    );
    assert!(
        shown.contains("Tool execution failed: ValueError: no data"),
        "{shown}"
    );
    assert!(
        shown.contains("Tool weather_off is not available here"),
        "{shown}"
    );
    assert!(shown.contains("unknown tool 'nosuchtool' (tools: terminal, read_file, write_file, delegate_task, send_message, weather, weather_broken, weather_off)"), "{shown}");
    let seen = env.json_lines("tools.jsonl");
    let statuses: Vec<(&str, &str)> = seen
        .iter()
        .map(|r| (r["tool"].as_str().unwrap(), r["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("weather", "ok"),
            ("weather", "blocked"),
            ("weather_broken", "error"),
            ("weather_off", "error"),
            ("nosuchtool", "error")
        ]
    );
    let list = text(&env.run(&["plugins", "list"], &[]));
    assert!(
        list.contains("tools: weather, weather_broken, weather_off"),
        "{list}"
    );
    assert!(list.contains("commands: /forecast, /quiet"), "{list}");
}

/// A plugin's slash command answers in `hermes run` instead of a model turn, and behind
/// the gateway, where it fires `command:<name>` as built-in commands do and `/help` lists
/// it.
#[test]
fn a_plugin_slash_command_answers_in_hermes_run_and_behind_the_gateway() {
    let env = weather_home();
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: /forecast Paris\n    steps: []\n  - user: hi\n    steps:\n      - final: hello\n",
    );
    let out = env.run(&["run", script.to_str().unwrap()], &[]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(
        shown.contains("assistant: forecast for Paris: sunny"),
        "{shown}"
    );
    assert!(shown.contains("assistant: hello"), "{shown}");
    let hook = env.home().join("hooks/commands");
    std::fs::create_dir_all(&hook).unwrap();
    std::fs::write(
        hook.join("HOOK.yaml"),
        "name: commands\nevents: [\"command:*\"]\n",
    )
    .unwrap();
    std::fs::write(
        hook.join("handler.py"),
        "import json, os\ndef handle(event_type, context):\n    with open(os.path.join(os.environ['HERMES_HOME'], 'commands.jsonl'), 'a') as f:\n        f.write(json.dumps([event_type, context.get('args')]) + '\\n')\n",
    )
    .unwrap();
    let (out, lines) = env.gateway_stdin(&[
        json!({"chat_id": "c1", "user_id": "u1", "text": "/forecast Oslo"}),
        json!({"chat_id": "c1", "user_id": "u1", "text": "/quiet"}),
        json!({"chat_id": "c1", "user_id": "u1", "text": "/help"}),
    ]);
    let texts: Vec<&str> = lines
        .iter()
        .filter(|v| v["kind"] == "notice")
        .filter_map(|v| v["text"].as_str())
        .collect();
    assert_eq!(texts.len(), 2, "/quiet answers nothing: {}", text(&out));
    assert_eq!(texts[0], "forecast for Oslo: sunny");
    assert!(
        texts[1].contains("/forecast <city> (the forecast)"),
        "{}",
        texts[1]
    );
    let events = env.json_lines("commands.jsonl");
    assert!(
        events.contains(&json!(["command:forecast", "Oslo"])),
        "{events:?}"
    );
}

/// Runs `hermes` with `args`, killed and failed after `limit`: for tests where a bug would
/// be a hang (two calls waiting for each other) rather than a wrong answer.
fn run_within(env: &Env, args: &[&str], limit: Duration) -> Output {
    let mut child = env
        .hermes()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("hermes {args:?} hung past {limit:?}: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

const OPS_PLUGIN: &str = r#"import json
def register(ctx):
    def status(raw):
        return json.dumps({
            "weather": ctx.dispatch_tool("weather", {"city": raw}),
            "terminal": ctx.dispatch_tool("terminal", {"command": "echo dispatched " + raw}),
            "mine": json.loads(ctx.dispatch_tool("ops_echo", {"x": raw})),
        }, sort_keys=True)
    ctx.register_tool("ops_echo", "ops", {"name": "ops_echo"}, lambda args, **kw: json.dumps({"echo": args["x"]}))
    ctx.register_command("opsreport", status)
    ctx.register_command("status", status)  # a built-in's name: refused, as in Hermes
    # Its own guard fires for the terminal call it dispatches itself.
    ctx.register_hook("pre_tool_call", lambda tool_name, args, **kw: None)
"#;

/// `ctx.dispatch_tool` in a slash command, as published plugins use it to reach
/// `terminal` or `delegate_task`: another plugin's tool and a built-in run through the
/// user's guards (the weather plugin's and a shell hook block them here), and the plugin's
/// own tool runs directly, as in the reference. The plugin's own `pre_tool_call` fires for
/// the call it dispatched without the two waiting for each other.
#[test]
fn a_slash_command_dispatches_tools_through_the_users_guards() {
    let env = weather_home();
    env.plugin("ops", "name: ops\n", &[("__init__.py", OPS_PLUGIN)]);
    let guard = env.write(
        "guard.py",
        "import json, sys\nevent = json.load(sys.stdin)\nif 'Nowhere' in json.dumps(event):\n    print(json.dumps({'decision': 'block', 'reason': 'the shell guard says no'}))\n",
    );
    env.config(&format!(
        "plugins:\n  enabled: [weather, ops]\nhooks:\n  pre_tool_call:\n    - matcher: terminal\n      command: python3 {}\n",
        guard.display()
    ));
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: /opsreport Paris\n    steps: []\n  - user: /opsreport Nowhere\n    steps: []\n",
    );
    let out = run_within(
        &env,
        &["--accept-hooks", "run", script.to_str().unwrap()],
        Duration::from_secs(60),
    );
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    let answers: Vec<Value> = shown
        .lines()
        .filter_map(|l| l.strip_prefix("assistant: "))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}\n{shown}")))
        .collect();
    assert_eq!(answers.len(), 2, "{shown}");
    let paris = &answers[0];
    // Through the weather plugin's own transform_tool_result, as the model's call would be.
    assert_eq!(
        paris["weather"],
        r#"{"city": "Paris", "forecast": "sunny", "has_task_id": true} (checked)"#,
        "{shown}"
    );
    assert!(
        paris["terminal"]
            .as_str()
            .unwrap()
            .contains("dispatched Paris"),
        "{shown}"
    );
    assert_eq!(paris["mine"], json!({"echo": "Paris"}));
    let nowhere = &answers[1];
    assert_eq!(
        nowhere["weather"], r#"{"error": "no forecast for Nowhere"}"#,
        "{shown}"
    );
    let terminal = nowhere["terminal"].as_str().unwrap();
    assert!(terminal.contains("the shell guard says no"), "{shown}");
    assert!(!terminal.contains("dispatched Nowhere"), "{shown}");
    assert_eq!(nowhere["mine"], json!({"echo": "Nowhere"}));
    // The weather plugin's post_tool_call saw the dispatched calls, as the model's.
    let seen = env.json_lines("tools.jsonl");
    assert_eq!(
        seen,
        [
            json!({"tool": "weather", "status": "ok"}),
            json!({"tool": "terminal", "status": "ok"}),
            json!({"tool": "weather", "status": "blocked"}),
            json!({"tool": "terminal", "status": "blocked"}),
        ]
    );
}

/// Behind the gateway too: a chat's `/status` runs the command, whose dispatched tools go
/// through the same guards, and answers the chat.
#[test]
fn a_gateway_command_dispatches_tools_through_the_guards() {
    let env = weather_home();
    env.plugin("ops", "name: ops\n", &[("__init__.py", OPS_PLUGIN)]);
    env.config("plugins:\n  enabled: [weather, ops]\n");
    let (out, lines) = env.gateway_stdin(&[
        json!({"chat_id": "c1", "user_id": "u1", "text": "/opsreport Paris"}),
        json!({"chat_id": "c1", "user_id": "u1", "text": "/opsreport Nowhere"}),
    ]);
    assert!(
        text(&out).contains(
            "Plugin 'ops' tried to register command '/status' which conflicts with a built-in command. Skipping."
        ),
        "{}",
        text(&out)
    );
    let answers: Vec<Value> = lines
        .iter()
        .filter(|v| v["kind"] == "notice")
        .filter_map(|v| v["text"].as_str())
        .map(|t| serde_json::from_str(t).unwrap_or_else(|e| panic!("{e}: {t}\n{}", text(&out))))
        .collect();
    assert_eq!(answers.len(), 2, "{}", text(&out));
    assert!(
        answers[0]["terminal"]
            .as_str()
            .unwrap()
            .contains("dispatched Paris"),
        "{}",
        text(&out)
    );
    assert_eq!(
        answers[1]["weather"],
        r#"{"error": "no forecast for Nowhere"}"#,
        "{}",
        text(&out)
    );
    assert_eq!(answers[1]["mine"], json!({"echo": "Nowhere"}));
}

const SECTIONS_PLUGIN: &str = r#"def rules(info):
    return f"Session {info['session_id']} on {info['platform']}: answer briefly."

def register(ctx):
    ctx.register_system_prompt_section("team.rules", rules, max_chars=200)
    ctx.register_system_prompt_section("style", "  Use plain words.  ")
    ctx.register_system_prompt_section("too.long", "x" * 50, max_chars=10)
    try:
        ctx.register_system_prompt_section("Bad Id", "no")
    except ValueError as e:
        ctx.register_system_prompt_section("refused", "the bad id raised: " + str(e)[:30])
"#;

/// `ctx.register_system_prompt_section`: a string and a callable given the session's
/// info, rendered once per session in id order into the reference's container, at the head
/// of what the model receives (`echo: true` shows it); a section over its `max_chars` is
/// skipped with the reference's warning, and a bad id raises in `register` as there.
#[test]
fn system_prompt_sections_reach_the_model_once_per_session() {
    let env = Env::new();
    env.plugin(
        "sections",
        "name: sections\n",
        &[("__init__.py", SECTIONS_PLUGIN)],
    );
    env.config("plugins:\n  enabled: [sections]\n");
    let script = env.write(
        "s.yaml",
        "turns:\n  - user: hi\n    steps:\n      - final: one\n        echo: true\n  - user: again\n    steps:\n      - final: two\n        echo: true\n",
    );
    let out = env.run(&["run", script.to_str().unwrap()], &[]);
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    let prompts: Vec<&str> = shown
        .split("[the system prompt the model received: ")
        .skip(1)
        .map(|rest| rest.split("]\n").next().unwrap_or(rest))
        .collect();
    assert_eq!(prompts.len(), 2, "{shown}");
    assert_eq!(
        prompts[0], prompts[1],
        "rendered once, sent with every request"
    );
    let prompt = prompts[0];
    assert!(
        prompt.starts_with("<!-- hermes-plugin-sections:start -->\n## Plugin Context: refused\n"),
        "{prompt}"
    );
    let order: Vec<usize> = [
        "## Plugin Context: refused",
        "## Plugin Context: style",
        "## Plugin Context: team.rules",
    ]
    .iter()
    .map(|h| {
        prompt
            .find(h)
            .unwrap_or_else(|| panic!("{h} missing: {prompt}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{prompt}");
    assert!(
        prompt.contains("the bad id raised: system prompt section id"),
        "{prompt}"
    );
    assert!(
        prompt.contains("<!-- hermes-plugin-section-chars:16 -->\n\nUse plain words."),
        "{prompt}"
    );
    assert!(prompt.contains(": answer briefly."), "{prompt}");
    assert!(prompt.contains(" on cli: answer briefly."), "{prompt}");
    assert!(!prompt.contains("xxxxx"), "{prompt}");
    assert!(
        shown.contains("Plugin system prompt section too.long (sections) exceeded max_chars (50 > 10) and was skipped"),
        "{shown}"
    );
}

// ---------------------------------------------------------------------------------------
// pip-installed plugins: the `hermes_agent.plugins` entry-point group

/// A virtualenv with a plugin package installed by pip from a wheel built here (a zip with
/// its dist-info, as any build backend writes it, so neither the network nor a build
/// backend is needed). Returns the venv's python.
fn venv_with_pip_plugin(
    env: &Env,
    dist: &str,
    module: &str,
    entry_points: &str,
    init_py: &str,
) -> PathBuf {
    let venv = env.work().join("venv");
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "python3 -m venv failed (on Debian, install python3-venv): {}",
        text(&made)
    );
    let wheel = env
        .work()
        .join(format!("{}-1.0-py3-none-any.whl", dist.replace('-', "_")));
    let info = format!("{}-1.0.dist-info", dist.replace('-', "_"));
    let files = json!({
        format!("{module}/__init__.py"): init_py,
        format!("{info}/METADATA"): format!("Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n"),
        format!("{info}/WHEEL"): "Wheel-Version: 1.0\nGenerator: hermes-hooks-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        format!("{info}/entry_points.txt"): entry_points,
    });
    let zip = Command::new("python3")
        .args([
            "-c",
            "import json, sys, zipfile\nfiles = json.loads(sys.argv[2])\nrecord = sys.argv[3] + '/RECORD'\nfiles[record] = ''.join(n + ',,\\n' for n in list(files) + [record])\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n    [z.writestr(n, t) for n, t in files.items()]\n",
        ])
        .arg(&wheel)
        .arg(files.to_string())
        .arg(&info)
        .output()
        .unwrap();
    assert!(zip.status.success(), "{}", text(&zip));
    let pip = Command::new(venv.join("bin/pip"))
        .args(["install", "--no-index", "--disable-pip-version-check", "-q"])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(pip.status.success(), "pip install: {}", text(&pip));
    venv.join("bin/python")
}

const PIP_GUARD: &str = r#"import json, os

def guard(tool_name, args, **kwargs):
    if "rm -rf" in str(args.get("command", "")):
        return {"action": "block", "message": "hermes-guard: no rm -rf"}

def register(ctx):
    m = ctx.manifest
    with open(os.path.join(os.environ["HERMES_HOME"], "pip-manifest.json"), "w") as f:
        json.dump({"name": m.name, "key": m.key, "source": m.source, "path": m.path,
                   "version": m.version}, f)
    ctx.register_hook("pre_tool_call", guard)
"#;

/// A plugin published on PyPI, installed with pip into the interpreter `plugins.python`
/// names: found through the entry-point group as Hermes finds it, loaded only once
/// `plugins.enabled` names it, listed with where it came from, and deciding.
#[test]
fn a_pip_installed_plugin_loads_through_its_entry_point_when_enabled() {
    let env = Env::new();
    let python = venv_with_pip_plugin(
        &env,
        "hermes-guard",
        "hermes_guard",
        "[hermes_agent.plugins]\nguard = hermes_guard\n",
        PIP_GUARD,
    );
    let python = python.display().to_string();
    // Installed but not enabled: listed, not loaded.
    env.config(&format!("plugins:\n  python: {python}\n"));
    let list = env.run(&["plugins", "list"], &[]);
    let listed = text(&list);
    assert!(
        listed.contains("guard 1.0  not loaded: not enabled in config"),
        "{listed}"
    );
    assert!(
        listed.contains("from: pip package hermes-guard 1.0 (entry point hermes_guard)"),
        "{listed}"
    );
    let blocked = env.fire_tool(
        r#"{"tool_name": "terminal", "args": {"command": "rm -rf /"}}"#,
        &[],
    );
    assert!(!text(&blocked).contains("no rm -rf"), "{}", text(&blocked));
    // `plugins enable` finds it among the interpreter's packages; then it decides.
    let enabled = env.run(&["plugins", "enable", "guard"], &[]);
    assert!(enabled.status.success(), "{}", text(&enabled));
    let blocked = env.fire_tool(
        r#"{"tool_name": "terminal", "args": {"command": "rm -rf /"}}"#,
        &[],
    );
    assert!(
        text(&blocked).contains("hermes-guard: no rm -rf"),
        "{}",
        text(&blocked)
    );
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(env.home().join("pip-manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        manifest,
        json!({"name": "guard", "key": "guard", "source": "entrypoint", "path": "hermes_guard", "version": "1.0"})
    );
    let list: Value =
        serde_json::from_slice(&env.run(&["plugins", "list", "--json"], &[]).stdout).unwrap();
    let guard = list["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["key"] == "guard")
        .unwrap()
        .clone();
    assert_eq!(guard["enabled"], true, "{list:#}");
    assert_eq!(guard["kind"], "python");
    assert_eq!(
        guard["origin"],
        "pip package hermes-guard 1.0 (entry point hermes_guard)"
    );
    // The listing is remembered, privately, until the environment changes: uninstalled, the
    // plugin is gone from the next run.
    let cache = env.home().join("cache/pip-plugins.json");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&cache).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let pip = Path::new(&python).with_file_name("pip");
    let removed = Command::new(pip)
        .args(["uninstall", "-y", "-q", "hermes-guard"])
        .output()
        .unwrap();
    assert!(removed.status.success(), "{}", text(&removed));
    let after = text(&env.fire_tool(
        r#"{"tool_name": "terminal", "args": {"command": "rm -rf /"}}"#,
        &[],
    ));
    assert!(!after.contains("hermes-guard: no rm -rf"), "{after}");
}

/// A directory plugin and a pip package with the same name: the directory plugin loads
/// (the interpreter is asked only for names no directory provides), and `plugins list`
/// names the package it shadows.
#[test]
fn a_directory_plugin_wins_over_a_pip_package_of_its_name_and_list_says_so() {
    let env = Env::new();
    let python = venv_with_pip_plugin(
        &env,
        "hermes-guard",
        "hermes_guard",
        "[hermes_agent.plugins]\nguard = hermes_guard\n",
        PIP_GUARD,
    );
    env.plugin(
        "guard",
        "name: guard\nversion: 0.1\n",
        &[("__init__.py", "def register(ctx):\n    ctx.register_hook('pre_tool_call', lambda **kw: {'action': 'block', 'message': 'the directory plugin'})\n")],
    );
    env.config(&format!(
        "plugins:\n  python: {}\n  enabled: [guard]\n",
        python.display()
    ));
    let out = text(&env.fire_tool(
        r#"{"tool_name": "terminal", "args": {"command": "rm -rf /"}}"#,
        &[],
    ));
    assert!(out.contains("the directory plugin"), "{out}");
    let list = text(&env.run(&["plugins", "list"], &[]));
    assert!(
        list.contains("pip package hermes-guard 1.0 declares plugin 'guard', which ")
            && list.contains("the directory plugin loads: rename or remove one of them"),
        "{list}"
    );
}

#[test]
fn a_missing_interpreter_is_named_with_the_fix() {
    let env = Env::new();
    env.plugin(
        "guard",
        "name: guard\n",
        &[("__init__.py", "def register(ctx):\n    pass\n")],
    );
    env.config("plugins:\n  enabled: [guard]\n  python: /nonexistent/python3\n");
    let out = env.run(&["plugins", "list", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let error = list["plugins"][0]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the interpreter `/nonexistent/python3` was not found")
            && error.contains("set `plugins.python` in config.yaml"),
        "{error}"
    );
}

/// The gateway delivers what its streaming observers were handed before it exits: a slow
/// Python observer of `on_stream_delta` (20 ms a delta) still gets every delta of the last
/// reply when stdin ends and the gateway shuts down right after answering.
#[test]
fn the_gateway_drains_its_streaming_observers_at_exit() {
    let env = Env::new();
    env.plugin(
        "slowwatch",
        "name: slowwatch\nversion: 0.1.0\n",
        &[(
            "__init__.py",
            "import os, time\nLOG = os.path.join(os.path.dirname(__file__), 'deltas.txt')\ndef on_delta(delta, **kw):\n    time.sleep(0.02)\n    with open(LOG, 'a') as f:\n        f.write(delta + '\\n')\ndef register(ctx):\n    ctx.register_hook('on_stream_delta', on_delta)\n",
        )],
    );
    env.config("plugins:\n  enabled: [slowwatch]\n");
    let chunks: Vec<String> = (0..40).map(|i| format!("c{i}")).collect();
    let script = env.write(
        "g.yaml",
        &format!(
            "replies:\n  - match: .\n    steps:\n      - stream: [{}]\n",
            chunks.join(", ")
        ),
    );
    let mut cmd = env.hermes();
    cmd.args(["gateway", "run", "--stdin", "--script"])
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"chat_id": "c1", "user_id": "u1", "text": "go"})
    )
    .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&chunks.concat()),
        "{}",
        text(&out)
    );
    let seen = std::fs::read_to_string(env.home().join("plugins/slowwatch/deltas.txt"))
        .unwrap_or_default();
    assert_eq!(seen.lines().collect::<Vec<_>>(), chunks, "{}", text(&out));
}
