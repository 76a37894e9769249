//! The streaming observers (`on_stream_start`, `on_stream_delta`, `on_stream_end`,
//! `on_interim_message`), off the stream.
//!
//! A model streams text faster than a plugin may read it, and a slow observer must never
//! slow the stream. So these hooks are not fired on the agent's thread: each callback (a
//! Python plugin's callbacks of one hook count as one, since its worker answers them
//! together) gets a queue of its own, [`QUEUE`] events deep, and a thread that fires them
//! in order. When a queue is full its oldest event is dropped and counted
//! ([`StreamObservers::dropped`]); the other callbacks' queues are not touched. Publishing
//! costs one check when no callback watches the hook, and one copy of the payload plus a
//! lock per callback when some do.
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

use hermes_hooks_abi::core::Field;

use crate::payload::OwnedPayload;
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
    events: VecDeque<Arc<OwnedPayload>>,
    busy: bool,
    closed: bool,
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
        let event = Arc::new(OwnedPayload::from_fields(fields));
        for queue in queues {
            let Ok(mut state) = queue.state.lock() else {
                continue;
            };
            if state.events.len() >= QUEUE {
                state.events.pop_front();
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            state.events.push_back(event.clone());
            drop(state);
            queue.ready.notify_one();
        }
    }

    /// How many events were dropped because a callback's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
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

impl Queue {
    fn run(&self, registry: &Registry, hook: &str, position: usize) {
        loop {
            let event = {
                let Ok(mut state) = self.state.lock() else {
                    return;
                };
                loop {
                    if let Some(event) = state.events.pop_front() {
                        state.busy = true;
                        break event;
                    }
                    state.busy = false;
                    self.idle.notify_all();
                    if state.closed {
                        return;
                    }
                    state = match self.ready.wait(state) {
                        Ok(state) => state,
                        Err(_) => return,
                    };
                }
            };
            registry.observe_one(hook, position, &event.fields());
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
        let total = QUEUE as i64 + 100;
        for n in 0..total {
            streams.publish("on_stream_delta", &[Field::int("n", n)]);
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
        // The slow one was inside its first event while the rest queued: it saw that one,
        // then the newest QUEUE events, in order.
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
