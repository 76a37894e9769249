//! One ordered list of callbacks per hook, and the rules that combine their answers.
//!
//! Native plugin callbacks, in-process closures and out-of-process hooks (shell hooks) sit
//! side by side in the same list, in the order they were added: plugins alphabetically and
//! in registration order inside `register`, then shell hooks in config order. That order is
//! assigned once, when callbacks are added, and it alone decides the outcome: out-of-process
//! hooks of one event run concurrently, but their answers are combined in registry order, so
//! the result is the one a sequential run would give.
//!
//! The rules, one per [`OutcomeKind`] (see [`Registry::fire`]):
//!
//! | hook | rule |
//! |---|---|
//! | `pre_tool_call` | the first block (with a non-empty message) or approve wins, an approve sending the call to the approval gate; modifies are merged in order |
//! | `pre_llm_call` | every non-blank context, joined with a blank line, in order |
//! | `transform_tool_result`, `transform_terminal_output` | first text wins |
//! | `transform_llm_output` | first non-empty text wins |
//! | `pre_gateway_dispatch` | first skip, rewrite or allow wins |
//! | `pre_verify` | first continue with a message wins |
//! | observers | answers ignored |
//!
//! Every failure is contained: a callback that fails or panics is logged as
//! `Hook '<event>' callback <plugin>::<callback> raised: <message>` and the next one runs.
//! An answer that does not fit the hook is logged and ignored.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fatal::{Firing, Mark};
use abi_stable::std_types::{ROption, RResult, RString};
use hermes_hooks_abi::core::{
    EventView, Field, FieldValue, HookCallbackBox, HostCalls, HostCalls_TO, HostCallsRef, Reply,
    action, no_host_calls,
};
use hermes_hooks_abi::hooks::{self, OutcomeKind, payload};
use hermes_hooks_abi::sdk::actions;

/// How many out-of-process hooks of one event run at once.
pub const MAX_PARALLEL_EXTERNAL: usize = 8;

/// What a callback answered: a reply, no opinion, or a failure message.
pub type HookResult = Result<Option<Reply>, String>;

/// An in-process Rust callback, for hosts that embed the registry.
pub type InProcessFn = dyn Fn(&EventView<'_>) -> HookResult + Send + Sync;

/// A hook that runs outside the process (a shell hook), driven by the registry.
///
/// The registry calls [`matches`](ExternalHook::matches) first (cheap, on the caller's
/// thread), then [`run`](ExternalHook::run) for the matching ones, concurrently, grouped by
/// [`priority`](ExternalHook::priority).
pub trait ExternalHook: Send + Sync {
    /// Whether this hook wants this event (a tool matcher, for example).
    fn matches(&self, event: &EventView<'_>) -> bool;
    /// Runs the hook and returns its answer in the canonical reply shape. Failures the hook
    /// handles itself (fail-open with a warning) come back as `Ok(None)`.
    fn run(&self, event: &EventView<'_>) -> HookResult;
    /// Hooks of equal priority run together; lower priorities run (and finish) first.
    fn priority(&self) -> i64 {
        0
    }
    /// A key naming what this hook runs (for a shell hook: home, event, matcher and
    /// command), so a loader can see that an equal hook is already registered. `None`: the
    /// hook has no such identity.
    fn identity(&self) -> Option<String> {
        None
    }
    /// Runs the hook like [`run`](Self::run) and returns, beside the answer, the problems
    /// it handled itself (a timeout, a non-zero exit, unparsable output) instead of logging
    /// them, so a caller that counts failures (a benchmark) can see them.
    fn run_reporting(&self, event: &EventView<'_>) -> (HookResult, Vec<String>) {
        (self.run(event), Vec::new())
    }
    /// The process this hook would start for `event`, for measuring it bare against the
    /// host's handling of it. `None`: the hook starts no process.
    fn subprocess(&self, _event: &EventView<'_>) -> Option<Subprocess> {
        None
    }
}

/// Several callbacks that live in one worker process and answer together: one round trip
/// per firing for all of them, however many there are (a Python plugin's callbacks for one
/// hook). The registry holds one entry per callback, so order, labels and traces stay per
/// callback; the first of them asks the worker, and the others take their answers from it.
pub trait ExternalGroup: Send + Sync {
    /// Runs every callback of the group for `event` and returns one answer per callback,
    /// in registration order. A worker that fails answers for all of them (usually no
    /// opinion, or a block for a fail-closed guard, in the first).
    fn run_all(&self, event: &EventView<'_>) -> Vec<HookResult>;

    /// One group answering for this group's callbacks and then `next`'s, when both live in
    /// the same worker: the registry joins a group with the one before it in a hook's
    /// order, so that neighbours in one worker cost one round trip per firing, not one
    /// each. `None` (the default): they stay apart.
    fn join(&self, next: &dyn ExternalGroup) -> Option<Arc<dyn ExternalGroup>> {
        let _ = next;
        None
    }

    /// The group as `Any`, for [`join`](ExternalGroup::join) to recognise its own kind.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// A command line and the standard input an external hook would give it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subprocess {
    /// The command line, as configured.
    pub command: String,
    /// What the hook executes: the command's words, or a shell, `-c` and the command for a
    /// `format: claude` command written for a shell.
    pub argv: Vec<String>,
    /// Variables the hook adds to the environment (`CLAUDE_PROJECT_DIR`).
    pub env: Vec<(String, String)>,
    /// What it reads on stdin, in the hook's own format.
    pub stdin: String,
    /// The hook's timeout.
    pub timeout: Duration,
}

/// Which hook system a callback belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A native plugin, by manifest name.
    Plugin(Arc<str>),
    /// A Python plugin, by manifest name.
    Python(Arc<str>),
    /// A shell hook from `config.yaml`.
    Shell,
    /// A closure the embedding host added.
    Host,
}

impl Source {
    /// `plugin`, `python`, `shell` or `host`, as traces print it.
    pub fn system(&self) -> &'static str {
        match self {
            Source::Plugin(_) => "plugin",
            Source::Python(_) => "python",
            Source::Shell => "shell",
            Source::Host => "host",
        }
    }
}

/// The callable part of an entry.
pub enum Callback {
    /// A closure from a native plugin, called through the stable ABI.
    Native(HookCallbackBox),
    /// A Rust closure in this process.
    InProcess(Arc<InProcessFn>),
    /// An out-of-process hook.
    External(Arc<dyn ExternalHook>),
    /// Callback `member` of a group that answers together (see [`ExternalGroup`]); the
    /// members of one group are consecutive entries of one hook.
    Member(Arc<dyn ExternalGroup>, usize),
}

/// One registered callback.
pub struct Entry {
    /// Where it came from.
    pub source: Source,
    /// `<plugin>::<callback>` for plugins, `shell_hook[<event>:<command>]` for shell hooks.
    pub label: String,
    /// What to call.
    pub callback: Callback,
}

/// One firing of one callback, for traces.
#[derive(Clone, Debug)]
pub struct FiringRecord {
    /// `plugin`, `shell` or `host`.
    pub system: &'static str,
    /// The hook.
    pub hook: String,
    /// The callback's label.
    pub callback: String,
    /// What it answered, in words (`block: <message>`, `context`, `no opinion`, ...).
    pub decision: String,
    /// How long it took.
    pub duration: Duration,
    /// Its failure message, if it failed.
    pub error: Option<String>,
}

/// Receives a [`FiringRecord`] for every callback run, when tracing is on.
pub trait TraceSink: Send + Sync {
    /// Called once per callback, in registry order.
    fn record(&self, record: FiringRecord);
}

/// Collecting records in a vector is a sink too (handy for reports and tests).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use hermes_host::registry::{Registry, FiringRecord};
/// let records = Arc::new(Mutex::new(Vec::<FiringRecord>::new()));
/// let mut registry = Registry::new();
/// registry.set_trace(records.clone());
/// registry.add_in_process("on_session_start", "a", Arc::new(|_e| Ok(None)));
/// registry.fire("on_session_start", &[]);
/// assert_eq!(records.lock().unwrap()[0].callback, "host::a");
/// ```
impl TraceSink for std::sync::Mutex<Vec<FiringRecord>> {
    fn record(&self, record: FiringRecord) {
        if let Ok(mut records) = self.lock() {
            records.push(record);
        }
    }
}

/// The ordered callbacks of every hook.
///
/// ```
/// use std::sync::Arc;
/// use hermes_host::registry::{Registry, Outcome};
/// use hermes_hooks_abi::core::{Reply, Field};
///
/// let mut registry = Registry::new();
/// registry.add_in_process("pre_llm_call", "a", Arc::new(|_e| Ok(Some(Reply::new("context", "one")))));
/// registry.add_in_process("pre_llm_call", "b", Arc::new(|_e| Ok(Some(Reply::new("context", "two")))));
/// let outcome = registry.fire("pre_llm_call", &[Field::str("session_id", "s")]);
/// assert_eq!(outcome, Outcome::Context(Some("one\n\ntwo".into())));
/// ```
#[derive(Default)]
pub struct Registry {
    /// One slot per hook of this interface version, in `HOOKS` order, so a typed dispatch
    /// finds its callbacks by a constant index rather than by hashing a name.
    known: Vec<HookEntries>,
    /// Hooks this interface version does not know (kept, as the reference keeps them).
    unknown: Vec<(String, HookEntries)>,
    trace: Option<Arc<dyn TraceSink>>,
    failures: Option<Arc<std::sync::atomic::AtomicU64>>,
    /// Request middleware, in registry order (see [`crate::middleware`]).
    middleware: crate::middleware::MiddlewareChain,
    /// Tools plugins offer the model (see [`crate::tools`]).
    tools: crate::tools::ToolRegistry,
    /// Slash commands plugins add (see [`crate::commands`]).
    commands: crate::commands::CommandRegistry,
    /// System prompt sections plugins add (see [`crate::prompt_sections`]).
    prompt_sections: crate::prompt_sections::PromptSections,
    /// Shadow hooks: run at their real moment with the real payload, their answers only
    /// recorded (see [`Registry::add_shadow`]).
    shadow: Shadows,
}

/// The shadow side of a registry: its hooks (a registry of their own), the plugins whose
/// callbacks go there, where their answers are recorded, and the thread that runs them.
#[derive(Default)]
struct Shadows {
    registry: Option<Arc<Registry>>,
    plugins: Vec<String>,
    sink: Option<Arc<dyn ShadowSink>>,
    // Behind an Arc, so that a registry holds no cell of its own: the compiler may then
    // treat a shared registry as unchanging, which the dispatch fast paths rely on.
    queue: Arc<std::sync::OnceLock<Option<std::sync::mpsc::SyncSender<ShadowJob>>>>,
    dropped: Arc<std::sync::atomic::AtomicU64>,
    /// Firings handed to the shadow thread and not yet recorded.
    pending: Arc<std::sync::atomic::AtomicUsize>,
    /// What each shadow callback answered at the firing being run (the shadow registry's
    /// trace; one shadow thread, so one firing at a time).
    answers: Arc<std::sync::Mutex<Vec<FiringRecord>>>,
}

/// A firing waiting for the shadow hooks.
struct ShadowJob {
    hook: String,
    /// The payload's fields as JSON, for the record.
    json: serde_json::Map<String, serde_json::Value>,
    /// The same fields, for the shadow callbacks.
    payload: crate::payload::OwnedPayload,
    real: Outcome,
}

/// How many firings may wait for the shadow hooks; past it a firing's shadow run is
/// skipped, and counted ([`Registry::shadow_dropped`]), so a slow shadow hook never holds
/// up the agent or its memory.
const SHADOW_QUEUE: usize = 256;

/// What a shadow hook would have done at one firing, beside what was done.
#[derive(Clone, Debug)]
pub struct ShadowRecord {
    /// The hook.
    pub hook: String,
    /// The payload's fields, as shell hooks receive them.
    pub payload: serde_json::Map<String, serde_json::Value>,
    /// What the shadow hooks together would have decided.
    pub shadow: Outcome,
    /// What the deciding hooks decided.
    pub real: Outcome,
    /// What each shadow callback answered, in registry order.
    pub callbacks: Vec<FiringRecord>,
}

/// Where shadow hooks' answers go (a log line, a file of records, a counter).
pub trait ShadowSink: Send + Sync {
    /// Called on the shadow thread, once per firing that had shadow hooks.
    fn record(&self, record: ShadowRecord);
}

/// One hook's callbacks and its combining rule.
struct HookEntries {
    kind: OutcomeKind,
    entries: Vec<Entry>,
    /// What marks each entry as running (see [`crate::fatal`]), by position.
    marks: Vec<&'static Mark>,
    /// Whether any entry is out of process: kept up to date by `add`, so a firing of
    /// native callbacks only does not scan the list to find out.
    has_external: bool,
    /// Whether shadow hooks watch this hook: it fires even with no deciding callback.
    shadowed: bool,
}

impl HookEntries {
    fn new(kind: OutcomeKind) -> HookEntries {
        HookEntries {
            kind,
            entries: Vec::new(),
            marks: Vec::new(),
            has_external: false,
            shadowed: false,
        }
    }

    fn push(&mut self, hook: &str, entry: Entry) {
        self.has_external |= matches!(entry.callback, Callback::External(_) | Callback::Member(..));
        self.marks.push(Mark::intern(&entry.label, hook));
        self.entries.push(entry);
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// The request middleware plugins registered, in registry order.
    ///
    /// ```
    /// let registry = hermes_host::registry::Registry::new();
    /// assert!(!registry.middleware().has(hermes_host::middleware::Kind::LlmRequest));
    /// ```
    pub fn middleware(&self) -> &crate::middleware::MiddlewareChain {
        &self.middleware
    }

    /// The tools plugins registered.
    pub fn tools(&self) -> &crate::tools::ToolRegistry {
        &self.tools
    }

    /// Adds a plugin tool.
    ///
    /// # Errors
    ///
    /// Another plugin has the name (see [`ToolRegistry::add`](crate::tools::ToolRegistry::add)).
    pub fn add_tool(
        &mut self,
        spec: crate::tools::ToolSpec,
        handler: Arc<dyn crate::tools::ToolHandler>,
    ) -> Result<(), String> {
        self.tools.add(spec, handler)
    }

    /// The slash commands plugins registered.
    pub fn commands(&self) -> &crate::commands::CommandRegistry {
        &self.commands
    }

    /// Adds a plugin slash command.
    ///
    /// # Errors
    ///
    /// The name is empty or taken (see
    /// [`CommandRegistry::add`](crate::commands::CommandRegistry::add)).
    pub fn add_command(
        &mut self,
        spec: crate::commands::CommandSpec,
        handler: Arc<dyn crate::commands::CommandHandler>,
    ) -> Result<(), String> {
        self.commands.add(spec, handler)
    }

    /// The system prompt sections plugins registered.
    pub fn prompt_sections(&self) -> &crate::prompt_sections::PromptSections {
        &self.prompt_sections
    }

    /// Adds a plugin's system prompt section.
    ///
    /// # Errors
    ///
    /// The section breaks the reference's rules or its id is taken (see
    /// [`PromptSections::add`](crate::prompt_sections::PromptSections::add)).
    pub fn add_prompt_section(
        &mut self,
        spec: crate::prompt_sections::SectionSpec,
        source: Arc<dyn crate::prompt_sections::SectionSource>,
    ) -> Result<(), String> {
        self.prompt_sections.add(spec, source)
    }

    /// Adds a middleware of `kind` after those already registered.
    pub fn add_middleware(
        &mut self,
        kind: crate::middleware::Kind,
        middleware: Arc<dyn crate::middleware::Middleware>,
    ) {
        self.middleware.push(kind, middleware);
    }

    /// Appends an entry to `hook`'s list. Unknown hook names are kept (never fired unless
    /// someone fires that name), as the reference does.
    pub fn add(&mut self, hook: &str, entry: Entry) {
        if self.is_shadow_source(&entry.source) {
            self.add_shadow(hook, entry);
            return;
        }
        self.ensure_known();
        match hooks::HOOKS.iter().position(|h| h.name == hook) {
            Some(i) => self.known[i].push(hook, entry),
            None => match self.unknown.iter_mut().find(|(name, _)| name == hook) {
                Some((_, slot)) => slot.push(hook, entry),
                None => {
                    let mut slot = HookEntries::new(OutcomeKind::Observer);
                    slot.push(hook, entry);
                    self.unknown.push((hook.to_string(), slot));
                }
            },
        }
    }

    fn ensure_known(&mut self) {
        if self.known.is_empty() {
            self.known = hooks::HOOKS
                .iter()
                .map(|h| HookEntries::new(h.outcome))
                .collect();
        }
    }

    /// Makes the callbacks of plugins `names` shadow hooks (`plugins.shadow` of
    /// `config.yaml`): call before the plugins load.
    pub fn set_shadow_plugins(&mut self, names: Vec<String>) {
        self.shadow.plugins = names;
    }

    /// Where shadow hooks' answers are recorded; without a sink they are only logged.
    pub fn set_shadow_sink(&mut self, sink: Arc<dyn ShadowSink>) {
        self.shadow.sink = Some(sink);
    }

    /// Firings whose shadow hooks did not run because the shadow queue was full.
    pub fn shadow_dropped(&self) -> u64 {
        self.shadow
            .dropped
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits at most `within` for the shadow hooks to finish what they were handed (a run
    /// about to exit), and returns how many firings they have not recorded yet.
    pub fn flush_shadows(&self, within: std::time::Duration) -> usize {
        let until = Instant::now() + within;
        loop {
            let pending = self
                .shadow
                .pending
                .load(std::sync::atomic::Ordering::Acquire);
            if pending == 0 || Instant::now() >= until {
                return pending;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The shadow hooks, when there are any.
    pub fn shadows(&self) -> Option<&Registry> {
        self.shadow.registry.as_deref()
    }

    fn is_shadow_source(&self, source: &Source) -> bool {
        match source {
            Source::Plugin(name) | Source::Python(name) => {
                self.shadow.plugins.iter().any(|p| **p == **name)
            }
            Source::Shell | Source::Host => false,
        }
    }

    /// Adds `entry` as a shadow hook of `hook`: it runs at each firing of the hook, after
    /// the deciding callbacks and on a thread of its own, with the same payload; what it
    /// answers is recorded (see [`set_shadow_sink`](Registry::set_shadow_sink)) and never
    /// applied, and its time and failures never reach the firing.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use hermes_host::registry::{Callback, Entry, Registry, ShadowRecord, ShadowSink, Source, ToolVerdict};
    /// use hermes_hooks_abi::{core::Reply, hooks::payload::PreToolCallEvent};
    /// struct Seen(Mutex<Vec<ShadowRecord>>);
    /// impl ShadowSink for Seen {
    ///     fn record(&self, record: ShadowRecord) { self.0.lock().unwrap().push(record); }
    /// }
    /// let seen = Arc::new(Seen(Mutex::new(Vec::new())));
    /// let mut registry = Registry::new();
    /// registry.set_shadow_sink(seen.clone());
    /// let block: Arc<hermes_host::registry::InProcessFn> = Arc::new(|_e| Ok(Some(Reply::new("block", "too strict?"))));
    /// registry.add_shadow("pre_tool_call", Entry { source: Source::Host, label: "host::strict".into(), callback: Callback::InProcess(block) });
    /// let verdict = registry.pre_tool_call(&PreToolCallEvent { tool_name: "terminal", args: "{}", ..Default::default() });
    /// assert_eq!(verdict, ToolVerdict::default(), "a shadow hook decides nothing");
    /// for _ in 0..200 {
    ///     if !seen.0.lock().unwrap().is_empty() { break; }
    ///     std::thread::sleep(std::time::Duration::from_millis(10));
    /// }
    /// assert_eq!(seen.0.lock().unwrap()[0].callbacks[0].callback, "host::strict");
    /// ```
    pub fn add_shadow(&mut self, hook: &str, entry: Entry) {
        self.mark_shadowed(hook);
        match self.shadow_registry_mut() {
            Some(shadow) => shadow.add(hook, entry),
            None => tracing::warn!(
                "shadow hook {} for {hook} added after the registry was shared; it does not run",
                entry.label
            ),
        }
    }

    /// The shadow registry, made on first use, with each callback's answer traced.
    fn shadow_registry_mut(&mut self) -> Option<&mut Registry> {
        let answers = self.shadow.answers.clone();
        let shadow = self.shadow.registry.get_or_insert_with(|| {
            let mut registry = Registry::new();
            registry.set_trace(answers);
            Arc::new(registry)
        });
        Arc::get_mut(shadow)
    }

    fn mark_shadowed(&mut self, hook: &str) {
        self.ensure_known();
        if let Some(i) = hooks::HOOKS.iter().position(|h| h.name == hook) {
            self.known[i].shadowed = true;
        }
    }

    /// Hands a firing of `hook` to the shadow hooks, when any watch it: a copy of its
    /// payload and the real outcome go to the shadow thread, and the firing goes on.
    fn shadow_fire(&self, hook: &str, fields: &[Field<'_>], real: &Outcome) {
        let Some(shadow) = &self.shadow.registry else {
            return;
        };
        if !shadow.has(hook) {
            return;
        }
        let queue = self.shadow.queue.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::sync_channel::<ShadowJob>(SHADOW_QUEUE);
            let shadow = shadow.clone();
            let sink = self.shadow.sink.clone();
            let pending = self.shadow.pending.clone();
            let answers = self.shadow.answers.clone();
            std::thread::Builder::new()
                .name("hermes-shadow".into())
                .spawn(move || {
                    for job in rx {
                        run_shadow(&shadow, &answers, sink.as_deref(), job);
                        pending.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    }
                })
                .ok()
                .map(|_| tx)
        });
        let Some(queue) = queue else {
            return;
        };
        let json: serde_json::Map<String, serde_json::Value> = fields
            .iter()
            .map(|f| (f.name.as_str().to_string(), field_json(&f.value)))
            .collect();
        let job = ShadowJob {
            hook: hook.to_string(),
            payload: crate::payload::OwnedPayload::from_json(
                hook,
                &serde_json::Value::Object(json.clone()),
            ),
            json,
            real: real.clone(),
        };
        self.shadow
            .pending
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        if queue.try_send(job).is_err() {
            self.shadow
                .pending
                .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
            self.shadow
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The slot of `hook`, if anything was registered for it.
    fn slot(&self, hook: &str) -> Option<&HookEntries> {
        match hooks::HOOKS.iter().position(|h| h.name == hook) {
            Some(i) => self.known.get(i),
            None => self
                .unknown
                .iter()
                .find(|(name, _)| name == hook)
                .map(|(_, slot)| slot),
        }
    }

    fn slot_mut(&mut self, hook: &str) -> Option<&mut HookEntries> {
        match hooks::HOOKS.iter().position(|h| h.name == hook) {
            Some(i) => self.known.get_mut(i),
            None => self
                .unknown
                .iter_mut()
                .find(|(name, _)| name == hook)
                .map(|(_, slot)| slot),
        }
    }

    /// Appends a native plugin callback.
    pub fn add_native(
        &mut self,
        hook: &str,
        plugin: &str,
        callback_name: &str,
        callback: HookCallbackBox,
    ) {
        let label = format!("{plugin}::{callback_name}");
        self.add(
            hook,
            Entry {
                source: Source::Plugin(plugin.into()),
                label,
                callback: Callback::Native(callback),
            },
        );
    }

    /// Appends an in-process closure.
    pub fn add_in_process(&mut self, hook: &str, name: &str, callback: Arc<InProcessFn>) {
        self.add(
            hook,
            Entry {
                source: Source::Host,
                label: format!("host::{name}"),
                callback: Callback::InProcess(callback),
            },
        );
    }

    /// Appends an out-of-process hook.
    pub fn add_external(
        &mut self,
        hook: &str,
        source: Source,
        label: String,
        hook_impl: Arc<dyn ExternalHook>,
    ) {
        self.add(
            hook,
            Entry {
                source,
                label,
                callback: Callback::External(hook_impl),
            },
        );
    }

    /// Appends the callbacks of a group that answers together, one entry per label, in
    /// order (see [`ExternalGroup`]): `labels[i]` is the callback whose answer is
    /// `run_all(..)[i]`.
    pub fn add_group(
        &mut self,
        hook: &str,
        source: Source,
        labels: Vec<String>,
        group: Arc<dyn ExternalGroup>,
    ) {
        if self.is_shadow_source(&source) {
            // A shadow plugin's group answers in the shadow registry, never joined with a
            // deciding neighbour.
            self.mark_shadowed(hook);
            if let Some(shadow) = self.shadow_registry_mut() {
                shadow.add_group(hook, source, labels, group);
            }
            return;
        }
        // Joined with the group just before it in this hook's order when the two can answer
        // together: its entries move to the joined group, and these follow them.
        let mut group = group;
        let mut first_member = 0;
        if let Some(slot) = self.slot_mut(hook) {
            if let Some(Callback::Member(previous, _)) = slot.entries.last().map(|e| &e.callback) {
                if let Some(joined) = previous.join(&*group) {
                    let previous = previous.clone();
                    for entry in slot.entries.iter_mut().rev() {
                        match &entry.callback {
                            Callback::Member(g, k) if Arc::ptr_eq(g, &previous) => {
                                first_member = first_member.max(k + 1);
                                entry.callback = Callback::Member(joined.clone(), *k);
                            }
                            _ => break,
                        }
                    }
                    group = joined;
                }
            }
        }
        for (member, label) in labels.into_iter().enumerate() {
            self.add(
                hook,
                Entry {
                    source: source.clone(),
                    label,
                    callback: Callback::Member(group.clone(), first_member + member),
                },
            );
        }
    }

    /// Sends a [`FiringRecord`] for every callback run to `sink` from now on.
    pub fn set_trace(&mut self, sink: Arc<dyn TraceSink>) {
        self.trace = Some(sink);
    }

    /// Counts in `counter` every callback answer that is a failure (an error or a caught
    /// panic) from now on. Costs nothing while callbacks succeed; a benchmark uses it.
    pub fn count_failures(&mut self, counter: Arc<std::sync::atomic::AtomicU64>) {
        self.failures = Some(counter);
    }

    /// The entries of `hook`, in registry order.
    pub fn entries(&self, hook: &str) -> &[Entry] {
        self.slot(hook).map_or(&[], |h| h.entries.as_slice())
    }

    /// Every hook name with at least one callback, sorted.
    pub fn hook_names(&self) -> Vec<&str> {
        let known = hooks::HOOKS
            .iter()
            .zip(&self.known)
            .filter(|(_, slot)| !slot.entries.is_empty())
            .map(|(h, _)| h.name);
        let mut names: Vec<&str> = known
            .chain(self.unknown.iter().map(|(name, _)| name.as_str()))
            .collect();
        names.sort_unstable();
        names
    }

    /// The positions in `hook`'s list that [`Registry::observe_one`] runs: every callback,
    /// except that callbacks answering together as a group (a Python plugin's) count once,
    /// at their first member.
    pub fn observer_positions(&self, hook: &str) -> Vec<usize> {
        self.entries(hook)
            .iter()
            .enumerate()
            .filter(|(_, e)| !matches!(e.callback, Callback::Member(_, k) if k > 0))
            .map(|(i, _)| i)
            .collect()
    }

    /// Fires only the callback at `position` of `hook`'s list (see
    /// [`Registry::observer_positions`]) as an observer: its answer is ignored, a failure
    /// logged and counted. This is how each observer gets a queue of its own, so that a
    /// slow one never holds up the others (see `crate::stream`).
    pub fn observe_one(&self, hook: &str, position: usize, fields: &[Field<'_>]) {
        let Some(slot) = self.slot(hook) else {
            return;
        };
        let (Some(entry), Some(&mark)) = (slot.entries.get(position), slot.marks.get(position))
        else {
            return;
        };
        let view = EventView::new(hook, fields, no_host_calls());
        let mut ignore = |_: &Entry, _: Reply| {};
        match &entry.callback {
            Callback::Member(group, 0) => {
                let answers = crate::cpu_slots::waiting(|| group.run_all(&view));
                for (k, answer) in answers.into_iter().enumerate() {
                    let member = slot.entries.get(position + k).unwrap_or(entry);
                    self.deliver(&view, member, answer, &mut ignore);
                }
            }
            Callback::Member(..) => {}
            _ => {
                let answer = self.call_inline(&view, entry, mark);
                self.deliver(&view, entry, answer, &mut ignore);
            }
        }
    }

    /// Fires only the callback at `position` of `hook`'s list and combines its answer by
    /// the hook's rule, for a host that keeps a list of callbacks of its own and combines
    /// their answers itself (Hermes Agent, through the `hermes-hooks` Python package). A
    /// callback that failed (an error, a panic, a crash of its worker) is counted as in a
    /// whole firing and its message is returned as the error, not logged: the host reports
    /// it in its own way (Hermes logs `Hook '<hook>' callback <name> raised: ...` itself,
    /// which a line of the library's would only repeat).
    ///
    /// Callbacks answering together as a group (a Python plugin's) answer here as one
    /// whole firing of the group would: only their first position fires them.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hermes_host::registry::{Outcome, Registry};
    /// use hermes_hooks_abi::core::{Field, Reply};
    ///
    /// let mut registry = Registry::new();
    /// registry.add_in_process("pre_llm_call", "a", Arc::new(|_e| Ok(Some(Reply::new("context", "from a")))));
    /// registry.add_in_process("pre_llm_call", "b", Arc::new(|_e| Err("b is broken".into())));
    /// let fields: [Field<'_>; 0] = [];
    /// let first = registry.fire_one("pre_llm_call", 0, &fields, hermes_hooks_abi::core::no_host_calls());
    /// assert_eq!(first, Ok(Outcome::Context(Some("from a".into()))));
    /// let second = registry.fire_one("pre_llm_call", 1, &fields, hermes_hooks_abi::core::no_host_calls());
    /// assert_eq!(second, Err("b is broken".to_string()));
    /// ```
    pub fn fire_one<'a>(
        &self,
        hook: &'a str,
        position: usize,
        fields: &'a [Field<'a>],
        host: HostCallsRef<'a>,
    ) -> Result<Outcome, String> {
        let kind = hooks::spec(hook).map_or(OutcomeKind::Observer, |s| s.outcome);
        let Some(slot) = self.slot(hook) else {
            return Ok(Outcome::empty(kind));
        };
        let (Some(entry), Some(&mark)) = (slot.entries.get(position), slot.marks.get(position))
        else {
            return Ok(Outcome::empty(slot.kind));
        };
        let view = EventView::new(hook, fields, host);
        let mut combiner = Combiner::new(slot.kind);
        let mut failed = None;
        let mut take = |entry: &Entry, answer: HookResult| match answer {
            Err(message) => {
                self.count_failure();
                failed.get_or_insert(message);
            }
            Ok(Some(reply)) => combiner.take(hook, entry, reply),
            Ok(None) => {}
        };
        match &entry.callback {
            Callback::Member(group, 0) => {
                let answers = crate::cpu_slots::waiting(|| group.run_all(&view));
                for (k, answer) in answers.into_iter().enumerate() {
                    take(slot.entries.get(position + k).unwrap_or(entry), answer);
                }
            }
            Callback::Member(..) => {}
            _ => take(entry, self.call_inline(&view, entry, mark)),
        }
        match failed {
            Some(message) => Err(message),
            None => Ok(combiner.finish()),
        }
    }

    /// Whether any callback is registered for `hook`.
    pub fn has(&self, hook: &str) -> bool {
        !self.entries(hook).is_empty() || self.slot(hook).is_some_and(|s| s.shadowed)
    }

    /// Fires `hook` with `fields` and no host capabilities, and combines the answers.
    pub fn fire(&self, hook: &str, fields: &[Field<'_>]) -> Outcome {
        self.fire_with(hook, fields, no_host_calls())
    }

    /// Fires `hook` with `fields`, offering `host` capabilities to callbacks, and combines
    /// the answers by the hook's rule (see the module doc). A hook this interface version
    /// does not know is treated as an observer.
    ///
    /// The view a callback sees is invariant in its lifetime, so the hook name, the fields
    /// and the capabilities share one lifetime: build `host` right before the call.
    pub fn fire_with<'a>(
        &self,
        hook: &'a str,
        fields: &'a [Field<'a>],
        host: HostCallsRef<'a>,
    ) -> Outcome {
        match self.slot(hook) {
            Some(slot) => self.fire_slot(slot, hook, fields, host),
            None => Outcome::empty(hooks::spec(hook).map_or(OutcomeKind::Observer, |s| s.outcome)),
        }
    }

    /// The slot of the hook at position `index` of `HOOKS`, when it has a callback. The
    /// typed methods ask before they build the payload, so a hook nobody registered costs
    /// one branch.
    #[inline]
    fn live(&self, index: usize) -> Option<&HookEntries> {
        self.known
            .get(index)
            .filter(|slot| !slot.entries.is_empty() || slot.shadowed)
    }

    fn fire_slot<'a>(
        &self,
        slot: &HookEntries,
        hook: &'a str,
        fields: &'a [Field<'a>],
        host: HostCallsRef<'a>,
    ) -> Outcome {
        if slot.entries.is_empty() {
            let outcome = Outcome::empty(slot.kind);
            if slot.shadowed {
                self.shadow_fire(hook, fields, &outcome);
            }
            return outcome;
        }
        let view = EventView::new(hook, fields, host);
        let mut combiner = Combiner::new(slot.kind);
        self.each_answer(&view, slot, |entry, reply| {
            combiner.take(hook, entry, reply)
        });
        let outcome = combiner.finish();
        if slot.shadowed {
            self.shadow_fire(hook, fields, &outcome);
        }
        outcome
    }

    /// `pre_tool_call`: may the tool run, and with which arguments?
    ///
    /// This is the hottest path of an agent (every tool call), so it folds the answers
    /// straight into the verdict it returns rather than through an [`Outcome`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hermes_host::registry::Registry;
    /// use hermes_hooks_abi::{core::Reply, hooks::payload::PreToolCallEvent};
    ///
    /// let mut registry = Registry::new();
    /// registry.add_in_process("pre_tool_call", "guard", Arc::new(|_e| Ok(Some(Reply::new("block", "no")))));
    /// let verdict = registry.pre_tool_call(&PreToolCallEvent { tool_name: "terminal", args: "{}", ..Default::default() });
    /// assert_eq!(verdict.blocked.unwrap().message, "no");
    /// ```
    #[inline]
    pub fn pre_tool_call(&self, event: &payload::PreToolCallEvent<'_>) -> ToolVerdict {
        // The check is inlined into the caller and the firing is not: with nothing
        // registered, a tool call pays a load and a branch, not a call and a large frame.
        match self.live(payload::PreToolCallEvent::INDEX) {
            None => ToolVerdict::default(),
            Some(slot) => self.fire_tool(slot, event),
        }
    }

    #[inline(never)]
    fn fire_tool(&self, slot: &HookEntries, event: &payload::PreToolCallEvent<'_>) -> ToolVerdict {
        let mut verdict = ToolVerdict::default();
        let hook = payload::PreToolCallEvent::HOOK;
        let fields = event.fields();
        let view = EventView::new(hook, &fields, no_host_calls());
        self.each_answer(&view, slot, |entry, reply| {
            take_tool(&mut verdict, hook, entry, reply)
        });
        if slot.shadowed {
            self.shadow_fire(hook, &fields, &Outcome::Tool(verdict.clone()));
        }
        verdict
    }

    /// `pre_llm_call`: the context to append to the user message, if any.
    pub fn pre_llm_call(&self, event: &payload::PreLlmCallEvent<'_>) -> Option<String> {
        let slot = self.live(payload::PreLlmCallEvent::INDEX)?;
        self.fire_slot(
            slot,
            payload::PreLlmCallEvent::HOOK,
            &event.fields(),
            no_host_calls(),
        )
        .into_text()
    }

    /// `transform_tool_result`: the replacement result, if any.
    pub fn transform_tool_result(
        &self,
        event: &payload::TransformToolResultEvent<'_>,
    ) -> Option<String> {
        let slot = self.live(payload::TransformToolResultEvent::INDEX)?;
        self.fire_slot(
            slot,
            payload::TransformToolResultEvent::HOOK,
            &event.fields(),
            no_host_calls(),
        )
        .into_text()
    }

    /// `transform_terminal_output`: the replacement output, if any.
    pub fn transform_terminal_output(
        &self,
        event: &payload::TransformTerminalOutputEvent<'_>,
    ) -> Option<String> {
        let slot = self.live(payload::TransformTerminalOutputEvent::INDEX)?;
        self.fire_slot(
            slot,
            payload::TransformTerminalOutputEvent::HOOK,
            &event.fields(),
            no_host_calls(),
        )
        .into_text()
    }

    /// `transform_llm_output`: the replacement response, if any.
    pub fn transform_llm_output(
        &self,
        event: &payload::TransformLlmOutputEvent<'_>,
    ) -> Option<String> {
        let slot = self.live(payload::TransformLlmOutputEvent::INDEX)?;
        self.fire_slot(
            slot,
            payload::TransformLlmOutputEvent::HOOK,
            &event.fields(),
            no_host_calls(),
        )
        .into_text()
    }

    /// `pre_verify`: the instruction that keeps the agent working, when a hook answered one
    /// (the host bounds how often in a row; see `agent.max_verify_nudges`).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hermes_host::registry::Registry;
    /// use hermes_hooks_abi::{core::Reply, hooks::payload::PreVerifyEvent};
    /// let mut registry = Registry::new();
    /// registry.add_in_process("pre_verify", "tests", Arc::new(|_e| Ok(Some(Reply::new("continue", "run the tests")))));
    /// let asked = registry.pre_verify(&PreVerifyEvent { attempt: 0, ..Default::default() });
    /// assert_eq!(asked.unwrap().message, "run the tests");
    /// ```
    pub fn pre_verify(&self, event: &payload::PreVerifyEvent<'_>) -> Option<Continue> {
        let slot = self.live(payload::PreVerifyEvent::INDEX)?;
        match self.fire_slot(
            slot,
            payload::PreVerifyEvent::HOOK,
            &event.fields(),
            no_host_calls(),
        ) {
            Outcome::Verify(asked) => asked,
            _ => None,
        }
    }

    /// `pre_gateway_dispatch`: what to do with an incoming message.
    ///
    /// `host` offers the `gateway.send` and `session.append` capabilities to the callbacks.
    pub fn pre_gateway_dispatch<H: HostCalls>(
        &self,
        event: &payload::GatewayDispatchEvent<'_>,
        host: &H,
    ) -> DispatchVerdict {
        let Some(slot) = self.live(payload::GatewayDispatchEvent::INDEX) else {
            return DispatchVerdict::Dispatch;
        };
        let fields = event.fields();
        let host = HostCalls_TO::from_const(host, abi_stable::sabi_trait::TD_Opaque);
        match self.fire_slot(slot, payload::GatewayDispatchEvent::HOOK, &fields, host) {
            Outcome::Dispatch(verdict) => verdict,
            _ => DispatchVerdict::Dispatch,
        }
    }

    /// Calls every entry of `slot` in registry order and hands each reply to `take`, in that
    /// order; a failure is logged (and counted) here, and no opinion is skipped.
    /// Out-of-process hooks are started first, concurrently by priority group, while native
    /// callbacks run inline on this thread.
    ///
    /// The loop over native callbacks is the cost every firing pays per callback, so it does
    /// the least it can: the running-plugin mark, the call, and one test of the answer's
    /// discriminant. Everything an actual answer needs is behind the cold [`Self::deliver`].
    #[inline]
    fn each_answer(
        &self,
        view: &EventView<'_>,
        slot: &HookEntries,
        mut take: impl FnMut(&Entry, Reply),
    ) {
        if !slot.has_external && self.trace.is_none() {
            let marks = Firing::begin();
            for (entry, &mark) in slot.entries.iter().zip(&slot.marks) {
                let answer = match &entry.callback {
                    Callback::Native(cb) => {
                        marks.enter(mark);
                        let answer = cb.call(view);
                        marks.leave();
                        match answer {
                            RResult::ROk(ROption::RNone) => continue,
                            RResult::ROk(ROption::RSome(reply)) => Ok(Some(reply)),
                            RResult::RErr(message) => Err(message.into_string()),
                        }
                    }
                    _ => self.call_inline(view, entry, mark),
                };
                self.deliver(view, entry, answer, &mut take);
            }
            return;
        }
        self.each_answer_traced(view, slot, take);
    }

    /// [`Self::each_answer`] when out-of-process hooks or a trace are involved: kept out of
    /// line, so that its frame and registers do not weigh on the native loop.
    #[inline(never)]
    fn each_answer_traced(
        &self,
        view: &EventView<'_>,
        slot: &HookEntries,
        mut take: impl FnMut(&Entry, Reply),
    ) {
        let entries = slot.entries.as_slice();
        let mut answers: Vec<Option<(HookResult, Duration)>> =
            entries.iter().map(|_| None).collect();
        if slot.has_external {
            // Out-of-process hooks wait on another process or a server: the thread's CPU
            // slot, if it has one, is someone else's meanwhile.
            crate::cpu_slots::waiting(|| run_externals(view, entries, &mut answers));
        }
        for ((entry, &mark), slot) in entries.iter().zip(&slot.marks).zip(answers) {
            let answer = match slot {
                Some((answer, took)) => {
                    if let Some(trace) = &self.trace {
                        trace.record(record(view, entry, &answer, took));
                    }
                    answer
                }
                None => self.call_inline(view, entry, mark),
            };
            self.deliver(view, entry, answer, &mut take);
        }
    }

    /// Hands a reply to `take`, or logs and counts a failure.
    #[cold]
    #[inline(never)]
    fn deliver(
        &self,
        view: &EventView<'_>,
        entry: &Entry,
        answer: HookResult,
        take: &mut impl FnMut(&Entry, Reply),
    ) {
        match answer {
            Ok(Some(reply)) => take(entry, reply),
            Ok(None) => {}
            Err(message) => {
                self.count_failure();
                tracing::warn!(
                    "Hook '{}' callback {} raised: {message}",
                    view.hook,
                    entry.label
                );
            }
        }
    }

    fn count_failure(&self) {
        if let Some(counter) = &self.failures {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn call_inline(&self, view: &EventView<'_>, entry: &Entry, mark: &'static Mark) -> HookResult {
        let started = self.trace.as_ref().map(|_| Instant::now());
        let answer = match &entry.callback {
            Callback::Native(cb) => {
                let marks = Firing::begin();
                marks.enter(mark);
                let answer = cb.call(view);
                marks.leave();
                answer
                    .map(Into::into)
                    .map_err(RString::into_string)
                    .into_result()
            }
            Callback::InProcess(f) => {
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(view))) {
                    Ok(answer) => answer,
                    Err(payload) => Err(panic_text(payload.as_ref())),
                }
            }
            Callback::External(ext) => {
                if ext.matches(view) {
                    crate::cpu_slots::waiting(|| ext.run(view))
                } else {
                    Ok(None)
                }
            }
            // Answered with the group's first member, in `run_externals`.
            Callback::Member(..) => Ok(None),
        };
        if let (Some(trace), Some(started)) = (&self.trace, started) {
            trace.record(record(view, entry, &answer, started.elapsed()));
        }
        answer
    }
}

fn record(
    view: &EventView<'_>,
    entry: &Entry,
    answer: &HookResult,
    duration: Duration,
) -> FiringRecord {
    let (decision, error) = match answer {
        Ok(None) => ("no opinion".to_string(), None),
        Ok(Some(reply)) if reply.text.is_empty() => (reply.action.to_string(), None),
        Ok(Some(reply)) => (format!("{}: {}", reply.action, reply.text), None),
        Err(e) => ("failed".to_string(), Some(e.clone())),
    };
    FiringRecord {
        system: entry.source.system(),
        hook: view.hook.to_string(),
        callback: entry.label.clone(),
        decision,
        duration,
        error,
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-string payload".to_string())
}

/// Runs the matching external entries, group by group in ascending priority, each group
/// concurrently (at most [`MAX_PARALLEL_EXTERNAL`] at once), and stores their answers.
fn run_externals(
    view: &EventView<'_>,
    entries: &[Entry],
    answers: &mut [Option<(HookResult, Duration)>],
) {
    let mut jobs: Vec<(usize, i64, Job<'_>)> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        match &entry.callback {
            Callback::External(ext) => {
                if ext.matches(view) {
                    jobs.push((i, ext.priority(), Job::One(ext)));
                } else {
                    answers[i] = Some((Ok(None), Duration::ZERO));
                }
            }
            // A group is one job, at its first member; the members after it are answered
            // by that job.
            Callback::Member(group, 0) => jobs.push((i, 0, Job::Group(group))),
            _ => {}
        }
    }
    jobs.sort_by_key(|(i, priority, _)| (*priority, *i));
    for batch in jobs.chunk_by(|a, b| a.1 == b.1) {
        if let [(i, _, job)] = batch {
            let started = Instant::now();
            let answer = job.run(view);
            store(entries, answers, *i, answer, started.elapsed());
            continue;
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let results: Vec<std::sync::Mutex<Option<JobAnswers>>> =
            batch.iter().map(|_| std::sync::Mutex::new(None)).collect();
        // The helpers work for this call: the workers it is already talking to stay refused.
        let held = crate::reentry::held();
        std::thread::scope(|scope| {
            for _ in 0..batch.len().min(MAX_PARALLEL_EXTERNAL) {
                let held = held.clone();
                scope.spawn(|| {
                    crate::reentry::adopt(held);
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((_, _, job)) = batch.get(k) else {
                            break;
                        };
                        let started = Instant::now();
                        let answer = job.run(view);
                        if let Ok(mut slot) = results[k].lock() {
                            *slot = Some((answer, started.elapsed()));
                        }
                    }
                });
            }
        });
        for ((i, _, _), result) in batch.iter().zip(results) {
            let (answer, took) = result.into_inner().ok().flatten().unwrap_or_else(|| {
                (
                    vec![Err("the hook's worker thread panicked".into())],
                    Duration::ZERO,
                )
            });
            store(entries, answers, *i, answer, took);
        }
    }
}

/// What one job answered, and how long it took.
type JobAnswers = (Vec<HookResult>, Duration);

/// One unit of out-of-process work in a firing: a hook, or a group answering together.
enum Job<'a> {
    One(&'a Arc<dyn ExternalHook>),
    Group(&'a Arc<dyn ExternalGroup>),
}

impl Job<'_> {
    fn run(&self, view: &EventView<'_>) -> Vec<HookResult> {
        match self {
            Job::One(ext) => vec![ext.run(view)],
            Job::Group(group) => group.run_all(view),
        }
    }
}

/// Runs the shadow hooks of one firing and records what they would have done.
fn run_shadow(
    shadow: &Registry,
    answers: &std::sync::Mutex<Vec<FiringRecord>>,
    sink: Option<&dyn ShadowSink>,
    job: ShadowJob,
) {
    let fields = job.payload.fields();
    if let Ok(mut answers) = answers.lock() {
        answers.clear();
    }
    let outcome = shadow.fire(&job.hook, &fields);
    let callbacks = answers
        .lock()
        .map(|mut a| std::mem::take(&mut *a))
        .unwrap_or_default();
    let record = ShadowRecord {
        hook: job.hook,
        payload: job.json,
        shadow: outcome,
        real: job.real,
        callbacks,
    };
    match sink {
        Some(sink) => sink.record(record),
        None => tracing::info!("shadow {}: {:?}", record.hook, record.shadow),
    }
}

/// A field's value as JSON.
fn field_json(value: &FieldValue<'_>) -> serde_json::Value {
    match value {
        FieldValue::Null => serde_json::Value::Null,
        FieldValue::Bool(b) => serde_json::Value::Bool(*b),
        FieldValue::Int(i) => serde_json::Value::from(*i),
        FieldValue::Float(f) => serde_json::Value::from(*f),
        FieldValue::Str(s) => serde_json::Value::String(s.as_str().to_string()),
        FieldValue::Json(s) => serde_json::from_str(s.as_str())
            .unwrap_or_else(|_| serde_json::Value::String(s.as_str().to_string())),
    }
}

/// Stores a job's answers from entry `first` on: one for a hook; one per member for a group,
/// over the consecutive members of that group (a member without an answer has no opinion).
fn store(
    entries: &[Entry],
    answers: &mut [Option<(HookResult, Duration)>],
    first: usize,
    results: Vec<HookResult>,
    took: Duration,
) {
    let mut results = results.into_iter();
    answers[first] = Some((results.next().unwrap_or(Ok(None)), took));
    let Callback::Member(group, _) = &entries[first].callback else {
        return;
    };
    for (offset, (entry, slot)) in entries[first + 1..]
        .iter()
        .zip(&mut answers[first + 1..])
        .enumerate()
    {
        match &entry.callback {
            Callback::Member(g, member) if Arc::ptr_eq(g, group) && *member == offset + 1 => {
                // The group's time is its first member's; the others took none of their own.
                *slot = Some((results.next().unwrap_or(Ok(None)), Duration::ZERO));
            }
            _ => break,
        }
    }
}

/// The combined answer of one firing.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// An observer hook: answers are ignored.
    Observed,
    /// `pre_tool_call`.
    Tool(ToolVerdict),
    /// `pre_llm_call`: the joined context.
    Context(Option<String>),
    /// A transform: the replacement text.
    Replace(Option<String>),
    /// `pre_gateway_dispatch`.
    Dispatch(DispatchVerdict),
    /// `pre_verify`: the agent's next instruction, when a hook keeps it working.
    Verify(Option<Continue>),
}

/// A `pre_verify` hook that keeps the agent working.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Continue {
    /// The agent's next instruction.
    pub message: String,
    /// The callback's label.
    pub by: String,
}

impl Outcome {
    fn empty(kind: OutcomeKind) -> Outcome {
        Combiner::new(kind).finish()
    }

    /// The text of a `Context` or `Replace` outcome.
    ///
    /// ```
    /// use hermes_host::registry::Outcome;
    /// assert_eq!(Outcome::Replace(Some("x".into())).into_text(), Some("x".into()));
    /// assert_eq!(Outcome::Observed.into_text(), None);
    /// ```
    pub fn into_text(self) -> Option<String> {
        match self {
            Outcome::Context(text) | Outcome::Replace(text) => text,
            Outcome::Observed | Outcome::Tool(_) | Outcome::Dispatch(_) | Outcome::Verify(_) => {
                None
            }
        }
    }
}

/// Whether a tool may run, and with which argument changes.
///
/// Both parts are boxed: a verdict is returned by every `pre_tool_call`, and almost always
/// decides nothing, so it is two null words that need no out-of-line drop.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolVerdict {
    /// The first block, if any callback blocked.
    pub blocked: Option<Box<Blocked>>,
    /// The argument keys to merge over the original arguments (every modify, in registry
    /// order; a later one overrides an earlier one's key). `None` when nothing modified them.
    pub modified_args: Option<Box<serde_json::Map<String, serde_json::Value>>>,
}

impl ToolVerdict {
    /// `args` with the modifications merged over it (an object; a non-object becomes `{}`).
    ///
    /// ```
    /// use hermes_host::registry::ToolVerdict;
    /// let mut v = ToolVerdict::default();
    /// v.modified_args = Some(Box::new(serde_json::json!({"timeout": 5}).as_object().unwrap().clone()));
    /// let args = v.apply(&serde_json::json!({"command": "ls", "timeout": 60}));
    /// assert_eq!(args, serde_json::json!({"command": "ls", "timeout": 5}));
    /// ```
    pub fn apply(&self, args: &serde_json::Value) -> serde_json::Value {
        let mut merged = args.as_object().cloned().unwrap_or_default();
        if let Some(changes) = &self.modified_args {
            for (k, v) in changes.iter() {
                merged.insert(k.clone(), v.clone());
            }
        }
        serde_json::Value::Object(merged)
    }

    /// The `approve` that decided, when the first directive was one (interface 1.3): the
    /// call runs only once the user approves it; a denial, a timeout or no one to ask
    /// leaves it blocked, with [`ToolVerdict::error_result`].
    ///
    /// ```
    /// use hermes_host::registry::{Approval, Blocked, ToolVerdict};
    /// let asked = Blocked { message: "deploys need a human".into(), by: "g::f".into(), approval: Some(Approval::default()) };
    /// let v = ToolVerdict { blocked: Some(Box::new(asked)), modified_args: None };
    /// assert_eq!(v.approval().unwrap().message, "deploys need a human");
    /// ```
    pub fn approval(&self) -> Option<&Blocked> {
        self.blocked.as_deref().filter(|b| b.approval.is_some())
    }

    /// The tool result the model sees when the call is blocked: `{"error": "<message>"}`.
    ///
    /// ```
    /// use hermes_host::registry::{ToolVerdict, Blocked};
    /// let v = ToolVerdict { blocked: Some(Box::new(Blocked { message: "no é".into(), by: "g::f".into(), approval: None })), ..Default::default() };
    /// assert_eq!(v.error_result().unwrap(), r#"{"error": "no é"}"#);
    /// ```
    pub fn error_result(&self) -> Option<String> {
        let blocked = self.blocked.as_ref()?;
        Some(format!(
            "{{\"error\": {}}}",
            serde_json::Value::String(blocked.message.clone())
        ))
    }
}

/// A block, and who blocked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    /// The message the model sees.
    pub message: String,
    /// The callback's label.
    pub by: String,
    /// Set when the hook answered `approve` (interface 1.3): the call may run once the
    /// user approves it. A host without an approval step treats it as the block it reads
    /// as, which is the safe reading: the hook wanted a human to see the call.
    pub approval: Option<Approval>,
}

/// What a `pre_tool_call` hook's `approve` says beside its message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Approval {
    /// What an approval covers, when the hook said (`rule_key`).
    pub rule_key: Option<String>,
}

/// What to do with an incoming gateway message.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DispatchVerdict {
    /// No hook decided: dispatch normally.
    #[default]
    Dispatch,
    /// Drop the message.
    Skip {
        /// The reason the hook gave.
        reason: String,
        /// The callback's label.
        by: String,
    },
    /// Dispatch with this text instead.
    Rewrite {
        /// The new text.
        text: String,
        /// The callback's label.
        by: String,
    },
    /// Dispatch as is; a hook said so explicitly.
    Allow {
        /// The callback's label.
        by: String,
    },
}

impl DispatchVerdict {
    /// The callback that decided, when one did.
    ///
    /// ```
    /// use hermes_host::registry::DispatchVerdict;
    /// let v = DispatchVerdict::Allow { by: "p::cb".into() };
    /// assert_eq!(v.decided_by(), Some("p::cb"));
    /// assert_eq!(DispatchVerdict::Dispatch.decided_by(), None);
    /// ```
    pub fn decided_by(&self) -> Option<&str> {
        match self {
            DispatchVerdict::Dispatch => None,
            DispatchVerdict::Skip { by, .. }
            | DispatchVerdict::Rewrite { by, .. }
            | DispatchVerdict::Allow { by } => Some(by),
        }
    }
}

/// Folds answers into an [`Outcome`] by the hook's rule. One variant per rule, matched
/// without a catch-all arm: a new [`OutcomeKind`] does not compile until its rule is here.
/// Kept small, because it is built and returned on every dispatch.
enum Combiner {
    /// Return values are ignored.
    Observer,
    /// First block (with a message) wins; modifies merge in registry order.
    Tool(ToolVerdict),
    /// Every non-blank context, joined with a blank line at the end.
    Context(Vec<String>),
    /// First text wins; with `non_empty`, the first non-empty text.
    Replace {
        text: Option<String>,
        non_empty: bool,
    },
    /// First skip, rewrite or allow wins.
    Dispatch(Option<DispatchVerdict>),
    /// First continue with a message wins.
    Verify(Option<Continue>),
}

impl Combiner {
    fn new(kind: OutcomeKind) -> Combiner {
        match kind {
            OutcomeKind::Observer => Combiner::Observer,
            OutcomeKind::ToolDecision => Combiner::Tool(ToolVerdict::default()),
            OutcomeKind::Context => Combiner::Context(Vec::new()),
            OutcomeKind::Replace => Combiner::Replace {
                text: None,
                non_empty: false,
            },
            OutcomeKind::ReplaceNonEmpty => Combiner::Replace {
                text: None,
                non_empty: true,
            },
            OutcomeKind::Dispatch => Combiner::Dispatch(None),
            OutcomeKind::Verify => Combiner::Verify(None),
        }
    }

    fn take(&mut self, hook: &str, entry: &Entry, reply: Reply) {
        let act = reply.action.as_str();
        let unusable = |why: &str| unusable(hook, entry, why);
        match self {
            Combiner::Observer => {}
            Combiner::Tool(tool) => take_tool(tool, hook, entry, reply),
            Combiner::Context(contexts) => match act {
                action::CONTEXT if reply.text.trim().is_empty() => {}
                action::CONTEXT => contexts.push(reply.text.into_string()),
                other => unusable(&format!("action '{other}' does not apply to pre_llm_call")),
            },
            Combiner::Replace { text, non_empty } => match act {
                action::REPLACE => {
                    if text.is_none() && !(*non_empty && reply.text.is_empty()) {
                        *text = Some(reply.text.into_string());
                    }
                }
                other => unusable(&format!(
                    "action '{other}' does not apply to a transform hook"
                )),
            },
            Combiner::Verify(decided) => match act {
                actions::CONTINUE if reply.text.trim().is_empty() => {}
                actions::CONTINUE => {
                    if decided.is_none() {
                        *decided = Some(Continue {
                            message: reply.text.into_string(),
                            by: entry.label.clone(),
                        });
                    }
                }
                other => unusable(&format!("action '{other}' does not apply to pre_verify")),
            },
            Combiner::Dispatch(decided) => {
                // Every callback runs, as the reference's invoke_hook calls them all; only
                // the first decision counts, and a later one is worth a debug line.
                if let Some(first) = decided {
                    if [action::SKIP, action::REWRITE, action::ALLOW].contains(&act) {
                        tracing::debug!(
                            "Hook '{hook}' callback {} answered '{act}' after {} had decided; ignoring it",
                            entry.label,
                            first.decided_by().unwrap_or_default()
                        );
                    }
                    return;
                }
                let by = entry.label.clone();
                *decided = match act {
                    action::SKIP => Some(DispatchVerdict::Skip {
                        reason: reply.text.into_string(),
                        by,
                    }),
                    action::REWRITE => Some(DispatchVerdict::Rewrite {
                        text: reply.text.into_string(),
                        by,
                    }),
                    action::ALLOW => Some(DispatchVerdict::Allow { by }),
                    other => {
                        unusable(&format!(
                            "action '{other}' does not apply to pre_gateway_dispatch"
                        ));
                        None
                    }
                };
            }
        }
    }

    fn finish(self) -> Outcome {
        match self {
            Combiner::Observer => Outcome::Observed,
            Combiner::Tool(verdict) => Outcome::Tool(verdict),
            Combiner::Context(contexts) => Outcome::Context(if contexts.is_empty() {
                None
            } else {
                Some(contexts.join("\n\n"))
            }),
            Combiner::Replace { text, .. } => Outcome::Replace(text),
            Combiner::Dispatch(decided) => Outcome::Dispatch(decided.unwrap_or_default()),
            Combiner::Verify(decided) => Outcome::Verify(decided),
        }
    }
}

/// Logs an answer that does not fit its hook.
fn unusable(hook: &str, entry: &Entry, why: &str) {
    tracing::warn!(
        "Hook '{hook}' callback {} returned an unusable answer ({why}); ignoring it",
        entry.label
    );
}

/// Folds one `pre_tool_call` reply into `tool`: the first block (with a message) wins, and
/// modifies merge in registry order.
fn take_tool(tool: &mut ToolVerdict, hook: &str, entry: &Entry, reply: Reply) {
    match reply.action.as_str() {
        action::BLOCK if reply.text.trim().is_empty() => {
            unusable(hook, entry, "a block without a message")
        }
        action::BLOCK => {
            if tool.blocked.is_none() {
                tool.blocked = Some(Box::new(Blocked {
                    message: reply.text.into_string(),
                    by: entry.label.clone(),
                    approval: None,
                }));
            }
        }
        action::MODIFY => match serde_json::from_str::<serde_json::Value>(reply.json.as_str()) {
            Ok(serde_json::Value::Object(changes)) => {
                tool.modified_args
                    .get_or_insert_with(Default::default)
                    .extend(changes);
            }
            _ => unusable(hook, entry, "a modify whose args are not a JSON object"),
        },
        actions::APPROVE => {
            if tool.blocked.is_none() {
                let rule_key = serde_json::from_str::<serde_json::Value>(reply.json.as_str())
                    .ok()
                    .and_then(|v| v["rule_key"].as_str().map(str::to_string))
                    .filter(|k| !k.is_empty());
                let message = if reply.text.trim().is_empty() {
                    "a hook asks for approval".to_string()
                } else {
                    reply.text.into_string()
                };
                tool.blocked = Some(Box::new(Blocked {
                    message,
                    by: entry.label.clone(),
                    approval: Some(Approval { rule_key }),
                }));
            }
        }
        other => unusable(
            hook,
            entry,
            &format!("action '{other}' does not apply to pre_tool_call"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(act: &str, text: &str) -> Arc<InProcessFn> {
        let r = Reply::new(act, text);
        Arc::new(move |_e| Ok(Some(r.clone())))
    }

    #[test]
    fn the_first_block_or_approve_decides_and_an_approve_reads_as_a_block_to_a_host_without_a_gate()
    {
        let approve: Arc<InProcessFn> = Arc::new(|_e| {
            let mut r = Reply::new(actions::APPROVE, "deploys need a human");
            r.json = r#"{"rule_key": "deploy:prod"}"#.into();
            Ok(Some(r))
        });
        let mut first = Registry::new();
        first.add_in_process("pre_tool_call", "gate", approve.clone());
        first.add_in_process("pre_tool_call", "guard", reply("block", "no"));
        let v = first.pre_tool_call(&payload::PreToolCallEvent::default());
        let asked = v.approval().unwrap();
        assert_eq!(
            (asked.message.as_str(), asked.by.as_str()),
            ("deploys need a human", "host::gate")
        );
        assert_eq!(
            asked.approval.as_ref().unwrap().rule_key.as_deref(),
            Some("deploy:prod")
        );
        assert_eq!(
            v.error_result().unwrap(),
            r#"{"error": "deploys need a human"}"#
        );
        let mut second = Registry::new();
        second.add_in_process("pre_tool_call", "guard", reply("block", "no"));
        second.add_in_process("pre_tool_call", "gate", approve);
        let v = second.pre_tool_call(&payload::PreToolCallEvent::default());
        assert!(v.approval().is_none());
        assert_eq!(v.blocked.unwrap().message, "no");
    }

    #[test]
    fn first_block_wins_in_registry_order() {
        let mut reg = Registry::new();
        reg.add_in_process("pre_tool_call", "a", Arc::new(|_e| Ok(None)));
        reg.add_in_process("pre_tool_call", "b", reply("block", "from b"));
        reg.add_in_process("pre_tool_call", "c", reply("block", "from c"));
        let v = reg.pre_tool_call(&payload::PreToolCallEvent::default());
        assert_eq!(
            v.blocked,
            Some(Box::new(Blocked {
                message: "from b".into(),
                by: "host::b".into(),
                approval: None,
            }))
        );
    }

    #[test]
    fn block_without_message_is_ignored() {
        let mut reg = Registry::new();
        reg.add_in_process("pre_tool_call", "a", reply("block", "  "));
        assert_eq!(
            reg.pre_tool_call(&payload::PreToolCallEvent::default())
                .blocked,
            None
        );
    }

    #[test]
    fn modifies_merge_in_registry_order() {
        let mut reg = Registry::new();
        let m = |json: &'static str| -> Arc<InProcessFn> {
            Arc::new(move |_e| {
                let mut r = Reply::new("modify", "");
                r.json = json.into();
                Ok(Some(r))
            })
        };
        reg.add_in_process("pre_tool_call", "a", m(r#"{"x": 1, "y": 1}"#));
        reg.add_in_process("pre_tool_call", "b", m(r#"{"y": 2}"#));
        reg.add_in_process("pre_tool_call", "c", m(r#"[1]"#));
        let v = reg.pre_tool_call(&payload::PreToolCallEvent::default());
        assert_eq!(
            v.apply(&serde_json::json!({"z": 0})),
            serde_json::json!({"z": 0, "x": 1, "y": 2})
        );
    }

    #[test]
    fn contexts_join_with_a_blank_line_and_skip_blank_ones() {
        let mut reg = Registry::new();
        reg.add_in_process("pre_llm_call", "a", reply("context", "one"));
        reg.add_in_process("pre_llm_call", "b", reply("context", "   "));
        reg.add_in_process("pre_llm_call", "c", reply("context", "two"));
        assert_eq!(
            reg.pre_llm_call(&Default::default()),
            Some("one\n\ntwo".into())
        );
    }

    #[test]
    fn first_text_wins_even_empty_for_tool_results() {
        let mut reg = Registry::new();
        reg.add_in_process("transform_tool_result", "a", Arc::new(|_e| Ok(None)));
        reg.add_in_process("transform_tool_result", "b", reply("replace", ""));
        reg.add_in_process("transform_tool_result", "c", reply("replace", "late"));
        assert_eq!(
            reg.transform_tool_result(&Default::default()),
            Some(String::new())
        );
    }

    #[test]
    fn first_non_empty_text_wins_for_llm_output() {
        let mut reg = Registry::new();
        reg.add_in_process("transform_llm_output", "a", reply("replace", ""));
        reg.add_in_process("transform_llm_output", "b", reply("replace", "B"));
        reg.add_in_process("transform_llm_output", "c", reply("replace", "C"));
        assert_eq!(
            reg.transform_llm_output(&Default::default()),
            Some("B".into())
        );
    }

    #[test]
    fn first_skip_rewrite_or_allow_decides_dispatch() {
        let mut reg = Registry::new();
        reg.add_in_process("pre_gateway_dispatch", "a", reply("something-else", ""));
        reg.add_in_process("pre_gateway_dispatch", "b", reply("rewrite", "new text"));
        reg.add_in_process("pre_gateway_dispatch", "c", reply("skip", "spam"));
        let v = reg.pre_gateway_dispatch(&Default::default(), &hermes_hooks_abi::core::NoHostCalls);
        assert_eq!(
            v,
            DispatchVerdict::Rewrite {
                text: "new text".into(),
                by: "host::b".into()
            }
        );
    }

    #[test]
    fn a_panicking_callback_does_not_stop_the_next() {
        let mut reg = Registry::new();
        reg.add_in_process("pre_llm_call", "boom", Arc::new(|_e| panic!("kaboom")));
        reg.add_in_process("pre_llm_call", "ok", reply("context", "still here"));
        assert_eq!(
            reg.pre_llm_call(&Default::default()),
            Some("still here".into())
        );
    }

    #[test]
    fn observers_ignore_answers() {
        let mut reg = Registry::new();
        reg.add_in_process("post_tool_call", "a", reply("block", "ignored"));
        assert_eq!(reg.fire("post_tool_call", &[]), Outcome::Observed);
    }

    struct Slow {
        delay_ms: u64,
        text: &'static str,
        log: Arc<std::sync::Mutex<Vec<&'static str>>>,
    }

    impl ExternalHook for Slow {
        fn matches(&self, _e: &EventView<'_>) -> bool {
            true
        }
        fn run(&self, _e: &EventView<'_>) -> HookResult {
            std::thread::sleep(Duration::from_millis(self.delay_ms));
            if let Ok(mut log) = self.log.lock() {
                log.push(self.text);
            }
            Ok(Some(Reply::new("context", self.text)))
        }
    }

    /// What a `pre_tool_call` callback sees, field by field.
    fn seen(e: &EventView<'_>) -> Vec<String> {
        e.fields
            .iter()
            .map(|f| format!("{}={:?}", f.name.as_str(), f.value.as_str()))
            .collect()
    }

    #[test]
    fn a_tool_call_made_inside_a_firing_sees_its_own_payload_and_leaves_the_outer_one_intact() {
        let registry: Arc<std::sync::OnceLock<std::sync::Weak<Registry>>> = Arc::default();
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut reg = Registry::new();
        let (inner_registry, inner_log) = (registry.clone(), log.clone());
        reg.add_in_process(
            "pre_tool_call",
            "nesting",
            Arc::new(move |e| {
                let before = seen(e);
                if e.get_str("tool_name") == Some("outer") {
                    let registry = inner_registry.get().and_then(std::sync::Weak::upgrade);
                    let verdict = registry.unwrap().pre_tool_call(&payload::PreToolCallEvent {
                        tool_name: "inner",
                        args: "[]",
                        task_id: "t-in",
                        session_id: "s-in",
                        tool_call_id: "c-in",
                        turn_id: None,
                        ..Default::default()
                    });
                    assert!(verdict.blocked.is_some());
                    // The nested firing did not write over this one's payload.
                    assert_eq!(seen(e), before);
                    inner_log.lock().unwrap().push(before);
                    return Ok(None);
                }
                inner_log.lock().unwrap().push(before);
                Ok(Some(Reply::new("block", "inner blocked")))
            }),
        );
        // An assertion that fails inside a callback is caught and counted, not raised.
        let failures = Arc::new(std::sync::atomic::AtomicU64::new(0));
        reg.count_failures(failures.clone());
        let reg = Arc::new(reg);
        registry.set(Arc::downgrade(&reg)).unwrap();
        let outer = payload::PreToolCallEvent {
            tool_name: "outer",
            args: "{}",
            task_id: "t-out",
            session_id: "s-out",
            tool_call_id: "c-out",
            turn_id: Some("turn-1"),
            ..Default::default()
        };
        assert!(reg.pre_tool_call(&outer).blocked.is_none());
        // A later firing on the same thread sees its own values, a null turn included.
        let later = payload::PreToolCallEvent {
            tool_name: "later",
            turn_id: None,
            ..outer
        };
        assert!(reg.pre_tool_call(&later).blocked.is_some());
        assert_eq!(failures.load(std::sync::atomic::Ordering::Relaxed), 0);
        let log = log.lock().unwrap();
        let fields =
            |tool: &str, args: &str, task: &str, session: &str, call: &str, turn: Option<&str>| {
                vec![
                    format!("tool_name={:?}", Some(tool)),
                    format!("args={:?}", Some(args)),
                    format!("task_id={:?}", Some(task)),
                    format!("session_id={:?}", Some(session)),
                    format!("tool_call_id={:?}", Some(call)),
                    format!("turn_id={turn:?}"),
                    // Interface 1.3's fields, left at their defaults by these payloads.
                    "api_request_id=None".to_string(),
                    format!("middleware_trace={:?}", Some("")),
                ]
            };
        assert_eq!(
            *log,
            vec![
                fields("inner", "[]", "t-in", "s-in", "c-in", None),
                fields("outer", "{}", "t-out", "s-out", "c-out", Some("turn-1")),
                fields("later", "{}", "t-out", "s-out", "c-out", None),
            ]
        );
    }

    #[test]
    fn threads_firing_at_once_each_see_their_own_payload() {
        let mut reg = Registry::new();
        reg.add_in_process(
            "pre_tool_call",
            "check",
            Arc::new(|e| {
                // Every field of a firing carries the same text.
                let first = e.get_str("tool_name");
                for name in ["args", "task_id", "session_id", "tool_call_id", "turn_id"] {
                    assert_eq!(e.get_str(name), first, "{name}");
                }
                Ok(None)
            }),
        );
        let failures = Arc::new(std::sync::atomic::AtomicU64::new(0));
        reg.count_failures(failures.clone());
        std::thread::scope(|s| {
            for t in 0..4 {
                let reg = &reg;
                s.spawn(move || {
                    for i in 0..2000 {
                        let text = format!("{t}-{i}");
                        let event = payload::PreToolCallEvent {
                            tool_name: &text,
                            args: &text,
                            task_id: &text,
                            session_id: &text,
                            tool_call_id: &text,
                            turn_id: Some(&text),
                            ..Default::default()
                        };
                        assert!(reg.pre_tool_call(&event).blocked.is_none());
                    }
                });
            }
        });
        assert_eq!(failures.load(std::sync::atomic::Ordering::Relaxed), 0);
    }

    #[test]
    fn concurrent_external_hooks_combine_in_registry_order() {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut reg = Registry::new();
        reg.add_in_process("pre_llm_call", "native", reply("context", "native"));
        reg.add_external(
            "pre_llm_call",
            Source::Shell,
            "slow".into(),
            Arc::new(Slow {
                delay_ms: 150,
                text: "slow",
                log: log.clone(),
            }),
        );
        reg.add_external(
            "pre_llm_call",
            Source::Shell,
            "fast".into(),
            Arc::new(Slow {
                delay_ms: 0,
                text: "fast",
                log: log.clone(),
            }),
        );
        assert_eq!(
            reg.pre_llm_call(&Default::default()),
            Some("native\n\nslow\n\nfast".into())
        );
        // They really ran concurrently: the fast one finished first.
        assert_eq!(*log.lock().unwrap(), vec!["fast", "slow"]);
    }
}
