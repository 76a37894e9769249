//! Shell hooks with `async: true`, run in the background as Claude Code runs them.
//!
//! Published Claude Code hooks mark slow side work `async: true` (a test runner after an
//! edit, an audit log, a notification): the agent goes on at once, the hook cannot block
//! or change anything, and context it gives (`additionalContext` or `systemMessage`, or a
//! Hermes hook's `{"context": ...}`) reaches the model on the session's next call. Here
//! the firing returns no opinion immediately; a thread runs the hook with its own timeout
//! and hands such context to the session's waiting context, which the next `pre_llm_call`
//! of that session takes (see `register_with` in the parent module).
//!
//! At most [`MAX_RUNNING`] run at once: a flood of firings past it is dropped with a
//! warning rather than piling up processes. A host that ends (`hermes run`) waits a
//! bounded time for those still running ([`wait_idle`]), so their side effects (a log
//! line, a report) are done, then leaves the rest.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::config::{Format, ShellHookSpec};
use super::wire::{self, Stdout};

/// Background hooks that may run at once; a firing past it is dropped with a warning.
pub const MAX_RUNNING: usize = 64;

/// How many background hooks run now, and the wake-up for [`wait_idle`].
static RUNNING: Mutex<usize> = Mutex::new(0);
static IDLE: Condvar = Condvar::new();

/// Starts `spec` in the background with the event's keyword arguments `kwargs`; context it
/// gives waits for the session's next model call, in the hook's `position` among the
/// waiting context. Returns a warning when it was not started (too many running, no
/// thread).
pub(crate) fn launch(
    spec: ShellHookSpec,
    kwargs: Map<String, Value>,
    position: usize,
) -> Option<String> {
    {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        if *running >= MAX_RUNNING {
            return Some(format!(
                "async {} {} on {} not started: {MAX_RUNNING} async hooks are already running",
                spec.noun(),
                spec.command,
                spec.event
            ));
        }
        *running += 1;
    }
    let label = format!("{} {}", spec.noun(), spec.command);
    let spawned = std::thread::Builder::new()
        .name("hook-async".into())
        .spawn(move || {
            let _done = Done;
            let (run, evaluation) = super::run_once(&spec, &kwargs);
            for warning in &evaluation.warnings {
                tracing::warn!("async {warning}");
            }
            let session = super::claude::session_of(&kwargs);
            for text in context_of(spec.format, &run.stdout) {
                if let Some(dropped) = super::stash_session_context(session, position, text) {
                    tracing::warn!("{dropped}");
                }
            }
        });
    match spawned {
        Ok(_) => None,
        Err(e) => {
            drop(Done);
            Some(format!(
                "async {label} not started: cannot start a thread: {e}"
            ))
        }
    }
}

/// Counts a background hook as finished when dropped (also when its thread panics).
struct Done;

impl Drop for Done {
    fn drop(&mut self) {
        let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        *running = running.saturating_sub(1);
        if *running == 0 {
            IDLE.notify_all();
        }
    }
}

/// What a finished background hook gives the model: Claude's `additionalContext` (under
/// `hookSpecificOutput`) and `systemMessage`, or a Hermes hook's `context`. Anything else
/// (a decision, plain text) is for a synchronous hook and has nothing to act on any more.
///
/// ```
/// use hermes_host::shell::background::context_of;
/// use hermes_host::shell::config::Format;
/// let out = r#"{"systemMessage": "tests failed", "hookSpecificOutput": {"additionalContext": "3 failures in auth.rs"}}"#;
/// assert_eq!(context_of(Format::Claude, out), ["3 failures in auth.rs", "tests failed"]);
/// assert_eq!(context_of(Format::Hermes, r#"{"context": "lint clean"}"#), ["lint clean"]);
/// assert!(context_of(Format::Claude, "plain text").is_empty());
/// ```
pub fn context_of(format: Format, stdout: &str) -> Vec<String> {
    let Stdout::Json(value) = wire::read_stdout(stdout) else {
        return Vec::new();
    };
    let text = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
    };
    match format {
        Format::Claude => [
            text(value.pointer("/hookSpecificOutput/additionalContext")),
            text(value.get("systemMessage")),
        ]
        .into_iter()
        .flatten()
        .collect(),
        Format::Hermes => text(value.get("context")).into_iter().collect(),
    }
}

/// How many background hooks are running now.
pub fn running() -> usize {
    *RUNNING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Waits until no background hook runs, or `timeout` passed; returns how many still run.
/// A host calls it before it exits, so a hook's side effect (a log line, a report) is not
/// cut short; each hook is bounded by its own timeout anyway.
///
/// ```
/// assert_eq!(hermes_host::shell::background::wait_idle(std::time::Duration::ZERO), 0);
/// ```
pub fn wait_idle(timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
    while *running > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        running = IDLE
            .wait_timeout(running, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    *running
}
