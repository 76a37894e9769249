//! The JSON Schemas of shell-hook payloads and answers: the committed files are what the
//! generator produces, and what the host really sends and accepts validates against them.
//!
//! `HERMES_BLESS=1 cargo test -p hermes-tests --test it schema` rewrites `schema/shell/`.

use std::path::PathBuf;

use hermes_hooks_abi::core::{EventView, no_host_calls};
use hermes_hooks_abi::hooks::{self, FieldKind};
use hermes_host::payload::OwnedPayload;
use hermes_host::registry::Registry;
use hermes_host::schema::{self, answer_schema, payload_schema};
use hermes_host::shell::{self, Consent, wire};
use hermes_tests::support::{TestHome, workspace};
use serde_json::{Map, Value, json};

fn schema_dir() -> PathBuf {
    workspace().join(schema::SCHEMA_DIR)
}

#[test]
fn committed_schemas_are_what_the_generator_produces() {
    let dir = schema_dir();
    let files = schema::files();
    if std::env::var_os("HERMES_BLESS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            if entry
                .file_name()
                .to_string_lossy()
                .ends_with(".schema.json")
            {
                std::fs::remove_file(entry.path()).unwrap();
            }
        }
        for (name, text) in &files {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }
    let mut stale = Vec::new();
    for (name, text) in &files {
        let committed = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        if committed != *text {
            stale.push(name.clone());
        }
    }
    let mut extra: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".schema.json") && !files.iter().any(|(f, _)| f == n))
                .collect()
        })
        .unwrap_or_default();
    extra.sort();
    assert!(
        stale.is_empty() && extra.is_empty(),
        "schema/shell/ is out of date (stale: {stale:?}, not generated: {extra:?}); \
         run `HERMES_BLESS=1 cargo test -p hermes-tests --test it schema` and review the diff"
    );
    assert_eq!(files.len(), 2 * hooks::HOOKS.len());
}

/// A value of `kind` for field `i`: every kind, and both sides of the optional ones.
fn sample(kind: FieldKind, name: &str, i: usize) -> Value {
    match kind {
        FieldKind::Str => json!(format!("{name}-é")),
        FieldKind::OptStr if i.is_multiple_of(2) => Value::Null,
        FieldKind::OptStr => json!(format!("{name}-value")),
        FieldKind::Json if name == "args" || name == "usage" => json!({"command": "ls", "n": 1}),
        FieldKind::Json => json!([{"role": "user", "content": "hi"}]),
        FieldKind::Int => json!(42),
        FieldKind::OptInt if i.is_multiple_of(2) => Value::Null,
        FieldKind::OptInt => json!(7),
        FieldKind::Bool => json!(true),
        FieldKind::Float => json!(1.5),
    }
}

/// Every field of `event` set to a [`sample`] value.
fn full_object(event: &str) -> Value {
    let spec = hooks::spec(event).unwrap();
    let full: Map<String, Value> = spec
        .fields
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.to_string(), sample(f.kind, f.name, i)))
        .collect();
    Value::Object(full)
}

/// The payloads the host's builder makes for `event`: from an empty object (every field
/// takes its empty value, as `hermes hooks fire --payload '{}'`), and from a full one; each
/// as the agent sends it (runtime) and as `hermes hooks test` does.
fn built_payloads(event: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for object in [json!({}), full_object(event)] {
        let owned = OwnedPayload::from_json(event, &object);
        let fields = owned.fields();
        let view = EventView::new(event, &fields, no_host_calls());
        for runtime in [true, false] {
            let kwargs = wire::kwargs_from_view(&view, runtime);
            out.push(wire::payload(event, &kwargs, "/work"));
        }
    }
    out
}

#[test]
fn every_payload_the_host_builds_validates_and_has_exactly_the_schema_keys() {
    for event in schema::events() {
        let schema = payload_schema(event).unwrap();
        let props = schema["properties"].as_object().unwrap();
        let extra_props = schema["properties"]["extra"]["properties"]
            .as_object()
            .unwrap();
        for payload in built_payloads(event) {
            validate(&schema, &schema, &payload)
                .unwrap_or_else(|e| panic!("{event}: {e}\n{payload:#}"));
            let keys: Vec<&String> = payload.as_object().unwrap().keys().collect();
            assert_eq!(keys, props.keys().collect::<Vec<_>>(), "{event}");
            // extra: exactly the schema's keys, in its order (telemetry only at runtime).
            let extra: Vec<&String> = payload["extra"].as_object().unwrap().keys().collect();
            let expected: Vec<&String> = extra_props
                .keys()
                .filter(|k| *k != "telemetry_schema_version" || extra.contains(k))
                .collect();
            assert_eq!(extra, expected, "{event}");
        }
    }
}

#[test]
fn payloads_that_break_the_contract_do_not_validate() {
    let schema = payload_schema("pre_tool_call").unwrap();
    let good = built_payloads("pre_tool_call").remove(3);
    let mut wrong_event = good.clone();
    wrong_event["hook_event_name"] = json!("post_tool_call");
    let mut missing_extra = good.clone();
    missing_extra["extra"]
        .as_object_mut()
        .unwrap()
        .remove("task_id");
    let mut wrong_type = good.clone();
    wrong_type["tool_input"] = json!("ls");
    for bad in [wrong_event, missing_extra, wrong_type] {
        assert!(validate(&schema, &schema, &bad).is_err(), "{bad:#}");
    }
}

#[test]
fn payloads_a_real_shell_hook_receives_validate() {
    let home = TestHome::new();
    let dump = home.path().join("payloads.jsonl");
    let script = home.path().join("dump.sh");
    std::fs::write(&script, "#!/bin/sh\ncat >> \"$1\"\necho >> \"$1\"\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let mut config = String::from("hooks:\n");
    for event in schema::events() {
        config.push_str(&format!(
            "  {event}:\n    - command: {} {}\n",
            script.display(),
            dump.display()
        ));
    }
    home.config(&config);
    let home_ref = home.home();
    let (config, problem) = home_ref.load_config();
    assert!(problem.is_none(), "{problem:?}");
    let mut registry = Registry::new();
    let report =
        shell::register_from_config(&home_ref, &config.hooks, Consent::Accept, &mut registry);
    assert_eq!(
        report.registered.len(),
        schema::events().len(),
        "{:?}",
        report.warnings
    );
    for event in schema::events() {
        let owned = OwnedPayload::from_json(event, &full_object(event));
        registry.fire(event, &owned.fields());
    }
    let text = std::fs::read_to_string(&dump).unwrap();
    let payloads: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(payloads.len(), schema::events().len());
    for payload in payloads {
        let event = payload["hook_event_name"].as_str().unwrap().to_string();
        let schema = payload_schema(&event).unwrap();
        validate(&schema, &schema, &payload)
            .unwrap_or_else(|e| panic!("{event}: {e}\n{payload:#}"));
        assert_eq!(
            payload["extra"]["telemetry_schema_version"],
            wire::TELEMETRY_SCHEMA_VERSION
        );
    }
}

#[test]
fn answers_the_host_acts_on_validate_and_malformed_ones_do_not() {
    let tool = answer_schema("pre_tool_call").unwrap();
    let acted_on = [
        json!({"action": "block", "message": "no"}),
        json!({"action": "block", "reason": "no"}),
        json!({"action": "modify", "args": {"command": "ls -la"}}),
        json!({"decision": "block", "reason": "no"}),
        json!({"decision": "modify", "tool_input": {"command": "ls -la"}}),
        json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}}),
        json!({"hookSpecificOutput": {"updatedInput": {"command": "ls -la"}}}),
    ];
    for answer in &acted_on {
        validate(&tool, &tool, answer).unwrap_or_else(|e| panic!("{e}\n{answer}"));
        assert!(wire::decide("pre_tool_call", answer).is_some(), "{answer}");
    }
    validate(&tool, &tool, &json!({"decision": "allow"})).unwrap();
    for malformed in [
        json!({"action": "blok"}),
        json!({"action": "block", "message": 42}),
        json!({"action": "modify", "args": "ls"}),
        json!({"decision": "deny"}),
        json!({"hookSpecificOutput": {"permissionDecision": "nope"}}),
        json!({}),
        json!("block"),
    ] {
        assert!(validate(&tool, &tool, &malformed).is_err(), "{malformed}");
    }

    let context = answer_schema("pre_llm_call").unwrap();
    for answer in [
        json!({"context": "Today is Friday"}),
        json!({"hookSpecificOutput": {"additionalContext": "Today is Friday"}}),
    ] {
        validate(&context, &context, &answer).unwrap_or_else(|e| panic!("{e}\n{answer}"));
        assert!(wire::decide("pre_llm_call", &answer).is_some(), "{answer}");
    }
    for malformed in [
        json!({"context": 5}),
        json!({"action": "block", "message": "no"}),
    ] {
        assert!(
            validate(&context, &context, &malformed).is_err(),
            "{malformed}"
        );
    }
}

/// Validates `value` against `schema` (with `root` for `$ref`), for the subset of JSON Schema
/// 2020-12 the generator emits. A keyword it does not know fails, so a schema can never
/// carry a constraint this test silently skips.
pub(crate) fn validate(root: &Value, schema: &Value, value: &Value) -> Result<(), String> {
    let Some(obj) = schema.as_object() else {
        return Err(format!("a schema must be an object: {schema}"));
    };
    for (keyword, arg) in obj {
        match keyword.as_str() {
            "$schema" | "title" | "description" | "$defs" => {}
            "type" => {
                let types: Vec<&str> = match arg {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    other => return Err(format!("bad type {other}")),
                };
                if !types.iter().any(|t| has_type(value, t)) {
                    return Err(format!("{value} is not of type {arg}"));
                }
            }
            "const" if value != arg => return Err(format!("{value} is not {arg}")),
            "const" => {}
            "enum" => {
                if !arg.as_array().is_some_and(|a| a.contains(value)) {
                    return Err(format!("{value} is not one of {arg}"));
                }
            }
            "required" => {
                for key in arg
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    if value.as_object().is_some_and(|o| !o.contains_key(key)) {
                        return Err(format!("missing required key {key:?}"));
                    }
                }
            }
            "properties" => {
                if let (Some(props), Some(o)) = (arg.as_object(), value.as_object()) {
                    for (key, sub) in props {
                        if let Some(v) = o.get(key) {
                            validate(root, sub, v).map_err(|e| format!("{key}: {e}"))?;
                        }
                    }
                }
            }
            "additionalProperties" => {
                if arg == &Value::Bool(false) {
                    let known = obj.get("properties").and_then(Value::as_object);
                    let unexpected = value.as_object().and_then(|o| {
                        o.keys()
                            .find(|k| !known.is_some_and(|p| p.contains_key(*k)))
                    });
                    if let Some(k) = unexpected {
                        return Err(format!("unexpected key {k:?}"));
                    }
                } else if arg != &Value::Bool(true) {
                    return Err(format!("unsupported additionalProperties {arg}"));
                }
            }
            "items" => {
                if let Some(items) = value.as_array() {
                    for (i, item) in items.iter().enumerate() {
                        validate(root, arg, item).map_err(|e| format!("[{i}]: {e}"))?;
                    }
                }
            }
            "anyOf" => {
                let subs = arg.as_array().ok_or("anyOf needs a list")?;
                let errors: Vec<String> = subs
                    .iter()
                    .filter_map(|s| validate(root, s, value).err())
                    .collect();
                if errors.len() == subs.len() {
                    return Err(format!("matches none of anyOf: {}", errors.join("; ")));
                }
            }
            "$ref" => {
                let name = arg
                    .as_str()
                    .and_then(|r| r.strip_prefix("#/$defs/"))
                    .ok_or_else(|| format!("unsupported $ref {arg}"))?;
                let target = root["$defs"]
                    .get(name)
                    .ok_or_else(|| format!("no $defs/{name}"))?;
                validate(root, target, value)?;
            }
            other => {
                return Err(format!(
                    "the test validator does not know keyword {other:?}"
                ));
            }
        }
    }
    Ok(())
}

fn has_type(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

#[test]
fn hermes_hooks_schema_prints_the_committed_files() {
    let home = TestHome::new();
    for (args, file) in [
        (
            &["hooks", "schema", "pre_tool_call"][..],
            "pre_tool_call.payload.schema.json",
        ),
        (
            &["hooks", "schema", "pre_llm_call", "--answer"][..],
            "pre_llm_call.answer.schema.json",
        ),
    ] {
        let run = home.hermes(args, &[]);
        run.expect_code(0);
        let committed = std::fs::read_to_string(schema_dir().join(file)).unwrap();
        assert_eq!(run.stdout(), committed, "{}", run.describe());
    }
    let run = home.hermes(&["hooks", "schema", "pre_tool_use"], &[]);
    run.expect_code(2);
    assert_eq!(
        run.stderr(),
        "hermes: unknown hook event 'pre_tool_use'; did you mean 'pre_tool_call'?\n",
        "{}",
        run.describe()
    );
}

#[test]
fn the_config_schema_is_committed_as_generated_and_checks_real_configs() {
    let path = workspace().join(schema::CONFIG_SCHEMA_FILE);
    let generated = format!(
        "{}\n",
        serde_json::to_string_pretty(&schema::config_schema()).unwrap()
    );
    if std::env::var_os("HERMES_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    assert_eq!(
        std::fs::read_to_string(&path).unwrap_or_default(),
        generated,
        "{} is out of date; run `HERMES_BLESS=1 cargo test -p hermes-tests --test it schema` and review the diff",
        schema::CONFIG_SCHEMA_FILE
    );
    let schema = schema::config_schema();
    let as_json = |yaml: &str| -> Value {
        serde_json::to_value(yaml_serde::from_str::<yaml_serde::Value>(yaml).unwrap()).unwrap()
    };
    // The documented example and the demo home's config validate.
    let demo = std::fs::read_to_string(workspace().join("examples/demo/home/config.yaml.in"))
        .unwrap()
        .replace("@DEMO@", "/demo");
    for good in [
        demo.as_str(),
        "model: gpt-4\nhooks:\n  strict_permissions: false\n  pre_tool_call:\n    - {command: ./guard.sh, matcher: terminal, timeout: 10, fail_closed: true}\nplugins:\n  enabled: [guard]\n  python: /usr/bin/python3\ngateway:\n  max_sessions: 100\n  token: abcdefabcdefabcdef\n",
    ] {
        let config = as_json(good);
        assert!(validate(&schema, &schema, &config).is_ok(), "{good}");
    }
    // The schema and the typed model know the same keys.
    let keys = |block: &str| -> Vec<String> {
        let mut keys: Vec<String> = schema["properties"][block]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        keys.sort();
        keys
    };
    let mut plugins: Vec<String> = hermes_host::config::PLUGINS_KEYS
        .iter()
        .map(|k| k.to_string())
        .collect();
    plugins.sort();
    assert_eq!(keys("plugins"), plugins);
    let mut gateway: Vec<String> = hermes_host::config::GATEWAY_KEYS
        .iter()
        .map(|(k, _, _)| k.to_string())
        .collect();
    gateway.sort();
    assert_eq!(keys("gateway"), gateway);
    // The typos that failed open do not.
    for bad in [
        "hooks:\n  pre_tool_call:\n    - {command: ./g.sh, fail_close: true}\n",
        "hooks:\n  pre_tool_call:\n    - {command: ./g.sh, timout: 1}\n",
        "plugins:\n  enable: [a]\n",
        "gateway:\n  max_session: 3\n",
        "hooks: yes please\n",
    ] {
        let config = as_json(bad);
        assert!(validate(&schema, &schema, &config).is_err(), "{bad}");
    }
}
