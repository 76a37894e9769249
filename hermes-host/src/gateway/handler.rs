//! The three handler kinds, loaded from a [`HookSpec`] and called once per event.
//!
//! | kind | file | how an event is delivered |
//! |---|---|---|
//! | native | `library:` in `HOOK.yaml`, or `lib*.so` | in-process call of every callback the library registered with `ctx.on_gateway_event(pattern, ..)` whose pattern matches the event |
//! | executable | `handler` (mode +x) | one process per event, `{"event_type":..,"context":{..}}` on stdin, killed with its process group after the hook's timeout |
//! | python | `handler.py` | one line to the hook's long-lived Python worker (see `python.rs`) |
//!
//! A handler fails by returning an error message; the caller prints it as
//! `[hooks] Error in handler for '<event>': <message>`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::time::{Duration, Instant};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::RResult;
use hermes_hooks_abi::core::{EventView, Field, HookCallbackBox, HostCalls_TO};

use super::discover::{HandlerSource, HookSpec};
use super::event::Event;
use super::process::{HandlerEnv, describe_status, seconds};
use super::python::{Load, PythonHandler, Starting, Worker};
use super::services::{HostCallsOf, ServiceSlot};
use super::{GatewayLog, HookKind, wildcard_prefix};
use crate::plugins::{Manifest, load_library, register};
use crate::process;

/// A loaded handler, owned by its hook's delivery thread.
pub(crate) enum Handler {
    /// Callbacks from a native library.
    Native(NativeHandler),
    /// An executable run once per event.
    Executable(ExecutableHandler),
    /// A `handler.py` run by a long-lived worker (boxed: it is the largest).
    Python(Box<PythonHandler>),
}

impl Handler {
    /// Delivers one event. Each error message becomes one `Error in handler` line.
    pub(crate) fn deliver(
        &mut self,
        event: &Event,
        in_flight: &AtomicU32,
        note: &dyn Fn(String),
    ) -> Vec<String> {
        match self {
            Handler::Native(h) => h.deliver(event),
            Handler::Executable(h) => h.deliver(event, in_flight).err().into_iter().collect(),
            Handler::Python(h) => h
                .deliver(event, in_flight, note)
                .err()
                .into_iter()
                .collect(),
        }
    }

    /// Releases what the handler holds (a Python worker), waiting for it until `deadline`.
    pub(crate) fn close(&mut self, deadline: Instant) {
        if let Handler::Python(h) = self {
            h.close(deadline);
        }
    }
}

/// What loading a handler gave.
pub(crate) enum Loaded {
    /// Ready, with the lines to print about it (warnings) before the `Loaded hook` line.
    Ready(Handler, Vec<String>),
    /// Not loaded: the reason for listings and the `[hooks]` line to print.
    Failed { reason: String, line: String },
}

/// A handler being loaded: Python workers import in parallel, so discovery starts them all
/// first and collects their answers in directory order.
pub(crate) enum Pending {
    /// Already decided.
    Done(Loaded),
    /// A Python worker importing `handler.py`.
    Python {
        starting: Starting,
        spec: Box<HookSpec>,
        python: PathBuf,
        env: HandlerEnv,
        restarts: Arc<AtomicU64>,
    },
}

/// What a handler reaches back to: the gateway's capabilities and its log.
pub(crate) struct Links {
    /// Capabilities (`agent.run_once`, ...) once a gateway provides them.
    pub services: ServiceSlot,
    /// Where a Python handler's `logging` records go.
    pub log: Arc<dyn GatewayLog>,
    /// `config.yaml` as JSON, for a Python handler's `hermes_cli.config`.
    pub host_config: Option<Arc<str>>,
    /// `$HERMES_HOME/.env`, read when the first Python handler starts.
    pub dotenv: Arc<std::sync::OnceLock<crate::dotenv::Vars>>,
}

/// Starts loading `spec`'s handler.
pub(crate) fn start_loading(
    spec: &HookSpec,
    home: &Path,
    python: &Path,
    restarts: Arc<AtomicU64>,
    links: &Links,
) -> Pending {
    let env = HandlerEnv {
        // Handlers run in their own directory: a relative home would point elsewhere there.
        home: std::path::absolute(home).unwrap_or_else(|_| home.to_path_buf()),
        name: spec.name.clone(),
        dir: spec.dir.clone(),
        config_json: spec.config.to_string(),
        services: links.services.clone(),
        log: links.log.clone(),
        host_config: links.host_config.clone(),
        dotenv: match &spec.source {
            HandlerSource::Native(_) | HandlerSource::Executable(_) => Arc::default(),
            HandlerSource::Python(_) => links
                .dotenv
                .get_or_init(|| Arc::new(crate::dotenv::read(&home.join(".env"))))
                .clone(),
        },
    };
    match &spec.source {
        HandlerSource::Native(library) => {
            Pending::Done(load_native(spec, library, links.services.clone()))
        }
        HandlerSource::Executable(path) => Pending::Done(Loaded::Ready(
            Handler::Executable(ExecutableHandler {
                path: path.clone(),
                env,
                timeout: spec.timeout,
            }),
            Vec::new(),
        )),
        HandlerSource::Python(handler) => match Worker::start(python, handler, &env) {
            Ok(starting) => Pending::Python {
                starting,
                spec: Box::new(spec.clone()),
                python: python.to_path_buf(),
                env,
                restarts,
            },
            Err(load) => Pending::Done(python_outcome(load, spec, python, &env, &restarts)),
        },
    }
}

impl Pending {
    /// Waits for the outcome.
    pub(crate) fn finish(self) -> Loaded {
        match self {
            Pending::Done(loaded) => loaded,
            Pending::Python {
                starting,
                spec,
                python,
                env,
                restarts,
            } => {
                let load = starting.finish(spec.timeout);
                python_outcome(load, &spec, &python, &env, &restarts)
            }
        }
    }
}

fn python_outcome(
    load: Load,
    spec: &HookSpec,
    python: &Path,
    env: &HandlerEnv,
    restarts: &Arc<AtomicU64>,
) -> Loaded {
    let name = &spec.name;
    match load {
        Load::Loaded(worker) => {
            let HandlerSource::Python(handler) = &spec.source else {
                let reason =
                    "internal error: a python worker for a hook without handler.py".to_string();
                return Loaded::Failed {
                    line: format!("[hooks] Error loading hook {}: {reason}", spec.dir_name),
                    reason,
                };
            };
            Loaded::Ready(
                Handler::Python(Box::new(PythonHandler::new(
                    python.to_path_buf(),
                    handler.clone(),
                    env.clone(),
                    spec.timeout,
                    worker,
                    restarts.clone(),
                ))),
                Vec::new(),
            )
        }
        Load::Skip(why) => Loaded::Failed {
            line: format!("[hooks] Skipping {name}: {why}"),
            reason: why,
        },
        Load::Error(why) => Loaded::Failed {
            line: format!("[hooks] Error loading hook {}: {why}", spec.dir_name),
            reason: why,
        },
        Load::PythonMissing => {
            let reason = format!(
                "{} was not found; install Python 3 to run handler.py hooks",
                python.display()
            );
            Loaded::Failed {
                line: format!("[hooks] Skipping {name}: {reason}"),
                reason,
            }
        }
    }
}

/// The kind of a handler source.
pub(crate) fn kind_of(source: &HandlerSource) -> HookKind {
    match source {
        HandlerSource::Native(_) => HookKind::Native,
        HandlerSource::Executable(_) => HookKind::Executable,
        HandlerSource::Python(_) => HookKind::Python,
    }
}

/// The handler file of a source.
pub(crate) fn path_of(source: &HandlerSource) -> &Path {
    match source {
        HandlerSource::Native(p) | HandlerSource::Executable(p) | HandlerSource::Python(p) => p,
    }
}

// ---------------------------------------------------------------------------------------
// Native

/// Gateway callbacks from one native library.
pub(crate) struct NativeHandler {
    /// `(pattern, callback)` in registration order.
    callbacks: Vec<(String, HookCallbackBox)>,
    /// What the callbacks reach through `HostCalls` (`agent.run_once`, ...).
    services: ServiceSlot,
}

fn load_native(spec: &HookSpec, library: &Path, services: ServiceSlot) -> Loaded {
    let fail = |reason: String| Loaded::Failed {
        line: format!("[hooks] Error loading hook {}: {reason}", spec.dir_name),
        reason,
    };
    let lib = match load_library(library, &spec.name) {
        Ok(lib) => lib,
        Err(why) => return fail(why),
    };
    let manifest = Manifest {
        name: spec.name.clone(),
        description: spec.description.clone(),
        library: library.display().to_string(),
        config: spec.config.clone(),
        ..Manifest::default()
    };
    let registration = register(lib, &manifest, &spec.dir);
    if let Some(error) = registration.error {
        return fail(format!("register() failed: {error}"));
    }
    let callbacks: Vec<(String, HookCallbackBox)> = registration
        .hooks
        .into_iter()
        .filter(|(hook, _, _)| hook.contains(':'))
        .map(|(hook, _, cb)| (hook, cb))
        .collect();
    if callbacks.is_empty() {
        let reason =
            "no gateway handler registered (call ctx.on_gateway_event in register)".to_string();
        return Loaded::Failed {
            line: format!("[hooks] Skipping {}: {reason}", spec.name),
            reason,
        };
    }
    let warnings = callbacks
        .iter()
        .filter(|(pattern, _)| !spec.events.iter().any(|e| can_reach(e, pattern)))
        .map(|(pattern, _)| {
            format!(
                "[hooks] Warning: hook '{}' registered a handler for '{pattern}', which none of its HOOK.yaml events delivers; add it to `events`",
                spec.name
            )
        })
        .collect();
    Loaded::Ready(
        Handler::Native(NativeHandler {
            callbacks,
            services,
        }),
        warnings,
    )
}

/// Whether an event delivered through subscription `subscribed` can match callback
/// `pattern` (both exact names or `prefix:*`).
fn can_reach(subscribed: &str, pattern: &str) -> bool {
    let prefix = |s: &str| s.split_once(':').map(|(p, _)| p.to_string());
    subscribed == pattern
        || (prefix(subscribed) == prefix(pattern)
            && (wildcard_prefix(subscribed).is_some() || wildcard_prefix(pattern).is_some()))
}

impl NativeHandler {
    /// A handler over callbacks a plugin registered, `(pattern, callback)` in order.
    pub(crate) fn from_callbacks(
        callbacks: Vec<(String, HookCallbackBox)>,
        services: ServiceSlot,
    ) -> NativeHandler {
        NativeHandler {
            callbacks,
            services,
        }
    }

    fn deliver(&self, event: &Event) -> Vec<String> {
        let context = event.context_json();
        let fields = [
            Field::str("event_type", &event.event_type),
            Field::json("context", context),
        ];
        let services = HostCallsOf(&self.services);
        let host = HostCalls_TO::from_const(&services, TD_Opaque);
        let view = EventView::new(&event.event_type, &fields, host);
        let prefix = event.event_type.split_once(':').map(|(p, _)| p);
        let exact = self
            .callbacks
            .iter()
            .filter(|(p, _)| *p == event.event_type);
        let wild = self
            .callbacks
            .iter()
            .filter(|(p, _)| prefix.is_some() && wildcard_prefix(p) == prefix);
        let mut errors = Vec::new();
        for (_, callback) in exact.chain(wild) {
            if let RResult::RErr(message) = callback.call(&view) {
                errors.push(message.into_string());
            }
        }
        errors
    }
}

// ---------------------------------------------------------------------------------------
// Executable

/// An executable `handler`, run once per event.
pub(crate) struct ExecutableHandler {
    path: PathBuf,
    env: HandlerEnv,
    timeout: Duration,
}

impl ExecutableHandler {
    fn deliver(&self, event: &Event, in_flight: &AtomicU32) -> Result<(), String> {
        let payload = event.request_arc();
        // Stdin is fed without blocking, so a handler that never reads a large payload
        // cannot hold this thread past the timeout; its output goes to the gateway's stderr.
        let how = process::Run::new()
            .input(payload.as_bytes())
            .timeout(self.timeout)
            .pid_slot(in_flight);
        let out = process::run(&mut self.env.command(&self.path), &how)
            .map_err(|e| format!("cannot run {}: {e}", self.path.display()))?;
        match out.ended {
            process::Ended::Completed => match out.status {
                Some(status) if status.success() => Ok(()),
                Some(status) => Err(format!("handler {}", describe_status(status))),
                None => Err("handler ended without an exit status".into()),
            },
            process::Ended::TimedOut { .. } | process::Ended::Interrupted { .. } => Err(format!(
                "handler timed out after {}; its process group was killed",
                seconds(self.timeout)
            )),
            process::Ended::Failed(e) => Err(format!("cannot wait for the handler: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callback_pattern_is_reachable_through_its_prefix() {
        assert!(can_reach("agent:*", "agent:start"));
        assert!(can_reach("agent:start", "agent:*"));
        assert!(can_reach("agent:start", "agent:start"));
        assert!(!can_reach("agent:start", "agent:end"));
        assert!(!can_reach("session:*", "agent:*"));
    }
}
