//! Shell hooks: any script becomes a hook.
//!
//! A `hooks:` block in `$HERMES_HOME/config.yaml` names an event, an optional tool matcher, a
//! command and a timeout. When the event fires, the host runs the command with a JSON payload
//! on stdin and reads an optional JSON answer on stdout, which can block a tool call, rewrite
//! its arguments or add context to the model's prompt.
//!
//! The steps live in one file each, and data flows one way:
//!
//! - [`config`] parses and validates the block into [`ShellHookSpec`]s (never fails; every
//!   problem is a warning naming the entry);
//! - [`consent`] keeps the allowlist of approved `(event, command)` pairs, pinned to the
//!   script's content, and asks at the terminal;
//! - [`register_from_config`] puts the approved hooks into the one
//!   [`Registry`], after the native plugins, in config order;
//! - when the registry fires them, [`wire`] builds the stdin payload, [`spawn`] runs the
//!   command (the only code that spawns a hook), [`persistent`] talks to a kept process,
//!   [`http`] POSTs to a `url:` hook, and [`evaluate`] turns the outcome into a decision:
//!   fail-open by default, a block for `fail_closed` hooks.
//!
//! # Example
//!
//! ```no_run
//! use hermes_host::{home::Home, registry::Registry, shell::{self, Consent}};
//! use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
//!
//! let home = Home::from_env();
//! let (config, _) = home.load_config();
//! let mut registry = Registry::new();
//! let report = shell::register_from_config(&home, &config.hooks, Consent::Refuse, &mut registry);
//! for warning in &report.warnings {
//!     eprintln!("{warning}");
//! }
//! let verdict = registry.pre_tool_call(&PreToolCallEvent { tool_name: "terminal", args: r#"{"command": "ls"}"#, ..Default::default() });
//! println!("blocked: {:?}", verdict.blocked);
//! ```

pub mod background;
pub mod claude;
pub mod claude_import;
pub mod claude_plugin;
pub mod config;
pub mod consent;
pub mod http;
pub mod matcher;
pub mod persistent;
pub mod script;
pub mod spawn;
pub mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hermes_hooks_abi::core::EventView;
use hermes_hooks_abi::hooks::{self, OutcomeKind};
use serde_json::{Map, Value};

use config::BLOCKING_EVENTS;
pub use config::ShellHookSpec;
use consent::{Allowlist, Prompter};
use spawn::RunResult;
use wire::{Decision, Stdout};

use crate::registry::{Callback, ExternalHook, HookResult, Registry, Source, Subprocess};
use crate::trust::{Policy, Role};
use crate::{config::HooksSection, home::Home};

/// How to treat a configured hook that is not yet approved.
pub enum Consent<'a> {
    /// Approve it and record the approval (`--accept-hooks`, `HERMES_ACCEPT_HOOKS=1`).
    Accept,
    /// Ask (at the terminal), and record a yes.
    Ask(&'a mut dyn Prompter),
    /// Do not run it (no terminal to ask at), with the reference's warning.
    Refuse,
    /// Approve it for this run only: nothing is written to the allowlist (`hermes bench
    /// --accept-hooks`, which must leave the home as it found it).
    AcceptForThisRun,
    /// Like [`Consent::Refuse`], and nothing is written either: a hook that
    /// `hooks_auto_accept: true` approves runs for this run only (`hermes bench`).
    ReadOnly,
}

/// What [`register_from_config`] did.
#[derive(Clone, Debug, Default)]
pub struct ShellReport {
    /// The hooks added to the registry, in config order.
    pub registered: Vec<ShellHookSpec>,
    /// Every warning (config problems, refusals, changed scripts, failed writes), in order.
    /// Each was also logged.
    pub warnings: Vec<String>,
    /// The warnings (also in `warnings`) about hooks left out by a decision rather than
    /// a mistake in `config.yaml`: not approved, changed since approval, or refused by the
    /// ownership and permission check. A gateway reload applies these (a revoked hook
    /// stops) where it refuses a config that does not parse.
    pub declined: Vec<String>,
}

impl ShellReport {
    fn warn(&mut self, message: String) {
        tracing::warn!("{message}");
        self.warnings.push(message);
    }

    fn decline(&mut self, message: String) {
        self.declined.push(message.clone());
        self.warn(message);
    }
}

/// Adds every approved shell hook of the `hooks:` section to `registry`, after whatever is already there.
///
/// For each valid entry, in config order:
///
/// 1. An equal hook (same home, event, matcher and command) already in the registry is
///    skipped, so calling this twice is harmless.
/// 2. An allowlisted hook whose script still has the approved content is added.
/// 3. One whose script changed since approval is not added (the warning names the
///    `hermes hooks allow` command to run), unless the user approves it again at the prompt.
///    A `fail_closed` hook is added anyway and blocks every call until it is re-approved.
/// 4. An unseen hook is approved and recorded when `consent` is [`Consent::Accept`] or the
///    config says `hooks_auto_accept: true`; asked about with [`Consent::Ask`]; otherwise
///    refused with the reference's warning.
pub fn register_from_config(
    home: &Home,
    hooks: &HooksSection,
    consent: Consent<'_>,
    registry: &mut Registry,
) -> ShellReport {
    register_from_config_in(home, hooks, consent, registry, None)
}

/// [`register_from_config`] for an agent working in `work_dir` (see
/// [`ShellHookSpec::work_dir`]); `None` is the process's working directory.
pub fn register_from_config_in(
    home: &Home,
    hooks: &HooksSection,
    consent: Consent<'_>,
    registry: &mut Registry,
    work_dir: Option<&std::path::Path>,
) -> ShellReport {
    register_with(home, hooks, Vec::new(), consent, registry, work_dir)
}

/// [`register_from_config_in`], with `plugin_hooks` (a Claude Code plugin's, see
/// [`claude_plugin`]) after `config.yaml`'s, under the same consent and allowlist.
pub fn register_with(
    home: &Home,
    hooks: &HooksSection,
    plugin_hooks: Vec<ShellHookSpec>,
    consent: Consent<'_>,
    registry: &mut Registry,
    work_dir: Option<&std::path::Path>,
) -> ShellReport {
    let mut parsed = config::parse(hooks);
    parsed.specs.extend(plugin_hooks);
    for spec in &mut parsed.specs {
        spec.set_work_dir(work_dir.map(std::path::Path::to_path_buf));
    }
    let mut report = ShellReport {
        registered: Vec::new(),
        warnings: parsed.warnings,
        declined: Vec::new(),
    };
    let accept =
        matches!(consent, Consent::Accept | Consent::AcceptForThisRun) || hooks.auto_accept;
    let records = !matches!(consent, Consent::AcceptForThisRun | Consent::ReadOnly);
    let mut prompter = match consent {
        Consent::Ask(p) => Some(p),
        Consent::Accept | Consent::Refuse | Consent::AcceptForThisRun | Consent::ReadOnly => None,
    };
    let record = |allowlist: &Allowlist, spec: &ShellHookSpec, report: &mut ShellReport| {
        if records {
            record(allowlist, spec, report)
        } else {
            spec.script_sha256()
        }
    };
    let allowlist = Allowlist::new(home);
    // Read once for every hook (a large allowlist read per hook made start-up crawl), and
    // again only after this load recorded an approval.
    let mut approvals = allowlist.approvals();
    let policy = Policy::from_hooks(hooks);
    for (position, spec) in parsed.specs.into_iter().enumerate() {
        let identity = identity(home, &spec);
        if registered(registry, &spec.event, &identity) {
            continue;
        }
        // Before consent: approving a file someone else can rewrite approves nothing.
        match script_trust(&spec, &policy) {
            Ok(warnings) => warnings
                .into_iter()
                .for_each(|w| report.warn(format!("shell hook for {}: {w}", spec.event))),
            Err(refusal) => {
                report.decline(refusal);
                continue;
            }
        }
        let current = spec.script_sha256();
        let approval = approvals
            .iter()
            .find(|a| a.event == spec.event && a.command == spec.command)
            .cloned();
        let mut recorded = false;
        let pin = match approval {
            Some(approval) if approval.content_matches(current.as_deref()) => {
                match approval.script_sha256 {
                    Some(pinned) => Pin::Sha(pinned),
                    None => Pin::Unpinned,
                }
            }
            Some(approval) => {
                // Said before the prompt, which asks about it.
                let changed = changed_warning(&spec);
                report.warn(changed.clone());
                let reapproved = prompter
                    .as_mut()
                    .is_some_and(|p| p.confirm(&spec.event, &spec.command));
                if reapproved {
                    recorded = true;
                    Pin::Sha(record(&allowlist, &spec, &mut report))
                } else if spec.fail_closed {
                    Pin::Sha(approval.script_sha256.flatten())
                } else {
                    report.declined.push(changed);
                    continue;
                }
            }
            None => {
                let approved = if accept {
                    tracing::info!(
                        "shell hook auto-approved via --accept-hooks / env / config: {} -> {}",
                        spec.event,
                        spec.command
                    );
                    true
                } else {
                    prompter
                        .as_mut()
                        .is_some_and(|p| p.confirm(&spec.event, &spec.command))
                };
                if !approved {
                    report.decline(format!(
                        "shell hook for {} ({}) not allowlisted — skipped. Use --accept-hooks / \
                         HERMES_ACCEPT_HOOKS=1 / hooks_auto_accept: true, or approve at the TTY prompt next run.",
                        spec.event, spec.command
                    ));
                    continue;
                }
                recorded = true;
                Pin::Sha(record(&allowlist, &spec, &mut report))
            }
        };
        if recorded {
            approvals = allowlist.approvals();
        }
        tracing::info!(
            "shell hook registered: {} -> {} (matcher={}, timeout={}s)",
            spec.event,
            spec.command,
            spec.matcher.as_ref().map_or("None", |m| m.as_str()),
            spec.timeout
        );
        let hook = ShellHook::new(spec.clone(), pin, identity, policy, position);
        if spec.shadow {
            registry.add_shadow(
                &spec.event,
                crate::registry::Entry {
                    source: Source::Shell,
                    label: spec.label(),
                    callback: crate::registry::Callback::External(Arc::new(hook)),
                },
            );
        } else {
            registry.add_external(&spec.event, Source::Shell, spec.label(), Arc::new(hook));
        }
        report.registered.push(spec);
    }
    let carries_session_context = report.registered.iter().any(|s| {
        (s.format == config::Format::Claude && s.event == "on_session_start") || s.background
    });
    if carries_session_context && !registered(registry, "pre_llm_call", WaitingContext::IDENTITY) {
        registry.add_external(
            "pre_llm_call",
            Source::Shell,
            "shell_hook[pre_llm_call:waiting context]".into(),
            Arc::new(WaitingContext),
        );
    }
    report
}

/// Whether an external hook with `identity` is already registered on `event` (a loader run
/// twice adds nothing the second time).
fn registered(registry: &Registry, event: &str, identity: &str) -> bool {
    registry.entries(event).iter().any(|e| match &e.callback {
        Callback::External(h) => h.identity().as_deref() == Some(identity),
        _ => false,
    })
}

/// Context that `format: claude` `SessionStart` hooks and `async: true` hooks gave, by
/// session id, until that session's next `pre_llm_call` takes it. `on_session_start` is an
/// observer in this host (its answers are not aggregated), but Claude Code adds a
/// SessionStart hook's output to the conversation, and hooks written for it rely on that;
/// so the context is kept here and handed to the turn's `pre_llm_call`, which fires right
/// after it on the same turn. An async hook's context waits for the session's next model
/// call in the same way.
#[allow(clippy::type_complexity)]
static PENDING_SESSION_CONTEXT: std::sync::Mutex<
    std::collections::BTreeMap<String, Vec<(usize, String)>>,
> = std::sync::Mutex::new(std::collections::BTreeMap::new());

/// Sessions whose start context can wait at once; beyond it, new ones are dropped with a
/// warning (a host that starts sessions and never calls the model for them).
const MAX_PENDING_SESSIONS: usize = 1024;

fn stash_session_context(session_id: &str, position: usize, text: String) -> Option<String> {
    let mut pending = PENDING_SESSION_CONTEXT
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if !pending.contains_key(session_id) && pending.len() >= MAX_PENDING_SESSIONS {
        return Some(format!(
            "hook context for session {session_id} dropped: {MAX_PENDING_SESSIONS} sessions already wait for their next model call"
        ));
    }
    pending
        .entry(session_id.to_string())
        .or_default()
        .push((position, text));
    None
}

/// The `pre_llm_call` hook that hands a session its waiting context (SessionStart and
/// async hooks').
struct WaitingContext;

impl WaitingContext {
    const IDENTITY: &'static str = "waiting-hook-context";
}

impl ExternalHook for WaitingContext {
    fn matches(&self, _event: &EventView<'_>) -> bool {
        true
    }

    fn run(&self, event: &EventView<'_>) -> HookResult {
        let session = event.get_str("session_id").unwrap_or_default();
        let texts = PENDING_SESSION_CONTEXT
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session);
        Ok(texts.map(|mut texts| {
            // In config order, as the registry combines context, whichever finished first.
            texts.sort_by_key(|(position, _)| *position);
            let texts: Vec<String> = texts.into_iter().map(|(_, text)| text).collect();
            Decision::Context(texts.join("\n\n")).to_reply()
        }))
    }

    fn identity(&self) -> Option<String> {
        Some(Self::IDENTITY.to_string())
    }
}

/// The ownership and permission check of a shell hook's script and the directory holding
/// it (see [`trust`](crate::trust)); a URL hook has no file to check. `Ok` with the
/// warnings a lenient policy lets through; `Err` with the line saying the hook is not run.
///
/// # Errors
///
/// `shell hook for <event> (<command>) not run: <file> ... is writable by ...; run ...`.
///
/// ```
/// use std::os::unix::fs::PermissionsExt;
/// use hermes_host::{shell::{script_trust, ShellHookSpec}, trust::Policy};
/// let dir = tempfile::tempdir().unwrap();
/// let script = dir.path().join("guard.sh");
/// std::fs::write(&script, "#!/bin/sh\n").unwrap();
/// std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o757)).unwrap();
/// let spec = ShellHookSpec::new("pre_tool_call", &format!("sh {}", script.display()));
/// let refusal = script_trust(&spec, &Policy::STRICT).unwrap_err();
/// assert!(refusal.contains("not run") && refusal.contains("chmod go-w"), "{refusal}");
/// ```
pub fn script_trust(spec: &ShellHookSpec, policy: &Policy) -> Result<Vec<String>, String> {
    check_script(
        spec,
        script::resolved_path(&spec.command).as_deref(),
        policy,
    )
}

/// [`script_trust`] with the script's path already resolved (a registered hook keeps it).
fn check_script(
    spec: &ShellHookSpec,
    script: Option<&std::path::Path>,
    policy: &Policy,
) -> Result<Vec<String>, String> {
    let Some(script) = script.filter(|_| spec.http.is_none()) else {
        return Ok(Vec::new());
    };
    let mut paths = Vec::new();
    if let Some(dir) = script.parent().filter(|d| !d.as_os_str().is_empty()) {
        paths.push((dir, Role::ShellScriptDir));
    }
    paths.push((script, Role::ShellScript));
    policy.check(&paths).map_err(|why| {
        format!(
            "shell hook for {} ({}) not run: {why}",
            spec.event, spec.command
        )
    })
}

/// Records an approval; a failed write is a warning and the approval holds for this run.
/// Returns the pinned content hash.
fn record(allowlist: &Allowlist, spec: &ShellHookSpec, report: &mut ShellReport) -> Option<String> {
    match allowlist.approve_file(&spec.event, &spec.command, spec.script_file().as_deref()) {
        Ok(approval) => approval.script_sha256.flatten(),
        Err(e) => {
            report.warn(format!(
                "Failed to persist shell hook allowlist to {}: {}. The approval is in-memory for this run, \
                 but the next startup will re-prompt (or skip registration on non-TTY runs without \
                 --accept-hooks / HERMES_ACCEPT_HOOKS).",
                e.path.display(),
                e.message
            ));
            spec.script_sha256()
        }
    }
}

/// The warning for a hook whose script changed since it was approved.
///
/// ```
/// let spec = hermes_host::shell::ShellHookSpec::new("pre_tool_call", "bash /h/guard.sh");
/// assert_eq!(
///     hermes_host::shell::changed_warning(&spec),
///     "shell hook for pre_tool_call (bash /h/guard.sh) not run: its script /h/guard.sh changed since it was approved. \
///      Review the change, then run `hermes hooks allow 'bash /h/guard.sh' --event pre_tool_call` to approve it again."
/// );
/// ```
pub fn changed_warning(spec: &ShellHookSpec) -> String {
    format!(
        "shell hook for {} ({}) not run: its script {} changed since it was approved. Review the change, \
         then run `{}` to approve it again.",
        spec.event,
        spec.command,
        script::script_path(&spec.command),
        allow_command(spec)
    )
}

/// `hermes hooks allow <command> --event <event>`, with the command quoted for a shell.
pub fn allow_command(spec: &ShellHookSpec) -> String {
    format!(
        "hermes hooks allow {} --event {}",
        shell_words::quote(&spec.command),
        spec.event
    )
}

/// The registry identity of a shell hook: home, event, matcher and command.
fn identity(home: &Home, spec: &ShellHookSpec) -> String {
    format!(
        "shell\0{}\0{}\0{}\0{}",
        home.root().display(),
        spec.event,
        spec.matcher.as_ref().map_or("", |m| m.as_str()),
        spec.command
    )
}

/// What a registered hook expects of its script's content.
#[derive(Clone, Debug)]
enum Pin {
    /// Approved before content pinning: any content runs.
    Unpinned,
    /// This sha256 (`None`: the command named no readable file).
    Sha(Option<String>),
}

/// A registered shell hook, run by the registry.
pub struct ShellHook {
    spec: ShellHookSpec,
    pin: Pin,
    script: Option<PathBuf>,
    identity: String,
    /// The running process of a `persistent: true` hook.
    persistent: Option<persistent::Persistent>,
    /// The kept-alive connections of a `url:` hook.
    client: Option<http::Client>,
    /// `hooks.strict_permissions` when registered; the script is checked again per firing.
    policy: Policy,
    /// Its place in `config.yaml`: hooks of one priority run together, and what they leave
    /// for later (SessionStart context) is put back in this order.
    position: usize,
}

impl ShellHook {
    fn new(
        spec: ShellHookSpec,
        pin: Pin,
        identity: String,
        policy: Policy,
        position: usize,
    ) -> ShellHook {
        // The file consent pinned, as the hook runs it (see `ShellHookSpec::script_file`).
        let script = spec.script_file();
        let persistent = spec.persistent.then(|| {
            let pool = persistent::Persistent::with_instances(spec.instances);
            match (&spec.work_dir, spawn::argv(&spec.command)) {
                (Some(dir), Ok(argv)) => pool.in_dir(
                    pinned_argv(&spec.command, argv, script.as_deref()),
                    dir.clone(),
                ),
                _ => pool,
            }
        });
        let client = spec.http.as_ref().map(|_| http::Client::new());
        ShellHook {
            spec,
            pin,
            script,
            identity,
            persistent,
            client,
            policy,
            position,
        }
    }

    /// The hook's configuration.
    pub fn spec(&self) -> &ShellHookSpec {
        &self.spec
    }

    /// Whether the script still has the approved content.
    fn content_ok(&self) -> bool {
        if self.spec.http.is_some() {
            // Consent is pinned to the URL itself, which cannot change under the approval.
            return true;
        }
        match &self.pin {
            Pin::Unpinned => true,
            Pin::Sha(expected) => {
                let current = self.script.as_deref().and_then(script::sha256_file);
                &current == expected
            }
        }
    }
}

impl ExternalHook for ShellHook {
    fn matches(&self, event: &EventView<'_>) -> bool {
        self.spec.matches_event(|k| event.get_str(k))
            && self.spec.runs_after(event.get_str("status"))
    }

    fn run(&self, event: &EventView<'_>) -> HookResult {
        let (answer, warnings) = self.run_reporting(event);
        for warning in &warnings {
            tracing::warn!("{warning}");
        }
        answer
    }

    fn run_reporting(&self, event: &EventView<'_>) -> (HookResult, Vec<String>) {
        let spec = &self.spec;
        if !self.content_ok() {
            let refusal = fail_closed(spec, "script changed since approval");
            return (
                Ok(refusal.map(|d| d.to_reply())),
                vec![changed_warning(spec)],
            );
        }
        // The script's modes can change after registration as its content can; a lenient
        // policy warned once at registration and is not repeated per firing.
        // (No let chain: they need Rust 1.88, and rust-version is 1.85.)
        if self.policy.strict {
            if let Err(refusal) = check_script(spec, self.script.as_deref(), &self.policy) {
                let decision =
                    fail_closed(spec, "its script fails the ownership and permission check");
                return (Ok(decision.map(|d| d.to_reply())), vec![refusal]);
            }
        }
        let kwargs = wire::kwargs_from_view(event, true);
        if spec.background {
            let refused = background::launch(spec.clone(), kwargs, self.position);
            return (Ok(None), refused.into_iter().collect());
        }
        if spec.format == config::Format::Claude {
            let (_run, mut evaluation) = run_claude(spec, &kwargs, self.client.as_ref());
            note_run_control(&kwargs, self.position, &mut evaluation);
            if spec.event == "on_session_start" {
                if let Some(Decision::Context(text)) = evaluation.decision.take() {
                    let session = kwargs.get("session_id").and_then(Value::as_str);
                    let dropped =
                        stash_session_context(session.unwrap_or_default(), self.position, text);
                    evaluation.warnings.extend(dropped);
                }
            }
            return (
                Ok(evaluation.decision.and_then(|d| reply_for(&spec.event, d))),
                evaluation.warnings,
            );
        }
        let dir = agent_dir(spec);
        let stdin = wire::serialize_payload_in(&spec.event, &kwargs, &dir);
        let timeout = Duration::from_secs(spec.timeout);
        let run = match (&self.persistent, &self.client, &spec.http) {
            (_, Some(client), Some(http)) => client.post(http, stdin.as_bytes(), timeout),
            (Some(p), _, _) => p.fire(&spec.command, &stdin, timeout),
            _ => match spawn::argv(&spec.command) {
                Ok(argv) => spawn::run_argv_in(
                    &pinned_argv(&spec.command, argv, self.script.as_deref()),
                    stdin.as_bytes(),
                    timeout,
                    &[("CLAUDE_PROJECT_DIR", dir.as_str())],
                    spec.work_dir.as_deref(),
                ),
                Err(error) => spawn::RunResult {
                    error: Some(error),
                    ..spawn::RunResult::default()
                },
            },
        };
        let evaluation = evaluate(spec, &run);
        let stderr = run.stderr.trim();
        if !stderr.is_empty() {
            tracing::debug!(
                "shell hook stderr (event={} command={}): {}",
                spec.event,
                spec.command,
                stderr.chars().take(400).collect::<String>()
            );
        }
        (
            Ok(evaluation.decision.and_then(|d| reply_for(&spec.event, d))),
            evaluation.warnings,
        )
    }

    fn subprocess(&self, event: &EventView<'_>) -> Option<Subprocess> {
        // A persistent or HTTP hook spawns nothing per firing; a bare spawn is no comparison.
        if self.spec.persistent || self.spec.http.is_some() {
            return None;
        }
        let spec = &self.spec;
        let kwargs = wire::kwargs_from_view(event, true);
        let (argv, env, stdin) = if spec.format == config::Format::Claude {
            let (cwd, stdin) = claude_input(spec, &kwargs);
            let argv = claude::argv_as_written(&spec.command).ok()?;
            let mut env = vec![("CLAUDE_PROJECT_DIR".to_string(), cwd)];
            env.extend(spec.env.iter().cloned());
            (argv, env, stdin)
        } else {
            let stdin = wire::serialize_payload(&spec.event, &kwargs);
            (spawn::argv(&spec.command).ok()?, Vec::new(), stdin)
        };
        Some(Subprocess {
            command: spec.command.clone(),
            argv,
            env,
            stdin,
            timeout: Duration::from_secs(spec.timeout),
        })
    }

    fn priority(&self) -> i64 {
        self.spec.priority
    }

    fn identity(&self) -> Option<String> {
        Some(self.identity.clone())
    }
}

/// Hands what a Claude-format answer asks of the agent beyond its reply (approval of
/// this tool call, the end of the turn or run) to [`run_control`](crate::run_control),
/// keyed by the payload's session and tool call, where the host takes it after firing.
fn note_run_control(kwargs: &Map<String, Value>, position: usize, evaluation: &mut Evaluation) {
    let key = |k: &str| kwargs.get(k).and_then(Value::as_str).unwrap_or_default();
    let session = claude::session_of(kwargs);
    if let Some(permission) = evaluation.permission.take() {
        crate::run_control::note_permission(session, key("tool_call_id"), permission);
    }
    if let Some(stop) = evaluation.stop.take() {
        crate::run_control::note_stop(session, stop);
    }
    for text in std::mem::take(&mut evaluation.feedback) {
        crate::run_control::note_feedback(session, key("tool_call_id"), position, text);
    }
    if let Some(reason) = evaluation.continue_with.take() {
        crate::run_control::note_continue(session, position, reason);
    }
}

/// The reply the registry can use for `event`: blocks and modifies on `pre_tool_call`,
/// context on `pre_llm_call`. On other events a shell hook is an observer (as in the
/// reference, where such answers reach aggregators that ignore them).
fn reply_for(event: &str, decision: Decision) -> Option<hermes_hooks_abi::core::Reply> {
    let kind = hooks::spec(event).map_or(OutcomeKind::Observer, |s| s.outcome);
    let fits = match kind {
        OutcomeKind::ToolDecision => matches!(
            decision,
            Decision::Block(_) | Decision::Modify(_) | Decision::Approve(..)
        ),
        OutcomeKind::Context => matches!(decision, Decision::Context(_)),
        OutcomeKind::Verify => matches!(decision, Decision::Continue(_)),
        OutcomeKind::Observer
        | OutcomeKind::Replace
        | OutcomeKind::ReplaceNonEmpty
        | OutcomeKind::Dispatch => false,
    };
    fits.then(|| decision.to_reply())
}

/// What one run of a hook means.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evaluation {
    /// The decision in canonical form, if any.
    pub decision: Option<Decision>,
    /// The warnings the run deserves, with the reference's texts (not yet logged).
    pub warnings: Vec<String>,
    /// A `format: claude` hook's say on the host's approval of this tool call
    /// (`permissionDecision: ask` / `allow`), recorded in [`run_control`](crate::run_control)
    /// when the hook fires for an agent.
    pub permission: Option<crate::run_control::Permission>,
    /// A `format: claude` hook's `continue: false` (the run ends) or blocked prompt (the
    /// turn ends), recorded in [`run_control`](crate::run_control) when the hook fires.
    pub stop: Option<crate::run_control::Stop>,
    /// A `format: claude` PostToolUse hook's word to the model about the call, recorded in
    /// [`run_control`](crate::run_control) when the hook fires.
    pub feedback: Vec<String>,
    /// A `format: claude` Stop or SubagentStop hook's instruction to keep working, recorded
    /// in [`run_control`](crate::run_control) when the hook fires.
    pub continue_with: Option<String>,
}

/// `hook <command> failed closed: <reason>` for a `fail_closed` hook on a blocking event.
fn fail_closed(spec: &ShellHookSpec, reason: &str) -> Option<Decision> {
    (spec.fail_closed && BLOCKING_EVENTS.contains(&spec.event.as_str()))
        .then(|| Decision::Block(format!("hook {} failed closed: {reason}", spec.command)))
}

/// Turns a finished run into a decision and warnings (reference §4.8 plus the later rules):
///
/// - could not run, or timed out: a warning and no decision (fail-open), or a block naming
///   the hook when it is `fail_closed`;
/// - a non-zero exit is a warning, but stdout is still read (exit 1 plus a block answer
///   blocks);
/// - on `pre_tool_call`, exit code 2 blocks: with the answer's message, else stderr, else the
///   default message;
/// - a `fail_closed` hook that exited non-zero or printed something that is not JSON, without
///   blocking itself, blocks with `hook <command> failed closed: <reason>`.
///
/// ```
/// use hermes_host::shell::{evaluate, ShellHookSpec, spawn::RunResult, wire::Decision};
/// let spec = ShellHookSpec::new("pre_tool_call", "./guard.sh");
/// let run = RunResult { returncode: Some(2), stderr: "no rm\n".into(), ..Default::default() };
/// assert_eq!(evaluate(&spec, &run).decision, Some(Decision::Block("no rm".into())));
/// ```
pub fn evaluate(spec: &ShellHookSpec, run: &RunResult) -> Evaluation {
    let (event, command, noun) = (&spec.event, &spec.command, spec.noun());
    let (target, answer) = match spec.http {
        Some(_) => ("url", "response body"),
        None => ("command", "stdout"),
    };
    let mut warnings = Vec::new();
    if let Some(error) = &run.error {
        warnings.push(format!(
            "{noun} failed (event={event} {target}={command}): {error}"
        ));
        return Evaluation {
            decision: fail_closed(spec, error),
            warnings,
            ..Default::default()
        };
    }
    if run.timed_out {
        warnings.push(format!(
            "{noun} timed out after {:.2}s (event={event} {target}={command})",
            run.elapsed_seconds()
        ));
        return Evaluation {
            decision: fail_closed(spec, &format!("timed out after {}s", spec.timeout)),
            warnings,
            ..Default::default()
        };
    }
    for (stream, dropped) in [(answer, run.stdout_dropped), ("stderr", run.stderr_dropped)] {
        if dropped > 0 {
            warnings.push(format!(
                "{noun} {stream} exceeded {} bytes; dropped the remaining {dropped} bytes (event={event} {target}={command})",
                spawn::OUTPUT_CAP
            ));
        }
    }
    let rc = run.returncode.unwrap_or(0);
    if rc != 0 {
        let stderr: String = run.stderr.trim().chars().take(400).collect();
        warnings.push(format!(
            "shell hook exited {rc} (event={event} command={command}); stderr={stderr}"
        ));
    }
    let stdout = wire::read_stdout(&run.stdout);
    let mut decision = match &stdout {
        Stdout::Empty => None,
        Stdout::NotJson(head) if spec.http.is_some() => {
            warnings.push(format!(
                "HTTP hook response body was not valid JSON (event={event} url={command}): {head}"
            ));
            None
        }
        Stdout::NotJson(head) => {
            warnings.push(format!(
                "shell hook stdout was not valid JSON (event={event}): {head}"
            ));
            None
        }
        Stdout::Json(value) => wire::decide(event, value),
    };
    if BLOCKING_EVENTS.contains(&event.as_str()) && !matches!(decision, Some(Decision::Block(_))) {
        if rc == 2 {
            decision = Some(Decision::Block(wire::exit2_message(&stdout, &run.stderr)));
        } else if rc != 0 {
            decision = fail_closed(spec, &format!("exited {rc}")).or(decision);
        } else if matches!(stdout, Stdout::NotJson(_)) {
            let reason = format!("{answer} was not valid JSON");
            decision = fail_closed(spec, &reason).or(decision);
        }
    }
    Evaluation {
        decision,
        warnings,
        ..Default::default()
    }
}

/// Runs `spec` once with `kwargs` (the event's keyword arguments) and evaluates the run, as
/// `hermes hooks test` and `hermes hooks doctor` do. The allowlist is not consulted, and the
/// payload has no `telemetry_schema_version` (as in the reference).
///
/// ```no_run
/// use hermes_host::shell::{run_once, ShellHookSpec};
/// let kwargs = serde_json::json!({"tool_name": "terminal", "args": {"command": "ls"}});
/// let (run, evaluation) = run_once(&ShellHookSpec::new("pre_tool_call", "./guard.sh"), kwargs.as_object().unwrap());
/// println!("exit={:?} decision={:?}", run.returncode, evaluation.decision);
/// ```
pub fn run_once(spec: &ShellHookSpec, kwargs: &Map<String, Value>) -> (RunResult, Evaluation) {
    if spec.format == config::Format::Claude {
        return run_claude(spec, kwargs, None);
    }
    let script = spec.script_file();
    let dir = agent_dir(spec);
    let stdin = wire::serialize_payload_in(&spec.event, kwargs, &dir);
    let timeout = Duration::from_secs(spec.timeout);
    let run = match (&spec.http, spawn::argv(&spec.command)) {
        (Some(http), _) => http::Client::new().post(http, stdin.as_bytes(), timeout),
        (None, Ok(argv)) => spawn::run_argv_in(
            &pinned_argv(&spec.command, argv, script.as_deref()),
            stdin.as_bytes(),
            timeout,
            &[("CLAUDE_PROJECT_DIR", dir.as_str())],
            spec.work_dir.as_deref(),
        ),
        (None, Err(error)) => spawn::RunResult {
            error: Some(error),
            ..spawn::RunResult::default()
        },
    };
    let evaluation = evaluate(spec, &run);
    (run, evaluation)
}

/// Runs a `format: claude` hook once: Claude's payload on stdin (or as the POST body),
/// `CLAUDE_PROJECT_DIR` set to the working directory, and the answer read with Claude's
/// rules ([`claude::decide`]). Failures to run are treated as for any hook.
fn run_claude(
    spec: &ShellHookSpec,
    kwargs: &Map<String, Value>,
    client: Option<&http::Client>,
) -> (RunResult, Evaluation) {
    let (cwd, stdin) = claude_input(spec, kwargs);
    let timeout = Duration::from_secs(spec.timeout);
    let run = match (&spec.http, client) {
        (Some(http), Some(client)) => client.post(http, stdin.as_bytes(), timeout),
        (Some(http), None) => http::Client::new().post(http, stdin.as_bytes(), timeout),
        // Run as written, through the shell, in the agent's directory, as Claude Code
        // runs a hook in the project: a relative path is the project's, and the file
        // consent pinned is that one (see `ShellHookSpec::script_file`), so nothing in the
        // command is rewritten.
        (None, _) => match claude::argv_as_written(&spec.command) {
            Ok(argv) => {
                // SessionStart hooks get the session's environment file, where `export`
                // lines reach the session's later terminal commands.
                let env_file = (spec.event == "on_session_start")
                    .then(|| session_env_file(kwargs))
                    .flatten()
                    .map(|p| p.display().to_string());
                let mut env = vec![("CLAUDE_PROJECT_DIR", cwd.as_str())];
                if let Some(file) = &env_file {
                    env.push(("CLAUDE_ENV_FILE", file.as_str()));
                }
                env.extend(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
                spawn::run_argv_in(
                    &argv,
                    stdin.as_bytes(),
                    timeout,
                    &env,
                    spec.work_dir.as_deref(),
                )
            }
            // Reported as for any hook whose command cannot be split.
            Err(error) => spawn::RunResult {
                error: Some(error),
                ..spawn::RunResult::default()
            },
        },
    };
    let mut evaluation = evaluate(spec, &run);
    if run.error.is_some() || run.timed_out {
        return (run, evaluation);
    }
    let tool = kwargs
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let answer = claude::decide(&spec.event, tool, &run);
    // The generic reading's warnings about a non-zero exit stay; its decision does not.
    evaluation
        .warnings
        .retain(|w| w.starts_with("shell hook exited"));
    if run.returncode == Some(2) {
        evaluation.warnings.clear();
    }
    evaluation.warnings.extend(answer.warnings);
    if let Some(message) = answer.system_message {
        evaluation
            .warnings
            .push(format!("{} {} says: {message}", spec.noun(), spec.command));
    }
    evaluation.permission = answer.permission;
    evaluation.stop = answer.stop;
    evaluation.feedback = answer.feedback;
    evaluation.continue_with = answer.continue_with;
    evaluation.decision = answer.decision.or_else(|| fail_closed_claude(spec, &run));
    (run, evaluation)
}

/// The directory the agent works in, as hooks are told it: `--cwd`, else the process's.
fn agent_dir(spec: &ShellHookSpec) -> String {
    match &spec.work_dir {
        Some(dir) => dir.display().to_string(),
        None => std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_default(),
    }
}

/// `argv` with the command's script word made the absolute path consent pinned, so that a
/// hook started in the agent's directory runs the approved file and not another of the same
/// relative name. A shell's `-c` text is left as it is (its words are the shell's), and so
/// is any word that names no file (a `bash -c` text, a `NAME=value` of `env`).
fn pinned_argv(
    command: &str,
    mut argv: Vec<String>,
    script: Option<&std::path::Path>,
) -> Vec<String> {
    let Some(script) = script else {
        return argv;
    };
    let word = script::script_path(command);
    let relative = word.contains('/') && !word.starts_with('/') && !word.starts_with('~');
    // Only a word that names a file is the script: `bash -c '... a/b ...'` and
    // `env DIR=/x cmd` have words with a slash that must run as written.
    if relative && script.is_file() {
        for arg in argv.iter_mut().filter(|a| **a == word) {
            *arg = script.display().to_string();
        }
    }
    argv
}

/// What a `format: claude` hook is given: the project directory (its payload's `cwd` and
/// `CLAUDE_PROJECT_DIR`) and Claude's payload for `kwargs`.
fn claude_input(spec: &ShellHookSpec, kwargs: &Map<String, Value>) -> (String, String) {
    let cwd = agent_dir(spec);
    // A path the caller supplied (`hooks test` with a Claude payload) wins over the
    // session's own file.
    let supplied = kwargs
        .get("transcript_path")
        .and_then(Value::as_str)
        .map(str::to_string);
    let transcript_path =
        supplied.or_else(|| session_file(kwargs, "jsonl").map(|p| p.display().to_string()));
    let context = claude::Context {
        cwd: cwd.clone(),
        transcript_path,
        permission_mode: "default".into(),
    };
    let stdin = claude::payload(&spec.event, kwargs, &context).to_string();
    (cwd, stdin)
}

/// `$HERMES_HOME/sessions/<session>.<ext>` of the firing's session, when it exists: the
/// transcript (`jsonl`) and the environment file (`env`) the agent keeps for it.
fn session_file(kwargs: &Map<String, Value>, ext: &str) -> Option<PathBuf> {
    session_path(kwargs, ext).filter(|path| path.is_file())
}

/// Where `$HERMES_HOME/sessions/<session>.<ext>` of the firing's session is, whether or not
/// it exists; `None` without a session, a home, or for an id that is not a plain name.
fn session_path(kwargs: &Map<String, Value>, ext: &str) -> Option<PathBuf> {
    let id = claude::session_of(kwargs);
    // A session id is a file name here: nothing that could leave the directory.
    crate::home::check_session_id(id).ok()?;
    let home = std::env::var_os("HERMES_HOME")?;
    Some(
        PathBuf::from(home)
            .join("sessions")
            .join(format!("{id}.{ext}")),
    )
}

/// The environment file of the firing's session, `$HERMES_HOME/sessions/<session>.env`,
/// created empty (private to the user) when the session has none yet: a gateway session
/// gets one only when a SessionStart hook may write to it.
fn session_env_file(kwargs: &Map<String, Value>) -> Option<PathBuf> {
    let path = session_path(kwargs, "env")?;
    if crate::private_file::is_private(&path) {
        return Some(path);
    }
    use std::os::unix::fs::DirBuilderExt as _;
    // Whatever else is there (a link, someone else's file) is replaced or refused, never
    // written through.
    let created = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path.parent()?)
        .and_then(|()| crate::private_file::create_fresh(&path));
    match created {
        Ok(_) => Some(path),
        Err(e) => {
            tracing::warn!(
                "cannot create {}: {e}; SessionStart hooks run without CLAUDE_ENV_FILE",
                path.display()
            );
            None
        }
    }
}

/// A `fail_closed` Claude-format hook that failed without deciding blocks, as any hook.
fn fail_closed_claude(spec: &ShellHookSpec, run: &RunResult) -> Option<Decision> {
    match run.returncode {
        Some(rc) if rc != 0 && rc != 2 => fail_closed(spec, &format!("exited {rc}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(event: &str, fail_closed: bool) -> ShellHookSpec {
        let mut s = ShellHookSpec::new(event, "./h.sh");
        s.fail_closed = fail_closed;
        s
    }

    fn ran(rc: i32, stdout: &str, stderr: &str) -> RunResult {
        RunResult {
            returncode: Some(rc),
            stdout: stdout.into(),
            stderr: stderr.into(),
            ..Default::default()
        }
    }

    #[test]
    fn exit_1_with_a_block_answer_still_blocks() {
        let e = evaluate(
            &spec("pre_tool_call", false),
            &ran(1, r#"{"action":"block","message":"m"}"#, "oops"),
        );
        assert_eq!(e.decision, Some(Decision::Block("m".into())));
        assert_eq!(
            e.warnings,
            ["shell hook exited 1 (event=pre_tool_call command=./h.sh); stderr=oops"]
        );
    }

    #[test]
    fn exit_2_blocks_only_on_pre_tool_call() {
        assert_eq!(
            evaluate(&spec("pre_tool_call", false), &ran(2, "", "")).decision,
            Some(Decision::Block(wire::DEFAULT_BLOCK_MESSAGE.into()))
        );
        assert_eq!(
            evaluate(&spec("post_tool_call", false), &ran(2, "", "")).decision,
            None
        );
    }

    #[test]
    fn exit_2_overrides_a_modify_answer() {
        let e = evaluate(
            &spec("pre_tool_call", false),
            &ran(2, r#"{"action":"modify","args":{"a":1}}"#, "stop"),
        );
        assert_eq!(e.decision, Some(Decision::Block("stop".into())));
    }

    #[test]
    fn failures_are_fail_open_unless_fail_closed() {
        let failed = RunResult {
            error: Some("command not found".into()),
            ..Default::default()
        };
        assert_eq!(
            evaluate(&spec("pre_tool_call", false), &failed).decision,
            None
        );
        assert_eq!(
            evaluate(&spec("pre_tool_call", true), &failed).decision,
            Some(Decision::Block(
                "hook ./h.sh failed closed: command not found".into()
            ))
        );
        let timed_out = RunResult {
            timed_out: true,
            elapsed: Duration::from_millis(1004),
            ..Default::default()
        };
        let e = evaluate(&spec("pre_tool_call", true), &timed_out);
        assert_eq!(
            e.decision,
            Some(Decision::Block(
                "hook ./h.sh failed closed: timed out after 60s".into()
            ))
        );
        assert_eq!(
            e.warnings,
            ["shell hook timed out after 1.00s (event=pre_tool_call command=./h.sh)"]
        );
    }

    #[test]
    fn fail_closed_blocks_a_crash_with_empty_stdout_and_non_json_output() {
        // The reference's open bug #102405: a non-zero exit with empty stdout did not block.
        assert_eq!(
            evaluate(&spec("pre_tool_call", true), &ran(1, "", "")).decision,
            Some(Decision::Block(
                "hook ./h.sh failed closed: exited 1".into()
            ))
        );
        let e = evaluate(&spec("pre_tool_call", true), &ran(0, "not json", ""));
        assert_eq!(
            e.decision,
            Some(Decision::Block(
                "hook ./h.sh failed closed: stdout was not valid JSON".into()
            ))
        );
        assert_eq!(
            e.warnings,
            ["shell hook stdout was not valid JSON (event=pre_tool_call): not json"]
        );
        assert_eq!(
            evaluate(&spec("pre_tool_call", true), &ran(0, "", "")).decision,
            None
        );
    }

    #[test]
    fn dropped_output_is_reported() {
        let mut run = ran(0, "", "");
        run.stdout_dropped = 10;
        let e = evaluate(&spec("pre_llm_call", false), &run);
        assert_eq!(
            e.warnings,
            [format!(
                "shell hook stdout exceeded {} bytes; dropped the remaining 10 bytes (event=pre_llm_call command=./h.sh)",
                spawn::OUTPUT_CAP
            )]
        );
    }

    #[test]
    fn context_only_reaches_the_registry_where_it_means_something() {
        let ctx = Decision::Context("c".into());
        assert!(reply_for("pre_llm_call", ctx.clone()).is_some());
        assert!(reply_for("transform_llm_output", ctx.clone()).is_none());
        assert!(reply_for("post_tool_call", ctx).is_none());
        assert!(reply_for("pre_tool_call", Decision::Block("b".into())).is_some());
    }
}
