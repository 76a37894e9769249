//! Per-session counters of tool calls, by tool and status.

use std::{
    collections::{BTreeMap, HashMap},
    sync::{Mutex, PoisonError},
};

use serde_json::Value;

use crate::summary::{Summary, ToolSummary};

/// The counters of one (tool, status) pair.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Counter {
    count: u64,
    total_ms: u64,
    max_ms: u64,
}

/// The counters of one session, by (tool, status).
type SessionCounters = BTreeMap<(String, String), Counter>;

/// Counters for every session that has made tool calls since its last summary.
#[derive(Default)]
pub struct Tally {
    sessions: Mutex<HashMap<String, SessionCounters>>,
}

impl Tally {
    /// Counts one call of `tool` that ended with `status` after `duration_ms` (a negative
    /// duration counts as zero).
    pub fn record(&self, session_id: &str, tool: &str, status: &str, duration_ms: i64) {
        let ms = u64::try_from(duration_ms).unwrap_or(0);
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        let counter = sessions
            .entry(session_id.to_string())
            .or_default()
            .entry((tool.to_string(), status.to_string()))
            .or_default();
        counter.count += 1;
        counter.total_ms += ms;
        counter.max_ms = counter.max_ms.max(ms);
    }

    /// Removes the counters of `session_id` and sums them up per tool; `None` when the
    /// session made no tool calls.
    pub fn take(&self, session_id: &str) -> Option<Summary> {
        let counters = {
            let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
            sessions.remove(session_id)?
        };
        let mut tools: BTreeMap<String, ToolSummary> = BTreeMap::new();
        for ((tool, status), counter) in counters {
            let summary = tools
                .entry(tool.clone())
                .or_insert_with(|| ToolSummary::named(&tool));
            summary.count += counter.count;
            summary.total_ms += counter.total_ms;
            summary.max_ms = summary.max_ms.max(counter.max_ms);
            if status == "error" {
                summary.errors += counter.count;
            }
            *summary.statuses.entry(status).or_default() += counter.count;
        }
        Some(Summary {
            tools: tools.into_values().collect(),
        })
    }
}

/// The status of a finished call: the host's `status`, or, from a host that does not send
/// one, `error` when the result is a JSON object with an `error` key and `ok` otherwise.
pub fn status_of<'a>(status: &'a str, result: &str) -> &'a str {
    if !status.is_empty() {
        return status;
    }
    match serde_json::from_str::<Value>(result) {
        Ok(Value::Object(map)) if map.contains_key("error") => "error",
        _ => "ok",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_calls_latency_and_errors_per_tool() {
        let tally = Tally::default();
        tally.record("s1", "terminal", "ok", 100);
        tally.record("s1", "terminal", "error", 300);
        tally.record("s1", "terminal", "ok", 201);
        tally.record("s1", "read_file", "ok", 4);
        let summary = tally.take("s1").unwrap();
        let terminal = &summary.tools[1];
        assert_eq!(summary.tools[0].tool, "read_file");
        assert_eq!(
            (
                terminal.tool.as_str(),
                terminal.count,
                terminal.errors,
                terminal.total_ms,
                terminal.max_ms
            ),
            ("terminal", 3, 1, 601, 300)
        );
        assert_eq!(terminal.mean_ms(), 200);
        assert_eq!(
            terminal.statuses,
            BTreeMap::from([("error".into(), 1), ("ok".into(), 2)])
        );
    }

    #[test]
    fn sessions_are_counted_apart_and_taking_one_clears_only_it() {
        let tally = Tally::default();
        tally.record("s1", "terminal", "ok", 10);
        tally.record("s2", "terminal", "ok", 20);
        assert_eq!(tally.take("s1").unwrap().tools[0].total_ms, 10);
        assert!(tally.take("s1").is_none());
        assert_eq!(tally.take("s2").unwrap().tools[0].total_ms, 20);
    }

    #[test]
    fn a_negative_duration_counts_as_zero() {
        let tally = Tally::default();
        tally.record("s1", "web_search", "ok", -5);
        let summary = tally.take("s1").unwrap();
        assert_eq!((summary.tools[0].count, summary.tools[0].max_ms), (1, 0));
    }

    #[test]
    fn a_missing_status_is_read_from_the_result() {
        assert_eq!(status_of("blocked", "{}"), "blocked");
        assert_eq!(status_of("", r#"{"error": "no such file"}"#), "error");
        assert_eq!(status_of("", r#"{"output": "error: none"}"#), "ok");
        assert_eq!(status_of("", "not json"), "ok");
    }
}
