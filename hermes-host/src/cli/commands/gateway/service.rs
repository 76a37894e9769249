//! The gateway as a service: `hermes gateway install|uninstall|start|stop|restart|status`.
//!
//! Where a systemd user instance runs and `install` wrote the user unit
//! (`~/.config/systemd/user/hermes-gateway.service`), the verbs drive it with `systemctl
//! --user`. Elsewhere (containers, CI, machines without systemd), `start` detaches a
//! supervisor (`hermes gateway supervise`, in a session of its own) that runs `hermes
//! gateway run` and starts it again when it fails, with a backoff, as `Restart=on-failure`
//! would. Its pid and the gateway's arguments are in `HERMES_HOME/gateway.service.json`;
//! the gateway itself writes `gateway.pid`, `gateway.state.json` and its log file.
//!
//! `stop` sends SIGTERM and waits for the graceful shutdown, with a bound, then kills what
//! is left. `restart` is stop then start, and starts a gateway that is not running.
//! `status` says the pid, uptime, endpoints, hooks, last reload and log file.

use std::io::Write as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use super::state::{self, State};
use crate::cli::ExitStatus;
use crate::cli::settings::Settings;

/// The unit's name.
pub const UNIT: &str = "hermes-gateway.service";

/// How long `start` waits for the gateway to serve.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Failures in a row within [`CRASH_WINDOW`] after which the supervisor gives up.
const MAX_CRASHES: usize = 5;
const CRASH_WINDOW: Duration = Duration::from_secs(60);

/// What `start` records for `stop`, `restart` and `status`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Service {
    /// The supervisor's pid.
    supervisor: u32,
    /// The arguments of `hermes gateway run`.
    args: Vec<String>,
}

fn service_path(settings: &Settings) -> PathBuf {
    settings.home.root().join("gateway.service.json")
}

fn read_service(settings: &Settings) -> Option<Service> {
    serde_json::from_slice(&hermes_host::private_file::read_regular(&service_path(settings)).ok()?)
        .ok()
}

fn write_service(settings: &Settings, service: &Service) -> anyhow::Result<()> {
    let path = service_path(settings);
    let text = serde_json::to_string_pretty(service)?;
    hermes_host::private_file::create_fresh(&path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The unit file's path: `$XDG_CONFIG_HOME/systemd/user/`, else `~/.config/systemd/user/`.
pub fn unit_path() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(config.join("systemd").join("user").join(UNIT))
}

/// Whether a systemd user instance runs here (its private socket exists), unless
/// `HERMES_NO_SYSTEMD` says to do without it.
fn systemd_user() -> bool {
    if std::env::var_os("HERMES_NO_SYSTEMD").is_some_and(|v| !v.is_empty()) {
        return false;
    }
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(|d| PathBuf::from(d).join("systemd").join("private"))
        .is_some_and(|p| p.exists())
}

/// Whether the verbs go through systemd: it runs here and the unit is installed.
fn via_systemd() -> bool {
    systemd_user() && unit_path().is_some_and(|p| p.exists())
}

fn systemctl(args: &[&str]) -> anyhow::Result<ExitStatus> {
    let status = Command::new("systemctl")
        .arg("--user")
        .args(args)
        .status()
        .context("cannot run systemctl --user")?;
    Ok(if status.success() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// The `hermes` executable, for the unit and the supervisor.
fn exe() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("cannot find the hermes executable")
}

/// The unit file's text for `settings`' home and the gateway's `args`.
pub fn unit_text(exe: &Path, home: &Path, args: &[String]) -> String {
    let mut exec = vec![
        quote(&exe.display().to_string()),
        "--home".into(),
        quote(&home.display().to_string()),
        "gateway".into(),
        "run".into(),
    ];
    let listens = args.iter().any(|a| {
        a == "--listen"
            || a == "--socket"
            || a.starts_with("--listen=")
            || a.starts_with("--socket=")
    });
    if !listens {
        exec.push("--socket".into());
        exec.push(quote(&home.join("gateway.sock").display().to_string()));
    }
    exec.extend(args.iter().map(|a| quote(a)));
    let home_text = home.display().to_string();
    format!(
        "[Unit]\nDescription=Hermes gateway ({home})\nAfter=network.target\n\n[Service]\nType=simple\nEnvironment={environment}\nExecStart={exec}\nExecReload=/bin/kill -HUP $MAINPID\nRestart=on-failure\nRestartSec=2\nKillSignal=SIGTERM\nTimeoutStopSec=30\n\n[Install]\nWantedBy=default.target\n",
        home = escape_unit(&home_text, false),
        environment = unit_value(&format!("HERMES_HOME={home_text}"), false),
        exec = exec.join(" "),
    )
}

/// A word for a unit's command line (`ExecStart=`), as systemd reads it back: quoted when
/// it has a space, a quote, a backslash or a control character; C escapes for those (a
/// newline in an argument must not start a directive of its own); `%%` for a `%` (else a
/// specifier: `%h` is the user's home) and `$$` for a `$` (else a variable).
fn quote(word: &str) -> String {
    unit_value(word, true)
}

/// [`quote`]'s rules; `$` doubled only where systemd expands variables (`dollars`).
fn unit_value(word: &str, dollars: bool) -> String {
    let needs_quotes = word.is_empty()
        || word
            .chars()
            .any(|c| matches!(c, ' ' | '"' | '\\' | '\'') || c.is_control());
    let escaped = escape_unit(word, dollars);
    if needs_quotes {
        format!("\"{escaped}\"")
    } else {
        escaped
    }
}

fn escape_unit(word: &str, dollars: bool) -> String {
    let mut out = String::with_capacity(word.len());
    for c in word.chars() {
        match c {
            '%' => out.push_str("%%"),
            '$' if dollars => out.push_str("$$"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let mut bytes = [0u8; 4];
                for b in c.encode_utf8(&mut bytes).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
            c => out.push(c),
        }
    }
    out
}

pub fn install(settings: &Settings, args: &[String]) -> anyhow::Result<ExitStatus> {
    let Some(path) = unit_path() else {
        bail!("neither XDG_CONFIG_HOME nor HOME is set: nowhere to put the systemd user unit");
    };
    let text = unit_text(&exe()?, settings.home.root(), args);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(&path, &text).with_context(|| format!("cannot write {}", path.display()))?;
    println!("Wrote {}", path.display());
    if systemd_user() {
        systemctl(&["daemon-reload"])?;
        systemctl(&["enable", UNIT])?;
        println!("Enabled {UNIT}: `hermes gateway start` starts it, and it starts at login.");
    } else {
        println!(
            "No systemd user instance runs here, so the unit is not enabled; `hermes gateway start` runs the gateway in the background instead."
        );
    }
    Ok(ExitStatus::Success)
}

pub fn uninstall() -> anyhow::Result<ExitStatus> {
    let Some(path) = unit_path() else {
        bail!("neither XDG_CONFIG_HOME nor HOME is set: no systemd user unit to remove");
    };
    if systemd_user() && path.exists() {
        systemctl(&["disable", "--now", UNIT])?;
    }
    match std::fs::remove_file(&path) {
        Ok(()) => println!("Removed {}", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            println!("No unit at {}", path.display());
        }
        Err(e) => return Err(e).with_context(|| format!("cannot remove {}", path.display())),
    }
    Ok(ExitStatus::Success)
}

/// The running gateway of this home (the process holding its lock): its state file when
/// that names the same process, else what is known without it (a gateway still starting,
/// or a state file that was damaged).
fn running(settings: &Settings) -> Option<State> {
    let pid = state::gateway_pid(settings)?;
    Some(state_of(settings, pid).unwrap_or(State {
        pid,
        ..State::default()
    }))
}

/// The state of this home's gateway once it serves: it writes the file then.
fn serving(settings: &Settings) -> Option<State> {
    state_of(settings, state::gateway_pid(settings)?)
}

/// The state file, when it is about the gateway `pid`.
fn state_of(settings: &Settings, pid: u32) -> Option<State> {
    state::read(&state::path(settings)).filter(|s| s.pid == pid)
}

pub fn start(settings: &Settings, args: &[String]) -> anyhow::Result<ExitStatus> {
    if via_systemd() {
        return systemctl(&["start", UNIT]);
    }
    if let Some(state) = running(settings) {
        println!(
            "The gateway is already running (pid {}); `hermes gateway restart` restarts it.",
            state.pid
        );
        return Ok(ExitStatus::Success);
    }
    let args = if args.is_empty() {
        read_service(settings).map(|s| s.args).unwrap_or_default()
    } else {
        args.to_vec()
    };
    std::fs::create_dir_all(settings.home.root())
        .with_context(|| format!("cannot create {}", settings.home.root().display()))?;
    let log = settings.home.root().join("logs").join("gateway.log");
    let mut cmd = Command::new(exe()?);
    cmd.arg("--home")
        .arg(settings.home.root())
        .args(["gateway", "supervise", "--"])
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(token) = &settings.gateway_token {
        // Out of this process's environment since it started; the gateway needs it.
        cmd.env("HERMES_GATEWAY_TOKEN", token);
    }
    // SAFETY: setsid(2) in the child before exec touches nothing of the parent's: the
    // supervisor leaves this terminal's session, so closing it does not stop the gateway.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd
        .spawn()
        .context("cannot start the gateway's supervisor")?;
    let service = Service {
        supervisor: child.id(),
        args: args.clone(),
    };
    let started = Instant::now();
    loop {
        if let Some(state) = serving(settings) {
            // Only now: a record of a gateway that never served would name a process
            // that is not ours to signal.
            write_service(settings, &service)?;
            // The supervisor is the gateway's parent: reaped by init once we exit.
            println!(
                "Started the gateway (pid {}), serving {}.",
                state.pid,
                state.endpoints.join(", ")
            );
            println!(
                "Its log: {}; follow it with `hermes logs --follow`.",
                state.log_file.as_deref().unwrap_or(&log).display()
            );
            return Ok(ExitStatus::Success);
        }
        if let Ok(Some(status)) = child.try_wait() {
            bail!(
                "the gateway did not start (its supervisor exited with {status}); see {} (`hermes logs -n 20`)",
                log.display()
            );
        }
        if started.elapsed() > START_TIMEOUT {
            bail!(
                "the gateway did not start within {} s; see {} (`hermes logs -n 20`), and `hermes gateway stop` to end the attempt",
                START_TIMEOUT.as_secs(),
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn stop(settings: &Settings, timeout: Duration) -> anyhow::Result<ExitStatus> {
    if via_systemd() {
        return systemctl(&["stop", UNIT]);
    }
    // Only processes proved to be this home's, by the locks they hold.
    let supervisor = state::supervisor_pid(settings);
    let gateway = state::gateway_pid(settings);
    let targets: Vec<u32> = supervisor.into_iter().chain(gateway).collect();
    if targets.is_empty() {
        println!("The gateway is not running.");
        return Ok(ExitStatus::Success);
    }
    // The supervisor forwards SIGTERM to the gateway and does not restart it; a gateway
    // without one (started with `gateway run`) gets the signal itself.
    let first = supervisor.or(gateway).unwrap_or_default();
    // SAFETY: kill(2) with a signal number, on a pid checked above.
    unsafe { libc::kill(first as libc::pid_t, libc::SIGTERM) };
    let started = Instant::now();
    while targets.iter().any(|pid| state::alive(*pid)) {
        if started.elapsed() > timeout {
            // A gateway killed outright cannot end the process groups of its running turn
            // (a terminal command, a hook): they are found now, while they are still its
            // descendants, and ended with it.
            let groups = descendant_groups(&targets);
            for pid in targets.iter().filter(|p| state::alive(**p)) {
                // SAFETY: as above.
                unsafe { libc::kill(*pid as libc::pid_t, libc::SIGKILL) };
            }
            for group in groups {
                let _ = hermes_host::process::kill_group(group);
            }
            println!(
                "The gateway did not stop within {} s of SIGTERM; killed it.",
                timeout.as_secs()
            );
            return Ok(ExitStatus::Failure);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    println!(
        "Stopped the gateway{}.",
        gateway.map(|p| format!(" (pid {p})")).unwrap_or_default()
    );
    Ok(ExitStatus::Success)
}

pub fn restart(
    settings: &Settings,
    args: &[String],
    timeout: Duration,
) -> anyhow::Result<ExitStatus> {
    if via_systemd() {
        return systemctl(&["restart", UNIT]);
    }
    if stop(settings, timeout)? == ExitStatus::Failure {
        println!("Starting it again anyway.");
    }
    start(settings, args)
}

pub fn status(settings: &Settings, json: bool) -> anyhow::Result<ExitStatus> {
    let default_log = settings.home.root().join("logs").join("gateway.log");
    let Some(state) = running(settings) else {
        if json {
            println!(
                "{}",
                serde_json::json!({"running": false, "log_file": default_log})
            );
        } else {
            println!(
                "The gateway of {} is not running.",
                settings.home.root().display()
            );
            println!(
                "Start it with `hermes gateway start`; its last log is {} (`hermes logs`).",
                default_log.display()
            );
        }
        // As `systemctl status` of a unit that is not active.
        return Ok(ExitStatus::Failure);
    };
    let uptime = state::now().saturating_sub(state.started);
    let answering: Vec<(String, bool)> = state
        .endpoints
        .iter()
        .map(|e| (e.clone(), answers(e)))
        .collect();
    let log_file = state.log_file.clone().unwrap_or(default_log);
    // Shadow hooks' firings since this gateway started, from their records.
    let shadow_file = crate::app::shadow::records_path(&settings.home);
    let shadows =
        crate::app::shadow::read_records(&shadow_file, state.started as f64).unwrap_or_default();
    let disagreed = shadows
        .iter()
        .filter(|r| r["agreed"].as_bool() != Some(true))
        .count();
    if json {
        println!(
            "{}",
            serde_json::json!({
                "running": true,
                "pid": state.pid,
                "uptime_seconds": uptime,
                "endpoints": answering.iter().map(|(e, ok)| serde_json::json!({"endpoint": e, "answers": ok})).collect::<Vec<_>>(),
                "plugins": state.plugins,
                "shell_hooks": state.shell_hooks,
                "gateway_hooks": state.gateway_hooks,
                "last_reload": state.last_reload,
                "reloads": state.reloads,
                "events": state.events,
                "shadow": {"recorded": shadows.len(), "disagreed": disagreed},
                "log_file": log_file,
                "supervised": state::supervisor_pid(settings).is_some(),
            })
        );
        return Ok(ExitStatus::Success);
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "The gateway is running: pid {}, up {}.",
        state.pid,
        human_duration(uptime)
    );
    for (endpoint, ok) in &answering {
        let _ = writeln!(
            out,
            "  serving {endpoint}{}",
            if *ok {
                " (answers)"
            } else {
                " (does not answer)"
            }
        );
    }
    let _ = writeln!(
        out,
        "  hooks: {} plugin(s){}, {} shell hook(s), {} gateway hook(s){}",
        state.plugins.len(),
        list(&state.plugins),
        state.shell_hooks.len(),
        state.gateway_hooks.len(),
        list(&state.gateway_hooks)
    );
    let reload = match state.last_reload {
        Some(at) => format!(
            "{} ago ({} reload(s) since the start)",
            human_duration(state::now().saturating_sub(at)),
            state.reloads
        ),
        None => "never".into(),
    };
    let _ = writeln!(out, "  last reload: {reload}");
    if let Some(events) = &state.events {
        let _ = writeln!(
            out,
            "  events: {} published, {} spooled, {} dropped, {} duplicate(s)",
            events.published, events.spooled, events.dropped, events.duplicates
        );
    }
    if !shadows.is_empty() {
        let _ = writeln!(
            out,
            "  shadow hooks: {} firing(s) recorded since the start, {disagreed} disagreed with the deciding hooks (`hermes hooks shadow-report`)",
            shadows.len()
        );
    }
    let _ = writeln!(
        out,
        "  log: {}; follow it with `hermes logs --follow`",
        log_file.display()
    );
    Ok(ExitStatus::Success)
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        String::new()
    } else {
        format!(" ({})", names.join(", "))
    }
}

/// Whether an endpoint accepts a connection: a Unix socket path, or `tcp ADDR`.
fn answers(endpoint: &str) -> bool {
    let timeout = Duration::from_secs(2);
    if let Some(addr) = endpoint.strip_prefix("tcp ") {
        return addr
            .parse()
            .is_ok_and(|a| std::net::TcpStream::connect_timeout(&a, timeout).is_ok());
    }
    if endpoint.starts_with('/') {
        return std::os::unix::net::UnixStream::connect(endpoint).is_ok();
    }
    false
}

fn human_duration(seconds: u64) -> String {
    match seconds {
        s if s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min {} s", s / 60, s % 60),
        s if s < 86400 => format!("{} h {} min", s / 3600, (s % 3600) / 60),
        s => format!("{} d {} h", s / 86400, (s % 86400) / 3600),
    }
}

/// The signal the supervisor was asked to stop with (0: none yet).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop(signal: libc::c_int) {
    STOP_SIGNAL.store(signal, Ordering::SeqCst);
}

/// `hermes gateway supervise -- ARGS`: runs `hermes gateway run ARGS` and starts it again
/// when it fails, as `Restart=on-failure` would: after 1, 2, 4 ... 30 s, and not after
/// [`MAX_CRASHES`] failures within [`CRASH_WINDOW`]. SIGTERM and SIGINT are passed on to
/// the gateway, which then stops for good.
pub fn supervise(settings: &Settings, args: &[String]) -> anyhow::Result<ExitStatus> {
    // Held for the supervisor's life: how `stop` and `status` know it is this home's.
    let lock = state::supervisor_lock(settings);
    let Some(_lock) = state::try_lock(&lock)? else {
        bail!(
            "another supervisor (pid {}) is already running the gateway of {}; `hermes gateway stop` stops it",
            state::lock_holder(&lock).map_or("unknown".into(), |p| p.to_string()),
            settings.home.root().display()
        );
    };
    // SAFETY: installing an async-signal-safe handler that only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_stop as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
    let log = crate::app::logfile::global().or_else(|| {
        crate::app::logfile::LogFile::open(
            &settings.home.root().join("logs").join("gateway.log"),
            settings.log_format,
        )
        .ok()
    });
    let say = |line: &str| {
        if let Some(log) = &log {
            log.line(line);
        }
    };
    let mut crashes: Vec<Instant> = Vec::new();
    let mut backoff = Duration::from_secs(1);
    loop {
        let mut cmd = Command::new(exe()?);
        cmd.arg("--home")
            .arg(settings.home.root())
            .args(["gateway", "run"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(token) = &settings.gateway_token {
            cmd.env("HERMES_GATEWAY_TOKEN", token);
        }
        let started_at = Instant::now();
        let mut child = cmd.spawn().context("cannot start hermes gateway run")?;
        let child_pid = child.id();
        // What it says on stderr before its own log file is open (a bad flag, a missing
        // token) is the reason it failed: the last lines are kept for the log.
        let last_words = last_lines(child.stderr.take());
        let status = loop {
            let signal = STOP_SIGNAL.load(Ordering::SeqCst);
            if signal != 0 {
                // SAFETY: kill(2) on our own child.
                unsafe { libc::kill(child.id() as libc::pid_t, signal) };
                let status = child.wait();
                say(&format!(
                    "INFO gateway: supervisor: stopped by signal {signal}; the gateway exited ({})",
                    status.map(|s| s.to_string()).unwrap_or_default()
                ));
                return Ok(ExitStatus::Success);
            }
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => bail!("cannot wait for the gateway: {e}"),
            }
        };
        if status.success() {
            say("INFO gateway: supervisor: the gateway exited cleanly; not restarting it");
            return Ok(ExitStatus::Success);
        }
        // The pipe closes when the gateway exits; what it left running may hold it open.
        std::thread::sleep(Duration::from_millis(100));
        let words = last_words
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(" | ");
        if !words.is_empty() {
            say(&format!(
                "ERROR gateway: supervisor: the gateway said: {words}"
            ));
        }
        // It served once it wrote its state file (a SIGKILLed gateway leaves it behind).
        let served = state_of(settings, child_pid).is_some();
        let at_start = status.code().is_some() && !served;
        if at_start && started_at.elapsed() < Duration::from_secs(1) {
            // An error at start (a flag, the token, the home) happens again at every try.
            say(&format!(
                "ERROR gateway: supervisor: the gateway failed at start ({status}); not restarting it. Fix what it said, then `hermes gateway start`"
            ));
            return Ok(ExitStatus::Failure);
        }
        let now = Instant::now();
        crashes.retain(|t| now.duration_since(*t) < CRASH_WINDOW);
        crashes.push(now);
        if crashes.len() >= MAX_CRASHES {
            say(&format!(
                "ERROR gateway: supervisor: the gateway failed {MAX_CRASHES} times within {} s ({status}); giving up. Fix what the lines above say, then `hermes gateway start`",
                CRASH_WINDOW.as_secs()
            ));
            return Ok(ExitStatus::Failure);
        }
        say(&format!(
            "WARN gateway: supervisor: the gateway exited ({status}); starting it again in {} s",
            backoff.as_secs()
        ));
        let until = Instant::now() + backoff;
        while Instant::now() < until {
            if STOP_SIGNAL.load(Ordering::SeqCst) != 0 {
                return Ok(ExitStatus::Success);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// The process groups of every descendant of `roots` (from `/proc`), but the groups of
/// `roots` themselves and of this process.
fn descendant_groups(roots: &[u32]) -> Vec<u32> {
    let mut parent_of: Vec<(u32, u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            let Some(fields) = state::stat_fields(pid) else {
                continue;
            };
            if let (Some(ppid), Some(pgrp)) = (
                fields.get(1).and_then(|f| f.parse().ok()),
                fields.get(2).and_then(|f| f.parse().ok()),
            ) {
                parent_of.push((pid, ppid, pgrp));
            }
        }
    }
    let group_of = |pid: u32| parent_of.iter().find(|p| p.0 == pid).map(|p| p.2);
    let mut skip: Vec<u32> = roots.iter().filter_map(|r| group_of(*r)).collect();
    skip.push(group_of(std::process::id()).unwrap_or(0));
    let mut seen: Vec<u32> = roots.to_vec();
    let mut groups = Vec::new();
    let mut i = 0;
    while i < seen.len() {
        let parent = seen[i];
        for (pid, ppid, pgrp) in &parent_of {
            if *ppid == parent && !seen.contains(pid) {
                seen.push(*pid);
                if !skip.contains(pgrp) && !groups.contains(pgrp) {
                    groups.push(*pgrp);
                }
            }
        }
        i += 1;
    }
    groups
}

/// Reads `stderr` on a thread of its own, keeping its last lines.
fn last_lines(
    stderr: Option<std::process::ChildStderr>,
) -> std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>> {
    const KEEP: usize = 10;
    let lines = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
    if let Some(stderr) = stderr {
        let sink = lines.clone();
        let _ = std::thread::Builder::new()
            .name("hermes-supervise-stderr".into())
            .spawn(move || {
                hermes_host::lines::read_lines(stderr, 4096, |piece| {
                    if let hermes_host::lines::Piece::Line(_, bytes) = piece {
                        let mut kept = sink.lock().unwrap_or_else(|e| e.into_inner());
                        if kept.len() == KEEP {
                            kept.pop_front();
                        }
                        kept.push_back(String::from_utf8_lossy(bytes).into_owned());
                    }
                    true
                });
            });
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_names_the_home_the_endpoint_and_restarts_on_failure() {
        let text = unit_text(
            Path::new("/usr/local/bin/hermes"),
            Path::new("/home/me/.hermes"),
            &[],
        );
        assert!(
            text.contains("Environment=HERMES_HOME=/home/me/.hermes\n"),
            "{text}"
        );
        assert!(
            text.contains("ExecStart=/usr/local/bin/hermes --home /home/me/.hermes gateway run --socket /home/me/.hermes/gateway.sock\n"),
            "{text}"
        );
        assert!(text.contains("Restart=on-failure\n"), "{text}");
        let tcp = unit_text(
            Path::new("/h"),
            Path::new("/my home"),
            &["--listen".into(), "127.0.0.1:7000".into()],
        );
        assert!(
            tcp.contains("ExecStart=/h --home \"/my home\" gateway run --listen 127.0.0.1:7000\n"),
            "{tcp}"
        );
    }

    #[test]
    fn the_unit_keeps_every_argument_one_word_and_expands_nothing() {
        let text = unit_text(
            Path::new("/h"),
            Path::new("/srv/%h/$HOME"),
            &[
                "--socket".into(),
                "/tmp/a\nExecStartPre=/bin/touch /tmp/owned".into(),
                "--trace-file".into(),
                "/tmp/$USER %u".into(),
            ],
        );
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            !lines.iter().any(|l| l.starts_with("ExecStartPre")),
            "{text}"
        );
        let exec = lines.iter().find(|l| l.starts_with("ExecStart=")).unwrap();
        assert_eq!(
            *exec,
            "ExecStart=/h --home /srv/%%h/$$HOME gateway run --socket \"/tmp/a\\nExecStartPre=/bin/touch /tmp/owned\" --trace-file \"/tmp/$$USER %%u\""
        );
        assert!(
            text.contains("Environment=HERMES_HOME=/srv/%%h/$HOME\n"),
            "{text}"
        );
        assert!(
            text.contains("Description=Hermes gateway (/srv/%%h/$HOME)\n"),
            "{text}"
        );
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(human_duration(5), "5 s");
        assert_eq!(human_duration(125), "2 min 5 s");
        assert_eq!(human_duration(7300), "2 h 1 min");
        assert_eq!(human_duration(90000), "1 d 1 h");
    }
}
