//! The third adversarial pass, as probes against the real `hermes` binary: session ids that
//! climb out of `sessions/`, links and foreign files planted where the host keeps its own,
//! a home another user owns or can write, `--socket` over a file that is not a socket, and
//! service commands that must act on this home's gateway only.
//!
//! The suite runs as root in CI (as on these machines): files "of another user" are made by
//! `chown` to uid 65534 (nobody). Where that is not possible the test says so and fails,
//! rather than pass without probing.

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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

    fn hermes(&self, args: &[&str]) -> Command {
        hermes_in(self.home(), self.work(), args)
    }

    fn run(&self, args: &[&str]) -> Output {
        self.hermes(args).output().unwrap()
    }

    /// `config.yaml`, private to the user as hermes requires.
    fn config(&self, text: &str) {
        let path = self.home().join("config.yaml");
        std::fs::write(&path, text).unwrap();
        chmod(&path, 0o600);
    }

    /// An executable `sh` script `name` in the work directory, the only hook of `event`
    /// (`extra`: more YAML lines of its entry).
    fn shell_hook(&self, name: &str, body: &str, event: &str, extra: &str) {
        let hook = self.write(name, &format!("#!/bin/sh\ncat >/dev/null\n{body}"));
        chmod(&hook, 0o755);
        self.config(&format!(
            "hooks:\n  {event}:\n    - command: {}\n{extra}",
            hook.display()
        ));
    }

    /// `hermes --accept-hooks run` of one turn that runs `command` in the terminal and
    /// shows the model's input (`echo: true`).
    fn accepted_session(&self, command: &str) -> Command {
        let script = self.write(
            "s.yaml",
            &format!("turns:\n  - user: go\n    steps:\n      - tool: terminal\n        args: {{command: {command:?}}}\n      - final: done\n        echo: true\n"),
        );
        self.hermes(&[
            "--accept-hooks",
            "run",
            script.to_str().unwrap(),
            "--approvals",
            "always",
        ])
    }

    /// `hermes run` of `script` (YAML text) in the work directory.
    fn session(&self, script: &str) -> Output {
        let path = self.write("session.yaml", script);
        self.run(&["run", path.to_str().unwrap(), "--approvals", "always"])
    }
}

fn hermes_in(home: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
    cmd.arg("--home").arg(home).args(args).current_dir(dir);
    for var in ["HERMES_HOME", "RUST_LOG", "HERMES_LOG", "XDG_RUNTIME_DIR"] {
        cmd.env_remove(var);
    }
    cmd.env("HERMES_NO_SYSTEMD", "1")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    cmd
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd` to its end, or kills it after 20 s (a gateway that serves when it should have
/// refused), and returns what it printed.
fn bounded(mut cmd: Command) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().unwrap()
}

/// Gives `path` to uid 65534, standing in for another local account.
fn give_away(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: lchown with a valid C string; the owner of a link itself, never its target.
    let done = unsafe { libc::lchown(c.as_ptr(), 65534, 65534) } == 0;
    assert!(
        done,
        "these probes need root to make a file of another user ({}): {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

const ONE_COMMAND: &str = "turns:\n  - user: go\n    steps:\n      - tool: terminal\n        args: {command: echo ran-the-command}\n      - final: done\n        echo: true\n";

// ---------------------------------------------------------------------------------------
// 3. Session ids and session files

#[test]
fn a_session_id_that_climbs_out_of_sessions_is_refused_by_name() {
    let env = Env::new();
    let shared = env.work().join("shared");
    std::fs::create_dir(&shared).unwrap();
    let out = env.session(&format!(
        "session_id: ../../../../../../..{}/trav\n{ONE_COMMAND}",
        shared.display()
    ));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("session.yaml")
            && stderr.contains("session_id")
            && stderr.contains("plain name"),
        "{}",
        text(&out)
    );
    assert!(!shared.join("trav.jsonl").exists());
    assert!(!shared.join("trav.env").exists());
}

#[test]
fn links_planted_at_a_sessions_files_are_never_written_through() {
    let env = Env::new();
    let sessions = env.home().join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    chmod(&sessions, 0o700);
    let victim = env.work().join("victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, sessions.join("s-link.env")).unwrap();
    let out = env.session(&format!("session_id: s-link\n{ONE_COMMAND}"));
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    // The link was replaced by the session's own private file.
    let meta = std::fs::symlink_metadata(sessions.join("s-link.env")).unwrap();
    assert!(meta.is_file() && meta.mode() & 0o777 == 0o600);

    std::os::unix::fs::symlink(&victim, sessions.join("s-log.jsonl")).unwrap();
    let out = env.session(&format!("session_id: s-log\n{ONE_COMMAND}"));
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("symbolic link"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
}

#[test]
fn an_env_file_someone_else_owns_is_never_sourced() {
    let env = Env::new();
    let sessions = env.home().join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    chmod(&sessions, 0o700);
    let planted = sessions.join("s-foreign.env");
    std::fs::write(&planted, "echo INJECTED-LINE\n").unwrap();
    give_away(&planted);
    let out = env.session(&format!("session_id: s-foreign\n{ONE_COMMAND}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("ran-the-command"), "{}", text(&out));
    assert!(!stdout.contains("INJECTED"), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("belongs to uid 65534"),
        "{}",
        text(&out)
    );
}

// ---------------------------------------------------------------------------------------
// 4. A home another user owns, or anyone can write

#[test]
fn a_foreign_world_writable_home_is_refused_and_the_doctor_says_why() {
    let env = Env::new();
    let sessions = env.home().join("sessions");
    std::fs::create_dir(&sessions).unwrap();
    std::fs::write(sessions.join("s-x.env"), "echo INJECTED-LINE\n").unwrap();
    chmod(&sessions, 0o777);
    chmod(env.home(), 0o777);
    give_away(env.home());
    let out = env.session(&format!("session_id: s-x\n{ONE_COMMAND}"));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&env.home().display().to_string())
            && stderr.contains("owned by uid 65534")
            && stderr.contains("--home"),
        "{}",
        text(&out)
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("INJECTED"));
    for args in [
        &["logs"][..],
        &["gateway", "status"],
        &["gateway", "stop"],
        &["hooks", "fire", "pre_tool_call"],
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("owned by uid 65534"),
            "{args:?}: {}",
            text(&out)
        );
    }
    let out = env.run(&["hooks", "doctor"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("owned by uid 65534"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_home_of_ones_own_that_anyone_can_write_is_refused_sticky_or_not() {
    for mode in [0o777, 0o1777] {
        let env = Env::new();
        chmod(env.home(), mode);
        let out = env.session(ONE_COMMAND);
        assert_eq!(out.status.code(), Some(2), "{mode:o}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains(&format!("chmod go-w {}", env.home().display())),
            "{mode:o}: {}",
            text(&out)
        );
        chmod(env.home(), 0o700);
        let out = env.session(ONE_COMMAND);
        assert!(out.status.success(), "{}", text(&out));
    }
}

// ---------------------------------------------------------------------------------------
// 5. --socket over something that is not a stale socket of ours

#[test]
fn gateway_socket_refuses_to_replace_a_regular_file_or_a_link() {
    let env = Env::new();
    let notes = env.work().join("notes.txt");
    std::fs::write(&notes, "my notes\n").unwrap();
    let link = env.work().join("link.sock");
    std::os::unix::fs::symlink(&notes, &link).unwrap();
    for (path, what) in [(&notes, "a file, not a socket"), (&link, "a symbolic link")] {
        let out = bounded(env.hermes(&["gateway", "run", "--socket", path.to_str().unwrap()]));
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&path.display().to_string()) && stderr.contains(what),
            "{}",
            text(&out)
        );
    }
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "my notes\n");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_stale_socket_of_ours_is_replaced_and_removed_at_exit() {
    let env = Env::new();
    let path = env.work().join("g.sock");
    // A socket nobody answers on: what a killed gateway leaves.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let gateway = env
        .hermes(&["gateway", "run", "--socket", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::os::unix::net::UnixStream::connect(&path).is_err() {
        assert!(Instant::now() < deadline, "the gateway never served");
        std::thread::sleep(Duration::from_millis(50));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(gateway.id() as libc::pid_t, libc::SIGTERM) };
    let out = gateway.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!path.exists());
}

// ---------------------------------------------------------------------------------------
// 6. Service commands act on this home's gateway only

/// A process that is no gateway but has `gateway run` and `gateway supervise` in its
/// arguments; killed when dropped.
struct Decoy(std::process::Child);

impl Decoy {
    fn start() -> Decoy {
        Decoy(
            Command::new("python3")
                .args([
                    "-c",
                    "import time; time.sleep(120)",
                    "hermes",
                    "gateway",
                    "run",
                    "gateway",
                    "supervise",
                ])
                .spawn()
                .unwrap(),
        )
    }

    fn alive(&mut self) -> bool {
        self.0.try_wait().unwrap().is_none()
    }
}

impl Drop for Decoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn files_naming_another_process_never_get_it_signalled() {
    let env = Env::new();
    let mut decoy = Decoy::start();
    let pid = decoy.0.id();
    // What a copied home, a stale pid file or a corrupted state file would say.
    std::fs::write(
        env.home().join("gateway.state.json"),
        format!(r#"{{"pid": {pid}, "started": 0, "endpoints": [], "log_file": null, "plugins": [], "shell_hooks": [], "gateway_hooks": [], "last_reload": null, "reloads": 0}}"#),
    )
    .unwrap();
    std::fs::write(
        env.home().join("gateway.service.json"),
        format!(r#"{{"supervisor": {pid}, "args": []}}"#),
    )
    .unwrap();
    std::fs::write(env.home().join("gateway.pid"), format!("{pid}\n")).unwrap();
    std::fs::write(env.home().join("gateway.lock"), "").unwrap();
    let out = env.run(&["gateway", "stop", "--timeout", "2"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("not running"),
        "{}",
        text(&out)
    );
    let out = env.run(&["gateway", "status"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let out = env.run(&["gateway", "reload"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    std::thread::sleep(Duration::from_millis(300));
    assert!(decoy.alive(), "the decoy process was signalled");
}

#[test]
fn stopping_a_copied_home_leaves_the_original_gateway_running() {
    let original = Env::new();
    let out = original.run(&["gateway", "start"]);
    assert!(out.status.success(), "{}", text(&out));
    let copy = tempfile::tempdir().unwrap();
    let status = Command::new("cp")
        .args(["-a", &format!("{}/.", original.home().display())])
        .arg(copy.path())
        .status()
        .unwrap();
    assert!(status.success());
    let stop_copy = hermes_in(copy.path(), original.work(), &["gateway", "stop"])
        .output()
        .unwrap();
    let copy_status = hermes_in(copy.path(), original.work(), &["gateway", "status"])
        .output()
        .unwrap();
    let still = original.run(&["gateway", "status", "--json"]);
    let stopped = original.run(&["gateway", "stop", "--timeout", "10"]);
    assert!(
        String::from_utf8_lossy(&stop_copy.stdout).contains("not running"),
        "{}",
        text(&stop_copy)
    );
    assert_eq!(copy_status.status.code(), Some(1), "{}", text(&copy_status));
    let json: serde_json::Value = serde_json::from_slice(&still.stdout).unwrap();
    assert_eq!(json["running"], true, "{}", text(&still));
    assert_eq!(json["supervised"], true, "{}", text(&still));
    assert!(stopped.status.success(), "{}", text(&stopped));
    assert!(
        String::from_utf8_lossy(&stopped.stdout).contains("Stopped the gateway"),
        "{}",
        text(&stopped)
    );
}

// ---------------------------------------------------------------------------------------
// 9. Secrets and forged lines

#[test]
fn the_gateway_token_never_reaches_commands_hooks_or_plugins() {
    let env = Env::new();
    env.shell_hook(
        "env-hook.sh",
        "env > \"$HERMES_HOME/hook-env.txt\"\n",
        "pre_tool_call",
        "",
    );
    let out = env
        .accepted_session("env")
        .env("HERMES_GATEWAY_TOKEN", "secret-token-0123456789")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("HERMES_HOME="), "{}", text(&out));
    assert!(!stdout.contains("secret-token"), "{}", text(&out));
    let hook_env = std::fs::read_to_string(env.home().join("hook-env.txt")).unwrap();
    assert!(hook_env.contains("HERMES_HOME="));
    assert!(!hook_env.contains("secret-token"), "{hook_env}");
}

#[test]
fn values_a_client_chose_cannot_forge_log_lines_or_reach_the_terminal() {
    let env = Env::new();
    env.config("gateway:\n  allowed_users: [alice]\n");
    let forged =
        "mallory\r\n2026-12-07T00:00:00.000000Z INFO gateway: reloaded forged\x1b]0;owned\x07";
    let mut child = env
        .hermes(&["gateway", "run", "--stdin", "--trace", "off"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        let line = serde_json::json!({"chat_id": "c1", "user_id": forged, "text": "hi"});
        writeln!(stdin, "{line}").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unauthorised user mallory\\r\\n"),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\x1b') && !stderr.contains('\r'),
        "{stderr:?}"
    );
    let log = std::fs::read(env.home().join("logs/gateway.log")).unwrap();
    let log = String::from_utf8_lossy(&log);
    assert!(
        !log.lines()
            .any(|l| l.contains("INFO gateway: reloaded forged") && !l.contains("unauthorised")),
        "a forged line in the file:\n{log}"
    );
    assert!(!log.contains('\x1b'), "{log:?}");
    // `hermes logs` finds the text only inside the real line, and shows the rest visibly.
    let out = env.run(&["logs", "--grep", "reloaded forged"]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert_eq!(shown.lines().count(), 1, "{shown}");
    assert!(
        shown.contains("unauthorised user") && shown.contains("\\x1b]0;owned\\x07"),
        "{shown}"
    );
}

#[test]
fn hermes_logs_shows_planted_control_characters_and_bounds_each_line() {
    let env = Env::new();
    let file = env.work().join("planted.log");
    let mut planted =
        b"2026-12-07T00:00:00.000000Z WARN \x1b[2J\x1b]0;owned\x07 cleared\n".to_vec();
    planted.extend(std::iter::repeat_n(b'y', 3_000_000));
    planted.extend(b"\n2026-12-07T00:00:01.000000Z INFO after\n");
    std::fs::write(&file, planted).unwrap();
    let out = env.run(&["logs", file.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(!shown.contains('\x1b'), "{shown:?}");
    assert!(shown.contains("\\x1b[2J"), "{shown}");
    assert!(
        shown.contains("not shown") && shown.contains("INFO after"),
        "{}",
        &shown[..shown.len().min(300)]
    );
    assert!(shown.len() < 100_000, "{} bytes shown", shown.len());
    let out = bounded(env.hermes(&["logs", "/dev/zero"]));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"));
}

// ---------------------------------------------------------------------------------------
// 10. Resources

#[test]
fn what_a_python_worker_started_ends_with_the_command() {
    let env = Env::new();
    let dir = env.home().join("plugins/spawner");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("plugin.yaml"), "name: spawner\n").unwrap();
    std::fs::write(
        dir.join("__init__.py"),
        "import os, subprocess\ndef register(ctx):\n    p = subprocess.Popen(['sleep', '300'])\n    open(os.path.join(os.environ['HERMES_HOME'], 'child.pid'), 'w').write(str(p.pid))\n    ctx.register_hook('pre_tool_call', lambda **kw: None)\n",
    )
    .unwrap();
    env.config("plugins:\n  enabled: [spawner]\n");
    let out = env.run(&["plugins", "list"]);
    assert!(out.status.success(), "{}", text(&out));
    let pid: u32 = std::fs::read_to_string(env.home().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let still = alive(pid);
    // SAFETY: kill(2) on a process this test had started, whatever happens above.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    assert!(
        !still,
        "the plugin's child (pid {pid}) outlived `hermes plugins list`"
    );
}

/// Whether `pid` runs (a zombie does not count).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !matches!(
            stat.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next()),
            Some("Z" | "X") | None
        )
    })
}

#[test]
fn gateway_stop_that_kills_also_ends_the_running_turns_commands() {
    let env = Env::new();
    let pid_file = env.work().join("turn.pid");
    let script = env.write(
        "gs.yaml",
        &format!(
            "replies:\n  - match: work\n    steps:\n      - tool: terminal\n        args: {{command: \"echo $$ > {}; exec sleep 300\", timeout: 600}}\n      - final: done\n",
            pid_file.display()
        ),
    );
    let out = env.run(&[
        "gateway",
        "start",
        "--",
        "--script",
        script.to_str().unwrap(),
        "--approvals",
        "always",
        "--shutdown-deadline",
        "30",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let socket = env.home().join("gateway.sock");
    let mut stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    {
        use std::io::Write as _;
        writeln!(
            stream,
            "{}",
            serde_json::json!({"chat_id": "c1", "user_id": "u", "text": "work"})
        )
        .unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !pid_file.exists() {
        assert!(Instant::now() < deadline, "the turn never ran its command");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    let out = env.run(&["gateway", "stop", "--timeout", "1"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let still = alive(pid);
    // SAFETY: kill(2) on the test's own turn command, whatever happened above.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    assert!(
        !still,
        "the turn's command outlived the gateway: {}",
        text(&out)
    );
}

// ---------------------------------------------------------------------------------------
// 11. Smaller ones

#[test]
fn logs_since_refuses_what_it_cannot_read_instead_of_panicking() {
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("logs")).unwrap();
    std::fs::write(env.home().join("logs/gateway.log"), "").unwrap();
    for since in ["99999999999999999999d", "5"] {
        let out = env.run(&["logs", "--since", since]);
        assert_eq!(out.status.code(), Some(2), "{since}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("with its unit"),
            "{since}: {}",
            text(&out)
        );
    }
}

#[test]
fn a_supervised_gateway_that_fails_at_start_says_why_once() {
    let env = Env::new();
    let out = env
        .hermes(&["gateway", "start", "--", "--listen", "127.0.0.1:0"])
        .env_remove("HERMES_GATEWAY_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", text(&out));
    let log = std::fs::read_to_string(env.home().join("logs/gateway.log")).unwrap();
    assert!(log.contains("--listen needs a token"), "{log}");
    assert!(log.contains("not restarting it"), "{log}");
    assert_eq!(log.matches("the gateway said").count(), 1, "{log}");
}

#[test]
fn log_file_never_follows_another_users_link() {
    let env = Env::new();
    // Not sticky: there the kernel's protected_symlinks would refuse the link itself.
    let shared = env.work().join("shared");
    std::fs::create_dir(&shared).unwrap();
    chmod(&shared, 0o777);
    let victim = env.work().join("victim.txt");
    std::fs::write(&victim, "mine\n").unwrap();
    let link = shared.join("hermes.log");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    give_away(&link);
    let out = env.run(&["--log-file", link.to_str().unwrap(), "hooks", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("symbolic link"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine\n");
    let foreign = shared.join("theirs.log");
    std::fs::write(&foreign, "").unwrap();
    give_away(&foreign);
    let out = env.run(&["--log-file", foreign.to_str().unwrap(), "hooks", "list"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("belongs to uid 65534"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_broken_line_in_the_env_file_does_not_stop_later_commands() {
    let env = Env::new();
    env.shell_hook(
        "session-start.sh",
        "echo 'export GOOD=yes' >> \"$CLAUDE_ENV_FILE\"\necho 'export A=\"unterminated' >> \"$CLAUDE_ENV_FILE\"\n",
        "on_session_start",
        "      format: claude\n",
    );
    let out = env
        .accepted_session("echo still-runs $GOOD")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("still-runs yes"),
        "{}",
        text(&out)
    );
}

#[test]
fn plugins_enable_writes_through_a_dotfiles_link_and_refuses_a_read_only_file() {
    let env = Env::new();
    std::fs::create_dir_all(env.home().join("plugins/p")).unwrap();
    std::fs::write(env.home().join("plugins/p/plugin.yaml"), "name: p\n").unwrap();
    std::fs::write(
        env.home().join("plugins/p/__init__.py"),
        "def register(ctx):\n    pass\n",
    )
    .unwrap();
    let dotfiles = env.work().join("dotfiles");
    std::fs::create_dir(&dotfiles).unwrap();
    let real = dotfiles.join("hermes.yaml");
    std::fs::write(&real, "# mine\nplugins:\n  enabled: []\n").unwrap();
    chmod(&real, 0o600);
    let config = env.home().join("config.yaml");
    std::os::unix::fs::symlink(&real, &config).unwrap();
    let out = env.run(&["plugins", "enable", "p"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        std::fs::symlink_metadata(&config)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(&real).unwrap(),
        "# mine\nplugins:\n  enabled: [p]\n"
    );
    chmod(&real, 0o400);
    let out = env.run(&["plugins", "disable", "p"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is read-only"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read_to_string(&real).unwrap(),
        "# mine\nplugins:\n  enabled: [p]\n"
    );
    assert_eq!(std::fs::metadata(&real).unwrap().mode() & 0o777, 0o400);
}

#[test]
fn a_fifo_where_a_file_should_be_is_refused_without_hanging() {
    for name in ["config.yaml", "gateway.state.json", "gateway.service.json"] {
        let env = Env::new();
        let fifo = env.home().join(name);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        for args in [&["gateway", "status"][..], &["hooks", "list"]] {
            let out = bounded(env.hermes(args));
            assert!(
                out.status.code().is_some(),
                "{name}: {args:?} hung: {}",
                text(&out)
            );
        }
    }
}
