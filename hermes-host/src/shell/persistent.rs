//! Persistent shell hooks (`persistent: true`): the command starts once, at its first
//! firing, and stays. Each firing writes the usual JSON payload, plus `hook_firing_id`, as
//! one line on its stdin; the hook answers one line of JSON on stdout in the usual answer
//! format (`{}` or an empty line: no decision). A Python policy then costs a pipe round trip
//! per tool call instead of an interpreter start.
//!
//! - Firings to one process are serialised; `instances: N` keeps a pool of N processes for
//!   concurrent callers (a gateway serving several chats).
//! - An answer that carries another `hook_firing_id`, or a line that is not JSON, is
//!   reported and discarded, never applied to the wrong firing.
//! - A timeout kills the process group; the next firing starts it again.
//! - A process that exits is started again at a later firing, after a backoff; after
//!   [`MAX_CRASHES`] exits in [`CRASH_WINDOW`] the hook is disabled for the run.
//! - Its stderr lines go to the log, with the command.
//!
//! The outcome of a firing comes back as a [`RunResult`], so the answer is evaluated by the
//! same rules as a one-shot hook's (and a failure is fail-open unless `fail_closed`).

use std::io::Write as _;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::spawn::{self, OUTPUT_CAP, RunResult};
use crate::lines::{Piece, read_lines};
use crate::process::{CrashRecord, Group, describe_status};

/// Exits within [`CRASH_WINDOW`] that disable a persistent hook.
pub const MAX_CRASHES: usize = 5;

/// The window [`MAX_CRASHES`] counts in.
pub const CRASH_WINDOW: Duration = Duration::from_secs(60);

/// The most processes `instances:` keeps for one hook.
pub const MAX_INSTANCES: usize = 16;

/// One persistent hook's processes (`instances:`, default 1) and their records.
pub struct Persistent {
    slots: Vec<Mutex<State>>,
    /// Where its processes start, with the argv and environment to use there (see
    /// [`Persistent::in_dir`]).
    launch: Option<Launch>,
}

/// How the processes of a hook whose agent works in another directory start.
#[derive(Clone, Debug)]
struct Launch {
    argv: Vec<String>,
    dir: std::path::PathBuf,
}

impl Default for Persistent {
    fn default() -> Self {
        Persistent::with_instances(1)
    }
}

struct State {
    running: Option<Running>,
    next_id: u64,
    crashes: CrashRecord,
}

impl Default for State {
    fn default() -> State {
        State {
            running: None,
            next_id: 0,
            crashes: CrashRecord::new(CRASH_WINDOW, Duration::from_millis(50), MAX_CRASHES),
        }
    }
}

struct Running {
    group: Group,
    stdin: ChildStdin,
    lines: Receiver<Out>,
}

/// What the stdout reader passes on.
enum Out {
    /// A complete line, as bytes (the reader never decides what a line means).
    Line(Vec<u8>),
    /// A line longer than [`OUTPUT_CAP`], skipped.
    TooLong,
}

/// What one line of a persistent hook's stdout means for the firing waiting on it.
#[derive(Debug, PartialEq, Eq)]
pub enum ReplyLine<'a> {
    /// The answer to this firing, as JSON text (`{}` for an empty line: no decision).
    Answer(&'a str),
    /// An answer carrying another firing's `hook_firing_id` (one that timed out, say):
    /// reported and discarded.
    Stale(u64),
    /// Not JSON (or not UTF-8): reported and discarded.
    NotJson,
}

/// Classifies one stdout line (without its newline) for firing `id`.
///
/// ```
/// use hermes_host::shell::persistent::{ReplyLine, reply_line};
///
/// assert_eq!(reply_line(b"  ", 7), ReplyLine::Answer("{}"));
/// assert_eq!(reply_line(br#"{"decision": "block", "hook_firing_id": 7}"#, 7),
///            ReplyLine::Answer(r#"{"decision": "block", "hook_firing_id": 7}"#));
/// assert_eq!(reply_line(br#"{"hook_firing_id": 6}"#, 7), ReplyLine::Stale(6));
/// assert_eq!(reply_line(b"ready", 7), ReplyLine::NotJson);
/// ```
pub fn reply_line(line: &[u8], id: u64) -> ReplyLine<'_> {
    let Ok(text) = std::str::from_utf8(line) else {
        return ReplyLine::NotJson;
    };
    let text = text.trim();
    if text.is_empty() {
        return ReplyLine::Answer("{}");
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => match value.get("hook_firing_id").and_then(|v| v.as_u64()) {
            Some(other) if other != id => ReplyLine::Stale(other),
            _ => ReplyLine::Answer(text),
        },
        Err(_) => ReplyLine::NotJson,
    }
}

impl Persistent {
    /// A pool of `n` processes (1 to [`MAX_INSTANCES`]), each started at its first firing.
    pub fn with_instances(n: usize) -> Persistent {
        Persistent {
            slots: (0..n.clamp(1, MAX_INSTANCES))
                .map(|_| Mutex::new(State::default()))
                .collect(),
            launch: None,
        }
    }

    /// Starts the processes in `dir` as `argv` (the command's words with its script made
    /// absolute), with `CLAUDE_PROJECT_DIR=dir`: the agent's working directory.
    pub fn in_dir(mut self, argv: Vec<String>, dir: std::path::PathBuf) -> Persistent {
        self.launch = Some(Launch { argv, dir });
        self
    }

    /// Fires once on a free process of the pool (waiting for one when all are busy):
    /// `payload` is the one-line JSON object a one-shot hook would read.
    pub fn fire(&self, command: &str, payload: &str, timeout: Duration) -> RunResult {
        let started = Instant::now();
        let failed = |error: String| RunResult {
            error: Some(error),
            elapsed: started.elapsed(),
            ..RunResult::default()
        };
        let free = self.slots.iter().find_map(|slot| slot.try_lock().ok());
        let state = match free {
            Some(state) => Ok(state),
            None => {
                // All busy: queue on one, spreading the waiters.
                static NEXT: std::sync::atomic::AtomicUsize =
                    std::sync::atomic::AtomicUsize::new(0);
                let i = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % self.slots.len();
                self.slots[i].lock()
            }
        };
        let Ok(mut state) = state else {
            return failed("the persistent hook's state is poisoned".into());
        };
        if state.crashes.exhausted() {
            return failed(format!(
                "disabled: it exited {MAX_CRASHES} times within {}s",
                CRASH_WINDOW.as_secs()
            ));
        }
        if state.running.is_none() {
            if !state.crashes.may_start(Instant::now()) {
                return failed("it exited and is restarting (backoff)".into());
            }
            match start(command, self.launch.as_ref()) {
                Ok(running) => state.running = Some(running),
                Err(e) => return failed(e),
            }
        }
        state.next_id += 1;
        let id = state.next_id;
        let line = with_firing_id(payload, id);
        let Some(running) = state.running.as_mut() else {
            return failed("the persistent hook is not running".into());
        };
        let written = running
            .stdin
            .write_all(line.as_bytes())
            .and_then(|()| running.stdin.write_all(b"\n"))
            .and_then(|()| running.stdin.flush());
        if let Err(e) = written {
            let cause = self.exited(&mut state, command);
            return failed(format!("cannot write to it ({e}): {cause}"));
        }
        let deadline = started + timeout;
        loop {
            let Some(running) = state.running.as_mut() else {
                return failed("the persistent hook is not running".into());
            };
            let left = deadline.saturating_duration_since(Instant::now());
            match running.lines.recv_timeout(left) {
                Ok(Out::TooLong) => tracing::warn!(
                    "persistent shell hook {command} printed a line longer than {OUTPUT_CAP} bytes; discarded"
                ),
                Ok(Out::Line(bytes)) => match reply_line(&bytes, id) {
                    ReplyLine::Answer(text) => return answered(text, started),
                    ReplyLine::Stale(other) => tracing::warn!(
                        "persistent shell hook {command} answered firing {other} during firing {id}; discarded"
                    ),
                    ReplyLine::NotJson => tracing::warn!(
                        "persistent shell hook {command} printed a line that is not JSON; discarded: {}",
                        String::from_utf8_lossy(&bytes)
                            .chars()
                            .take(200)
                            .collect::<String>()
                    ),
                },
                Err(RecvTimeoutError::Timeout) => {
                    if let Some(running) = state.running.take() {
                        running.group.kill();
                    }
                    return RunResult {
                        timed_out: true,
                        elapsed: started.elapsed(),
                        ..RunResult::default()
                    };
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let cause = self.exited(&mut state, command);
                    return failed(format!("the persistent hook {cause}"));
                }
            }
        }
    }

    /// Records that the process is gone and says how it ended.
    fn exited(&self, state: &mut State, command: &str) -> String {
        let cause = match state.running.take() {
            Some(mut running) => {
                drop(running.stdin);
                match running
                    .group
                    .wait_until(Instant::now() + Duration::from_secs(1))
                {
                    Some(status) => describe_status(status),
                    None => "stopped answering and was killed".into(),
                }
            }
            None => "is not running".into(),
        };
        state.crashes.record(Instant::now());
        if state.crashes.exhausted() {
            tracing::warn!(
                "persistent shell hook {command} exited {MAX_CRASHES} times within {}s and is disabled for the rest of this run; fix it, then start the agent again (`hermes hooks test <event>` runs it once)",
                CRASH_WINDOW.as_secs()
            );
        }
        cause
    }
}

/// A firing answered with `stdout`.
fn answered(stdout: &str, started: Instant) -> RunResult {
    RunResult {
        returncode: Some(0),
        stdout: stdout.to_string(),
        elapsed: started.elapsed(),
        ..RunResult::default()
    }
}

/// `payload` (a JSON object on one line) with `"hook_firing_id": id` added at its end.
fn with_firing_id(payload: &str, id: u64) -> String {
    let body = payload.trim_end();
    match body.strip_suffix('}') {
        Some(open) if open.trim_end().ends_with('{') => format!("{open}\"hook_firing_id\": {id}}}"),
        Some(open) => format!("{open}, \"hook_firing_id\": {id}}}"),
        None => body.to_string(),
    }
}

/// Starts the command with its stdout read line by line and its stderr logged.
fn start(command: &str, launch: Option<&Launch>) -> Result<Running, String> {
    let argv = match launch {
        Some(launch) => launch.argv.clone(),
        None => spawn::argv(command)?,
    };
    let Some(program) = argv.first() else {
        return Err("empty command".into());
    };
    let mut cmd = Command::new(program);
    if let Some(launch) = launch {
        cmd.current_dir(&launch.dir)
            .env("CLAUDE_PROJECT_DIR", &launch.dir);
    }
    cmd.args(&argv[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut group = Group::spawn(&mut cmd).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => "command not found".to_string(),
        std::io::ErrorKind::PermissionDenied => "command not executable".to_string(),
        _ => e.to_string(),
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (group.take_stdin(), group.take_stdout(), group.take_stderr())
    else {
        group.kill();
        return Err("the persistent hook has no pipes".into());
    };
    // Both pipes are read in bounded lines as bytes: a hook that prints a line without end,
    // or bytes that are not UTF-8, costs at most OUTPUT_CAP and a report, and the pipes keep
    // being drained (a full stderr pipe would stall the hook).
    let (tx, lines) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("hermes-persistent-out".into())
        .spawn(move || {
            read_lines(stdout, OUTPUT_CAP, |piece| {
                let out = match piece {
                    Piece::Line(_, bytes) => Out::Line(bytes.to_vec()),
                    Piece::TooLong(_) => Out::TooLong,
                };
                tx.send(out).is_ok()
            })
        })
        .map_err(|e| format!("cannot start a reader thread: {e}"))?;
    let label = command.to_string();
    let _ = std::thread::Builder::new()
        .name("hermes-persistent-err".into())
        .spawn(move || {
            read_lines(stderr, OUTPUT_CAP, |piece| {
                match piece {
                    Piece::Line(_, bytes) => tracing::info!(
                        "persistent shell hook {label}: {}",
                        String::from_utf8_lossy(bytes)
                    ),
                    Piece::TooLong(_) => tracing::info!(
                        "persistent shell hook {label}: (a stderr line longer than {OUTPUT_CAP} bytes, skipped)"
                    ),
                }
                true
            })
        });
    Ok(Running {
        group,
        stdin,
        lines,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_firing_id_is_appended_to_the_payload_object() {
        assert_eq!(
            with_firing_id(r#"{"a": 1}"#, 7),
            r#"{"a": 1, "hook_firing_id": 7}"#
        );
        assert_eq!(with_firing_id("{}", 2), r#"{"hook_firing_id": 2}"#);
    }

    #[test]
    fn a_persistent_cat_like_hook_answers_each_firing_from_one_process() {
        let p = Persistent::default();
        // Echoes each payload line back: the answer carries the firing's own id.
        let script = "while read -r line; do echo \"$line\"; done";
        let command = format!("/bin/sh -c '{script}'");
        for _ in 0..3 {
            let r = p.fire(&command, r#"{"x": 1}"#, Duration::from_secs(5));
            assert_eq!(r.returncode, Some(0), "{r:?}");
            assert!(r.stdout.contains("hook_firing_id"), "{r:?}");
        }
        assert_eq!(p.slots[0].lock().unwrap().next_id, 3);
        assert_eq!(p.slots[0].lock().unwrap().crashes.count(), 0);
    }
}
