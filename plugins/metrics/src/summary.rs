//! What one session's tool calls added up to, as log lines and as one JSON line.

use std::{collections::BTreeMap, time::SystemTime};

use serde_json::{Map, Value, json};

use crate::timestamp;

/// The per-tool totals of one session, sorted by tool name.
#[derive(Debug, PartialEq)]
pub struct Summary {
    /// One entry per tool that was called.
    pub tools: Vec<ToolSummary>,
}

/// The totals of one tool.
#[derive(Debug, PartialEq)]
pub struct ToolSummary {
    /// The tool's name.
    pub tool: String,
    /// How many calls finished, whatever their status.
    pub count: u64,
    /// How many of them had status `error`.
    pub errors: u64,
    /// Their summed duration, in milliseconds.
    pub total_ms: u64,
    /// The longest one, in milliseconds.
    pub max_ms: u64,
    /// How many calls ended with each status (`ok`, `error`, `blocked`, ...).
    pub statuses: BTreeMap<String, u64>,
}

impl ToolSummary {
    /// Zero calls of `tool`.
    pub fn named(tool: &str) -> ToolSummary {
        ToolSummary {
            tool: tool.to_string(),
            count: 0,
            errors: 0,
            total_ms: 0,
            max_ms: 0,
            statuses: BTreeMap::new(),
        }
    }

    /// The mean duration, rounded to the nearest millisecond (0 without calls).
    pub fn mean_ms(&self) -> u64 {
        (self.total_ms + self.count / 2)
            .checked_div(self.count)
            .unwrap_or(0)
    }
}

impl Summary {
    /// One log line per tool:
    /// `session <id>: <tool>: <n> calls, <e> errors, mean <m> ms, max <x> ms`.
    pub fn log_lines(&self, session_id: &str) -> Vec<String> {
        self.tools
            .iter()
            .map(|t| {
                format!(
                    "session {session_id}: {}: {} calls, {} errors, mean {} ms, max {} ms",
                    t.tool,
                    t.count,
                    t.errors,
                    t.mean_ms(),
                    t.max_ms
                )
            })
            .collect()
    }

    /// The summary line of the metrics file: `{"ts", "session_id", "completed",
    /// "interrupted", "tools": {"<tool>": {"count", "errors", "mean_ms", "max_ms",
    /// "total_ms", "statuses"}}}`.
    pub fn to_json(
        &self,
        session_id: &str,
        completed: bool,
        interrupted: bool,
        at: SystemTime,
    ) -> Value {
        let tools: Map<String, Value> = self
            .tools
            .iter()
            .map(|t| {
                let stats = json!({
                    "count": t.count,
                    "errors": t.errors,
                    "mean_ms": t.mean_ms(),
                    "max_ms": t.max_ms,
                    "total_ms": t.total_ms,
                    "statuses": t.statuses,
                });
                (t.tool.clone(), stats)
            })
            .collect();
        json!({
            "ts": timestamp::rfc3339(at),
            "session_id": session_id,
            "completed": completed,
            "interrupted": interrupted,
            "tools": tools,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn summary() -> Summary {
        let mut terminal = ToolSummary::named("terminal");
        (
            terminal.count,
            terminal.errors,
            terminal.total_ms,
            terminal.max_ms,
        ) = (3, 1, 601, 300);
        terminal.statuses = BTreeMap::from([("error".into(), 1), ("ok".into(), 2)]);
        let mut search = ToolSummary::named("web_search");
        (search.count, search.total_ms, search.max_ms) = (2, 1001, 700);
        search.statuses = BTreeMap::from([("ok".into(), 2)]);
        Summary {
            tools: vec![terminal, search],
        }
    }

    #[test]
    fn the_mean_is_rounded_to_the_nearest_millisecond() {
        let s = summary();
        assert_eq!((s.tools[0].mean_ms(), s.tools[1].mean_ms()), (200, 501));
        assert_eq!(ToolSummary::named("idle").mean_ms(), 0);
    }

    #[test]
    fn each_tool_gets_one_log_line() {
        assert_eq!(
            summary().log_lines("s1"),
            vec![
                "session s1: terminal: 3 calls, 1 errors, mean 200 ms, max 300 ms",
                "session s1: web_search: 2 calls, 0 errors, mean 501 ms, max 700 ms",
            ]
        );
    }

    #[test]
    fn the_summary_is_one_json_line() {
        let at = UNIX_EPOCH + Duration::from_millis(1_709_210_096_789);
        assert_eq!(
            summary().to_json("s1", true, false, at).to_string(),
            concat!(
                r#"{"ts":"2024-02-29T12:34:56.789Z","session_id":"s1","completed":true,"interrupted":false,"tools":{"#,
                r#""terminal":{"count":3,"errors":1,"mean_ms":200,"max_ms":300,"total_ms":601,"statuses":{"error":1,"ok":2}},"#,
                r#""web_search":{"count":2,"errors":0,"mean_ms":501,"max_ms":700,"total_ms":1001,"statuses":{"ok":2}}}}"#
            )
        );
    }
}
