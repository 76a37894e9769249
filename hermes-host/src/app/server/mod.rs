//! The local message gateway: the reference agent behind chat adapters, with every hook
//! system firing where the reference's gateway fires it.
//!
//! - [`Server`] owns the [`Agent`] (plugin and shell hooks in its registry, gateway hooks
//!   in `agent.gateway`), the scripted model ([`GatewayScript`]), the chats and the
//!   transcripts. [`Server::start`] emits `gateway:startup`; [`Server::receive`] queues a
//!   message on its chat; [`Server::shutdown`] ends every session and stops the hooks.
//! - The adapters ([`TcpAdapter`], [`serve_stdio`]) turn JSON lines into [`Inbound`]
//!   messages and deliver outbound ones (`wire::Outbound`).
//! - Sessions are per chat (`<platform>:<chat_id>`, the session key): a chat's messages are
//!   handled strictly in order, different chats concurrently. `/new` and `/reset` swap in
//!   a new session; idle sessions expire.
//! - Every message but an internal one goes through `pre_gateway_dispatch` first (its
//!   callbacks can send to chats and append to transcripts), then authorisation
//!   ([`AllowedUsers`]).
//! - Transcripts: `$HERMES_HOME/sessions/<session_id>.jsonl`, one JSON line per user
//!   message, tool call, tool result and answer ([`TranscriptStore`]).
//!
//! The order of everything a message causes is documented in `handle`, and the commands in
//! `commands`. The library prints nothing: log lines (a skipped message, a
//! refused user) go to the [`GatewayLog`] given to [`Server::start`].
//!
//! # Example
//!
//! ```no_run
//! use std::{sync::Arc, time::Duration};
//! use crate::app::agent::{Agent, GatewayScript};
//! use crate::app::server::{Server, ServerOptions, Shutdown, TcpAdapter};
//!
//! /// Serves `agent` (built as `hermes run` builds it, with `gateway: Some(hooks)`) on a
//! /// free loopback port until `stop` returns.
//! fn serve(agent: Agent, stop: impl FnOnce()) -> Result<(), Box<dyn std::error::Error>> {
//!     let log = Arc::new(|line: &str| eprintln!("{line}"));
//!     let options = ServerOptions::new("/tmp/hermes-home/sessions", std::env::current_dir()?);
//!     let server = Server::start(agent, GatewayScript::default(), options, log);
//!     let tcp = TcpAdapter::bind("127.0.0.1:0".parse()?)?;
//!     println!("{}", tcp.local_addr()?);
//!     tcp.serve(server.clone())?;
//!     stop();
//!     let summary = server.shutdown(Shutdown::Drain, Duration::from_secs(10));
//!     println!("{} session(s) finalized", summary.finalized);
//!     Ok(())
//! }
//! ```

mod adapter;
mod auth;
mod capabilities;
mod commands;
mod handle;
mod limits;
mod sessions;
mod spare_files;
mod transcript;
mod wire;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub use adapter::{Connection, Router, TcpAdapter, UnixAdapter, serve_stdio};
pub use auth::AllowedUsers;
pub use limits::GatewayLimits;
pub use sessions::Rejected;
pub use transcript::TranscriptStore;
pub use wire::Inbound;

use crate::app::agent::{Agent, GatewayScript, Session, Transcript};
use hermes_host::cpu_slots::RunPool;
use hermes_host::gateway::{GatewayLog, ShutdownReport};

/// The platform name when none is given.
pub const DEFAULT_PLATFORM: &str = "local";

/// The agent's running commentary (`user: ...`, `  -> tool {...}`) behind the gateway: the
/// chat gets the answers and the transcript file the structured entries, so these lines
/// only go to the debug log (`HERMES_LOG=hermes_host=debug`).
pub struct QuietTranscript;

impl Transcript for QuietTranscript {
    fn line(&self, session: &Session, text: &str) {
        tracing::debug!(target: "crate::app::server", session = %session.id, "{text}");
    }
}

/// How the gateway runs, resolved by the caller.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The platform of messages that name none, and the one `gateway:startup` reports.
    pub platform: String,
    /// Who may use the gateway.
    pub allowed_users: AllowedUsers,
    /// A started session with no message for this long ends (`None`: never).
    pub idle_timeout: Option<Duration>,
    /// Where transcripts go (`$HERMES_HOME/sessions`).
    pub sessions_dir: PathBuf,
    /// The directory tools run in.
    pub cwd: PathBuf,
    /// The bounds on clients' input and the write buffers.
    pub limits: GatewayLimits,
}

impl ServerOptions {
    /// Platform [`DEFAULT_PLATFORM`], everyone allowed, no idle expiry.
    pub fn new(sessions_dir: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> ServerOptions {
        ServerOptions {
            platform: DEFAULT_PLATFORM.to_string(),
            allowed_users: AllowedUsers::everyone(),
            idle_timeout: None,
            sessions_dir: sessions_dir.into(),
            cwd: cwd.into(),
            limits: GatewayLimits::default(),
        }
    }
}

/// How [`Server::shutdown`] treats messages still queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// Handle every queued message first (end of input).
    Drain,
    /// Drop queued messages and interrupt running turns.
    Interrupt,
    /// Let queued and running turns finish for up to this long, then interrupt what is
    /// still running and drop what is still queued (SIGINT and SIGTERM).
    Graceful(Duration),
}

/// What [`Server::shutdown`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShutdownSummary {
    /// Sessions ended at shutdown (`session:end`, `on_session_finalize`): those that
    /// started, or that a reset announced.
    pub finalized: usize,
    /// Queued messages dropped by [`Shutdown::Interrupt`], or by [`Shutdown::Graceful`]
    /// when its grace ran out.
    pub dropped_messages: usize,
    /// Whether a [`Shutdown::Graceful`] grace ran out, so running turns were interrupted.
    pub grace_expired: bool,
    /// Connections whose answers were still being written at the deadline.
    pub unflushed_connections: usize,
    /// The gateway hooks' shutdown, when there are gateway hooks.
    pub hooks: Option<ShutdownReport>,
}

/// Everything the chats' workers share.
pub(crate) struct Core {
    /// The agent with the hooks loaded now; a reload swaps in another, and a job keeps the
    /// one it took (see [`Core::agent`]).
    agent: std::sync::RwLock<Arc<Agent>>,
    pub(crate) script: GatewayScript,
    pub(crate) options: ServerOptions,
    pub(crate) transcripts: TranscriptStore,
    pub(crate) router: Router,
    pub(crate) chats: sessions::Chats,
    pub(crate) log: Arc<dyn GatewayLog>,
    /// What a chat's worker does with each job: [`handle::run`]. The scheduler in
    /// `sessions` is handed it rather than calling it, so scheduling does not depend on
    /// what the jobs do.
    pub(crate) run_job: sessions::RunJob,
    /// Turns `true` when shutdown begins: the listener and the readers stop.
    pub(crate) closing: tokio::sync::watch::Sender<bool>,
    /// Runs the chats' jobs: `gateway.max_blocking` threads at most, `gateway.max_running`
    /// of them using the CPU at once.
    pub(crate) pool: RunPool,
}

impl Core {
    /// The agent as it is now. A turn takes it once, so it runs with the hooks it started
    /// with even when a reload swaps in others meanwhile.
    pub(crate) fn agent(&self) -> Arc<Agent> {
        self.agent.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// A fresh session for a chat (not started: no hook fired yet).
    pub(crate) fn new_session(&self, platform: &str, chat_id: &str) -> Session {
        let mut session = Session::new(&self.script.model, platform, &self.options.cwd);
        session.chat_id = Some(chat_id.to_string());
        if !self.script.dir.as_os_str().is_empty() {
            session.script_dir = self.script.dir.clone();
        }
        session
    }
}

/// The running gateway. Cloning it is cheap; every clone is the same gateway.
#[derive(Clone)]
pub struct Server {
    core: Arc<Core>,
}

impl Server {
    /// Starts the gateway: emits `gateway:startup` (`platforms`) and, with an idle
    /// timeout, starts the expiry thread. `agent.gateway` holds the gateway hooks. Called
    /// inside a tokio runtime, the chats' jobs run on its blocking pool.
    pub fn start(
        agent: Agent,
        script: GatewayScript,
        options: ServerOptions,
        log: Arc<dyn GatewayLog>,
    ) -> Server {
        // Before anything is appended: a kill can leave a transcript's last line cut short.
        for line in TranscriptStore::new(options.sessions_dir.clone()).repair_torn_tails() {
            log.line(&line);
        }
        let core = Arc::new(Core {
            transcripts: TranscriptStore::new(options.sessions_dir.clone()).with_spares(
                spare_files::SpareFiles::start(
                    &options.sessions_dir,
                    options.limits.spare_transcripts,
                    log.clone(),
                ),
            ),
            router: Router::new(options.limits.write_buffer_bytes, log.clone()),
            chats: sessions::Chats::new(),
            run_job: handle::run,
            agent: std::sync::RwLock::new(Arc::new(agent)),
            closing: tokio::sync::watch::channel(false).0,
            pool: RunPool::new(
                "gateway-turn",
                options.limits.max_running,
                options.limits.max_blocking,
                limits::RUNNING_PATIENCE,
            ),
            script,
            options,
            log,
        });
        // Handlers may call back (agent.run_once, ...) from the startup event on.
        provide_services(&core, &core.agent());
        core.agent().emit(
            "gateway:startup",
            serde_json::json!({ "platforms": [core.options.platform] }),
        );
        if let Some(idle) = core.options.idle_timeout {
            let reaper = core.clone();
            let spawned = std::thread::Builder::new()
                .name("gateway-idle".into())
                .spawn(move || sessions::reap(&reaper, idle));
            if let Err(e) = spawned {
                core.log.line(&format!(
                    "gateway: idle sessions will not expire: cannot start a thread: {e}"
                ));
            }
        }
        Server { core }
    }

    /// Queues `message` on its chat; answers go to `from` (and every other connection
    /// following the chat).
    ///
    /// # Errors
    ///
    /// [`Rejected::ShuttingDown`] once [`shutdown`](Server::shutdown) began.
    pub fn receive(&self, message: Inbound, from: &Arc<Connection>) -> Result<(), Rejected> {
        sessions::submit(&self.core, message, from)
    }

    /// The default platform.
    pub fn platform(&self) -> &str {
        &self.core.options.platform
    }

    /// The longest inbound line any adapter takes (`gateway.max_line_bytes`).
    pub fn max_line_bytes(&self) -> usize {
        self.core.options.limits.max_line_bytes
    }

    /// The connections and their subscriptions.
    pub fn router(&self) -> &Router {
        &self.core.router
    }

    /// Swaps in `agent` (hooks reloaded): messages handled from now on use it, and turns
    /// already running finish with the agent they started with. Returns the old one, whose
    /// gateway hooks deliver what is queued for them and stop once the last turn using them
    /// ends.
    pub fn replace_agent(&self, agent: Agent) -> Arc<Agent> {
        let agent = Arc::new(agent);
        provide_services(&self.core, &agent);
        let mut current = self.core.agent.write().unwrap_or_else(|e| e.into_inner());
        std::mem::replace(&mut *current, agent)
    }

    /// The directory the agent's tools work in (`--cwd`).
    pub fn work_dir(&self) -> &std::path::Path {
        &self.core.options.cwd
    }

    /// The agent serving messages now.
    pub fn agent(&self) -> Arc<Agent> {
        self.core.agent()
    }

    /// A receiver that turns `true` when shutdown begins.
    pub(crate) fn closing(&self) -> tokio::sync::watch::Receiver<bool> {
        self.core.closing.subscribe()
    }

    /// Writes a line to the gateway's log.
    pub(crate) fn log_line(&self, line: &str) {
        self.core.log.line(line);
    }

    /// Stops the gateway: no new messages; queued ones are handled ([`Shutdown::Drain`]) or
    /// dropped and the running turns interrupted ([`Shutdown::Interrupt`]); every known
    /// session ends (`session:end`, `on_session_finalize`); the answers are written out;
    /// then the gateway hooks get until `deadline` to deliver what is queued for them.
    /// Calling it again does nothing more.
    pub fn shutdown(&self, how: Shutdown, deadline: Duration) -> ShutdownSummary {
        self.core.closing.send_replace(true);
        if how == Shutdown::Interrupt {
            self.core.agent().interrupt.store(true, Ordering::SeqCst);
        }
        let close = match how {
            Shutdown::Drain => sessions::Close::Drain,
            Shutdown::Interrupt => sessions::Close::Drop,
            Shutdown::Graceful(grace) => sessions::Close::Within(grace),
        };
        let closed = sessions::close_all(&self.core, close);
        self.core.transcripts.stop_spares();
        let unflushed_connections = self.core.router.close(deadline.min(Duration::from_secs(5)));
        let hooks = self
            .core
            .agent()
            .gateway
            .as_ref()
            .map(|g| g.shutdown(deadline));
        ShutdownSummary {
            finalized: self.core.chats.finalized(),
            dropped_messages: closed.dropped,
            grace_expired: closed.grace_expired,
            unflushed_connections,
            hooks,
        }
    }
}

/// Lends `agent`'s gateway hooks the gateway's capabilities (see `capabilities`).
fn provide_services(core: &Arc<Core>, agent: &Agent) {
    if let Some(gateway) = &agent.gateway {
        let services: Arc<dyn hermes_host::gateway::GatewayServices> = core.clone();
        gateway.provide(Arc::downgrade(&services));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::sync::atomic::AtomicBool;

    use abi_stable::std_types::RStr;
    use hermes_hooks_abi::core::Reply;
    use serde_json::{Value, json};

    use super::*;
    use crate::app::agent::{ApprovalMode, Approver, TraceFormat, Tracer};
    use hermes_host::gateway::MemoryLog;
    use hermes_host::registry::Registry;

    /// A writer whose bytes the test reads afterwards.
    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn agent(registry: Registry) -> Agent {
        let registry = Arc::new(registry);
        Agent {
            streams: Arc::new(hermes_host::stream::StreamObservers::start(
                registry.clone(),
            )),
            max_verify_nudges: crate::app::agent::DEFAULT_VERIFY_NUDGES,
            registry,
            gateway: None,
            tracer: Arc::new(Tracer::new(TraceFormat::Off, Box::new(std::io::sink()))),
            approver: Arc::new(Approver::new(ApprovalMode::Deny, Duration::from_secs(1))),
            interrupt: Arc::new(AtomicBool::new(false)),
            transcript: Arc::new(QuietTranscript),
            surface: "gateway",
            terminal_timeout: Duration::from_secs(5),
            max_stop_continuations: crate::app::agent::DEFAULT_STOP_CONTINUATIONS,
            session_files: None,
            claude_transcripts: false,
            events: None,
        }
    }

    #[test]
    fn in_process_hooks_skip_and_send_and_every_chat_is_answered_in_order() {
        let mut registry = Registry::new();
        registry.add_in_process(
            "pre_gateway_dispatch",
            "ack",
            Arc::new(|e| {
                let text = e.get_str("text").unwrap_or_default();
                if text == "spam" {
                    return Ok(Some(Reply::new("skip", "spam")));
                }
                let args = json!({"platform": e.get_str("platform"), "chat_id": e.get_str("chat_id"), "text": format!("ack: {text}")});
                let args = args.to_string();
                e.host.call(RStr::from("gateway.send"), RStr::from(args.as_str())).into_result().map_err(|e| e.into_string())?;
                Ok(None)
            }),
        );
        let home = tempfile::tempdir().unwrap();
        let log = Arc::new(MemoryLog::default());
        let options = ServerOptions::new(home.path().join("sessions"), home.path());
        let server = Server::start(
            agent(registry),
            GatewayScript::default(),
            options,
            log.clone(),
        );
        let input = [
            json!({"chat_id": "c1", "user_id": "u", "text": "one"}),
            json!({"chat_id": "c2", "user_id": "u", "text": "/status"}),
            json!({"chat_id": "c1", "user_id": "u", "text": "spam"}),
            json!({"chat_id": "c1", "user_id": "u", "text": "two"}),
        ]
        .iter()
        .map(|m| format!("{m}\n"))
        .collect::<String>();
        let out = Shared::default();
        serve_stdio(std::io::Cursor::new(input), Box::new(out.clone()), &server).unwrap();
        let summary = server.shutdown(Shutdown::Drain, Duration::from_secs(5));
        assert_eq!(
            (summary.finalized, summary.dropped_messages),
            (1, 0),
            "only c1 had a turn"
        );

        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let of = |chat: &str| -> Vec<(String, String)> {
            lines
                .iter()
                .filter(|m| m["chat_id"] == chat)
                .map(|m| {
                    (
                        m["kind"].as_str().unwrap().to_string(),
                        m["text"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        };
        let pair = |k: &str, t: &str| (k.to_string(), t.to_string());
        assert_eq!(
            of("c1"),
            [
                pair("send", "ack: one"),
                pair("reply", "one"),
                pair("send", "ack: two"),
                pair("reply", "two")
            ]
        );
        assert_eq!(of("c2")[0], pair("send", "ack: /status"));
        assert_eq!(of("c2")[1].0, "notice");
        assert!(
            log.lines().contains(
                &"pre_gateway_dispatch skip: reason=spam platform=local chat=c1".to_string()
            ),
            "{:?}",
            log.lines()
        );
        assert!(
            server
                .receive(
                    Inbound::parse(r#"{"chat_id":"c","user_id":"u","text":"late"}"#, "local")
                        .unwrap(),
                    &server
                        .router()
                        .open("x".into(), Box::new(std::io::sink()), None)
                        .unwrap()
                )
                .is_err()
        );
    }
}
