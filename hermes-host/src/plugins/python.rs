//! Hermes Python plugins: a plugin directory with `plugin.yaml` and an `__init__.py` whose
//! `register(ctx)` calls `ctx.register_hook(...)`, run unchanged in a Python worker process
//! the host starts and supervises.
//!
//! The worker is the script `python_driver.py` beside this file, compiled into the binary
//! and run with the configured interpreter (`plugins.python` in `config.yaml`, else
//! `python3` on `PATH`, so the user's site-packages are there). See the script for the
//! protocol: JSON lines on a socket (fd 3) that nothing else writes to, and a separate pipe
//! (fd 1 and 2) that carries `print()` and `logging` records into the host's log, under
//! target `plugin` with the plugin's name, filtered by `HERMES_LOG` like everything else.
//!
//! One firing is one round trip per plugin, however many callbacks the plugin registered
//! for the hook: the plugin's callbacks of one hook are one [`ExternalGroup`] in the
//! registry, one entry per callback, so order, labels and aggregation are those of every
//! other callback. A hook no Python plugin registered never reaches a worker.
//!
//! Supervision is [`isolation`](super::isolation)'s: a worker that crashes, exits or
//! hangs past the plugin's `timeout` is killed and named, the firing counts as no opinion
//! (a block on `pre_tool_call` with `fail_closed: true`), and the worker starts again after
//! a backoff, until [`MAX_CRASHES`](super::supervisor::MAX_CRASHES) crashes in a minute
//! disable it.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use abi_stable::std_types::RResult;
use hermes_hooks_abi::core::{EventView, FieldValue, Reply};
use serde_json::{Map, Value};

use super::manifest::Manifest;
use super::supervisor::{self, DEFAULT_TIMEOUT, NoAnswer, Supervisor, death_cause, seconds};
use crate::logging::PluginLogger;
use crate::process::Group;
use crate::registry::{ExternalGroup, HookResult};

/// The worker script, run with `<python> -c`: Hermes's own modules first
/// (`hermes_compat.py`: `hermes_constants`, `hermes_cli.config`, `hermes_cli.profiles`),
/// then the driver.
pub const DRIVER_PY: &str = concat!(
    include_str!("hermes_compat.py"),
    include_str!("python_driver.py")
);

/// What every Python worker of one load is started with, besides its plugin: the home, its
/// `config.yaml` as JSON (what `hermes_cli.config.load_config()` answers), and the
/// variables of `$HERMES_HOME/.env`, as Hermes loads them for its plugins.
#[derive(Clone, Debug, Default)]
pub struct WorkerContext {
    /// `HERMES_HOME` for the worker.
    pub home: PathBuf,
    /// `config.yaml`, as JSON.
    pub config_json: Option<Arc<str>>,
    /// `$HERMES_HOME/.env`, `(name, value)`; the host's own environment wins.
    pub dotenv: Arc<Vec<(String, String)>>,
}

impl WorkerContext {
    /// The context for plugins of `home`: its `.env` read now (refused, with a warning,
    /// when another user could have written it).
    pub fn new(home: &Path, config_json: Option<Arc<str>>) -> WorkerContext {
        WorkerContext {
            home: home.to_path_buf(),
            config_json,
            dotenv: Arc::new(crate::dotenv::read(&home.join(".env"))),
        }
    }
}

/// How long a worker has to import the plugin, run `register` and say hello.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The longest protocol line accepted from a worker (a transform's replacement text, say).
const MAX_LINE: u64 = 64 << 20;

/// The most text one callback's answer may carry (a transform's replacement, a context):
/// what is kept of it (in the history, the transcript, the next transform's input) is
/// bounded by this, not by the protocol's line.
pub const MAX_ANSWER_BYTES: usize = 4 << 20;

/// How many log lines a second one worker may put in the host's log; the rest are counted
/// and reported, so a plugin that floods `print()` cannot flood the log.
const LOG_LINES_PER_SECOND: u32 = 200;

/// The interpreter for Python plugins: `plugins.python` of `config.yaml`, else `python3`.
pub fn interpreter(plugins: &crate::config::PluginsSection) -> PathBuf {
    plugins
        .python
        .get()
        .filter(|s| !s.trim().is_empty())
        .map_or_else(|| PathBuf::from("python3"), PathBuf::from)
}

/// A Python plugin: how to start its worker, and the worker under supervision.
pub struct PythonPlugin {
    launch: Launch,
    supervisor: Supervisor<Worker>,
}

impl std::fmt::Debug for PythonPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (pid, restarts, last_crash) = self.supervisor.status();
        f.debug_struct("PythonPlugin")
            .field("name", &self.supervisor.name)
            .field("interpreter", &self.launch.interpreter)
            .field("pid", &pid)
            .field("restarts", &restarts)
            .field("last_crash", &last_crash)
            .finish()
    }
}

/// What starting a worker takes.
#[derive(Clone)]
struct Launch {
    interpreter: PathBuf,
    dir: PathBuf,
    key: String,
    name: String,
    /// For a pip-installed plugin, its entry point's name: the worker loads it with
    /// `ep.load()` instead of importing `dir/__init__.py`.
    entry_point: Option<String>,
    /// plugin.yaml as JSON, for `ctx.manifest`.
    manifest_json: String,
    context: WorkerContext,
}

struct Worker {
    group: Group,
    /// The plugin's own settings in config.yaml, which `ctx.set_config` writes.
    settings: Settings,
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    /// Closed by the log thread when it has forwarded everything the worker wrote.
    log_done: std::sync::mpsc::Receiver<()>,
}

/// How long a worker that is let go may take to exit, and its last log lines to arrive.
const STOP_GRACE: Duration = Duration::from_millis(500);

impl Drop for Worker {
    /// Ends the protocol, which the worker takes as its cue to exit, and waits a little for
    /// it and for its last log lines, so that what a plugin printed just before the host
    /// let it go (at exit, or at a reload) is still in the log. Whatever is still running
    /// then is killed with the group.
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        let deadline = Instant::now() + STOP_GRACE;
        if self.group.wait_until(deadline).is_some() {
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = self.log_done.recv_timeout(left);
        }
    }
}

impl supervisor::Worker for Worker {
    fn group(&mut self) -> &mut Group {
        &mut self.group
    }
}

/// What a worker said once it had imported the plugin and run `register`.
#[derive(Debug, Default)]
pub struct Hello {
    /// The tools it registered: `{"name", "toolset", "schema", "description"}`.
    pub tools: Vec<Value>,
    /// The slash commands it registered: `{"name", "description", "args_hint"}`.
    pub commands: Vec<Value>,
    /// `(middleware kind, callback name)` in registration order.
    pub middleware: Vec<(String, String)>,
    /// Its system prompt sections: `{"id", "position", "max_chars", "content"}`, `content`
    /// the text, or null when a callable renders it per session.
    pub sections: Vec<Value>,
    /// `(hook, callback name)` in registration order.
    pub callbacks: Vec<(String, String)>,
    /// Calls to `ctx` methods this host does not offer, one line each.
    pub warnings: Vec<String>,
    /// The import's or `register`'s exception, as its last line.
    pub error: Option<String>,
}

/// A worker started and not yet heard from: starting every plugin's worker first and
/// waiting for their hellos after lets the interpreters start in parallel.
pub struct Launching {
    launch: Launch,
    manifest: Manifest,
    worker: Result<Worker, String>,
}

/// Starts the worker of the Python plugin in `dir` (key `key` under `plugins/`), or of the
/// pip-installed plugin `entry_point`, with `interpreter`. Returns at once;
/// [`Launching::finish`] waits for its hello.
pub fn launch(
    manifest: &Manifest,
    key: &str,
    dir: &Path,
    entry_point: Option<&super::EntryPoint>,
    interpreter: &Path,
    context: &WorkerContext,
) -> Launching {
    let manifest_json = match entry_point {
        Some(ep) => serde_json::json!({ "name": ep.name, "version": ep.version }).to_string(),
        None => super::manifest::manifest_path(dir)
            .and_then(|p| crate::private_file::read_regular(&p).ok())
            .and_then(|bytes| yaml_serde::from_slice::<serde_json::Value>(&bytes).ok())
            .map(|v| v.to_string())
            .unwrap_or_else(|| "{}".into()),
    };
    let launch = Launch {
        interpreter: interpreter.to_path_buf(),
        dir: dir.to_path_buf(),
        key: key.to_string(),
        name: manifest.name.clone(),
        entry_point: entry_point.map(|ep| ep.name.clone()),
        manifest_json,
        context: context.clone(),
    };
    let worker = launch.spawn();
    Launching {
        launch,
        manifest: manifest.clone(),
        worker,
    }
}

impl Launching {
    /// Waits for the worker's hello and returns the supervised plugin with what it
    /// registered.
    ///
    /// # Errors
    ///
    /// The interpreter is missing, or the worker died or said nothing sensible before its
    /// hello; the message names the plugin's directory and says what to do.
    pub fn finish(self) -> Result<(Arc<PythonPlugin>, Hello), String> {
        let mut worker = self.worker?;
        let hello = worker.hello(&self.launch)?;
        let timeout = self
            .manifest
            .timeout
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64);
        let supervisor = Supervisor::new(
            &self.manifest.name,
            timeout,
            None,
            self.manifest.fail_closed,
            Some(worker),
        );
        let plugin = PythonPlugin {
            launch: self.launch,
            supervisor,
        };
        Ok((Arc::new(plugin), hello))
    }
}

impl Launch {
    fn spawn(&self) -> Result<Worker, String> {
        let (log_read, log_write, log_write_2) = log_pipe()
            .map_err(|e| format!("cannot create the log pipe of a Python plugin: {e}"))?;
        let mut cmd = Command::new(&self.interpreter);
        // `-I`: neither the launch directory (`-c` puts it first on `sys.path`, so a
        // `json.py` there would run in every worker) nor the user's site directory nor
        // `PYTHON*` variables; the driver adds the plugin's own directory, last. `-B`
        // because `-I` also ignores PYTHONDONTWRITEBYTECODE.
        cmd.args(["-I", "-B", "-c"])
            .arg(DRIVER_PY)
            .arg(&self.dir)
            .arg(&self.key)
            .arg(&self.name)
            .arg(python_level().to_string())
            .arg(self.entry_point.as_deref().unwrap_or_default())
            .env("HERMES_HOME", &self.context.home)
            .env("HERMES_HOOKS_MANIFEST_JSON", &self.manifest_json)
            .envs(self.context.dotenv.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log_write)
            .stderr(log_write_2);
        // Small enough for one environment string (the kernel's limit is 128 KiB); a larger
        // config.yaml is read by the worker itself, with PyYAML where it has it.
        if let Some(json) = self
            .context
            .config_json
            .as_deref()
            .filter(|j| j.len() < 100_000)
        {
            cmd.env("HERMES_HOOKS_CONFIG_JSON", json);
        }
        let (group, stream) =
            supervisor::spawn_on_socket(&mut cmd, &self.interpreter).map_err(|why| {
                if why.contains("No such file") {
                    format!(
                        "{}: cannot run Python plugins: the interpreter `{}` was not found; install python3 or set `plugins.python` in config.yaml to one",
                        self.dir.display(),
                        self.interpreter.display()
                    )
                } else {
                    format!("{}: {why}", self.dir.display())
                }
            })?;
        // The write ends now live only in the child, so the reader sees end of file when
        // the worker (and whatever it started) is gone.
        drop(cmd);
        let name = self.name.clone();
        let (done, log_done) = std::sync::mpsc::channel::<()>();
        let _ = std::thread::Builder::new()
            .name(format!("hermes-py-log-{name}"))
            .spawn(move || {
                forward_log(log_read, &name);
                drop(done);
            });
        let reader = stream
            .try_clone()
            .map(BufReader::new)
            .map_err(|e| format!("cannot read from the worker of plugin '{}': {e}", self.name))?;
        Ok(Worker {
            group,
            settings: Settings {
                home: self.context.home.clone(),
                plugin_id: self.key.clone(),
            },
            stream,
            reader,
            log_done,
        })
    }
}

/// Where one plugin's settings live: `plugins.entries.<plugin_id>.settings` of the home's
/// config.yaml. The worker names only the key under it, so a plugin can change nothing else.
struct Settings {
    home: PathBuf,
    plugin_id: String,
}

impl Settings {
    /// `ctx.set_config(key, value)`: `{"key": [segments], "value": v}`, checked again here
    /// by the reference's rules, written through the locked, comment-keeping editor.
    fn set(&self, args: &Value) -> Value {
        let segments: Option<Vec<&str>> = args["key"]
            .as_array()
            .and_then(|k| k.iter().map(Value::as_str).collect());
        let Some(segments) = segments.filter(|s| valid_setting_key(s)) else {
            return serde_json::json!({ "error": "Expected a plugin-relative config key such as 'endpoint' or 'retry.policy'" });
        };
        let mut path = vec!["plugins", "entries", &self.plugin_id, "settings"];
        path.extend(segments);
        let home = crate::home::Home::at(&self.home);
        match crate::config_edit::set_value(&home, &path, &args["value"]) {
            Ok(_) => serde_json::json!({ "ok": null }),
            Err(e) => serde_json::json!({ "error": e.to_string() }),
        }
    }
}

/// The reference's rule for a plugin-relative settings key: segments of letters, digits,
/// `_` and `-` (starting with a letter or digit, at most 128), not under a core root.
fn valid_setting_key(segments: &[&str]) -> bool {
    let segment = |s: &&str| {
        (1..=128).contains(&s.len())
            && s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    segments.first().is_some_and(|first| {
        !matches!(
            first.to_ascii_lowercase().as_str(),
            "model" | "plugins" | "security" | "settings"
        )
    }) && segments.iter().all(segment)
}

impl Worker {
    /// Answers what the worker asks of its own plugin (not of a firing), if that is what it
    /// asked.
    fn own_call(&self, capability: &str, args: &Value) -> Option<Value> {
        match capability {
            "config.set" => Some(self.settings.set(args)),
            _ => None,
        }
    }

    fn hello(&mut self, launch: &Launch) -> Result<Hello, String> {
        let deadline = Instant::now() + START_TIMEOUT;
        // `register()` may already write its settings: calls answered until the hello.
        let message = loop {
            match self.read(deadline) {
                Ok(m) if m.get("call").is_some() => {
                    let capability = m["call"].as_str().unwrap_or_default();
                    let reply = self.own_call(capability, &m["args"]).unwrap_or_else(|| {
                        serde_json::json!({ "error": format!("{capability} cannot be used while the plugin registers") })
                    });
                    if let Err(why) = self.send(&reply) {
                        break Err(why);
                    }
                }
                other => break other,
            }
        };
        let parsed = message.and_then(|m| {
            let hello = m
                .get("hello")
                .ok_or_else(|| "sent something other than its hello".to_string())?;
            let pairs = |v: &Value| -> Vec<(String, String)> {
                v.as_array()
                    .map(|items| {
                        items
                            .iter()
                            .filter_map(|p| Some((p[0].as_str()?.into(), p[1].as_str()?.into())))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            Ok(Hello {
                callbacks: pairs(&hello["hooks"]),
                middleware: pairs(&hello["middleware"]),
                tools: hello["tools"].as_array().cloned().unwrap_or_default(),
                commands: hello["commands"].as_array().cloned().unwrap_or_default(),
                sections: hello["sections"].as_array().cloned().unwrap_or_default(),
                warnings: hello["warnings"]
                    .as_array()
                    .map(|w| {
                        w.iter()
                            .filter_map(|l| l.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default(),
                error: hello["error"].as_str().map(str::to_string),
            })
        });
        parsed.map_err(|why| {
            let cause = death_cause(&mut self.group, None);
            format!(
                "{}: the Python worker failed while loading the plugin ({why}; {cause}); run `{} -c 'import runpy; runpy.run_path(\"__init__.py\")'` in that directory to see the error",
                launch.dir.display(),
                launch.interpreter.display()
            )
        })
    }

    /// Reads one protocol line by `deadline`.
    fn read(&mut self, deadline: Instant) -> Result<Value, String> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("timed out".into());
        }
        let _ = self.stream.set_read_timeout(Some(left));
        let mut line = Vec::new();
        match (&mut self.reader)
            .take(MAX_LINE)
            .read_until(b'\n', &mut line)
        {
            Ok(0) => Err("closed its end of the protocol".into()),
            Ok(_) if !line.ends_with(b"\n") => Err(format!(
                "sent a line over {} MiB or cut short",
                MAX_LINE >> 20
            )),
            Ok(_) => serde_json::from_slice(&line)
                .map_err(|e| format!("sent a line that is not JSON ({e})")),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Err("timed out".into())
            }
            Err(e) => Err(format!("cannot read from it: {e}")),
        }
    }

    fn send(&mut self, message: &Value) -> Result<(), String> {
        let mut line = serde_json::to_vec(message).map_err(|e| e.to_string())?;
        line.push(b'\n');
        self.stream
            .write_all(&line)
            .map_err(|e| format!("cannot write to its worker: {e}"))
    }
}

impl PythonPlugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.supervisor.name
    }

    /// The interpreter its worker runs on.
    pub fn interpreter(&self) -> &Path {
        &self.launch.interpreter
    }

    /// One request to the worker other than a firing (middleware, a tool, a command, a
    /// section; see `python_driver.py`), supervised as a firing is: a crash or a hang is
    /// named and the worker restarted. `what` and `label` name it in those messages; `host`
    /// answers what the worker asks of the host meanwhile.
    fn request(
        &self,
        what: &str,
        label: &str,
        message: &Value,
        host: HostCalls<'_>,
    ) -> Result<Value, String> {
        let Some(_busy) = crate::reentry::enter(std::ptr::from_ref(self) as usize) else {
            return Err(format!(
                "plugin '{}' is already answering a call on this thread (a tool it dispatched came back to it)",
                self.name()
            ));
        };
        let timeout = self.supervisor.timeout;
        let spawn = || {
            let mut worker = self.launch.spawn()?;
            worker.hello(&self.launch)?;
            Ok(worker)
        };
        self.supervisor
            .exchange(what, label, spawn, |worker| {
                converse(worker, message, timeout, host)
            })
            .map_err(|NoAnswer(why)| why)
    }

    /// Fires `hook` in the worker: every callback of the plugin for it, in one round trip.
    /// `count` answers, whatever happens; `label` names the callbacks in messages.
    fn fire(&self, view: &EventView<'_>, count: usize, label: &str) -> Vec<HookResult> {
        let hook = view.hook.as_str();
        // The plugin's worker is waiting for the host on this thread (its command ran a tool
        // whose hooks came back to it): it cannot answer, and waiting would never end.
        let Some(_busy) = crate::reentry::enter(std::ptr::from_ref(self) as usize) else {
            tracing::debug!(
                "plugin '{}' has no opinion on {hook}: it fired for a tool the plugin itself dispatched",
                self.name()
            );
            return std::iter::repeat_with(|| Ok(None)).take(count).collect();
        };
        let timeout = self.supervisor.timeout;
        let spawn = || {
            let mut worker = self.launch.spawn()?;
            let hello = worker.hello(&self.launch)?;
            if let Some(error) = hello.error {
                tracing::warn!(
                    "Plugin '{}' failed to load again in its restarted worker: {error}",
                    self.launch.name
                );
            }
            Ok(worker)
        };
        let answers = self
            .supervisor
            .exchange(hook, label, spawn, |worker| exchange(worker, view, timeout));
        match answers {
            Ok(answers) => {
                let mut answers: Vec<HookResult> = answers.iter().map(to_result).collect();
                answers.resize_with(count, || Ok(None));
                answers
            }
            Err(NoAnswer(why)) => {
                let mut answers = vec![Ok(self.supervisor.fallback(hook, &why))];
                answers.resize_with(count, || Ok(None));
                answers
            }
        }
    }
}

/// Answers a worker's calls to the host during one exchange: `(capability, args)` to the
/// reply line, `{"ok": answer}` or `{"error": message}`.
type HostCalls<'a> = &'a dyn Fn(&str, &Value) -> Value;

/// The host calls of a request that may run tools (a command's, a tool's): `tool.dispatch`.
fn tool_calls(dispatch: crate::tools::Dispatch<'_>) -> impl Fn(&str, &Value) -> Value + '_ {
    move |capability, args| match capability {
        "tool.dispatch" => {
            let name = args["name"].as_str().unwrap_or_default();
            serde_json::json!({ "ok": dispatch(name, &args["args"]) })
        }
        other => serde_json::json!({ "error": format!("{other} is not offered here") }),
    }
}

/// The host calls of a middleware request: none.
fn no_calls(capability: &str, _: &Value) -> Value {
    serde_json::json!({ "error": format!("{capability} is not offered to middleware here") })
}

impl super::SupervisedWorker for PythonPlugin {
    fn status(&self) -> (Option<u32>, u64, Option<String>) {
        self.supervisor.status()
    }

    fn restart(&self) {
        self.supervisor.restart();
    }
}

/// One firing: the hook and its keyword arguments out, host calls answered, the answers
/// back. An error is a crash (see [`Supervisor::exchange`]).
fn exchange(
    worker: &mut Worker,
    view: &EventView<'_>,
    timeout: Duration,
) -> Result<Vec<Value>, String> {
    let message = serde_json::json!({ "fire": view.hook.as_str(), "kw": kwargs(view) });
    let host = |capability: &str, args: &Value| {
        let args = args.to_string();
        match view.host.call(capability.into(), args.as_str().into()) {
            RResult::ROk(answer) => {
                let answer = serde_json::from_str::<Value>(answer.as_str())
                    .unwrap_or_else(|_| Value::String(answer.into_string()));
                serde_json::json!({ "ok": answer })
            }
            RResult::RErr(error) => serde_json::json!({ "error": error.as_str() }),
        }
    };
    let mut answer = converse(worker, &message, timeout, &host)?;
    match answer.get_mut("answers").map(Value::take) {
        Some(Value::Array(answers)) => Ok(answers),
        Some(_) => Err("sent answers that are not a list".into()),
        None => Err("sent a line that is neither answers nor a call".into()),
    }
}

/// Sends `message`, answers the worker's calls (its own settings, and whatever `host`
/// offers) until it says anything else, and returns that. An error is a crash (see
/// [`Supervisor::exchange`]).
fn converse(
    worker: &mut Worker,
    message: &Value,
    timeout: Duration,
    host: HostCalls<'_>,
) -> Result<Value, String> {
    let deadline = Instant::now() + timeout;
    worker.send(message)?;
    loop {
        let message = match worker.read(deadline) {
            Ok(message) => message,
            Err(why) if why == "timed out" => {
                return Err(format!("killed after timeout {}", seconds(timeout)));
            }
            Err(why) if why.starts_with("sent") => return Err(why),
            Err(why) => return Err(format!("its worker {why}")),
        };
        let Some(capability) = message.get("call").and_then(Value::as_str) else {
            return Ok(message);
        };
        let args = message.get("args").unwrap_or(&Value::Null);
        let reply = match worker.own_call(capability, args) {
            Some(reply) => reply,
            None => host(capability, args),
        };
        worker.send(&reply)?;
    }
}

/// The hook's fields as the reference's keyword arguments: JSON fields as objects and lists,
/// the rest as they are.
fn kwargs(view: &EventView<'_>) -> Value {
    let mut map = Map::with_capacity(view.fields.len());
    for field in view.fields.iter() {
        let value = match &field.value {
            FieldValue::Null => Value::Null,
            FieldValue::Bool(b) => Value::Bool(*b),
            FieldValue::Int(i) => Value::from(*i),
            FieldValue::Float(f) => Value::from(*f),
            FieldValue::Str(s) => Value::String(s.as_str().to_string()),
            FieldValue::Json(s) => {
                serde_json::from_str(s.as_str()).unwrap_or_else(|_| Value::String(s.to_string()))
            }
        };
        map.insert(field.name.as_str().to_string(), value);
    }
    Value::Object(map)
}

/// One answer of the worker as a callback's result.
fn to_result(answer: &Value) -> HookResult {
    match answer {
        Value::Null => Ok(None),
        Value::Array(parts) => {
            let text = |i: usize| parts.get(i).and_then(Value::as_str).unwrap_or_default();
            let size = text(1).len() + text(2).len();
            if size > MAX_ANSWER_BYTES {
                return Err(format!(
                    "its answer is {size} bytes, over the {} MiB a callback may return; it is ignored",
                    MAX_ANSWER_BYTES >> 20
                ));
            }
            let mut reply = Reply::new(text(0), text(1).to_string());
            reply.json = text(2).into();
            Ok(Some(reply))
        }
        Value::Object(map) => Err(map
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("the callback raised")
            .to_string()),
        other => Err(format!("the worker answered {other} for it")),
    }
}

/// A pipe for a worker's fd 1 and 2: the read end, and the write end twice. Every end is
/// close-on-exec, so no other child inherits it and the reader sees end of file when the
/// worker is gone.
fn log_pipe() -> std::io::Result<(std::fs::File, OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two new descriptors into `fds`, which we then own.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh from pipe2 and owned by nothing else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let write_2 = write.try_clone()?;
    Ok((std::fs::File::from(read), write, write_2))
}

/// The host's log level, as Python's `logging` numbers it, so records below it are never
/// formatted or sent.
fn python_level() -> u32 {
    use tracing::level_filters::LevelFilter;
    match LevelFilter::current() {
        LevelFilter::OFF => 100,
        LevelFilter::ERROR => 40,
        LevelFilter::WARN => 30,
        LevelFilter::INFO => 20,
        LevelFilter::DEBUG => 10,
        _ => 1,
    }
}

/// Reads the worker's log channel until end of file: `logging` records at their level,
/// anything else (`print()`, a C extension's output) at INFO, all under the plugin's name;
/// at most [`LOG_LINES_PER_SECOND`] a second, with a count of what was left out.
fn forward_log(pipe: std::fs::File, plugin: &str) {
    use hermes_hooks_abi::core::{HostLogger as _, level};
    let logger = PluginLogger::new(plugin);
    let mut reader = BufReader::new(pipe);
    let mut line = Vec::new();
    let report_dropped = |dropped: u64| {
        if dropped > 0 {
            let line = format!(
                "{dropped} log line(s) of this plugin left out (over {LOG_LINES_PER_SECOND} a second)"
            );
            logger.log(level::WARN, "hermes".into(), line.as_str().into());
        }
    };
    let (mut second, mut in_second, mut dropped) = (Instant::now(), 0u32, 0u64);
    loop {
        line.clear();
        match (&mut reader).take(16 << 10).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if second.elapsed() >= Duration::from_secs(1) {
            report_dropped(dropped);
            (second, in_second, dropped) = (Instant::now(), 0, 0);
        }
        if in_second >= LOG_LINES_PER_SECOND {
            // Over the rate: for the rest of the second the pipe is drained in whole
            // chunks every few milliseconds, its lines counted, not read one by one. The
            // plugin's writes wait on the full pipe in between, and this thread sleeps,
            // instead of spending a core to drop every line.
            dropped += 1;
            let mut chunk = vec![0u8; 64 << 10];
            while second.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_millis(10));
                let buffered = reader.buffer();
                dropped += bytecount(buffered);
                let n = buffered.len();
                reader.consume(n);
                match std::io::Read::read(reader.get_mut(), &mut chunk) {
                    Ok(0) | Err(_) => {
                        report_dropped(dropped);
                        return;
                    }
                    Ok(n) => dropped += bytecount(&chunk[..n]),
                }
            }
            continue;
        }
        in_second += 1;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        if let Some(record) = text.strip_prefix('\u{1f}') {
            if let Ok(record) = serde_json::from_str::<Value>(record) {
                let lvl = match record["l"].as_u64().unwrap_or(20) {
                    40.. => level::ERROR,
                    30.. => level::WARN,
                    20.. => level::INFO,
                    10.. => level::DEBUG,
                    _ => level::TRACE,
                };
                let module = record["n"].as_str().unwrap_or("root");
                let message = record["m"].as_str().unwrap_or_default();
                logger.log(lvl, module.into(), message.into());
                continue;
            }
        }
        if !text.trim().is_empty() {
            logger.log(level::INFO, "print".into(), text.into());
        }
    }
    report_dropped(dropped);
}

/// The lines in `bytes`.
fn bytecount(bytes: &[u8]) -> u64 {
    bytes.iter().filter(|b| **b == b'\n').count() as u64
}

/// The callbacks one Python plugin registered for one hook, answering together.
pub struct HookGroup {
    /// The plugin.
    pub plugin: Arc<PythonPlugin>,
    /// How many callbacks it has for the hook.
    pub count: usize,
    /// `plugin::first_callback`, for messages about the worker.
    pub label: String,
}

/// A Python plugin's middleware of one kind: all its callbacks of that kind, run by its
/// worker in registration order, as one link of the [`MiddlewareChain`](crate::middleware::MiddlewareChain).
pub struct MiddlewareGroup {
    /// The plugin.
    pub plugin: Arc<PythonPlugin>,
    /// `plugin::callback, ...`, for messages.
    pub label: String,
}

impl crate::middleware::Middleware for MiddlewareGroup {
    fn source(&self) -> &str {
        self.plugin.name()
    }

    fn rewrite(
        &self,
        kind: crate::middleware::Kind,
        payload: Value,
        original: &Value,
        context: &Map<String, Value>,
    ) -> crate::middleware::Rewrite {
        let kw = crate::middleware::callback_kwargs(kind, &payload, original, context);
        let message = serde_json::json!({ "middleware": kind.name(), "kw": kw });
        match self
            .plugin
            .request(kind.name(), &self.label, &message, &no_calls)
        {
            Ok(mut answer) => {
                let mut rewritten = answer["rewritten"].take();
                let strings = |v: &Value| -> Vec<String> {
                    v.as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default()
                };
                crate::middleware::Rewrite {
                    payload: rewritten["payload"].take(),
                    trace: rewritten["trace"].as_array().cloned().unwrap_or_default(),
                    failures: strings(&rewritten["failures"]),
                }
            }
            Err(why) => crate::middleware::Rewrite {
                payload,
                trace: Vec::new(),
                failures: vec![format!(
                    "Middleware '{}' callback {} raised: {why}",
                    kind.name(),
                    self.label
                )],
            },
        }
    }

    fn execute(
        &self,
        kind: crate::middleware::Kind,
        payload: Value,
        original: &Value,
        context: &Map<String, Value>,
        next: &mut crate::middleware::Next<'_>,
    ) -> Result<Value, String> {
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let id = IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let kw = crate::middleware::callback_kwargs(kind, &payload, original, context);
        let start = serde_json::json!({ "middleware": kind.name(), "kw": kw, "id": id });
        let mut answer = self
            .plugin
            .request(kind.name(), &self.label, &start, &no_calls);
        // What the rest of the chain answered, once the plugin's wrappers passed it on.
        let mut downstream: Option<Result<Value, String>> = None;
        loop {
            let message = match answer {
                Ok(message) => message,
                Err(why) => {
                    // The worker failed: the wrapper is passed over, as the reference
                    // passes over a callback that raised.
                    tracing::warn!(
                        "Middleware '{}' callback {} raised: {why}",
                        kind.name(),
                        self.label
                    );
                    return match downstream {
                        Some(result) => result,
                        None => next(payload),
                    };
                }
            };
            if let Some(passed) = message.get("next") {
                if downstream.is_some() {
                    return Err(format!(
                        "plugin '{}' asked for next_call twice",
                        self.plugin.name()
                    ));
                }
                let result = next(passed.clone());
                let resume = match &result {
                    Ok(value) => serde_json::json!({ "resume": id, "ok": value }),
                    Err(error) => serde_json::json!({ "resume": id, "error": error }),
                };
                downstream = Some(result);
                answer = self
                    .plugin
                    .request(kind.name(), &self.label, &resume, &no_calls);
                continue;
            }
            if let Some(error) = message.get("error").and_then(Value::as_str) {
                return Err(error.to_string());
            }
            return Ok(message.get("result").cloned().unwrap_or(Value::Null));
        }
    }
}

/// A Python plugin's tools, run by its worker.
pub struct ToolGroup {
    /// The plugin.
    pub plugin: Arc<PythonPlugin>,
}

impl crate::tools::ToolHandler for ToolGroup {
    fn call(
        &self,
        name: &str,
        args: &Value,
        context: &Map<String, Value>,
        dispatch: crate::tools::Dispatch<'_>,
    ) -> String {
        let message = serde_json::json!({ "tool": name, "args": args, "kw": context });
        let label = format!("{}::{name}", self.plugin.name());
        match self
            .plugin
            .request(name, &label, &message, &tool_calls(dispatch))
        {
            Ok(answer) => match answer.get("tool_result") {
                Some(Value::String(result)) => result.clone(),
                _ => serde_json::json!({ "error": format!("plugin '{}' answered tool {name} with no result", self.plugin.name()) }).to_string(),
            },
            Err(why) => serde_json::json!({
                "error": format!("Tool execution failed: plugin '{}': {why}", self.plugin.name())
            })
            .to_string(),
        }
    }
}

/// A Python plugin's slash commands, run by its worker.
pub struct CommandGroup {
    /// The plugin.
    pub plugin: Arc<PythonPlugin>,
}

impl crate::commands::CommandHandler for CommandGroup {
    fn run(
        &self,
        name: &str,
        raw_args: &str,
        dispatch: crate::tools::Dispatch<'_>,
    ) -> Result<Option<String>, String> {
        let message = serde_json::json!({ "command": name, "raw_args": raw_args });
        let label = format!("{}::/{name}", self.plugin.name());
        let answer =
            self.plugin
                .request(&format!("/{name}"), &label, &message, &tool_calls(dispatch))?;
        if let Some(error) = answer.get("error").and_then(Value::as_str) {
            return Err(error.to_string());
        }
        Ok(answer
            .get("command_result")
            .and_then(Value::as_str)
            .map(str::to_string))
    }
}

/// One system prompt section of a Python plugin: its text, or its renderer in the worker.
pub struct SectionGroup {
    /// The plugin.
    pub plugin: Arc<PythonPlugin>,
    /// The text, when the plugin registered a string rather than a callable.
    pub content: Option<String>,
}

impl crate::prompt_sections::SectionSource for SectionGroup {
    fn render(&self, id: &str, info: &Value) -> Result<Option<String>, String> {
        if let Some(content) = &self.content {
            return Ok(Some(content.clone()));
        }
        let message = serde_json::json!({ "section": id, "info": info });
        let label = format!("{}::{id}", self.plugin.name());
        let answer = self.plugin.request(id, &label, &message, &no_calls)?;
        if let Some(error) = answer.get("error").and_then(Value::as_str) {
            return Err(error.to_string());
        }
        match answer.get("section_text") {
            Some(Value::String(text)) => Ok(Some(text.clone())),
            _ => Ok(None),
        }
    }
}

impl ExternalGroup for HookGroup {
    fn run_all(&self, event: &EventView<'_>) -> Vec<HookResult> {
        self.plugin.fire(event, self.count, &self.label)
    }
}
