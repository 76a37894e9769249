//! Outcomes as Python values: what a Hermes plugin's callback returns for the same answer,
//! so that Hermes (or any Python host) reads a native plugin's answer as it reads a Python
//! plugin's.

use hermes_host::HooksReport;
use hermes_host::registry::{DispatchVerdict, Outcome};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::convert;

/// `outcome` as Hermes's plugins answer:
///
/// - `pre_tool_call`: `{"action": "block", "message"}` or `{"action": "approve", "message",
///   "rule_key"}`; argument changes are written into `kwargs["args"]`, the live dict Hermes
///   hands its hooks (Hermes reads no rewrite from a return value);
/// - `pre_llm_call`: `{"context": text}`; a transform: the replacement `str`;
/// - `pre_gateway_dispatch`: `{"action": "skip", "reason"}`, `{"action": "rewrite",
///   "text"}` or `{"action": "allow"}`;
/// - `pre_verify`: `{"action": "continue", "message"}`;
/// - otherwise, and when nothing was decided, `None`.
pub fn to_python(
    py: Python<'_>,
    outcome: Outcome,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyAny>> {
    let dict = |pairs: &[(&str, &str)]| -> PyResult<Py<PyAny>> {
        let d = PyDict::new(py);
        for (k, v) in pairs {
            d.set_item(k, v)?;
        }
        Ok(d.into_any().unbind())
    };
    match outcome {
        Outcome::Observed => Ok(py.None()),
        Outcome::Tool(verdict) => {
            if let Some(changes) = &verdict.modified_args {
                let args = kwargs
                    .map(|k| k.get_item("args"))
                    .transpose()?
                    .flatten()
                    .and_then(|a| a.cast_into::<PyDict>().ok());
                if let Some(args) = args {
                    for (k, v) in changes.iter() {
                        args.set_item(k, convert::to_python(py, v)?)?;
                    }
                }
            }
            match verdict.blocked {
                Some(blocked) => match &blocked.approval {
                    Some(approval) => {
                        let d = PyDict::new(py);
                        d.set_item("action", "approve")?;
                        d.set_item("message", &blocked.message)?;
                        if let Some(key) = &approval.rule_key {
                            d.set_item("rule_key", key)?;
                        }
                        Ok(d.into_any().unbind())
                    }
                    None => dict(&[("action", "block"), ("message", &blocked.message)]),
                },
                None => Ok(py.None()),
            }
        }
        Outcome::Context(Some(text)) => dict(&[("context", &text)]),
        Outcome::Replace(Some(text)) => Ok(text.into_pyobject(py)?.into_any().unbind()),
        Outcome::Context(None) | Outcome::Replace(None) | Outcome::Verify(None) => Ok(py.None()),
        Outcome::Dispatch(verdict) => match verdict {
            DispatchVerdict::Dispatch => Ok(py.None()),
            DispatchVerdict::Skip { reason, .. } => {
                dict(&[("action", "skip"), ("reason", &reason)])
            }
            DispatchVerdict::Rewrite { text, .. } => {
                dict(&[("action", "rewrite"), ("text", &text)])
            }
            DispatchVerdict::Allow { .. } => dict(&[("action", "allow")]),
        },
        Outcome::Verify(Some(next)) => dict(&[("action", "continue"), ("message", &next.message)]),
    }
}

/// The load report as a dict: `plugins` (name, kind, loaded, error, hooks, isolation,
/// library, dir) and `problems` (file, message).
pub fn report<'py>(py: Python<'py>, report: &HooksReport) -> PyResult<Bound<'py, PyDict>> {
    let plugins = PyList::empty(py);
    for p in &report.plugins {
        let d = PyDict::new(py);
        d.set_item("name", &p.name)?;
        d.set_item("key", &p.key)?;
        d.set_item("version", &p.version)?;
        d.set_item("kind", p.kind.as_str())?;
        d.set_item("loaded", p.loaded())?;
        d.set_item("error", p.error.as_deref())?;
        d.set_item("hooks", &p.hooks)?;
        d.set_item("isolation", p.isolation.as_str())?;
        d.set_item("dir", &p.dir)?;
        d.set_item("library", p.library.as_ref())?;
        plugins.append(d)?;
    }
    let problems = PyList::empty(py);
    for problem in &report.problems {
        let d = PyDict::new(py);
        d.set_item("file", &problem.file)?;
        d.set_item("message", &problem.message)?;
        problems.append(d)?;
    }
    let out = PyDict::new(py);
    out.set_item("plugins", plugins)?;
    out.set_item("problems", problems)?;
    Ok(out)
}
