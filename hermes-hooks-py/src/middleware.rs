//! Native middleware as Hermes Agent calls a Python plugin's: `callback(**kwargs)` from
//! `hermes_cli.middleware`, with the payload under `args` or `request`, the original
//! beside it, the call's ids, and `next_call` for a wrapper.
//!
//! Hermes runs its own chain (each callback gets the current payload and answers
//! `{"args": ...}` / `{"request": ...}` to replace it, or wraps `next_call`), so each
//! plugin's native middleware of a kind is handed to it as one callable, in the plugin's
//! place. Two things do not cross: an `llm_request` answer given without the model (Hermes's
//! request middleware can only rewrite; the answer is dropped with a warning), and
//! `llm_execution` wrappers, whose `next_call` returns the provider's response object
//! rather than data (not offered; see `_hermes.py`).

use std::sync::Arc;

use hermes_host::middleware::{Kind, Middleware};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use serde_json::{Map, Value};

use crate::{HookError, convert, guard, payload};

/// Keys of the call's keyword arguments that are not its context.
const NOT_CONTEXT: [&str; 3] = [
    "next_call",
    "telemetry_schema_version",
    "middleware_schema_version",
];

/// One plugin's native middleware of one kind, callable as a Hermes middleware callback.
#[pyclass(frozen, module = "hermes_hooks._native")]
pub struct MiddlewareCallback {
    pub(crate) kind: Kind,
    pub(crate) middleware: Arc<dyn Middleware>,
    pub(crate) name: String,
}

#[pymethods]
impl MiddlewareCallback {
    #[pyo3(signature = (**kwargs))]
    fn __call__(&self, py: Python<'_>, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Py<PyAny>> {
        let empty = PyDict::new(py);
        let kwargs = kwargs.unwrap_or(&empty);
        let key = self.kind.payload_key();
        let Some(current) = kwargs.get_item(key)? else {
            return Err(HookError::new_err(format!(
                "{}: Hermes called it without '{key}'",
                self.name
            )));
        };
        let original_key = format!("original_{key}");
        let original = kwargs.get_item(&original_key)?;
        let payload = json_of(&current)?;
        let original = match &original {
            Some(o) => json_of(o)?,
            None => payload.clone(),
        };
        let mut context = Map::new();
        for (k, v) in kwargs.iter() {
            let k = k.extract::<String>()?;
            if k == key || k == original_key || NOT_CONTEXT.contains(&k.as_str()) {
                continue;
            }
            context.insert(k, json_of(&v)?);
        }
        if self.kind.wraps() {
            let next_call = kwargs.get_item("next_call")?.ok_or_else(|| {
                HookError::new_err(format!("{}: Hermes called it without next_call", self.name))
            })?;
            return self.wrap(py, payload, &original, &context, next_call.unbind());
        }
        let name = &self.name;
        let rewrite = py.detach(|| {
            guard(
                || name.clone(),
                || {
                    Ok(self
                        .middleware
                        .rewrite(self.kind, payload.clone(), &original, &context))
                },
            )
        })?;
        for failure in &rewrite.failures {
            tracing::warn!("{failure}");
        }
        if rewrite.response.is_some() {
            tracing::warn!(
                "{name}: its llm_request middleware answered the request itself; Hermes Agent's request middleware can only rewrite, so the model is called"
            );
            return Ok(py.None());
        }
        if rewrite.trace.is_empty() || !rewrite.payload.is_object() {
            return Ok(py.None());
        }
        let answer = PyDict::new(py);
        answer.set_item(key, merged(py, &current, &payload, &rewrite.payload)?)?;
        // Hermes keeps one trace entry per answer: the first, as its `_trace_entry` reads.
        if let Some(Value::Object(entry)) = rewrite.trace.first() {
            for (k, v) in entry {
                answer.set_item(k, convert::to_python(py, v)?)?;
            }
        }
        Ok(answer.into_any().unbind())
    }

    /// `<plugin>::<kind>`: the name Hermes prints when it fails.
    #[getter]
    fn __name__(&self) -> &str {
        &self.name
    }

    fn __repr__(&self) -> String {
        format!("<hermes_hooks native middleware {}>", self.name)
    }
}

impl MiddlewareCallback {
    /// A `tool_execution` wrapper: the native wrappers run with the GIL released; their
    /// `next` calls Hermes's `next_call` with the GIL taken again. An exception from
    /// `next_call` (the tool failed downstream) is raised again as it was, as Hermes's
    /// chain passes it up.
    fn wrap(
        &self,
        py: Python<'_>,
        payload: Value,
        original: &Value,
        context: &Map<String, Value>,
        next_call: Py<PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let mut downstream: Option<PyErr> = None;
        let name = &self.name;
        let result = py.detach(|| {
            let mut next = |passed: Value| -> Result<Value, String> {
                Python::attach(|py| {
                    let called = convert::to_python(py, &passed)
                        .and_then(|args| next_call.call1(py, (args,)))
                        .and_then(|out| json_of(out.bind(py)));
                    called.map_err(|e| {
                        let text = e.to_string();
                        downstream = Some(e);
                        text
                    })
                })
            };
            guard(
                || name.clone(),
                || {
                    Ok(self
                        .middleware
                        .execute(self.kind, payload, original, context, &mut next))
                },
            )
        })?;
        match result {
            Ok(Value::String(text)) => Ok(PyString::new(py, &text).into_any().unbind()),
            Ok(other) => convert::to_python(py, &other),
            Err(why) => Err(downstream
                .take()
                .unwrap_or_else(|| HookError::new_err(format!("{name}: {why}")))),
        }
    }
}

/// `value` as JSON: plain data as `json.dumps` writes it, anything else as its `str()`.
fn json_of(value: &Bound<'_, PyAny>) -> PyResult<Value> {
    let mut text = String::new();
    payload::write_json(value, &mut text, 0)?;
    serde_json::from_str(&text).map_err(|e| HookError::new_err(e.to_string()))
}

/// The payload Hermes gets back: a copy of its own dict `current` where only the top-level
/// keys the rewrite changed (from `before`, what the native side saw) are replaced or
/// removed, so members that are not plain data (a client, a timeout object) stay as they
/// were rather than coming back as their text.
fn merged(
    py: Python<'_>,
    current: &Bound<'_, PyAny>,
    before: &Value,
    after: &Value,
) -> PyResult<Py<PyAny>> {
    let (Ok(dict), Value::Object(before), Value::Object(after)) =
        (current.cast::<PyDict>(), before, after)
    else {
        return convert::to_python(py, after);
    };
    let out = dict.copy()?;
    for (k, v) in after {
        if before.get(k) != Some(v) {
            out.set_item(k, convert::to_python(py, v)?)?;
        }
    }
    for k in before.keys().filter(|k| !after.contains_key(*k)) {
        out.del_item(k)?;
    }
    Ok(out.into_any().unbind())
}
