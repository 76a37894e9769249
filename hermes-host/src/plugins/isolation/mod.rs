//! Native plugins in a worker process of their own (`isolation: process`): a plugin that
//! segfaults, aborts, exits, loops or runs out of memory is reported by name and survived.
//!
//! The same `.so` is loaded, unchanged, by a worker: the host's own program started with
//! [`WORKER_ARG`] (the `hermes` binary; an embedder calls [`run_worker_if_asked`] first
//! thing in `main`, or points `HERMES_PLUGIN_WORKER` at a program that does). The worker
//! runs `register(ctx)` and answers with the callbacks it registered; the host puts one
//! proxy per callback in the registry at the position the callback would have had, so
//! order and aggregation are exactly as in-process.
//!
//! Each firing is one [`wire`] frame to the worker and one back. When the worker dies or
//! does not answer within the plugin's `timeout`, the host logs one line naming the plugin,
//! the hook, the callback and the cause (`SIGSEGV (signal 11)`, `exit status 3`, `killed
//! after timeout 1 s`, ...); the firing goes on with the other callbacks, and this one's
//! answer is "no decision" (or a block, for a `fail_closed` plugin on `pre_tool_call`). The
//! worker starts again at the next firing, after a backoff; after [`MAX_CRASHES`] crashes
//! in [`CRASH_WINDOW`] the plugin is disabled for the rest of the run.
//!
//! A worker never outlives the host: it gets `SIGKILL` when its parent dies
//! (`PR_SET_PDEATHSIG`), and it exits at end of file on its socket anyway. Its stdout goes
//! to the host's stderr, so a plugin's prints never reach a protocol.
//!
//! A callback's host capabilities (`pre_gateway_dispatch`'s, for example) cross the
//! boundary too: the worker sends the call to the host, which carries it out with the
//! firing's own capabilities and answers. A plugin's native gateway callbacks (`agent:*`)
//! run in its worker as well, through the same proxies.

pub mod wire;

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RResult, RStr, RString};
use hermes_hooks_abi::core::{
    EventView, Field, FieldValue, HookCallback, HostCalls, HostCalls_TO, Reply,
};

use super::load::{load_library, register};
use super::manifest::Manifest;
use super::supervisor::{self, NoAnswer, Supervisor, death_cause, seconds};
pub use super::supervisor::{CRASH_WINDOW, DEFAULT_TIMEOUT, MAX_CRASHES};
use crate::process::{Group, stderr_stdio};
use crate::registry::{ExternalHook, HookResult};
use wire::{Answer, Body, Kind, Value};

/// The first argument that makes the host's program a plugin worker.
pub const WORKER_ARG: &str = "__hermes-plugin-worker";

/// How long a worker has to load the library and say hello.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// The worker program a host set with [`set_worker_program`].
static WORKER_PROGRAM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Names the program that runs workers in this process, for a host whose own program
/// cannot (a Python interpreter embedding the library: the `hermes-hooks` package names its
/// `hermes-hooks-worker`). `HERMES_PLUGIN_WORKER` still wins. Only the first call counts;
/// returns whether it did.
pub fn set_worker_program(program: PathBuf) -> bool {
    WORKER_PROGRAM.set(program).is_ok()
}

/// The program that runs workers: `HERMES_PLUGIN_WORKER`, else the one named by
/// [`set_worker_program`], else this process's own.
pub fn worker_program() -> Option<PathBuf> {
    std::env::var_os("HERMES_PLUGIN_WORKER")
        .map(PathBuf::from)
        .or_else(|| WORKER_PROGRAM.get().cloned())
        .or_else(|| std::env::current_exe().ok())
}

/// The worker's arguments, when this process was started as a plugin worker.
pub fn worker_args() -> Option<Vec<std::ffi::OsString>> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    args.get(1)
        .is_some_and(|a| a == WORKER_ARG)
        .then(|| args[2..].to_vec())
}

/// Runs the worker and exits when this process was started as one; returns otherwise.
/// Call it first thing in `main` of a host that loads isolated plugins (after installing
/// its log subscriber, so the plugin's logs are written).
pub fn run_worker_if_asked() {
    if let Some(args) = worker_args() {
        std::process::exit(worker_main(&args));
    }
}

// ---------------------------------------------------------------------------------------
// The worker

/// The worker: `<library> <plugin dir> <name> <config json> <memory limit bytes or 0>`,
/// speaking the wire on fd 3. Returns the exit code.
pub fn worker_main(args: &[std::ffi::OsString]) -> i32 {
    let [library, dir, name, config, limit] = args else {
        eprintln!(
            "hermes plugin worker: expected 5 arguments, got {}",
            args.len()
        );
        return 2;
    };
    let limit: u64 = limit.to_string_lossy().parse().unwrap_or(0);
    if limit > 0 {
        let rl = libc::rlimit {
            rlim_cur: limit as libc::rlim_t,
            rlim_max: limit as libc::rlim_t,
        };
        // SAFETY: setrlimit with a valid struct; it only affects this process.
        unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) };
    }
    // SAFETY: fd 3 was set up by the host as this worker's end of the socket pair, and
    // nothing else in this process owns it.
    let mut stream: UnixStream = unsafe { <UnixStream as std::os::fd::FromRawFd>::from_raw_fd(3) };
    let name = name.to_string_lossy().into_owned();
    let manifest = Manifest {
        name: name.clone(),
        library: library.to_string_lossy().into_owned(),
        config: serde_json::from_str(&config.to_string_lossy()).unwrap_or_default(),
        ..Manifest::default()
    };
    let (callbacks, error) = match load_library(Path::new(library), &name) {
        Ok(lib) => {
            let registration = register(lib, &manifest, Path::new(dir));
            (registration.hooks, registration.error)
        }
        Err(why) => (Vec::new(), Some(why)),
    };
    let mut hello = Body::default();
    hello.u32(wire::VERSION).str(error.as_deref().unwrap_or(""));
    hello.u32(callbacks.len() as u32);
    for (hook, callback_name, _) in &callbacks {
        hello.str(hook).str(callback_name);
    }
    if wire::write_frame(&mut stream, Kind::Hello, &hello).is_err() {
        return 3;
    }
    loop {
        let (kind, mut r) = match wire::read_frame(&mut stream) {
            Ok(frame) => frame,
            Err(wire::WireError::Closed) => return 0,
            Err(e) => {
                eprintln!("hermes plugin worker '{name}': {e}");
                return 3;
            }
        };
        let (index, hook, owned) = match (kind, wire::Fire::decode(&mut r)) {
            (Kind::Fire, Ok(fire)) => (fire.index, fire.hook, fire.fields),
            (Kind::Fire, Err(e)) => {
                eprintln!("hermes plugin worker '{name}': {e}");
                return 3;
            }
            (other, _) => {
                eprintln!("hermes plugin worker '{name}': unexpected {other:?} frame");
                return 3;
            }
        };
        let fields: Vec<Field<'_>> = owned.iter().map(|(n, v)| to_field(n, v)).collect();
        let answer = match callbacks.get(index) {
            None => Answer::Error(format!("no callback {index}")),
            Some((_, _, cb)) => {
                let remote = RemoteHost(&stream);
                let host = HostCalls_TO::from_const(&remote, TD_Opaque);
                let view = EventView::new(&hook, &fields, host);
                match cb.call(&view) {
                    RResult::ROk(ROption::RNone) => Answer::None,
                    RResult::ROk(ROption::RSome(reply)) => Answer::Reply(
                        reply.action.into_string(),
                        reply.text.into_string(),
                        reply.json.into_string(),
                    ),
                    RResult::RErr(e) => Answer::Error(e.into_string()),
                }
            }
        };
        let mut body = Body::default();
        body.answer(&answer);
        if wire::write_frame(&mut stream, Kind::Answer, &body).is_err() {
            return 0;
        }
    }
}

/// The host's capabilities, seen from the worker: each call is a [`Kind::Call`] frame to
/// the host, which carries it out with the firing's own capabilities and answers.
struct RemoteHost<'a>(&'a UnixStream);

impl HostCalls for RemoteHost<'_> {
    fn call(&self, capability: RStr<'_>, args_json: RStr<'_>) -> RResult<RString, RString> {
        let mut stream = self.0;
        let mut body = Body::default();
        body.str(capability.as_str()).str(args_json.as_str());
        if let Err(e) = wire::write_frame(&mut stream, Kind::Call, &body) {
            return RResult::RErr(format!("the host is gone: {e}").into());
        }
        match wire::read_frame(&mut stream) {
            Ok((Kind::CallResult, mut r)) => match (r.u8(), r.str()) {
                (Ok(1), Ok(answer)) => RResult::ROk(answer.into()),
                (Ok(_), Ok(error)) => RResult::RErr(error.into()),
                (Err(e), _) | (_, Err(e)) => RResult::RErr(e.to_string().into()),
            },
            Ok((kind, _)) => RResult::RErr(format!("the host answered {kind:?}").into()),
            Err(e) => RResult::RErr(format!("the host is gone: {e}").into()),
        }
    }
}

fn to_field<'a>(name: &'a str, v: &'a Value) -> Field<'a> {
    match v {
        Value::Null => Field::null(name),
        Value::Bool(b) => Field::bool(name, *b),
        Value::Int(i) => Field::int(name, *i),
        Value::Float(f) => Field {
            name: name.into(),
            value: FieldValue::Float(*f),
        },
        Value::Str(s) => Field::str(name, s),
        Value::Json(s) => Field::json(name, s),
    }
}

fn from_field(f: &FieldValue<'_>) -> Value {
    match f {
        FieldValue::Null => Value::Null,
        FieldValue::Bool(b) => Value::Bool(*b),
        FieldValue::Int(i) => Value::Int(*i),
        FieldValue::Float(x) => Value::Float(*x),
        FieldValue::Str(s) => Value::Str(s.as_str().to_string()),
        FieldValue::Json(s) => Value::Json(s.as_str().to_string()),
    }
}

// ---------------------------------------------------------------------------------------
// The host side

/// An isolated plugin: how to start its worker, and the worker under supervision.
pub struct Isolated {
    launch: Launch,
    supervisor: Supervisor<Worker>,
}

/// What starting the worker takes.
struct Launch {
    library: PathBuf,
    dir: PathBuf,
    name: String,
    config_json: String,
    memory_limit: Option<u64>,
}

impl std::fmt::Debug for Isolated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (pid, restarts, last_crash) = self.status();
        f.debug_struct("Isolated")
            .field("name", &self.supervisor.name)
            .field("pid", &pid)
            .field("restarts", &restarts)
            .field("last_crash", &last_crash)
            .finish()
    }
}

struct Worker {
    group: Group,
    stream: UnixStream,
}

impl supervisor::Worker for Worker {
    fn group(&mut self) -> &mut Group {
        &mut self.group
    }
}

/// What a started worker registered.
pub struct Started {
    /// The plugin, to build proxies from.
    pub plugin: Arc<Isolated>,
    /// `(hook, callback name)` in registration order.
    pub callbacks: Vec<(String, String)>,
    /// `register`'s error, when it failed.
    pub error: Option<String>,
    /// The first worker's pid.
    pub pid: u32,
}

impl Isolated {
    /// Starts the worker of the plugin in `dir` described by `manifest` (its effective
    /// manifest, with settings merged) and returns what it registered.
    ///
    /// # Errors
    ///
    /// The worker program is missing, cannot start, or does not say hello properly; the
    /// message names the library.
    pub fn start(manifest: &Manifest, dir: &Path) -> Result<Started, String> {
        let launch = Launch {
            library: dir.join(&manifest.library),
            dir: dir.to_path_buf(),
            name: manifest.name.clone(),
            config_json: manifest.config.to_string(),
            memory_limit: manifest.memory_limit,
        };
        let (worker, hello) = launch.spawn()?;
        let pid = worker.group.id();
        let timeout = manifest
            .timeout
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64);
        let supervisor = Supervisor::new(
            &manifest.name,
            timeout,
            manifest.memory_limit,
            manifest.fail_closed,
            Some(worker),
        );
        Ok(Started {
            plugin: Arc::new(Isolated { launch, supervisor }),
            callbacks: hello.callbacks,
            error: hello.error,
            pid,
        })
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.supervisor.name
    }

    /// The running worker's pid, how often it was restarted, and the last crash's cause.
    pub fn status(&self) -> (Option<u32>, u64, Option<String>) {
        self.supervisor.status()
    }

    /// Fires callback `index` of the worker; every failure is handled here.
    fn call(&self, index: usize, label: &str, view: &EventView<'_>) -> HookResult {
        let hook = view.hook.as_str();
        let timeout = self.supervisor.timeout;
        let spawn = || self.launch.spawn().map(|(worker, _)| worker);
        let answer = self.supervisor.exchange(hook, label, spawn, |worker| {
            exchange(worker, index, view, timeout)
        });
        match answer {
            Ok(Answer::None) => Ok(None),
            Ok(Answer::Reply(action, text, json)) => {
                let mut reply = Reply::new(&action, text);
                reply.json = json.into();
                Ok(Some(reply))
            }
            Ok(Answer::Error(e)) => Err(e),
            Err(NoAnswer(why)) => Ok(self.supervisor.fallback(hook, &why)),
        }
    }
}

impl Launch {
    fn spawn(&self) -> Result<(Worker, wire::Hello), String> {
        let program = worker_program()
            .ok_or("cannot find the program to run plugin workers; set HERMES_PLUGIN_WORKER")?;
        let mut cmd = Command::new(&program);
        cmd.arg(WORKER_ARG)
            .arg(&self.library)
            .arg(&self.dir)
            .arg(&self.name)
            .arg(&self.config_json)
            .arg(self.memory_limit.unwrap_or(0).to_string())
            .stdin(Stdio::null())
            .stdout(stderr_stdio())
            .stderr(Stdio::inherit());
        let (group, stream) = supervisor::spawn_on_socket(&mut cmd, &program)?;
        let mut worker = Worker { group, stream };
        let _ = worker.stream.set_read_timeout(Some(START_TIMEOUT));
        let hello = match wire::read_frame(&mut worker.stream) {
            Ok((Kind::Hello, mut r)) => wire::Hello::decode(&mut r).map_err(|e| e.to_string()),
            Ok((kind, _)) => Err(format!("said {kind:?} instead of hello")),
            Err(e) => Err(e.to_string()),
        };
        match hello {
            Ok(hello) => Ok((worker, hello)),
            Err(why) => {
                let cause = death_cause(&mut worker.group, self.memory_limit);
                Err(format!(
                    "{}: the plugin worker failed while loading it ({why}; {cause})",
                    self.library.display()
                ))
            }
        }
    }
}

impl super::SupervisedWorker for Isolated {
    fn status(&self) -> (Option<u32>, u64, Option<String>) {
        self.supervisor.status()
    }

    fn restart(&self) {
        self.supervisor.restart();
    }
}

/// One firing of callback `index`: the fire frame, the host calls the callback makes, and
/// its answer. An error is a crash (see [`Supervisor::exchange`]).
fn exchange(
    worker: &mut Worker,
    index: usize,
    view: &EventView<'_>,
    timeout: Duration,
) -> Result<Answer, String> {
    let mut body = Body::default();
    body.u32(index as u32).str(view.hook.as_str());
    body.u32(view.fields.len() as u32);
    for f in view.fields.iter() {
        body.str(f.name.as_str()).value(&from_field(&f.value));
    }
    let _ = worker.stream.set_read_timeout(Some(timeout));
    wire::write_frame(&mut worker.stream, Kind::Fire, &body)
        .map_err(|e| format!("cannot write to its worker: {e}"))?;
    loop {
        match wire::read_frame(&mut worker.stream) {
            Ok((Kind::Answer, mut r)) => {
                return r
                    .answer()
                    .and_then(|a| r.end().map(|()| a))
                    .map_err(|e| e.to_string());
            }
            Ok((Kind::Call, mut r)) => {
                // A capability the callback asked for, with this firing's host.
                let (capability, args) = match (r.str(), r.str()) {
                    (Ok(c), Ok(a)) => (c, a),
                    (Err(e), _) | (_, Err(e)) => return Err(e.to_string()),
                };
                let result = view
                    .host
                    .call(capability.as_str().into(), args.as_str().into());
                let mut reply = Body::default();
                match result {
                    RResult::ROk(answer) => reply.u8(1).str(answer.as_str()),
                    RResult::RErr(error) => reply.u8(0).str(error.as_str()),
                };
                wire::write_frame(&mut worker.stream, Kind::CallResult, &reply)
                    .map_err(|e| format!("cannot write to its worker: {e}"))?;
            }
            Ok((kind, _)) => return Err(format!("sent a {kind:?} frame instead of an answer")),
            Err(wire::WireError::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Err(format!("killed after timeout {}", seconds(timeout)));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// One callback of an isolated plugin, in the registry.
pub struct Proxy {
    /// The plugin.
    pub plugin: Arc<Isolated>,
    /// The callback's position among what the worker registered.
    pub index: usize,
    /// `plugin::callback`.
    pub label: String,
}

/// A proxy is also a native callback, for the places that take one (native gateway
/// handlers): the same call, in the ABI's shape.
impl HookCallback for Proxy {
    fn call(&self, event: &EventView<'_>) -> RResult<ROption<Reply>, RString> {
        match self.plugin.call(self.index, &self.label, event) {
            Ok(Some(reply)) => RResult::ROk(ROption::RSome(reply)),
            Ok(None) => RResult::ROk(ROption::RNone),
            Err(e) => RResult::RErr(e.into()),
        }
    }
}

impl ExternalHook for Proxy {
    fn matches(&self, _event: &EventView<'_>) -> bool {
        true
    }

    fn run(&self, event: &EventView<'_>) -> HookResult {
        self.plugin.call(self.index, &self.label, event)
    }
}
