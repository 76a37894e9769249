//! Chats and their sessions: one queue per chat, handled in order by one worker at a time;
//! different chats run concurrently.
//!
//! A chat (`<platform>:<chat_id>`) is created with its first message, and gets a session
//! id at once (so `session.append` works before the first turn); the session *starts*
//! (`session:start`, `on_session_start`) with its first turn. A worker is started when a
//! chat's queue goes from empty to not empty and ends when the queue is empty again. The
//! worker is a job on the gateway's [`RunPool`](hermes_host::cpu_slots::RunPool)
//! (`gateway.max_blocking` threads at most, `gateway.max_running` of them using the CPU at
//! once; more busy chats wait their turn, first come first served), so the number of
//! threads has a ceiling whatever the number of chats; a slow out-of-process hook occupies
//! one pool thread and stalls neither the listener nor other chats.
//!
//! Idle expiry: a reaper thread, which sleeps until the earliest moment a chat could
//! expire, queues an expiry job for a chat whose known session saw no message for the idle
//! timeout; the job ends the session (on the chat's own worker, so
//! it is ordered with the chat's messages) and gives the chat a fresh one. A chat whose
//! session hooks never heard of (no turn, no reset) is forgotten when idle.
//!
//! Lock order: the chat table, then a chat's state. No lock is held while a job runs.

use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Core;
use super::adapter::Connection;
use super::wire::Inbound;
use crate::app::agent::Session;

/// Runs one job of a chat: its session is taken out of the chat while the job runs; the
/// duration is how long the chat had been idle when the job was taken.
pub(crate) type RunJob = fn(&Core, &Chat, Job, &mut Option<Live>, Duration);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Work for a chat's worker.
pub(crate) enum Job {
    /// A message to handle; `origin` is told when it is done.
    Message {
        message: Inbound,
        origin: Arc<Connection>,
    },
    /// The reaper found the chat idle: end its session if it is still idle.
    Expire,
    /// The server shuts down: end the session.
    Close,
    /// Too many sessions are live and this chat's was quiet longest: end it (the chat is
    /// already out of the map; its next message starts a new one).
    Evict,
}

/// A chat's live session.
pub(crate) struct Live {
    /// The session the agent runs.
    pub(crate) session: Session,
    /// Whether it had its first turn (`session:start` was emitted).
    pub(crate) started: bool,
    /// Whether a reset announced it (`session:reset`, `on_session_reset`).
    pub(crate) announced: bool,
}

impl Live {
    /// A session no hook has heard of yet.
    pub(crate) fn fresh(session: Session) -> Live {
        Live {
            session,
            started: false,
            announced: false,
        }
    }

    /// Whether hooks know the session, so it must end with `session:end` and
    /// `on_session_finalize`: it started, or a reset announced it.
    pub(crate) fn is_known(&self) -> bool {
        self.started || self.announced
    }
}

/// One chat.
pub(crate) struct Chat {
    pub(crate) key: String,
    pub(crate) platform: String,
    pub(crate) chat_id: String,
    state: Mutex<ChatState>,
}

struct ChatState {
    queue: VecDeque<Job>,
    /// The bytes of the messages in `queue`.
    queued_bytes: usize,
    /// A worker is running this chat's queue.
    running: bool,
    /// `None` while a job runs (the worker holds it) and after the chat was closed.
    live: Option<Live>,
    /// When the last message was handled.
    last_activity: Instant,
}

/// Every chat, and the session id each one currently has.
pub(crate) struct Chats {
    map: Mutex<HashMap<String, Arc<Chat>>>,
    /// `session_key -> session id`, readable while the chat's worker holds its session.
    ids: Mutex<HashMap<String, String>>,
    closed: AtomicBool,
    /// Workers running. Counted with atomics, since every message starts and ends one; the
    /// lock only pairs the last worker's wake-up with a waiting shutdown.
    active: AtomicUsize,
    active_lock: Mutex<()>,
    all_done: Condvar,
    finalized: AtomicUsize,
}

/// Why a message was not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// The server is shutting down.
    ShuttingDown,
    /// The chat has this many bytes of messages waiting already.
    ChatFull(usize),
}

/// The most bytes of messages one chat may have waiting: one client cannot queue memory
/// without bound behind a long turn; it is told to wait instead.
pub const MAX_QUEUED_BYTES_PER_CHAT: usize = 16 << 20;

impl std::fmt::Display for Rejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rejected::ShuttingDown => {
                f.write_str("the gateway is shutting down; message not handled")
            }
            Rejected::ChatFull(bytes) => write!(
                f,
                "this chat has {bytes} bytes of messages waiting already (at most {MAX_QUEUED_BYTES_PER_CHAT}); message not handled: send it again once the earlier ones are answered"
            ),
        }
    }
}

impl std::error::Error for Rejected {}

impl Chats {
    pub(crate) fn new() -> Chats {
        Chats {
            map: Mutex::new(HashMap::new()),
            ids: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            active_lock: Mutex::new(()),
            all_done: Condvar::new(),
            finalized: AtomicUsize::new(0),
        }
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The current session id of chat `key`, if the chat is known.
    pub(crate) fn session_id(&self, key: &str) -> Option<String> {
        lock(&self.ids).get(key).cloned()
    }

    /// Records that chat `key` now has session `id` (`None`: the chat is gone).
    pub(crate) fn set_session_id(&self, key: &str, id: Option<&str>) {
        let mut ids = lock(&self.ids);
        match id {
            Some(id) => ids.insert(key.to_string(), id.to_string()),
            None => ids.remove(key),
        };
    }

    /// Whether `id` is the current session of some chat.
    pub(crate) fn is_current(&self, id: &str) -> bool {
        lock(&self.ids).values().any(|current| current == id)
    }

    /// Notes activity on chat `key` now (so it is the last to be evicted and ends idle
    /// later); its session id, if the chat is known.
    pub(crate) fn touch(&self, key: &str) -> Option<String> {
        let id = self.session_id(key)?;
        if let Some(chat) = lock(&self.map).get(key).cloned() {
            lock(&chat.state).last_activity = Instant::now();
        }
        Some(id)
    }

    /// Forgets chat `key`'s session id, if it is still `id` (a chat evicted and then written
    /// to again has a new one by then).
    pub(crate) fn clear_session_id(&self, key: &str, id: &str) {
        let mut ids = lock(&self.ids);
        if ids.get(key).is_some_and(|current| current == id) {
            ids.remove(key);
        }
    }

    /// Sessions ended at shutdown so far.
    pub(crate) fn finalized(&self) -> usize {
        self.finalized.load(Ordering::SeqCst)
    }

    pub(crate) fn count_finalized(&self) {
        self.finalized.fetch_add(1, Ordering::SeqCst);
    }
}

/// Queues `message` on its chat, creating the chat (and its session) on first contact.
pub(crate) fn submit(
    core: &Arc<Core>,
    message: Inbound,
    origin: &Arc<Connection>,
) -> Result<(), Rejected> {
    let chats = &core.chats;
    let mut map = lock(&chats.map);
    if chats.is_closed() {
        return Err(Rejected::ShuttingDown);
    }
    let key = message.session_key();
    if !map.contains_key(&key) && map.len() >= core.options.limits.max_sessions {
        evict_quietest(core, &mut map);
    }
    let chat = map
        .entry(key.clone())
        .or_insert_with(|| {
            let session = core.new_session(&message.platform, &message.chat_id);
            chats.set_session_id(&key, Some(&session.id));
            Arc::new(Chat {
                key: key.clone(),
                platform: message.platform.clone(),
                chat_id: message.chat_id.clone(),
                state: Mutex::new(ChatState {
                    queue: VecDeque::new(),
                    queued_bytes: 0,
                    running: false,
                    live: Some(Live::fresh(session)),
                    last_activity: Instant::now(),
                }),
            })
        })
        .clone();
    let mut state = lock(&chat.state);
    let size = message_bytes(&message);
    if state.queued_bytes + size > MAX_QUEUED_BYTES_PER_CHAT && !state.queue.is_empty() {
        return Err(Rejected::ChatFull(state.queued_bytes));
    }
    state.queued_bytes += size;
    core.router.subscribe(&key, origin);
    origin.begin();
    push(
        core,
        &chat,
        state,
        Job::Message {
            message,
            origin: origin.clone(),
        },
    );
    Ok(())
}

/// What a queued message holds, near enough: its text and ids.
fn message_bytes(message: &Inbound) -> usize {
    message.text.len() + message.chat_id.len() + message.user_id.len() + 64
}

/// Makes room for a new chat: the chat quiet longest that has no work queued or running is
/// taken out of the map, and its session ended on its own worker.
fn evict_quietest(core: &Arc<Core>, map: &mut HashMap<String, Arc<Chat>>) {
    let quietest = map
        .iter()
        .filter_map(|(key, chat)| {
            let state = lock(&chat.state);
            (!state.running && state.queue.is_empty()).then(|| (state.last_activity, key.clone()))
        })
        .min();
    let Some((_, key)) = quietest else { return };
    if let Some(chat) = map.remove(&key) {
        push(core, &chat, lock(&chat.state), Job::Evict);
    }
}

/// Appends `job` to the chat's queue and starts a worker when none runs.
fn push(core: &Arc<Core>, chat: &Arc<Chat>, mut state: MutexGuard<'_, ChatState>, job: Job) {
    state.queue.push_back(job);
    if state.running {
        return;
    }
    state.running = true;
    drop(state);
    core.chats.active.fetch_add(1, Ordering::SeqCst);
    let (worker_core, worker_chat) = (core.clone(), chat.clone());
    // Queued behind other chats' jobs when the pool is at its limits.
    core.pool.spawn(move || work(&worker_core, &worker_chat));
}

/// Decrements the active-worker count when the worker ends, even by a panic.
struct ActiveGuard<'a>(&'a Chats);

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        if self.0.active.fetch_sub(1, Ordering::SeqCst) == 1 {
            let _paired = lock(&self.0.active_lock);
            self.0.all_done.notify_all();
        }
    }
}

/// A chat's worker: runs its queue until it is empty.
fn work(core: &Arc<Core>, chat: &Arc<Chat>) {
    let _guard = ActiveGuard(&core.chats);
    loop {
        let (job, mut live, idle_for) = {
            let mut state = lock(&chat.state);
            match state.queue.pop_front() {
                Some(job) => {
                    if let Job::Message { message, .. } = &job {
                        state.queued_bytes =
                            state.queued_bytes.saturating_sub(message_bytes(message));
                    }
                    let live = state.live.take();
                    (job, live, state.last_activity.elapsed())
                }
                None => {
                    state.running = false;
                    return;
                }
            }
        };
        let is_message = matches!(job, Job::Message { .. });
        let ran = catch_unwind(AssertUnwindSafe(|| {
            (core.run_job)(core, chat, job, &mut live, idle_for)
        }));
        if let Err(panic) = ran {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            core.log.line(&format!(
                "gateway: handling a job of chat {} panicked: {why}",
                chat.key
            ));
        }
        let mut state = lock(&chat.state);
        state.live = live;
        if is_message {
            state.last_activity = Instant::now();
        }
    }
}

/// Expires idle sessions until the server closes. Runs on its own thread, and sleeps until
/// the earliest moment a chat could have been idle for `idle` (at least 20 ms, so a burst
/// of expiries is handled in batches; at most `idle`).
pub(crate) fn reap(core: &Arc<Core>, idle: Duration) {
    let mut sleep = idle;
    while !core.chats.is_closed() {
        std::thread::sleep(sleep.max(Duration::from_millis(20)));
        let mut map = lock(&core.chats.map);
        if core.chats.is_closed() {
            return;
        }
        let mut forget = Vec::new();
        sleep = idle;
        for (key, chat) in map.iter() {
            let state = lock(&chat.state);
            let quiet = state.last_activity.elapsed();
            if state.running || !state.queue.is_empty() || quiet < idle {
                sleep = sleep.min(idle.saturating_sub(quiet));
                continue;
            }
            match &state.live {
                Some(live) if live.is_known() => push(core, chat, state, Job::Expire),
                _ => forget.push(key.clone()),
            }
        }
        for key in forget {
            map.remove(&key);
            core.chats.set_session_id(&key, None);
        }
    }
}

/// How [`close_all`] treats queued messages.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Close {
    /// Handle them first.
    Drain,
    /// Drop them.
    Drop,
    /// Handle them for up to this long; then interrupt the running turns and drop the rest.
    Within(Duration),
}

/// What [`close_all`] did.
pub(crate) struct Closed {
    pub(crate) dropped: usize,
    pub(crate) grace_expired: bool,
}

/// Drops every queued message of every chat (answering their connections' bookkeeping)
/// and queues the chat's `Close` job again.
fn drop_queued(core: &Arc<Core>) -> usize {
    let mut dropped = 0;
    let map = lock(&core.chats.map);
    for chat in map.values() {
        let mut state = lock(&chat.state);
        state.queued_bytes = 0;
        for job in std::mem::take(&mut state.queue) {
            match job {
                Job::Message { origin, .. } => {
                    dropped += 1;
                    origin.end(&core.router);
                }
                Job::Close => state.queue.push_back(Job::Close),
                Job::Evict => state.queue.push_back(Job::Evict),
                Job::Expire => {}
            }
        }
    }
    dropped
}

/// Stops accepting messages and ends every chat's session, after its queued messages
/// or instead of them (see [`Close`]). Waits for every worker to finish.
pub(crate) fn close_all(core: &Arc<Core>, how: Close) -> Closed {
    {
        let map = lock(&core.chats.map);
        core.chats.closed.store(true, Ordering::SeqCst);
        for chat in map.values() {
            let state = lock(&chat.state);
            push(core, chat, state, Job::Close);
        }
    }
    let mut closed = Closed {
        dropped: 0,
        grace_expired: false,
    };
    match how {
        Close::Drain => {}
        Close::Drop => closed.dropped = drop_queued(core),
        Close::Within(grace) => {
            let started = Instant::now();
            let mut active = lock(&core.chats.active_lock);
            while core.chats.active.load(Ordering::SeqCst) > 0 {
                let Some(left) = grace.checked_sub(started.elapsed()) else {
                    closed.grace_expired = true;
                    break;
                };
                active = match core.chats.all_done.wait_timeout(active, left) {
                    Ok((guard, _)) => guard,
                    Err(poisoned) => poisoned.into_inner().0,
                };
            }
            drop(active);
            if closed.grace_expired {
                core.agent().interrupt.store(true, Ordering::SeqCst);
                closed.dropped = drop_queued(core);
            }
        }
    }
    let mut active = lock(&core.chats.active_lock);
    while core.chats.active.load(Ordering::SeqCst) > 0 {
        active = core
            .chats
            .all_done
            .wait(active)
            .unwrap_or_else(|e| e.into_inner());
    }
    closed
}

/// Ends `live`'s session: `session:end`, then `on_session_finalize` with the reference's
/// `reason` and, on a reset, the session that replaces it.
pub(crate) fn end_session(
    core: &Core,
    chat: &Chat,
    live: &Live,
    reason: &str,
    new_session_id: Option<&str>,
) {
    core.agent().emit(
        "session:end",
        serde_json::json!({
            "platform": chat.platform,
            "user_id": live.session.user_id.clone().unwrap_or_default(),
            "session_key": chat.key,
        }),
    );
    core.agent()
        .finalize_because(&live.session, reason, new_session_id);
}
