//! Payloads built from JSON, for hooks fired by hand (`hermes plugins fire`, tests) and for
//! anything that receives a payload as data rather than as a typed struct.

use hermes_hooks_abi::core::Field;
use hermes_hooks_abi::hooks::{self, FieldKind};

/// A payload that owns its text, so it can be built from JSON and lent out as fields.
///
/// Fields of the hook's spec come first, in spec order (missing ones get their empty value:
/// `""`, `0`, `false`, `{}`, null); keys the spec does not know follow, in the object's order.
///
/// ```
/// use hermes_host::payload::OwnedPayload;
/// let p = OwnedPayload::from_json("pre_tool_call", &serde_json::json!({"tool_name": "terminal", "args": {"command": "ls"}}));
/// let fields = p.fields();
/// assert_eq!(fields[0].name.as_str(), "tool_name");
/// assert_eq!(fields[1].value.as_str(), Some(r#"{"command":"ls"}"#));
/// ```
#[derive(Clone, Debug, Default)]
pub struct OwnedPayload {
    values: Vec<(String, Owned)>,
}

#[derive(Clone, Debug)]
enum Owned {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Json(String),
}

impl OwnedPayload {
    /// Builds the payload of `hook` from a JSON object (a non-object counts as `{}`).
    pub fn from_json(hook: &str, object: &serde_json::Value) -> OwnedPayload {
        let empty = serde_json::Map::new();
        let object = object.as_object().unwrap_or(&empty);
        let mut values = Vec::new();
        let spec_fields = hooks::spec(hook).map_or(&[][..], |s| s.fields);
        for f in spec_fields {
            let value = object.get(f.name);
            let owned = match (f.kind, value) {
                (FieldKind::Str, None) => Owned::Str(String::new()),
                (FieldKind::Int, None) => Owned::Int(0),
                (FieldKind::Bool, None) => Owned::Bool(false),
                (FieldKind::Json, None) => Owned::Json("{}".into()),
                (FieldKind::OptStr | FieldKind::OptInt, None) => Owned::Null,
                (FieldKind::Json, Some(v)) => Owned::Json(v.to_string()),
                (FieldKind::Str | FieldKind::OptStr, Some(serde_json::Value::String(s))) => {
                    Owned::Str(s.clone())
                }
                (_, Some(v)) => from_value(v),
            };
            values.push((f.name.to_string(), owned));
        }
        for (k, v) in object {
            if !spec_fields.iter().any(|f| f.name == k) {
                values.push((k.clone(), from_value(v)));
            }
        }
        OwnedPayload { values }
    }

    /// The payload as borrowed fields.
    pub fn fields(&self) -> Vec<Field<'_>> {
        self.values
            .iter()
            .map(|(name, v)| match v {
                Owned::Null => Field::null(name),
                Owned::Bool(b) => Field::bool(name, *b),
                Owned::Int(i) => Field::int(name, *i),
                Owned::Float(f) => Field {
                    name: name.as_str().into(),
                    value: hermes_hooks_abi::core::FieldValue::Float(*f),
                },
                Owned::Str(s) => Field::str(name, s),
                Owned::Json(s) => Field::json(name, s),
            })
            .collect()
    }
}

fn from_value(v: &serde_json::Value) -> Owned {
    match v {
        serde_json::Value::Null => Owned::Null,
        serde_json::Value::Bool(b) => Owned::Bool(*b),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Owned::Int)
            .unwrap_or_else(|| Owned::Float(n.as_f64().unwrap_or(0.0))),
        serde_json::Value::String(s) => Owned::Str(s.clone()),
        other => Owned::Json(other.to_string()),
    }
}
