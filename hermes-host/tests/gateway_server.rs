//! `hermes gateway run`, end to end: the real binary in a temporary `HERMES_HOME`, real
//! TCP on 127.0.0.1, real plugins built with cargo, real `handler.py` gateway hooks and
//! shell hooks. The trace (`--trace json --trace-file`) is the recorder of hook order.
//!
//! The gateway-hook tests need `python3` on `PATH` and fail (they never skip) without it.

// Test helpers: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Barrier, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------
// Helpers

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Builds the test plugins once per run, in a target directory of their own so the nested
/// cargo does not wait for the outer one's lock.
fn plugin_library(package: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let target = BUILT.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let target = workspace_root().join("target/it-server");
        let out = Command::new(cargo)
            .args([
                "build",
                "-p",
                "recorder",
                "-p",
                "gateway-ack",
                "-p",
                "noisy",
                "-p",
                "boot-md",
                "--target-dir",
            ])
            .arg(&target)
            .current_dir(workspace_root())
            .output()
            .expect("cargo runs");
        assert!(
            out.status.success(),
            "building the test plugins failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        target
    });
    let lib = target
        .join("debug")
        .join(format!("lib{}.so", package.replace('-', "_")));
    assert!(lib.is_file(), "{} was not built", lib.display());
    lib
}

/// Fails the test loudly when python3 is missing: these tests must not pass by skipping.
fn require_python3() {
    let ok = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "these tests need python3 on PATH to run handler.py gateway hooks; install Python 3 (CI does)"
    );
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The token the tests' gateways are started with (HERMES_GATEWAY_TOKEN), sent first on
/// every TCP connection.
const TOKEN: &str = "test-token-0123456789abcdef";

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

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    fn config(&self, yaml: &str) {
        self.write("config.yaml", yaml);
    }

    /// Installs the workspace plugin `package` as plugin `name` with `config` (YAML, a
    /// mapping's body indented by two spaces). Enable it in config.yaml.
    fn plugin(&self, name: &str, package: &str, config: &str) {
        let lib = plugin_library(package);
        let dir = self.path().join("plugins").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let file = format!("lib{}.so", package.replace('-', "_"));
        std::fs::copy(&lib, dir.join(&file)).unwrap();
        let manifest =
            format!("name: {name}\nversion: 0.1.0\nlibrary: {file}\nconfig:\n{config}\n");
        std::fs::write(dir.join("plugin.yaml"), manifest).unwrap();
    }

    /// A `handler.py` gateway hook in `hooks/<dir>/`.
    fn python_hook(&self, dir: &str, events: &str, handler: &str) {
        require_python3();
        self.write(
            &format!("hooks/{dir}/HOOK.yaml"),
            &format!("name: {dir}\nevents: {events}\n"),
        );
        self.write(&format!("hooks/{dir}/handler.py"), handler);
    }

    /// A gateway hook that appends `<event> <context as JSON>` lines to `<home>/<dir>.out`.
    fn recording_hook(&self, dir: &str, events: &str) {
        self.python_hook(
            dir,
            events,
            &format!(
                "import json, os\nOUT = os.path.join(os.environ['HERMES_HOME'], '{dir}.out')\n\
                 def handle(event_type, context):\n    with open(OUT, 'a') as f:\n        \
                 f.write(event_type + ' ' + json.dumps(context, sort_keys=True) + '\\n')\n"
            ),
        );
    }

    /// `hermes --home <home> <args>` run to the end (a command beside the gateway, such as
    /// `gateway reload` or `hooks allow`), which must succeed.
    fn cli(&self, args: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_hermes"))
            .arg("--home")
            .arg(self.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "hermes {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn lines_of(&self, name: &str) -> Vec<String> {
        std::fs::read_to_string(self.path().join(name))
            .map(|t| t.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
        cmd.arg("--home").arg(self.path()).args(["gateway", "run"]);
        if !args.contains(&"--trace") {
            cmd.args(["--trace", "json", "--trace-file"])
                .arg(self.path().join("trace.jsonl"));
        }
        cmd.args(args);
        cmd.current_dir(self.path());
        for var in [
            "HERMES_HOME",
            "HERMES_ACCEPT_HOOKS",
            "HERMES_SAFE_MODE",
            "RUST_LOG",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("HERMES_LOG", "warn").env("NO_COLOR", "1");
        cmd.env("HERMES_GATEWAY_TOKEN", TOKEN);
        cmd
    }

    /// Runs the gateway on stdin: writes `messages`, closes stdin, waits for the exit.
    fn stdin_run(&self, args: &[&str], messages: &[Value]) -> Finished {
        run_on_stdin(self.command(args), messages)
    }

    /// Starts the gateway on a free loopback port.
    fn start(&self, args: &[&str]) -> Gateway {
        let mut cmd = self.command(args);
        cmd.args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("hermes starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let addr: SocketAddr = match first.trim().parse() {
            Ok(addr) => addr,
            Err(_) => {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "the first stdout line is not an address: {first:?}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        };
        assert!(addr.ip().is_loopback());
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let out_thread = std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let err_thread = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
            text
        });
        Gateway {
            child: Some(child),
            addr,
            lines,
            out_thread: Some(out_thread),
            err_thread: Some(err_thread),
        }
    }

    /// The trace records, in order.
    fn trace(&self) -> Vec<Value> {
        self.lines_of("trace.jsonl")
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `(kind, hook)` of the trace's `fire` and `gateway` records whose hook is in `hooks`.
    fn trace_of(&self, hooks: &[&str]) -> Vec<String> {
        self.trace()
            .iter()
            .filter(|r| r["kind"] == "fire" || r["kind"] == "gateway")
            .filter_map(|r| {
                r["hook"]
                    .as_str()
                    .filter(|h| hooks.contains(h))
                    .map(str::to_string)
            })
            .collect()
    }

    /// Every line of a session's transcript, each of which must be one JSON object.
    fn transcript(&self, session_id: &str) -> Vec<Value> {
        let path = self
            .path()
            .join("sessions")
            .join(format!("{session_id}.jsonl"));
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            text.ends_with('\n'),
            "{}: the last line is cut off",
            path.display()
        );
        text.lines()
            .map(|line| {
                let v: Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", path.display()));
                assert!(v.is_object(), "{line}");
                v
            })
            .collect()
    }

    fn transcript_files(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.path().join("sessions")) {
            // `.spare/` holds empty files made ahead; transcripts are the `.jsonl` files.
            Ok(dir) => dir
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// Runs `cmd` (a `gateway run` command) on stdin: writes `messages`, closes stdin,
/// waits for the exit, which must be a success.
fn run_on_stdin(mut cmd: Command, messages: &[Value]) -> Finished {
    cmd.arg("--stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("hermes starts");
    let mut stdin = child.stdin.take().unwrap();
    for m in messages {
        writeln!(stdin, "{m}").unwrap();
    }
    drop(stdin);
    let out = wait_with_timeout(child, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let finished = Finished {
        status: out.status,
        stdout: stdout.lines().map(str::to_string).collect(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    finished.expect_success();
    finished
}

fn wait_with_timeout(mut child: Child, timeout: Duration) -> std::process::Output {
    let start = Instant::now();
    loop {
        match child.try_wait().unwrap() {
            Some(_) => return child.wait_with_output().unwrap(),
            None if start.elapsed() > timeout => {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "hermes did not exit within {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// A finished gateway run.
struct Finished {
    status: ExitStatus,
    stdout: Vec<String>,
    stderr: String,
}

impl Finished {
    fn fail(&self, what: &str) -> ! {
        let line = "-".repeat(79);
        panic!(
            "{what}\n{line}\nexit: {:?}\n{line}\nstdout:\n{}\n{line}\nstderr:\n{}\n{line}",
            self.status.code(),
            self.stdout.join("\n"),
            self.stderr
        )
    }

    fn expect_success(&self) {
        if !self.status.success() {
            self.fail("hermes gateway run failed");
        }
    }

    /// The JSON lines on stdout for chat `chat`, in order.
    fn messages_for(&self, chat: &str) -> Vec<Value> {
        self.stdout
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["chat_id"] == chat)
            .collect()
    }
}

/// A running `hermes gateway run --listen`.
struct Gateway {
    child: Option<Child>,
    addr: SocketAddr,
    lines: Arc<Mutex<Vec<String>>>,
    out_thread: Option<std::thread::JoinHandle<()>>,
    err_thread: Option<std::thread::JoinHandle<String>>,
}

impl Gateway {
    fn connect(&self) -> Client {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        writeln!(stream, r#"{{"token": "{TOKEN}"}}"#).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Client {
            reader: BufReader::new(stream.try_clone().unwrap()),
            stream,
        }
    }

    /// SIGTERM, then waits for the exit, which must be a success.
    fn stop(self) -> Finished {
        let finished = self.signal(libc::SIGTERM);
        finished.expect_success();
        finished
    }

    /// Sends `signal`, then waits for the exit (at most 60 s).
    fn signal(mut self, signal: libc::c_int) -> Finished {
        let mut child = self.child.take().unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        // SAFETY: plain kill(2) on our own child.
        unsafe { libc::kill(pid, signal) };
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(60) {
                let _ = child.kill();
                panic!("the gateway did not stop within 60 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.out_thread.take().unwrap().join().unwrap();
        let stderr = self.err_thread.take().unwrap().join().unwrap();
        Finished {
            status,
            stdout: self.lines.lock().unwrap().clone(),
            stderr,
        }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One TCP client.
struct Client {
    stream: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    fn send(&mut self, message: Value) {
        writeln!(self.stream, "{message}").unwrap();
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = self.reader.read_line(&mut line).unwrap();
        assert!(n > 0, "the gateway closed the connection");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    /// Stops sending and reads every line until the gateway closes the connection.
    fn finish(self) -> Vec<Value> {
        self.stream.shutdown(Shutdown::Write).unwrap();
        let mut out = Vec::new();
        for line in self.reader.lines() {
            let line = line.unwrap();
            out.push(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")),
            );
        }
        out
    }
}

fn msg(chat: &str, user: &str, text: &str) -> Value {
    json!({ "chat_id": chat, "user_id": user, "text": text })
}

// ---------------------------------------------------------------------------------------
// Sessions: /new, /reset and the order of hooks and events

/// The hooks and events that mark session boundaries and turns.
const ORDER_HOOKS: &[&str] = &[
    "gateway:startup",
    "pre_gateway_dispatch",
    "command:new",
    "command:reset",
    "session:start",
    "session:end",
    "session:reset",
    "on_session_start",
    "on_session_end",
    "on_session_finalize",
    "on_session_reset",
    "agent:start",
    "agent:end",
];

/// A Claude-format SessionStart hook is told `source: clear` for the session a `/new` or
/// `/reset` started, as Claude Code says after `/clear`, and `startup` for a chat's first:
/// a published plugin's `startup` and `clear|compact` groups each run when they would there.
#[test]
fn claude_session_start_says_clear_after_a_reset_and_matchers_follow_it() {
    use std::os::unix::fs::PermissionsExt;
    let home = TestHome::new();
    let log = home.path().join("starts.log");
    let script = home.path().join("start.py");
    std::fs::write(
        &script,
        format!(
            "#!/usr/bin/env python3\nimport json, sys\nsource = json.load(sys.stdin)['source']\nopen({:?}, 'a').write(sys.argv[1] + ' ' + source + '\\n')\n",
            log.display().to_string()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.display();
    home.config(&format!(
        "hooks_auto_accept: true\nhooks:\n  on_session_start:\n    - {{command: '{script} first', format: claude, matcher: startup}}\n    - {{command: '{script} again', format: claude, matcher: 'clear|compact'}}\n"
    ));
    home.stdin_run(
        &[],
        &[
            msg("c1", "u1", "one"),
            msg("c1", "u1", "/reset"),
            msg("c1", "u1", "two"),
        ],
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap_or_default(),
        "first startup\nagain clear\n"
    );
}

#[test]
fn new_and_reset_run_finalize_swap_reset_then_start_on_the_next_turn() {
    let home = TestHome::new();
    home.plugin(
        "recorder",
        "recorder",
        &format!("  log: {}", home.path().join("plugin.log").display()),
    );
    home.config("plugins:\n  enabled: [recorder]\n");
    let run = home.stdin_run(
        &[],
        &[
            msg("c1", "u1", "one"),
            msg("c1", "u1", "/new"),
            msg("c1", "u1", "two"),
            msg("c1", "u1", "/reset now"),
            msg("c1", "u1", "three"),
            msg("c1", "u1", "/new"),
        ],
    );
    let turn = [
        "pre_gateway_dispatch",
        "session:start",
        "on_session_start",
        "agent:start",
        "on_session_end",
        "agent:end",
    ];
    let reset = |cmd: &'static str| {
        [
            "pre_gateway_dispatch",
            cmd,
            "session:end",
            "on_session_finalize",
            "session:reset",
            "on_session_reset",
        ]
    };
    let mut expected = vec!["gateway:startup"];
    expected.extend(turn);
    expected.extend(reset("command:new"));
    expected.extend(turn);
    expected.extend(reset("command:reset"));
    expected.extend(turn);
    expected.extend(reset("command:new"));
    // End of input: the session the last reset announced ends too, though it never started.
    expected.extend(["session:end", "on_session_finalize"]);
    assert_eq!(
        home.trace_of(ORDER_HOOKS),
        expected,
        "stderr:\n{}",
        run.stderr
    );

    // Four sessions: the answers name them, and the plugin saw finalize(old) / reset(new).
    let out = run.messages_for("c1");
    let kinds: Vec<&str> = out.iter().map(|m| m["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["reply", "notice", "reply", "notice", "reply", "notice"]
    );
    let ids: Vec<&str> = out
        .iter()
        .map(|m| m["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        (ids[1], ids[3]),
        (ids[2], ids[4]),
        "a reset's notice names the new session"
    );
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 4, "{ids:?}");
    let seen: Vec<(String, String)> = home
        .lines_of("plugin.log")
        .iter()
        .filter_map(|l| {
            let mut parts = l.splitn(3, ' ');
            let (_tag, hook, fields) = (parts.next()?, parts.next()?, parts.next()?);
            let fields: Value = serde_json::from_str(fields).ok()?;
            [
                "on_session_start",
                "on_session_finalize",
                "on_session_reset",
            ]
            .contains(&hook)
            .then(|| {
                (
                    hook.to_string(),
                    fields["session_id"].as_str().unwrap_or("None").to_string(),
                )
            })
        })
        .collect();
    let pair = |h: &str, id: &str| (h.to_string(), id.to_string());
    assert_eq!(
        seen,
        [
            pair("on_session_start", ids[0]),
            pair("on_session_finalize", ids[0]),
            pair("on_session_reset", ids[2]),
            pair("on_session_start", ids[2]),
            pair("on_session_finalize", ids[2]),
            pair("on_session_reset", ids[4]),
            pair("on_session_start", ids[4]),
            pair("on_session_finalize", ids[4]),
            pair("on_session_reset", ids[5]),
            pair("on_session_finalize", ids[5]),
        ]
    );
    // Each session has its own transcript: one user line and one answer.
    for id in [ids[0], ids[2], ids[4]] {
        let roles: Vec<Value> = home
            .transcript(id)
            .iter()
            .map(|e| e["role"].clone())
            .collect();
        assert_eq!(roles, [json!("user"), json!("assistant")]);
    }
}

#[test]
fn idle_sessions_expire_with_session_end_and_finalize() {
    let home = TestHome::new();
    let gateway = home.start(&["--idle-timeout", "0.5"]);
    let mut client = gateway.connect();
    client.send(msg("c1", "u1", "hello"));
    let first = client.recv();
    assert_eq!(first["text"], "hello");
    wait_until("the idle session to end", Duration::from_secs(20), || {
        home.trace_of(&["on_session_finalize"]).len() == 1
    });
    client.send(msg("c1", "u1", "again"));
    let second = client.recv();
    assert_eq!(second["text"], "again");
    assert_ne!(
        first["session_id"], second["session_id"],
        "an expired session is not reused"
    );
    gateway.stop();
    let hooks = [
        "session:start",
        "on_session_start",
        "agent:end",
        "session:end",
        "on_session_finalize",
    ];
    assert_eq!(
        home.trace_of(&hooks),
        [
            "session:start",
            "on_session_start",
            "agent:end", // hello
            "session:end",
            "on_session_finalize", // idle expiry
            "session:start",
            "on_session_start",
            "agent:end", // again
            "session:end",
            "on_session_finalize", // shutdown
        ]
    );
}

// ---------------------------------------------------------------------------------------
// pre_gateway_dispatch and authorisation

#[test]
fn a_skip_drops_the_message_before_authorisation_with_the_reference_log_line() {
    let home = TestHome::new();
    home.plugin(
        "recorder",
        "recorder",
        &format!(
            "  log: {}\n  answers:\n    pre_gateway_dispatch: {{action: skip, text: spam}}",
            home.path().join("plugin.log").display()
        ),
    );
    // Nobody is allowed: a skip still comes first, so there is no refusal either.
    home.config("plugins:\n  enabled: [recorder]\ngateway:\n  allowed_users: []\n");
    let run = home.stdin_run(
        &[],
        &[msg("c1", "u1", "buy now"), msg("c2", "u2", "cheap pills")],
    );
    assert!(
        run.stdout.is_empty(),
        "a skipped message gets no answer: {:?}",
        run.stdout
    );
    for chat in ["c1", "c2"] {
        let line = format!("pre_gateway_dispatch skip: reason=spam platform=local chat={chat}");
        if !run.stderr.lines().any(|l| l == line) {
            run.fail(&format!("missing log line: {line}"));
        }
    }
    assert!(!run.stderr.contains("unauthorised"), "{}", run.stderr);
    assert_eq!(
        home.trace_of(&["pre_gateway_dispatch", "agent:start", "session:start"]),
        ["pre_gateway_dispatch"; 2]
    );
    assert!(
        home.transcript_files().is_empty(),
        "skipped messages leave no transcript"
    );
    assert_eq!(
        home.lines_of("plugin.log")
            .iter()
            .filter(|l| l.contains(" pre_gateway_dispatch "))
            .count(),
        2
    );
}

#[test]
fn a_rewrite_replaces_the_text_and_wins_over_a_later_skip() {
    let home = TestHome::new();
    let log = home.path().join("plugin.log");
    let log = log.display();
    home.plugin("a-rewrite", "recorder", &format!("  log: {log}\n  answers:\n    pre_gateway_dispatch: {{action: rewrite, text: rewritten}}"));
    home.plugin(
        "b-skip",
        "recorder",
        &format!(
            "  log: {log}\n  answers:\n    pre_gateway_dispatch: {{action: skip, text: spam}}"
        ),
    );
    home.config("plugins:\n  enabled: [a-rewrite, b-skip]\n");
    let run = home.stdin_run(
        &[],
        &[json!({"chat_id": "c1", "user_id": "u1", "text": "original", "message_id": "m1"})],
    );
    let out = run.messages_for("c1");
    assert_eq!(out.len(), 1, "{:?}", run.stdout);
    assert_eq!(
        (
            out[0]["kind"].as_str(),
            out[0]["text"].as_str(),
            out[0]["reply_to"].as_str()
        ),
        (Some("reply"), Some("rewritten"), Some("m1"))
    );
    assert!(
        !run.stderr.contains("pre_gateway_dispatch skip"),
        "{}",
        run.stderr
    );
    let transcript = home.transcript(out[0]["session_id"].as_str().unwrap());
    assert_eq!(
        (&transcript[0]["content"], &transcript[0]["original"]),
        (&json!("rewritten"), &json!("original"))
    );
    let decision: Vec<Value> = home
        .trace()
        .into_iter()
        .filter(|r| r["kind"] == "fire" && r["hook"] == "pre_gateway_dispatch")
        .map(|r| r["decision"].clone())
        .collect();
    assert_eq!(decision.len(), 1);
    let decision = decision[0].as_str().unwrap();
    assert!(
        decision.starts_with("rewrit") && decision.contains("by a-rewrite::record"),
        "{decision:?}"
    );
}

#[test]
fn an_allow_dispatches_the_message_as_is_and_wins_over_a_later_skip() {
    let home = TestHome::new();
    let log = home.path().join("plugin.log");
    let log = log.display();
    home.plugin(
        "a-allow",
        "recorder",
        &format!("  log: {log}\n  answers:\n    pre_gateway_dispatch: {{action: allow}}"),
    );
    home.plugin(
        "b-skip",
        "recorder",
        &format!(
            "  log: {log}\n  answers:\n    pre_gateway_dispatch: {{action: skip, text: spam}}"
        ),
    );
    home.config("plugins:\n  enabled: [a-allow, b-skip]\n");
    let run = home.stdin_run(&[], &[msg("c1", "u1", "hello there")]);
    let out = run.messages_for("c1");
    assert_eq!(out.len(), 1, "{:?}", run.stdout);
    assert_eq!(out[0]["text"], "hello there");
    assert!(
        !run.stderr.contains("pre_gateway_dispatch skip"),
        "{}",
        run.stderr
    );
}

#[test]
fn unauthorised_users_get_a_refusal_after_pre_gateway_dispatch_and_clients_cannot_send_internal() {
    let home = TestHome::new();
    home.config("gateway:\n  allowed_users: [alice, 42]\n");
    let run = home.stdin_run(
        &[],
        &[
            msg("c1", "mallory", "let me in"),
            msg("c2", "alice", "hi"),
            json!({"chat_id": "c3", "user_id": 42, "text": "numeric id"}),
            json!({"chat_id": "c4", "user_id": "system", "text": "internal note", "internal": true}),
        ],
    );
    // A client cannot send an internal message: it would skip authorisation and
    // pre_gateway_dispatch.
    let refused_internal = run.stdout.iter().any(|l| {
        l.contains("\"kind\":\"error\"")
            && l.contains("`internal` is for the gateway's own messages")
    });
    assert!(refused_internal, "{:?}", run.stdout);
    let refused = run.messages_for("c1");
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0]["kind"], "refusal");
    assert!(
        refused[0]["text"]
            .as_str()
            .unwrap()
            .contains("not authorised")
    );
    assert_eq!(run.messages_for("c2")[0]["text"], "hi");
    assert_eq!(run.messages_for("c3")[0]["text"], "numeric id");
    assert!(run.messages_for("c4").is_empty());
    assert!(
        run.stderr
            .contains("gateway: unauthorised user mallory on local chat c1: message refused"),
        "{}",
        run.stderr
    );
    // pre_gateway_dispatch ran for the three messages, the refused one included; the
    // refused one never reached the agent, and the would-be internal one reached nothing.
    assert_eq!(home.trace_of(&["pre_gateway_dispatch"]).len(), 3);
    assert_eq!(home.trace_of(&["agent:start"]).len(), 2);
}

#[test]
fn capability_handles_send_to_the_chat_and_append_to_its_transcript() {
    let home = TestHome::new();
    home.plugin("gateway-ack", "gateway-ack", "  {}");
    home.config("plugins:\n  enabled: [gateway-ack]\n");
    let gateway = home.start(&[]);
    let mut alice = gateway.connect();
    let mut bob = gateway.connect();
    alice.send(msg("c1", "alice", "hello"));
    let ack = alice.recv();
    assert_eq!(
        (
            ack["kind"].as_str(),
            ack["text"].as_str(),
            ack["chat_id"].as_str()
        ),
        (Some("send"), Some("ack: hello"), Some("c1"))
    );
    let reply = alice.recv();
    assert_eq!(
        (reply["kind"].as_str(), reply["text"].as_str()),
        (Some("reply"), Some("hello"))
    );
    bob.send(msg("c2", "bob", "hi"));
    assert_eq!(bob.recv()["text"], "ack: hi");
    assert_eq!(bob.recv()["text"], "hi");
    // Nothing of c2 reached alice's connection.
    assert_eq!(alice.finish(), Vec::<Value>::new());
    drop(bob);
    gateway.stop();
    let transcript = home.transcript(reply["session_id"].as_str().unwrap());
    let lines: Vec<(Value, Value)> = transcript
        .iter()
        .map(|e| (e["role"].clone(), e["content"].clone()))
        .collect();
    assert_eq!(
        lines,
        [
            (json!("plugin"), json!("ack: hello")),
            (json!("user"), json!("hello")),
            (json!("assistant"), json!("hello"))
        ]
    );
    assert!(
        transcript[0].get("send_error").is_none(),
        "{}",
        transcript[0]
    );
}

// ---------------------------------------------------------------------------------------
// Concurrency and faults

#[test]
fn a_hundred_concurrent_chats_lose_and_cross_no_message() {
    const CHATS: usize = 100;
    const MESSAGES: usize = 5;
    let home = TestHome::new();
    home.plugin("gateway-ack", "gateway-ack", "  {}");
    home.config("plugins:\n  enabled: [gateway-ack]\n");
    let gateway = home.start(&["--trace", "off"]);
    let barrier = Arc::new(Barrier::new(CHATS));
    let clients: Vec<_> = (0..CHATS)
        .map(|c| {
            let mut client = gateway.connect();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let chat = format!("chat-{c}");
                for m in 0..MESSAGES {
                    client.send(msg(
                        &chat,
                        &format!("user-{c}"),
                        &format!("{chat} message {m}"),
                    ));
                }
                (chat, client.finish())
            })
        })
        .collect();
    let mut sessions = Vec::new();
    for handle in clients {
        let (chat, got) = handle.join().unwrap();
        let seen: Vec<(String, String)> = got
            .iter()
            .map(|m| {
                assert_eq!(m["chat_id"], chat.as_str(), "a message crossed chats: {m}");
                (
                    m["kind"].as_str().unwrap().to_string(),
                    m["text"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        let expected: Vec<(String, String)> = (0..MESSAGES)
            .flat_map(|m| {
                let text = format!("{chat} message {m}");
                [
                    ("send".to_string(), format!("ack: {text}")),
                    ("reply".to_string(), text),
                ]
            })
            .collect();
        assert_eq!(seen, expected, "chat {chat}");
        let ids: BTreeSet<&str> = got
            .iter()
            .filter(|m| m["kind"] == "reply")
            .map(|m| m["session_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 1);
        sessions.push((chat, ids.into_iter().next().unwrap().to_string()));
    }
    gateway.stop();
    assert_eq!(home.transcript_files().len(), CHATS);
    for (chat, id) in sessions {
        let transcript = home.transcript(&id);
        let got: Vec<(Value, Value)> = transcript
            .iter()
            .map(|e| (e["role"].clone(), e["content"].clone()))
            .collect();
        let expected: Vec<(Value, Value)> = (0..MESSAGES)
            .flat_map(|m| {
                let text = format!("{chat} message {m}");
                [
                    (json!("plugin"), json!(format!("ack: {text}"))),
                    (json!("user"), json!(text.clone())),
                    (json!("assistant"), json!(text)),
                ]
            })
            .collect();
        assert_eq!(got, expected, "transcript of {chat}");
    }
}

#[test]
fn a_transcript_that_cannot_be_written_is_logged_by_path_and_the_chat_is_still_answered() {
    let home = TestHome::new();
    // A file where the sessions directory should be: no transcript can be created.
    home.write("sessions", "not a directory\n");
    let finished = home.stdin_run(&[], &[msg("c1", "alice", "one"), msg("c1", "alice", "two")]);
    let texts: Vec<Value> = finished
        .messages_for("c1")
        .iter()
        .map(|m| m["text"].clone())
        .collect();
    assert_eq!(texts, [json!("one"), json!("two")], "{}", finished.stderr);
    // Every entry of both turns (the user's message and the answer) was tried and
    // reported with the file it was meant for.
    let failures = finished
        .stderr
        .lines()
        .filter(|l| l.contains("gateway: transcript not written") && l.contains("sessions/sess-"))
        .count();
    assert_eq!(failures, 4, "{}", finished.stderr);
}

#[test]
fn transcripts_stay_intact_when_a_gateway_hook_handler_crashes_mid_run() {
    const CHATS: usize = 20;
    const MESSAGES: usize = 5;
    let home = TestHome::new();
    // Dies (no exception, no cleanup) on every message that contains "boom".
    home.python_hook(
        "crashy",
        "['agent:start', 'agent:end']",
        "import os\nOUT = os.path.join(os.environ['HERMES_HOME'], 'crashy.out')\n\
         def handle(event_type, context):\n    if 'boom' in context.get('message', ''):\n        os._exit(3)\n    \
         with open(OUT, 'a') as f:\n        f.write(event_type + '\\n')\n",
    );
    let gateway = home.start(&["--trace", "off"]);
    let clients: Vec<_> = (0..CHATS)
        .map(|c| {
            let mut client = gateway.connect();
            std::thread::spawn(move || {
                let chat = format!("chat-{c}");
                for m in 0..MESSAGES {
                    let text = if (c + m) % 3 == 0 {
                        format!("{chat} boom {m}")
                    } else {
                        format!("{chat} fine {m}")
                    };
                    client.send(msg(&chat, "u", &text));
                }
                (chat, client.finish())
            })
        })
        .collect();
    let mut sessions = Vec::new();
    for handle in clients {
        let (chat, got) = handle.join().unwrap();
        assert_eq!(got.len(), MESSAGES, "chat {chat}: {got:?}");
        for (m, reply) in got.iter().enumerate() {
            assert_eq!(reply["chat_id"], chat.as_str());
            assert!(
                reply["text"].as_str().unwrap().ends_with(&format!(" {m}")),
                "{reply}"
            );
        }
        sessions.push((chat, got[0]["session_id"].as_str().unwrap().to_string()));
    }
    // The gateway still answers after the crashes.
    let mut late = gateway.connect();
    late.send(msg("late", "u", "still there?"));
    assert_eq!(late.recv()["text"], "still there?");
    drop(late);
    let finished = gateway.stop();
    let stdout = finished.stdout.join("\n");
    assert!(
        stdout.contains("[hooks] Error in handler for 'agent:"),
        "the crash was reported:\n{stdout}"
    );
    for (chat, id) in sessions {
        let transcript = home.transcript(&id);
        assert_eq!(transcript.len(), 2 * MESSAGES, "{chat}: {transcript:?}");
        for (i, entry) in transcript.iter().enumerate() {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            assert_eq!(entry["role"], role, "{chat} line {i}");
            assert!(
                entry["content"].as_str().unwrap().starts_with(&chat),
                "{entry}"
            );
        }
    }
    assert!(
        !home.lines_of("crashy.out").is_empty(),
        "the handler ran between crashes"
    );
}

// ---------------------------------------------------------------------------------------
// Gateway events and shell hooks

#[test]
fn gateway_events_carry_the_reference_context_keys() {
    let home = TestHome::new();
    home.recording_hook(
        "events",
        "['gateway:startup', 'session:start', 'session:end', 'session:reset', 'agent:start', 'agent:step', 'agent:end', 'command:*']",
    );
    home.write("notes.txt", "some notes");
    let script = home.write(
        "gateway.yaml",
        "model: test-model\nreplies:\n  - match: '^read'\n    steps:\n      - tool: read_file\n        args: {path: notes.txt}\n      - final: 'read it: {text}'\n",
    );
    let run = home.stdin_run(
        &["--script", script.to_str().unwrap()],
        &[
            msg("c1", "u1", "read the notes"),
            msg("c1", "u1", "/model gpt-5"),
            msg("c1", "u1", "/new"),
        ],
    );
    assert_eq!(run.messages_for("c1")[0]["text"], "read it: read the notes");
    let events: Vec<(String, Value)> = home
        .lines_of("events.out")
        .iter()
        .map(|l| {
            let (event, context) = l.split_once(' ').unwrap();
            (event.to_string(), serde_json::from_str(context).unwrap())
        })
        .collect();
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_str()).collect();
    assert_eq!(
        names,
        [
            "gateway:startup",
            "session:start",
            "agent:start",
            "agent:step",
            "agent:end",
            "command:model",
            "command:new",
            "session:end",
            "session:reset",
            // End of input: the session /new announced ends.
            "session:end",
        ],
        "stdout:\n{}",
        run.stdout.join("\n")
    );
    let keys = |i: usize| -> BTreeSet<&str> {
        events[i]
            .1
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect()
    };
    let set = |k: &[&'static str]| -> BTreeSet<&'static str> { k.iter().copied().collect() };
    let ctx = |i: usize| &events[i].1;
    assert_eq!(ctx(0)["platforms"], json!(["local"]));
    assert_eq!(keys(0), set(&["platforms"]));
    assert_eq!(
        keys(1),
        set(&["platform", "user_id", "session_id", "session_key"])
    );
    assert_eq!(ctx(1)["session_key"], "local:c1");
    assert!(
        keys(2).is_superset(&set(&["platform", "user_id", "session_id", "message"])),
        "{:?}",
        keys(2)
    );
    assert_eq!(ctx(2)["message"], "read the notes");
    assert!(
        keys(3).is_superset(&set(&[
            "platform",
            "user_id",
            "session_id",
            "iteration",
            "tool_names"
        ])),
        "{:?}",
        keys(3)
    );
    assert_eq!(
        (&ctx(3)["iteration"], &ctx(3)["tool_names"]),
        (&json!(1), &json!(["read_file"]))
    );
    assert!(
        keys(4).is_superset(&keys(2)) && keys(4).contains("response"),
        "{:?}",
        keys(4)
    );
    assert_eq!(ctx(4)["response"], "read it: read the notes");
    assert_eq!(keys(5), set(&["platform", "user_id", "command", "args"]));
    assert_eq!(
        (&ctx(5)["command"], &ctx(5)["args"]),
        (&json!("model"), &json!("gpt-5"))
    );
    assert_eq!(
        (&ctx(6)["command"], &ctx(6)["args"]),
        (&json!("new"), &json!(""))
    );
    for i in [7, 8, 9] {
        assert_eq!(
            keys(i),
            set(&["platform", "user_id", "session_key"]),
            "{}",
            events[i].0
        );
        assert_eq!(
            (&ctx(i)["user_id"], &ctx(i)["session_key"]),
            (&json!("u1"), &json!("local:c1"))
        );
    }
    for (event, context) in &events[1..] {
        assert_eq!(context["platform"], "local", "{event}");
    }
}

#[test]
fn shell_hooks_register_at_gateway_startup() {
    let home = TestHome::new();
    let out = home.path().join("shell.out");
    let script = home.write(
        "record.sh",
        &format!(
            "#!/bin/sh\ncat >> {}\necho >> {}\necho '{{}}'\n",
            out.display(),
            out.display()
        ),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.config(&format!(
        "hooks:\n  on_session_start:\n    - command: {0}\n  on_session_finalize:\n    - command: {0}\n",
        script.display()
    ));
    let run = home.stdin_run(&["--accept-hooks"], &[msg("c1", "u1", "hi")]);
    assert_eq!(run.messages_for("c1")[0]["text"], "hi");
    let events: Vec<String> = home
        .lines_of("shell.out")
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["hook_event_name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        events,
        ["on_session_start", "on_session_finalize"],
        "stderr:\n{}",
        run.stderr
    );
}

#[test]
fn sigint_interrupts_a_turn_still_running_after_the_grace_and_finalizes_the_session() {
    let home = TestHome::new();
    let script = home.write(
        "slow.yaml",
        "replies:\n  - match: wait\n    steps:\n      - tool: terminal\n        args: {command: sleep 30}\n      - final: never\n",
    );
    let gateway = home.start(&[
        "--script",
        script.to_str().unwrap(),
        "--shutdown-grace",
        "1",
    ]);
    let mut client = gateway.connect();
    client.send(msg("c1", "u1", "wait for it"));
    wait_until("the command to start", Duration::from_secs(20), || {
        home.trace_of(&["pre_tool_call"]).len() == 1
    });
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    let finished = gateway.signal(libc::SIGINT);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "SIGINT did not stop `sleep 30` after the 1 s grace"
    );
    finished.expect_success();
    if !finished
        .stdout
        .iter()
        .any(|l| l.contains("running turns interrupted after the 1 s grace"))
    {
        finished.fail("the stop line should say that the grace ran out");
    }
    let hooks = [
        "pre_tool_call",
        "post_llm_call",
        "on_session_end",
        "on_session_finalize",
    ];
    assert_eq!(
        home.trace_of(&hooks),
        ["pre_tool_call", "on_session_end", "on_session_finalize"],
        "the interrupted turn ends without post_llm_call, and the session is finalized"
    );
}

// ---------------------------------------------------------------------------------------
// The stdin protocol

#[test]
fn what_plugins_and_hooks_print_never_reaches_the_stdin_protocol() {
    let home = TestHome::new();
    home.plugin("noisy", "noisy", "  {}");
    home.config("plugins:\n  enabled: [noisy]\n");
    home.python_hook(
        "printer",
        "[\"agent:*\"]",
        "def handle(event_type, context):\n    print('printer: ' + event_type, flush=True)\n",
    );
    let run = home.stdin_run(&[], &[msg("c1", "u1", "hello"), msg("c1", "u1", "again")]);
    assert!(!run.stdout.is_empty(), "no answers: {}", run.stderr);
    for line in &run.stdout {
        if serde_json::from_str::<Value>(line).is_err() {
            run.fail(&format!(
                "stdout holds a line that is not protocol JSON: {line:?}"
            ));
        }
    }
    assert_eq!(run.messages_for("c1").len(), 2, "{:?}", run.stdout);
    // The plugin's native gateway callback is delivered too (a plugin is a gateway hook).
    for printed in [
        "noisy: register",
        "noisy: pre_gateway_dispatch",
        "noisy: pre_llm_call",
        "noisy: gateway agent:start",
        "noisy: gateway agent:end",
    ] {
        if !run.stderr.lines().any(|l| l == printed) {
            run.fail(&format!("{printed:?} did not reach the log"));
        }
    }
    if !run.stderr.contains("printer: agent:start") {
        run.fail("the Python handler's print did not reach the log");
    }
}

#[test]
fn an_isolated_plugin_serves_the_gateway_from_its_worker() {
    let home = TestHome::new();
    home.plugin("noisy", "noisy", "  {}");
    home.config("plugins:\n  enabled: [noisy]\n  isolation_default: process\n");
    let run = home.stdin_run(&[], &[msg("c1", "u1", "hello")]);
    assert_eq!(run.messages_for("c1").len(), 1, "{:?}", run.stdout);
    for line in &run.stdout {
        if serde_json::from_str::<Value>(line).is_err() {
            run.fail(&format!(
                "stdout holds a line that is not protocol JSON: {line:?}"
            ));
        }
    }
    // Printed by the worker (its stdout is the gateway's log): hooks and gateway events.
    for printed in [
        "noisy: pre_gateway_dispatch",
        "noisy: pre_llm_call",
        "noisy: gateway agent:start",
    ] {
        if !run.stderr.lines().any(|l| l == printed) {
            run.fail(&format!("{printed:?} did not reach the log"));
        }
    }
}

// ---------------------------------------------------------------------------------------
// The server on tokio: limits, shutdown, load

/// A raw TCP client, for bytes that are not JSON lines.
fn raw(gateway: &Gateway) -> (TcpStream, BufReader<TcpStream>) {
    let mut stream = TcpStream::connect(gateway.addr).unwrap();
    // A client the gateway refuses at once (over max_connections) may be closed before
    // the token is written; what it was told is read below.
    let _ = writeln!(stream, r#"{{"token": "{TOKEN}"}}"#);
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let reader = BufReader::new(stream.try_clone().unwrap());
    (stream, reader)
}

fn read_json(reader: &mut BufReader<TcpStream>) -> Option<Value> {
    let mut line = String::new();
    match reader.read_line(&mut line) {
        Ok(0) | Err(_) => None,
        Ok(_) => {
            Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        }
    }
}

/// Whether the gateway closed `reader`'s connection (end of file or reset) within 10 s.
fn closed(reader: &mut BufReader<TcpStream>) -> bool {
    let mut rest = Vec::new();
    reader
        .get_ref()
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    match std::io::Read::read_to_end(reader, &mut rest) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    }
}

fn threads_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count()
}

/// `--stdin` takes `gateway.max_line_bytes` as the sockets do (it used the 1 MiB default
/// whatever the config said): a longer line is answered with an error naming the limit and
/// logged, and the next message is still served.
#[test]
fn the_stdin_adapter_keeps_the_configured_line_limit() {
    let home = TestHome::new();
    home.config("gateway:\n  max_line_bytes: 256\n");
    let run = home.stdin_run(
        &["--trace", "off"],
        &[
            msg("c1", "u1", &"x".repeat(300)),
            msg("c1", "u1", "still here"),
        ],
    );
    let lines: Vec<Value> = run
        .stdout
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let error = lines
        .iter()
        .find(|l| l["kind"] == "error")
        .unwrap_or_else(|| run.fail("no error line"));
    assert_eq!(
        error["error"],
        "line 1: longer than 256 bytes (gateway.max_line_bytes); skipped"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["kind"] == "reply" && l["text"] == "still here"),
        "{lines:?}"
    );
    assert!(
        run.stderr
            .contains("stdin sent line 1 longer than 256 bytes"),
        "{}",
        run.stderr
    );
}

#[test]
fn bad_lines_get_an_error_each_and_the_connection_stays_usable() {
    let home = TestHome::new();
    home.config("gateway:\n  max_line_bytes: 1024\n");
    let gateway = home.start(&["--trace", "off"]);
    let (mut stream, mut reader) = raw(&gateway);
    let long = "x".repeat(5000);
    stream.write_all(format!("{long}\n").as_bytes()).unwrap();
    stream.write_all(b"\xff\xfe not utf-8\n").unwrap();
    stream.write_all(b"{not json\n").unwrap();
    writeln!(stream, "{}", msg("c1", "u1", "still here")).unwrap();

    let errors: Vec<Value> = (0..3).map(|_| read_json(&mut reader).unwrap()).collect();
    for (error, (line, says)) in errors.iter().zip([
        (
            1,
            "longer than 1024 bytes (gateway.max_line_bytes); skipped",
        ),
        (2, "not UTF-8; skipped"),
        (3, ""),
    ]) {
        assert_eq!(error["kind"], "error", "{error}");
        let text = error["error"].as_str().unwrap();
        assert!(
            text.starts_with(&format!("line {line}: ")) && text.contains(says),
            "{text}"
        );
    }
    let reply = read_json(&mut reader).unwrap();
    assert_eq!(
        (reply["kind"].as_str(), reply["text"].as_str()),
        (Some("reply"), Some("still here"))
    );
    let finished = gateway.stop();
    assert!(
        finished
            .stdout
            .iter()
            .any(|l| l.starts_with("gateway: tcp 127.0.0.1:")
                && l.contains("sent line 1 longer than 1024 bytes")),
        "the log names the peer: {:?}",
        finished.stdout
    );
}

#[test]
fn a_slow_partial_line_is_cut_off_and_clients_over_the_limit_are_refused() {
    let home = TestHome::new();
    home.config("gateway:\n  idle_timeout: 0.5\n  max_connections: 2\n");
    let gateway = home.start(&["--trace", "off"]);
    let mut first = gateway.connect();
    first.send(msg("c1", "u1", "one"));
    assert_eq!(first.recv()["text"], "one");

    // Slowloris: half a line, then nothing.
    let (mut slow, mut slow_reader) = raw(&gateway);
    slow.write_all(br#"{"chat_id": "c2", "te"#).unwrap();
    // Two clients are connected now: a third is told why and closed.
    std::thread::sleep(Duration::from_millis(100));
    let (_third, mut third_reader) = raw(&gateway);
    let refusal = read_json(&mut third_reader).expect("an error line before the close");
    assert!(
        refusal["error"]
            .as_str()
            .unwrap()
            .contains("gateway.max_connections"),
        "{refusal}"
    );
    assert!(closed(&mut third_reader));

    let cut = read_json(&mut slow_reader).expect("an error line before the close");
    assert!(
        cut["error"]
            .as_str()
            .unwrap()
            .contains("unfinished for 0.5 s (gateway.idle_timeout)"),
        "{cut}"
    );
    assert!(closed(&mut slow_reader));

    // The first client was never disturbed, and the freed place takes a new client.
    first.send(msg("c1", "u1", "two"));
    assert_eq!(first.recv()["text"], "two");
    let mut fourth = gateway.connect();
    fourth.send(msg("c4", "u4", "four"));
    assert_eq!(fourth.recv()["text"], "four");
    let finished = gateway.stop();
    for says in ["(gateway.max_connections)", "stayed unfinished for 0.5 s"] {
        assert!(
            finished
                .stdout
                .iter()
                .any(|l| l.contains("tcp 127.0.0.1:") && l.contains(says)),
            "no log line naming the peer with {says:?}: {:?}",
            finished.stdout
        );
    }
}

#[test]
fn token_less_connections_never_take_the_token_holders_place() {
    let home = TestHome::new();
    home.config("gateway:\n  max_connections: 50\n");
    let gateway = home.start(&["--trace", "off"]);
    // Three hundred connections that never send a token, held open.
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(gateway.addr).unwrap())
        .collect();
    // Past their grace, the oldest of them make room for newer connections.
    std::thread::sleep(Duration::from_millis(1300));
    let mut holder = gateway.connect();
    holder.send(msg("c1", "u1", "let me in"));
    assert_eq!(holder.recv()["text"], "let me in");
    // The oldest made room for newer ones; the newest have a short deadline of their own.
    let mut oldest = BufReader::new(idle[0].try_clone().unwrap());
    assert!(closed(&mut oldest));
    let mut newest = BufReader::new(idle[299].try_clone().unwrap());
    let told = read_json(&mut newest).expect("an error line before the close");
    assert!(
        told["error"]
            .as_str()
            .unwrap()
            .contains("no token line in time"),
        "{told}"
    );
    assert!(closed(&mut newest));
    drop(idle);
    let finished = gateway.stop();
    assert!(
        finished
            .stdout
            .iter()
            .any(|l| l.contains("connections were still to send their token")),
        "{:?}",
        finished.stdout
    );
}

#[test]
fn one_chat_cannot_queue_memory_without_bound_behind_a_long_turn() {
    let home = TestHome::new();
    home.config("gateway:\n  max_line_bytes: 2097152\n");
    home.write(
        "slow.yaml",
        "replies:\n  - match: \"^slow\"\n    steps:\n      - tool: terminal\n        args: {command: sleep 3}\n      - final: done\n",
    );
    let script = home.path().join("slow.yaml");
    let gateway = home.start(&[
        "--trace",
        "off",
        "--script",
        script.to_str().unwrap(),
        "--approvals",
        "always",
    ]);
    let (mut stream, mut reader) = raw(&gateway);
    writeln!(stream, "{}", msg("c1", "u1", "slow")).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let big = "z".repeat(1 << 20);
    for _ in 0..24 {
        writeln!(stream, "{}", msg("c1", "u1", &big)).unwrap();
    }
    let mut refused = 0;
    let mut answered = 0;
    while answered + refused < 25 {
        let Some(line) = read_json(&mut reader) else {
            break;
        };
        match line["kind"].as_str() {
            Some("error") => {
                assert!(
                    line["error"]
                        .as_str()
                        .unwrap()
                        .contains("bytes of messages waiting"),
                    "{line}"
                );
                refused += 1;
            }
            Some("reply") => answered += 1,
            _ => {}
        }
    }
    assert!(
        refused > 0 && answered > 1,
        "refused {refused}, answered {answered}"
    );
    drop(stream);
    gateway.stop();
}

#[test]
fn a_client_that_never_reads_is_dropped_and_others_are_served() {
    let home = TestHome::new();
    home.config("gateway:\n  write_buffer_bytes: 65536\n");
    let gateway = home.start(&["--trace", "off"]);
    let (mut greedy, _never_read) = raw(&gateway);
    // The echo model answers each message with its text: 400 x 50 kB of answers, far more
    // than the socket buffers and the 64 kB write buffer hold.
    let text = "y".repeat(50_000);
    let writer = std::thread::spawn(move || {
        for i in 0..400 {
            if writeln!(greedy, "{}", msg("greedy", "u", &format!("{i} {text}"))).is_err() {
                return true;
            }
        }
        false
    });
    wait_until(
        "the gateway to drop the reader-less client",
        Duration::from_secs(60),
        || {
            gateway
                .lines
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("is not reading its answers"))
        },
    );
    let mut polite = gateway.connect();
    polite.send(msg("c1", "u1", "hello"));
    assert_eq!(polite.recv()["text"], "hello");
    let _ = writer.join();
    let finished = gateway.stop();
    let line = finished
        .stdout
        .iter()
        .find(|l| l.contains("is not reading its answers"))
        .unwrap();
    assert!(
        line.starts_with("gateway: tcp 127.0.0.1:")
            && line.contains("gateway.write_buffer_bytes = 65536"),
        "{line}"
    );
}

#[test]
fn sigterm_lets_a_running_turn_finish_and_its_answer_reach_the_client() {
    let home = TestHome::new();
    let script = home.write(
        "short.yaml",
        "replies:\n  - match: wait\n    steps:\n      - tool: terminal\n        args: {command: sleep 1}\n      - final: finished after all\n",
    );
    let gateway = home.start(&["--script", script.to_str().unwrap()]);
    let mut client = gateway.connect();
    client.send(msg("c1", "u1", "wait for it"));
    wait_until("the command to start", Duration::from_secs(20), || {
        home.trace_of(&["pre_tool_call"]).len() == 1
    });
    let finished = gateway.signal(libc::SIGTERM);
    finished.expect_success();
    let answers: Vec<Value> = std::iter::from_fn(|| {
        let mut line = String::new();
        match client.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => serde_json::from_str(&line).ok(),
        }
    })
    .collect();
    assert!(
        answers
            .iter()
            .any(|a| a["kind"] == "reply" && a["text"] == "finished after all"),
        "the answer of the running turn reaches the client: {answers:?}"
    );
    assert_eq!(
        home.trace_of(&["pre_tool_call", "post_llm_call", "on_session_finalize"]),
        ["pre_tool_call", "post_llm_call", "on_session_finalize"],
        "the turn finished, then the session ended"
    );
    assert!(
        finished
            .stdout
            .iter()
            .any(|l| l.starts_with("gateway: SIGTERM: no new clients or messages")),
        "{:?}",
        finished.stdout
    );
}

#[test]
fn kill_9_under_load_leaves_every_transcript_whole_lines_of_json() {
    const CLIENTS: usize = 16;
    let home = TestHome::new();
    let gateway = home.start(&["--trace", "off"]);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let senders: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let mut client = gateway.connect();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let text = format!("client {c} message {i} {}", "z".repeat(i % 4000));
                    if writeln!(client.stream, "{}", msg(&format!("k{c}"), "u", &text)).is_err() {
                        break;
                    }
                    i += 1;
                }
            })
        })
        .collect();
    // A liveness bound, not a speed check: the whole binary's 43 tests share two cores
    // with this flood, and under a full run the first transcripts can take well over 30 s.
    wait_until(
        "transcripts to be written",
        Duration::from_secs(120),
        || home.transcript_files().len() >= CLIENTS / 2,
    );
    std::thread::sleep(Duration::from_millis(300));
    let mut gateway = gateway;
    let mut child = gateway.child.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for sender in senders {
        sender.join().unwrap();
    }
    // The line being written at the kill may be cut short: Linux stops a write at a page
    // boundary for a fatal signal. The next start repairs such a tail before it serves
    // (the cut bytes kept beside it), so every line is whole JSON from then on.
    drop(home.start(&["--trace", "off"]));
    let files = home.transcript_files();
    assert!(files.len() >= CLIENTS / 2);
    let mut entries = 0;
    for file in files {
        let id = file.file_stem().unwrap().to_str().unwrap();
        entries += home.transcript(id).len();
    }
    assert!(
        entries > CLIENTS,
        "the gateway was under load: {entries} entries"
    );
}

#[test]
fn three_hundred_connections_are_served_by_a_bounded_number_of_threads() {
    const CLIENTS: usize = 300;
    let home = TestHome::new();
    let gateway = home.start(&["--trace", "off", "--workers", "2"]);
    let pid = gateway.child.as_ref().unwrap().id();
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| gateway.connect()).collect();
    // Every connection is open; one in six talks, each in its own chat.
    for (i, client) in clients.iter_mut().enumerate().step_by(6) {
        client.send(msg(&format!("chat-{i}"), "u", &format!("m{i}")));
    }
    for (i, client) in clients.iter_mut().enumerate().step_by(6) {
        let answer = client.recv();
        assert_eq!(answer["text"], format!("m{i}"));
    }
    let threads = threads_of(pid);
    // The main thread, 2 async workers, and the blocking pool's threads (at most one per
    // chat busy at once, 50 here): no thread per connection.
    assert!(
        threads < 64,
        "{threads} threads for {CLIENTS} connections: a thread per connection is back"
    );
    gateway.stop();
}

#[test]
fn sighup_and_gateway_reload_swap_in_new_hooks_and_a_broken_file_keeps_the_old_ones() {
    let home = TestHome::new();
    home.recording_hook("first", "[agent:end]");
    home.plugin("noisy", "noisy", "  {}");
    home.config("plugins:\n  enabled: [noisy]\n");
    let gateway = home.start(&["--trace", "off"]);
    let pid = i32::try_from(gateway.child.as_ref().unwrap().id()).unwrap();
    let pid_file = home.path().join("gateway.pid");
    wait_until("the pid file", Duration::from_secs(20), || {
        pid_file.exists()
    });
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        pid.to_string()
    );
    let log_has = |what: &str, count: usize| {
        let what = what.to_string();
        let lines = gateway.lines.clone();
        let started = Instant::now();
        move || {
            let lines = lines.lock().unwrap();
            let found = lines.iter().filter(|l| l.contains(&what)).count() >= count;
            assert!(
                found || started.elapsed() < Duration::from_secs(19),
                "no {what:?} in the log:\n{}",
                lines.join("\n")
            );
            found
        }
    };
    let mut client = gateway.connect();
    client.send(msg("c1", "u1", "one"));
    client.recv();
    wait_until("the first hook", Duration::from_secs(20), || {
        home.lines_of("first.out").len() == 1
    });

    // A new gateway hook, and the in-process plugin's library rebuilt (its time changes).
    home.recording_hook("second", "[agent:end]");
    let library = home.path().join("plugins/noisy/libnoisy.so");
    std::fs::File::options()
        .write(true)
        .open(&library)
        .unwrap()
        .set_modified(std::time::SystemTime::now() + Duration::from_secs(60))
        .unwrap();
    let out = home.cli(&["gateway", "reload"]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("Sent SIGHUP to the gateway (pid {pid})"))
    );
    wait_until(
        "the reload",
        Duration::from_secs(20),
        log_has(
            "gateway: reloaded: 1 plugin(s), 0 shell hook(s), 3 gateway hook(s)",
            1,
        ),
    );
    assert!(
        log_has("gateway: plugin 'noisy' changed on disk", 1)(),
        "{:?}",
        gateway.lines.lock().unwrap()
    );
    client.send(msg("c1", "u1", "two"));
    client.recv();
    wait_until("both hooks", Duration::from_secs(20), || {
        home.lines_of("first.out").len() == 2 && home.lines_of("second.out").len() == 1
    });

    // A config.yaml that does not parse: refused, the hooks stay.
    home.config("plugins: [unclosed\n");
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    wait_until(
        "the refusal",
        Duration::from_secs(20),
        log_has(
            "gateway: reload refused, keeping the hooks loaded before:",
            1,
        ),
    );
    client.send(msg("c1", "u1", "three"));
    client.recv();
    wait_until("the old hooks", Duration::from_secs(20), || {
        home.lines_of("second.out").len() == 2
    });

    // A hook that breaks: refused, naming it.
    home.config("plugins:\n  enabled: [noisy]\n");
    home.write("hooks/second/HOOK.yaml", "events: [unclosed\n");
    unsafe { libc::kill(pid, libc::SIGHUP) };
    wait_until(
        "the second refusal",
        Duration::from_secs(20),
        log_has("reload refused", 2),
    );
    let refusal = gateway
        .lines
        .lock()
        .unwrap()
        .iter()
        .rfind(|l| l.contains("reload refused"))
        .cloned()
        .unwrap();
    assert!(
        refusal.contains("hooks/second") && refusal.contains("no longer loads"),
        "{refusal}"
    );
    client.send(msg("c1", "u1", "four"));
    client.recv();
    wait_until("the old hooks again", Duration::from_secs(20), || {
        home.lines_of("second.out").len() == 3
    });
    gateway.stop();
    assert!(!pid_file.exists(), "the pid file is removed at exit");
}

// ---------------------------------------------------------------------------------------
// The seed's BOOT.md hook, and send_message

/// The seed document's `boot-md` hook, `HOOK.yaml` and `handler.py` as the seed prints
/// them, installed in `home`.
fn install_seed_boot_hook(home: &TestHome) {
    require_python3();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/boot-md");
    for file in ["HOOK.yaml", "handler.py"] {
        let text = std::fs::read_to_string(fixture.join(file)).unwrap();
        home.write(&format!("hooks/boot-md/{file}"), &text);
    }
}

/// A gateway script answering the boot prompt with `steps` (YAML flow sequence).
fn boot_script(home: &TestHome, steps: &str) -> String {
    let script = format!(
        "model: boot-model\nreplies:\n  - match: \"startup boot checklist\"\n    steps: {steps}\n"
    );
    home.write("gateway-script.yaml", &script)
        .display()
        .to_string()
}

/// Runs `gateway run --stdin` with no messages and `HOME` at `user_home` (the seed reads
/// `~/.hermes/BOOT.md`, whatever `HERMES_HOME` is).
fn boot_run(home: &TestHome, user_home: &Path, script: &str) -> Finished {
    let mut cmd = home.command(&["--script", script]);
    cmd.env("HOME", user_home);
    run_on_stdin(cmd, &[])
}

/// A user home whose `~/.hermes/BOOT.md` holds `text` (no file for `None`).
fn user_home_with_boot(text: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".hermes")).unwrap();
    if let Some(text) = text {
        std::fs::write(dir.path().join(".hermes/BOOT.md"), text).unwrap();
    }
    dir
}

/// The transcripts whose first entry is the boot prompt.
fn boot_transcripts(home: &TestHome) -> Vec<Vec<Value>> {
    home.transcript_files()
        .iter()
        .filter_map(|path| {
            let id = path.file_stem()?.to_str()?.to_string();
            let entries = home.transcript(&id);
            entries[0]["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("You are running a startup boot checklist"))
                .then_some(entries)
        })
        .collect()
}

#[test]
fn the_seeds_boot_md_handler_runs_unchanged_and_logs_both_lines() {
    let home = TestHome::new();
    install_seed_boot_hook(&home);
    let checklist = "# Boot\n\nCheck the disk, then report.\n";
    let user = user_home_with_boot(Some(checklist));
    let script = boot_script(
        &home,
        r#"[{tool: send_message, args: {target: "local:ops", message: "disk ok"}}, {final: "Checked: disk ok"}]"#,
    );
    let run = boot_run(&home, user.path(), &script);
    let chars = checklist.trim().chars().count();
    let running = format!("INFO hooks.boot-md: Running BOOT.md ({chars} chars)");
    let completed = "INFO hooks.boot-md: boot-md completed: Checked: disk ok";
    let (Some(at_running), Some(at_completed)) =
        (run.stderr.find(&running), run.stderr.find(completed))
    else {
        run.fail(&format!("the log lacks {running:?} or {completed:?}"));
    };
    assert!(at_running < at_completed, "{}", run.stderr);
    // The turn ran in the gateway: its model, platform `gateway`, the checklist in the
    // prompt, send_message among its tools, all in a transcript of its own.
    let boots = boot_transcripts(&home);
    assert_eq!(boots.len(), 1, "{:?}", home.transcript_files());
    let boot = &boots[0];
    assert!(
        boot[0]["content"]
            .as_str()
            .unwrap()
            .contains("Check the disk, then report."),
        "{}",
        boot[0]
    );
    assert_eq!(boot[1]["tool_calls"][0]["name"], "send_message");
    // Nobody follows local:ops (no client yet), and the tool says so to the model.
    assert!(
        boot[2]["content"]
            .as_str()
            .unwrap()
            .contains("no connection follows chat local:ops"),
        "{}",
        boot[2]
    );
    assert_eq!(boot.last().unwrap()["content"], "Checked: disk ok");
    let starts: Vec<Value> = home
        .trace()
        .into_iter()
        .filter(|r| r["hook"] == "on_session_start")
        .map(|r| r["payload"].clone())
        .collect();
    assert_eq!(starts.len(), 1, "{starts:?}");
    assert_eq!(
        (starts[0]["platform"].as_str(), starts[0]["model"].as_str()),
        (Some("gateway"), Some("boot-model"))
    );
}

#[test]
fn a_silent_boot_answer_reports_nothing_and_an_agent_error_is_logged_by_the_handler() {
    let home = TestHome::new();
    install_seed_boot_hook(&home);
    let user = user_home_with_boot(Some("Nothing to do today."));
    let script = boot_script(&home, r#"[{final: "[SILENT]"}]"#);
    let run = boot_run(&home, user.path(), &script);
    if !run
        .stderr
        .contains("INFO hooks.boot-md: boot-md completed (nothing to report)")
    {
        run.fail("no 'nothing to report' line");
    }

    let script = boot_script(&home, r#"[{error: "401 Unauthorized"}]"#);
    let run = boot_run(&home, user.path(), &script);
    if !run
        .stderr
        .contains("ERROR hooks.boot-md: boot-md agent failed: the model failed: 401 Unauthorized")
    {
        run.fail("the agent's error was not logged at ERROR by the handler");
    }
    assert!(!run.stderr.contains("boot-md completed"), "{}", run.stderr);
}

#[test]
fn an_empty_or_missing_boot_md_does_nothing() {
    for text in [Some(""), Some("  \n\n"), None] {
        let home = TestHome::new();
        install_seed_boot_hook(&home);
        let user = user_home_with_boot(text);
        let script = boot_script(&home, r#"[{final: "should not run"}]"#);
        let run = boot_run(&home, user.path(), &script);
        if !run.stderr.contains("Loaded hook 'boot-md'") {
            run.fail("the hook did not load");
        }
        for line in [
            "Running BOOT.md",
            "boot-md completed",
            "boot-md agent failed",
        ] {
            assert!(!run.stderr.contains(line), "{text:?}: {}", run.stderr);
        }
        assert!(home.transcript_files().is_empty(), "{text:?}");
        assert!(home.trace_of(&["on_session_start"]).is_empty(), "{text:?}");
    }
}

#[test]
fn the_seed_handler_outside_a_running_gateway_logs_why_its_agent_cannot_run() {
    let home = TestHome::new();
    install_seed_boot_hook(&home);
    let user = user_home_with_boot(Some("Check the disk."));
    let out = Command::new(env!("CARGO_BIN_EXE_hermes"))
        .arg("--home")
        .arg(home.path())
        .args(["gateway", "emit", "gateway:startup"])
        .env("HOME", user.path())
        .env_remove("HERMES_HOME")
        .output()
        .unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{all}");
    assert!(
        all.contains("INFO hooks.boot-md: Running BOOT.md (15 chars)"),
        "{all}"
    );
    assert!(
        all.contains("ERROR hooks.boot-md: boot-md agent failed: gateway.model: no running gateway serves this hook's calls"),
        "{all}"
    );
}

#[test]
fn the_native_boot_md_plugin_runs_the_checklist_through_agent_run_once() {
    let home = TestHome::new();
    home.plugin("boot-md", "boot-md", "  max_iterations: 5");
    home.config("plugins:\n  enabled: [boot-md]\n");
    let checklist = "Check the disk.";
    home.write("BOOT.md", checklist);
    let script = boot_script(&home, r#"[{final: "Checked natively"}]"#);
    let mut cmd = home.command(&["--script", &script]);
    cmd.env("HERMES_LOG", "info");
    let run = run_on_stdin(cmd, &[]);
    for line in [
        format!("Running BOOT.md ({} chars)", checklist.chars().count()),
        "boot-md completed: Checked natively".to_string(),
    ] {
        if !run.stderr.contains(&line) {
            run.fail(&format!("the log lacks {line:?}"));
        }
    }
    let boots = boot_transcripts(&home);
    assert_eq!(boots.len(), 1);
    assert_eq!(boots[0].last().unwrap()["content"], "Checked natively");
}

/// The pids of `pid`'s children whose command line has `marker`.
fn children_with(pid: u32, marker: &str) -> BTreeSet<u32> {
    let mut found = BTreeSet::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return found;
    };
    for task in tasks.flatten() {
        let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        for child in children
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            if String::from_utf8_lossy(&cmdline).contains(marker) {
                found.insert(child);
            }
        }
    }
    found
}

#[test]
fn a_reload_asks_consent_again_for_every_shell_hook() {
    let home = TestHome::new();
    // Two recorders on `pre_llm_call`, each appending a line per firing to its own file.
    let recorder = |name: &str| {
        let path = home.write(
            &format!("{name}.sh"),
            &format!(
                "#!/bin/sh\ncat > /dev/null\necho fired >> '{}'\n",
                home.path().join(format!("{name}.out")).display()
            ),
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    };
    let (a, b) = (recorder("a"), recorder("b"));
    home.config(&format!(
        "hooks:\n  pre_llm_call:\n    - command: {a}\n    - command: {b}\n"
    ));
    // Only `a` is approved; the gateway has no terminal to ask about `b`.
    home.cli(&["hooks", "allow", &a]);
    let gateway = home.start(&["--trace", "off"]);
    let pid = gateway.child.as_ref().unwrap().id();
    let mut client = gateway.connect();
    let mut reloads = 0;
    let mut reload = || {
        reloads += 1;
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(i32::try_from(pid).unwrap(), libc::SIGHUP) };
        let lines = gateway.lines.clone();
        let want = reloads;
        let started = Instant::now();
        wait_until("the reload", Duration::from_secs(20), move || {
            let lines = lines.lock().unwrap();
            let done = lines
                .iter()
                .filter(|l| l.contains("gateway: reload"))
                .count()
                >= want;
            assert!(
                done || started.elapsed() < Duration::from_secs(19),
                "reload {want} not logged:\n{}",
                lines.join("\n")
            );
            done
        });
    };
    let mut turn = |text: &str| {
        client.send(msg("c1", "u1", text));
        client.recv();
    };
    // How often `a` and `b` have fired.
    let fired = || (home.lines_of("a.out").len(), home.lines_of("b.out").len());
    turn("one");
    assert_eq!(fired(), (1, 0));

    // Approved while the gateway runs: the reload asks again and finds the approval.
    home.cli(&["hooks", "allow", &b]);
    reload();
    turn("two");
    assert_eq!(fired(), (2, 1));

    // Revoked: the reload finds no approval, and `a` stops running.
    home.cli(&["hooks", "revoke", &a]);
    reload();
    turn("three");
    assert_eq!(fired(), (2, 2), "{:?}", gateway.lines.lock().unwrap());
    assert!(
        gateway
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("gateway: reloaded: 0 plugin(s), 1 shell hook(s)")),
        "{:?}",
        gateway.lines.lock().unwrap()
    );
    gateway.stop();
}

#[test]
fn a_reload_restarts_an_isolated_plugins_worker() {
    let home = TestHome::new();
    home.plugin("noisy", "noisy", "  {}");
    home.config("plugins:\n  enabled: [noisy]\n  isolation_default: process\n");
    let gateway = home.start(&["--trace", "off"]);
    let pid = gateway.child.as_ref().unwrap().id();
    let mut client = gateway.connect();
    client.send(msg("c1", "u1", "one"));
    client.recv();
    let workers = || children_with(pid, "__hermes-plugin-worker");
    let before = workers();
    assert_eq!(before.len(), 1, "one worker for the isolated plugin");

    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(i32::try_from(pid).unwrap(), libc::SIGHUP) };
    let lines = gateway.lines.clone();
    wait_until("the reload", Duration::from_secs(20), move || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("gateway: reloaded: 1 plugin(s)"))
    });
    client.send(msg("c1", "u1", "two"));
    let reply = client.recv();
    assert!(reply["text"].is_string(), "{reply}");
    // The old worker is stopped and reaped once no turn uses it; a new one serves.
    wait_until("the old worker to go", Duration::from_secs(20), || {
        let now = workers();
        now.len() == 1 && now.is_disjoint(&before)
    });
    assert!(
        !gateway
            .lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("changed on disk")),
        "an isolated plugin needs no restart of the gateway"
    );
    gateway.stop();
}

#[test]
fn send_message_delivers_to_a_chat_silent_messages_send_nothing_and_a_model_error_is_a_notice() {
    let home = TestHome::new();
    home.write(
        "gateway-script.yaml",
        "replies:\n  - match: notify\n    steps:\n      - tool: send_message\n        args: {target: c1, message: pinged}\n      - final: done\n  - match: quiet\n    steps:\n      - tool: send_message\n        args: {target: \"local:c1\", message: \"[SILENT]\"}\n      - final: ok\n  - match: nowhere\n    steps:\n      - tool: send_message\n        args: {target: \"local:nobody\", message: hi}\n      - final: tried\n  - match: fail\n    steps:\n      - error: 503 overloaded\n",
    );
    let script = home.path().join("gateway-script.yaml");
    let run = home.stdin_run(
        &["--script", script.to_str().unwrap()],
        &[
            msg("c1", "alice", "notify me"),
            msg("c1", "alice", "quiet please"),
            msg("c1", "alice", "nowhere"),
            msg("c1", "alice", "fail now"),
        ],
    );
    let answers: Vec<(String, String)> = run
        .stdout
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|v| {
            (
                v["kind"].as_str().unwrap_or_default().to_string(),
                v["text"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("send", "pinged"),
        ("reply", "done"),
        ("reply", "ok"),
        ("reply", "tried"),
        (
            "notice",
            "The model could not answer (503 overloaded). Try again later.",
        ),
    ]
    .iter()
    .map(|(k, t)| (k.to_string(), t.to_string()))
    .collect();
    assert_eq!(answers, expected, "{}", run.stderr);
    let session = serde_json::from_str::<Value>(&run.stdout[1]).unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let results: Vec<String> = home
        .transcript(&session)
        .iter()
        .filter(|e| e["role"] == "tool")
        .map(|e| e["content"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[0].contains("\"sent\":true"), "{}", results[0]);
    assert!(results[1].contains("\"sent\":false"), "{}", results[1]);
    assert!(
        results[2].contains("no connection follows chat local:nobody"),
        "{}",
        results[2]
    );
}

#[test]
fn a_reload_restarts_python_plugin_workers_on_their_current_code() {
    require_python3();
    let home = TestHome::new();
    let write_plugin = |version: &str| {
        home.write(
            "plugins/ver/__init__.py",
            &format!(
                "import os\ndef stamp(event, **kw):\n    return {{'action': 'rewrite', 'text': '{version} ' + str(os.getpid())}}\ndef register(ctx):\n    ctx.register_hook('pre_gateway_dispatch', stamp)\n"
            ),
        );
    };
    home.write("plugins/ver/plugin.yaml", "name: ver\n");
    write_plugin("v1");
    home.config("plugins:\n  enabled: [ver]\n");
    let gateway = home.start(&["--trace", "off"]);
    let pid_file = home.path().join("gateway.pid");
    wait_until("the pid file", Duration::from_secs(20), || {
        pid_file.exists()
    });
    let mut client = gateway.connect();
    let answer = |client: &mut Client, text: &str| -> (String, u32) {
        client.send(msg("c1", "u1", text));
        let reply = client.recv();
        let text = reply["text"].as_str().unwrap_or_default().to_string();
        let (version, pid) = text.split_once(' ').unwrap_or_else(|| panic!("{reply}"));
        (version.to_string(), pid.parse().unwrap())
    };
    let (version, old_pid) = answer(&mut client, "one");
    assert_eq!(version, "v1");
    write_plugin("v2");
    home.cli(&["gateway", "reload"]);
    let lines = gateway.lines.clone();
    wait_until("the reload", Duration::from_secs(20), || {
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("gateway: reloaded: 1 plugin(s)"))
    });
    let (version, new_pid) = answer(&mut client, "two");
    assert_eq!(
        version, "v2",
        "the new worker runs the plugin's current code"
    );
    assert_ne!(new_pid, old_pid);
    wait_until("the old worker to exit", Duration::from_secs(20), || {
        std::fs::read_to_string(format!("/proc/{old_pid}/stat"))
            .map_or(true, |stat| stat.contains(") Z "))
    });
    drop(client);
    gateway.stop();
}

#[test]
fn transcripts_are_private_and_the_logs_directory_exists() {
    use std::os::unix::fs::PermissionsExt as _;
    let home = TestHome::new();
    home.config("model: x\n");
    home.stdin_run(&[], &[msg("c1", "u1", "hello")]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let sessions = home.path().join("sessions");
    assert_eq!(mode(&sessions), 0o700);
    let transcripts = home.transcript_files();
    assert!(!transcripts.is_empty());
    for t in transcripts {
        assert_eq!(mode(&t), 0o600, "{}", t.display());
    }
    assert!(home.path().join("logs").is_dir());
}

#[test]
fn a_second_gateway_on_the_same_home_refuses_to_start_unless_told() {
    let home = TestHome::new();
    home.config("model: x\n");
    let gateway = home.start(&["--trace", "off"]);
    let pid = gateway.child.as_ref().unwrap().id();
    let pid_file = home.path().join("gateway.pid");
    wait_until("the pid file", Duration::from_secs(20), || {
        pid_file.exists()
    });
    let second = home
        .command(&["--stdin"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!("another gateway (pid {pid}) is already serving"))
            && stderr.contains("--beside-another"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&pid_file).unwrap().trim(),
        pid.to_string(),
        "the running gateway's pid file is untouched"
    );
    let beside = home.stdin_run(&["--beside-another"], &[msg("c9", "u9", "hi")]);
    assert!(
        beside.stdout.iter().any(|l| l.contains("\"hi\"")),
        "{:?}",
        beside.stdout
    );
    gateway.stop();
}

#[test]
fn a_transcript_torn_by_a_kill_is_repaired_at_start_and_its_cut_bytes_kept() {
    let home = TestHome::new();
    home.config("model: x\n");
    let whole = "{\"role\":\"user\",\"content\":\"one\"}\n";
    let torn = "{\"role\":\"assistant\",\"content\":\"cut sh";
    home.write("sessions/sess-old.jsonl", &format!("{whole}{torn}"));
    home.write("sessions/sess-fine.jsonl", whole);
    let run = home.stdin_run(&[], &[msg("c1", "u1", "hello")]);
    let path = home.path().join("sessions/sess-old.jsonl");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), whole);
    assert_eq!(
        std::fs::read_to_string(home.path().join("sessions/sess-old.jsonl.torn")).unwrap(),
        torn
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("sessions/sess-fine.jsonl")).unwrap(),
        whole
    );
    assert!(
        run.stderr.contains(&format!(
            "gateway: {} ended with a line cut short ({} bytes",
            path.display(),
            torn.len()
        )),
        "{}",
        run.stderr
    );
    // Every transcript reads back as whole lines now.
    for t in home.transcript_files() {
        home.transcript(t.file_stem().unwrap().to_str().unwrap());
    }
}

#[test]
fn a_tcp_client_must_send_the_token_first_and_listen_needs_one() {
    let home = TestHome::new();
    home.config("model: x\n");
    let gateway = home.start(&["--trace", "off"]);
    // No token: an error line, then the connection closes; nothing is handled.
    for first in [
        json!({"chat_id": "c1", "user_id": "u", "text": "hi"}).to_string(),
        json!({"token": "wrong-token-0123456789"}).to_string(),
    ] {
        let mut stream = TcpStream::connect(gateway.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        // One write: the gateway closes once it has read the first line, and a second
        // write arriving after that would meet a reset.
        let lines = format!("{first}\n{}\n", msg("c1", "u", "after"));
        stream.write_all(lines.as_bytes()).unwrap();
        let mut reader = BufReader::new(stream);
        let answer = read_json(&mut reader).expect("an error line");
        assert_eq!(answer["kind"], "error", "{answer}");
        assert!(
            answer["error"]
                .as_str()
                .unwrap()
                .contains("with the gateway's token"),
            "{answer}"
        );
        assert!(closed(&mut reader));
    }
    // With the token, the same message is answered.
    let mut client = gateway.connect();
    client.send(msg("c1", "u", "hello"));
    assert_eq!(client.recv()["text"], "hello");
    drop(client);
    let finished = gateway.stop();
    let refusals = finished
        .stdout
        .iter()
        .filter(|l| l.contains("gateway: refused tcp 127.0.0.1:"))
        .count();
    assert_eq!(refusals, 2, "{:?}", finished.stdout);
    // Without any token configured, --listen does not start.
    let out = home
        .command(&["--listen", "127.0.0.1:0"])
        .env_remove("HERMES_GATEWAY_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--listen needs a token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_default_endpoint_is_a_private_unix_socket_in_the_home() {
    use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
    use std::os::unix::net::UnixStream;
    let home = TestHome::new();
    home.config("model: x\n");
    let mut child = home
        .command(&["--trace", "off"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let path = PathBuf::from(first.trim());
    assert_eq!(path, home.path().join("gateway.sock"), "{first}");
    let meta = std::fs::metadata(&path).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // No token on the owner's socket: the first line is a message.
    let stream = UnixStream::connect(&path).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    writeln!(writer, "{}", msg("c1", "u1", "over the socket")).unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(reply["text"], "over the socket", "{line}");
    drop(writer);
    drop(reader);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(!path.exists(), "the socket file is removed at exit");
}

#[test]
fn a_long_chat_keeps_a_window_of_history_in_memory_and_all_of_it_on_disk() {
    require_python3();
    let home = TestHome::new();
    home.write("plugins/sizes/plugin.yaml", "name: sizes\n");
    home.write(
        "plugins/sizes/__init__.py",
        "import os\nOUT = os.path.join(os.environ['HERMES_HOME'], 'sizes.out')\n\
         def size(conversation_history, **kw):\n    with open(OUT, 'a') as f:\n        f.write(str(len(conversation_history)) + '\\n')\n\
         def register(ctx):\n    ctx.register_hook('pre_llm_call', size)\n",
    );
    home.config("plugins:\n  enabled: [sizes]\ngateway:\n  history_window: 8\n");
    let messages: Vec<Value> = (0..30).map(|i| msg("c1", "u1", &format!("m{i}"))).collect();
    let run = home.stdin_run(&[], &messages);
    let sizes: Vec<usize> = home
        .lines_of("sizes.out")
        .iter()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(sizes.len(), 30);
    assert!(sizes.iter().all(|&n| n <= 8 + 8 / 4), "{sizes:?}");
    assert!(sizes[29] >= 8, "the window is full: {sizes:?}");
    let session = run.messages_for("c1")[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let users = home
        .transcript(&session)
        .iter()
        .filter(|e| e["role"] == "user")
        .count();
    assert_eq!(users, 30, "the transcript keeps every message");
}

#[test]
fn live_sessions_are_capped_and_the_quietest_is_ended() {
    let home = TestHome::new();
    home.config("gateway:\n  max_sessions: 2\n");
    let gateway = home.start(&[]);
    let mut client = gateway.connect();
    let mut first_ids = Vec::new();
    for chat in ["c1", "c2", "c3"] {
        client.send(msg(chat, "u1", "hi"));
        first_ids.push(client.recv()["session_id"].clone());
    }
    wait_until("c1's session to end", Duration::from_secs(20), || {
        home.trace_of(&["on_session_finalize"]).len() == 1
    });
    client.send(msg("c1", "u1", "back"));
    let again = client.recv();
    assert_ne!(again["session_id"], first_ids[0], "c1 got a new session");
    drop(client);
    let finished = gateway.stop();
    assert!(
        finished.stdout.iter().any(|l| l.contains(
            "gateway: ended the session of local chat c1, the one quiet longest: 2 sessions are live (gateway.max_sessions)"
        )),
        "{:?}",
        finished.stdout
    );
}

#[test]
fn sessions_expire_by_default_after_the_configured_idle_time() {
    let home = TestHome::new();
    home.config("gateway:\n  session_idle_timeout: 0.5\n");
    let gateway = home.start(&[]);
    let mut client = gateway.connect();
    client.send(msg("c1", "u1", "hello"));
    client.recv();
    wait_until("the idle session to end", Duration::from_secs(20), || {
        home.trace_of(&["on_session_finalize"]).len() == 1
    });
    drop(client);
    gateway.stop();
}

#[test]
fn the_gateway_reads_config_yaml_once_for_its_token_its_hooks_and_their_policy() {
    let home = TestHome::new();
    home.python_hook(
        "audit",
        "[\"agent:start\"]",
        "def handle(event_type, context):\n    pass\n",
    );
    // Every open of config.yaml is counted by the kernel (inotify): the gateway must open it
    // once for its token, its hooks and their policy. (A FIFO, which would prove the same,
    // is refused as config.yaml now.)
    let path = home.path().join("config.yaml");
    let text = format!("gateway:\n  token: {TOKEN}\nhooks:\n  strict_permissions: true\n");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: inotify_init1 and inotify_add_watch with a valid NUL-terminated path; the
    // descriptor is closed below.
    let inotify = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
    assert!(inotify >= 0);
    // SAFETY: as above.
    let watch = unsafe { libc::inotify_add_watch(inotify, c_path.as_ptr(), libc::IN_OPEN) };
    assert!(watch >= 0);
    let mut child = home
        .command(&["--trace", "off", "--listen", "127.0.0.1:0"])
        .env_remove("HERMES_GATEWAY_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let answered = first.trim().parse::<SocketAddr>().ok().and_then(|addr| {
        let mut stream = TcpStream::connect(addr).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .ok()?;
        let lines = format!(
            "{}\n{}\n",
            json!({"token": TOKEN}),
            msg("c1", "u1", "hello")
        );
        stream.write_all(lines.as_bytes()).ok()?;
        read_json(&mut BufReader::new(stream))
    });
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let mut events = [0u8; 4096];
    // SAFETY: read(2) into a buffer of the length given; the descriptor is ours.
    let read = unsafe { libc::read(inotify, events.as_mut_ptr().cast(), events.len()) };
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(inotify) };
    // Each event on a watched file is a bare `struct inotify_event` (no name).
    let opens = usize::try_from(read).unwrap_or(0) / std::mem::size_of::<libc::inotify_event>();
    assert_eq!(
        answered.as_ref().map(|a| a["text"].clone()),
        Some(json!("hello")),
        "first line {first:?}; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(opens, 1, "config.yaml was opened {opens} times");
}

#[test]
fn behind_the_gateway_a_claude_session_start_export_reaches_that_chats_terminal_commands() {
    let home = TestHome::new();
    let hook = home.write(
        "hooks-bin/env_setup.sh",
        "#!/usr/bin/env bash\nset -euo pipefail\nd=$(cat)\nid=$(printf '%s' \"$d\" | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"session_id\"][-6:])')\necho \"export GREETING=hello-$id\" >> \"$CLAUDE_ENV_FILE\"\n",
    );
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.config(&format!(
        "hooks:\n  on_session_start:\n    - command: {}\n      format: claude\n",
        hook.display()
    ));
    let script = home.write(
        "gateway-script.yaml",
        "replies:\n  - match: greet\n    steps:\n      - tool: terminal\n        args: {command: 'echo \"[$GREETING]\"'}\n      - final: greeted\n        echo: true\n",
    );
    let run = home.stdin_run(
        &["--accept-hooks", "--script", script.to_str().unwrap()],
        &[msg("c1", "u1", "greet"), msg("c2", "u2", "greet")],
    );
    for chat in ["c1", "c2"] {
        let replies = run.messages_for(chat);
        let text = replies
            .iter()
            .filter_map(|m| m["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        assert!(text.contains("[hello-"), "{chat}: {text}\n{}", run.stderr);
    }
    // Each chat's session has its own file, private to the user.
    let envs: Vec<_> = std::fs::read_dir(home.path().join("sessions"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "env"))
        .collect();
    assert_eq!(envs.len(), 2, "{:?}", envs);
    for e in envs {
        assert_eq!(e.metadata().unwrap().permissions().mode() & 0o777, 0o600);
    }
}
