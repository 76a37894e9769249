//! Shows per-session state: tool calls counted as they finish, summed up when the session ends.

// Shared with every plugin that keeps data in files.
use hermes_hooks_abi::sdk::data::{jsonl, location, timestamp};

mod summary;
mod tally;

use std::{path::PathBuf, sync::Arc, time::SystemTime};

use hermes_hooks_abi::prelude::*;

pub use summary::{Summary, ToolSummary};
pub use tally::Tally;

/// Counts every tool call, and at the end of each session's run logs and writes a summary to
/// the configured `path`, else `metrics.jsonl` in the plugin's directory.
pub fn register(ctx: &mut PluginContext) {
    let home = std::env::var_os("HERMES_HOME");
    let plugin_dir = ctx.plugin_dir();
    let path = location::resolve(
        &ctx.config(),
        plugin_dir.as_deref(),
        home.as_deref(),
        "metrics.jsonl",
    );
    tracing::debug!("metrics file: {}", path.display());
    count_tool_calls(ctx, path);
}

/// Registers the counting and summing hooks, writing summaries to `path` ([`register`], once
/// the path is known).
pub fn count_tool_calls(ctx: &mut PluginContext, path: PathBuf) {
    let tally = Arc::new(Tally::default());
    let counter = Arc::clone(&tally);
    ctx.named("count_tool_call").post_tool_call(move |e| {
        let status = tally::status_of(e.status(), e.result());
        counter.record(e.session_id(), e.tool_name(), status, e.duration_ms());
    });
    ctx.named("summarise_session").on_session_end(move |e| {
        let Some(summary) = tally.take(e.session_id()) else {
            return;
        };
        for line in summary.log_lines(e.session_id()) {
            tracing::info!("{line}");
        }
        let line = summary.to_json(
            e.session_id(),
            e.completed(),
            e.interrupted(),
            SystemTime::now(),
        );
        jsonl::append_or_warn(&path, &line);
    });
}

hermes_hooks_abi::export_plugin!(register);

#[cfg(test)]
mod tests {
    use std::path::Path;

    use hermes_hooks_abi::sdk::testing::{LocalHost, field};

    use super::*;

    fn metrics_host(path: &Path) -> LocalHost {
        let path = path.to_path_buf();
        LocalHost::register("metrics", move |ctx| count_tool_calls(ctx, path))
    }

    fn tool_call(host: &LocalHost, session: &str, tool: &str, status: &str, ms: i64) {
        let replies = host.fire(
            "post_tool_call",
            &[
                field::str("tool_name", tool),
                field::str("result", "{}"),
                field::str("session_id", session),
                field::int("duration_ms", ms),
                field::str("status", status),
            ],
        );
        assert_eq!(replies, vec![Ok(None)]);
    }

    fn end_session(host: &LocalHost, session: &str) {
        let replies = host.fire(
            "on_session_end",
            &[
                field::str("session_id", session),
                field::bool("completed", true),
                field::bool("interrupted", false),
            ],
        );
        assert_eq!(replies, vec![Ok(None)]);
    }

    /// The file's lines with each timestamp replaced by `<ts>`.
    fn lines_with_masked_ts(path: &Path) -> Vec<String> {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .map(|line| {
                let rest = line.strip_prefix(r#"{"ts":""#).expect("ts comes first");
                format!(r#"{{"ts":"<ts>{}"#, &rest[24..])
            })
            .collect()
    }

    #[test]
    fn register_counts_tool_calls_and_sums_up_at_session_end() {
        let host = LocalHost::register("metrics", register);
        assert_eq!(host.hook_names(), vec!["post_tool_call", "on_session_end"]);
    }

    #[test]
    fn session_end_writes_one_summary_line_and_clears_the_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let host = metrics_host(&path);
        tool_call(&host, "s1", "terminal", "ok", 120);
        tool_call(&host, "s1", "terminal", "error", 80);
        tool_call(&host, "s1", "read_file", "ok", 3);
        tool_call(&host, "s2", "terminal", "ok", 999);
        end_session(&host, "s1");
        end_session(&host, "s1");
        assert_eq!(
            lines_with_masked_ts(&path),
            vec![concat!(
                r#"{"ts":"<ts>","session_id":"s1","completed":true,"interrupted":false,"tools":{"#,
                r#""read_file":{"count":1,"errors":0,"mean_ms":3,"max_ms":3,"total_ms":3,"statuses":{"ok":1}},"#,
                r#""terminal":{"count":2,"errors":1,"mean_ms":100,"max_ms":120,"total_ms":200,"statuses":{"error":1,"ok":1}}}}"#
            )]
        );
    }

    #[test]
    fn a_session_without_tool_calls_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let host = metrics_host(&path);
        end_session(&host, "quiet");
        assert!(!path.exists());
    }

    #[test]
    fn counting_starts_again_after_a_summary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let host = metrics_host(&path);
        tool_call(&host, "s1", "terminal", "ok", 10);
        end_session(&host, "s1");
        tool_call(&host, "s1", "terminal", "blocked", 0);
        end_session(&host, "s1");
        let lines = lines_with_masked_ts(&path);
        assert_eq!(lines.len(), 2);
        assert!(lines[1].ends_with(r#""terminal":{"count":1,"errors":0,"mean_ms":0,"max_ms":0,"total_ms":0,"statuses":{"blocked":1}}}}"#), "{}", lines[1]);
    }
}
