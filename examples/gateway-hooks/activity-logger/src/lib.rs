//! Shows a native gateway hook: one JSON line per gateway event, appended to an activity log.

use std::fs::OpenOptions;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use hermes_hooks_abi::prelude::*;
use serde_json::{Map, Value};

/// The event families this hook logs; `HOOK.yaml` subscribes to the same ones.
pub const PATTERNS: [&str; 4] = ["gateway:*", "session:*", "agent:*", "command:*"];

/// Logs every event of [`PATTERNS`] to the `path` of the hook's `config:`, else
/// `<home>/logs/activity.jsonl`, the home being the one the hook is installed in
/// (`<home>/hooks/activity-logger/`), or `$HERMES_HOME` when the host does not say.
pub fn register(ctx: &mut PluginContext) {
    let path = log_path(
        &ctx.config(),
        ctx.plugin_dir().as_deref(),
        std::env::var_os("HERMES_HOME")
            .map(PathBuf::from)
            .as_deref(),
    );
    log_events(ctx, &path);
}

/// Registers the gateway handlers that append to `path`.
pub fn log_events(ctx: &mut PluginContext, path: &Path) {
    for pattern in PATTERNS {
        let path = path.to_path_buf();
        ctx.named("log_event")
            .try_on_gateway_event(pattern, move |e| {
                let line = entry(e.event_type(), e.context().value(), SystemTime::now());
                // The gateway prints an error as `[hooks] Error in handler for '<event>': ...`.
                append(&path, &line)
                    .map_err(|err| format!("cannot append to {}: {err}", path.display()))
            });
    }
}

/// Where the log goes: `config.path`, else `<home>/logs/activity.jsonl` with the home
/// taken from the hook directory (`<home>/hooks/<name>`), else from `home`.
pub fn log_path(config: &Value, hook_dir: Option<&Path>, home: Option<&Path>) -> PathBuf {
    if let Some(path) = config
        .get("path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
    {
        return PathBuf::from(path);
    }
    let home = hook_dir
        .and_then(Path::parent)
        .and_then(Path::parent)
        .or(home)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    home.join("logs").join("activity.jsonl")
}

/// `{"ts": ..., "event": ..., <context keys>}`, as the Python original writes it.
pub fn entry(event_type: &str, context: Value, at: SystemTime) -> Value {
    let mut line = Map::new();
    line.insert("ts".into(), Value::String(rfc3339(at)));
    line.insert("event".into(), Value::String(event_type.into()));
    match context {
        Value::Object(map) => line.extend(map),
        Value::Null => {}
        other => {
            line.insert("context".into(), other);
        }
    }
    Value::Object(line)
}

/// Appends one line in one `write` on an `O_APPEND` file, so concurrent writers never
/// interleave; creates the directory when missing.
fn append(path: &Path, value: &Value) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut line = value.to_string();
    line.push('\n');
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(line.as_bytes())
}

/// `at` in RFC 3339, UTC, with milliseconds.
fn rfc3339(at: SystemTime) -> String {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    // Howard Hinnant's civil_from_days.
    let z = secs / 86_400 + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = era * 400 + yoe + u64::from(month <= 2);
    let (h, m, s) = (secs / 3600 % 24, secs / 60 % 60, secs % 60);
    format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{:03}Z",
        since.subsec_millis()
    )
}

hermes_hooks_abi::export_plugin!(register);

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use hermes_hooks_abi::sdk::testing::{LocalHost, field};

    use super::*;

    #[test]
    fn every_event_family_gets_a_handler() {
        let host = LocalHost::register("activity-logger", register);
        assert_eq!(host.hook_names(), PATTERNS.to_vec());
    }

    #[test]
    fn an_event_becomes_one_line_with_its_context_spread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/activity.jsonl");
        let host = LocalHost::register("activity-logger", {
            let path = path.clone();
            move |ctx| log_events(ctx, &path)
        });
        host.fire(
            "agent:*",
            &[
                field::str("event_type", "agent:start"),
                field::json("context", r#"{"user_id":"42"}"#),
            ],
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let line: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(line["event"], "agent:start");
        assert_eq!(line["user_id"], "42");
    }

    #[test]
    fn the_log_path_comes_from_config_then_the_hook_dir_then_hermes_home() {
        let config = serde_json::json!({"path": "/tmp/x.jsonl"});
        let dir = Path::new("/home/u/.hermes/hooks/activity-logger");
        assert_eq!(
            log_path(&config, Some(dir), None),
            PathBuf::from("/tmp/x.jsonl")
        );
        let none = Value::Null;
        assert_eq!(
            log_path(&none, Some(dir), Some(Path::new("/h"))),
            PathBuf::from("/home/u/.hermes/logs/activity.jsonl")
        );
        assert_eq!(
            log_path(&none, None, Some(Path::new("/h"))),
            PathBuf::from("/h/logs/activity.jsonl")
        );
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let at = UNIX_EPOCH + Duration::from_millis(951_827_696_789);
        assert_eq!(rfc3339(at), "2000-02-29T12:34:56.789Z");
    }
}
