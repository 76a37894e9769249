//! The reference agent loop: a scripted model, real tools, and every hook fired at its
//! documented point.
//!
//! Per turn ([`Agent::run_turn`]), in order:
//!
//! 1. `on_session_start` on the first turn of a session;
//! 2. `pre_llm_call` once, before the tool loop; its context is appended to the user message
//!    the model receives (`message + "\n\n" + context`) and never stored in the history;
//! 3. per model response: `pre_api_request`, the response, `post_api_request`; in the
//!    gateway also `agent:step` with the tool names;
//! 4. per tool call: `pre_tool_call` (a block makes the result `{"error": "<message>"}` and
//!    the tool does not run; modifies rewrite the arguments), the tool, `post_tool_call` with
//!    `duration_ms` (status `blocked` for a blocked call), `transform_tool_result`, then what
//!    `format: claude` PostToolUse hooks said for the model, appended; inside the
//!    terminal tool, `pre_approval_request` / `post_approval_response` around the approval of
//!    a dangerous command and `transform_terminal_output` before truncation;
//!    `delegate_task` runs child sessions concurrently and fires `subagent_stop` once per
//!    child, on the parent, after all children finished;
//! 5. after a final, non-interrupted response: `transform_llm_output` (non-empty responses),
//!    then `post_llm_call` with the response the user sees. A `format: claude` Stop hook
//!    that blocks keeps the agent working: another pass of the model, with the hook's reason
//!    as its input and the turn's scripted `continuations` as its answers, then
//!    `post_llm_call` again (its payload says `stop_hook_active: true`), at most
//!    `hooks.max_stop_continuations` times in a row;
//! 6. `on_session_end` at the end of every turn, with `completed=false, interrupted=true`
//!    when an interrupt stopped it.
//!
//! What a hook asks of the run beyond its answer (see [`hermes_host::run_control`]) is taken
//! right after firing: a `permissionDecision: ask` puts that tool call through the approval
//! step (any tool, with the hook's reason; nothing remembered), an `allow` skips the host's
//! own approval of that call, a blocked prompt ends the turn before the model sees it, and
//! `continue: false` ends the turn and the run ([`TurnResult::stopped`]).
//!
//! [`Agent::finalize`] fires `on_session_finalize`. Failures inside hooks never stop the
//! loop; failures of tools are tool results.

pub mod approval;
pub mod gateway_script;
mod model;
pub mod script;
pub mod session_files;
pub mod tools;
pub mod trace;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use hermes_hooks_abi::core::Field;
use hermes_hooks_abi::hooks::payload::*;
use serde_json::{Value, json};

pub use approval::{ApprovalMode, Approver};
pub use gateway_script::GatewayScript;
pub use script::{Continuation, Script, Step, ToolCall};
pub use trace::{TraceFormat, Tracer};

use hermes_host::gateway::GatewayHooks;
use hermes_host::middleware::Kind;
use hermes_host::registry::{Outcome, Registry, ToolVerdict};
use hermes_host::run_control::{self, Permission, Stop};

/// Where the agent writes the conversation as it happens (the user, tool calls, results and
/// answers). `hermes run` prints to stdout; the gateway sends replies to the chat.
pub trait Transcript: Send + Sync {
    /// One line of the conversation.
    fn line(&self, session: &Session, text: &str);
}

/// A transcript that prints to stdout.
pub struct Stdout;

impl Transcript for Stdout {
    fn line(&self, _session: &Session, text: &str) {
        println!("{text}");
    }
}

/// One conversation.
#[derive(Clone, Debug)]
pub struct Session {
    /// The session id hooks see.
    pub id: String,
    /// The model name.
    pub model: String,
    /// `cli` or the gateway platform.
    pub platform: String,
    /// The gateway user, if any.
    pub user_id: Option<String>,
    /// The gateway chat, if any.
    pub chat_id: Option<String>,
    /// The messages so far (user, assistant, tool), without injected context.
    pub history: Vec<Value>,
    /// The user messages in `history`: the turns so far (kept, not counted per turn, so a
    /// long chat's turns do not get slower).
    pub turns: usize,
    /// The directory tools run in.
    pub cwd: PathBuf,
    /// Where `delegate_task` child scripts are looked up.
    pub script_dir: PathBuf,
    /// The session's transcript and environment file, when the agent keeps them.
    pub files: Option<Arc<session_files::SessionFiles>>,
    /// The plugins' system prompt sections, rendered once when the session started, at the
    /// head of every request (`None`: no plugin had any).
    pub system_prompt: Option<String>,
}

/// The ids that tie one turn's firings together, as the reference's observers key their
/// spans: the turn, and the model requests made in it (counted across all of the turn's
/// passes, so a Stop hook's continuation never reuses a request id).
struct Turn {
    id: String,
    api_calls: i64,
    /// The files `write_file` wrote this turn (`pre_verify`'s `changed_paths`).
    changed: std::collections::BTreeSet<String>,
    /// How many times `pre_verify` kept the agent working this turn.
    verify_nudges: usize,
}

impl Turn {
    /// The id of the turn's latest model request: opaque to hooks, unique in the turn.
    fn request_id(&self) -> String {
        format!("{}:api:{}", self.id, self.api_calls)
    }
}

/// The ids one tool call's firings carry, approvals included.
#[derive(Clone, Copy)]
struct CallIds<'a> {
    turn_id: &'a str,
    api_request_id: &'a str,
    tool_call_id: &'a str,
}

/// The correlation context `tool_request` / `tool_execution` middleware get, beside
/// `tool_name`, as the reference passes it.
fn tool_context(session: &Session, tool: &str, ids: CallIds<'_>) -> serde_json::Map<String, Value> {
    let mut context = serde_json::Map::new();
    for (key, value) in [
        ("tool_name", tool),
        ("task_id", &session.id),
        ("session_id", &session.id),
        ("tool_call_id", ids.tool_call_id),
        ("turn_id", ids.turn_id),
        ("api_request_id", ids.api_request_id),
    ] {
        context.insert(key.into(), json!(value));
    }
    context
}

/// The correlation context `llm_request` / `llm_execution` middleware get, as the
/// reference passes it.
fn llm_context(
    session: &Session,
    turn: &Turn,
    api_request_id: &str,
) -> serde_json::Map<String, Value> {
    let mut context = serde_json::Map::new();
    for (key, value) in [
        ("task_id", json!(session.id)),
        ("turn_id", json!(turn.id)),
        ("api_request_id", json!(api_request_id)),
        ("session_id", json!(session.id)),
        ("platform", json!(session.platform)),
        ("model", json!(session.model)),
        ("provider", json!("scripted")),
        ("base_url", json!("")),
        ("api_mode", json!("chat_completions")),
        ("api_call_count", json!(turn.api_calls)),
    ] {
        context.insert(key.into(), value);
    }
    context
}

/// The class of a provider error, as `api_request_error`'s `reason` names it.
fn error_class(status: Option<i64>, error: &str) -> &'static str {
    match status {
        Some(429) => "rate_limit",
        Some(401 | 403) => "auth",
        Some(400..=499) => "bad_request",
        Some(500..=599) => "server_error",
        _ if error.to_lowercase().contains("timeout")
            || error.to_lowercase().contains("timed out") =>
        {
            "timeout"
        }
        _ => "unknown",
    }
}

/// Seconds since the Unix epoch, as the reference's `time.time()`.
fn epoch_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Session {
    /// A new session with a generated id.
    pub fn new(model: &str, platform: &str, cwd: &Path) -> Session {
        Session {
            id: new_session_id(),
            model: model.to_string(),
            platform: platform.to_string(),
            user_id: None,
            chat_id: None,
            history: Vec::new(),
            turns: 0,
            cwd: cwd.to_path_buf(),
            script_dir: cwd.to_path_buf(),
            files: None,
            system_prompt: None,
        }
    }
}

/// A fresh session id: time, process id and a process-wide counter.
pub fn new_session_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // The process id keeps ids unique across processes started in the same second
    // (transcripts and logs outlive the process).
    format!(
        "sess-{secs:x}-p{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnResult {
    /// The final answer the user sees (after `transform_llm_output`), if there was one.
    pub response: Option<String>,
    /// Whether the turn ran to its final answer.
    pub completed: bool,
    /// Whether an interrupt stopped it.
    pub interrupted: bool,
    /// Why the model provider failed, when it did (a script's `error:` step).
    pub error: Option<String>,
    /// A hook stopped the turn (a blocked prompt) or the whole run (`continue: false`).
    pub stopped: Option<Stop>,
}

/// The agent: the hooks, the tools' settings, and the trace. Cloning shares everything.
#[derive(Clone)]
pub struct Agent {
    /// Plugin and shell hooks.
    pub registry: Arc<Registry>,
    /// Gateway hooks, in gateway mode only (the CLI never loads them, as in the reference).
    pub gateway: Option<Arc<GatewayHooks>>,
    /// The trace of every firing.
    pub tracer: Arc<Tracer>,
    /// Answers approvals of dangerous commands.
    pub approver: Arc<Approver>,
    /// Set by SIGINT: the current turn stops at the next step and running commands die.
    pub interrupt: Arc<AtomicBool>,
    /// Where the conversation goes.
    pub transcript: Arc<dyn Transcript>,
    /// `cli` or `gateway`, for approval hooks.
    pub surface: &'static str,
    /// Per-command timeout of the terminal tool.
    pub terminal_timeout: Duration,
    /// How many times in a row Stop hooks may keep the agent working after its final
    /// answer (`hooks.max_stop_continuations`, default [`DEFAULT_STOP_CONTINUATIONS`]).
    pub max_stop_continuations: usize,
    /// Where sessions' files are (`$HERMES_HOME/sessions/`): the environment file a
    /// SessionStart hook writes (`<id>.env`, sourced before each terminal command) and,
    /// with `claude_transcripts`, a transcript in Claude Code's JSONL shape. `None`: none.
    pub session_files: Option<PathBuf>,
    /// Whether the agent writes each session's transcript (and an empty environment file)
    /// there: `hermes run` does; the gateway keeps its own transcripts, in the reference's
    /// shape, and its environment files appear when a hook writes one.
    pub claude_transcripts: bool,
    /// Where gateway events are published besides the local hooks (NATS JetStream).
    pub events: Option<Arc<dyn EventSink>>,
    /// The streaming observers' queues (see [`hermes_host::stream`]).
    pub streams: Arc<hermes_host::stream::StreamObservers>,
    /// How many times in a row `pre_verify` hooks may keep the agent working
    /// (`agent.max_verify_nudges`, default [`DEFAULT_VERIFY_NUDGES`]).
    pub max_verify_nudges: usize,
}

/// Where gateway events go besides the local gateway hooks: the fleet's stream.
pub trait EventSink: Send + Sync {
    /// Takes `event` with `context`; must never wait on a network or a disk.
    fn publish(&self, event: &str, context: &Value);
}

/// Continuations in a row a Stop hook may ask for before the agent stops anyway.
pub const DEFAULT_STOP_CONTINUATIONS: usize = 8;

/// Continuations in a row `pre_verify` hooks may ask for, as the reference's default.
pub const DEFAULT_VERIFY_NUDGES: usize = 3;

/// `agent.max_verify_nudges` of `config` (the reference's key), else
/// [`DEFAULT_VERIFY_NUDGES`].
pub fn verify_nudges(config: &hermes_host::config::Config) -> usize {
    config
        .get("agent")
        .and_then(|agent| agent.get("max_verify_nudges"))
        .and_then(yaml_serde::Value::as_u64)
        .map_or(DEFAULT_VERIFY_NUDGES, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        })
}

/// Whether `cwd` is in a code workspace (a Git work tree): `pre_verify`'s `coding`.
fn in_code_workspace(cwd: &Path) -> bool {
    cwd.ancestors().any(|dir| dir.join(".git").exists())
}

/// `hooks.max_stop_continuations` of `config`, else [`DEFAULT_STOP_CONTINUATIONS`].
pub fn stop_continuations(config: &hermes_host::config::Config) -> usize {
    config
        .hooks
        .max_stop_continuations
        .get()
        .map_or(DEFAULT_STOP_CONTINUATIONS, |n| *n as usize)
}

impl Agent {
    /// The session's history as JSON, for `hook`'s payload; empty when nothing listens
    /// to `hook`, since the history grows with every turn and serialising it for nobody
    /// made a long chat's turns cost more and more.
    fn history_for(&self, hook: &str, session: &Session) -> String {
        if !self.registry.has(hook) {
            return String::new();
        }
        serde_json::to_string(&session.history).unwrap_or_else(|_| "[]".to_string())
    }

    /// Fires `hook` with `fields` and traces the combined outcome.
    pub fn fire(&self, hook: &str, fields: &[Field<'_>]) -> Outcome {
        let started = Instant::now();
        let outcome = self.registry.fire(hook, fields);
        self.tracer.fired(
            hook,
            fields,
            self.registry.entries(hook).len(),
            &outcome,
            started.elapsed(),
        );
        outcome
    }

    /// Emits a gateway event, when running behind the gateway.
    pub fn emit(&self, event: &str, context: Value) {
        if let Some(events) = &self.events {
            events.publish(event, &context);
        }
        if let Some(gateway) = &self.gateway {
            let hooks = gateway.resolve(event).len();
            self.tracer.gateway(event, &context, hooks);
            gateway.emit(event, context);
        }
    }

    fn gateway_base(&self, session: &Session) -> serde_json::Map<String, Value> {
        let mut ctx = serde_json::Map::new();
        ctx.insert("platform".into(), json!(session.platform));
        ctx.insert(
            "user_id".into(),
            json!(session.user_id.clone().unwrap_or_default()),
        );
        ctx.insert("session_id".into(), json!(session.id));
        ctx
    }

    /// Runs a whole script as one session: every turn, then `on_session_finalize`. Stops
    /// after a turn that was interrupted or whose hooks ended the run.
    pub fn run_script(&self, script: &Script, cwd: &Path) -> Vec<TurnResult> {
        let mut session = Session::new(&script.model, &script.platform, cwd);
        if let Some(id) = &script.session_id {
            session.id = id.clone();
        }
        session.script_dir = script.dir.clone();
        self.open_files(&mut session);
        let mut results = Vec::new();
        for turn in &script.turns {
            if let Some(result) = self.plugin_command(&session, &turn.user) {
                results.push(result);
                continue;
            }
            let result = self.run_turn_continuing(
                &mut session,
                &turn.user,
                &turn.steps,
                &turn.continuations,
            );
            let stop = result.interrupted || result.stopped.as_ref().is_some_and(|s| s.ends_run);
            results.push(result);
            if stop {
                break;
            }
        }
        self.finalize(&session);
        results
    }

    /// A user message that is a plugin's slash command (`ctx.register_command`) runs it
    /// instead of a model turn, after `command:<name>`; its answer is the turn's response.
    /// `None` when the message is no plugin's command.
    pub fn plugin_command(&self, session: &Session, message: &str) -> Option<TurnResult> {
        let (name, args) = hermes_host::commands::parse(message)?;
        let commands = self.registry.commands();
        let source = commands.spec(&name)?.source.clone();
        self.transcript.line(session, &format!("user: {message}"));
        self.emit(
            &format!("command:{name}"),
            json!({
                "platform": session.platform,
                "user_id": session.user_id.clone().unwrap_or_default(),
                "command": name,
                "args": args,
            }),
        );
        let dispatch = |tool: &str, args: &Value| self.dispatch_tool(session, tool, args);
        let response = match commands.run(&name, &args, &dispatch)? {
            Ok(answer) => answer,
            Err(why) => {
                tracing::warn!("command /{name} of plugin '{source}' failed: {why}");
                Some(format!("/{name} failed: {why}"))
            }
        };
        if let Some(text) = &response {
            self.transcript.line(session, &format!("assistant: {text}"));
        }
        Some(TurnResult {
            response,
            completed: true,
            interrupted: false,
            error: None,
            stopped: None,
        })
    }

    /// Folds what hooks asked of `session`'s turn or run since the last look into `stop`;
    /// whether the turn is stopped.
    fn stop_asked(&self, session: &Session, stop: &mut Option<Stop>) -> bool {
        if let Some(asked) = run_control::take_stop(&session.id) {
            *stop = Some(match stop.take() {
                Some(earlier) => earlier.combine(asked),
                None => asked,
            });
        }
        stop.is_some()
    }

    /// Creates `session`'s transcript and environment file, when this agent keeps them.
    fn open_files(&self, session: &mut Session) {
        let Some(dir) = self
            .session_files
            .as_ref()
            .filter(|_| self.claude_transcripts)
        else {
            return;
        };
        match session_files::SessionFiles::create(dir, &session.id, &session.cwd) {
            Ok(files) => session.files = Some(Arc::new(files)),
            Err(why) => tracing::warn!(
                "{why}; session {} runs without a transcript, and hooks get transcript_path null",
                session.id
            ),
        }
    }

    /// Fires `on_session_finalize` for `session`, closed at a session boundary (the end
    /// of a run or of a child's work).
    pub fn finalize(&self, session: &Session) {
        self.finalize_because(session, "session_boundary", None);
    }

    /// Fires `on_session_finalize` for `session` with the reference's `reason`
    /// (`session_boundary`, `new_session`, `session_expired`, `shutdown`) and, on a reset,
    /// the session that replaces it.
    pub fn finalize_because(&self, session: &Session, reason: &str, new_session_id: Option<&str>) {
        let event = SessionFinalizeEvent {
            session_id: Some(&session.id),
            platform: &session.platform,
            reason,
            old_session_id: new_session_id.map(|_| session.id.as_str()),
            new_session_id,
        };
        self.fire(SessionFinalizeEvent::HOOK, &event.fields());
    }

    /// Runs one turn: the user's message and the model's scripted `steps`.
    pub fn run_turn(
        &self,
        session: &mut Session,
        user_message: &str,
        steps: &[Step],
    ) -> TurnResult {
        self.run_turn_continuing(session, user_message, steps, &[])
    }

    /// [`run_turn`](Agent::run_turn), with the model's scripted answers when Stop hooks
    /// keep it working after its final answer.
    pub fn run_turn_continuing(
        &self,
        session: &mut Session,
        user_message: &str,
        steps: &[Step],
        continuations: &[Continuation],
    ) -> TurnResult {
        let is_first_turn = session.history.is_empty();
        let mut stop = None;
        // Counted, not read off the history: a blocked prompt leaves no trace there, and
        // the session has started all the same.
        if session.turns == 0 {
            let event = SessionStartEvent {
                session_id: &session.id,
                model: &session.model,
                platform: &session.platform,
            };
            self.fire(SessionStartEvent::HOOK, &event.fields());
            self.stop_asked(session, &mut stop);
            let sections = self.registry.prompt_sections();
            if !sections.is_empty() {
                session.system_prompt = sections.render(&json!({
                    "session_id": session.id,
                    "platform": session.platform,
                    "model": session.model,
                    "user_id": session.user_id,
                    "chat_id": session.chat_id,
                    "cwd": session.cwd,
                }));
            }
        }
        self.transcript
            .line(session, &format!("user: {user_message}"));
        let mut turn = Turn {
            id: format!("{}-t{}", session.id, session.turns + 1),
            api_calls: 0,
            changed: Default::default(),
            verify_nudges: 0,
        };
        let mut context = None;
        if stop.is_none() {
            let history = self.history_for(PreLlmCallEvent::HOOK, session);
            let event = PreLlmCallEvent {
                session_id: &session.id,
                user_message,
                conversation_history: &history,
                is_first_turn,
                model: &session.model,
                platform: &session.platform,
                sender_id: session.user_id.as_deref(),
                turn_id: Some(&turn.id),
                task_id: &session.id,
            };
            context = self
                .fire(PreLlmCallEvent::HOOK, &event.fields())
                .into_text();
            self.stop_asked(session, &mut stop);
        }
        // What the model receives this turn; the history keeps the message without context.
        let model_input = match &context {
            Some(context) => format!("{user_message}\n\n{context}"),
            None => user_message.to_string(),
        };
        // A prompt a hook refused is erased from the conversation, as in Claude Code.
        if stop.is_none() {
            session
                .history
                .push(json!({ "role": "user", "content": user_message }));
            if let Some(files) = &session.files {
                files.user(user_message);
            }
        }
        session.turns += 1;
        let mut start = self.gateway_base(session);
        start.insert("message".into(), json!(truncate_chars(user_message, 500)));
        if let Some(chat) = &session.chat_id {
            start.insert("chat_id".into(), json!(chat));
        }
        self.emit("agent:start", Value::Object(start.clone()));

        let (mut response, mut interrupted, error) =
            self.model_pass(session, steps, &model_input, &mut turn, &mut stop);
        let mut completed = false;
        // Stop hooks that keep the agent working: each continuation is another model pass
        // with the hooks' reason as its instruction, answered from the turn's scripted
        // continuations.
        let mut continued = 0;
        loop {
            if interrupted {
                self.transcript.line(session, "[interrupted]");
                break;
            }
            let Some(text) = response.take() else {
                break;
            };
            if let Some(message) = self.verify(session, &mut turn, &text) {
                let Some(next) = continuations.get(continued) else {
                    tracing::warn!(
                        "a pre_verify hook asked session {} to keep working, but the session script has no continuation {} for this turn; the turn ends: {message}",
                        session.id,
                        continued + 1
                    );
                    let shown = self.answer(session, user_message, &text, &turn, &mut stop);
                    response = Some(shown);
                    completed = true;
                    break;
                };
                continued += 1;
                self.transcript.line(
                    session,
                    &format!("[a pre_verify hook keeps the agent working: {message}]"),
                );
                // The held-back answer stays in the history; the user does not see it.
                session
                    .history
                    .push(json!({ "role": "assistant", "content": text }));
                let pass = self.keep_working(session, &next.steps, &message, &mut turn, &mut stop);
                response = pass.0;
                interrupted = pass.1;
                if pass.2.is_some() {
                    break;
                }
                continue;
            }
            let shown = self.answer(session, user_message, &text, &turn, &mut stop);
            response = Some(shown);
            completed = true;
            let reasons = run_control::take_continue(&session.id);
            if reasons.is_empty() || stop.is_some() {
                break;
            }
            let reason = reasons.join("\n");
            if continued >= self.max_stop_continuations {
                tracing::warn!(
                    "a Stop hook asked session {} to keep working {} times in a row; letting it stop (hooks.max_stop_continuations is {}): {reason}",
                    session.id,
                    continued + 1,
                    self.max_stop_continuations
                );
                break;
            }
            let Some(next) = continuations.get(continued) else {
                tracing::warn!(
                    "a Stop hook asked session {} to keep working, but the session script has no continuation {} for this turn; the turn ends: {reason}",
                    session.id,
                    continued + 1
                );
                break;
            };
            continued += 1;
            run_control::set_stop_hook_active(&session.id, true);
            self.transcript.line(
                session,
                &format!("[a Stop hook keeps the agent working: {reason}]"),
            );
            let pass = self.keep_working(session, &next.steps, &reason, &mut turn, &mut stop);
            response = pass.0;
            interrupted = pass.1;
            completed = false;
            if pass.2.is_some() {
                break;
            }
        }
        run_control::set_stop_hook_active(&session.id, false);
        let last_request = (turn.api_calls > 0).then(|| turn.request_id());
        let end = SessionEndEvent {
            session_id: &session.id,
            completed,
            interrupted,
            model: &session.model,
            platform: &session.platform,
            task_id: &session.id,
            turn_id: Some(&turn.id),
            api_request_id: last_request.as_deref(),
            reason: if interrupted {
                Some("interrupted")
            } else if stop.is_some() {
                Some("stopped_by_hook")
            } else if error.is_some() {
                Some("model_error")
            } else {
                None
            },
        };
        self.fire(SessionEndEvent::HOOK, &end.fields());
        self.stop_asked(session, &mut stop);
        if let Some(stop) = &stop {
            self.transcript.line(session, &format!("[{stop}]"));
        }
        let mut end_ctx = start;
        end_ctx.insert(
            "response".into(),
            json!(truncate_chars(response.as_deref().unwrap_or(""), 500)),
        );
        end_ctx.insert("model".into(), json!(session.model));
        end_ctx.insert("provider".into(), json!("scripted"));
        self.emit("agent:end", Value::Object(end_ctx));
        TurnResult {
            response,
            completed,
            interrupted,
            error,
            stopped: stop,
        }
    }

    /// Another pass of this turn, when a hook keeps the agent working: `instruction` is the
    /// user's next message (in the history and the transcript file), answered by `steps`.
    fn keep_working(
        &self,
        session: &mut Session,
        steps: &[Step],
        instruction: &str,
        turn: &mut Turn,
        stop: &mut Option<Stop>,
    ) -> (Option<String>, bool, Option<String>) {
        session
            .history
            .push(json!({ "role": "user", "content": instruction }));
        if let Some(files) = &session.files {
            files.user(instruction);
        }
        self.model_pass(session, steps, instruction, turn, stop)
    }

    /// One pass of the model through `steps` with `model_input`: requests, responses and
    /// tool calls, until a final answer, an error, an interrupt or a hook's stop. Returns
    /// `(final answer, interrupted, provider error)`.
    fn model_pass(
        &self,
        session: &mut Session,
        steps: &[Step],
        model_input: &str,
        turn: &mut Turn,
        stop: &mut Option<Stop>,
    ) -> (Option<String>, bool, Option<String>) {
        let mut response: Option<String> = None;
        let mut interrupted = false;
        let mut error = None;
        let mut results = Vec::new();
        for (i, step) in steps.iter().enumerate() {
            if self.interrupt.load(Ordering::SeqCst) {
                interrupted = true;
                break;
            }
            if stop.is_some() {
                break;
            }
            turn.api_calls += 1;
            let api_request_id = turn.request_id();
            let started_at = epoch_seconds();
            // Only middleware reads the context: without any, none is built per request.
            let chain = self.registry.middleware();
            let context = if chain.has(Kind::LlmRequest) || chain.has(Kind::LlmExecution) {
                llm_context(session, turn, &api_request_id)
            } else {
                serde_json::Map::new()
            };
            let request = model::request(
                &self.registry,
                session.system_prompt.as_deref(),
                &session.history,
                &session.model,
                model_input,
                &context,
            );
            let trace = Value::Array(request.trace.clone()).to_string();
            let api = ApiRequestEvent {
                session_id: &session.id,
                task_id: &session.id,
                platform: &session.platform,
                model: &session.model,
                provider: "scripted",
                api_call_count: turn.api_calls,
                message_count: session.history.len() as i64,
                tool_count: (tools::NAMES.len() + self.registry.tools().specs().count()) as i64,
                approx_input_tokens: (request.chars / 4) as i64,
                turn_id: Some(&turn.id),
                api_request_id: Some(&api_request_id),
                user_message: model_input,
                conversation_history: &request.history,
                base_url: "",
                api_mode: "chat_completions",
                request_messages: &request.messages,
                request_char_count: request.chars as i64,
                max_tokens: None,
                started_at,
                middleware_trace: &trace,
                request: &request.request,
            };
            let requested = Instant::now();
            self.fire(ApiRequestEvent::HOOK, &api.fields());
            let answer = match model::answer(&self.registry, step, &request, &context) {
                Ok(answer) => answer,
                Err(failure) => {
                    // The request failed: no response, so no post_api_request.
                    let api_duration = requested.elapsed().as_secs_f64();
                    let failed = ApiRequestErrorEvent {
                        task_id: &session.id,
                        turn_id: Some(&turn.id),
                        api_request_id: Some(&api_request_id),
                        session_id: &session.id,
                        platform: &session.platform,
                        model: &session.model,
                        provider: "scripted",
                        base_url: "",
                        api_mode: "chat_completions",
                        api_call_count: turn.api_calls,
                        api_duration,
                        started_at,
                        ended_at: started_at + api_duration,
                        status_code: step.status,
                        retry_count: 0,
                        max_retries: 0,
                        retryable: false,
                        reason: error_class(step.status, &failure),
                        error: &failure,
                        request: &request.request,
                    };
                    self.fire(ApiRequestErrorEvent::HOOK, &failed.fields());
                    self.transcript
                        .line(session, &format!("[model error: {failure}]"));
                    error = Some(failure);
                    break;
                }
            };
            let calls = answer.calls.clone();
            // The stream runs inside the request, before its response is complete.
            if calls.is_empty() && !step.stream.is_empty() && request.answered.is_none() {
                self.stream(session, turn, i + 1, &step.stream);
            }
            let finish_reason = if calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            };
            let api_duration = requested.elapsed().as_secs_f64();
            let shown = model::shown(&self.registry, &session.model, &answer, finish_reason);
            let after = ApiResponseEvent {
                session_id: &session.id,
                task_id: &session.id,
                platform: &session.platform,
                model: &session.model,
                provider: "scripted",
                api_call_count: turn.api_calls,
                api_duration_ms: (api_duration * 1000.0) as i64,
                finish_reason,
                usage: "{}",
                turn_id: Some(&turn.id),
                api_request_id: Some(&api_request_id),
                base_url: "",
                api_mode: "chat_completions",
                api_duration,
                started_at,
                ended_at: started_at + api_duration,
                message_count: session.history.len() as i64,
                response_model: Some(&session.model),
                response: &shown.response,
                assistant_message: &shown.message,
                assistant_content_chars: shown.content_chars,
                assistant_tool_call_count: calls.len() as i64,
            };
            self.fire(ApiResponseEvent::HOOK, &after.fields());
            if calls.is_empty() {
                let mut text = answer.content.clone().unwrap_or_default();
                if step.echo {
                    if !text.is_empty() {
                        text.push_str("\n\n");
                    }
                    if let Some(system) = &session.system_prompt {
                        text.push_str(&format!(
                            "[the system prompt the model received: {system}]\n\n"
                        ));
                    }
                    text.push_str(&format!("[the model received: {model_input}]"));
                    // What llm_request middleware made of the request, when it changed it.
                    if !request.trace.is_empty() {
                        text.push_str(&format!(
                            "\n\n[the request after middleware: {}]",
                            request.body
                        ));
                    }
                    // And the results of this pass's tool calls, as the model read them
                    // (with what PostToolUse hooks added).
                    for result in &results {
                        text.push_str(&format!("\n\n[a tool result the model received: {result}]"));
                    }
                }
                response = Some(text);
                break;
            }
            if let Some(text) = &step.interim {
                self.interim(session, turn, i + 1, text);
            }
            let mut step_ctx = self.gateway_base(session);
            step_ctx.insert("iteration".into(), json!(i + 1));
            step_ctx.insert(
                "tool_names".into(),
                json!(calls.iter().map(|c| c.tool.clone()).collect::<Vec<_>>()),
            );
            self.emit("agent:step", Value::Object(step_ctx));
            let ids: Vec<String> = (0..calls.len())
                .map(|k| format!("call-{}-{}-{}", session.history.len(), i + 1, k + 1))
                .collect();
            session.history.push(json!({
                "role": "assistant",
                "content": step.interim,
                "tool_calls": calls.iter().zip(&ids).map(|(c, id)| json!({"id": id, "name": c.tool, "arguments": c.args})).collect::<Vec<_>>(),
            }));
            for (call, id) in calls.iter().zip(&ids) {
                if self.interrupt.load(Ordering::SeqCst) {
                    interrupted = true;
                    break;
                }
                if let Some(files) = &session.files {
                    let args = call.args.as_object().cloned().unwrap_or_default();
                    let mut input = hermes_host::shell::claude::tool_input(&call.tool, &args);
                    hermes_host::shell::claude::absolute_paths(
                        &mut input,
                        &session.cwd.display().to_string(),
                    );
                    files.tool_use(
                        id,
                        hermes_host::shell::claude::tool_name(&call.tool),
                        Value::Object(input),
                    );
                }
                let ids = CallIds {
                    turn_id: &turn.id,
                    api_request_id: &api_request_id,
                    tool_call_id: id,
                };
                let result = self.tool_call(session, call, ids);
                if call.tool == "write_file" && !result.contains("\"error\"") {
                    if let Some(path) = call.args["path"].as_str() {
                        turn.changed.insert(path.to_string());
                    }
                }
                if let Some(files) = &session.files {
                    files.tool_result(id, &result);
                }
                session
                    .history
                    .push(json!({ "role": "tool", "tool_call_id": id, "content": result }));
                results.push(result);
                if self.stop_asked(session, stop) {
                    break;
                }
            }
            if interrupted || self.interrupt.load(Ordering::SeqCst) {
                interrupted = true;
                break;
            }
        }

        (response, interrupted, error)
    }

    /// `pre_verify`, when this turn wrote files and a hook listens: the instruction a hook
    /// keeps the agent working with, within `max_verify_nudges` in a row.
    fn verify(&self, session: &Session, turn: &mut Turn, answer: &str) -> Option<String> {
        if turn.changed.is_empty() || !self.registry.has(PreVerifyEvent::HOOK) {
            return None;
        }
        let changed = json!(turn.changed).to_string();
        let event = PreVerifyEvent {
            session_id: &session.id,
            platform: &session.platform,
            model: &session.model,
            coding: in_code_workspace(&session.cwd),
            attempt: turn.verify_nudges as i64,
            final_response: answer,
            changed_paths: &changed,
            task_id: &session.id,
            turn_id: Some(&turn.id),
        };
        let Outcome::Verify(Some(asked)) = self.fire(PreVerifyEvent::HOOK, &event.fields()) else {
            return None;
        };
        if turn.verify_nudges >= self.max_verify_nudges {
            tracing::warn!(
                "a pre_verify hook ({}) asked session {} to keep working {} times in a row; letting it finish (agent.max_verify_nudges is {}): {}",
                asked.by,
                session.id,
                turn.verify_nudges + 1,
                self.max_verify_nudges,
                asked.message
            );
            return None;
        }
        turn.verify_nudges += 1;
        Some(asked.message)
    }

    /// A streamed final answer: `on_stream_start`, a delta per piece, `on_stream_end`,
    /// handed to the observers' queues (the stream never waits for them).
    fn stream(&self, session: &Session, turn: &Turn, iteration: usize, pieces: &[String]) {
        let streams = &self.streams;
        let base = |hook: &str| streams.watches(hook);
        let iteration = iteration as i64;
        if base(StreamStartEvent::HOOK) {
            let event = StreamStartEvent {
                session_id: &session.id,
                turn_id: Some(&turn.id),
                iteration,
                model: &session.model,
                provider: "scripted",
                surface: &session.platform,
            };
            streams.publish(StreamStartEvent::HOOK, &event.fields());
        }
        if base(StreamDeltaEvent::HOOK) {
            for delta in pieces {
                let event = StreamDeltaEvent {
                    session_id: &session.id,
                    turn_id: Some(&turn.id),
                    iteration,
                    model: &session.model,
                    provider: "scripted",
                    surface: &session.platform,
                    delta,
                    kind: "text",
                };
                streams.publish(StreamDeltaEvent::HOOK, &event.fields());
            }
        }
        if base(StreamEndEvent::HOOK) {
            let whole = pieces.concat();
            let event = StreamEndEvent {
                session_id: &session.id,
                turn_id: Some(&turn.id),
                iteration,
                model: &session.model,
                provider: "scripted",
                surface: &session.platform,
                final_text: &whole,
                finished: true,
                error: None,
            };
            streams.publish(StreamEndEvent::HOOK, &event.fields());
        }
    }

    /// Text the model said beside its tool calls: the transcript, `on_interim_message`.
    fn interim(&self, session: &Session, turn: &Turn, iteration: usize, text: &str) {
        self.transcript
            .line(session, &format!("assistant (interim): {text}"));
        if self.streams.watches(InterimMessageEvent::HOOK) {
            let event = InterimMessageEvent {
                session_id: &session.id,
                turn_id: Some(&turn.id),
                iteration: iteration as i64,
                model: &session.model,
                provider: "scripted",
                surface: &session.platform,
                text,
                already_streamed: false,
            };
            self.streams
                .publish(InterimMessageEvent::HOOK, &event.fields());
        }
    }

    /// The final answer of a pass: `transform_llm_output`, the history, `post_llm_call`,
    /// the transcript. Returns what the user sees.
    fn answer(
        &self,
        session: &mut Session,
        user_message: &str,
        text: &str,
        turn: &Turn,
        stop: &mut Option<Stop>,
    ) -> String {
        let mut shown = text.to_string();
        if !text.is_empty() {
            let event = TransformLlmOutputEvent {
                response_text: text,
                session_id: &session.id,
                model: &session.model,
                platform: &session.platform,
            };
            if let Some(replaced) = self
                .fire(TransformLlmOutputEvent::HOOK, &event.fields())
                .into_text()
            {
                shown = replaced;
            }
        }
        session
            .history
            .push(json!({ "role": "assistant", "content": shown }));
        let history = self.history_for(PostLlmCallEvent::HOOK, session);
        let event = PostLlmCallEvent {
            session_id: &session.id,
            user_message,
            assistant_response: &shown,
            conversation_history: &history,
            model: &session.model,
            platform: &session.platform,
            task_id: &session.id,
            turn_id: Some(&turn.id),
            api_call_count: turn.api_calls,
        };
        // In the transcript before Stop hooks fire: they read the answer there.
        if let Some(files) = &session.files {
            files.assistant(&shown);
        }
        self.fire(PostLlmCallEvent::HOOK, &event.fields());
        self.stop_asked(session, stop);
        self.transcript
            .line(session, &format!("assistant: {shown}"));
        shown
    }

    /// One tool call with its hooks: pre_tool_call, the tool, post_tool_call,
    /// transform_tool_result. Returns what the model sees.
    fn tool_call(&self, session: &Session, call: &ToolCall, ids: CallIds<'_>) -> String {
        let call_id = ids.tool_call_id;
        let chain = self.registry.middleware();
        // Only middleware reads the context: without any, none is built per call.
        let context = if chain.has(Kind::ToolRequest) || chain.has(Kind::ToolExecution) {
            tool_context(session, &call.tool, ids)
        } else {
            serde_json::Map::new()
        };
        // tool_request middleware first: hooks, approvals and the tool see what it made.
        let rewritten = chain.rewrite(Kind::ToolRequest, call.args.clone(), &context);
        let trace = rewritten.trace_json();
        let args_text = rewritten.payload.to_string();
        let verdict: ToolVerdict = match self.fire(
            PreToolCallEvent::HOOK,
            &PreToolCallEvent {
                tool_name: &call.tool,
                args: &args_text,
                task_id: &session.id,
                session_id: &session.id,
                tool_call_id: call_id,
                turn_id: Some(ids.turn_id),
                api_request_id: Some(ids.api_request_id),
                middleware_trace: &trace,
            }
            .fields(),
        ) {
            Outcome::Tool(v) => v,
            _ => ToolVerdict::default(),
        };
        // Taken even when blocked, so nothing is left behind for this call.
        let permission = run_control::take_permission(&session.id, call_id);
        let args = verdict.apply(&rewritten.payload);
        let args_text = args.to_string();
        self.transcript
            .line(session, &format!("  -> {} {}", call.tool, args_text));
        let started = Instant::now();
        // A `pre_tool_call` approve outranks a Claude hook's allow, as an ask does.
        let asked = verdict.approval();
        let (permission, rule_key) = match asked {
            Some(asked) => (
                Some(Permission::Ask(asked.message.clone())),
                asked.approval.as_ref().and_then(|a| a.rule_key.as_deref()),
            ),
            None => (permission, None),
        };
        let refused = match verdict.error_result().filter(|_| asked.is_none()) {
            Some(blocked) => Err(blocked),
            None => self.hook_approval(session, &call.tool, &args, permission, rule_key, ids),
        };
        let (result, status, error_type, error_message) = match refused {
            Err(result) => (result, "blocked", None, None),
            Ok(approved) => {
                let mut run = |args: Value| {
                    Ok(Value::String(
                        self.run_tool(session, &call.tool, &args, approved, ids),
                    ))
                };
                let result = if chain.has(Kind::ToolExecution) {
                    let wrapped = chain.execute(
                        Kind::ToolExecution,
                        args.clone(),
                        &rewritten.original,
                        &context,
                        &mut run,
                    );
                    match wrapped {
                        Ok(Value::String(result)) => result,
                        Ok(other) => other.to_string(),
                        Err(why) => tools::error(&format!("{}: {why}", call.tool)),
                    }
                } else {
                    self.run_tool(session, &call.tool, &args, approved, ids)
                };
                let failed = serde_json::from_str::<Value>(&result)
                    .ok()
                    .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string));
                match failed {
                    Some(message) => (result, "error", Some("ToolError"), Some(message)),
                    None => (result, "ok", None, None),
                }
            }
        };
        let duration_ms = started.elapsed().as_millis() as i64;
        let post = PostToolCallEvent {
            tool_name: &call.tool,
            args: &args_text,
            result: &result,
            task_id: &session.id,
            session_id: &session.id,
            tool_call_id: call_id,
            duration_ms,
            status,
            error_type,
            error_message: error_message.as_deref(),
            turn_id: Some(ids.turn_id),
            api_request_id: Some(ids.api_request_id),
            middleware_trace: &trace,
        };
        self.fire(PostToolCallEvent::HOOK, &post.fields());
        let feedback = run_control::take_feedback(&session.id, call_id);
        let transform = TransformToolResultEvent {
            tool_name: &call.tool,
            args: &args_text,
            result: &result,
            task_id: &session.id,
            session_id: &session.id,
            tool_call_id: call_id,
            duration_ms,
            status,
            error_type,
            error_message: error_message.as_deref(),
            turn_id: Some(ids.turn_id),
            api_request_id: Some(ids.api_request_id),
        };
        let mut result = self
            .fire(TransformToolResultEvent::HOOK, &transform.fields())
            .into_text()
            .unwrap_or(result);
        // What PostToolUse hooks told the model comes after the tool's output, in registry
        // order, as Claude Code adds it.
        for text in feedback {
            result.push_str("\n\n");
            result.push_str(&text);
        }
        self.transcript.line(
            session,
            &format!("  <- {}", truncate_chars(&result, 300).replace('\n', "\\n")),
        );
        result
    }

    /// What a hook's say on this call's approval means: `Ok(true)` when the host's own
    /// approval step is settled for it (an `allow`, or an `ask` the user approved),
    /// `Ok(false)` when that step still applies, `Err(result)` when the call must not run.
    fn hook_approval(
        &self,
        session: &Session,
        tool: &str,
        args: &Value,
        permission: Option<Permission>,
        rule_key: Option<&str>,
        ids: CallIds<'_>,
    ) -> Result<bool, String> {
        let reason = match permission {
            None => return Ok(false),
            Some(Permission::Allow) => return Ok(true),
            Some(Permission::Ask(reason)) => reason,
        };
        let summary = match (tool, args["command"].as_str()) {
            ("terminal", Some(command)) => command.to_string(),
            _ => format!("{tool} {args}"),
        };
        let decide = || self.approver.decide_ask(&summary, &reason);
        let key = rule_key.unwrap_or("hook_ask");
        match self.approve(session, &summary, &reason, &[key], ids, decide) {
            "deny" if self.approver.headless() => Err(tools::error(&format!(
                "{tool} not run: a hook asked for approval ({reason}) and nobody is at a terminal to give it; \
                 pass --approvals once to approve such calls in a headless run"
            ))),
            "deny" => Err(tools::error(&format!(
                "{tool} not run: a hook asked for approval ({reason}) and the user denied it"
            ))),
            "timeout" => Err(tools::error(&format!(
                "{tool} not run: a hook asked for approval ({reason}) and the approval timed out"
            ))),
            _ => Ok(true),
        }
    }

    /// The approval step: `pre_approval_request`, the approver's choice (`decide`), then
    /// `post_approval_response`.
    fn approve(
        &self,
        session: &Session,
        command: &str,
        description: &str,
        keys: &[&str],
        ids: CallIds<'_>,
        decide: impl FnOnce() -> &'static str,
    ) -> &'static str {
        let keys_json = json!(keys).to_string();
        let session_key = session.chat_id.as_ref().map_or_else(
            || session.id.clone(),
            |c| format!("{}:{c}", session.platform),
        );
        let pattern_key = keys.first().copied().unwrap_or_default();
        let request = ApprovalRequestEvent {
            command,
            description,
            pattern_key,
            pattern_keys: &keys_json,
            session_key: &session_key,
            surface: self.surface,
            turn_id: Some(ids.turn_id),
            tool_call_id: Some(ids.tool_call_id),
        };
        self.fire(ApprovalRequestEvent::HOOK, &request.fields());
        let choice = decide();
        let response = ApprovalResponseEvent {
            command,
            description,
            pattern_key,
            pattern_keys: &keys_json,
            session_key: &session_key,
            surface: self.surface,
            choice,
            turn_id: Some(ids.turn_id),
            tool_call_id: Some(ids.tool_call_id),
        };
        self.fire(ApprovalResponseEvent::HOOK, &response.fields());
        choice
    }

    /// Runs `tool`; `approved`: its approval is settled (a hook allowed it, or the user
    /// approved a hook's ask), so a dangerous command is not asked about again.
    fn run_tool(
        &self,
        session: &Session,
        tool: &str,
        args: &Value,
        approved: bool,
        ids: CallIds<'_>,
    ) -> String {
        match tool {
            "terminal" => self.terminal(session, args, approved, ids),
            "read_file" => tools::read_file(&session.cwd, args),
            "write_file" => tools::write_file(&session.cwd, args),
            "delegate_task" => self.delegate(session, args, ids.turn_id),
            "send_message" => self.send_message(args),
            other => {
                let mut context = serde_json::Map::new();
                context.insert("task_id".into(), json!(session.id));
                context.insert("session_id".into(), json!(session.id));
                context.insert("tool_call_id".into(), json!(ids.tool_call_id));
                context.insert("turn_id".into(), json!(ids.turn_id));
                let plugin_tools = self.registry.tools();
                let dispatch = |tool: &str, args: &Value| self.dispatch_tool(session, tool, args);
                plugin_tools
                    .dispatch(other, args, &context, &dispatch)
                    .unwrap_or_else(|| {
                        let names: Vec<&str> = tools::NAMES
                            .iter()
                            .copied()
                            .chain(plugin_tools.specs().map(|s| s.name.as_str()))
                            .collect();
                        tools::error(&format!(
                            "unknown tool '{other}' (tools: {})",
                            names.join(", ")
                        ))
                    })
            }
        }
    }

    /// A tool a plugin's command or tool asked for (`ctx.dispatch_tool`), run as the
    /// model's calls are: middleware, `pre_tool_call` (a guard blocks it as it would block
    /// the model), approvals, the tool, `post_tool_call` and transforms.
    pub fn dispatch_tool(&self, session: &Session, tool: &str, args: &Value) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let turn_id = format!("{}-t{}", session.id, session.turns);
        let call_id = format!("dispatch-{n}");
        let call = ToolCall {
            tool: tool.to_string(),
            args: if args.is_object() {
                args.clone()
            } else {
                json!({})
            },
        };
        let ids = CallIds {
            turn_id: &turn_id,
            api_request_id: "",
            tool_call_id: &call_id,
        };
        self.tool_call(session, &call, ids)
    }

    /// `send_message`: `{"target": "<platform>:<chat_id>" | "<chat_id>", "message": ".."}`
    /// delivers `message` to every connection following that chat (a bare chat id is on
    /// the gateway's own platform). A message containing `[SILENT]` sends nothing, as the
    /// reference's boot checklist expects. Only behind `hermes gateway run`.
    fn send_message(&self, args: &Value) -> String {
        let (Some(target), Some(message)) = (args["target"].as_str(), args["message"].as_str())
        else {
            return tools::error(
                "send_message needs `target` (\"<platform>:<chat_id>\" or a chat id) and `message`",
            );
        };
        if message.contains("[SILENT]") {
            return json!({ "sent": false, "reason": "the message is [SILENT]" }).to_string();
        }
        let Some(gateway) = &self.gateway else {
            return tools::error(
                "send_message works only behind the gateway (`hermes gateway run`)",
            );
        };
        let mut request = json!({ "text": message });
        match target.split_once(':') {
            Some((platform, chat_id)) => {
                request["platform"] = json!(platform);
                request["chat_id"] = json!(chat_id);
            }
            None => request["chat_id"] = json!(target),
        }
        match gateway.call("gateway.send", &request) {
            Ok(answer) => {
                json!({ "sent": true, "target": target, "delivered": answer["delivered"] })
                    .to_string()
            }
            Err(e) => tools::error(&format!("send_message: {e}")),
        }
    }

    fn terminal(
        &self,
        session: &Session,
        args: &Value,
        approved: bool,
        ids: CallIds<'_>,
    ) -> String {
        let Some(command) = args["command"].as_str() else {
            return tools::error("terminal needs a `command` argument");
        };
        let danger = approval::dangerous(command).filter(|_| !approved);
        if let Some((keys, description)) = danger {
            // "session" approvals last as long as this session id (a /reset ends them).
            if !self.approver.remembered(&session.id, &keys) {
                let decide = || {
                    self.approver
                        .decide(&session.id, command, description, &keys)
                };
                let choice = self.approve(session, command, description, &keys, ids, decide);
                if matches!(choice, "deny" | "timeout") {
                    let why = if choice == "timeout" {
                        "the approval timed out"
                    } else {
                        "the user denied it"
                    };
                    return tools::error(&format!("command not run: {why} ({description})"));
                }
            }
        }
        let timeout = args["timeout"]
            .as_u64()
            .map_or(self.terminal_timeout, Duration::from_secs);
        // The command runs in its own process: this thread only waits for it.
        // What SessionStart hooks exported reaches the command, as in Claude Code.
        let (shell, shell_text) = match &self.session_files {
            Some(dir) => {
                session_files::with_env(&session_files::env_file(dir, &session.id), command)
            }
            None => ("sh", command.to_string()),
        };
        let run = hermes_host::cpu_slots::waiting(|| {
            tools::run_terminal(shell, &shell_text, &session.cwd, timeout, &self.interrupt)
        });
        let event = TransformTerminalOutputEvent {
            command,
            output: &run.output,
            returncode: run.returncode,
            task_id: &session.id,
            env_type: "local",
        };
        let output = self
            .fire(TransformTerminalOutputEvent::HOOK, &event.fields())
            .into_text()
            .unwrap_or(run.output);
        let mut result = json!({ "output": tools::truncate(&output), "exit_code": run.returncode });
        if let Some(why) = run.stopped {
            result["error"] = json!(format!("command {why}"));
        }
        serde_json::to_string(&result).unwrap_or_default()
    }

    /// `delegate_task`: `{"tasks": [{"script": "child.yaml", "role": "..."}]}`. Children run
    /// concurrently; `subagent_stop` fires once per child, here on the parent, after all of
    /// them finished, in task order.
    fn delegate(&self, session: &Session, args: &Value, parent_turn_id: &str) -> String {
        let Some(tasks) = args["tasks"].as_array().filter(|t| !t.is_empty()) else {
            return tools::error("delegate_task needs `tasks`: a list of {script, role}");
        };
        let mut children = Vec::new();
        for task in tasks {
            let Some(script) = task["script"].as_str() else {
                return tools::error("each delegate_task task needs a `script`");
            };
            let path = session.script_dir.join(script);
            match Script::read(&path) {
                Ok(s) => children.push((s, task["role"].as_str().map(str::to_string))),
                Err(e) => return tools::error(&format!("cannot read child script: {e}")),
            }
        }
        type Outcome<'s> = (
            Option<String>,
            String,
            &'static str,
            u64,
            Session,
            &'s Script,
        );
        let outcomes: Vec<Option<Outcome>> = std::thread::scope(|scope| {
            let handles: Vec<_> = children
                .iter()
                .map(|(script, role)| {
                    scope.spawn(move || {
                        let started = Instant::now();
                        let mut child =
                            Session::new(&script.model, &session.platform, &session.cwd);
                        child.script_dir = script.dir.clone();
                        run_control::set_subagent(&child.id, true);
                        self.open_files(&mut child);
                        if self.registry.has(SubagentStartEvent::HOOK) {
                            let goal = script.turns.first().map_or("", |t| t.user.as_str());
                            let subagent_id = format!("subagent-{}", child.id);
                            let event = SubagentStartEvent {
                                parent_session_id: Some(&session.id),
                                parent_turn_id,
                                parent_subagent_id: None,
                                child_session_id: Some(&child.id),
                                child_subagent_id: &subagent_id,
                                child_role: role.as_deref().unwrap_or("leaf"),
                                child_goal: goal,
                            };
                            self.fire(SubagentStartEvent::HOOK, &event.fields());
                        }
                        let mut last = None;
                        let mut status = "completed";
                        for turn in &script.turns {
                            let r = self.run_turn(&mut child, &turn.user, &turn.steps);
                            if r.interrupted {
                                status = "interrupted";
                                break;
                            }
                            // A hook ended the child's run: what it said so far is
                            // its summary.
                            if r.stopped.as_ref().is_some_and(|s| s.ends_run) {
                                last = r.response.or(last);
                                status = "failed";
                                break;
                            }
                            if !r.completed {
                                status = "failed";
                            }
                            last = r.response;
                        }
                        // Finalized before subagent_stop fires, as in the reference.
                        self.finalize(&child);
                        (
                            role.clone(),
                            last.unwrap_or_default(),
                            status,
                            started.elapsed().as_millis() as u64,
                            child,
                            script,
                        )
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().ok()).collect()
        });
        let mut results = Vec::new();
        let was_active = run_control::stop_hook_active(&session.id);
        for outcome in outcomes {
            let Some((role, mut summary, mut status, mut ms, mut child, script)) = outcome else {
                results.push(
                    json!({ "role": null, "status": "failed", "summary": "", "session_id": "" }),
                );
                continue;
            };
            // A SubagentStop hook that blocks keeps the child working, with its reason as
            // the child's next message, answered from its last turn's continuations; the
            // child is finalized again when it stops.
            let mut continued = 0;
            loop {
                let event = SubagentStopEvent {
                    parent_session_id: &session.id,
                    child_role: role.as_deref(),
                    child_summary: &summary,
                    child_status: status,
                    duration_ms: ms as i64,
                    parent_turn_id: Some(parent_turn_id),
                    child_session_id: Some(&child.id),
                };
                self.fire(SubagentStopEvent::HOOK, &event.fields());
                let reasons = run_control::take_continue(&session.id);
                if reasons.is_empty() || status != "completed" {
                    break;
                }
                let reason = reasons.join("\n");
                let next = script
                    .turns
                    .last()
                    .and_then(|t| t.continuations.get(continued));
                let Some(next) = next.filter(|_| continued < self.max_stop_continuations) else {
                    tracing::warn!(
                        "a SubagentStop hook asked child session {} to keep working (continuation {}), but {}; letting it stop: {reason}",
                        child.id,
                        continued + 1,
                        if continued >= self.max_stop_continuations {
                            format!(
                                "hooks.max_stop_continuations is {}",
                                self.max_stop_continuations
                            )
                        } else {
                            "its script's last turn has no continuation for it".to_string()
                        }
                    );
                    break;
                };
                continued += 1;
                run_control::set_stop_hook_active(&session.id, true);
                let started = Instant::now();
                let r = self.run_turn(&mut child, &reason, &next.steps);
                ms += started.elapsed().as_millis() as u64;
                if !r.completed {
                    status = if r.interrupted {
                        "interrupted"
                    } else {
                        "failed"
                    };
                }
                summary = r.response.unwrap_or(summary);
            }
            run_control::set_stop_hook_active(&session.id, was_active);
            if continued > 0 {
                self.finalize(&child);
            }
            run_control::set_subagent(&child.id, false);
            results.push(json!({ "role": role, "status": status, "summary": summary, "session_id": child.id }));
        }
        json!({ "results": results }).to_string()
    }
}

fn truncate_chars(text: &str, n: usize) -> String {
    text.chars().take(n).collect()
}
