//! A test plugin that records every hook it sees and answers as its config says.
//!
//! Config: `log` (a file to append `<tag> <hook> <fields as JSON>` lines to), `tag`, and
//! `answers`, a mapping from hook name to `{action, text, json}`.

use std::io::Write;

use hermes_hooks_abi::core::{EventView, FieldValue, Reply};
use hermes_hooks_abi::hooks::HOOKS;
use hermes_hooks_abi::prelude::*;

/// Registers one raw callback for every hook this interface version knows.
pub fn register(ctx: &mut PluginContext) -> Result<(), String> {
    let config = ctx.config();
    let log = config["log"]
        .as_str()
        .ok_or("recorder needs config.log")?
        .to_string();
    let tag = config["tag"].as_str().unwrap_or("recorder").to_string();
    for hook in HOOKS {
        let answer = config["answers"][hook.name].clone();
        let (log, tag) = (log.clone(), tag.clone());
        ctx.register_raw(hook.name, "record", move |view| {
            append(&log, &format!("{tag} {} {}", hook.name, fields_json(view)));
            Ok(reply_from(&answer))
        });
    }
    Ok(())
}

fn reply_from(answer: &serde_json::Value) -> Option<Reply> {
    let act = answer["action"].as_str()?;
    let mut reply = Reply::new(act, answer["text"].as_str().unwrap_or_default());
    if !answer["json"].is_null() {
        reply.json = answer["json"].to_string().into();
    }
    Some(reply)
}

fn fields_json(view: &EventView<'_>) -> String {
    let mut map = serde_json::Map::new();
    for f in view.fields.iter() {
        let v = match f.value {
            FieldValue::Null => serde_json::Value::Null,
            FieldValue::Bool(b) => b.into(),
            FieldValue::Int(i) => i.into(),
            FieldValue::Float(x) => x.into(),
            FieldValue::Str(s) => s.as_str().into(),
            FieldValue::Json(s) => {
                serde_json::from_str(s.as_str()).unwrap_or(serde_json::Value::Null)
            }
        };
        map.insert(f.name.to_string(), v);
    }
    serde_json::Value::Object(map).to_string()
}

fn append(path: &str, line: &str) {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    match file {
        Ok(mut f) => {
            let _ = f.write_all(format!("{line}\n").as_bytes());
        }
        Err(e) => tracing::warn!("recorder cannot write {path}: {e}"),
    }
}

hermes_hooks_abi::export_plugin!(register);
