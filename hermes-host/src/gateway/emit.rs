//! Emitting events: resolution, a router, and one bounded queue and delivery thread per hook.
//!
//! [`Dispatcher::emit`] checks that some hook subscribed to the event, wraps it in one
//! shared [`Event`] and pushes it onto the router's inbox. That is all it does on the
//! caller's thread: no serialisation, no I/O and no waiting, however many hooks want the
//! event. While events come, it makes no system call either: the router is not woken, it
//! polls its inbox (continuously during bursts, at least every [`ROUTER_IDLE_POLL`] in
//! between). After [`ROUTER_PARK_AFTER`] without an event the router parks until woken, so
//! an idle gateway costs no wake-ups; the first `emit` after that pays one wake-up.
//!
//! The router thread resolves each event as the reference does (every hook subscribed to
//! the exact name, then, if the name has a colon, every hook subscribed to
//! `<text before the first colon>:*`) and pushes it onto each of their queues, in emit
//! order. Each hook has its own delivery thread, which takes events off its queue in order
//! and calls the handler. A slow or hanging handler therefore delays only its own hook's
//! later events. A hook subscribed twice to an event (exactly and by wildcard) gets it
//! twice, exact first, as in the reference.
//!
//! # Bounded memory
//!
//! A queue holds at most `capacity` events (default [`DEFAULT_QUEUE_CAPACITY`]). When a
//! handler falls that far behind, each new event pushes out the OLDEST queued one: the hook
//! keeps the most recent events, which are the ones an alert or a log reader wants. Every
//! drop is counted ([`HookStats::dropped`]) and reported through the log sink as
//! `[hooks] Queue of hook '<name>' is full (<capacity> events): dropped <n> oldest event(s)
//! so far; its handler is falling behind`, at the first drop and then at most every
//! [`DROP_WARNING_INTERVAL`], and once more at shutdown. The router's inbox is bounded the
//! same way (at least [`DEFAULT_QUEUE_CAPACITY`]); it only fills if the router itself is
//! starved, and its drops are counted and reported too.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::event::Event;
use super::handler::Handler;
use super::{GatewayLog, HookStats, ShutdownReport, UndeliveredHook, wildcard_prefix};

/// How many events a hook's queue holds before the oldest are dropped.
pub const DEFAULT_QUEUE_CAPACITY: usize = 10_000;

/// The least time between two `Queue of hook ... is full` lines for one hook.
pub const DROP_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// Event name → hook indices, for exact names and for `prefix:*` wildcards.
#[derive(Default)]
pub(crate) struct Routes {
    exact: HashMap<String, Vec<usize>>,
    wildcard: HashMap<String, Vec<usize>>,
}

impl Routes {
    /// Subscribes hook `index` to `event` (duplicates kept, in order).
    pub(crate) fn add(&mut self, event: &str, index: usize) {
        self.exact.entry(event.to_string()).or_default().push(index);
        if let Some(prefix) = wildcard_prefix(event) {
            self.wildcard
                .entry(prefix.to_string())
                .or_default()
                .push(index);
        }
    }

    /// The hooks to call for `event`, in order: exact subscribers, then `prefix:*` ones.
    pub(crate) fn resolve<'a>(&'a self, event: &str) -> impl Iterator<Item = usize> + 'a {
        let exact = self.exact.get(event).map(Vec::as_slice).unwrap_or_default();
        let wild = event
            .split_once(':')
            .and_then(|(prefix, _)| self.wildcard.get(prefix))
            .map(Vec::as_slice)
            .unwrap_or_default();
        exact.iter().chain(wild).copied()
    }
}

/// One hook's queue, shared by emitters and its delivery thread.
pub(crate) struct HookQueue {
    pub(crate) name: String,
    capacity: usize,
    state: Mutex<QueueState>,
    /// Wakes the delivery thread.
    ready: Condvar,
    /// Wakes `shutdown` when the delivery thread finishes.
    finished: Condvar,
    delivered: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    /// The pid of the handler process working on the current event (0: none).
    in_flight: AtomicU32,
    /// How often the Python worker was started again.
    pub(crate) restarts: Arc<AtomicU64>,
}

#[derive(Default)]
struct QueueState {
    items: VecDeque<Arc<Event>>,
    /// The delivery thread waits on `ready`: an emitter must notify.
    sleeping: bool,
    /// No more events come: deliver what is queued, then stop.
    closing: bool,
    /// Stop after the current event; what is queued is not delivered.
    abandon: bool,
    /// The thread is calling the handler.
    busy: bool,
    /// The thread has ended.
    done: bool,
    last_drop_warning: Option<Instant>,
    /// When shutdown wants the handler's resources released by.
    close_by: Option<Instant>,
}

impl HookQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        // A panic while holding the lock cannot leave the queue inconsistent (every update
        // is one push, pop or flag), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `event`; returns the drop count to warn about, if a warning is due, or `Err`
    /// when the queue is closed.
    fn push(&self, event: Arc<Event>) -> Result<Option<u64>, ()> {
        let mut state = self.lock();
        if state.closing {
            return Err(());
        }
        let mut warn = None;
        let mut evicted = None;
        if state.items.len() >= self.capacity {
            evicted = state.items.pop_front();
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            let now = Instant::now();
            if state
                .last_drop_warning
                .is_none_or(|t| now.duration_since(t) >= DROP_WARNING_INTERVAL)
            {
                state.last_drop_warning = Some(now);
                warn = Some(dropped);
            }
        }
        state.items.push_back(event);
        let wake = state.sleeping;
        if wake {
            state.sleeping = false;
        }
        drop(state);
        if wake {
            self.ready.notify_one();
        }
        drop(evicted);
        Ok(warn)
    }

    pub(crate) fn stats(&self) -> HookStats {
        let state = self.lock();
        HookStats {
            name: self.name.clone(),
            queued: state.items.len() + usize::from(state.busy),
            delivered: self.delivered.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            worker_restarts: self.restarts.load(Ordering::Relaxed),
            capacity: self.capacity,
        }
    }
}

/// The queue between `emit` and the router thread.
struct Inbox {
    capacity: usize,
    /// Events the router took out of the inbox and has not pushed onto the hooks' queues
    /// yet: counted as "not routed yet", so no event is invisible while it moves.
    moving: std::sync::atomic::AtomicUsize,
    state: Mutex<InboxState>,
    ready: Condvar,
    finished: Condvar,
    dropped: AtomicU64,
}

#[derive(Default)]
struct InboxState {
    items: VecDeque<Arc<Event>>,
    sleeping: bool,
    /// The router waits without a timeout: the next `emit` must wake it.
    parked: bool,
    closing: bool,
    close_by: Option<Instant>,
    done: bool,
    last_drop_warning: Option<Instant>,
}

impl Inbox {
    fn lock(&self) -> MutexGuard<'_, InboxState> {
        // Every update is one push, swap or flag: a poisoned lock is still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Swaps the waiting events into `spare`; false once closed and empty.
    ///
    /// Nobody wakes the router for an ordinary event (a wake-up is a system call that costs
    /// the emitting thread 10 µs or more on a virtual machine): it yields a few times after
    /// each batch, then sleeps for 100 µs, doubling up to [`ROUTER_IDLE_POLL`]. After
    /// [`ROUTER_PARK_AFTER`] of that with no event it parks, and `emit` wakes it.
    fn next_batch(&self, spare: &mut VecDeque<Arc<Event>>) -> bool {
        let mut spins = 0;
        let mut pause = ROUTER_FIRST_PAUSE;
        let mut slept = Duration::ZERO;
        let mut state = self.lock();
        loop {
            if !state.items.is_empty() {
                std::mem::swap(&mut state.items, spare);
                // Under the lock, so that the events are counted in one place or the other.
                self.moving.store(spare.len(), Ordering::SeqCst);
                return true;
            }
            if state.closing {
                return false;
            }
            if spins < ROUTER_SPINS {
                spins += 1;
                drop(state);
                std::thread::yield_now();
                state = self.lock();
                continue;
            }
            if slept >= ROUTER_PARK_AFTER {
                state.parked = true;
                state = match self.ready.wait(state) {
                    Ok(guard) => guard,
                    Err(poisoned) => poisoned.into_inner(),
                };
                state.parked = false;
                slept = Duration::ZERO;
                pause = ROUTER_FIRST_PAUSE;
                continue;
            }
            state.sleeping = true;
            state = match self.ready.wait_timeout(state, pause) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
            state.sleeping = false;
            slept += pause;
            pause = (pause * 2).min(ROUTER_IDLE_POLL);
        }
    }
}

/// How often the router looks for more events before it sleeps.
const ROUTER_SPINS: u32 = 64;

/// The router's first sleep after a batch.
const ROUTER_FIRST_PAUSE: Duration = Duration::from_micros(100);

/// The longest the router sleeps when no event comes: an event emitted after a quiet
/// period reaches its hooks' queues at most this late.
pub const ROUTER_IDLE_POLL: Duration = Duration::from_millis(5);

/// How long the router polls without an event before it parks until woken.
pub const ROUTER_PARK_AFTER: Duration = Duration::from_secs(1);

/// An inbox this long wakes the router at once (a burst during its sleep).
const WAKE_ROUTER_AT: usize = 1024;

/// All hooks' queues and delivery threads, and the router between `emit` and them.
///
/// `emit` pushes the event onto one inbox and wakes the router only if it sleeps: the
/// caller pays for at most one wake-up, however many hooks want the event. The router
/// resolves the event and pushes it onto each hook's queue, waking their threads.
pub(crate) struct Dispatcher {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    emitted: AtomicU64,
    rejected: AtomicU64,
    shut: AtomicBool,
}

/// What the router thread and the dispatcher share.
struct Shared {
    routes: Routes,
    queues: Vec<Arc<HookQueue>>,
    inbox: Inbox,
    log: Arc<dyn GatewayLog>,
    /// No router thread could be started: `emit` routes itself.
    direct: AtomicBool,
}

impl Shared {
    /// Pushes `event` onto the queue of every hook it resolves to.
    fn route(&self, event: &Arc<Event>) -> bool {
        let mut accepted = true;
        for index in self.routes.resolve(&event.event_type) {
            let Some(queue) = self.queues.get(index) else {
                continue;
            };
            match queue.push(event.clone()) {
                Ok(None) => {}
                Ok(Some(dropped)) => self.log.line(&format!(
                    "[hooks] Queue of hook '{}' is full ({} events): dropped {dropped} oldest event(s) so far; its handler is falling behind",
                    queue.name, queue.capacity
                )),
                Err(()) => accepted = false,
            }
        }
        accepted
    }

    /// Tells every hook's thread to finish what is queued and stop.
    fn close_queues(&self, close_by: Option<Instant>) {
        for queue in &self.queues {
            let mut state = queue.lock();
            state.closing = true;
            state.close_by = close_by;
            state.sleeping = false;
            drop(state);
            queue.ready.notify_all();
        }
    }
}

/// A hook ready to run: its name, events, handler and worker-restart counter.
pub(crate) struct Ready {
    pub name: String,
    pub events: Vec<String>,
    pub handler: Handler,
    pub restarts: Arc<AtomicU64>,
}

impl Dispatcher {
    /// Starts the router and one delivery thread per hook.
    pub(crate) fn start(
        hooks: Vec<Ready>,
        capacity: usize,
        log: Arc<dyn GatewayLog>,
    ) -> Dispatcher {
        let mut routes = Routes::default();
        let mut queues = Vec::new();
        let mut threads = Vec::new();
        for (index, hook) in hooks.into_iter().enumerate() {
            for event in &hook.events {
                routes.add(event, index);
            }
            let queue = Arc::new(HookQueue {
                name: hook.name.clone(),
                capacity: capacity.max(1),
                state: Mutex::new(QueueState::default()),
                ready: Condvar::new(),
                finished: Condvar::new(),
                delivered: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
                in_flight: AtomicU32::new(0),
                restarts: hook.restarts,
            });
            let thread_queue = queue.clone();
            let thread_log = log.clone();
            let mut handler = hook.handler;
            let spawned = std::thread::Builder::new()
                .name(format!("hermes-hook-{}", hook.name))
                .spawn(move || deliver_loop(&thread_queue, &mut handler, thread_log.as_ref()));
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(e) => {
                    log.line(&format!(
                        "[hooks] Error loading hook {}: cannot start its delivery thread: {e}",
                        hook.name
                    ));
                    let mut state = queue.lock();
                    state.closing = true;
                    state.done = true;
                }
            }
            queues.push(queue);
        }
        let shared = Arc::new(Shared {
            routes,
            queues,
            inbox: Inbox {
                capacity: capacity.max(DEFAULT_QUEUE_CAPACITY),
                moving: std::sync::atomic::AtomicUsize::new(0),
                state: Mutex::new(InboxState::default()),
                ready: Condvar::new(),
                finished: Condvar::new(),
                dropped: AtomicU64::new(0),
            },
            log,
            direct: AtomicBool::new(false),
        });
        if !shared.queues.is_empty() {
            let router_shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("hermes-hooks-router".into())
                .spawn(move || route_loop(&router_shared));
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(_) => shared.direct.store(true, Ordering::Release),
            }
        }
        Dispatcher {
            shared,
            threads: Mutex::new(threads),
            emitted: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            shut: AtomicBool::new(false),
        }
    }

    /// Queues `event` for every hook that resolves for it. Never blocks on a handler.
    pub(crate) fn emit(&self, event_type: &str, context: serde_json::Value) {
        self.emit_with(event_type, context, None);
    }

    /// [`emit`](Self::emit), reporting on `done` once every hook handled the event (or
    /// could not): `Ok` when all succeeded, else the errors.
    pub(crate) fn emit_tracked(
        &self,
        event_type: &str,
        context: serde_json::Value,
        done: std::sync::mpsc::Sender<super::event::Progress>,
    ) {
        let expected = self.shared.routes.resolve(event_type).count();
        if expected == 0 {
            self.emitted.fetch_add(1, Ordering::Relaxed);
            let _ = done.send(super::event::Progress::Finished(Ok(())));
            return;
        }
        self.emit_with(
            event_type,
            context,
            Some(super::event::Tracker::new(expected, done)),
        );
    }

    fn emit_with(
        &self,
        event_type: &str,
        context: serde_json::Value,
        tracker: Option<super::event::Tracker>,
    ) {
        self.emitted.fetch_add(1, Ordering::Relaxed);
        if self.shared.routes.resolve(event_type).next().is_none() {
            return;
        }
        if self.shut.load(Ordering::Acquire) {
            self.reject(event_type);
            return;
        }
        let context = if context.is_null() {
            serde_json::Value::Object(Default::default())
        } else {
            context
        };
        let mut event = Event::new(event_type, context);
        event.tracker = tracker;
        let event = Arc::new(event);
        if self.shared.direct.load(Ordering::Acquire) {
            if !self.shared.route(&event) {
                self.reject(event_type);
            }
            return;
        }
        let inbox = &self.shared.inbox;
        let mut state = inbox.lock();
        if state.closing {
            drop(state);
            self.reject(event_type);
            return;
        }
        let mut evicted = None;
        let mut warn = None;
        if state.items.len() >= inbox.capacity {
            evicted = state.items.pop_front();
            let dropped = inbox.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            let now = Instant::now();
            if state
                .last_drop_warning
                .is_none_or(|t| now.duration_since(t) >= DROP_WARNING_INTERVAL)
            {
                state.last_drop_warning = Some(now);
                warn = Some(dropped);
            }
        }
        state.items.push_back(event);
        let wake = state.parked || (state.sleeping && state.items.len() >= WAKE_ROUTER_AT);
        if wake {
            state.sleeping = false;
            state.parked = false;
        }
        drop(state);
        if wake {
            inbox.ready.notify_one();
        }
        drop(evicted);
        if let Some(dropped) = warn {
            self.shared.log.line(&format!(
                "[hooks] Event queue is full ({} events): dropped {dropped} oldest event(s) so far before any hook got them",
                inbox.capacity
            ));
        }
    }

    /// Counts an event that arrived after shutdown; the first one is reported.
    fn reject(&self, event_type: &str) {
        if self.rejected.fetch_add(1, Ordering::Relaxed) == 0 {
            self.shared.log.line(&format!(
                "[hooks] Gateway hooks are shut down: event '{event_type}' was not delivered (later ones are only counted)"
            ));
        }
    }

    /// The hook indices `event` resolves to, in call order.
    pub(crate) fn resolve<'a>(&'a self, event: &str) -> impl Iterator<Item = usize> + 'a {
        self.shared.routes.resolve(event)
    }

    /// Events emitted so far, refused after shutdown, waiting for the router, and dropped
    /// before the router got them.
    pub(crate) fn counters(&self) -> (u64, u64, usize, u64) {
        let routing =
            self.shared.inbox.lock().items.len() + self.shared.inbox.moving.load(Ordering::SeqCst);
        (
            self.emitted.load(Ordering::Relaxed),
            self.rejected.load(Ordering::Relaxed),
            routing,
            self.shared.inbox.dropped.load(Ordering::Relaxed),
        )
    }

    pub(crate) fn queues(&self) -> &[Arc<HookQueue>] {
        &self.shared.queues
    }

    /// Stops accepting events, delivers what is queued until `deadline`, then abandons the
    /// rest (killing handler processes still running) and reports it.
    pub(crate) fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        let started = Instant::now();
        let until = started + deadline;
        if self.shut.swap(true, Ordering::AcqRel) {
            return ShutdownReport {
                elapsed: Duration::ZERO,
                undelivered: Vec::new(),
                dropped: Vec::new(),
            };
        }
        let mut undelivered = Vec::new();
        let inbox = &self.shared.inbox;
        let mut state = inbox.lock();
        state.closing = true;
        state.close_by = Some(until);
        let router_running =
            !self.shared.direct.load(Ordering::Acquire) && !self.shared.queues.is_empty();
        drop(state);
        inbox.ready.notify_one();
        if router_running {
            let mut state = inbox.lock();
            while !state.done {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                state = match inbox.finished.wait_timeout(state, until - now) {
                    Ok((guard, _)) => guard,
                    Err(poisoned) => poisoned.into_inner().0,
                };
            }
            if !state.done && !state.items.is_empty() {
                undelivered.push(UndeliveredHook {
                    name: "(not yet routed)".into(),
                    events: state.items.len() as u64,
                });
                state.items.clear();
            }
        } else {
            self.shared.close_queues(Some(until));
        }
        for queue in &self.shared.queues {
            let mut state = queue.lock();
            while !state.done {
                let now = Instant::now();
                if now >= until {
                    break;
                }
                state = match queue.finished.wait_timeout(state, until - now) {
                    Ok((guard, _)) => guard,
                    Err(poisoned) => poisoned.into_inner().0,
                };
            }
            if !state.done {
                let left = state.items.len() as u64 + u64::from(state.busy);
                state.closing = true;
                state.abandon = true;
                state.items.clear();
                drop(state);
                queue.ready.notify_all();
                let pid = queue.in_flight.load(Ordering::Acquire);
                if pid != 0 {
                    let _ = crate::process::kill_group(pid);
                }
                if left > 0 {
                    undelivered.push(UndeliveredHook {
                        name: queue.name.clone(),
                        events: left,
                    });
                }
            }
        }
        // Threads that finished are joined; one stuck in a native call is left behind.
        let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
        let mut still_running = Vec::new();
        for thread in threads.drain(..) {
            if thread.is_finished() {
                let _ = thread.join();
            } else {
                still_running.push(thread);
            }
        }
        *threads = still_running;
        drop(threads);
        let mut dropped: Vec<(String, u64)> = self
            .shared
            .queues
            .iter()
            .map(|q| (q.name.clone(), q.dropped.load(Ordering::Relaxed)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let unrouted = inbox.dropped.load(Ordering::Relaxed);
        if unrouted > 0 {
            dropped.push(("(before routing)".into(), unrouted));
        }
        let report = ShutdownReport {
            elapsed: started.elapsed(),
            undelivered,
            dropped,
        };
        for (name, n) in &report.dropped {
            self.shared.log.line(&format!(
                "[hooks] Hook '{name}' lost {n} event(s) in total because its queue was full"
            ));
        }
        if !report.undelivered.is_empty() {
            let list: Vec<String> = report
                .undelivered
                .iter()
                .map(|u| format!("{} ({})", u.name, u.events))
                .collect();
            self.shared.log.line(&format!(
                "[hooks] Shutdown: {} event(s) not delivered within {}: {}",
                report.undelivered_total(),
                super::process::seconds(deadline),
                list.join(", ")
            ));
        }
        report
    }
}

/// The router thread: moves events from the inbox onto the hooks' queues, in order.
fn route_loop(shared: &Shared) {
    let mut batch = VecDeque::new();
    while shared.inbox.next_batch(&mut batch) {
        for event in batch.drain(..) {
            shared.route(&event);
            shared.inbox.moving.fetch_sub(1, Ordering::SeqCst);
        }
    }
    let close_by = shared.inbox.lock().close_by;
    shared.close_queues(close_by);
    let mut state = shared.inbox.lock();
    state.done = true;
    drop(state);
    shared.inbox.finished.notify_all();
}

fn deliver_loop(queue: &HookQueue, handler: &mut Handler, log: &dyn GatewayLog) {
    let note = |line: String| log.line(&line);
    loop {
        let event = {
            let mut state = queue.lock();
            loop {
                if state.abandon {
                    break None;
                }
                if let Some(event) = state.items.pop_front() {
                    state.busy = true;
                    break Some(event);
                }
                if state.closing {
                    break None;
                }
                state.sleeping = true;
                state = match queue.ready.wait(state) {
                    Ok(guard) => guard,
                    Err(poisoned) => poisoned.into_inner(),
                };
            }
        };
        let Some(event) = event else { break };
        if let Some(tracker) = &event.tracker {
            tracker.started();
        }
        let errors = handler.deliver(&event, &queue.in_flight, &note);
        if let Some(tracker) = &event.tracker {
            tracker.handled(&queue.name, &errors);
        }
        let abandoned = {
            let mut state = queue.lock();
            state.busy = false;
            state.abandon
        };
        if abandoned {
            // Killed at the shutdown deadline: counted as undelivered, not as a failure.
            break;
        }
        if errors.is_empty() {
            queue.delivered.fetch_add(1, Ordering::Relaxed);
        } else {
            queue.failed.fetch_add(1, Ordering::Relaxed);
            for error in errors {
                log.line(&format!(
                    "[hooks] Error in handler for '{}': {error}",
                    event.event_type
                ));
            }
        }
    }
    let close_by = queue
        .lock()
        .close_by
        .unwrap_or_else(|| Instant::now() + Duration::from_secs(2));
    handler.close(close_by);
    let mut state = queue.lock();
    state.done = true;
    drop(state);
    queue.finished.notify_all();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(routes: &Routes, event: &str) -> Vec<usize> {
        routes.resolve(event).collect()
    }

    #[test]
    fn exact_subscribers_come_before_wildcard_ones() {
        let mut routes = Routes::default();
        routes.add("command:*", 0);
        routes.add("command:model", 1);
        routes.add("command:model", 0);
        routes.add("agent", 2);
        assert_eq!(resolved(&routes, "command:model"), vec![1, 0, 0]);
        assert_eq!(resolved(&routes, "command:reset"), vec![0]);
        assert_eq!(resolved(&routes, "agent:start"), Vec::<usize>::new());
        assert_eq!(resolved(&routes, "agent"), vec![2]);
    }

    #[test]
    fn only_the_text_before_the_first_colon_is_a_wildcard_prefix() {
        let mut routes = Routes::default();
        routes.add("a:b:*", 0);
        routes.add("a:*", 1);
        assert_eq!(resolved(&routes, "a:b:c"), vec![1]);
        assert_eq!(resolved(&routes, "a:b:*"), vec![0, 1]);
        // Emitting the wildcard itself reaches its subscribers twice, as in the reference.
        assert_eq!(resolved(&routes, "a:*"), vec![1, 1]);
    }

    #[test]
    fn the_request_line_holds_event_type_then_context() {
        let event = Event::new(
            "agent:step",
            serde_json::json!({"iteration": 3, "text": "a\nb"}),
        );
        assert_eq!(
            event.request_json(),
            r#"{"event_type":"agent:step","context":{"iteration":3,"text":"a\nb"}}"#
        );
    }
}
