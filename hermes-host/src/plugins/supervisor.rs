//! The supervision every out-of-process plugin shares, whatever runs in its worker (an
//! isolated native library, or a Python plugin): starting the worker on a socket pair,
//! restarting it with a backoff after a crash, disabling the plugin after
//! [`MAX_CRASHES`] crashes in [`CRASH_WINDOW`], naming the plugin, hook and cause in every
//! message, and the answer in place of a dead worker's (none, or a block for a
//! `fail_closed` guard on `pre_tool_call`).
//!
//! What crosses the socket is the worker kind's business: [`Supervisor::exchange`] hands
//! the running worker to a closure, and whatever that closure reports as an error is a
//! crash.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hermes_hooks_abi::core::Reply;

use crate::process::{CrashRecord, Group};

/// Default seconds an out-of-process callback may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Crashes within [`CRASH_WINDOW`] that disable a plugin.
pub const MAX_CRASHES: usize = 5;

/// The window [`MAX_CRASHES`] counts in.
pub const CRASH_WINDOW: Duration = Duration::from_secs(60);

/// A worker process: its process group, and what the kind keeps to talk to it.
pub(crate) trait Worker: Send {
    /// The worker's process group.
    fn group(&mut self) -> &mut Group;
}

/// One plugin's worker under supervision.
pub(crate) struct Supervisor<W> {
    /// The plugin's name, for every message.
    pub(crate) name: String,
    /// How long one exchange may take.
    pub(crate) timeout: Duration,
    /// The worker's address-space limit, to explain an abort.
    pub(crate) memory_limit: Option<u64>,
    /// Block `pre_tool_call` when the worker cannot answer.
    pub(crate) fail_closed: bool,
    state: Mutex<State<W>>,
}

struct State<W> {
    worker: Option<W>,
    crashes: CrashRecord,
    restarts: u64,
    last_crash: Option<String>,
}

/// Why an exchange with the worker gave no answer; the firing goes on with
/// [`Supervisor::fallback`].
pub(crate) struct NoAnswer(pub(crate) String);

impl<W: Worker> Supervisor<W> {
    /// A supervisor for plugin `name`, with `worker` already started (or `None`, to start
    /// one at the first exchange).
    pub(crate) fn new(
        name: &str,
        timeout: Duration,
        memory_limit: Option<u64>,
        fail_closed: bool,
        worker: Option<W>,
    ) -> Supervisor<W> {
        Supervisor {
            name: name.to_string(),
            timeout,
            memory_limit,
            fail_closed,
            state: Mutex::new(State {
                worker,
                crashes: CrashRecord::new(CRASH_WINDOW, Duration::from_millis(100), MAX_CRASHES),
                restarts: 0,
                last_crash: None,
            }),
        }
    }

    /// The running worker's pid, how often it was restarted, and the last crash's cause.
    pub(crate) fn status(&self) -> (Option<u32>, u64, Option<String>) {
        match self.state.lock() {
            Ok(mut s) => {
                let pid = s.worker.as_mut().map(|w| w.group().id());
                (pid, s.restarts, s.last_crash.clone())
            }
            Err(_) => (None, 0, None),
        }
    }

    /// Stops the running worker, if any; the next exchange starts a new one (running the
    /// plugin's current code). Not a crash.
    pub(crate) fn restart(&self) {
        if let Ok(mut state) = self.state.lock() {
            if let Some(worker) = state.worker.take() {
                drop(worker);
                state.restarts += 1;
            }
        }
    }

    /// Runs `exchange` with the running worker, starting one with `spawn` first when there
    /// is none (unless the plugin is disabled or its backoff has not passed). When
    /// `exchange` fails, the worker is killed, the crash is logged (naming the plugin,
    /// `hook` and `label`) and recorded.
    ///
    /// `exchange` reports a hang as an error starting with `killed after timeout`, and a
    /// worker that broke the protocol as one starting with `sent`; any other error means
    /// the worker died, and its exit status says how.
    pub(crate) fn exchange<T>(
        &self,
        hook: &str,
        label: &str,
        spawn: impl FnOnce() -> Result<W, String>,
        exchange: impl FnOnce(&mut W) -> Result<T, String>,
    ) -> Result<T, NoAnswer> {
        let Ok(mut state) = self.state.lock() else {
            return Err(NoAnswer("its supervisor's lock is poisoned".into()));
        };
        if state.crashes.exhausted() {
            return Err(NoAnswer("it is disabled after repeated crashes".into()));
        }
        if state.worker.is_none() {
            if !state.crashes.may_start(Instant::now()) {
                let why = state.last_crash.clone().unwrap_or_default();
                return Err(NoAnswer(format!("its worker is restarting ({why})")));
            }
            state.restarts += 1;
            match spawn() {
                Ok(worker) => state.worker = Some(worker),
                Err(why) => {
                    self.crashed(&mut state, hook, label, why.clone());
                    return Err(NoAnswer(why));
                }
            }
        }
        let Some(worker) = state.worker.as_mut() else {
            return Err(NoAnswer("it has no worker".into()));
        };
        match exchange(worker) {
            Ok(answer) => Ok(answer),
            Err(why) => {
                let Some(mut worker) = state.worker.take() else {
                    return Err(NoAnswer(why));
                };
                let group = worker.group();
                let cause = if why.starts_with("killed after timeout") {
                    let _ = crate::process::kill_group(group.id());
                    why
                } else if why.starts_with("sent") {
                    let _ = crate::process::kill_group(group.id());
                    format!("its worker {why}")
                } else {
                    death_cause(group, self.memory_limit)
                };
                drop(worker);
                self.crashed(&mut state, hook, label, cause.clone());
                Err(NoAnswer(cause))
            }
        }
    }

    fn crashed(&self, state: &mut State<W>, hook: &str, label: &str, cause: String) {
        state.crashes.record(Instant::now());
        state.last_crash = Some(cause.clone());
        tracing::warn!(
            "Plugin '{}' crashed in hook '{hook}' (callback {label}): {cause}; its worker restarts at the next firing",
            self.name
        );
        if state.crashes.exhausted() {
            tracing::warn!(
                "Plugin '{}' crashed {MAX_CRASHES} times within {}s and is disabled for the rest of this run; fix it, then start the agent again (`hermes plugins fire` reproduces a crash)",
                self.name,
                CRASH_WINDOW.as_secs()
            );
        }
    }

    /// The answer in place of a dead or hung worker's: none, or a block when the plugin is
    /// fail-closed and the hook is `pre_tool_call`.
    pub(crate) fn fallback(&self, hook: &str, why: &str) -> Option<Reply> {
        fallback(&self.name, self.fail_closed, hook, why)
    }
}

/// Spawns `cmd` as a worker whose fd 3 is its end of a new socket pair, in a process group
/// of its own, killed when this process dies. Returns the group and the host's end.
///
/// # Errors
///
/// The socket pair or the spawn failed; the message names `program`.
pub(crate) fn spawn_on_socket(
    cmd: &mut Command,
    program: &std::path::Path,
) -> Result<(Group, UnixStream), String> {
    let (host_end, worker_end) =
        UnixStream::pair().map_err(|e| format!("cannot create a socket pair: {e}"))?;
    let worker_fd: OwnedFd = worker_end.into();
    let raw = worker_fd.as_raw_fd();
    // SAFETY: only async-signal-safe calls between fork and exec: dup2, fcntl, prctl.
    unsafe {
        cmd.pre_exec(move || {
            inherit_as(raw, 3)?;
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let group = Group::spawn(cmd)
        .map_err(|e| format!("cannot start the plugin worker {}: {e}", program.display()))?;
    drop(worker_fd);
    Ok((group, host_end))
}

/// The answer in place of plugin `name`'s dead or hung worker's: none, or a block when it
/// is `fail_closed` and the hook is `pre_tool_call`; `why` says what happened.
pub(crate) fn fallback(name: &str, fail_closed: bool, hook: &str, why: &str) -> Option<Reply> {
    (fail_closed && hook == "pre_tool_call").then(|| {
        Reply::new(
            "block",
            format!("blocked: plugin '{name}' guards this tool call and is not answering ({why})"),
        )
    })
}

/// Between fork and exec: makes descriptor `raw` the child's `target`, kept across exec.
/// Only async-signal-safe calls (dup2, fcntl).
pub(crate) fn inherit_as(
    raw: std::os::fd::RawFd,
    target: std::os::fd::RawFd,
) -> std::io::Result<()> {
    // SAFETY: dup2 and fcntl on descriptors of this process; no allocation, no locks.
    unsafe {
        if libc::dup2(raw, target) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let flags = libc::fcntl(target, libc::F_GETFD);
        libc::fcntl(target, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
    }
    Ok(())
}

/// Why a worker is gone: its exit status or signal, waited for at most a second.
pub(crate) fn death_cause(group: &mut Group, memory_limit: Option<u64>) -> String {
    let status = group.wait_until(Instant::now() + Duration::from_secs(1));
    match status {
        Some(status) => describe(status, memory_limit),
        None => "its worker stopped answering and was killed".into(),
    }
}

fn describe(status: ExitStatus, memory_limit: Option<u64>) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => {
            let name = match signal {
                libc::SIGSEGV => "SIGSEGV",
                libc::SIGABRT => "SIGABRT",
                libc::SIGBUS => "SIGBUS",
                libc::SIGILL => "SIGILL",
                libc::SIGFPE => "SIGFPE",
                libc::SIGKILL => "SIGKILL",
                _ => "signal",
            };
            let oom = match (signal, memory_limit) {
                (libc::SIGABRT, Some(limit)) => {
                    format!("; out of memory? its memory_limit is {} MiB", limit >> 20)
                }
                _ => String::new(),
            };
            format!("{name} (signal {signal}){oom}")
        }
        (None, None) => format!("{status}"),
    }
}

/// `1 s`, `0.5 s`.
pub(crate) fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s} s")
    }
}
