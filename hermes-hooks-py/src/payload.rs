//! Hermes's keyword arguments as hook fields, read straight from the kwargs dict.
//!
//! Hermes fires every hook with keyword arguments; a native callback sees them as the
//! fields of the hook's spec, in spec order, then the keys the spec does not know, with the
//! same values and empty defaults as [`hermes_host::payload::OwnedPayload`] builds from
//! JSON. Built here without a JSON value in between: strings are lent from the Python
//! objects, and only lists and dicts are written out, as JSON text. That is most of what a
//! native callback costs Hermes (going through `serde_json::Value` cost several µs).

use hermes_hooks_abi::core::{Field, FieldValue};
use hermes_hooks_abi::hooks::{self, FieldKind};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

/// How deep a value may nest before the rest is written as its `str()`: a structure that
/// contains itself must not recurse without end.
const MAX_DEPTH: usize = 64;

/// One value, holding what its field will borrow.
enum Slot<'py> {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Bound<'py, PyString>),
    Text(String),
    Json(String),
    StaticJson(&'static str),
}

/// A field's name: the spec's, or a key of the dict.
enum Name<'py> {
    Spec(&'static str),
    Key(Bound<'py, PyString>),
    Text(String),
}

/// Every spec field's name as an interned Python string, per hook in `HOOKS` order: made
/// once, so that looking a field up in the kwargs dict neither allocates nor hashes (the
/// keys of a call's keyword arguments are interned too, and compare by identity).
static NAMES: PyOnceLock<Vec<Vec<Py<PyString>>>> = PyOnceLock::new();

fn names(py: Python<'_>) -> &Vec<Vec<Py<PyString>>> {
    NAMES.get_or_init(py, || {
        hooks::HOOKS
            .iter()
            .map(|h| {
                h.fields
                    .iter()
                    .map(|f| PyString::intern(py, f.name).unbind())
                    .collect()
            })
            .collect()
    })
}

/// The keyword argument Hermes's `invoke_hook` adds to every call. `hermes` does not hand
/// it to native callbacks either, so it is left out here too.
const TELEMETRY: &str = "telemetry_schema_version";

/// The position of `hook` in `HOOKS`, for [`Payload::new`].
pub fn hook_index(hook: &str) -> Option<usize> {
    hooks::HOOKS.iter().position(|h| h.name == hook)
}

/// The payload of one firing.
pub struct Payload<'py> {
    slots: Vec<(Name<'py>, Slot<'py>)>,
}

impl<'py> Payload<'py> {
    /// The payload of the hook at `position` of `HOOKS` (see [`hook_index`]; `None`: a hook
    /// this interface does not know) from `kwargs` (none: every field empty).
    pub fn new(
        position: Option<usize>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Payload<'py>> {
        let spec = position.map_or(&[][..], |i| hooks::HOOKS[i].fields);
        // One pass over the dict: each key is matched to its spec field by identity (the
        // keys of a call are interned, as are the names), else by text; the rest are kept
        // for after the spec's fields.
        let mut values: Vec<Option<Bound<'py, PyAny>>> = vec![None; spec.len()];
        let mut extras = Vec::new();
        if let Some(kwargs) = kwargs {
            let py = kwargs.py();
            let interned = position
                .and_then(|i| names(py).get(i))
                .map_or(&[][..], Vec::as_slice);
            for (key, value) in kwargs.iter() {
                if let Some(k) = interned.iter().position(|n| n.is(&key)) {
                    values[k] = Some(value);
                    continue;
                }
                match key.cast_into::<PyString>() {
                    Ok(key) => {
                        let text = key.to_str()?;
                        if let Some(k) = spec.iter().position(|f| f.name == text) {
                            values[k] = Some(value);
                        } else if text != TELEMETRY {
                            extras.push((Name::Key(key), value));
                        }
                    }
                    Err(key) => {
                        let text = key.into_inner().str()?.to_str()?.to_owned();
                        extras.push((Name::Text(text), value));
                    }
                }
            }
        }
        let mut slots = Vec::with_capacity(spec.len() + extras.len());
        for (field, value) in spec.iter().zip(values) {
            let slot = match (field.kind, value) {
                (FieldKind::Str, None) => Slot::Text(String::new()),
                (FieldKind::Int, None) => Slot::Int(0),
                (FieldKind::Bool, None) => Slot::Bool(false),
                (FieldKind::Float, None) => Slot::Float(0.0),
                (FieldKind::Json, None) => {
                    Slot::StaticJson(hermes_host::payload::empty_json(field.name))
                }
                (FieldKind::OptStr | FieldKind::OptInt, None) => Slot::Null,
                (FieldKind::Json, Some(v)) => {
                    let mut text = String::with_capacity(64);
                    write_json(&v, &mut text, 0)?;
                    Slot::Json(text)
                }
                (FieldKind::Float, Some(v))
                    if v.is_instance_of::<PyFloat>() || v.is_instance_of::<PyInt>() =>
                {
                    Slot::Float(v.extract::<f64>().unwrap_or(0.0))
                }
                (_, Some(v)) => slot_of(v)?,
            };
            slots.push((Name::Spec(field.name), slot));
        }
        for (name, value) in extras {
            slots.push((name, slot_of(value)?));
        }
        Ok(Payload { slots })
    }

    /// The payload as fields, borrowing from it.
    pub fn fields(&self) -> PyResult<Vec<Field<'_>>> {
        let mut fields = Vec::with_capacity(self.slots.len());
        for (name, slot) in &self.slots {
            let name = match name {
                Name::Spec(n) => *n,
                Name::Key(k) => k.to_str()?,
                Name::Text(t) => t.as_str(),
            };
            let value = match slot {
                Slot::Null => FieldValue::Null,
                Slot::Bool(b) => FieldValue::Bool(*b),
                Slot::Int(i) => FieldValue::Int(*i),
                Slot::Float(f) => FieldValue::Float(*f),
                Slot::Str(s) => FieldValue::Str(s.to_str()?.into()),
                Slot::Text(t) => FieldValue::Str(t.as_str().into()),
                Slot::Json(j) => FieldValue::Json(j.as_str().into()),
                Slot::StaticJson(j) => FieldValue::Json((*j).into()),
            };
            fields.push(Field {
                name: name.into(),
                value,
            });
        }
        Ok(fields)
    }
}

/// A value of no particular kind: what JSON would make of it.
fn slot_of(value: Bound<'_, PyAny>) -> PyResult<Slot<'_>> {
    if value.is_none() {
        return Ok(Slot::Null);
    }
    let value = match value.cast_into::<PyString>() {
        Ok(s) => return Ok(Slot::Str(s)),
        Err(e) => e.into_inner(),
    };
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Slot::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>()
        && let Ok(i) = value.extract::<i64>()
    {
        return Ok(Slot::Int(i));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(Slot::Float(f.value()));
    }
    let mut text = String::new();
    write_json(&value, &mut text, 0)?;
    Ok(Slot::Json(text))
}

/// Writes `value` as JSON: what `json.dumps` writes for plain data, and `str()` of
/// anything else, as a string.
pub fn write_json(value: &Bound<'_, PyAny>, out: &mut String, depth: usize) -> PyResult<()> {
    if value.is_none() {
        out.push_str("null");
    } else if let Ok(s) = value.cast::<PyString>() {
        push_string(out, s.to_str()?);
    } else if let Ok(b) = value.cast::<PyBool>() {
        out.push_str(if b.is_true() { "true" } else { "false" });
    } else if value.is_instance_of::<PyInt>() {
        match value.extract::<i64>() {
            Ok(i) => out.push_str(&i.to_string()),
            // Beyond 64 bits: the digits, as Python prints them.
            Err(_) => out.push_str(value.str()?.to_str()?),
        }
    } else if let Ok(f) = value.cast::<PyFloat>() {
        match serde_json::Number::from_f64(f.value()) {
            Some(n) => out.push_str(&n.to_string()),
            None => out.push_str("null"),
        }
    } else if depth >= MAX_DEPTH {
        push_string(out, value.str()?.to_str()?);
    } else if let Ok(dict) = value.cast::<PyDict>() {
        out.push('{');
        for (i, (k, v)) in dict.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match k.cast::<PyString>() {
                Ok(k) => push_string(out, k.to_str()?),
                Err(_) => push_string(out, k.str()?.to_str()?),
            }
            out.push(':');
            write_json(&v, out, depth + 1)?;
        }
        out.push('}');
    } else if let Ok(list) = value.cast::<PyList>() {
        write_items(list.iter(), out, depth)?;
    } else if let Ok(tuple) = value.cast::<PyTuple>() {
        write_items(tuple.iter(), out, depth)?;
    } else {
        push_string(out, value.str()?.to_str()?);
    }
    Ok(())
}

fn write_items<'py>(
    items: impl Iterator<Item = Bound<'py, PyAny>>,
    out: &mut String,
    depth: usize,
) -> PyResult<()> {
    out.push('[');
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json(&item, out, depth + 1)?;
    }
    out.push(']');
    Ok(())
}

/// `s` as a JSON string.
fn push_string(out: &mut String, s: &str) {
    hermes_host::pyfmt::write_string(out, s, false);
}
