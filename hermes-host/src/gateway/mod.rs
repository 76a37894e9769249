//! Gateway hooks: directories under `$HERMES_HOME/hooks/<name>/` that observe gateway events.
//!
//! A hook directory holds a `HOOK.yaml` (`name`, `description`, `events`, and optionally
//! `timeout`, `config`, `library`) and a handler of one of three kinds, chosen by which
//! file the directory holds (looked for in this order):
//!
//! | kind | file | runs as |
//! |---|---|---|
//! | [`HookKind::Native`] | `library: <file>` in `HOOK.yaml`, or the one `lib*.so` in the directory | in-process callbacks registered with `ctx.on_gateway_event(..)` of `hermes-hooks-abi` |
//! | [`HookKind::Executable`] | an executable file named `handler`, any language | one process per event, `{"event_type":..,"context":{..}}` on stdin |
//! | [`HookKind::Python`] | `handler.py` with `handle(event_type, context)`, sync or `async def` | one long-lived `python3` worker per hook |
//!
//! so a hook directory written for the Python Hermes (`HOOK.yaml` + `handler.py`) works
//! unchanged.
//!
//! [`GatewayHooks::discover`] loads them with the reference's rules and messages
//! (reference §2.1, see [`discover`]); [`GatewayHooks::emit`] queues an event for every hook
//! that subscribed to it (exact name first, then `prefix:*`) and returns at once; each hook
//! has its own delivery thread, so a slow handler only delays its own later events.
//! [`GatewayHooks::shutdown`] delivers what is queued, within a deadline.
//!
//! The full rules, and why they differ from the reference where they do, are in
//! `docs/gateway-hooks.md`.
//!
//! # Output
//!
//! The reference prints `[hooks] ...` lines to stdout. This library never prints: every such
//! line goes to the [`GatewayLog`] given to `discover`, byte for byte as the reference
//! words it, and the `hermes` binary prints them to stdout.
//!
//! # Differences from the reference, on purpose
//!
//! - Handlers run concurrently across hooks (in order within a hook), not one after the
//!   other on the gateway's loop; each gets its own copy of the context, so a handler's
//!   changes to it are not seen by the next one.
//! - A handler process (executable or Python worker) is killed after the hook's `timeout`
//!   (default 60 s); native handlers cannot be interrupted.
//! - A hook's queue is bounded: when a handler falls [`DEFAULT_QUEUE_CAPACITY`] events
//!   behind, the oldest queued event is dropped, counted in [`GatewayHooks::stats`] and
//!   reported through the log.
//! - A directory without `HOOK.yaml` or without any handler is still skipped silently, but
//!   [`GatewayHooks::skipped`] says so, for `hermes gateway hooks`.
//!
//! # Example
//!
//! ```no_run
//! use std::{sync::Arc, time::Duration};
//! use hermes_host::{gateway::GatewayHooks, home::Home};
//!
//! let hooks = GatewayHooks::discover(&Home::from_env(), Arc::new(|line: &str| println!("{line}")));
//! hooks.emit("agent:start", serde_json::json!({"platform": "telegram", "user_id": "42"}));
//! let report = hooks.shutdown(Duration::from_secs(5));
//! assert_eq!(report.undelivered_total(), 0);
//! ```

pub mod discover;
mod emit;
mod event;
mod handler;
mod process;
mod python;
mod services;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use discover::{DEFAULT_TIMEOUT, HandlerSource};
pub use emit::{DEFAULT_QUEUE_CAPACITY, DROP_WARNING_INTERVAL, ROUTER_IDLE_POLL};
pub use services::{GatewayServices, HostCallsOf};

use crate::home::Home;

/// Where the `[hooks] ...` lines go: discovery results, handler errors, queue overflow.
///
/// Called from the thread that emits and from the hooks' delivery threads. Any
/// `Fn(&str) + Send + Sync` closure is a log; [`MemoryLog`] keeps the lines.
///
/// ```
/// use hermes_host::gateway::GatewayLog;
/// let log = |line: &str| println!("{line}");
/// log.line("[hooks] Loaded hook 'x' for events: ['agent:start']");
/// ```
pub trait GatewayLog: Send + Sync {
    /// Receives one line, without its newline.
    fn line(&self, line: &str);
}

impl<F: Fn(&str) + Send + Sync> GatewayLog for F {
    fn line(&self, line: &str) {
        self(line)
    }
}

/// A [`GatewayLog`] that keeps every line, for tests and for hosts that render lines later.
///
/// ```
/// use std::sync::Arc;
/// use hermes_host::gateway::{GatewayLog, MemoryLog};
/// let log = Arc::new(MemoryLog::default());
/// log.line("[hooks] hello");
/// assert_eq!(log.lines(), vec!["[hooks] hello"]);
/// ```
#[derive(Debug, Default)]
pub struct MemoryLog {
    lines: Mutex<Vec<String>>,
}

impl MemoryLog {
    /// Every line so far, in order.
    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl GatewayLog for MemoryLog {
    fn line(&self, line: &str) {
        self.lines
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(line.to_string());
    }
}

/// How gateway hooks are loaded and run, beyond the home directory.
#[derive(Clone, Debug)]
pub struct GatewayOptions {
    /// The Python interpreter for `handler.py` hooks (default `python3`, looked up on `PATH`).
    pub python: PathBuf,
    /// Events a hook's queue holds before the oldest are dropped (default
    /// [`DEFAULT_QUEUE_CAPACITY`]).
    pub queue_capacity: usize,
    /// Whether hook files others can write are refused (the default) or loaded with a
    /// warning: `hooks.strict_permissions` of `config.yaml`, which the caller has read.
    pub policy: crate::trust::Policy,
    /// `config.yaml` as JSON, what a `handler.py`'s `hermes_cli.config.load_config()`
    /// answers (without it, the worker reads the file with PyYAML where it has it).
    pub host_config: Option<Arc<str>>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        GatewayOptions {
            python: PathBuf::from("python3"),
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            policy: crate::trust::Policy::STRICT,
            host_config: None,
        }
    }
}

/// The outcome of an [`emit_tracked`](GatewayHooks::emit_tracked) event, once every hook
/// subscribed to it has handled it (or could not).
///
/// A hook's time counts from when it starts on the event: an event queued behind a slow
/// one on the same hook is not late, and its waiter is told it is still queued rather
/// than that it failed.
pub struct Delivery {
    rx: std::sync::mpsc::Receiver<event::Progress>,
    /// When the last hook to start on the event must have finished.
    deadline: std::sync::Mutex<Option<std::time::Instant>>,
}

/// Where a tracked event is after [`Delivery::wait_step`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Waited {
    /// Every hook handled it: `Ok`, or the errors, each naming its hook (a hook that never
    /// got the event, or ran past the timeout, is one too).
    Finished(Result<(), Vec<String>>),
    /// No hook has started on it yet: it waits behind other events.
    Queued,
    /// A hook runs it, within its time.
    Running,
}

impl Delivery {
    /// Waits for the outcome, giving each hook `timeout` from when it starts on the event:
    /// `Ok` when every hook handled it without an error; else the errors, each naming its
    /// hook (a hook that never got the event, because a full queue dropped it or the hooks
    /// shut down, is one too), or that a hook ran out of time.
    ///
    /// # Errors
    ///
    /// As above.
    pub fn wait(&self, timeout: Duration) -> Result<(), Vec<String>> {
        loop {
            if let Waited::Finished(outcome) = self.wait_step(timeout, Duration::from_secs(3600)) {
                return outcome;
            }
        }
    }

    /// Waits at most `step` for the outcome ([`wait`](Self::wait)'s rules), and says where
    /// the event is when it is not finished, so that a caller can tell its broker the event
    /// is still being worked on.
    pub fn wait_step(&self, timeout: Duration, step: Duration) -> Waited {
        let until = std::time::Instant::now() + step;
        let mut deadline = self.deadline.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = std::time::Instant::now();
            let wake = match *deadline {
                Some(d) if d <= now => {
                    return Waited::Finished(Err(vec![format!(
                        "the hooks did not finish within {} s of starting on the event",
                        timeout.as_secs_f64()
                    )]));
                }
                Some(d) => d.min(until),
                None => until,
            };
            if wake <= now {
                return if deadline.is_some() {
                    Waited::Running
                } else {
                    Waited::Queued
                };
            }
            match self.rx.recv_timeout(wake - now) {
                Ok(event::Progress::Started) => {
                    let due = std::time::Instant::now() + timeout;
                    *deadline = Some(deadline.map_or(due, |d| d.max(due)));
                }
                Ok(event::Progress::Finished(outcome)) => return Waited::Finished(outcome),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Waited::Finished(Err(vec![
                        "the hooks shut down before handling the event".into(),
                    ]));
                }
            }
        }
    }
}

/// The kind of handler a hook has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HookKind {
    /// A native library built on `hermes-hooks-abi`.
    Native,
    /// An executable `handler`.
    Executable,
    /// `handler.py`, run by a Python worker.
    Python,
}

impl HookKind {
    /// `native`, `executable` or `python`.
    ///
    /// ```
    /// assert_eq!(hermes_host::gateway::HookKind::Python.as_str(), "python");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::Native => "native",
            HookKind::Executable => "executable",
            HookKind::Python => "python",
        }
    }
}

/// A hook that loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadedHook {
    /// `name` from `HOOK.yaml`, default the directory name.
    pub name: String,
    /// `description`, default empty.
    pub description: String,
    /// The events it subscribed to, as declared.
    pub events: Vec<String>,
    /// The hook directory.
    pub path: PathBuf,
    /// Its handler kind.
    pub kind: HookKind,
    /// Its handler file (library, executable or `handler.py`).
    pub handler: PathBuf,
    /// How long one call may take (not enforced for native handlers).
    pub timeout: Duration,
    /// Ownership and permission problems `hooks.strict_permissions: false` let through.
    pub warnings: Vec<String>,
}

/// A directory under the hooks directory that did not load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedHook {
    /// The directory.
    pub path: PathBuf,
    /// The hook's name, when `HOOK.yaml` got far enough to say it.
    pub name: Option<String>,
    /// Why it did not load.
    pub reason: String,
    /// The `[hooks] ...` line that was printed for it; `None` when it was skipped silently
    /// (no `HOOK.yaml`, or no handler), as the reference does.
    pub line: Option<String>,
}

/// Delivery counters of one hook.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HookStats {
    /// The hook's name.
    pub name: String,
    /// Events waiting, including the one being handled.
    pub queued: usize,
    /// Handler calls that succeeded.
    pub delivered: u64,
    /// Handler calls that failed (each printed as `Error in handler`).
    pub failed: u64,
    /// Events pushed out of a full queue.
    pub dropped: u64,
    /// How often its Python worker was started again after dying or timing out.
    pub worker_restarts: u64,
    /// The queue's capacity.
    pub capacity: usize,
}

/// Counters of all hooks, from [`GatewayHooks::stats`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayStats {
    /// Events passed to `emit`, whether or not a hook wanted them.
    pub emitted: u64,
    /// Events emitted after shutdown (not delivered).
    pub rejected: u64,
    /// Events accepted by `emit` that the router has not put on the hooks' queues yet.
    pub routing: usize,
    /// Events dropped before reaching any hook's queue (only when the router falls more
    /// than a queue's capacity behind).
    pub dropped_before_routing: u64,
    /// One entry per loaded hook, in load order.
    pub hooks: Vec<HookStats>,
}

impl GatewayStats {
    /// Events dropped from full queues, all hooks together (and before routing).
    pub fn dropped(&self) -> u64 {
        self.hooks.iter().map(|h| h.dropped).sum::<u64>() + self.dropped_before_routing
    }

    /// Handler calls waiting, all hooks together, plus events not routed yet.
    pub fn queued(&self) -> usize {
        self.hooks.iter().map(|h| h.queued).sum::<usize>() + self.routing
    }
}

/// A hook that still had events when the shutdown deadline passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UndeliveredHook {
    /// The hook's name.
    pub name: String,
    /// Events not delivered (queued, plus the one whose handler was stopped).
    pub events: u64,
}

/// What [`GatewayHooks::shutdown`] could not do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShutdownReport {
    /// How long shutdown took.
    pub elapsed: Duration,
    /// Hooks whose queue was not empty at the deadline.
    pub undelivered: Vec<UndeliveredHook>,
    /// `(hook, events)` lost to full queues over the whole run.
    pub dropped: Vec<(String, u64)>,
}

impl ShutdownReport {
    /// Events not delivered at the deadline, all hooks together.
    pub fn undelivered_total(&self) -> u64 {
        self.undelivered.iter().map(|u| u.events).sum()
    }
}

/// The loaded gateway hooks of one home, ready for [`emit`](GatewayHooks::emit).
///
/// Dropping it shuts it down with no deadline: what is still queued is reported through
/// the log as not delivered.
pub struct GatewayHooks {
    hooks_dir: PathBuf,
    loaded: Vec<LoadedHook>,
    skipped: Vec<SkippedHook>,
    dispatcher: emit::Dispatcher,
    services: services::ServiceSlot,
}

impl GatewayHooks {
    /// Loads every hook under `home`'s hooks directory with default [`GatewayOptions`] and
    /// the permission policy of `home`'s `config.yaml`.
    ///
    /// Every `[hooks] ...` line of discovery goes to `log`, in directory order. One broken
    /// hook never stops the others.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hermes_host::{gateway::{GatewayHooks, MemoryLog}, home::Home};
    /// let dir = tempfile::tempdir().unwrap();
    /// let log = Arc::new(MemoryLog::default());
    /// let hooks = GatewayHooks::discover(&Home::at(dir.path()), log.clone());
    /// assert!(hooks.loaded().is_empty());
    /// assert!(log.lines().is_empty()); // no hooks directory: nothing, silently
    /// ```
    pub fn discover(home: &Home, log: Arc<dyn GatewayLog>) -> GatewayHooks {
        let options = GatewayOptions {
            policy: crate::trust::Policy::from_config(&home.load_config().0),
            ..GatewayOptions::default()
        };
        GatewayHooks::discover_with(home, log, &options)
    }

    /// [`discover`](GatewayHooks::discover) with explicit options.
    pub fn discover_with(
        home: &Home,
        log: Arc<dyn GatewayLog>,
        options: &GatewayOptions,
    ) -> GatewayHooks {
        GatewayHooks::discover_with_plugins(home, log, options, Vec::new())
    }

    /// [`discover_with`](GatewayHooks::discover_with), plus the native gateway callbacks
    /// that plugins registered (`ctx.on_gateway_event(..)`, in
    /// [`LoadReport::gateway_handlers`](crate::plugins::LoadReport)): each plugin's callbacks
    /// become one hook named after the plugin, after the hook directories, with its own
    /// queue like every other hook.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use hermes_host::{gateway::{GatewayHooks, GatewayOptions, MemoryLog}, home::Home};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let home = Home::at(dir.path());
    /// let hooks = GatewayHooks::discover_with_plugins(&home, Arc::new(MemoryLog::default()), &GatewayOptions::default(), Vec::new());
    /// assert!(hooks.loaded().is_empty());
    /// ```
    pub fn discover_with_plugins(
        home: &Home,
        log: Arc<dyn GatewayLog>,
        options: &GatewayOptions,
        plugin_handlers: Vec<crate::plugins::GatewayHandler>,
    ) -> GatewayHooks {
        let hooks_dir = home.hooks_dir();
        let outcomes = discover::scan(&hooks_dir, &options.policy);
        let links = handler::Links {
            services: services::ServiceSlot::default(),
            log: log.clone(),
            host_config: options.host_config.clone(),
            dotenv: Default::default(),
        };
        // Start every handler first (Python workers import in parallel), then collect the
        // outcomes in directory order so the lines come out in the reference's order.
        let pending: Vec<_> = outcomes
            .into_iter()
            .map(|outcome| match outcome {
                discover::DirOutcome::Found(spec) => {
                    let restarts = Arc::new(AtomicU64::new(0));
                    let pending = handler::start_loading(
                        &spec,
                        home.root(),
                        &options.python,
                        restarts.clone(),
                        &links,
                    );
                    Ok((spec, pending, restarts))
                }
                discover::DirOutcome::Skipped(skip) => Err(skip),
            })
            .collect();
        let mut loaded = Vec::new();
        let mut skipped = Vec::new();
        let mut ready = Vec::new();
        for item in pending {
            match item {
                Err(skip) => {
                    if let Some(line) = &skip.line {
                        log.line(line);
                    }
                    skipped.push(SkippedHook {
                        path: skip.dir,
                        name: skip.name,
                        reason: skip.reason,
                        line: skip.line,
                    });
                }
                Ok((spec, pending, restarts)) => match pending.finish() {
                    handler::Loaded::Ready(handler, warnings) => {
                        for warning in &warnings {
                            log.line(warning);
                        }
                        for warning in &spec.warnings {
                            log.line(&format!(
                                "[hooks] Warning for hook {}: {warning}",
                                spec.name
                            ));
                        }
                        log.line(&format!(
                            "[hooks] Loaded hook '{}' for events: {}",
                            spec.name, spec.events_repr
                        ));
                        loaded.push(LoadedHook {
                            name: spec.name.clone(),
                            description: spec.description.clone(),
                            events: spec.events.clone(),
                            path: spec.dir.clone(),
                            kind: handler::kind_of(&spec.source),
                            handler: handler::path_of(&spec.source).to_path_buf(),
                            timeout: spec.timeout,
                            warnings: spec.warnings.clone(),
                        });
                        ready.push(emit::Ready {
                            name: spec.name,
                            events: spec.events,
                            handler,
                            restarts,
                        });
                    }
                    handler::Loaded::Failed { reason, line } => {
                        log.line(&line);
                        skipped.push(SkippedHook {
                            path: spec.dir,
                            name: Some(spec.name),
                            reason,
                            line: Some(line),
                        });
                    }
                },
            }
        }
        let mut by_plugin: Vec<(String, std::path::PathBuf, Vec<(String, _)>)> = Vec::new();
        for h in plugin_handlers {
            match by_plugin.iter_mut().find(|(p, _, _)| *p == h.plugin) {
                Some((_, _, callbacks)) => callbacks.push((h.event, h.callback)),
                None => by_plugin.push((h.plugin, h.library, vec![(h.event, h.callback)])),
            }
        }
        for (plugin, library, callbacks) in by_plugin {
            let mut events: Vec<String> = Vec::new();
            for (event, _) in &callbacks {
                if !events.contains(event) {
                    events.push(event.clone());
                }
            }
            log.line(&format!(
                "[hooks] Loaded plugin '{plugin}' gateway callbacks for events: {}",
                events.join(", ")
            ));
            loaded.push(LoadedHook {
                name: plugin.clone(),
                description: format!("gateway callbacks of plugin '{plugin}'"),
                events: events.clone(),
                path: library
                    .parent()
                    .map(std::path::Path::to_path_buf)
                    .unwrap_or_default(),
                kind: HookKind::Native,
                handler: library,
                timeout: Duration::ZERO,
                warnings: Vec::new(),
            });
            ready.push(emit::Ready {
                name: plugin,
                events,
                handler: handler::Handler::Native(handler::NativeHandler::from_callbacks(
                    callbacks,
                    links.services.clone(),
                )),
                restarts: Arc::new(AtomicU64::new(0)),
            });
        }
        let dispatcher = emit::Dispatcher::start(ready, options.queue_capacity, log);
        GatewayHooks {
            hooks_dir,
            loaded,
            skipped,
            dispatcher,
            services: links.services,
        }
    }

    /// Lends the hooks' handlers the running gateway's capabilities: native handlers reach
    /// them through `HostCalls`, `handler.py` hooks through their worker (`run_agent`,
    /// `gateway.run`). Until it is called, and once `services` is dropped, every such call
    /// fails with a message saying that no gateway serves it. Only a weak reference is
    /// kept, so the hooks never keep the gateway alive. Calling it again replaces what was
    /// provided.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use hermes_host::{gateway::{GatewayHooks, GatewayServices, MemoryLog}, home::Home};
    /// use serde_json::{Value, json};
    ///
    /// struct Model;
    /// impl GatewayServices for Model {
    ///     fn call(&self, capability: &str, _args: &Value) -> Result<Value, String> {
    ///         match capability {
    ///             "gateway.model" => Ok(json!({"model": "demo"})),
    ///             other => Err(format!("unknown capability '{other}'")),
    ///         }
    ///     }
    /// }
    /// # let dir = tempfile::tempdir().unwrap();
    /// let hooks = GatewayHooks::discover(&Home::at(dir.path()), Arc::new(MemoryLog::default()));
    /// assert!(hooks.call("gateway.model", &json!({})).is_err());
    /// let services: Arc<dyn GatewayServices> = Arc::new(Model);
    /// hooks.provide(Arc::downgrade(&services));
    /// assert_eq!(hooks.call("gateway.model", &json!({})), Ok(json!({"model": "demo"})));
    /// ```
    pub fn provide(&self, services: std::sync::Weak<dyn GatewayServices>) {
        self.services.provide(services);
    }

    /// Calls a capability of what [`provide`](GatewayHooks::provide) lent, as a handler
    /// would; see there for an example.
    ///
    /// # Errors
    ///
    /// The capability's message, or that no gateway serves calls.
    pub fn call(
        &self,
        capability: &str,
        args: &serde_json::Value,
    ) -> Result<serde_json::Value, String> {
        self.services.call(capability, args)
    }

    /// Queues `event` for every hook subscribed to it, and returns at once.
    ///
    /// Hooks subscribed to the exact name come first, then (when the name has a colon)
    /// hooks subscribed to `<text before the first colon>:*`; there is no global `*`. A null
    /// `context` becomes `{}`. Handler errors are printed through the log as
    /// `[hooks] Error in handler for '<event>': <error>`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use hermes_host::{gateway::{GatewayHooks, MemoryLog}, home::Home};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let hooks = GatewayHooks::discover(&Home::at(dir.path()), Arc::new(MemoryLog::default()));
    /// hooks.emit("command:model", serde_json::json!({"command": "model", "args": "gpt-4"}));
    /// assert_eq!(hooks.stats().emitted, 1);
    /// ```
    pub fn emit(&self, event: &str, context: serde_json::Value) {
        self.dispatcher.emit(event, context);
    }

    /// [`emit`](GatewayHooks::emit), with a [`Delivery`] that says when every hook
    /// subscribed to `event` has handled it, and how: what a consumer that acknowledges
    /// an event only once its hooks ran (`hermes gateway consume`) waits for.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use std::time::Duration;
    /// # use hermes_host::{gateway::{GatewayHooks, MemoryLog}, home::Home};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let hooks = GatewayHooks::discover(&Home::at(dir.path()), Arc::new(MemoryLog::default()));
    /// let delivery = hooks.emit_tracked("agent:start", serde_json::json!({}));
    /// // No hook takes it: done at once.
    /// assert_eq!(delivery.wait(Duration::from_secs(1)), Ok(()));
    /// ```
    pub fn emit_tracked(&self, event: &str, context: serde_json::Value) -> Delivery {
        let (tx, rx) = std::sync::mpsc::channel();
        self.dispatcher.emit_tracked(event, context, tx);
        Delivery {
            rx,
            deadline: std::sync::Mutex::new(None),
        }
    }

    /// The hooks an [`emit`](GatewayHooks::emit) of `event` would call, in call order: exact
    /// subscribers, then `prefix:*` subscribers (a hook subscribed both ways is listed twice).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use hermes_host::{gateway::{GatewayHooks, MemoryLog}, home::Home};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let hooks = GatewayHooks::discover(&Home::at(dir.path()), Arc::new(MemoryLog::default()));
    /// assert!(hooks.resolve("agent:start").is_empty());
    /// ```
    pub fn resolve(&self, event: &str) -> Vec<&LoadedHook> {
        self.dispatcher
            .resolve(event)
            .filter_map(|i| self.loaded.get(i))
            .collect()
    }

    /// The hooks that loaded, in directory order.
    pub fn loaded(&self) -> &[LoadedHook] {
        &self.loaded
    }

    /// The directories that did not load, in directory order, with the reason.
    pub fn skipped(&self) -> &[SkippedHook] {
        &self.skipped
    }

    /// The directory hooks were looked for in.
    pub fn hooks_dir(&self) -> &Path {
        &self.hooks_dir
    }

    /// Delivery counters, per hook.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use hermes_host::{gateway::{GatewayHooks, MemoryLog}, home::Home};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let hooks = GatewayHooks::discover(&Home::at(dir.path()), Arc::new(MemoryLog::default()));
    /// let stats = hooks.stats();
    /// assert_eq!((stats.dropped(), stats.queued()), (0, 0));
    /// ```
    pub fn stats(&self) -> GatewayStats {
        let (emitted, rejected, routing, dropped_before_routing) = self.dispatcher.counters();
        GatewayStats {
            emitted,
            rejected,
            routing,
            dropped_before_routing,
            hooks: self.dispatcher.queues().iter().map(|q| q.stats()).collect(),
        }
    }

    /// Stops accepting events and delivers what is queued, until `deadline` has passed.
    ///
    /// Handlers still running at the deadline are stopped (their process group is killed;
    /// a native handler cannot be stopped and is left to finish on its own thread), and
    /// what was not delivered is reported, both in the result and through the log as
    /// `[hooks] Shutdown: <n> event(s) not delivered within <deadline>: <hook> (<n>), ...`.
    /// Python workers are stopped. Calling it again does nothing.
    pub fn shutdown(&self, deadline: Duration) -> ShutdownReport {
        self.dispatcher.shutdown(deadline)
    }
}

impl Drop for GatewayHooks {
    fn drop(&mut self) {
        self.dispatcher.shutdown(Duration::ZERO);
    }
}

/// `Some(prefix)` when `event` is a wildcard `prefix:*` the reference resolves (the prefix
/// holds no colon); `None` otherwise.
pub(crate) fn wildcard_prefix(event: &str) -> Option<&str> {
    let prefix = event.strip_suffix(":*")?;
    (!prefix.contains(':')).then_some(prefix)
}
