//! The streaming observers (`on_stream_start`, `on_stream_delta`, `on_stream_end`,
//! `on_interim_message`), off the stream.
//!
//! A model streams text faster than a plugin may read it, and a slow observer must never
//! slow the stream. So these hooks are not fired on the agent's thread: each callback (a
//! Python plugin's callbacks of one hook count as one, since its worker answers them
//! together) gets a queue of its own, [`QUEUE`] events deep, and a thread that takes what
//! waits in it a batch at a time and fires the events in order. When a queue is full its
//! oldest event is dropped and counted ([`StreamObservers::dropped`]); the other callbacks'
//! queues are not touched. Publishing costs one check when no callback watches the hook,
//! and one copy of the payload plus a lock per callback when some do; it wakes a callback's
//! thread only when that thread sleeps, so a stream to a busy observer makes no system call
//! per delta. A slow callback holds at most [`QUEUE`] waiting events beside the batch in
//! its hands.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use hermes_hooks_abi::core::Field;
//! use hermes_host::{registry::Registry, stream::StreamObservers};
//!
//! let seen = Arc::new(Mutex::new(String::new()));
//! let mut registry = Registry::new();
//! let sink = seen.clone();
//! registry.add_in_process("on_stream_delta", "printer", Arc::new(move |e| {
//!     sink.lock().unwrap().push_str(e.get_str("delta").unwrap_or_default());
//!     Ok(None)
//! }));
//! let streams = StreamObservers::start(Arc::new(registry));
//! for delta in ["Hel", "lo"] {
//!     streams.publish("on_stream_delta", &[Field::str("delta", delta)]);
//! }
//! assert!(streams.drain(std::time::Duration::from_secs(5)));
//! assert_eq!(*seen.lock().unwrap(), "Hello");
//! ```

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use hermes_hooks_abi::core::{Field, FieldValue};

use crate::registry::Registry;

/// The hooks fired through queues.
pub const HOOKS: [&str; 4] = [
    "on_stream_start",
    "on_stream_delta",
    "on_stream_end",
    "on_interim_message",
];

/// How many events one callback's queue holds before the oldest is dropped.
pub const QUEUE: usize = 1024;

/// The queues and threads of one registry's streaming observers.
pub struct StreamObservers {
    /// Per hook of [`HOOKS`], the queues of its callbacks.
    queues: [Vec<Arc<Queue>>; 4],
    dropped: Arc<AtomicU64>,
}

struct Queue {
    state: Mutex<State>,
    /// Signalled when an event arrives or the observers close.
    ready: Condvar,
    /// Signalled when the queue is empty and its callback idle.
    idle: Condvar,
}

#[derive(Default)]
struct State {
    events: VecDeque<Arc<Event>>,
    busy: bool,
    closed: bool,
    /// Whether the callback's thread sleeps on `ready`: only then does a publish wake it,
    /// so a stream to a busy observer costs no system call per delta.
    sleeping: bool,
}

impl StreamObservers {
    /// Starts a thread per streaming callback of `registry`; none when no callback watches
    /// a streaming hook.
    pub fn start(registry: Arc<Registry>) -> StreamObservers {
        let dropped = Arc::new(AtomicU64::new(0));
        let queues = HOOKS.map(|hook| {
            registry
                .observer_positions(hook)
                .into_iter()
                .filter_map(|position| {
                    let queue = Arc::new(Queue {
                        state: Mutex::new(State::default()),
                        ready: Condvar::new(),
                        idle: Condvar::new(),
                    });
                    let (worker, registry) = (queue.clone(), registry.clone());
                    std::thread::Builder::new()
                        .name(format!("{hook} observer"))
                        .spawn(move || worker.run(&registry, hook, position))
                        .map_err(|e| {
                            tracing::warn!(
                                "cannot start the thread of a {hook} observer ({e}); it will not be called"
                            )
                        })
                        .ok()
                        .map(|_| queue)
                })
                .collect()
        });
        StreamObservers { queues, dropped }
    }

    /// Whether any callback watches `hook`: when not, a caller need not build its payload.
    pub fn watches(&self, hook: &str) -> bool {
        self.of(hook).is_some_and(|q| !q.is_empty())
    }

    fn of(&self, hook: &str) -> Option<&Vec<Arc<Queue>>> {
        HOOKS
            .iter()
            .position(|h| *h == hook)
            .map(|i| &self.queues[i])
    }

    /// Hands `fields` of `hook` to each of its callbacks' queues and returns at once.
    pub fn publish(&self, hook: &str, fields: &[Field<'_>]) {
        let Some(queues) = self.of(hook).filter(|q| !q.is_empty()) else {
            return;
        };
        let event = Arc::new(Event::of(fields));
        for queue in queues {
            let Ok(mut state) = queue.state.lock() else {
                continue;
            };
            if state.events.len() >= QUEUE {
                state.events.pop_front();
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            state.events.push_back(event.clone());
            let wake = state.sleeping;
            drop(state);
            if wake {
                queue.ready.notify_one();
            }
        }
    }

    /// How many events were dropped because a callback's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Drains the queues within `within` (see [`drain`](Self::drain)) and says what a host
    /// should report at exit: that observers were still busy, and how many events were
    /// dropped. Empty when every event was delivered.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let streams = hermes_host::stream::StreamObservers::start(Arc::new(hermes_host::registry::Registry::new()));
    /// assert!(streams.exit_notes(std::time::Duration::from_secs(1)).is_empty());
    /// ```
    pub fn exit_notes(&self, within: Duration) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.drain(within) {
            notes.push(
                "streaming observers still busy at exit; their last events were not delivered"
                    .to_string(),
            );
        }
        if self.dropped() > 0 {
            notes.push(format!(
                "{} streaming event(s) dropped: an observer fell more than {QUEUE} events behind",
                self.dropped()
            ));
        }
        notes
    }

    /// Waits until every queue is empty and every callback idle, at most `within`.
    /// Returns whether they are.
    pub fn drain(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        for queue in self.queues.iter().flatten() {
            let Ok(mut state) = queue.state.lock() else {
                continue;
            };
            while !state.events.is_empty() || state.busy {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                state = match queue.idle.wait_timeout(state, left) {
                    Ok((state, _)) => state,
                    Err(_) => return false,
                };
            }
        }
        true
    }
}

impl Drop for StreamObservers {
    fn drop(&mut self) {
        for queue in self.queues.iter().flatten() {
            if let Ok(mut state) = queue.state.lock() {
                state.closed = true;
            }
            queue.ready.notify_one();
        }
    }
}

/// A firing's fields, owned: every text in one buffer, so that an event costs two
/// allocations however many fields it has. The publisher allocates and an observer's
/// thread frees, and many small allocations freed on another thread were what a delta
/// cost, in the allocator's locks.
struct Event {
    text: String,
    fields: Vec<(std::ops::Range<usize>, Value)>,
}

enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(std::ops::Range<usize>),
    Json(std::ops::Range<usize>),
}

impl Event {
    fn of(fields: &[Field<'_>]) -> Event {
        let size: usize = fields
            .iter()
            .map(|f| f.name.len() + f.value.as_str().map_or(0, str::len))
            .sum();
        let mut text = String::with_capacity(size);
        let mut push = |s: &str| {
            let start = text.len();
            text.push_str(s);
            start..text.len()
        };
        let fields = fields
            .iter()
            .map(|f| {
                let name = push(f.name.as_str());
                let value = match &f.value {
                    FieldValue::Null => Value::Null,
                    FieldValue::Bool(b) => Value::Bool(*b),
                    FieldValue::Int(i) => Value::Int(*i),
                    FieldValue::Float(x) => Value::Float(*x),
                    FieldValue::Str(s) => Value::Str(push(s.as_str())),
                    FieldValue::Json(s) => Value::Json(push(s.as_str())),
                };
                (name, value)
            })
            .collect();
        Event { text, fields }
    }

    fn fields(&self) -> Vec<Field<'_>> {
        let at = |r: &std::ops::Range<usize>| self.text.get(r.clone()).unwrap_or_default();
        self.fields
            .iter()
            .map(|(name, value)| {
                let name = at(name);
                match value {
                    Value::Null => Field::null(name),
                    Value::Bool(b) => Field::bool(name, *b),
                    Value::Int(i) => Field::int(name, *i),
                    Value::Float(x) => Field::float(name, *x),
                    Value::Str(r) => Field::str(name, at(r)),
                    Value::Json(r) => Field::json(name, at(r)),
                }
            })
            .collect()
    }
}

impl Queue {
    fn run(&self, registry: &Registry, hook: &str, position: usize) {
        let mut batch: VecDeque<Arc<Event>> = VecDeque::new();
        loop {
            {
                let Ok(mut state) = self.state.lock() else {
                    return;
                };
                loop {
                    if !state.events.is_empty() {
                        // Everything waiting at once: one lock per batch, not per event,
                        // and the publisher finds an empty queue to push into.
                        std::mem::swap(&mut batch, &mut state.events);
                        state.busy = true;
                        break;
                    }
                    state.busy = false;
                    self.idle.notify_all();
                    if state.closed {
                        return;
                    }
                    state.sleeping = true;
                    state = match self.ready.wait(state) {
                        Ok(state) => state,
                        Err(_) => return,
                    };
                    state.sleeping = false;
                }
            }
            for event in batch.drain(..) {
                registry.observe_one(hook, position, &event.fields());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stalled_observer_loses_its_oldest_events_and_the_others_lose_none() {
        let gate = Arc::new(Mutex::new(()));
        let held = gate.lock().unwrap();
        let (slow, fast) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
        );
        let mut registry = Registry::new();
        let (g, s) = (gate.clone(), slow.clone());
        registry.add_in_process(
            "on_stream_delta",
            "slow",
            Arc::new(move |e| {
                let _wait = g.lock();
                s.lock().unwrap().push(e.get_int("n").unwrap_or(-1));
                Ok(None)
            }),
        );
        let f = fast.clone();
        registry.add_in_process(
            "on_stream_delta",
            "fast",
            Arc::new(move |e| {
                f.lock().unwrap().push(e.get_int("n").unwrap_or(-1));
                Ok(None)
            }),
        );
        let streams = StreamObservers::start(Arc::new(registry));
        // Handed on in runs the fast observer always catches up with, so that only the
        // slow one, stuck in its first event, ever has a full queue.
        let total = 3 * QUEUE as i64;
        let run = QUEUE as i64 / 4;
        for start in (0..total).step_by(run as usize) {
            for n in start..start + run {
                streams.publish("on_stream_delta", &[Field::int("n", n)]);
            }
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while fast.lock().unwrap().len() < (start + run) as usize
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        drop(held);
        assert!(streams.drain(Duration::from_secs(10)));
        let fast = fast.lock().unwrap().clone();
        assert_eq!(
            fast,
            (0..total).collect::<Vec<_>>(),
            "the fast one saw every event"
        );
        let slow = slow.lock().unwrap().clone();
        // The slow one was stuck in its first batch while the rest queued: it saw that
        // batch, then the newest QUEUE events, in order.
        assert!(slow.len() < fast.len(), "{}", slow.len());
        assert_eq!(slow.last(), Some(&(total - 1)));
        assert!(slow.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(streams.dropped(), (fast.len() - slow.len()) as u64);
    }

    #[test]
    fn a_hook_nobody_watches_costs_no_queue() {
        let streams = StreamObservers::start(Arc::new(Registry::new()));
        assert!(!streams.watches("on_stream_delta"));
        streams.publish("on_stream_delta", &[Field::str("delta", "x")]);
        assert_eq!(streams.dropped(), 0);
        assert!(streams.drain(Duration::ZERO));
    }
}
