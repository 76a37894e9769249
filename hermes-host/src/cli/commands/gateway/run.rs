//! `hermes gateway run`: the agent behind the local message gateway.
//!
//! Start-up, in order: bind the listener (the Unix socket in the home by default, or the
//! TCP listener; its path or address is stdout's first line), load
//! plugins and shell hooks (with consent) exactly as `hermes run` does, load the gateway
//! hooks, start the tokio runtime (`gateway.workers` threads) and the server
//! (`gateway:startup`; its turn pool has `gateway.max_blocking` threads, `gateway.max_running`
//! of them using the CPU at once), then serve until stdin ends (`--stdin`) or SIGINT/SIGTERM.
//!
//! Shutdown on a signal is graceful: no new clients or messages, running and queued turns
//! get `gateway.shutdown_grace` (or `--shutdown-grace`) to finish, then what still runs is
//! interrupted; every session ends, answers are flushed, gateway hooks get
//! `--shutdown-deadline` seconds, and the exit status is 0. A second signal exits at once.
//!
//! Output: with `--stdin`, stdout carries only the JSON answers, so the `[hooks]` and
//! gateway log lines go to stderr; otherwise they go to stdout after the address line.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::channel;
use std::time::Duration;

use crate::app::agent::{Agent, ApprovalMode, Approver, GatewayScript};
use crate::app::server::{
    AllowedUsers, GatewayLimits, Server, ServerOptions, Shutdown, TcpAdapter, UnixAdapter,
    serve_stdio,
};
use anyhow::{Context, bail};
use hermes_host::config::{Config, Setting};
use hermes_host::gateway::GatewayLog;

use super::state::{State, StateFile};
use super::stdout_log;
use crate::cli::ExitStatus;
use crate::cli::args::GatewayRunArgs;
use crate::cli::load::load_hooks_with_config;
use crate::cli::settings::Settings;

/// Why the gateway stops.
enum Stop {
    /// Standard input ended (`--stdin`).
    EndOfInput,
    /// SIGINT or SIGTERM.
    Signal(i32),
    /// SIGHUP: reload the hooks.
    Reload,
}

/// Routes the first SIGINT or SIGTERM to `stop`; a second one ends the process at once,
/// with the usual `128 + signal` status. SIGHUP asks for a reload. A task on the runtime,
/// woken only by a signal.
fn stop_on_signals(
    runtime: &tokio::runtime::Handle,
    stop: std::sync::mpsc::Sender<Stop>,
) -> std::io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let _inside = runtime.enter();
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut hangup = signal(SignalKind::hangup())?;
    runtime.spawn(async move {
        let mut first = true;
        loop {
            let number = tokio::select! {
                _ = interrupt.recv() => libc::SIGINT,
                _ = terminate.recv() => libc::SIGTERM,
                _ = hangup.recv() => {
                    let _ = stop.send(Stop::Reload);
                    continue;
                }
            };
            if !first {
                // SAFETY: _exit ends the process without running anything else.
                unsafe { libc::_exit(128 + number) };
            }
            first = false;
            let _ = stop.send(Stop::Signal(number));
        }
    });
    Ok(())
}

/// Raises the soft limit on open files to the hard limit: every client is a descriptor,
/// and the usual soft limit (1024) would refuse clients long before `max_connections`.
fn raise_open_file_limit() {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn stderr_log() -> Arc<dyn GatewayLog> {
    Arc::new(|line: &str| {
        let mut err = std::io::stderr().lock();
        let _ = writeln!(err, "{}", hermes_host::lines::escape_controls(line));
    })
}

/// Moves the process's standard output out of reach: returns a private duplicate of fd 1
/// for the protocol and points fd 1 at stderr, so that whatever else writes to stdout
/// (plugins have their own copy of std, hook processes inherit fd 1) lands in the log.
fn take_stdout_for_protocol() -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    std::io::stdout().flush()?;
    // SAFETY: dup and dup2 on the standard descriptors; the duplicate is owned by the File.
    let private = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
    if private < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if unsafe { libc::dup2(2, 1) } < 0 {
        let error = std::io::Error::last_os_error();
        unsafe { libc::close(private) };
        return Err(error);
    }
    // SAFETY: `private` is a fresh descriptor nothing else owns.
    Ok(unsafe { std::fs::File::from_raw_fd(private) })
}

/// The publisher's counters, as the state file keeps them.
fn event_counts(publisher: &crate::app::fleet::publish::Publisher) -> super::state::EventCounts {
    use std::sync::atomic::Ordering;
    let c = publisher.counters();
    super::state::EventCounts {
        published: c.published.load(Ordering::Relaxed),
        spooled: c.spooled.load(Ordering::Relaxed),
        dropped: c.dropped.load(Ordering::Relaxed),
        duplicates: c.duplicates.load(Ordering::Relaxed),
    }
}

fn seconds(value: f64, flag: &str) -> anyhow::Result<Duration> {
    if !value.is_finite() || value < 0.0 {
        bail!("{flag} must be a number of seconds, 0 or more");
    }
    Ok(Duration::from_secs_f64(value))
}

/// The token TCP clients must send first: `HERMES_GATEWAY_TOKEN`, else `gateway.token` of
/// `config.yaml`. A loopback port is open to every account on the machine, so the gateway
/// does not listen on one without a token.
fn tcp_token(settings: &Settings, config: &Config) -> anyhow::Result<std::sync::Arc<str>> {
    let from_env = settings
        .gateway_token
        .clone()
        .filter(|t| !t.trim().is_empty());
    let token = match from_env {
        Some(token) => token,
        None => match &config.gateway.token {
            Setting::Set(t) if !t.trim().is_empty() => t.clone(),
            Setting::Set(_) | Setting::Invalid(_) => bail!(
                "gateway.token in {} must be a non-empty string",
                settings.home.config_path().display()
            ),
            Setting::Absent => bail!(
                "--listen needs a token, since any account on this machine can reach a loopback port: set HERMES_GATEWAY_TOKEN, or gateway.token in {}; clients then send {{\"token\": \"...\"}} as their first line. --stdin needs none",
                settings.home.config_path().display()
            ),
        },
    };
    if token.len() < 16 {
        bail!(
            "the gateway token must be at least 16 characters (it is {}); make a random one, for example with `openssl rand -hex 16`",
            token.len()
        );
    }
    Ok(token.into())
}

pub fn run(args: GatewayRunArgs, settings: &Settings) -> anyhow::Result<ExitStatus> {
    let _lock = if args.beside_another {
        None
    } else {
        Some(super::reload::GatewayLock::take(settings)?)
    };
    let script = match &args.script {
        Some(path) => GatewayScript::read(path).map_err(anyhow::Error::msg)?,
        None => GatewayScript::default(),
    };
    let mode: ApprovalMode = args.approvals.parse().map_err(anyhow::Error::msg)?;
    if mode == ApprovalMode::Prompt {
        bail!(
            "--approvals prompt is not available behind the gateway (use once, session, always or deny)"
        );
    }
    let idle_timeout = args
        .idle_timeout
        .map(|s| seconds(s, "--idle-timeout"))
        .transpose()?;
    if idle_timeout == Some(Duration::ZERO) {
        bail!("--idle-timeout must be more than 0 seconds");
    }
    let shutdown_deadline = seconds(args.shutdown_deadline, "--shutdown-deadline")?;
    let shutdown_grace = args
        .shutdown_grace
        .map(|s| seconds(s, "--shutdown-grace"))
        .transpose()?;
    if args.platform.is_empty() || args.platform.contains(':') {
        bail!(
            "--platform must be a non-empty name without ':' (it is the first part of a session key)"
        );
    }
    let cwd = match args.cwd {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };

    // Read once: the token is needed before anything listens, and the hooks load from the
    // same reading.
    let loaded = settings.home.load_config();
    let token = match args.listen {
        Some(_) => Some(tcp_token(settings, &loaded.0)?),
        None => None,
    };
    let mut endpoints: Vec<String> = Vec::new();
    let tcp = match args.listen {
        Some(addr) => {
            let tcp = TcpAdapter::bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
            let bound = tcp.local_addr().context("cannot read the bound address")?;
            endpoints.push(format!("tcp {bound}"));
            let mut out = std::io::stdout().lock();
            writeln!(out, "{bound}")
                .and_then(|()| out.flush())
                .context("cannot write to stdout")?;
            Some(tcp)
        }
        None => None,
    };
    let socket_path = args.socket.clone().or_else(|| {
        (args.listen.is_none() && !args.stdin).then(|| settings.home.root().join("gateway.sock"))
    });
    let mut unix = match &socket_path {
        Some(path) => {
            let unix = UnixAdapter::bind(path)
                .with_context(|| format!("cannot listen on {}", path.display()))?;
            endpoints.push(unix.path().display().to_string());
            let mut out = std::io::stdout().lock();
            writeln!(out, "{}", unix.path().display())
                .and_then(|()| out.flush())
                .context("cannot write to stdout")?;
            Some(unix)
        }
        None => None,
    };
    // With --stdin, stdout is the protocol. Everything else that writes to fd 1 (a plugin's
    // println!, a hook's child process, a stray print of ours) must not reach it, so the
    // protocol gets a private duplicate and fd 1 becomes stderr, before any hook loads.
    let protocol = if args.stdin {
        Some(take_stdout_for_protocol().context("cannot set up stdout for the protocol")?)
    } else {
        None
    };
    let log = if args.stdin {
        stderr_log()
    } else {
        stdout_log()
    };
    // The log file: --log-file, else HERMES_HOME/logs/gateway.log. Every line the gateway
    // logs goes there too, and so do warnings and errors of the library.
    let log_file = match crate::app::logfile::global() {
        Some(file) => Some(file),
        None => {
            let path = settings.home.root().join("logs").join("gateway.log");
            match crate::app::logfile::LogFile::open(&path, settings.log_format) {
                Ok(file) => {
                    crate::app::logfile::set_global(file.clone());
                    Some(file)
                }
                Err(e) => {
                    log.line(&format!("hermes: {e}; logging to stderr only"));
                    None
                }
            }
        }
    };
    let log: Arc<dyn GatewayLog> = match &log_file {
        Some(file) => {
            let (screen, file) = (log, file.clone());
            Arc::new(move |line: &str| {
                screen.line(line);
                file.line(line);
            })
        }
        None => log,
    };
    if let Some(file) = &log_file {
        log.line(&format!(
            "gateway: logging to {}; follow it with `hermes logs --follow`",
            file.path().display()
        ));
    }

    let tracer = crate::cli::inputs::tracer(&args.trace, args.trace_file.as_deref())?;
    let hooks = load_hooks_with_config(
        settings,
        loaded,
        Some(tracer.clone()),
        Some(log.clone()),
        Some(&cwd),
    )?;
    let (registry, gateway_hooks, config, mut report) = hooks.into_parts();
    let mut libraries = super::reload::InProcessLibraries::default();
    libraries.record(&report);
    let (mut limits, warnings) = GatewayLimits::from_config(&config);
    for warning in warnings {
        log.line(&format!("hermes: {warning}"));
    }
    if let Some(workers) = args.workers {
        if workers == 0 {
            bail!("--workers must be 1 or more");
        }
        limits.workers = workers;
    }
    if let Some(grace) = shutdown_grace {
        limits.shutdown_grace = grace;
    }
    raise_open_file_limit();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(limits.workers)
        // Nothing of the gateway's runs on tokio's own blocking pool (turns run on the
        // `RunPool`); bounded all the same, so that a later use of it cannot grow the
        // thread count with the load.
        .max_blocking_threads(limits.max_blocking)
        .thread_name("gateway")
        .enable_all()
        .build()
        .context("cannot start the gateway's runtime")?;
    let _inside = runtime.enter();
    let allowed_users = match AllowedUsers::from_config(&config) {
        Ok(allowed) => allowed,
        Err((fallback, message)) => {
            log.line(&format!("hermes: {message}"));
            fallback
        }
    };
    // The fleet: every gateway event to JetStream, from before `gateway:startup`.
    let nats = match &args.events_nats {
        Some(url) => Some(crate::app::fleet::NatsSettings {
            url: url.clone(),
            ..crate::app::fleet::NatsSettings::from_config(&config.gateway)
                .ok()
                .flatten()
                .unwrap_or_else(|| crate::app::fleet::NatsSettings::for_url(url))
        }),
        None => match crate::app::fleet::NatsSettings::from_config(&config.gateway) {
            Ok(settings) => settings,
            Err(why) => {
                log.line(&format!(
                    "hermes: config.yaml: {why}; events are not published"
                ));
                None
            }
        },
    };
    let publisher = match nats {
        Some(nats) => {
            let name = settings
                .home
                .root()
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let spool = settings.home.root().join("spool").join("events");
            log.line(&format!(
                "gateway: events: publishing to {} (stream {}, subjects {}), spooling under {} while it is unreachable",
                nats.url,
                nats.stream,
                nats.all_subjects(),
                spool.display()
            ));
            let publisher = crate::app::fleet::publish::Publisher::start(
                nats,
                &name,
                &spool,
                runtime.handle(),
                log.clone(),
            )
            .map_err(anyhow::Error::msg)?;
            Some(publisher)
        }
        None => None,
    };
    let registry = Arc::new(registry);
    let streams = Arc::new(hermes_host::stream::StreamObservers::start(
        registry.clone(),
    ));
    let agent = Agent {
        registry,
        streams,
        gateway: gateway_hooks.map(Arc::new),
        tracer,
        approver: Arc::new(Approver::new(mode, Duration::from_secs(60))),
        interrupt: Arc::new(AtomicBool::new(false)),
        transcript: Arc::new(crate::app::server::QuietTranscript),
        surface: "gateway",
        terminal_timeout: Duration::from_secs(args.terminal_timeout),
        max_stop_continuations: crate::app::agent::stop_continuations(&config),
        // The gateway keeps its own transcripts, in the reference's shape; environment
        // files appear when a SessionStart hook writes one.
        session_files: Some(settings.home.sessions_dir()),
        claude_transcripts: false,
        events: publisher
            .clone()
            .map(|p| p as Arc<dyn crate::app::agent::EventSink>),
        max_verify_nudges: crate::app::agent::verify_nudges(&config),
    };
    let mut options = ServerOptions::new(settings.home.sessions_dir(), cwd);
    options.platform = args.platform;
    options.allowed_users = allowed_users;
    // Sessions always expire: --idle-timeout, else gateway.session_idle_timeout (a day).
    options.idle_timeout = Some(idle_timeout.unwrap_or(limits.session_idle_timeout));
    options.limits = limits.clone();
    let server = Server::start(agent, script, options, log.clone());

    let (stop_tx, stop_rx) = channel();
    stop_on_signals(runtime.handle(), stop_tx.clone())
        .context("cannot listen for SIGINT and SIGTERM")?;
    if let (Some(tcp), Some(token)) = (tcp, token) {
        tcp.serve(server.clone(), runtime.handle(), &limits, token)
            .context("cannot start the TCP adapter")?;
    }
    if let Some(unix) = &mut unix {
        unix.serve(server.clone(), runtime.handle(), &limits)
            .context("cannot start the Unix socket adapter")?;
    }
    if let Some(protocol) = protocol {
        let server = server.clone();
        std::thread::Builder::new()
            .name("gateway-stdin".into())
            .spawn(move || {
                let stdin = std::io::stdin();
                let output = Box::new(std::io::LineWriter::new(protocol));
                if let Err(e) = serve_stdio(stdin.lock(), output, &server) {
                    tracing::warn!("gateway: the stdin adapter failed: {e}");
                }
                let _ = stop_tx.send(Stop::EndOfInput);
            })
            .context("cannot start the stdin adapter")?;
    } else {
        drop(stop_tx);
    }

    if args.stdin {
        endpoints.push("stdin".into());
    }
    log.line(&format!(
        "gateway: serving {} (pid {}); {} plugin(s), {} shell hook(s), {} gateway hook(s)",
        endpoints.join(", "),
        std::process::id(),
        report.plugins.iter().filter(|p| p.error.is_none()).count(),
        report.shell.registered.len(),
        report.gateway.len()
    ));
    let mut state = State {
        pid: std::process::id(),
        started: super::state::now(),
        endpoints,
        log_file: log_file.as_ref().map(|f| f.path().to_path_buf()),
        ..State::default()
    };
    state.set_hooks(&report);
    let state_path = super::state::path(settings);
    let mut state_file = match StateFile::write(&state_path, state) {
        Ok(file) => Some(file),
        Err(e) => {
            log.line(&format!(
                "gateway: cannot write {}: {e}; `hermes gateway status` will not see this gateway",
                state_path.display()
            ));
            None
        }
    };
    let _pid_file = match super::reload::PidFile::write(settings) {
        Ok(file) => Some(file),
        Err(e) => {
            log.line(&format!(
                "gateway: cannot write {}: {e}; `hermes gateway reload` will not find this gateway (SIGHUP still reloads)",
                super::reload::pid_file(settings).display()
            ));
            None
        }
    };
    let how = loop {
        let received = match stop_rx.recv_timeout(Duration::from_secs(2)) {
            Ok(stop) => Ok(stop),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                // The event counters, for `gateway status`.
                if let (Some(file), Some(p)) = (state_file.as_mut(), &publisher) {
                    file.update(|s| s.events = Some(event_counts(p)));
                }
                continue;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(()),
        };
        match received {
            Ok(Stop::Reload) => {
                super::reload::reload(&server, settings, &mut report, &mut libraries, &log);
                if let Some(file) = state_file.as_mut() {
                    file.update(|s| {
                        s.set_hooks(&report);
                        s.last_reload = Some(super::state::now());
                        s.reloads += 1;
                    });
                }
            }
            Ok(Stop::EndOfInput) | Err(()) => break Shutdown::Drain,
            Ok(Stop::Signal(signal)) => {
                let name = if signal == libc::SIGINT {
                    "SIGINT"
                } else {
                    "SIGTERM"
                };
                log.line(&format!(
                    "gateway: {name}: no new clients or messages; letting running turns finish for up to {} s (a second signal stops at once)",
                    limits.shutdown_grace.as_secs_f64()
                ));
                break Shutdown::Graceful(limits.shutdown_grace);
            }
        }
    };
    let summary = server.shutdown(how, shutdown_deadline);
    let unrecorded = server
        .agent()
        .registry
        .flush_shadows(Duration::from_secs(5));
    if unrecorded > 0 {
        log.line(&format!(
            "gateway: {unrecorded} shadow hook firing(s) still running at exit; not recorded"
        ));
    }
    // Streaming observers read their queues on threads of their own: what the last turns
    // handed them is delivered before the gateway exits, within a bound.
    for note in server.agent().streams.exit_notes(Duration::from_secs(5)) {
        log.line(&format!("gateway: {note}"));
    }
    let still = hermes_host::shell::background::wait_idle(Duration::from_secs(5));
    if still > 0 {
        log.line(&format!(
            "gateway: {still} async hook(s) still running at exit; not waited for (each ends at its timeout)"
        ));
    }
    let mut line = format!(
        "gateway: stopped; {} session(s) finalized",
        summary.finalized
    );
    if summary.grace_expired {
        line.push_str(&format!(
            ", running turns interrupted after the {} s grace",
            limits.shutdown_grace.as_secs_f64()
        ));
    }
    if summary.dropped_messages > 0 {
        line.push_str(&format!(
            ", {} queued message(s) dropped",
            summary.dropped_messages
        ));
    }
    log.line(&line);
    if let Some(publisher) = &publisher {
        // What is still queued goes to the broker, or to the spool for the next run.
        publisher.shutdown(runtime.handle(), Duration::from_secs(10));
        let c = event_counts(publisher);
        log.line(&format!(
            "gateway: events: {} published, {} spooled, {} dropped, {} duplicate(s) the broker had already",
            c.published, c.spooled, c.dropped, c.duplicates
        ));
    }
    // Tasks still waiting on idle clients end with the runtime; nothing of theirs is
    // unwritten (the router flushed or gave up above).
    drop(_inside);
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(ExitStatus::Success)
}
