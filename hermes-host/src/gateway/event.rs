//! One emitted gateway event, as every hook's queue and handler sees it: the name, the
//! context, and the JSON forms handlers read, each serialised once for all hooks.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// One emitted event, shared by every queue it is on.
pub(crate) struct Event {
    /// The event name, such as `agent:start`.
    pub event_type: String,
    /// The context object.
    pub context: serde_json::Value,
    context_json: OnceLock<String>,
    request_json: OnceLock<Arc<str>>,
    /// Who waits for every hook to have handled it (`GatewayHooks::emit_tracked`).
    pub(crate) tracker: Option<Tracker>,
}

/// What a tracked event's waiter hears: each time a hook starts on the event (a handler's
/// time counts from there, not from when the event was queued behind others), then the
/// outcome across all its hooks.
pub(crate) enum Progress {
    /// A hook took the event off its queue and runs it now.
    Started,
    /// Every hook handled the event (or never will): `Ok`, or the errors.
    Finished(Result<(), Vec<String>>),
}

/// The outcome of one tracked event across its hooks: sent when the last queue lets go of
/// the event, whether each hook handled it, failed on it, or never got it (dropped from a
/// full queue, or abandoned at shutdown).
pub(crate) struct Tracker {
    expected: usize,
    handled: AtomicUsize,
    errors: Mutex<Vec<String>>,
    done: std::sync::mpsc::Sender<Progress>,
}

impl Tracker {
    pub(crate) fn new(expected: usize, done: std::sync::mpsc::Sender<Progress>) -> Tracker {
        Tracker {
            expected,
            handled: AtomicUsize::new(0),
            errors: Mutex::new(Vec::new()),
            done,
        }
    }

    /// One hook starts on the event now.
    pub(crate) fn started(&self) {
        let _ = self.done.send(Progress::Started);
    }

    /// One hook handled the event, with these errors (none: it succeeded).
    pub(crate) fn handled(&self, hook: &str, errors: &[String]) {
        self.handled.fetch_add(1, Ordering::AcqRel);
        if !errors.is_empty() {
            let mut all = self.errors.lock().unwrap_or_else(|e| e.into_inner());
            all.extend(errors.iter().map(|e| format!("{hook}: {e}")));
        }
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let Some(tracker) = self.tracker.take() else {
            return;
        };
        let mut errors =
            std::mem::take(&mut *tracker.errors.lock().unwrap_or_else(|e| e.into_inner()));
        let missed = tracker
            .expected
            .saturating_sub(tracker.handled.load(Ordering::Acquire));
        if missed > 0 {
            errors.push(format!(
                "{missed} hook(s) never got the event (a full queue dropped it, or the hooks shut down)"
            ));
        }
        let _ = tracker.done.send(Progress::Finished(if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }));
    }
}

impl Event {
    pub(crate) fn new(event_type: &str, context: serde_json::Value) -> Event {
        Event {
            event_type: event_type.to_string(),
            context,
            context_json: OnceLock::new(),
            request_json: OnceLock::new(),
            tracker: None,
        }
    }

    /// The context as compact JSON, serialised once for all hooks.
    pub(crate) fn context_json(&self) -> &str {
        self.context_json.get_or_init(|| self.context.to_string())
    }

    /// `{"event_type": ..., "context": {...}}` on one line: what an executable handler reads
    /// on stdin and a Python worker reads as a request. Serialised once for all hooks.
    pub(crate) fn request_json(&self) -> &str {
        self.request_arc_ref()
    }

    /// [`request_json`](Self::request_json), shared.
    pub(crate) fn request_arc(&self) -> Arc<str> {
        self.request_arc_ref().clone()
    }

    fn request_arc_ref(&self) -> &Arc<str> {
        self.request_json.get_or_init(|| {
            let event_type = serde_json::Value::String(self.event_type.clone());
            format!(
                r#"{{"event_type":{event_type},"context":{}}}"#,
                self.context_json()
            )
            .into()
        })
    }
}
