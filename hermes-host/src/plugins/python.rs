//! Hermes Python plugins: a plugin directory with `plugin.yaml` and an `__init__.py` whose
//! `register(ctx)` calls `ctx.register_hook(...)`, run unchanged in a Python worker process
//! the host starts and supervises.
//!
//! The worker is the script `python_driver.py` beside this file, compiled into the binary
//! and run with the configured interpreter (`plugins.python` in `config.yaml`, else
//! `python3` on `PATH`, so the user's site-packages are there). See the script for the
//! protocol: JSON lines on a socket (fd 3) that nothing else writes to, and a separate pipe
//! (fd 1 and 2) that carries `print()` and `logging` records into the host's log, under
//! target `plugin` with the name of the plugin that wrote them, filtered by `HERMES_LOG`
//! like everything else.
//!
//! All the Python plugins of a home share one worker, one interpreter, as Hermes runs them
//! in its own: one process's memory, not one per plugin. A plugin with `isolation:
//! process` gets a worker of its own. A plugin's callbacks of one hook are one
//! [`ExternalGroup`] in the registry, one entry per callback, so order, labels and
//! aggregation are those of every other callback; the registry joins the groups of
//! neighbours in one worker, so a firing is one round trip for all of them. A hook no
//! Python plugin registered never reaches a worker.
//!
//! Supervision is [`Interpreter`]'s: a worker that crashes, exits or hangs past a plugin's
//! `timeout` is killed, the plugin whose code was running is named (the worker says which
//! on its fd 4), its answer counts as no opinion (a block on `pre_tool_call` with
//! `fail_closed: true`), and the worker starts again after a backoff. After
//! [`MAX_CRASHES`] crashes in a minute the plugin is disabled and the worker runs on
//! without it.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use abi_stable::std_types::RResult;
use hermes_hooks_abi::core::{EventView, FieldValue, Reply};
use serde_json::{Map, Value};

use super::manifest::Manifest;
use super::supervisor::{self, CRASH_WINDOW, DEFAULT_TIMEOUT, MAX_CRASHES, death_cause, seconds};
use crate::logging::PluginLogger;
use crate::process::{CrashRecord, Group};
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

/// How long the host waits for a worker's answer before it sleeps (see
/// `Worker::spin_for_answer`).
const ANSWER_SPIN: Duration = Duration::from_micros(50);

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

/// One plugin of a worker, as the worker is told to load it.
#[derive(Clone)]
struct Spec {
    dir: PathBuf,
    key: String,
    name: String,
    /// For a pip-installed plugin, its entry point's name: the worker loads it with
    /// `ep.load()` instead of importing `dir/__init__.py`.
    entry_point: Option<String>,
    /// plugin.yaml as JSON, for `ctx.manifest`.
    manifest: Value,
}

/// What starting a worker takes.
struct Launch {
    interpreter: PathBuf,
    plugins: Vec<Spec>,
    context: WorkerContext,
}

/// A running worker process.
struct Worker {
    group: Group,
    /// Each plugin's own settings in config.yaml, which `ctx.set_config` writes.
    settings: Vec<Settings>,
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    /// Closed by the log thread when it has forwarded everything the worker wrote.
    log_done: std::sync::mpsc::Receiver<()>,
    /// The worker's fd 4: which plugin's code runs (see `python_driver.py`).
    mark: Option<std::fs::File>,
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

/// What a worker said of one plugin once it had imported it and run `register`.
#[derive(Clone, Debug, Default)]
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

impl Hello {
    fn parse(hello: &Value) -> Hello {
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
        Hello {
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
        }
    }
}

/// A worker process and the Python plugins it runs, supervised together: all the plugins
/// of a home share one (as in Hermes, one interpreter), and a plugin with
/// `isolation: process` has one of its own.
///
/// A request is one exchange with the worker, under its lock. While the worker waits for
/// the host to answer something a plugin asked (`ctx.dispatch_tool` ran a tool whose hooks
/// are in this worker), the worker is lent to the requests of that same call, which
/// [`crate::reentry`] recognises on any thread, and other calls wait. A crash or a hang is
/// blamed on the plugin whose code was running, which the worker writes to its fd 4; that
/// plugin's crashes are counted, and after [`MAX_CRASHES`] in [`CRASH_WINDOW`] the worker
/// starts again without it, so the others come back.
pub struct Interpreter {
    launch: Launch,
    state: Mutex<State>,
    /// Signalled whenever the worker is put back.
    returned: Condvar,
    /// The first start's hellos, which each plugin's [`Launching::finish`] takes its own of.
    first: OnceLock<Result<Vec<Hello>, String>>,
}

struct State {
    worker: Option<Worker>,
    /// Whether a call has the worker (an exchange of it runs, maybe lent to its own
    /// requests while it waits for the host). Other calls wait.
    busy: bool,
    /// Whether the worker is out of `worker`, in an exchange's hands. Requests of the call
    /// that has it wait only for this.
    taken: bool,
    /// Restarts after a crash, for the backoff; reset when the plugin to blame is disabled.
    starts: CrashRecord,
    restarts: u64,
    plugins: Vec<Health>,
    /// Plugins whose import killed the worker at the first start: never loaded again.
    excluded: Vec<bool>,
}

impl State {
    /// Whether plugin `index` is not loaded: its import killed the worker, or it crashed
    /// too often.
    fn skipped(&self, index: usize) -> bool {
        self.excluded.get(index) == Some(&true)
            || self
                .plugins
                .get(index)
                .is_none_or(|h| h.crashes.exhausted())
    }
}

/// One plugin's crash record in its worker.
struct Health {
    crashes: CrashRecord,
    last_crash: Option<String>,
}

impl Health {
    fn new() -> Health {
        Health {
            crashes: CrashRecord::new(CRASH_WINDOW, Duration::from_millis(100), MAX_CRASHES),
            last_crash: None,
        }
    }
}

/// How one exchange went wrong: why, and the plugin blamed.
struct Failure {
    why: String,
    plugin: usize,
}

/// The worker of a request, checked out of its [`Interpreter`] for the request's duration.
struct CheckedOut<'a> {
    interpreter: &'a Interpreter,
    worker: Option<Worker>,
    /// Whether this request found the worker lent to its call (it must not mark it free).
    nested: bool,
}

impl Drop for CheckedOut<'_> {
    fn drop(&mut self) {
        if let Ok(mut state) = self.interpreter.state.lock() {
            if let Some(worker) = self.worker.take() {
                state.worker = Some(worker);
            }
            state.taken = false;
            if !self.nested {
                state.busy = false;
            }
        }
        self.interpreter.returned.notify_all();
    }
}

impl CheckedOut<'_> {
    /// The worker; gone when a request made while it was lent killed it.
    fn worker(&mut self) -> Result<&mut Worker, String> {
        self.worker
            .as_mut()
            .ok_or_else(|| "its worker ended while the host answered it".to_string())
    }

    /// Runs `f` (the host answering the worker) with the worker lent back to its
    /// interpreter, for the requests `f`'s call makes of it; then takes it back.
    fn lend<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let pid = self.worker.as_mut().map(|w| w.group.id());
        if let Ok(mut state) = self.interpreter.state.lock() {
            state.worker = self.worker.take();
            state.taken = false;
        }
        self.interpreter.returned.notify_all();
        let answer = f();
        if let Ok(mut state) = self.interpreter.state.lock() {
            // A request made meanwhile may have killed the worker, and another started a
            // new one: that one stays for the next request; this exchange has lost its.
            match state.worker.take() {
                Some(worker) if Some(worker.group.id()) == pid => {
                    self.worker = Some(worker);
                    state.taken = true;
                }
                other => state.worker = other,
            }
        }
        answer
    }
}

impl Interpreter {
    fn new(launch: Launch) -> Interpreter {
        let plugins = launch.plugins.iter().map(|_| Health::new()).collect();
        Interpreter {
            launch,
            state: Mutex::new(State {
                worker: None,
                busy: false,
                taken: false,
                starts: CrashRecord::new(CRASH_WINDOW, Duration::from_millis(100), usize::MAX),
                restarts: 0,
                plugins,
                excluded: Vec::new(),
            }),
            returned: Condvar::new(),
            first: OnceLock::new(),
        }
    }

    fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Whether plugin `index` is disabled after repeated crashes.
    fn disabled(&self, index: usize) -> bool {
        self.state.lock().map(|s| s.skipped(index)).unwrap_or(true)
    }

    /// Runs `exchange` with the worker for a request about `plugins` (which it blames for a
    /// crash when the worker does not say), starting the worker first when there is none.
    /// A failed exchange kills the worker and is logged, naming the plugin, `what` and the
    /// callback `label(plugin)`.
    fn exchange<T>(
        &self,
        plugins: &[usize],
        what: &str,
        label: &dyn Fn(usize) -> String,
        exchange: impl FnOnce(&mut CheckedOut<'_>) -> Result<T, String>,
    ) -> Result<T, Failure> {
        let first = plugins.first().copied().unwrap_or_default();
        let fail = |why: &str| Failure {
            why: why.to_string(),
            plugin: first,
        };
        let held = crate::reentry::enter(self.key());
        let nested = held.is_none();
        let Ok(mut state) = self.state.lock() else {
            return Err(fail("its worker's lock is poisoned"));
        };
        // Another call has the worker: wait for it. A request of the call that has it finds
        // it lent, or waits for a sibling helper of that call to put it back.
        while (!nested && state.busy) || (nested && state.taken) {
            state = match self.returned.wait(state) {
                Ok(state) => state,
                Err(_) => return Err(fail("its worker's lock is poisoned")),
            };
        }
        if plugins.iter().all(|&p| state.skipped(p)) {
            return Err(fail("it is disabled after repeated crashes"));
        }
        if state.worker.is_none() {
            if !state.starts.may_start(Instant::now()) {
                let why = state.plugins[first].last_crash.clone().unwrap_or_default();
                return Err(fail(&format!("its worker is restarting ({why})")));
            }
            state.restarts += 1;
            let skip: Vec<bool> = (0..state.plugins.len()).map(|i| state.skipped(i)).collect();
            match self.launch.spawn().and_then(|mut w| {
                let hellos = w.hello(&self.launch, &skip)?;
                for (i, hello) in hellos.iter().enumerate() {
                    if let (Some(error), false) = (&hello.error, skip.get(i) == Some(&true)) {
                        tracing::warn!(
                            "Plugin '{}' failed to load again in its restarted worker: {error}",
                            self.launch.plugins[i].name
                        );
                    }
                }
                Ok(w)
            }) {
                Ok(worker) => state.worker = Some(worker),
                Err(why) => {
                    let blamed = first;
                    self.crashed(&mut state, blamed, what, &label(blamed), why.clone());
                    return Err(Failure {
                        why,
                        plugin: blamed,
                    });
                }
            }
        }
        let mut out = CheckedOut {
            interpreter: self,
            worker: state.worker.take(),
            nested,
        };
        state.busy = true;
        state.taken = true;
        drop(state);
        match exchange(&mut out) {
            Ok(answer) => Ok(answer),
            Err(why) => {
                let Some(mut worker) = out.worker.take() else {
                    return Err(fail(&why));
                };
                let blamed = match plugins {
                    [only] => *only,
                    _ => worker
                        .running()
                        .filter(|p| plugins.contains(p))
                        .unwrap_or(first),
                };
                let cause = if why.starts_with("killed after timeout") || why.starts_with("sent") {
                    let _ = crate::process::kill_group(worker.group.id());
                    if why.starts_with("sent") {
                        format!("its worker {why}")
                    } else {
                        why
                    }
                } else {
                    death_cause(&mut worker.group, None)
                };
                drop(worker);
                drop(out);
                if let Ok(mut state) = self.state.lock() {
                    self.crashed(&mut state, blamed, what, &label(blamed), cause.clone());
                }
                Err(Failure {
                    why: cause,
                    plugin: blamed,
                })
            }
        }
    }

    fn crashed(&self, state: &mut State, plugin: usize, what: &str, label: &str, cause: String) {
        let now = Instant::now();
        state.starts.record(now);
        let name = self
            .launch
            .plugins
            .get(plugin)
            .map_or("?", |p| p.name.as_str());
        let Some(health) = state.plugins.get_mut(plugin) else {
            return;
        };
        health.crashes.record(now);
        health.last_crash = Some(cause.clone());
        tracing::warn!(
            "Plugin '{name}' crashed in hook '{what}' (callback {label}): {cause}; its worker restarts at the next firing"
        );
        if health.crashes.exhausted() {
            tracing::warn!(
                "Plugin '{name}' crashed {MAX_CRASHES} times within {}s and is disabled for the rest of this run; fix it, then start the agent again (`hermes plugins fire` reproduces a crash)",
                CRASH_WINDOW.as_secs()
            );
            // The others need not wait out a backoff their neighbour earned.
            state.starts = CrashRecord::new(CRASH_WINDOW, Duration::from_millis(100), usize::MAX);
        }
    }

    /// The hellos of the first start. A plugin whose import kills the worker (blamed by the
    /// worker's fd 4) is left out, with that as its error, and the worker starts again
    /// without it, so one plugin cannot keep its neighbours from loading.
    fn first_hellos(&self) -> Result<Vec<Hello>, String> {
        let mut state = self
            .state
            .lock()
            .map_err(|_| "the worker's lock is poisoned".to_string())?;
        let count = self.launch.plugins.len();
        let mut worker = state
            .worker
            .take()
            .ok_or_else(|| "the worker did not start".to_string())?;
        let mut excluded: Vec<Option<String>> = vec![None; count];
        loop {
            let skip: Vec<bool> = excluded.iter().map(Option::is_some).collect();
            match worker.hello(&self.launch, &skip) {
                Ok(mut hellos) => {
                    hellos.resize_with(count, Hello::default);
                    for (hello, why) in hellos.iter_mut().zip(&excluded) {
                        if let Some(why) = why {
                            *hello = Hello {
                                error: Some(why.clone()),
                                ..Hello::default()
                            };
                        }
                    }
                    state.worker = Some(worker);
                    state.excluded = skip;
                    return Ok(hellos);
                }
                Err(why) => {
                    let blamed = worker
                        .running()
                        .filter(|&p| count > 1 && excluded.get(p).is_some_and(Option::is_none));
                    let Some(plugin) = blamed else {
                        return Err(why);
                    };
                    excluded[plugin] = Some(why);
                    drop(worker);
                    worker = self.launch.spawn()?;
                }
            }
        }
    }

    /// The running worker's pid, how often it was restarted, and plugin `index`'s last
    /// crash.
    fn status(&self, index: usize) -> (Option<u32>, u64, Option<String>) {
        match self.state.lock() {
            Ok(mut s) => {
                let pid = s.worker.as_mut().map(|w| w.group.id());
                let last = s.plugins.get(index).and_then(|h| h.last_crash.clone());
                (pid, s.restarts, last)
            }
            Err(_) => (None, 0, None),
        }
    }

    /// Stops the worker when no request has it; the next request starts a new one.
    fn restart(&self) {
        if let Ok(mut state) = self.state.lock() {
            if let Some(worker) = state.worker.take() {
                drop(worker);
                state.restarts += 1;
            }
        }
    }
}

/// Plugins waiting for their worker's hello: starting every worker first and waiting for
/// the hellos after lets the interpreters start in parallel.
pub struct Launching {
    interpreter: Arc<Interpreter>,
    index: usize,
    manifest: Manifest,
}

/// One Python plugin to start: its manifest, its key under `plugins/`, its directory, its
/// entry point when pip installed it, and whether it has a worker of its own
/// (`isolation: process`).
#[derive(Clone, Copy)]
pub struct ToStart<'a> {
    /// plugin.yaml, as the host read it.
    pub manifest: &'a Manifest,
    /// Its key under `plugins/`.
    pub key: &'a str,
    /// Its directory.
    pub dir: &'a Path,
    /// Its entry point, when pip installed it.
    pub entry_point: Option<&'a super::EntryPoint>,
    /// Whether it has a worker of its own.
    pub isolated: bool,
}

/// Starts the workers of `plugins` with `interpreter`: one for all that share it, one each
/// for the isolated. Returns at once, one [`Launching`] per plugin in order;
/// [`Launching::finish`] waits for its worker's hello.
pub fn launch(
    plugins: &[ToStart<'_>],
    interpreter: &Path,
    context: &WorkerContext,
) -> Vec<Launching> {
    let spec = |p: &ToStart<'_>| Spec {
        dir: p.dir.to_path_buf(),
        key: p.key.to_string(),
        name: p.manifest.name.clone(),
        entry_point: p.entry_point.map(|ep| ep.name.clone()),
        manifest: match p.entry_point {
            Some(ep) => serde_json::json!({ "name": ep.name, "version": ep.version }),
            None => super::manifest::manifest_path(p.dir)
                .and_then(|m| crate::private_file::read_regular(&m).ok())
                .and_then(|bytes| yaml_serde::from_slice::<Value>(&bytes).ok())
                .unwrap_or_else(|| serde_json::json!({})),
        },
    };
    let start = |plugins: Vec<Spec>| {
        let interpreter = Arc::new(Interpreter::new(Launch {
            interpreter: interpreter.to_path_buf(),
            plugins,
            context: context.clone(),
        }));
        // Spawned now; its hello is read by the first plugin to finish.
        let spawned = interpreter.launch.spawn();
        if let Ok(mut state) = interpreter.state.lock() {
            match spawned {
                Ok(worker) => state.worker = Some(worker),
                Err(why) => {
                    let _ = interpreter.first.set(Err(why));
                }
            }
        }
        interpreter
    };
    let shared_specs: Vec<Spec> = plugins.iter().filter(|p| !p.isolated).map(spec).collect();
    let shared = (!shared_specs.is_empty()).then(|| start(shared_specs));
    let mut next_shared = 0;
    plugins
        .iter()
        .map(|p| {
            let (interpreter, index) = match (&shared, p.isolated) {
                (Some(shared), false) => {
                    next_shared += 1;
                    (shared.clone(), next_shared - 1)
                }
                _ => (start(vec![spec(p)]), 0),
            };
            Launching {
                interpreter,
                index,
                manifest: p.manifest.clone(),
            }
        })
        .collect()
}

impl Launching {
    /// Waits for the plugin's worker's hello and returns the supervised plugin with what it
    /// registered.
    ///
    /// # Errors
    ///
    /// The interpreter is missing, or the worker died or said nothing sensible before its
    /// hello; the message names the plugin's directory and says what to do.
    pub fn finish(self) -> Result<(Arc<PythonPlugin>, Hello), String> {
        let interpreter = self.interpreter;
        let hellos = interpreter.first.get_or_init(|| interpreter.first_hellos());
        let hello = match hellos {
            Ok(hellos) => hellos.get(self.index).cloned().unwrap_or_default(),
            Err(why) => return Err(why.clone()),
        };
        let timeout = self
            .manifest
            .timeout
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64);
        let plugin = PythonPlugin {
            interpreter: interpreter.clone(),
            index: self.index,
            name: self.manifest.name.clone(),
            timeout,
            fail_closed: self.manifest.fail_closed,
        };
        Ok((Arc::new(plugin), hello))
    }
}

impl Launch {
    fn spawn(&self) -> Result<Worker, String> {
        let first_dir = || {
            self.plugins
                .first()
                .map_or_else(|| PathBuf::from("plugins"), |p| p.dir.clone())
        };
        let (log_read, log_write, log_write_2) = log_pipe()
            .map_err(|e| format!("cannot create the log pipe of a Python plugin: {e}"))?;
        let mut cmd = Command::new(&self.interpreter);
        // `-I`: neither the launch directory (`-c` puts it first on `sys.path`, so a
        // `json.py` there would run in every worker) nor the user's site directory nor
        // `PYTHON*` variables; the driver adds the plugins' own directories, last. `-B`
        // because `-I` also ignores PYTHONDONTWRITEBYTECODE.
        cmd.args(["-I", "-B", "-c"])
            .arg(DRIVER_PY)
            .arg(python_level().to_string())
            .env("HERMES_HOME", &self.context.home)
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
        let mark = running_mark(&mut cmd);
        let (group, stream) =
            supervisor::spawn_on_socket(&mut cmd, &self.interpreter).map_err(|why| {
                if why.contains("No such file") {
                    format!(
                        "{}: cannot run Python plugins: the interpreter `{}` was not found; install python3 or set `plugins.python` in config.yaml to one",
                        first_dir().display(),
                        self.interpreter.display()
                    )
                } else {
                    format!("{}: {why}", first_dir().display())
                }
            })?;
        // The write ends now live only in the child, so the reader sees end of file when
        // the worker (and whatever it started) is gone.
        drop(cmd);
        let names: Vec<String> = self.plugins.iter().map(|p| p.name.clone()).collect();
        let (done, log_done) = std::sync::mpsc::channel::<()>();
        let _ = std::thread::Builder::new()
            .name("hermes-py-log".into())
            .spawn(move || {
                forward_log(log_read, &names);
                drop(done);
            });
        let reader = stream
            .try_clone()
            .map(BufReader::new)
            .map_err(|e| format!("cannot read from a Python plugins' worker: {e}"))?;
        Ok(Worker {
            group,
            settings: self
                .plugins
                .iter()
                .map(|p| Settings {
                    home: self.context.home.clone(),
                    plugin_id: p.key.clone(),
                })
                .collect(),
            stream,
            reader,
            log_done,
            mark,
        })
    }
}

/// A small shared file the worker gets as fd 4, where it writes which plugin's code runs;
/// `None` where the system has no anonymous shared files (the host then blames the first
/// plugin of a request).
fn running_mark(cmd: &mut Command) -> Option<std::fs::File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::{AsRawFd as _, FromRawFd as _};
        use std::os::unix::process::CommandExt as _;
        // SAFETY: memfd_create takes a NUL-terminated name and returns a new descriptor
        // (or -1), which the File then owns.
        let fd =
            unsafe { libc::memfd_create(c"hermes-plugin-running".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return None;
        }
        // SAFETY: `fd` is fresh from memfd_create and owned by nothing else.
        let file = unsafe { std::fs::File::from_raw_fd(fd) };
        file.set_len(8).ok()?;
        let raw = file.as_raw_fd();
        // SAFETY: only async-signal-safe calls between fork and exec (see `inherit_as`).
        unsafe {
            cmd.pre_exec(move || supervisor::inherit_as(raw, 4));
        }
        Some(file)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cmd;
        None
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
    /// Answers what the worker asks of one plugin's own (not of a request), if that is what
    /// it asked.
    fn own_call(&self, capability: &str, message: &Value) -> Option<Value> {
        match capability {
            "config.set" => {
                let settings = message["p"]
                    .as_u64()
                    .and_then(|p| self.settings.get(usize::try_from(p).ok()?));
                Some(match settings {
                    Some(settings) => settings.set(&message["args"]),
                    None => serde_json::json!({ "error": "config.set: no such plugin here" }),
                })
            }
            _ => None,
        }
    }

    /// The plugin whose code the worker last said was running.
    fn running(&self) -> Option<usize> {
        use std::os::unix::fs::FileExt as _;
        let mut bytes = [0u8; 4];
        self.mark.as_ref()?.read_exact_at(&mut bytes, 0).ok()?;
        usize::try_from(u32::from_le_bytes(bytes))
            .ok()?
            .checked_sub(1)
    }

    /// Tells the worker which plugins to load (all of `launch` but those `skip` names) and
    /// reads what each registered.
    fn hello(&mut self, launch: &Launch, skip: &[bool]) -> Result<Vec<Hello>, String> {
        let load: Vec<Value> = launch
            .plugins
            .iter()
            .enumerate()
            .map(|(i, p)| {
                serde_json::json!({
                    "dir": p.dir,
                    "key": p.key,
                    "name": p.name,
                    "entry_point": p.entry_point.as_deref().unwrap_or_default(),
                    "manifest": p.manifest,
                    "skip": skip.get(i).copied().unwrap_or(false),
                })
            })
            .collect();
        let deadline = Instant::now() + START_TIMEOUT;
        let sent = self.send(&serde_json::json!({ "load": load }));
        // `register()` may already write its settings: calls answered until the hello.
        let message = sent.and_then(|()| loop {
            match self.read(deadline) {
                Ok(m) if m.get("call").is_some() => {
                    let capability = m["call"].as_str().unwrap_or_default();
                    let reply = self.own_call(capability, &m).unwrap_or_else(|| {
                        serde_json::json!({ "error": format!("{capability} cannot be used while the plugin registers") })
                    });
                    if let Err(why) = self.send(&reply) {
                        break Err(why);
                    }
                }
                other => break other,
            }
        });
        let parsed = message.and_then(|m| {
            let hellos = m["hello"]["plugins"]
                .as_array()
                .ok_or_else(|| "sent something other than its hello".to_string())?;
            Ok(hellos.iter().map(Hello::parse).collect::<Vec<_>>())
        });
        parsed.map_err(|why| {
            let cause = death_cause(&mut self.group, None);
            let dir = self
                .running()
                .and_then(|p| launch.plugins.get(p))
                .or(launch.plugins.first())
                .map_or_else(|| PathBuf::from("plugins"), |p| p.dir.clone());
            format!(
                "{}: the Python worker failed while loading the plugin ({why}; {cause}); run `{} -c 'import runpy; runpy.run_path(\"__init__.py\")'` in that directory to see the error",
                dir.display(),
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
        if self.reader.buffer().is_empty() {
            self.spin_for_answer();
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

    /// Waits a little for the worker's answer without sleeping: most answers come within
    /// [`ANSWER_SPIN`], and a thread put to sleep on this machine takes longer than that
    /// to wake. The wait is while a request is in flight only, never between requests.
    fn spin_for_answer(&self) {
        use std::os::fd::AsRawFd as _;
        let fd = self.stream.as_raw_fd();
        let started = Instant::now();
        let mut byte = 0u8;
        while started.elapsed() < ANSWER_SPIN {
            // SAFETY: a one-byte peek into a local buffer on a socket this worker owns.
            let n = unsafe {
                libc::recv(
                    fd,
                    std::ptr::from_mut(&mut byte).cast(),
                    1,
                    libc::MSG_PEEK | libc::MSG_DONTWAIT,
                )
            };
            if n != -1 {
                return;
            }
            std::hint::spin_loop();
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

/// A Python plugin: its place in its worker, and what its manifest says of its
/// supervision.
pub struct PythonPlugin {
    interpreter: Arc<Interpreter>,
    index: usize,
    name: String,
    timeout: Duration,
    fail_closed: bool,
}

impl std::fmt::Debug for PythonPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (pid, restarts, last_crash) = self.interpreter.status(self.index);
        f.debug_struct("PythonPlugin")
            .field("name", &self.name)
            .field("interpreter", &self.interpreter.launch.interpreter)
            .field("pid", &pid)
            .field("restarts", &restarts)
            .field("last_crash", &last_crash)
            .finish()
    }
}

impl PythonPlugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interpreter its worker runs on.
    pub fn interpreter(&self) -> &Path {
        &self.interpreter.launch.interpreter
    }

    /// The other plugins its worker runs (empty with `isolation: process`).
    pub fn neighbours(&self) -> Vec<String> {
        self.interpreter
            .launch
            .plugins
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != self.index)
            .map(|(_, p)| p.name.clone())
            .collect()
    }

    /// One request to the worker about this plugin other than a firing (middleware, a
    /// tool, a command, a section; see `python_driver.py`): a crash or a hang is named and
    /// the worker restarted. `what` and `label` name it in those messages; `host` answers
    /// what the plugin asks of the host meanwhile.
    fn request(
        &self,
        what: &str,
        label: &str,
        message: &Value,
        host: HostCalls<'_>,
    ) -> Result<Value, String> {
        let mut message = message.clone();
        message["p"] = Value::from(self.index);
        self.interpreter
            .exchange(&[self.index], what, &|_| label.to_string(), |out| {
                converse(out, &message, self.timeout, host)
            })
            .map_err(|failure| failure.why)
    }

    /// The answer in place of a dead or hung worker's: none, or a block when the plugin is
    /// fail-closed and the hook is `pre_tool_call`.
    fn fallback(&self, hook: &str, why: &str) -> Option<Reply> {
        supervisor::fallback(&self.name, self.fail_closed, hook, why)
    }
}

impl super::SupervisedWorker for PythonPlugin {
    fn status(&self) -> (Option<u32>, u64, Option<String>) {
        self.interpreter.status(self.index)
    }

    fn restart(&self) {
        self.interpreter.restart();
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

/// The host calls a firing offers: the capabilities of its event's host.
fn view_calls<'a>(view: &'a EventView<'_>) -> impl Fn(&str, &Value) -> Value + 'a {
    move |capability, args| {
        let args = args.to_string();
        match view.host.call(capability.into(), args.as_str().into()) {
            RResult::ROk(answer) => {
                let answer = serde_json::from_str::<Value>(answer.as_str())
                    .unwrap_or_else(|_| Value::String(answer.into_string()));
                serde_json::json!({ "ok": answer })
            }
            RResult::RErr(error) => serde_json::json!({ "error": error.as_str() }),
        }
    }
}

/// Sends `message`, answers the worker's calls (its plugins' settings, and whatever `host`
/// offers) until it says anything else, and returns that. While `host` runs, the worker is
/// lent to the requests the call makes of it. An error is a crash.
fn converse(
    out: &mut CheckedOut<'_>,
    message: &Value,
    timeout: Duration,
    host: HostCalls<'_>,
) -> Result<Value, String> {
    let deadline = Instant::now() + timeout;
    out.worker()?.send(message)?;
    loop {
        let message = match out.worker()?.read(deadline) {
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
        let reply = match out.worker()?.own_call(capability, &message) {
            Some(reply) => reply,
            None => out.lend(|| host(capability, &message["args"])),
        };
        out.worker()?.send(&reply)?;
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

/// Reads a worker's log channel until end of file: `logging` records and printed lines at
/// their level, under the name of the plugin that wrote them (`plugins[0]` for text no
/// plugin is known for, a C extension's output); at most [`LOG_LINES_PER_SECOND`] a
/// second, with a count of what was left out.
fn forward_log(pipe: std::fs::File, plugins: &[String]) {
    use hermes_hooks_abi::core::{HostLogger as _, level};
    let fallback = plugins.first().map_or("python", String::as_str);
    let loggers: Vec<(&str, PluginLogger)> = plugins
        .iter()
        .map(|name| (name.as_str(), PluginLogger::new(name)))
        .collect();
    let logger_of = |name: &str| {
        loggers
            .iter()
            .find(|(n, _)| *n == name)
            .or(loggers.first())
            .map(|(_, l)| l)
    };
    let fallback_logger = PluginLogger::new(fallback);
    let logger = logger_of(fallback).unwrap_or(&fallback_logger);
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
                let plugin = record["p"].as_str().and_then(&logger_of).unwrap_or(logger);
                plugin.log(lvl, module.into(), message.into());
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

/// The callbacks Python plugins of one worker registered for one hook, answering together:
/// one plugin's, or (when the registry joined neighbours, see [`ExternalGroup::join`])
/// those of several plugins next to each other in the hook's order, one round trip for all.
pub struct HookGroup {
    parts: Vec<Part>,
}

/// One plugin's callbacks in a [`HookGroup`].
#[derive(Clone)]
struct Part {
    plugin: Arc<PythonPlugin>,
    /// How many callbacks it has for the hook.
    count: usize,
    /// `plugin::first_callback, ...`, for messages about the worker.
    label: String,
}

impl HookGroup {
    /// The `count` callbacks `plugin` registered for a hook, `label` naming them.
    pub fn new(plugin: Arc<PythonPlugin>, count: usize, label: String) -> HookGroup {
        HookGroup {
            parts: vec![Part {
                plugin,
                count,
                label,
            }],
        }
    }
}

impl ExternalGroup for HookGroup {
    fn run_all(&self, view: &EventView<'_>) -> Vec<HookResult> {
        let hook = view.hook.as_str();
        let Some(first) = self.parts.first() else {
            return Vec::new();
        };
        let interpreter = &first.plugin.interpreter;
        // Plugins disabled after repeated crashes answer as a dead worker would; the rest
        // answer in one round trip.
        let live: Vec<&Part> = self
            .parts
            .iter()
            .filter(|p| !interpreter.disabled(p.plugin.index))
            .collect();
        let timeout = live
            .iter()
            .map(|p| p.plugin.timeout)
            .max()
            .unwrap_or(DEFAULT_TIMEOUT);
        let indexes: Vec<usize> = live.iter().map(|p| p.plugin.index).collect();
        let answers = if live.is_empty() {
            Err(Failure {
                why: "it is disabled after repeated crashes".into(),
                plugin: first.plugin.index,
            })
        } else {
            let message = serde_json::json!({ "fire": hook, "kw": kwargs(view), "ps": indexes });
            let label = |plugin: usize| {
                live.iter()
                    .find(|p| p.plugin.index == plugin)
                    .map_or_else(String::new, |p| p.label.clone())
            };
            let host = view_calls(view);
            interpreter.exchange(&indexes, hook, &label, |out| {
                let mut answer = converse(out, &message, timeout, &host)?;
                match answer.get_mut("answers").map(Value::take) {
                    Some(Value::Array(answers)) => Ok(answers),
                    Some(_) => Err("sent answers that are not a list".into()),
                    None => Err("sent a line that is neither answers nor a call".into()),
                }
            })
        };
        let mut results = Vec::with_capacity(self.parts.iter().map(|p| p.count).sum());
        for part in &self.parts {
            let plugin = &part.plugin;
            let position = indexes.iter().position(|&i| i == plugin.index);
            let mut mine: Vec<HookResult> = match (&answers, position) {
                (_, None) => {
                    vec![Ok(
                        plugin.fallback(hook, "it is disabled after repeated crashes")
                    )]
                }
                (Ok(answers), Some(k)) => answers
                    .get(k)
                    .and_then(Value::as_array)
                    .map(|mine| mine.iter().take(part.count).map(to_result).collect())
                    .unwrap_or_default(),
                // The plugin blamed answers as a dead worker's; the others gave no answer.
                (Err(failure), Some(_)) if failure.plugin == plugin.index => {
                    vec![Ok(plugin.fallback(hook, &failure.why))]
                }
                (Err(_), Some(_)) => Vec::new(),
            };
            mine.resize_with(part.count, || Ok(None));
            results.extend(mine);
        }
        results
    }

    fn join(&self, next: &dyn ExternalGroup) -> Option<Arc<dyn ExternalGroup>> {
        let next = next.as_any()?.downcast_ref::<HookGroup>()?;
        let mine = &self.parts.first()?.plugin.interpreter;
        let theirs = &next.parts.first()?.plugin.interpreter;
        if !Arc::ptr_eq(mine, theirs) {
            return None;
        }
        let parts = self.parts.iter().chain(&next.parts).cloned().collect();
        Some(Arc::new(HookGroup { parts }))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
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
                    response: rewritten.get_mut("response").map(Value::take),
                }
            }
            Err(why) => crate::middleware::Rewrite {
                payload,
                failures: vec![format!(
                    "Middleware '{}' callback {} raised: {why}",
                    kind.name(),
                    self.label
                )],
                ..crate::middleware::Rewrite::default()
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
