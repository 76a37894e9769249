//! Child processes: the one module that spawns, feeds, drains, times out and reaps them.
//!
//! Every child the host supervises (shell hooks, gateway handlers, the Python worker, the
//! agent's terminal tool, the cargo build of `plugins install`) starts here, so the rules
//! below hold for all of them and are tested once:
//!
//! - **A process group of its own** ([`Group`]), so that a timeout or an interrupt ends the
//!   child *and* everything it started with one `SIGKILL` to the group ([`kill_group`]).
//!   An interactive child that the user should be able to stop with Ctrl-C together with
//!   hermes (the cargo build) stays in hermes's group instead ([`Run::shared_group`]); it is
//!   then killed alone.
//! - **Stdin fed without blocking**: [`run`] writes the input while it reads the output and
//!   closes stdin as soon as the input is written, so a child can read to end of file. A
//!   child that exits without reading is fine: the broken pipe is ignored.
//! - **Bounded capture**: stdout and stderr, when captured, are read concurrently with the
//!   writing (no deadlock on a full pipe) and kept up to a cap each; the rest is read and
//!   dropped, never buffered, and counted.
//! - **Timeouts with group kill**: a run is over when the child has exited *and* every
//!   captured pipe is closed. If that has not happened by the timeout (or when an interrupt
//!   flag is raised), the group is killed and the run waits at most [`Run::grace`] more for
//!   the pipes to close (a process that left the group with `setsid` could keep them open),
//!   then returns regardless.
//! - **Reaping**: a killed child is always waited for, in the background if it does not go
//!   at once, so no zombie is left behind; a [`Group`] that is dropped kills and reaps.
//!
//! # Running a child to completion
//!
//! ```
//! use std::process::Command;
//! use std::time::Duration;
//! use hermes_host::process::{self, Ended, Run};
//!
//! let mut cmd = Command::new("/bin/sh");
//! cmd.args(["-c", "cat; echo oops >&2; exit 3"]);
//! let out = process::run(&mut cmd, &Run::new().input(b"hello").capture(1024).timeout(Duration::from_secs(5)))?;
//! assert_eq!(out.ended, Ended::Completed);
//! assert_eq!(out.status.and_then(|s| s.code()), Some(3));
//! assert_eq!((out.stdout.bytes.as_slice(), out.stderr.bytes.as_slice()), (&b"hello"[..], &b"oops\n"[..]));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Caveats
//!
//! * A child that exits while a background child keeps running *without* holding a captured
//!   pipe is not waited for and not killed (unless [`Run::kill_group_on_exit`] is set): the
//!   daemon outlives the hook, as it would in a shell.
//! * The group is killed by its id, which is the leader's process id. The kernel does not
//!   reuse a process id while a group of that id still has members, so the kill can only
//!   reach processes the child started.
//! * Waiting uses `poll(2)` on the pipes and a `pidfd` for the process (Linux 5.3+); on
//!   kernels without pidfds the exit is detected by polling with a short, growing interval.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Kills the process group `pid` leads (a child spawned with `process_group(0)` and
/// everything it started). A group that is already gone is not an error.
///
/// # Errors
///
/// `InvalidInput` for a pid out of range; the OS error when the signal cannot be sent (for
/// example `EPERM`).
///
/// ```
/// use std::os::unix::process::CommandExt;
/// let child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
/// hermes_host::process::kill_group(child.id()).unwrap();
/// # let mut child = child; let _ = child.wait();
/// ```
pub fn kill_group(pid: u32) -> io::Result<()> {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "process id out of range",
        ));
    };
    // SAFETY: killpg only sends a signal; an invalid or vanished group yields ESRCH.
    if unsafe { libc::killpg(pgid, libc::SIGKILL) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(err)
    }
}

/// The host's stderr, as a child's stdout or stderr: what a child prints lands in the
/// host's log and never in a pipe the host reads (`Stdio::null()` if it cannot be shared).
pub fn stderr_stdio() -> Stdio {
    use std::os::fd::AsFd as _;
    let _ = io::stderr().flush();
    match io::stderr().as_fd().try_clone_to_owned() {
        Ok(fd) => Stdio::from(fd),
        Err(_) => Stdio::null(),
    }
}

/// `exited with status 3` / `was killed by signal 9`.
///
/// ```
/// use std::os::unix::process::ExitStatusExt;
/// let status = std::process::ExitStatus::from_raw(3 << 8);
/// assert_eq!(hermes_host::process::describe_status(status), "exited with status 3");
/// ```
pub fn describe_status(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => format!("ended with {status}"),
    }
}

/// The crashes of a restartable child within a window: when it may start again (an
/// exponential backoff) and whether it crashed too often to be started again this run.
///
/// ```
/// use std::time::{Duration, Instant};
/// let mut crashes = hermes_host::process::CrashRecord::new(Duration::from_secs(60), Duration::from_millis(50), 5);
/// let now = Instant::now();
/// for _ in 0..4 { crashes.record(now); }
/// assert!(!crashes.exhausted());
/// crashes.record(now);
/// assert!(crashes.exhausted() && !crashes.may_start(now));
/// ```
#[derive(Clone, Debug)]
pub struct CrashRecord {
    times: std::collections::VecDeque<Instant>,
    window: Duration,
    base: Duration,
    limit: usize,
    not_before: Option<Instant>,
}

impl CrashRecord {
    /// No crashes yet; `limit` crashes within `window` exhaust it; the first restart waits
    /// `base`, each later one twice as long (up to 64 times `base`).
    pub fn new(window: Duration, base: Duration, limit: usize) -> CrashRecord {
        CrashRecord {
            times: std::collections::VecDeque::new(),
            window,
            base,
            limit,
            not_before: None,
        }
    }

    /// Records a crash at `now`.
    pub fn record(&mut self, now: Instant) {
        self.times.push_back(now);
        while self
            .times
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.window)
        {
            self.times.pop_front();
        }
        let exponent = self.times.len().min(6) as u32;
        self.not_before = Some(now + self.base * 2u32.pow(exponent));
    }

    /// Whether the child crashed `limit` times within the window.
    pub fn exhausted(&self) -> bool {
        self.times.len() >= self.limit
    }

    /// Whether the backoff since the last crash has passed (and it is not exhausted).
    pub fn may_start(&self, now: Instant) -> bool {
        !self.exhausted() && self.not_before.is_none_or(|t| now >= t)
    }

    /// Crashes within the window.
    pub fn count(&self) -> usize {
        self.times.len()
    }
}

// ---------------------------------------------------------------------------------------
// A long-lived child

/// A child process leading a process group of its own, killed with its group and reaped
/// when dropped before it exited. For children that live across many requests (the Python
/// worker of a gateway hook); one-shot children go through [`run`].
///
/// ```
/// use std::process::{Command, Stdio};
/// use std::time::{Duration, Instant};
/// let mut group = hermes_host::process::Group::spawn(Command::new("/bin/cat").stdin(Stdio::piped()))?;
/// drop(group.take_stdin()); // cat sees end of file and exits
/// let status = group.wait_until(Instant::now() + Duration::from_secs(5));
/// assert!(status.is_some_and(|s| s.success()));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Group {
    child: Child,
    status: Option<ExitStatus>,
    shared: bool,
    /// A reaper thread owns the pid now (see `reap_soon`).
    detached: bool,
}

impl Group {
    /// Spawns `cmd` as the leader of a new process group. The caller sets up stdio.
    ///
    /// # Errors
    ///
    /// The spawn error (`NotFound` for a missing program, `PermissionDenied` for one that is
    /// not executable, ...).
    pub fn spawn(cmd: &mut Command) -> io::Result<Group> {
        Group::spawn_in(cmd, false)
    }

    fn spawn_in(cmd: &mut Command, shared: bool) -> io::Result<Group> {
        if !shared {
            cmd.process_group(0);
        }
        Ok(Group {
            child: cmd.spawn()?,
            status: None,
            shared,
            detached: false,
        })
    }

    /// The leader's process id, which is also the group's id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The write end of the child's stdin, when it was piped and not taken yet.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// The read end of the child's stdout, when it was piped and not taken yet.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// The read end of the child's stderr, when it was piped and not taken yet.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// The exit status, once the leader has exited (reaping it); `None` while it runs.
    ///
    /// # Errors
    ///
    /// The `waitpid` error, which only happens when something else reaped the child.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() && !self.detached {
            self.status = self.child.try_wait()?;
        }
        Ok(self.status)
    }

    /// Whether the leader has exited, without reaping it: its id then still names the
    /// group, so a kill after this cannot reach an unrelated process.
    fn exited_unreaped(&self) -> bool {
        if self.detached {
            return false;
        }
        let pid: libc::id_t = self.child.id();
        // SAFETY: an all-zero siginfo_t is a valid value; waitid writes into it and with
        // WNOWAIT leaves the child waitable.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child with a valid out pointer.
        let rc = unsafe {
            libc::waitid(
                libc::P_PID,
                pid,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: the field is set by a successful waitid; 0 means "still running".
        rc == 0 && unsafe { info.si_pid() } != 0
    }

    /// Kills the group (or the child alone, for a shared group).
    ///
    /// A reaped leader's id still names its group while any member is left (the kernel does
    /// not hand out a pid that is in use as a process group id), so the group is killed even
    /// then: a background child holding a captured pipe must go too.
    fn signal_kill(&mut self) -> io::Result<()> {
        if self.detached {
            return Ok(());
        }
        if self.shared {
            if self.status.is_some() {
                return Ok(());
            }
            self.child.kill()
        } else {
            kill_group(self.child.id())
        }
    }

    /// Kills the group and reaps the leader, waiting for it in the background if it does
    /// not go within a moment (a process in uninterruptible sleep).
    pub fn kill(mut self) {
        let _ = self.signal_kill();
        self.reap_soon();
    }

    /// Waits for the leader to exit until `deadline`; past it, kills the group and returns
    /// `None`.
    pub fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        let mut pause = Duration::from_micros(200);
        loop {
            match self.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(pause.min(deadline - Instant::now()));
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
                Ok(None) | Err(_) => {
                    let _ = self.signal_kill();
                    return None;
                }
            }
        }
    }

    /// Reaps the leader: at once when it is gone, else from a thread, so neither a zombie
    /// is left nor the caller held.
    fn reap_soon(&mut self) {
        if self.status.is_some() || self.detached {
            return;
        }
        for _ in 0..50 {
            match self.child.try_wait() {
                Ok(None) => std::thread::sleep(Duration::from_millis(1)),
                Ok(Some(status)) => {
                    self.status = Some(status);
                    return;
                }
                Err(_) => return,
            }
        }
        // Still there (uninterruptible sleep): a thread waits for it by pid. From here on
        // the pid may be reaped at any moment, so this group is never signalled again.
        let Ok(pid) = libc::pid_t::try_from(self.child.id()) else {
            return;
        };
        self.detached = true;
        let _ = std::thread::Builder::new()
            .name("hermes-reaper".into())
            .spawn(move || {
                let mut status = 0;
                // SAFETY: waitpid on our own child with a valid out pointer; nothing else
                // waits for it once `detached` is set.
                unsafe { libc::waitpid(pid, &mut status, 0) };
            });
    }
}

impl Drop for Group {
    /// A child nobody waited for is killed with its group and reaped. When the leader has
    /// exited already, what it started in its group (a plugin's `subprocess.Popen`) is
    /// killed too: nothing of a group outlives the host letting it go.
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        match self.try_wait() {
            Ok(None) => {
                let _ = self.signal_kill();
                self.reap_soon();
            }
            Ok(Some(_)) if !self.shared && !self.detached => {
                // The leader is reaped, so a process of that number now would be another
                // one's (a reused pid), whose group is not ours; without one, the number
                // cannot be reused while the group has members, and they are ours.
                let pid = self.child.id();
                if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = kill_group(pid);
                }
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------
// A one-shot run

/// How [`run`] runs a child: what it feeds, what it captures, when it gives up.
///
/// Streams that are not captured keep whatever the `Command` was given (`Stdio::null()`,
/// `Stdio::inherit()` or a file), so a child can write straight to the host's stderr.
#[derive(Clone, Copy, Debug)]
pub struct Run<'a> {
    input: Option<&'a [u8]>,
    stdout_cap: Option<usize>,
    stderr_cap: Option<usize>,
    timeout: Option<Duration>,
    grace: Duration,
    interrupt: Option<&'a AtomicBool>,
    pid_slot: Option<&'a AtomicU32>,
    kill_group_on_exit: bool,
    exit_grace: Option<Duration>,
    shared_group: bool,
}

impl Default for Run<'_> {
    fn default() -> Self {
        Run::new()
    }
}

/// How long a run waits for its pipes to close after it killed the group, by default.
pub const KILL_GRACE: Duration = Duration::from_secs(1);

impl<'a> Run<'a> {
    /// No input (stdin as the `Command` has it), nothing captured, no timeout, a grace of
    /// [`KILL_GRACE`], an own process group.
    pub const fn new() -> Run<'a> {
        Run {
            input: None,
            stdout_cap: None,
            stderr_cap: None,
            timeout: None,
            grace: KILL_GRACE,
            interrupt: None,
            pid_slot: None,
            kill_group_on_exit: false,
            exit_grace: None,
            shared_group: false,
        }
    }

    /// Pipes stdin and writes `input` to it, then closes it (at once when `input` is empty).
    pub const fn input(mut self, input: &'a [u8]) -> Self {
        self.input = Some(input);
        self
    }

    /// Captures both stdout and stderr, keeping up to `cap` bytes of each.
    pub const fn capture(self, cap: usize) -> Self {
        self.capture_stdout(cap).capture_stderr(cap)
    }

    /// Captures stdout, keeping up to `cap` bytes.
    pub const fn capture_stdout(mut self, cap: usize) -> Self {
        self.stdout_cap = Some(cap);
        self
    }

    /// Captures stderr, keeping up to `cap` bytes.
    pub const fn capture_stderr(mut self, cap: usize) -> Self {
        self.stderr_cap = Some(cap);
        self
    }

    /// Kills the group when the run is not over `timeout` after the spawn.
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// How long to wait for the pipes to close after a kill.
    pub const fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Kills the group as soon as `flag` is set (checked every few milliseconds).
    pub const fn interrupt(mut self, flag: &'a AtomicBool) -> Self {
        self.interrupt = Some(flag);
        self
    }

    /// Stores the child's pid in `slot` while it runs (0 before and after), so another
    /// thread can kill the group, for example at shutdown.
    pub const fn pid_slot(mut self, slot: &'a AtomicU32) -> Self {
        self.pid_slot = Some(slot);
        self
    }

    /// Kills the group as soon as the leader exits: background children it left holding
    /// the captured pipes end with it instead of holding the run to its timeout (the
    /// terminal tool: a command's output is complete when the command is).
    pub const fn kill_group_on_exit(mut self) -> Self {
        self.kill_group_on_exit = true;
        self
    }

    /// Once the leader has exited, waits at most `grace` for the captured pipes to close;
    /// then kills the group and completes with what was read. A hook that printed its
    /// answer and exited, leaving a background child holding stdout, is decided on what it
    /// printed instead of timing out (a shell hook).
    pub const fn after_exit(mut self, grace: Duration) -> Self {
        self.exit_grace = Some(grace);
        self
    }

    /// Keeps the child in hermes's own process group, so Ctrl-C in the terminal reaches it
    /// with hermes (an interactive build). A timeout or interrupt then kills the child
    /// alone.
    pub const fn shared_group(mut self) -> Self {
        self.shared_group = true;
        self
    }
}

/// What a captured stream held.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Captured {
    /// The bytes kept, at most the cap.
    pub bytes: Vec<u8>,
    /// The bytes read beyond the cap and dropped.
    pub dropped: u64,
}

impl Captured {
    /// The bytes as text, invalid UTF-8 becoming U+FFFD.
    pub fn lossy(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The child exited and its captured pipes closed before any deadline.
    Completed,
    /// The timeout passed and the group was killed; `settled` tells whether everything
    /// closed within the grace period afterwards.
    TimedOut {
        /// Whether the pipes closed within the grace period.
        settled: bool,
    },
    /// The interrupt flag was raised and the group was killed.
    Interrupted {
        /// Whether the pipes closed within the grace period.
        settled: bool,
    },
    /// Waiting failed (a `poll` error); the group was killed as for a timeout.
    Failed(String),
}

/// What [`run`] saw.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// How the run ended.
    pub ended: Ended,
    /// The exit status, when the leader exited on its own before the run ended (with
    /// [`Ended::Completed`]); `None` when it was killed.
    pub status: Option<ExitStatus>,
    /// Captured stdout (empty when not captured).
    pub stdout: Captured,
    /// Captured stderr (empty when not captured).
    pub stderr: Captured,
    /// From just before the spawn to the end of the run.
    pub elapsed: Duration,
}

/// Spawns `cmd` and supervises it to the end as `how` says. See the
/// [module documentation](self) for the rules.
///
/// # Errors
///
/// Only when the child cannot be started (or its pipes set up); everything after the spawn,
/// timeouts included, is an [`Outcome`].
pub fn run(cmd: &mut Command, how: &Run<'_>) -> io::Result<Outcome> {
    let started = Instant::now();
    if how.input.is_some() {
        cmd.stdin(Stdio::piped());
    }
    if how.stdout_cap.is_some() {
        cmd.stdout(Stdio::piped());
    }
    if how.stderr_cap.is_some() {
        cmd.stderr(Stdio::piped());
    }
    let group = Group::spawn_in(cmd, how.shared_group)?;
    if let Some(slot) = how.pid_slot {
        slot.store(group.id(), Ordering::Release);
    }
    let mut running = Running::new(group, how)?;
    let deadline = how.timeout.map(|t| started + t);
    let ended = supervise(&mut running, deadline, how.grace);
    if let Some(slot) = how.pid_slot {
        slot.store(0, Ordering::Release);
    }
    Ok(running.finish(ended, started))
}

/// What one wait for progress ended with.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Progress {
    /// The run is complete.
    Complete,
    /// The wait's deadline passed.
    Deadline,
    /// The interrupt flag is set.
    Interrupted,
}

/// The seam between the timeout policy and real processes: [`supervise`] decides when to
/// kill, a `Supervised` does the waiting and the killing. Unit tests drive `supervise` with
/// a mock, without processes or real waiting.
pub(crate) trait Supervised {
    /// Makes progress (feeds stdin, reads output, notices the exit) until the run is
    /// complete, `until` has passed, or an interrupt was raised.
    fn pump(&mut self, until: Option<Instant>) -> io::Result<Progress>;
    /// Kills the whole process group; from then on `pump` ignores the interrupt flag.
    fn kill(&mut self) -> io::Result<()>;
}

/// The timeout policy: wait for completion until `deadline`; past it (or at an interrupt),
/// kill the group once and wait at most `grace` more for the run to settle.
pub(crate) fn supervise<S: Supervised>(
    run: &mut S,
    deadline: Option<Instant>,
    grace: Duration,
) -> Ended {
    let stopped = match run.pump(deadline) {
        Ok(Progress::Complete) => return Ended::Completed,
        Ok(progress) => Ok(progress),
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = run.kill() {
        tracing::debug!("killing a child's process group failed: {e}");
    }
    // A `Supervised` stops reporting the interrupt once killed, so this waits out the grace.
    let settled = matches!(
        run.pump(Some(Instant::now() + grace)),
        Ok(Progress::Complete)
    );
    match stopped {
        Err(error) => Ended::Failed(error),
        Ok(Progress::Interrupted) => Ended::Interrupted { settled },
        Ok(_) => Ended::TimedOut { settled },
    }
}

/// One output pipe being read into a capped buffer.
struct Capture {
    pipe: Option<File>,
    cap: usize,
    out: Captured,
}

impl Capture {
    fn new(pipe: Option<OwnedFd>, cap: usize) -> io::Result<Capture> {
        let pipe = pipe.map(File::from);
        if let Some(p) = &pipe {
            set_nonblocking(p.as_raw_fd())?;
        }
        Ok(Capture {
            pipe,
            cap,
            out: Captured::default(),
        })
    }

    /// Reads what is available; closes the pipe at end of file.
    fn read_available(&mut self, scratch: &mut [u8]) {
        let Some(pipe) = &mut self.pipe else { return };
        // A bounded number of reads per wake-up, so a flood cannot starve the deadline check.
        for _ in 0..16 {
            match pipe.read(scratch) {
                Ok(0) => {
                    self.pipe = None;
                    return;
                }
                Ok(n) => {
                    let keep = n.min(self.cap.saturating_sub(self.out.bytes.len()));
                    self.out.bytes.extend_from_slice(&scratch[..keep]);
                    self.out.dropped += (n - keep) as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.pipe = None;
                    return;
                }
            }
        }
    }
}

/// A spawned child being fed and drained.
struct Running<'a> {
    group: Group,
    pidfd: Option<OwnedFd>,
    stdin: Option<File>,
    input: &'a [u8],
    written: usize,
    stdout: Capture,
    stderr: Capture,
    scratch: Vec<u8>,
    interrupt: Option<&'a AtomicBool>,
    kill_group_on_exit: bool,
    exit_grace: Option<Duration>,
    /// When the leader was seen to have exited.
    exited_at: Option<Instant>,
    /// Polling interval while no pidfd tells us about the exit.
    tick: Duration,
}

impl<'a> Running<'a> {
    fn new(mut group: Group, how: &Run<'a>) -> io::Result<Running<'a>> {
        let stdin = group.take_stdin().map(OwnedFd::from).map(File::from);
        let stdout = group.take_stdout().map(OwnedFd::from);
        let stderr = group.take_stderr().map(OwnedFd::from);
        // On an error here the group is dropped, which kills and reaps it.
        if let Some(s) = &stdin {
            set_nonblocking(s.as_raw_fd())?;
        }
        let stdout = Capture::new(stdout, how.stdout_cap.unwrap_or(0))?;
        let stderr = Capture::new(stderr, how.stderr_cap.unwrap_or(0))?;
        let input = how.input.unwrap_or_default();
        let pidfd = pidfd_open(group.id());
        let mut running = Running {
            group,
            pidfd,
            stdin: if input.is_empty() { None } else { stdin },
            input,
            written: 0,
            stdout,
            stderr,
            scratch: vec![0; 64 * 1024],
            interrupt: how.interrupt,
            kill_group_on_exit: how.kill_group_on_exit,
            exit_grace: how.exit_grace,
            exited_at: None,
            tick: Duration::from_micros(500),
        };
        running.write_available();
        Ok(running)
    }

    fn complete(&self) -> bool {
        self.group.status.is_some() && self.stdout.pipe.is_none() && self.stderr.pipe.is_none()
    }

    /// Writes as much of the input as the pipe takes; closes stdin when done or when the
    /// reader has gone (a child that never reads its stdin is fine).
    fn write_available(&mut self) {
        let Some(stdin) = &mut self.stdin else { return };
        loop {
            match stdin.write(&self.input[self.written..]) {
                Ok(n) => {
                    self.written += n;
                    if self.written >= self.input.len() {
                        self.stdin = None;
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.stdin = None; // EPIPE: the child exited or closed its stdin
                    return;
                }
            }
        }
    }

    fn check_exit(&mut self) {
        if self.group.status.is_some() {
            return;
        }
        if self.kill_group_on_exit && self.group.exited_unreaped() {
            // The leader is a zombie, so its id still names the group: kill what it left.
            let _ = self.group.signal_kill();
        }
        if let Ok(Some(_)) = self.group.try_wait() {
            self.pidfd = None;
            self.exited_at = Some(Instant::now());
            // The leader is gone: stdin has no reader left.
            self.stdin = None;
        }
    }

    fn finish(mut self, ended: Ended, started: Instant) -> Outcome {
        let status = match ended {
            Ended::Completed => self.group.status,
            _ => None,
        };
        // Close our ends of the pipes (a process outside the group may still hold the other
        // ends) and make sure a killed leader is reaped, in the background if need be.
        self.stdin = None;
        self.stdout.pipe = None;
        self.stderr.pipe = None;
        self.check_exit();
        self.group.reap_soon();
        Outcome {
            ended,
            status,
            stdout: std::mem::take(&mut self.stdout.out),
            stderr: std::mem::take(&mut self.stderr.out),
            elapsed: started.elapsed(),
        }
    }
}

impl Supervised for Running<'_> {
    fn pump(&mut self, until: Option<Instant>) -> io::Result<Progress> {
        loop {
            self.check_exit();
            if self.complete() {
                return Ok(Progress::Complete);
            }
            if self.interrupt.is_some_and(|f| f.load(Ordering::SeqCst)) {
                return Ok(Progress::Interrupted);
            }
            let now = Instant::now();
            // The leader exited and its grace for the pipes is over: what was printed is
            // the answer, and whatever still holds the pipes goes with the group.
            let grace_over = self.exit_grace.zip(self.exited_at).map(|(g, at)| at + g);
            if grace_over.is_some_and(|over| now >= over) {
                let _ = self.group.signal_kill();
                self.stdout.read_available(&mut self.scratch);
                self.stderr.read_available(&mut self.scratch);
                self.stdout.pipe = None;
                self.stderr.pipe = None;
                return Ok(Progress::Complete);
            }
            if until.is_some_and(|until| now >= until) {
                return Ok(Progress::Deadline);
            }
            let mut wait = until.map_or(Duration::from_secs(3600), |until| until - now);
            if let Some(over) = grace_over {
                wait = wait.min(over - now);
            }
            if self.interrupt.is_some() || self.kill_group_on_exit {
                wait = wait.min(Duration::from_millis(10));
            }
            let mut fds: Vec<libc::pollfd> = Vec::with_capacity(4);
            let mut slots = [usize::MAX; 4]; // stdin, stdout, stderr, pidfd
            let mut add = |slot: usize, fd: RawFd, events: libc::c_short| {
                slots[slot] = fds.len();
                fds.push(libc::pollfd {
                    fd,
                    events,
                    revents: 0,
                });
            };
            if let Some(f) = &self.stdin {
                add(0, f.as_raw_fd(), libc::POLLOUT);
            }
            if let Some(f) = &self.stdout.pipe {
                add(1, f.as_raw_fd(), libc::POLLIN);
            }
            if let Some(f) = &self.stderr.pipe {
                add(2, f.as_raw_fd(), libc::POLLIN);
            }
            match (&self.pidfd, self.group.status) {
                (Some(fd), None) => add(3, fd.as_raw_fd(), libc::POLLIN),
                (None, None) => {
                    wait = wait.min(self.tick);
                    self.tick = (self.tick * 2).min(Duration::from_millis(20));
                }
                (_, Some(_)) => {}
            }
            let millis = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
            // SAFETY: `fds` is a valid, initialised array of `fds.len()` pollfd structs that
            // outlives the call; every fd in it is owned by `self` and open.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
            if n < 0 {
                let err = io::Error::last_os_error();
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(err);
            }
            let ready = |slot: usize| slots[slot] != usize::MAX && fds[slots[slot]].revents != 0;
            if ready(0) {
                self.write_available();
            }
            if ready(1) {
                self.stdout.read_available(&mut self.scratch);
            }
            if ready(2) {
                self.stderr.read_available(&mut self.scratch);
            }
        }
    }

    fn kill(&mut self) -> io::Result<()> {
        // The flag stays raised; the grace after the kill must still be waited for.
        self.interrupt = None;
        self.group.signal_kill()
    }
}

fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on an fd we own; F_GETFL/F_SETFL do not touch memory.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A pidfd for `pid` (readable once the process exits), or `None` where the kernel has none.
fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    // SAFETY: the pidfd_open syscall takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0 as libc::c_long) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the syscall returned a fresh fd that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run that completes on its n-th pump (or never) and counts kills.
    struct Mock {
        pumps: usize,
        completes_on_pump: Option<usize>,
        interrupted: bool,
        kills: usize,
        kill_fails: bool,
        pump_fails: bool,
    }

    impl Mock {
        fn new(completes_on_pump: Option<usize>) -> Mock {
            Mock {
                pumps: 0,
                completes_on_pump,
                interrupted: false,
                kills: 0,
                kill_fails: false,
                pump_fails: false,
            }
        }
    }

    impl Supervised for Mock {
        fn pump(&mut self, _until: Option<Instant>) -> io::Result<Progress> {
            self.pumps += 1;
            if self.pump_fails && self.pumps == 1 {
                return Err(io::Error::other("poll broke"));
            }
            if self.completes_on_pump.is_some_and(|n| self.pumps >= n) {
                Ok(Progress::Complete)
            } else if self.interrupted {
                Ok(Progress::Interrupted)
            } else {
                Ok(Progress::Deadline)
            }
        }
        fn kill(&mut self) -> io::Result<()> {
            self.kills += 1;
            self.interrupted = false;
            if self.kill_fails {
                Err(io::Error::other("EPERM"))
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn a_run_that_completes_in_time_is_never_killed() {
        let mut run = Mock::new(Some(1));
        assert_eq!(supervise(&mut run, None, Duration::ZERO), Ended::Completed);
        assert_eq!((run.pumps, run.kills), (1, 0));
    }

    #[test]
    fn a_run_past_its_deadline_is_killed_once_and_then_settles() {
        let mut run = Mock::new(Some(2));
        assert_eq!(
            supervise(&mut run, Some(Instant::now()), Duration::ZERO),
            Ended::TimedOut { settled: true }
        );
        assert_eq!((run.pumps, run.kills), (2, 1));
    }

    #[test]
    fn a_run_that_never_settles_after_the_kill_still_returns() {
        let mut run = Mock::new(None);
        assert_eq!(
            supervise(&mut run, Some(Instant::now()), Duration::ZERO),
            Ended::TimedOut { settled: false }
        );
        assert_eq!(run.kills, 1);
    }

    #[test]
    fn an_interrupt_kills_once_and_is_reported_as_such() {
        let mut run = Mock::new(None);
        run.interrupted = true;
        assert_eq!(
            supervise(&mut run, None, Duration::ZERO),
            Ended::Interrupted { settled: false }
        );
        assert_eq!(run.kills, 1);
    }

    #[test]
    fn a_failing_kill_does_not_stop_the_timeout_path() {
        let mut run = Mock::new(Some(2));
        run.kill_fails = true;
        assert_eq!(
            supervise(&mut run, Some(Instant::now()), Duration::ZERO),
            Ended::TimedOut { settled: true }
        );
    }

    #[test]
    fn a_wait_error_kills_the_group_and_is_reported() {
        let mut run = Mock::new(Some(2));
        run.pump_fails = true;
        assert_eq!(
            supervise(&mut run, None, Duration::ZERO),
            Ended::Failed("poll broke".into())
        );
        assert_eq!(run.kills, 1);
    }

    fn sh(script: &str) -> Command {
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(script);
        cmd
    }

    /// Whether `pid` is still running 5 s from now (a killed process takes a moment to die
    /// and to be reaped by whoever inherited it).
    fn alive(pid: &str) -> bool {
        let running = || {
            std::path::Path::new(&format!("/proc/{}", pid.trim())).exists()
                && !std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()))
                    .unwrap_or_default()
                    .contains(") Z ")
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while running() {
            if Instant::now() >= deadline {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_large_input_does_not_deadlock_against_a_large_output() {
        let input = vec![b'x'; 4 << 20];
        let out = run(
            &mut Command::new("/bin/cat"),
            &Run::new().input(&input).capture(1 << 20),
        )
        .unwrap();
        assert_eq!(out.ended, Ended::Completed);
        assert_eq!(out.stdout.bytes.len(), 1 << 20);
        assert_eq!(out.stdout.dropped, 3 << 20);
    }

    #[test]
    fn the_timeout_kills_the_whole_group_even_with_a_grandchild_holding_the_pipe() {
        let started = Instant::now();
        let out = run(
            &mut sh("sleep 30 & echo $!; sleep 30"),
            &Run::new().capture(1024).timeout(Duration::from_millis(300)),
        )
        .unwrap();
        assert_eq!(out.ended, Ended::TimedOut { settled: true });
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(
            !alive(&out.stdout.lossy()),
            "the grandchild outlived the kill"
        );
    }

    #[test]
    fn an_interrupt_stops_the_run_and_kill_on_exit_ends_what_the_leader_left() {
        let flag = AtomicBool::new(true);
        let out = run(
            &mut sh("sleep 30"),
            &Run::new().capture(64).interrupt(&flag),
        )
        .unwrap();
        assert_eq!(out.ended, Ended::Interrupted { settled: true });

        let out = run(
            &mut sh("sleep 30 & echo $!"),
            &Run::new()
                .capture(1024)
                .kill_group_on_exit()
                .timeout(Duration::from_secs(10)),
        )
        .unwrap();
        assert_eq!(out.ended, Ended::Completed);
        assert!(!alive(&out.stdout.lossy()), "the background child survived");
    }

    #[test]
    fn the_pid_slot_names_the_running_child_and_is_cleared_after() {
        let slot = AtomicU32::new(0);
        let out = run(
            &mut sh("echo $$"),
            &Run::new().capture_stdout(64).pid_slot(&slot),
        )
        .unwrap();
        assert!(out.stdout.lossy().trim().parse::<u32>().is_ok());
        assert_eq!(slot.load(Ordering::Acquire), 0);
    }

    #[test]
    fn a_dropped_group_is_killed_with_its_grandchildren() {
        let mut group =
            Group::spawn(sh("sleep 30 & echo $!; sleep 30").stdout(Stdio::piped())).unwrap();
        let mut line = String::new();
        let mut out = std::io::BufReader::new(group.take_stdout().unwrap());
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        drop(group);
        assert!(!alive(&line), "the grandchild outlived its dropped group");
    }
}
