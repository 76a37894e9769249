//! Shows an observer plugin: one audit-log JSON line per tool call, before and after it runs.

// Shared with every plugin that keeps data in files.
use hermes_hooks_abi::sdk::data::{jsonl, location, timestamp};

mod entry;

use std::{path::PathBuf, time::SystemTime};

use hermes_hooks_abi::prelude::*;

/// Appends every tool call to the audit log: the configured `path`, else `audit.jsonl` in the
/// plugin's directory (or in `$HERMES_HOME`, or in the working directory).
pub fn register(ctx: &mut PluginContext) {
    let home = std::env::var_os("HERMES_HOME");
    let plugin_dir = ctx.plugin_dir();
    let path = location::resolve(
        &ctx.config(),
        plugin_dir.as_deref(),
        home.as_deref(),
        "audit.jsonl",
    );
    tracing::debug!("audit log: {}", path.display());
    log_tool_calls(ctx, path);
}

/// Registers the two hooks that append to the audit log at `path` ([`register`], once the
/// path is known).
pub fn log_tool_calls(ctx: &mut PluginContext, path: PathBuf) {
    let before = path.clone();
    ctx.named("audit_pre_tool_call").pre_tool_call(move |e| {
        jsonl::append_or_warn(&before, &entry::before(e, SystemTime::now()));
        ToolDecision::Continue
    });
    ctx.named("audit_post_tool_call")
        .post_tool_call(move |e| jsonl::append_or_warn(&path, &entry::after(e, SystemTime::now())));
}

hermes_hooks_abi::export_plugin!(register);

#[cfg(test)]
mod tests {
    use std::path::Path;

    use hermes_hooks_abi::sdk::testing::{LocalHost, field};

    use super::*;

    fn audit_host(path: &Path) -> LocalHost {
        let path = path.to_path_buf();
        LocalHost::register("audit-log", move |ctx| log_tool_calls(ctx, path))
    }

    /// The file's lines with each timestamp checked and replaced by `<ts>`.
    fn lines_with_masked_ts(path: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap();
        text.lines()
            .map(|line| {
                let rest = line.strip_prefix(r#"{"ts":""#).expect("ts comes first");
                let (ts, rest) = rest.split_at(24);
                assert!(
                    ts.starts_with("20") && &ts[10..11] == "T" && ts.ends_with('Z'),
                    "{ts}"
                );
                format!(r#"{{"ts":"<ts>{rest}"#)
            })
            .collect()
    }

    #[test]
    fn register_observes_both_sides_of_a_tool_call() {
        let host = LocalHost::register("audit-log", register);
        assert_eq!(host.hook_names(), vec!["pre_tool_call", "post_tool_call"]);
        assert_eq!(host.register_error(), None);
    }

    #[test]
    fn pre_tool_call_appends_one_line_and_lets_the_call_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let host = audit_host(&path);
        let replies = host.fire(
            "pre_tool_call",
            &[
                field::str("tool_name", "terminal"),
                field::json("args", r#"{"command": "ls -la", "timeout": 30}"#),
                field::str("task_id", "t1"),
                field::str("session_id", "s1"),
                field::str("tool_call_id", "call_1"),
            ],
        );
        assert_eq!(replies, vec![Ok(None)]);
        assert_eq!(
            lines_with_masked_ts(&path),
            vec![
                r#"{"ts":"<ts>","event":"pre_tool_call","session_id":"s1","tool_name":"terminal","tool_call_id":"call_1","args":{"command":"ls -la","timeout":30}}"#
            ]
        );
    }

    #[test]
    fn post_tool_call_records_duration_status_and_result_length_in_characters() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let host = audit_host(&path);
        host.fire(
            "post_tool_call",
            &[
                field::str("tool_name", "read_file"),
                field::json("args", r#"{"path": "notes.txt"}"#),
                field::str("result", "héllo wörld"),
                field::str("session_id", "s1"),
                field::str("tool_call_id", "call_2"),
                field::int("duration_ms", 42),
                field::str("status", "ok"),
            ],
        );
        assert_eq!(
            lines_with_masked_ts(&path),
            vec![
                r#"{"ts":"<ts>","event":"post_tool_call","session_id":"s1","tool_name":"read_file","tool_call_id":"call_2","args":{"path":"notes.txt"},"duration_ms":42,"status":"ok","result_chars":11}"#
            ]
        );
    }

    #[test]
    fn every_event_adds_a_line_after_the_existing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        std::fs::write(&path, "{\"earlier\":true}\n").unwrap();
        let host = audit_host(&path);
        host.fire("pre_tool_call", &[field::str("tool_name", "web_search")]);
        host.fire("post_tool_call", &[field::str("tool_name", "web_search")]);
        let text = std::fs::read_to_string(&path).unwrap();
        let events: Vec<String> = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .map(|v| v["event"].as_str().unwrap_or("-").to_string())
            .collect();
        assert_eq!(events, vec!["-", "pre_tool_call", "post_tool_call"]);
    }

    #[test]
    fn a_failed_write_is_logged_and_the_tool_call_still_runs() {
        let dir = tempfile::tempdir().unwrap();
        // A directory where the file should be: opening it for append fails.
        let host = audit_host(dir.path());
        assert_eq!(
            host.fire("pre_tool_call", &[field::str("tool_name", "terminal")]),
            vec![Ok(None)]
        );
        assert_eq!(
            host.fire("post_tool_call", &[field::str("tool_name", "terminal")]),
            vec![Ok(None)]
        );
    }
}
