//! What hooks ask of the agent run beyond their answer: approval of one tool call, the end
//! of the turn or run, another turn after the agent would stop, and feedback on a tool call
//! for the model.
//!
//! The ABI's answers (block, modify, context, replace) say what happens to one firing.
//! Claude Code's hook format can say more that only the host running the agent can act on:
//! `permissionDecision: ask` / `allow` (put this tool call through the host's approval
//! step, or skip that step for it), `continue: false` (end the run) and a blocked prompt
//! (end this turn before the model sees it). A hook records those here, keyed by the
//! session and the tool call it fired for, and the host takes them right after firing:
//! [`take_permission`] after `pre_tool_call`, [`take_stop`] after any firing,
//! [`take_feedback`] after `post_tool_call`, [`take_continue`] after `post_llm_call` and
//! `subagent_stop`.
//!
//! Keys rather than a thread-local, so an answer cannot be lost or applied to another call
//! whatever thread a hook runs on. A host that never takes (for example `hermes hooks fire`)
//! leaves entries behind; each map keeps at most [`MAX_WAITING`] and drops the oldest, which
//! a host that does take can never reach: it takes each entry microseconds after it is made.
//!
//! ```
//! use hermes_host::run_control::{self, Permission, Stop};
//! run_control::note_permission("s-1", "call-1", Permission::Allow);
//! run_control::note_permission("s-1", "call-1", Permission::Ask("touches prod".into()));
//! // `ask` outranks `allow`, as in Claude Code (a block outranks both: it never runs).
//! assert_eq!(run_control::take_permission("s-1", "call-1"), Some(Permission::Ask("touches prod".into())));
//! assert_eq!(run_control::take_permission("s-1", "call-1"), None);
//!
//! run_control::note_stop("s-1", Stop::turn("prompt refused"));
//! run_control::note_stop("s-1", Stop::run("budget spent"));
//! // The first reason stays; the run ends if any hook asked for that.
//! assert_eq!(run_control::take_stop("s-1"), Some(Stop { reason: "prompt refused".into(), ends_run: true }));
//! assert_eq!(run_control::take_stop("s-1"), None);
//! ```

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;
use std::sync::Mutex;

/// Entries each map keeps before dropping the oldest.
pub const MAX_WAITING: usize = 1024;

/// A hook's say on whether one tool call needs the host's approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Permission {
    /// Put the call through the host's approval step, with this reason (Claude's `ask`).
    Ask(String),
    /// The call needs no approval prompt from the host (Claude's `allow`). Other hooks
    /// still run and can still block it.
    Allow,
}

impl Permission {
    /// The stronger of two answers for one call: `ask` outranks `allow`; between two asks
    /// the first reason stays (hooks run in registry order).
    fn combine(self, later: Permission) -> Permission {
        match (self, later) {
            (Permission::Allow, later) => later,
            (earlier, _) => earlier,
        }
    }
}

/// A hook's request to stop the agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stop {
    /// Why, in the hook's words: the user sees it.
    pub reason: String,
    /// `true`: the whole run ends (Claude's `continue: false`); `false`: only this turn
    /// does (a blocked prompt: the model never sees it, later turns still run).
    pub ends_run: bool,
}

impl Stop {
    /// Ends this turn only.
    pub fn turn(reason: impl Into<String>) -> Stop {
        Stop {
            reason: reason.into(),
            ends_run: false,
        }
    }

    /// Ends the whole run.
    pub fn run(reason: impl Into<String>) -> Stop {
        Stop {
            reason: reason.into(),
            ends_run: true,
        }
    }

    /// `run` or `turn`: how far the stop reaches.
    pub fn reach(&self) -> &'static str {
        if self.ends_run { "run" } else { "turn" }
    }

    /// Two requests for one session: the first reason stays (hooks run in registry
    /// order), and the run ends if either asked for that.
    pub fn combine(self, later: Stop) -> Stop {
        Stop {
            reason: self.reason,
            ends_run: self.ends_run || later.ends_run,
        }
    }
}

/// What the user sees: `a hook stopped the run: <reason>` or `a hook stopped this turn:
/// <reason>`.
impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let reach = if self.ends_run {
            "the run"
        } else {
            "this turn"
        };
        write!(f, "a hook stopped {reach}: {}", self.reason)
    }
}

/// A map that keeps at most [`MAX_WAITING`] entries, dropping the oldest.
struct Bounded<K, V> {
    entries: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: Hash + Eq + Clone, V> Bounded<K, V> {
    fn new() -> Self {
        Bounded {
            entries: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn upsert(&mut self, key: K, value: V, merge: impl FnOnce(V, V) -> V) {
        if let Some(old) = self.entries.remove(&key) {
            self.entries.insert(key, merge(old, value));
            return;
        }
        while self.entries.len() >= MAX_WAITING {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if self.entries.remove(&oldest).is_some() {
                tracing::debug!("run control: dropped an answer nobody took");
            }
        }
        self.order.push_back(key.clone());
        self.entries.insert(key, value);
        // Keys already taken linger in `order`; trim them so it stays bounded too.
        if self.order.len() > 2 * MAX_WAITING {
            let entries = &self.entries;
            self.order.retain(|k| entries.contains_key(k));
        }
    }

    fn take(&mut self, key: &K) -> Option<V> {
        self.entries.remove(key)
    }

    fn get(&self, key: &K) -> Option<&V> {
        self.entries.get(key)
    }

    fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

type CallKey = (String, String);

fn permissions() -> &'static Mutex<Bounded<CallKey, Permission>> {
    static MAP: std::sync::OnceLock<Mutex<Bounded<CallKey, Permission>>> =
        std::sync::OnceLock::new();
    MAP.get_or_init(|| Mutex::new(Bounded::new()))
}

fn stops() -> &'static Mutex<Bounded<String, Stop>> {
    static MAP: std::sync::OnceLock<Mutex<Bounded<String, Stop>>> = std::sync::OnceLock::new();
    MAP.get_or_init(|| Mutex::new(Bounded::new()))
}

/// Records a hook's `permission` for tool call `tool_call_id` of `session_id`, combined
/// with what other hooks said for the same call (`ask` outranks `allow`).
pub fn note_permission(session_id: &str, tool_call_id: &str, permission: Permission) {
    permissions()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .upsert(
            (session_id.to_string(), tool_call_id.to_string()),
            permission,
            Permission::combine,
        );
}

/// What the hooks said about the approval of this tool call, once: the entry is removed.
pub fn take_permission(session_id: &str, tool_call_id: &str) -> Option<Permission> {
    let mut map = permissions().lock().unwrap_or_else(|e| e.into_inner());
    // The agent asks at every tool call; most of the time nobody answered anything.
    if map.is_empty() {
        return None;
    }
    map.take(&(session_id.to_string(), tool_call_id.to_string()))
}

/// Records that a hook asked to stop `session_id`'s turn or run, combined with what other
/// hooks asked (the first reason stays; the run ends if any hook asked for that).
pub fn note_stop(session_id: &str, stop: Stop) {
    stops().lock().unwrap_or_else(|e| e.into_inner()).upsert(
        session_id.to_string(),
        stop,
        Stop::combine,
    );
}

/// What hooks asked of `session_id`'s turn or run, once: the entry is removed.
pub fn take_stop(session_id: &str) -> Option<Stop> {
    let mut map = stops().lock().unwrap_or_else(|e| e.into_inner());
    if map.is_empty() {
        return None;
    }
    map.take(&session_id.to_string())
}

/// Texts kept in the order of the hooks that gave them (their place in the registry), as
/// hooks of one priority may finish in any order.
type Ordered = Vec<(usize, String)>;

fn in_order(mut texts: Ordered) -> Vec<String> {
    texts.sort_by_key(|(position, _)| *position);
    texts.into_iter().map(|(_, text)| text).collect()
}

fn feedback() -> &'static Mutex<Bounded<CallKey, Ordered>> {
    static MAP: std::sync::OnceLock<Mutex<Bounded<CallKey, Ordered>>> = std::sync::OnceLock::new();
    MAP.get_or_init(|| Mutex::new(Bounded::new()))
}

fn continuations() -> &'static Mutex<Bounded<String, Ordered>> {
    static MAP: std::sync::OnceLock<Mutex<Bounded<String, Ordered>>> = std::sync::OnceLock::new();
    MAP.get_or_init(|| Mutex::new(Bounded::new()))
}

/// Records what a hook at `position` of the registry has to tell the model about tool call
/// `tool_call_id` after it ran: Claude Code's PostToolUse `additionalContext`, or the
/// reason of `decision: "block"` or of exit 2. The host adds it to the tool result.
pub fn note_feedback(session_id: &str, tool_call_id: &str, position: usize, text: String) {
    feedback().lock().unwrap_or_else(|e| e.into_inner()).upsert(
        (session_id.to_string(), tool_call_id.to_string()),
        vec![(position, text)],
        |mut a, b| {
            a.extend(b);
            a
        },
    );
}

/// What hooks had to tell the model about this tool call, in registry order, once.
///
/// ```
/// use hermes_host::run_control::{note_feedback, take_feedback};
/// note_feedback("s-2", "c-1", 3, "lint: 2 warnings".into());
/// note_feedback("s-2", "c-1", 1, "formatted".into());
/// assert_eq!(take_feedback("s-2", "c-1"), ["formatted", "lint: 2 warnings"]);
/// assert!(take_feedback("s-2", "c-1").is_empty());
/// ```
pub fn take_feedback(session_id: &str, tool_call_id: &str) -> Vec<String> {
    let mut map = feedback().lock().unwrap_or_else(|e| e.into_inner());
    if map.is_empty() {
        return Vec::new();
    }
    map.take(&(session_id.to_string(), tool_call_id.to_string()))
        .map(in_order)
        .unwrap_or_default()
}

/// Records that a Stop (or SubagentStop) hook at `position` of the registry asked the
/// agent of `session_id` to keep working, with `reason` as its next instruction (Claude
/// Code's `decision: "block"` or exit 2 on Stop).
pub fn note_continue(session_id: &str, position: usize, reason: String) {
    continuations()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .upsert(
            session_id.to_string(),
            vec![(position, reason)],
            |mut a, b| {
                a.extend(b);
                a
            },
        );
}

/// The reasons hooks gave to keep `session_id` working, in registry order, once (empty:
/// the agent may stop).
///
/// ```
/// use hermes_host::run_control::{note_continue, take_continue};
/// note_continue("s-3", 0, "run the tests before you stop".into());
/// assert_eq!(take_continue("s-3"), ["run the tests before you stop"]);
/// assert!(take_continue("s-3").is_empty());
/// ```
pub fn take_continue(session_id: &str) -> Vec<String> {
    let mut map = continuations().lock().unwrap_or_else(|e| e.into_inner());
    if map.is_empty() {
        return Vec::new();
    }
    map.take(&session_id.to_string())
        .map(in_order)
        .unwrap_or_default()
}

/// A set of session ids that a flag holds for.
struct Sessions(std::sync::OnceLock<Mutex<std::collections::HashSet<String>>>);

impl Sessions {
    const fn new() -> Sessions {
        Sessions(std::sync::OnceLock::new())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.0
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, session_id: &str, on: bool) {
        let mut set = self.lock();
        if on {
            set.insert(session_id.to_string());
        } else {
            set.remove(session_id);
        }
    }

    fn contains(&self, session_id: &str) -> bool {
        self.lock().contains(session_id)
    }
}

static STOP_HOOK_ACTIVE: Sessions = Sessions::new();
static SUBAGENTS: Sessions = Sessions::new();

/// Marks `session_id` as continuing because a Stop hook asked it to (`true`), or not. The
/// next Stop payload carries it as `stop_hook_active`, as in Claude Code, so a script can
/// let the agent stop instead of looping. The host clears it when the agent stops.
pub fn set_stop_hook_active(session_id: &str, active: bool) {
    STOP_HOOK_ACTIVE.set(session_id, active);
}

/// Whether `session_id` is continuing at a Stop hook's request.
///
/// ```
/// use hermes_host::run_control::{set_stop_hook_active, stop_hook_active};
/// set_stop_hook_active("s-4", true);
/// assert!(stop_hook_active("s-4"));
/// set_stop_hook_active("s-4", false);
/// assert!(!stop_hook_active("s-4"));
/// ```
pub fn stop_hook_active(session_id: &str) -> bool {
    STOP_HOOK_ACTIVE.contains(session_id)
}

fn session_sources() -> &'static Mutex<Bounded<String, &'static str>> {
    static MAP: std::sync::OnceLock<Mutex<Bounded<String, &'static str>>> =
        std::sync::OnceLock::new();
    MAP.get_or_init(|| Mutex::new(Bounded::new()))
}

/// Records how session `session_id` came to be, in Claude Code's words for SessionStart's
/// `source`: `clear` for the session a `/new` or `/reset` started (a session not recorded
/// here is a fresh `startup`).
pub fn note_session_source(session_id: &str, source: &'static str) {
    session_sources()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .upsert(session_id.to_string(), source, |_, later| later);
}

/// How session `session_id` came to be: what [`note_session_source`] recorded, else
/// `startup`.
///
/// ```
/// use hermes_host::run_control::{note_session_source, session_source};
/// note_session_source("after-reset", "clear");
/// assert_eq!((session_source("after-reset"), session_source("new-chat")), ("clear", "startup"));
/// ```
pub fn session_source(session_id: &str) -> &'static str {
    let map = session_sources().lock().unwrap_or_else(|e| e.into_inner());
    if map.is_empty() {
        return "startup";
    }
    map.get(&session_id.to_string())
        .copied()
        .unwrap_or("startup")
}

/// Marks `session_id` as a delegated child's session while it runs (`true`), or not. Claude
/// Code fires SessionStart, UserPromptSubmit, Stop and SessionEnd for the main session only
/// (a subagent has SubagentStart and SubagentStop), so `format: claude` hooks of those events
/// skip a child's firings, which Hermes-format hooks get as in the reference.
pub fn set_subagent(session_id: &str, child: bool) {
    SUBAGENTS.set(session_id, child);
}

/// Whether `session_id` is a delegated child's session.
///
/// ```
/// use hermes_host::run_control::{is_subagent, set_subagent};
/// set_subagent("child-1", true);
/// assert!(is_subagent("child-1") && !is_subagent("parent-1"));
/// set_subagent("child-1", false);
/// assert!(!is_subagent("child-1"));
/// ```
pub fn is_subagent(session_id: &str) -> bool {
    SUBAGENTS.contains(session_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_ask_outranks_allows_and_later_asks() {
        let p = Permission::Allow
            .combine(Permission::Ask("a".into()))
            .combine(Permission::Allow)
            .combine(Permission::Ask("b".into()));
        assert_eq!(p, Permission::Ask("a".into()));
        assert_eq!(
            Permission::Allow.combine(Permission::Allow),
            Permission::Allow
        );
    }

    #[test]
    fn a_full_map_drops_the_oldest_and_stays_bounded() {
        let mut map: Bounded<u32, u32> = Bounded::new();
        for k in 0..(3 * MAX_WAITING as u32) {
            map.upsert(k, k, |a, _| a);
            if k % 2 == 0 {
                assert_eq!(map.take(&k), Some(k));
            }
        }
        assert!(map.entries.len() <= MAX_WAITING);
        assert!(map.order.len() <= 2 * MAX_WAITING + 1);
        let last = 3 * MAX_WAITING as u32 - 1;
        assert_eq!(map.take(&last), Some(last));
        assert_eq!(map.take(&1), None, "the oldest were dropped");
    }

    #[test]
    fn calls_and_sessions_are_apart() {
        note_permission("rc-a", "c1", Permission::Allow);
        assert_eq!(take_permission("rc-a", "c2"), None);
        assert_eq!(take_permission("rc-b", "c1"), None);
        assert_eq!(take_permission("rc-a", "c1"), Some(Permission::Allow));
        note_stop("rc-a", Stop::turn("first"));
        note_stop("rc-a", Stop::turn("second"));
        assert_eq!(take_stop("rc-b"), None);
        assert_eq!(take_stop("rc-a"), Some(Stop::turn("first")));
        assert_eq!(take_stop("rc-a"), None);
    }
}
