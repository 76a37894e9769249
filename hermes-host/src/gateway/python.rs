//! `handler.py` hooks: one long-lived `python3` worker per hook.
//!
//! The worker is the script `worker.py` next to this file, compiled into the binary and run
//! with `python3 -u -c`. It imports `handler.py` as module `hermes_hook_<name>` when the hook
//! is loaded (so the module body runs at discovery, and a missing `handle` or an import
//! error is reported then, as the reference does), and then answers one JSON line per event
//! on its real stdout. See `worker.py` for the protocol.
//!
//! The protocol runs both ways: besides answers, the worker writes `{"log": ..}` lines (the
//! handler's Python `logging` records, shown in the gateway's log as
//! `LEVEL logger: message`) and `{"call": ..}` lines (the compatibility modules
//! `gateway.run` and `run_agent` asking the gateway for its model or a one-shot agent
//! turn). This side's reader thread routes them, so an answer is never mistaken for a log
//! line, and answers each call on its own thread, at most [`MAX_CALLS_IN_FLIGHT`] at once.
//! Stopping a worker asks it to (`{"shutdown": true}`) so that a handler's background
//! thread, such as the seed's BOOT.md agent, finishes its turn before the worker exits.
//!
//! A worker that dies is started again for the next event (its module body runs again); the
//! event it died on is reported as failed. A call that takes longer than the hook's timeout
//! kills the worker's process group and is reported the same way.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::event::Event;
use super::process::{HandlerEnv, describe_status, seconds};
use crate::process::Group;

/// The worker script, run with `python3 -u -c`.
pub(crate) const WORKER_PY: &str = concat!(
    include_str!("../plugins/hermes_compat.py"),
    include_str!("worker.py")
);

/// How a worker's load ended.
pub(crate) enum Load {
    /// `handle` found; the worker waits for events.
    Loaded(Worker),
    /// The module has no `handle` (the reference's wording, without the hook name).
    Skip(String),
    /// Importing failed: `str(exc)`, or why the worker could not start or answer.
    Error(String),
    /// The interpreter does not exist.
    PythonMissing,
}

/// A running worker process.
pub(crate) struct Worker {
    /// Dropping it kills the worker's group and reaps it.
    child: Group,
    /// Requests go in here; the reader's call threads write their replies here too.
    link: Arc<Link>,
    /// Answers to requests (load results and event answers); log lines and calls are
    /// handled by the reader thread and never appear here.
    lines: Receiver<String>,
}

/// A worker that was started and has not answered its load line yet.
pub(crate) struct Starting {
    worker: Worker,
}

/// The worker's stdin, shared by the event path and the threads answering its calls.
struct Link {
    stdin: Mutex<Option<ChildStdin>>,
    /// Calls being answered now (bounded by [`MAX_CALLS_IN_FLIGHT`]).
    calls: AtomicUsize,
}

/// How many host calls one worker may have running at once; more are answered with an
/// error at once, so a handler that floods calls cannot make the host start threads
/// without bound.
pub(crate) const MAX_CALLS_IN_FLIGHT: usize = 8;

impl Link {
    /// Writes one line; an error when the worker's stdin is closed or gone.
    fn send(&self, line: &str) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().unwrap_or_else(|e| e.into_inner());
        match stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(line.as_bytes())
                .and_then(|()| stdin.write_all(b"\n"))
                .and_then(|()| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        }
    }

    fn close(&self) {
        drop(self.stdin.lock().unwrap_or_else(|e| e.into_inner()).take());
    }
}

/// What the reader thread does with one line of the worker's stdout: a `{"log": ..}`
/// record goes to the gateway's log, a `{"call": ..}` is answered on its own thread, and
/// anything else is an answer for whoever waits on `answers`. Returns `false` when no one
/// waits for answers any more.
fn route_line(
    line: &str,
    env: &HandlerEnv,
    link: &Arc<Link>,
    answers: &std::sync::mpsc::Sender<String>,
) -> bool {
    // Log records and calls are objects whose first key says what they are; checking the
    // prefix first keeps event answers from being parsed twice.
    let kind = if line.starts_with("{\"log\"") {
        "log"
    } else if line.starts_with("{\"call\"") {
        "call"
    } else {
        return answers.send(line.to_string()).is_ok();
    };
    let message: serde_json::Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(_) => return answers.send(line.to_string()).is_ok(),
    };
    if kind == "log" {
        env.log.line(&log_line(&env.name, &message["log"]));
    } else {
        answer_call(message, env, link);
    }
    true
}

/// `INFO hooks.boot-md: Running BOOT.md (12 chars)`: a Python `logging` record as the
/// gateway's log shows it (level, logger name, message).
fn log_line(hook: &str, record: &serde_json::Value) -> String {
    let level = record["level"].as_str().unwrap_or("INFO");
    let logger = record["logger"]
        .as_str()
        .filter(|l| !l.is_empty())
        .map_or_else(|| format!("hooks.{hook}"), str::to_string);
    let message = record["message"].as_str().unwrap_or_default();
    format!("{level} {logger}: {message}")
}

/// Answers `{"call": capability, "id": n, "args": {..}}` on a thread of its own (a call
/// may run a whole agent turn), writing `{"reply": n, "ok": answer}` or
/// `{"reply": n, "error": message}` back to the worker.
fn answer_call(message: serde_json::Value, env: &HandlerEnv, link: &Arc<Link>) {
    let id = message["id"].clone();
    let capability = message["call"].as_str().unwrap_or_default().to_string();
    let args = match message.get("args") {
        Some(args @ serde_json::Value::Object(_)) => args.clone(),
        None | Some(serde_json::Value::Null) => serde_json::json!({}),
        Some(_) => {
            let why = format!("{capability}: the arguments must be a JSON object");
            let _ = link.send(&reply_line(&id, Err(why)));
            return;
        }
    };
    if link.calls.fetch_add(1, Ordering::AcqRel) >= MAX_CALLS_IN_FLIGHT {
        link.calls.fetch_sub(1, Ordering::AcqRel);
        let why = format!(
            "{capability}: more than {MAX_CALLS_IN_FLIGHT} calls of this hook are running; wait for one to finish"
        );
        let _ = link.send(&reply_line(&id, Err(why)));
        return;
    }
    let services = env.services.clone();
    let thread_link = link.clone();
    let thread_id = id.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("hermes-hook-{}-call", env.name))
        .spawn(move || {
            let answer = services.call(&capability, &args);
            // A worker that died meanwhile no longer wants the reply.
            let _ = thread_link.send(&reply_line(&thread_id, answer));
            thread_link.calls.fetch_sub(1, Ordering::AcqRel);
        });
    if let Err(e) = spawned {
        link.calls.fetch_sub(1, Ordering::AcqRel);
        let why = format!("cannot start a thread for the call: {e}");
        let _ = link.send(&reply_line(&id, Err(why)));
    }
}

/// `{"reply": id, "ok": answer}` or `{"reply": id, "error": message}`.
fn reply_line(id: &serde_json::Value, result: Result<serde_json::Value, String>) -> String {
    let mut reply = serde_json::json!({ "reply": id });
    match result {
        Ok(answer) => reply["ok"] = answer,
        Err(error) => reply["error"] = serde_json::Value::String(error),
    }
    reply.to_string()
}

impl Worker {
    /// Starts `python -I -B -u -c WORKER_PY <handler.py> <name>`; the load answer is read by
    /// [`Starting::finish`].
    pub(crate) fn start(python: &Path, handler: &Path, env: &HandlerEnv) -> Result<Starting, Load> {
        let mut cmd = env.command(python);
        // `-I`: the hook's directory is added by the worker itself, last, and nothing
        // else the launch environment names (`PYTHONPATH`, the user site) is searched
        // before the standard library.
        cmd.args(["-I", "-B", "-u", "-c"])
            .arg(WORKER_PY)
            .arg(handler)
            .arg(&env.name);
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        // What `hermes_cli.config.load_config()` answers in the handler; the worker takes it
        // out of its environment at once. One environment string holds at most 128 KiB.
        if let Some(json) = env.host_config.as_deref().filter(|j| j.len() < 100_000) {
            cmd.env("HERMES_HOOKS_CONFIG_JSON", json);
        }
        cmd.envs(env.dotenv.iter().map(|(k, v)| (k, v)));
        let mut child = match Group::spawn(&mut cmd) {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Load::PythonMissing),
            Err(e) => {
                return Err(Load::Error(format!(
                    "cannot start {}: {e}",
                    python.display()
                )));
            }
        };
        let (Some(stdin), Some(stdout)) = (child.take_stdin(), child.take_stdout()) else {
            child.kill();
            return Err(Load::Error("the python worker has no pipes".into()));
        };
        let link = Arc::new(Link {
            stdin: Mutex::new(Some(stdin)),
            calls: AtomicUsize::new(0),
        });
        let (tx, lines) = std::sync::mpsc::channel();
        let reader_env = env.clone();
        let reader_link = link.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("hermes-hook-{}-reader", env.name))
            .spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut line = String::new();
                loop {
                    line.clear();
                    match reader.read_line(&mut line) {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {
                            if !route_line(line.trim_end(), &reader_env, &reader_link, &tx) {
                                break;
                            }
                        }
                    }
                }
            });
        if let Err(e) = spawned {
            child.kill();
            return Err(Load::Error(format!("cannot start a reader thread: {e}")));
        }
        Ok(Starting {
            worker: Worker { child, link, lines },
        })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the worker's process group and reaps it.
    fn kill(self) {
        self.link.close();
        self.child.kill();
    }

    /// Asks the worker to stop (`{"shutdown": true}`: it lets the handler's background
    /// threads finish, their host calls still answered, and exits) and waits for it until
    /// `deadline`; then the group is killed (and reaped when `self` drops).
    pub(crate) fn close(mut self, deadline: Instant) {
        let _ = self.link.send(r#"{"shutdown": true}"#);
        self.child.wait_until(deadline);
        self.link.close();
    }

    /// How the process ended, once its stdout closed.
    fn exit_description(mut self) -> String {
        self.link.close();
        // Its stdout is closed, so it is exiting; give it a moment, then make sure.
        match self
            .child
            .wait_until(Instant::now() + Duration::from_secs(2))
        {
            Some(status) => describe_status(status),
            None => "closed its output".to_string(),
        }
    }
}

impl Starting {
    /// Waits up to `timeout` for the load line.
    pub(crate) fn finish(self, timeout: Duration) -> Load {
        let worker = self.worker;
        match worker.lines.recv_timeout(timeout) {
            Ok(line) => {
                let answer: serde_json::Value = match serde_json::from_str(&line) {
                    Ok(v) => v,
                    Err(_) => {
                        worker.kill();
                        return Load::Error(format!(
                            "the python worker answered {line:?} instead of a load result"
                        ));
                    }
                };
                if answer["loaded"] == true {
                    Load::Loaded(worker)
                } else if let Some(skip) = answer["skip"].as_str() {
                    let skip = skip.to_string();
                    worker.close(Instant::now() + Duration::from_secs(1));
                    Load::Skip(skip)
                } else {
                    let error = answer["load_error"]
                        .as_str()
                        .unwrap_or("unknown load error")
                        .to_string();
                    worker.close(Instant::now() + Duration::from_secs(1));
                    Load::Error(error)
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                worker.kill();
                Load::Error(format!(
                    "importing handler.py took longer than {}; the python worker was killed",
                    seconds(timeout)
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                let how = worker.exit_description();
                Load::Error(format!(
                    "the python worker {how} while importing handler.py"
                ))
            }
        }
    }
}

/// The handler of one `handler.py` hook.
pub(crate) struct PythonHandler {
    python: PathBuf,
    handler: PathBuf,
    env: HandlerEnv,
    timeout: Duration,
    worker: Option<Worker>,
    restarts: Arc<AtomicU64>,
    /// Why the last restart failed, and when: events fail at once (without another
    /// interpreter start) until [`RESTART_BACKOFF`] has passed.
    failed_restart: Option<(Instant, String)>,
}

/// How long after a failed restart (an import error, a missing `handle`) events fail at
/// once instead of starting another interpreter.
pub(crate) const RESTART_BACKOFF: Duration = Duration::from_secs(5);

impl PythonHandler {
    /// A handler over an already loaded worker.
    pub(crate) fn new(
        python: PathBuf,
        handler: PathBuf,
        env: HandlerEnv,
        timeout: Duration,
        worker: Worker,
        restarts: Arc<AtomicU64>,
    ) -> PythonHandler {
        PythonHandler {
            python,
            handler,
            env,
            timeout,
            worker: Some(worker),
            restarts,
            failed_restart: None,
        }
    }

    /// Sends one event and waits for its answer. `note` receives out-of-band lines (a worker
    /// that died between events).
    pub(crate) fn deliver(
        &mut self,
        event: &Event,
        in_flight: &AtomicU32,
        note: &dyn Fn(String),
    ) -> Result<(), String> {
        let mut worker = match self.worker.take() {
            Some(mut w) => match w.child.try_wait() {
                Ok(None) => w,
                Ok(Some(status)) => {
                    note(format!(
                        "[hooks] Python worker of hook '{}' {} between events; restarting it",
                        self.env.name,
                        describe_status(status)
                    ));
                    self.restart()?
                }
                Err(_) => self.restart()?,
            },
            None => self.restart()?,
        };
        let request = event.request_json();
        if let Err(e) = worker.link.send(request) {
            // Died between the check above and the write: nothing was delivered yet.
            let how = worker.exit_description();
            note(format!(
                "[hooks] Python worker of hook '{}' {how} ({e}); restarting it",
                self.env.name
            ));
            worker = self.restart()?;
            worker
                .link
                .send(request)
                .map_err(|e| format!("cannot write to the python worker: {e}"))?;
        }
        in_flight.store(worker.pid(), Ordering::Release);
        let answer = worker.lines.recv_timeout(self.timeout);
        in_flight.store(0, Ordering::Release);
        match answer {
            Ok(line) => {
                self.worker = Some(worker);
                match serde_json::from_str::<serde_json::Value>(&line) {
                    Ok(v) if v["ok"] == true => Ok(()),
                    Ok(v) if v["error"].is_string() => {
                        Err(v["error"].as_str().unwrap_or_default().to_string())
                    }
                    _ => Err(format!("the python worker answered {line:?}")),
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                worker.kill();
                Err(format!(
                    "handler timed out after {}; its python worker was killed and starts again for the next event",
                    seconds(self.timeout)
                ))
            }
            Err(RecvTimeoutError::Disconnected) => {
                let how = worker.exit_description();
                Err(format!(
                    "the python worker of hook '{}' {how}; it starts again for the next event",
                    self.env.name
                ))
            }
        }
    }

    fn restart(&mut self) -> Result<Worker, String> {
        if let Some((at, why)) = &self.failed_restart {
            if at.elapsed() < RESTART_BACKOFF {
                return Err(why.clone());
            }
        }
        let result = self.start_worker();
        self.failed_restart = result
            .as_ref()
            .err()
            .map(|why| (Instant::now(), why.clone()));
        result
    }

    fn start_worker(&mut self) -> Result<Worker, String> {
        self.restarts.fetch_add(1, Ordering::Relaxed);
        let starting = Worker::start(&self.python, &self.handler, &self.env);
        let load = match starting {
            Ok(starting) => starting.finish(self.timeout),
            Err(load) => load,
        };
        match load {
            Load::Loaded(worker) => Ok(worker),
            Load::Skip(why) => Err(format!("restarting the python worker: {why}")),
            Load::Error(why) => Err(format!("restarting the python worker: {why}")),
            Load::PythonMissing => Err(format!(
                "restarting the python worker: {} was not found",
                self.python.display()
            )),
        }
    }

    /// Stops the worker, waiting for it until `deadline`.
    pub(crate) fn close(&mut self, deadline: Instant) {
        if let Some(worker) = self.worker.take() {
            worker.close(deadline);
        }
    }
}
