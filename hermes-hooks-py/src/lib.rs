//! `hermes_hooks._native`: the compiled half of the `hermes-hooks` Python package.
//!
//! It puts the library's [`hermes_host::Hooks`] facade in a Python process, for two users:
//! Hermes Agent, whose plugin manager calls one [`Callback`] per native callback (the
//! package's `register(ctx)`, in `python/hermes_hooks/_hermes.py`, hands them to
//! `ctx.register_hook`), and any Python agent, which fires hooks through [`Hooks`] and gets
//! the combined answer. Answers come back in the shapes Hermes's own plugins return, so a
//! host treats them as it treats a Python plugin's.
//!
//! Nothing here may end the host's turn: Python calls these objects with the GIL held and
//! lets only `Exception` subclasses through its `except Exception`, while a Rust panic would
//! surface as pyo3's `PanicException`, a `BaseException`. Every entry point therefore runs
//! behind [`guard`], which turns a panic into a [`HookError`], and every native call runs
//! with the GIL released, so that other Python threads (Hermes fires `post_tool_call` from
//! several at once) go on meanwhile.

mod answer;
mod convert;
mod log;
mod middleware;
mod payload;

use std::ffi::{CStr, CString};
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;

use hermes_hooks_abi::core::no_host_calls;
use hermes_host::home::Home;
use hermes_host::registry::{Callback as EntryCallback, Source};
use hermes_host::{ConsentPolicy, LoadOptions, isolation};
use pyo3::create_exception;
use pyo3::prelude::*;
use pyo3::types::{PyCFunction, PyDict, PyList};

create_exception!(
    hermes_hooks,
    HookError,
    pyo3::exceptions::PyRuntimeError,
    "A hermes-hooks plugin or hook failed: its message names the plugin, the hook and what to do."
);

/// Runs `f`, turning a panic into a [`HookError`] that names `what` (a `PanicException`
/// would get past the host's `except Exception`).
fn guard<T>(what: impl FnOnce() -> String, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".into());
            Err(HookError::new_err(format!("{}: panicked: {text}", what())))
        }
    }
}

/// This project's hooks, loaded from a Hermes home: native and Python plugins, shell hooks
/// and (when asked) gateway hooks, as `hermes` loads them.
#[pyclass(frozen, module = "hermes_hooks._native")]
struct Hooks {
    inner: Arc<hermes_host::Hooks>,
    home: PathBuf,
}

#[pymethods]
impl Hooks {
    #[new]
    #[pyo3(signature = (home=None, *, native_only=false, shell_hooks=true, accept_shell_hooks=false, gateway=false))]
    fn new(
        py: Python<'_>,
        home: Option<PathBuf>,
        native_only: bool,
        shell_hooks: bool,
        accept_shell_hooks: bool,
        gateway: bool,
    ) -> PyResult<Hooks> {
        let home = home.map_or_else(Home::from_env, Home::at);
        let root = home.root().to_path_buf();
        let what = || format!("loading the hooks of {}", root.display());
        let loaded = py.detach(|| {
            guard(what, || {
                let options = LoadOptions {
                    native_only,
                    shell_hooks: shell_hooks && !native_only,
                    // A Python host has no terminal to ask on: allowlisted hooks only,
                    // unless it accepts the rest for this process (as `--accept-hooks`).
                    consent: if accept_shell_hooks {
                        ConsentPolicy::AcceptForThisRun
                    } else {
                        ConsentPolicy::AllowlistedOnly
                    },
                    gateway_log: gateway.then(log::gateway_log),
                    ..LoadOptions::default()
                };
                hermes_host::Hooks::load(&home, &options)
                    .map_err(|e| HookError::new_err(e.to_string()))
            })
        })?;
        Ok(Hooks {
            inner: Arc::new(loaded),
            home: root,
        })
    }

    /// The Hermes home the hooks came from.
    #[getter]
    fn home(&self) -> PathBuf {
        self.home.clone()
    }

    /// Fires `hook` at every callback and returns the combined answer (see the module's
    /// docstring in `hermes_hooks`).
    #[pyo3(signature = (hook, /, **kwargs))]
    fn fire(
        &self,
        py: Python<'_>,
        hook: &str,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        fire(
            py,
            &self.inner,
            (hook, payload::hook_index(hook)),
            None,
            kwargs,
        )
    }

    /// Queues gateway event `event` for the gateway hooks subscribed to it; returns at once.
    fn emit(&self, event: &str, context: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let context = match context {
            Some(context) => {
                let mut text = String::new();
                payload::write_json(context, &mut text, 0)?;
                serde_json::from_str(&text).map_err(|e| HookError::new_err(e.to_string()))?
            }
            None => serde_json::Value::Object(Default::default()),
        };
        guard(
            || format!("emitting gateway event '{event}'"),
            || {
                self.inner.emit(event, context);
                Ok(())
            },
        )
    }

    /// `(hook, position, label, plugin)` for every callback, in firing order; `plugin` is
    /// `None` for a shell hook. With `plugin`, that plugin's callbacks only.
    #[pyo3(signature = (plugin=None))]
    fn callbacks<'py>(
        &self,
        py: Python<'py>,
        plugin: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let registry = self.inner.registry();
        for hook in registry.hook_names() {
            for (position, entry) in registry.entries(hook).iter().enumerate() {
                if matches!(entry.callback, EntryCallback::Member(_, k) if k > 0) {
                    continue;
                }
                let owner = match &entry.source {
                    Source::Plugin(name) | Source::Python(name) => Some(name.to_string()),
                    Source::Shell | Source::Host => None,
                };
                if plugin.is_some_and(|p| owner.as_deref() != Some(p)) {
                    continue;
                }
                list.append((hook, position, entry.label.as_str(), owner))?;
            }
        }
        Ok(list)
    }

    /// The callable that fires only the callback at `position` of `hook`'s list.
    fn callback(&self, hook: &str, position: usize) -> PyResult<Callback> {
        let entry = self
            .inner
            .registry()
            .entries(hook)
            .get(position)
            .ok_or_else(|| {
                HookError::new_err(format!(
                    "'{hook}' has no callback at position {position}; ask callbacks() for the list"
                ))
            })?;
        Ok(Callback {
            hooks: self.inner.clone(),
            hook: hook.to_string(),
            index: payload::hook_index(hook),
            position,
            label: entry.label.clone(),
        })
    }

    /// `{name, toolset, schema, description, plugin}` of every tool the plugins offer (of
    /// `plugin`'s only, when given).
    #[pyo3(signature = (plugin=None))]
    fn tools<'py>(&self, py: Python<'py>, plugin: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for spec in self.inner.tools().specs() {
            if plugin.is_some_and(|p| p != spec.source) {
                continue;
            }
            let d = PyDict::new(py);
            d.set_item("name", &spec.name)?;
            d.set_item("toolset", &spec.toolset)?;
            d.set_item("schema", convert::to_python(py, &spec.schema)?)?;
            d.set_item("description", &spec.description)?;
            d.set_item("plugin", &spec.source)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Runs plugin tool `name` with `args` and returns its result text (a failure is the
    /// JSON `{"error": ...}` the model would see). Keyword arguments are the call's ids
    /// (`task_id`, `session_id`, `tool_call_id`, ...); `dispatch(name, args) -> str` runs
    /// the tools the handler asks for in turn (Hermes's `ctx.dispatch_tool`), else such a
    /// request answers an error. The GIL is released while the tool runs.
    #[pyo3(signature = (name, args=None, *, dispatch=None, **context))]
    fn call_tool(
        &self,
        py: Python<'_>,
        name: &str,
        args: Option<&Bound<'_, PyAny>>,
        dispatch: Option<Py<PyAny>>,
        context: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<String> {
        let args = json_of(args)?;
        let context = match json_of(context.map(|c| c.as_any()))? {
            serde_json::Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let dispatch = python_dispatch(dispatch);
        let result = py.detach(|| {
            guard(
                || format!("plugin tool '{name}'"),
                || {
                    Ok(self
                        .inner
                        .tools()
                        .dispatch(name, &args, &context, &dispatch))
                },
            )
        })?;
        result.ok_or_else(|| {
            HookError::new_err(format!(
                "no plugin offers a tool named '{name}'; tools() lists those that do"
            ))
        })
    }

    /// `{name, description, args_hint, plugin}` of every slash command the plugins add (of
    /// `plugin`'s only, when given).
    #[pyo3(signature = (plugin=None))]
    fn commands<'py>(&self, py: Python<'py>, plugin: Option<&str>) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for spec in self.inner.commands().specs() {
            if plugin.is_some_and(|p| p != spec.source) {
                continue;
            }
            let d = PyDict::new(py);
            d.set_item("name", &spec.name)?;
            d.set_item("description", &spec.description)?;
            d.set_item("args_hint", &spec.args_hint)?;
            d.set_item("plugin", &spec.source)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// Runs plugin command `/name raw_args` and returns its answer (`None`: it answered
    /// nothing); `dispatch` as for [`call_tool`](Self::call_tool). A failing command raises
    /// [`HookError`] with its message.
    #[pyo3(signature = (name, raw_args="", *, dispatch=None))]
    fn run_command(
        &self,
        py: Python<'_>,
        name: &str,
        raw_args: &str,
        dispatch: Option<Py<PyAny>>,
    ) -> PyResult<Option<String>> {
        let name = hermes_host::commands::normalize(name);
        let dispatch = python_dispatch(dispatch);
        let ran = py.detach(|| {
            guard(
                || format!("plugin command '/{name}'"),
                || Ok(self.inner.commands().run(&name, raw_args, &dispatch)),
            )
        })?;
        match ran {
            Some(Ok(answer)) => Ok(answer),
            Some(Err(message)) => Err(HookError::new_err(format!("/{name}: {message}"))),
            None => Err(HookError::new_err(format!(
                "no plugin adds a command named '/{name}'; commands() lists those that do"
            ))),
        }
    }

    /// `{kind, plugin}` of every middleware the plugins registered (of `plugin`'s only,
    /// when given), in registry order.
    #[pyo3(signature = (plugin=None))]
    fn middleware<'py>(
        &self,
        py: Python<'py>,
        plugin: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        for (kind, entry) in self.inner.middleware().entries() {
            if plugin.is_some_and(|p| p != entry.source()) {
                continue;
            }
            let d = PyDict::new(py);
            d.set_item("kind", kind.name())?;
            d.set_item("plugin", entry.source())?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// `plugin`'s middleware of `kind` as one callable, which takes the keyword arguments
    /// Hermes Agent's `hermes_cli.middleware` passes and answers as a Python plugin's
    /// middleware would (`{"args": ...}` / `{"request": ...}`, or a wrapper's result).
    fn middleware_callback(
        &self,
        kind: &str,
        plugin: &str,
    ) -> PyResult<middleware::MiddlewareCallback> {
        let found = hermes_host::middleware::Kind::parse(kind).and_then(|k| {
            self.inner
                .middleware()
                .entries()
                .find(|(each, m)| *each == k && m.source() == plugin)
                .map(|(_, m)| (k, m.clone()))
        });
        let Some((kind, middleware)) = found else {
            return Err(HookError::new_err(format!(
                "plugin '{plugin}' registered no '{kind}' middleware; middleware() lists what there is"
            )));
        };
        Ok(middleware::MiddlewareCallback {
            kind,
            middleware,
            name: format!("{plugin}::{}", kind.name()),
        })
    }

    /// What loaded and every problem found: `{"plugins": [...], "problems": [...]}`.
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        answer::report(py, self.inner.report())
    }

    fn __repr__(&self) -> String {
        let plugins = self
            .inner
            .report()
            .plugins
            .iter()
            .filter(|p| p.loaded())
            .count();
        format!(
            "<hermes_hooks.Hooks of {} ({plugins} plugin(s) loaded)>",
            self.home.display()
        )
    }
}

/// One native callback, callable as a Hermes plugin's hook callback: `callback(**kwargs)`.
#[pyclass(frozen, module = "hermes_hooks._native")]
struct Callback {
    hooks: Arc<hermes_host::Hooks>,
    hook: String,
    /// The hook's position in `HOOKS`, looked up once.
    index: Option<usize>,
    position: usize,
    label: String,
}

#[pymethods]
impl Callback {
    #[pyo3(signature = (**kwargs))]
    fn __call__(&self, py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        fire(
            py,
            &self.hooks,
            (&self.hook, self.index),
            Some(self.position),
            kwargs,
        )
    }

    /// The callback as a built-in function named `<plugin>::<callback>`, which is what the
    /// package registers with Hermes: a call hands it the caller's keyword arguments
    /// as they are, where calling this object makes pyo3 copy them into a new dict first
    /// (a quarter of what a native no-op cost Hermes).
    fn function<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCFunction>> {
        let (hooks, hook) = (self.hooks.clone(), self.hook.clone());
        let (index, position) = (self.index, self.position);
        // A function's name must outlive it; one small string per registered callback.
        let name = CString::new(self.label.replace('\0', "")).unwrap_or_default();
        let name: &'static CStr = Box::leak(name.into_boxed_c_str());
        PyCFunction::new_closure(py, Some(name), None, move |args, kwargs| {
            if !args.is_empty() {
                return Err(pyo3::exceptions::PyTypeError::new_err(
                    "a hook callback takes keyword arguments only",
                ));
            }
            fire(args.py(), &hooks, (&hook, index), Some(position), kwargs)
        })
    }

    /// `<plugin>::<callback>`: the name Hermes prints when the callback fails.
    #[getter]
    fn __name__(&self) -> &str {
        &self.label
    }

    /// The hook it is registered for.
    #[getter]
    fn hook(&self) -> &str {
        &self.hook
    }

    fn __repr__(&self) -> String {
        format!(
            "<hermes_hooks native callback {} for '{}'>",
            self.label, self.hook
        )
    }
}

/// Fires `hook` (at `index` of `HOOKS`; at `position` of its list only, when given) with
/// `kwargs`, the GIL released around the native work, and turns the outcome into what a
/// Hermes plugin would return.
fn fire(
    py: Python<'_>,
    hooks: &hermes_host::Hooks,
    (hook, index): (&str, Option<usize>),
    position: Option<usize>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let who = || match position {
        Some(p) => hooks.registry().entries(hook).get(p).map_or_else(
            || format!("hook '{hook}'"),
            |e| format!("{} in hook '{hook}'", e.label),
        ),
        None => format!("hook '{hook}'"),
    };
    // Read while the GIL is held; the fields borrow from the payload's Python strings,
    // which it keeps alive.
    let payload = payload::Payload::new(index, kwargs)?;
    let fields = payload.fields()?;
    let outcome = py.detach(|| {
        guard(who, || {
            let registry = hooks.registry();
            let outcome = match position {
                Some(p) => registry.fire_one(hook, p, &fields, no_host_calls()),
                None => Ok(registry.fire(hook, &fields)),
            };
            outcome.map_err(|message| HookError::new_err(format!("{}: {message}", who())))
        })
    })?;
    answer::to_python(py, outcome, kwargs)
}

/// `value` as JSON (`None`: `{}`).
fn json_of(value: Option<&Bound<'_, PyAny>>) -> PyResult<serde_json::Value> {
    let Some(value) = value else {
        return Ok(serde_json::Value::Object(Default::default()));
    };
    let mut text = String::new();
    payload::write_json(value, &mut text, 0)?;
    serde_json::from_str(&text).map_err(|e| HookError::new_err(e.to_string()))
}

/// How a plugin's tool or command runs another tool: through the Python callable the host
/// gave (called with the GIL taken again), else refused with the error result that says so.
fn python_dispatch(
    dispatch: Option<Py<PyAny>>,
) -> impl Fn(&str, &serde_json::Value) -> String + Send + Sync {
    move |tool: &str, args: &serde_json::Value| match &dispatch {
        None => hermes_host::tools::no_dispatch(tool, args),
        Some(dispatch) => Python::attach(|py| {
            let called = convert::to_python(py, args)
                .and_then(|args| dispatch.call1(py, (tool, args)))
                .and_then(|result| result.extract::<String>(py));
            called.unwrap_or_else(|e| {
                serde_json::json!({ "error": format!("dispatching tool '{tool}' failed: {e}") })
                    .to_string()
            })
        }),
    }
}

/// Runs an isolated plugin's worker (`isolation: process`) in this process and returns its
/// exit code: what the package's `hermes-hooks-worker` program does. `args` are the
/// arguments after the worker flag.
#[pyfunction]
fn worker_main(py: Python<'_>, args: Vec<String>) -> i32 {
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    py.detach(|| isolation::worker_main(&args))
}

/// Names the program that runs `isolation: process` plugins for this process (the
/// package's `hermes-hooks-worker`); `HERMES_PLUGIN_WORKER` still wins.
#[pyfunction]
fn set_worker_program(program: PathBuf) -> bool {
    isolation::set_worker_program(program)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    log::install();
    m.add_class::<Hooks>()?;
    m.add_class::<Callback>()?;
    m.add_class::<middleware::MiddlewareCallback>()?;
    m.add("HookError", m.py().get_type::<HookError>())?;
    m.add_function(wrap_pyfunction!(worker_main, m)?)?;
    m.add_function(wrap_pyfunction!(set_worker_program, m)?)?;
    m.add("WORKER_ARG", isolation::WORKER_ARG)?;
    m.add("ABI_VERSION", hermes_hooks_abi::sdk::ABI_VERSION)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
