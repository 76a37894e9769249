//! Request middleware: what plugins put between the agent and its model and tools, as
//! Hermes's `ctx.register_middleware` defines it (`hermes_cli/middleware.py`).
//!
//! Hooks observe; middleware changes what happens. Four kinds:
//!
//! | kind | runs | a callback gets | it answers |
//! |---|---|---|---|
//! | `llm_request` | before each model request | `request`, `original_request` | `{"request": {...}}` to replace it |
//! | `tool_request` | before each tool call, before `pre_tool_call` | `tool_name`, `args`, `original_args` | `{"args": {...}}` to replace them |
//! | `llm_execution` | around the model request | `request`, `next_call` | the response (from `next_call(request)`, or its own) |
//! | `tool_execution` | around the tool's run | `tool_name`, `args`, `next_call` | the result (from `next_call(args)`, or its own) |
//!
//! Each callback also gets the call's correlation context (`task_id`, `session_id`,
//! `turn_id`, `api_request_id`, ...) and `telemetry_schema_version` /
//! `middleware_schema_version`. Request rewrites chain in registry order, each seeing the
//! current payload and the original; every answer that replaced it leaves a trace entry
//! (`source`, `reason`, `name` when given, else `{"source": "plugin"}`), which
//! `pre_tool_call`, `post_tool_call` and `pre_api_request` carry as `middleware_trace`.
//! Execution wrappers nest in registry order, the first outermost: each may call
//! `next_call` at most once (a second call is an error, since it would run the tool or the
//! request again), change what it passes on, or answer without calling it (a cache, a
//! refusal). A callback that fails is skipped with the reference's warning, `Middleware
//! '<kind>' callback <name> raised: <error>`: its request rewrite is not applied, and a
//! failed wrapper is passed over (its `next_call`'s result, when it had one, stands).
//!
//! Beyond the reference, an `llm_request` callback may answer the request itself (a
//! cache, a canned reply, a refusal): the model is then not called, and neither are later
//! rewrites nor `llm_execution` wrappers (a Python callback returns `{"response": ...}`, a
//! native one `MiddlewareOutcome::Respond`).
//!
//! The chain holds any [`Middleware`]: a Python plugin's worker answers for all of that
//! plugin's callbacks of a kind at once (see `plugins::python`), and an embedder
//! may add its own with [`MiddlewareChain::push`].

use std::sync::Arc;

use serde_json::{Map, Value, json};

/// The version a callback is told in `telemetry_schema_version`, as every hook is (the
/// shell hooks' payloads carry the same).
pub const OBSERVER_SCHEMA_VERSION: &str = "hermes.observer.v1";

/// The version a callback is told in `middleware_schema_version`.
pub const MIDDLEWARE_SCHEMA_VERSION: &str = "hermes.middleware.v1";

/// A middleware kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Rewrites a model request before it is sent.
    LlmRequest,
    /// Rewrites a tool call's arguments before hooks, approvals and the tool see them.
    ToolRequest,
    /// Wraps the model request.
    LlmExecution,
    /// Wraps the tool's run.
    ToolExecution,
}

impl Kind {
    /// Every kind, in the reference's order.
    pub const ALL: [Kind; 4] = [
        Kind::ToolRequest,
        Kind::ToolExecution,
        Kind::LlmRequest,
        Kind::LlmExecution,
    ];

    /// The reference's name: `llm_request`, `tool_request`, `llm_execution`, `tool_execution`.
    ///
    /// ```
    /// use hermes_host::middleware::Kind;
    /// assert_eq!(Kind::LlmRequest.name(), "llm_request");
    /// assert_eq!(Kind::parse("tool_execution"), Some(Kind::ToolExecution));
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Kind::LlmRequest => "llm_request",
            Kind::ToolRequest => "tool_request",
            Kind::LlmExecution => "llm_execution",
            Kind::ToolExecution => "tool_execution",
        }
    }

    /// The kind called `name` (the reference's older `api_request` / `api_execution`
    /// included).
    pub fn parse(name: &str) -> Option<Kind> {
        match name {
            "llm_request" | "api_request" => Some(Kind::LlmRequest),
            "tool_request" => Some(Kind::ToolRequest),
            "llm_execution" | "api_execution" => Some(Kind::LlmExecution),
            "tool_execution" => Some(Kind::ToolExecution),
            _ => None,
        }
    }

    /// The payload's keyword: `request` for the model, `args` for tools.
    pub fn payload_key(self) -> &'static str {
        match self {
            Kind::LlmRequest | Kind::LlmExecution => "request",
            Kind::ToolRequest | Kind::ToolExecution => "args",
        }
    }

    /// Whether it wraps the execution (rather than rewriting the request).
    pub fn wraps(self) -> bool {
        matches!(self, Kind::LlmExecution | Kind::ToolExecution)
    }
}

/// What one middleware's request rewrites did: the payload it leaves, and one trace entry
/// per callback whose answer replaced it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rewrite {
    /// The payload after this middleware's callbacks.
    pub payload: Value,
    /// `{"source", "reason", "name"}` per replacement.
    pub trace: Vec<Value>,
    /// Callbacks that failed, with the reference's warning text (already logged or not:
    /// the chain logs them).
    pub failures: Vec<String>,
    /// An `llm_request` middleware's own response: the request is answered without the
    /// model (and without `llm_execution` middleware), and later rewrites do not run.
    pub response: Option<Value>,
}

/// The rest of an execution chain, handed to a wrapper: call it with the payload to pass
/// on; it answers the downstream result.
pub type Next<'a> = dyn FnMut(Value) -> Result<Value, String> + 'a;

/// One contributor of middleware: a plugin (all its callbacks of one kind, in their
/// registration order) or an embedder's own.
pub trait Middleware: Send + Sync {
    /// Who it is, for warnings and traces: the plugin's name.
    fn source(&self) -> &str;

    /// The request rewrites of kind `kind`: `payload` is the current one, `original` what
    /// the chain started with, `context` the call's correlation fields.
    fn rewrite(
        &self,
        kind: Kind,
        payload: Value,
        original: &Value,
        context: &Map<String, Value>,
    ) -> Rewrite;

    /// The execution wrappers of kind `kind` around `next`.
    ///
    /// # Errors
    ///
    /// What `next` failed with, passed up, or this middleware's own failure when it
    /// cannot answer at all.
    fn execute(
        &self,
        kind: Kind,
        payload: Value,
        original: &Value,
        context: &Map<String, Value>,
        next: &mut Next<'_>,
    ) -> Result<Value, String>;
}

/// The result of the request rewrites of one call.
#[derive(Clone, Debug, PartialEq)]
pub struct Rewritten {
    /// The payload to use.
    pub payload: Value,
    /// The payload before any middleware.
    pub original: Value,
    /// One entry per replacement, in order: what hooks get as `middleware_trace`.
    pub trace: Vec<Value>,
    /// A middleware's own response to an `llm_request`: the model is not called.
    pub response: Option<Value>,
}

impl Rewritten {
    /// The trace as JSON text, for a payload field.
    pub fn trace_json(&self) -> String {
        Value::Array(self.trace.clone()).to_string()
    }
}

/// Every middleware of one load, per kind in registry order.
#[derive(Clone, Default)]
pub struct MiddlewareChain {
    entries: Vec<(Kind, Arc<dyn Middleware>)>,
}

impl std::fmt::Debug for MiddlewareChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|(k, m)| (k.name(), m.source())))
            .finish()
    }
}

impl MiddlewareChain {
    /// An empty chain.
    pub fn new() -> MiddlewareChain {
        MiddlewareChain::default()
    }

    /// Adds `middleware` for `kind`, after those already there.
    pub fn push(&mut self, kind: Kind, middleware: Arc<dyn Middleware>) {
        self.entries.push((kind, middleware));
    }

    /// Whether any middleware of `kind` is registered: without one a call site does no
    /// work at all.
    pub fn has(&self, kind: Kind) -> bool {
        self.entries.iter().any(|(k, _)| *k == kind)
    }

    /// The sources of `kind`'s middleware, in order.
    pub fn sources(&self, kind: Kind) -> Vec<&str> {
        self.of(kind).map(|m| m.source()).collect()
    }

    /// Every middleware with its kind, in registry order: what a host that runs its own
    /// chain (Hermes Agent, through the Python package) registers one by one.
    ///
    /// ```
    /// let chain = hermes_host::middleware::MiddlewareChain::new();
    /// assert_eq!(chain.entries().count(), 0);
    /// ```
    pub fn entries(&self) -> impl Iterator<Item = (Kind, &Arc<dyn Middleware>)> {
        self.entries.iter().map(|(k, m)| (*k, m))
    }

    fn of(&self, kind: Kind) -> impl Iterator<Item = &Arc<dyn Middleware>> {
        self.entries
            .iter()
            .filter(move |(k, _)| *k == kind)
            .map(|(_, m)| m)
    }

    /// Runs the request rewrites of `kind` on `payload`, in registry order, each seeing the
    /// current payload and the original.
    ///
    /// ```
    /// use hermes_host::middleware::{Kind, MiddlewareChain};
    /// let chain = MiddlewareChain::new();
    /// let out = chain.rewrite(Kind::ToolRequest, serde_json::json!({"command": "ls"}), &Default::default());
    /// assert_eq!(out.payload, out.original);
    /// assert!(out.trace.is_empty());
    /// ```
    pub fn rewrite(&self, kind: Kind, payload: Value, context: &Map<String, Value>) -> Rewritten {
        let original = payload.clone();
        let mut current = payload;
        let mut trace = Vec::new();
        let mut response = None;
        for middleware in self.of(kind) {
            let step = middleware.rewrite(kind, current.clone(), &original, context);
            for failure in &step.failures {
                tracing::warn!("{failure}");
            }
            if let Some(answer) = step.response.filter(|_| kind == Kind::LlmRequest) {
                trace.extend(step.trace);
                response = Some(answer);
                break;
            }
            if !step.trace.is_empty() && step.payload.is_object() {
                current = step.payload;
                trace.extend(step.trace);
            }
        }
        Rewritten {
            payload: current,
            original,
            trace,
            response,
        }
    }

    /// Runs `terminal` (the model request, or the tool) inside the execution wrappers of
    /// `kind`, the first registered outermost.
    ///
    /// # Errors
    ///
    /// What `terminal` or a wrapper failed with.
    ///
    /// ```
    /// use hermes_host::middleware::{Kind, MiddlewareChain};
    /// let chain = MiddlewareChain::new();
    /// let out = chain.execute(Kind::ToolExecution, serde_json::json!({"n": 1}), &serde_json::json!({"n": 1}), &Default::default(), &mut |args| Ok(args));
    /// assert_eq!(out.unwrap(), serde_json::json!({"n": 1}));
    /// ```
    pub fn execute(
        &self,
        kind: Kind,
        payload: Value,
        original: &Value,
        context: &Map<String, Value>,
        terminal: &mut Next<'_>,
    ) -> Result<Value, String> {
        let wrappers: Vec<&Arc<dyn Middleware>> = self.of(kind).collect();
        run_from(&wrappers, kind, payload, original, context, terminal)
    }
}

fn run_from(
    wrappers: &[&Arc<dyn Middleware>],
    kind: Kind,
    payload: Value,
    original: &Value,
    context: &Map<String, Value>,
    terminal: &mut Next<'_>,
) -> Result<Value, String> {
    let Some((first, rest)) = wrappers.split_first() else {
        return terminal(payload);
    };
    let mut called = false;
    let mut next = |passed: Value| -> Result<Value, String> {
        if called {
            return Err(format!(
                "Middleware '{}' callback of {} called next_call() more than once; downstream execution is single-use",
                kind.name(),
                first.source()
            ));
        }
        called = true;
        run_from(rest, kind, passed, original, context, terminal)
    };
    first.execute(kind, payload, original, context, &mut next)
}

/// The keyword arguments a middleware callback gets: the context, the versions, the
/// payload under its name and the original beside it.
///
/// ```
/// use hermes_host::middleware::{Kind, callback_kwargs};
/// let kw = callback_kwargs(Kind::ToolRequest, &serde_json::json!({"a": 1}), &serde_json::json!({"a": 0}), &Default::default());
/// assert_eq!(kw["args"]["a"], 1);
/// assert_eq!(kw["original_args"]["a"], 0);
/// assert_eq!(kw["middleware_schema_version"], "hermes.middleware.v1");
/// ```
pub fn callback_kwargs(
    kind: Kind,
    payload: &Value,
    original: &Value,
    context: &Map<String, Value>,
) -> Value {
    let mut kw = context.clone();
    let key = kind.payload_key();
    kw.insert(key.into(), payload.clone());
    kw.insert(format!("original_{key}"), original.clone());
    kw.entry("telemetry_schema_version")
        .or_insert_with(|| json!(OBSERVER_SCHEMA_VERSION));
    kw.entry("middleware_schema_version")
        .or_insert_with(|| json!(MIDDLEWARE_SCHEMA_VERSION));
    Value::Object(kw)
}

/// A trace entry for an answer that replaced the payload, as the reference makes it.
///
/// ```
/// let entry = hermes_host::middleware::trace_entry(&serde_json::json!({"args": {}, "reason": "pruned"}));
/// assert_eq!(entry, serde_json::json!({"reason": "pruned"}));
/// let entry = hermes_host::middleware::trace_entry(&serde_json::json!({"args": {}}));
/// assert_eq!(entry, serde_json::json!({"source": "plugin"}));
/// ```
pub fn trace_entry(answer: &Value) -> Value {
    let mut entry = Map::new();
    for key in ["source", "reason", "name"] {
        if let Some(text) = answer[key].as_str().filter(|t| !t.is_empty()) {
            entry.insert(key.into(), json!(text));
        }
    }
    if entry.is_empty() {
        entry.insert("source".into(), json!("plugin"));
    }
    Value::Object(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A middleware that appends its mark to `args.marks` and records the order of calls.
    struct Mark {
        name: &'static str,
        log: Arc<Mutex<Vec<String>>>,
        short_circuit: bool,
        call_twice: bool,
    }

    impl Middleware for Mark {
        fn source(&self) -> &str {
            self.name
        }

        fn rewrite(
            &self,
            _: Kind,
            mut payload: Value,
            original: &Value,
            _: &Map<String, Value>,
        ) -> Rewrite {
            self.log
                .lock()
                .unwrap()
                .push(format!("{} saw original {}", self.name, original["marks"]));
            payload["marks"]
                .as_array_mut()
                .unwrap()
                .push(json!(self.name));
            Rewrite {
                payload,
                trace: vec![json!({"name": self.name})],
                ..Rewrite::default()
            }
        }

        fn execute(
            &self,
            _: Kind,
            payload: Value,
            _: &Value,
            _: &Map<String, Value>,
            next: &mut Next<'_>,
        ) -> Result<Value, String> {
            self.log.lock().unwrap().push(format!("{} in", self.name));
            if self.short_circuit {
                return Ok(json!("cached"));
            }
            let out = next(payload.clone())?;
            if self.call_twice {
                next(payload)?;
            }
            self.log.lock().unwrap().push(format!("{} out", self.name));
            Ok(out)
        }
    }

    fn chain(log: &Arc<Mutex<Vec<String>>>, short: bool, twice: bool) -> MiddlewareChain {
        let mut chain = MiddlewareChain::new();
        for (name, s) in [("a", false), ("b", short)] {
            let m = Arc::new(Mark {
                name,
                log: log.clone(),
                short_circuit: s,
                call_twice: twice && name == "a",
            });
            chain.push(Kind::ToolRequest, m.clone());
            chain.push(Kind::ToolExecution, m);
        }
        chain
    }

    #[test]
    fn rewrites_chain_in_order_each_seeing_the_original() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let out =
            chain(&log, false, false).rewrite(Kind::ToolRequest, json!({"marks": []}), &Map::new());
        assert_eq!(out.payload, json!({"marks": ["a", "b"]}));
        assert_eq!(out.original, json!({"marks": []}));
        assert_eq!(out.trace, vec![json!({"name": "a"}), json!({"name": "b"})]);
        assert_eq!(
            *log.lock().unwrap(),
            ["a saw original []", "b saw original []"]
        );
    }

    /// Runs a tool (which echoes its arguments) inside `chain`'s wrappers: the result, how
    /// often the tool ran, and the order of the wrappers' steps.
    fn run_tool(short: bool, twice: bool) -> (Result<Value, String>, usize, Vec<String>) {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut ran = 0;
        let out = chain(&log, short, twice).execute(
            Kind::ToolExecution,
            json!(1),
            &json!(1),
            &Map::new(),
            &mut |p| {
                ran += 1;
                Ok(p)
            },
        );
        let steps = log.lock().unwrap().clone();
        (out, ran, steps)
    }

    #[test]
    fn wrappers_nest_first_outermost_and_may_short_circuit() {
        let (out, ran, steps) = run_tool(false, false);
        assert_eq!((out.unwrap(), ran), (json!(1), 1));
        assert_eq!(steps, ["a in", "b in", "b out", "a out"]);
        let (out, ran, _) = run_tool(true, false);
        assert_eq!(
            (out.unwrap(), ran),
            (json!("cached"), 0),
            "b answered without the tool"
        );
    }

    #[test]
    fn a_second_next_call_is_refused_and_the_tool_runs_once() {
        let (out, ran, _) = run_tool(false, true);
        let err = out.unwrap_err();
        assert!(err.contains("called next_call() more than once"), "{err}");
        assert_eq!(ran, 1);
    }
}
