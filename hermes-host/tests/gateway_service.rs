//! The gateway as an operator runs it: `hermes gateway start|status|restart|stop` (the
//! supervised background process, since these machines have no systemd user instance),
//! `install`'s unit file, the log file and `hermes logs`, and the seed's BOOT.md tutorial
//! step 3, run exactly as written: `hermes gateway restart`, then
//! `hermes logs --follow --level INFO | grep boot-md` on a terminal.

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::fd::FromRawFd as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A home and a user home (for `~/.hermes/BOOT.md` and `~/.config`), both temporary.
struct Operator {
    home: tempfile::TempDir,
    user: tempfile::TempDir,
}

impl Operator {
    fn new() -> Operator {
        Operator {
            home: tempfile::tempdir().unwrap(),
            user: tempfile::tempdir().unwrap(),
        }
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    /// `hermes --home HOME ARGS`, with the environment of an operator's shell.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
        cmd.arg("--home").arg(self.home()).args(args);
        self.environment(&mut cmd);
        cmd
    }

    fn environment(&self, cmd: &mut Command) {
        for var in ["HERMES_HOME", "RUST_LOG", "HERMES_LOG", "XDG_RUNTIME_DIR"] {
            cmd.env_remove(var);
        }
        cmd.env("HOME", self.user.path())
            .env("XDG_CONFIG_HOME", self.user.path().join(".config"))
            .env("HERMES_NO_SYSTEMD", "1")
            .stdin(Stdio::null());
    }

    fn hermes(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// `gateway status --json`.
    fn status(&self) -> Value {
        let out = self.hermes(&["gateway", "status", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        // Never leave a background gateway behind a failed test.
        let _ = self.hermes(&["gateway", "stop", "--timeout", "5"]);
    }
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sends one message to the gateway's socket and returns the answer's text.
fn ask(socket: &str, message: &str) -> String {
    let mut stream = std::os::unix::net::UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    writeln!(
        stream,
        "{}",
        serde_json::json!({"chat_id": "c1", "user_id": "u1", "text": message})
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    answer["text"].as_str().unwrap_or_default().to_string()
}

fn pid_alive(pid: u64) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn start_status_restart_and_stop_drive_a_real_background_gateway() {
    let op = Operator::new();
    let out = op.hermes(&["gateway", "status"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("is not running"));

    let started = ok(&op.hermes(&["gateway", "start"]));
    assert!(started.contains("Started the gateway (pid "), "{started}");
    assert!(
        started.contains("follow it with `hermes logs --follow`"),
        "{started}"
    );
    let first = op.status();
    assert_eq!(first["running"], true, "{first}");
    let socket = first["endpoints"][0]["endpoint"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(socket, op.home().join("gateway.sock").display().to_string());
    assert_eq!(first["endpoints"][0]["answers"], true);
    assert_eq!(first["supervised"], true);
    assert_eq!(ask(&socket, "hello"), "hello");
    let human = ok(&op.hermes(&["gateway", "status"]));
    for needle in [
        "The gateway is running: pid ",
        "serving ",
        "(answers)",
        "last reload: never",
        "logs/gateway.log",
    ] {
        assert!(human.contains(needle), "{needle:?} in {human}");
    }

    // A reload shows in the status.
    ok(&op.hermes(&["gateway", "reload"]));
    let deadline = Instant::now() + Duration::from_secs(30);
    while op.status()["reloads"] != 1 {
        assert!(
            Instant::now() < deadline,
            "no reload recorded: {}",
            op.status()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    let restarted = ok(&op.hermes(&["gateway", "restart"]));
    assert!(restarted.contains("Stopped the gateway"), "{restarted}");
    let second = op.status();
    assert_ne!(
        first["pid"], second["pid"],
        "the restart kept the same process"
    );
    assert!(!pid_alive(first["pid"].as_u64().unwrap()));
    assert_eq!(ask(&socket, "again"), "again");

    let stopped = ok(&op.hermes(&["gateway", "stop"]));
    assert!(stopped.contains("Stopped the gateway"), "{stopped}");
    assert!(!pid_alive(second["pid"].as_u64().unwrap()));
    assert_eq!(op.status()["running"], false);
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_err());
    // Stopping what is not running is no error; restarting it starts it.
    assert!(ok(&op.hermes(&["gateway", "stop"])).contains("not running"));
    let again = ok(&op.hermes(&["gateway", "restart"]));
    assert!(again.contains("Started the gateway"), "{again}");
    assert_eq!(op.status()["running"], true);
}

#[test]
fn the_supervisor_starts_a_killed_gateway_again() {
    let op = Operator::new();
    ok(&op.hermes(&["gateway", "start"]));
    let first = op.status()["pid"].as_u64().unwrap();
    // SAFETY: kill(2) on the test's own gateway.
    unsafe { libc::kill(first as libc::pid_t, libc::SIGKILL) };
    let deadline = Instant::now() + Duration::from_secs(60);
    let second = loop {
        let status = op.status();
        // The new gateway holds its lock before it writes its state file: until then the
        // status says it runs but has no endpoints yet.
        if status["running"] == true
            && status["pid"].as_u64() != Some(first)
            && status["endpoints"][0]["answers"] == true
        {
            break status;
        }
        assert!(Instant::now() < deadline, "not restarted: {status}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let socket = second["endpoints"][0]["endpoint"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(ask(&socket, "back"), "back");
    let log = ok(&op.hermes(&["logs", "--grep", "supervisor"]));
    assert!(log.contains("starting it again in 1 s"), "{log}");
}

#[test]
fn install_writes_a_user_unit_with_the_home_the_endpoint_and_restart_on_failure() {
    let op = Operator::new();
    let out = ok(&op.hermes(&["gateway", "install"]));
    let unit = op
        .user
        .path()
        .join(".config/systemd/user/hermes-gateway.service");
    assert!(out.contains(&unit.display().to_string()), "{out}");
    assert!(out.contains("No systemd user instance runs here"), "{out}");
    let text = std::fs::read_to_string(&unit).unwrap();
    let home = op.home().display().to_string();
    for line in [
        format!("Environment=HERMES_HOME={home}"),
        format!(
            "ExecStart={} --home {home} gateway run --socket {home}/gateway.sock",
            env!("CARGO_BIN_EXE_hermes")
        ),
        "ExecReload=/bin/kill -HUP $MAINPID".to_string(),
        "Restart=on-failure".to_string(),
        "WantedBy=default.target".to_string(),
    ] {
        assert!(text.lines().any(|l| l == line), "{line:?} missing:\n{text}");
    }
    ok(&op.hermes(&["gateway", "uninstall"]));
    assert!(!unit.exists());
}

#[test]
fn logs_filter_by_level_age_and_text_and_follow_across_a_rotation() {
    let op = Operator::new();
    let logs = op.home().join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(
        logs.join("gateway.log.1"),
        "2020-01-01T00:00:00.000000Z INFO old line\n",
    )
    .unwrap();
    let now = |s: &str| format!("2999-01-01T00:00:00.000000Z {s}\n");
    std::fs::write(
        logs.join("gateway.log"),
        format!(
            "{}{}{}",
            now("DEBUG chatter"),
            now("WARN disk low"),
            now("INFO boot-md: done")
        ),
    )
    .unwrap();
    let all = ok(&op.hermes(&["logs"]));
    assert!(
        all.starts_with("2020-01-01"),
        "rotated files come first: {all}"
    );
    assert_eq!(all.lines().count(), 4);
    let warn = ok(&op.hermes(&["logs", "--level", "warn"]));
    assert_eq!(
        warn.lines().collect::<Vec<_>>(),
        ["2999-01-01T00:00:00.000000Z WARN disk low"]
    );
    let recent = ok(&op.hermes(&["logs", "--since", "1h", "--grep", "boot-md"]));
    assert_eq!(recent.lines().count(), 1, "{recent}");
    let bad = op.hermes(&["logs", "--level", "loud"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a level"));

    // --follow prints what is appended, and goes on in the new file after a rotation.
    let file = logs.join("follow.log");
    std::fs::write(&file, "").unwrap();
    let mut child = op
        .command(&["logs", "--follow", "-n", "0", file.to_str().unwrap()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let append = |path: &Path, line: &str| {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        writeln!(f, "2999-01-01T00:00:00.000000Z INFO {line}").unwrap();
    };
    append(&file, "before the rotation");
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.ends_with("INFO before the rotation\n"), "{line:?}");
    std::fs::rename(&file, logs.join("follow.log.1")).unwrap();
    append(&file, "after the rotation");
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(line.ends_with("INFO after the rotation\n"), "{line:?}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Runs `command` with `sh -c` on a new pseudo-terminal (so `grep` writes each line as it
/// finds it, as it does for a person at a terminal), until `done` is true of the output or
/// `timeout` passes; returns the output.
fn on_a_terminal(
    op: &Operator,
    command: &str,
    timeout: Duration,
    done: impl Fn(&str) -> bool,
) -> String {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty fills two descriptors this function then owns.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty failed");
    // SAFETY: the descriptors are open and ours.
    let (master, slave) = unsafe {
        (
            std::fs::File::from_raw_fd(master),
            std::fs::File::from_raw_fd(slave),
        )
    };
    let bin = Path::new(env!("CARGO_BIN_EXE_hermes"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    use std::os::unix::process::CommandExt as _;
    let mut cmd = Command::new("sh");
    // A group of its own, so that stopping it stops the whole pipeline.
    cmd.arg("-c").arg(command).process_group(0);
    op.environment(&mut cmd);
    cmd.env("PATH", path)
        .env("HERMES_HOME", op.home())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    let mut child = cmd.spawn().unwrap();
    // Read in a thread: the pty blocks when nothing is written.
    let (tx, rx) = std::sync::mpsc::channel();
    let mut reader = master;
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut seen = String::new();
    let deadline = Instant::now() + timeout;
    while !done(&seen) && Instant::now() < deadline {
        if let Ok(bytes) = rx.recv_timeout(Duration::from_millis(100)) {
            seen.push_str(&String::from_utf8_lossy(&bytes));
        }
    }
    // The pipeline never ends by itself (--follow): stop it as a person would, with ^C.
    // SAFETY: killing the shell's process group, which this test started.
    unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
    let _ = child.kill();
    let _ = child.wait();
    seen
}

#[test]
fn the_seed_boot_md_tutorial_step_3_works_as_written() {
    let op = Operator::new();
    // Step 1: ~/.hermes/BOOT.md. Step 2: the tutorial's hook, as published.
    let checklist = "1. Check the disk.\n2. Report anything odd.";
    std::fs::create_dir_all(op.user.path().join(".hermes")).unwrap();
    std::fs::write(op.user.path().join(".hermes/BOOT.md"), checklist).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/boot-md");
    let hook = op.home().join("hooks/boot-md");
    std::fs::create_dir_all(&hook).unwrap();
    for name in ["HOOK.yaml", "handler.py"] {
        std::fs::copy(fixture.join(name), hook.join(name)).unwrap();
        std::fs::set_permissions(hook.join(name), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    // Step 3, exactly: restart the gateway, then follow the log for boot-md.
    let restarted = op.hermes(&["gateway", "restart"]);
    assert!(restarted.status.success(), "{}", text(&restarted));
    let running = format!("Running BOOT.md ({} chars)", checklist.chars().count());
    let seen = on_a_terminal(
        &op,
        "hermes logs --follow --level INFO | grep boot-md",
        Duration::from_secs(60),
        |out| out.contains("boot-md completed"),
    );
    let (Some(at_running), Some(at_completed)) =
        (seen.find(&running), seen.find("boot-md completed"))
    else {
        let log = std::fs::read_to_string(op.home().join("logs/gateway.log")).unwrap_or_default();
        panic!("the terminal showed:\n{seen}\n--- gateway.log\n{log}");
    };
    assert!(at_running < at_completed, "{seen}");
    // Only boot-md lines reached the terminal.
    assert!(
        seen.lines()
            .all(|l| l.trim().is_empty() || l.contains("boot-md")),
        "{seen}"
    );
}

#[test]
fn the_log_file_gets_the_librarys_info_lines_that_stderr_leaves_out() {
    let op = Operator::new();
    let hook = op.home().join("hook.sh");
    std::fs::write(&hook, "#!/bin/sh\ncat >/dev/null\n").unwrap();
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        op.home().join("config.yaml"),
        format!(
            "hooks:\n  pre_tool_call:\n    - command: {}\n",
            hook.display()
        ),
    )
    .unwrap();
    let out = op
        .command(&[
            "--accept-hooks",
            "gateway",
            "run",
            "--stdin",
            "--trace",
            "off",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // INFO: not on stderr (its filter is WARN), in the file.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("auto-approved"), "{stderr}");
    let log = ok(&op.hermes(&["logs", "--grep", "auto-approved"]));
    assert!(
        log.contains(" INFO hermes_host::shell: shell hook auto-approved"),
        "{log}"
    );
}

/// A shadow hook's firings show in `gateway status`, counted from its records since the
/// gateway started.
#[test]
fn gateway_status_counts_the_shadow_hooks_firings() {
    let op = Operator::new();
    let script = op.home().join("shadow-context.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\ncat >/dev/null\necho '{\"context\": \"from the shadow\"}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(
        op.home().join("config.yaml"),
        format!(
            "hooks_auto_accept: true\nhooks:\n  pre_llm_call:\n    - command: {}\n      shadow: true\n",
            script.display()
        ),
    )
    .unwrap();
    ok(&op.hermes(&["gateway", "start"]));
    let socket = op.status()["endpoints"][0]["endpoint"]
        .as_str()
        .unwrap()
        .to_string();
    // The shadow's context is recorded, never given to the model.
    assert_eq!(ask(&socket, "hello"), "hello");
    let deadline = Instant::now() + Duration::from_secs(30);
    while op.status()["shadow"]["recorded"] != 1 {
        assert!(
            Instant::now() < deadline,
            "no shadow firing counted: {}",
            op.status()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(op.status()["shadow"]["disagreed"], 0);
    let human = ok(&op.hermes(&["gateway", "status"]));
    assert!(
        human.contains("shadow hooks: 1 firing(s) recorded since the start, 0 disagreed"),
        "{human}"
    );
}
