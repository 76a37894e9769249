//! Shadow hooks' records: what a shadow hook (`shadow: true`, `plugins.shadow`) would have
//! done at each firing, beside what the deciding hooks did, as a log line when it would
//! have refused the call and as one JSON line of `$HERMES_HOME/logs/shadow.jsonl` (private
//! to the user: it holds payloads), which `hermes hooks shadow-report` sums up.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use hermes_host::registry::{ShadowRecord, ShadowSink};
use serde_json::{Value, json};

use super::agent::trace::describe;

/// Where shadow records of a home go.
pub fn records_path(home: &hermes_host::home::Home) -> PathBuf {
    home.root().join("logs").join("shadow.jsonl")
}

/// Whether a worded outcome refuses the call: a block, or a dispatch skipped.
pub fn refuses(outcome: &str) -> bool {
    outcome.starts_with("blocked by ") || outcome.starts_with("skipped by ")
}

/// The rule a refusal names: `blocked by <label>: <message>` gives the label.
pub fn rule_of(outcome: &str) -> Option<&str> {
    let rest = outcome
        .strip_prefix("blocked by ")
        .or_else(|| outcome.strip_prefix("skipped by "))?;
    Some(rest.split_once(": ").map_or(rest, |(by, _)| by))
}

/// The sink of a running agent or gateway: records appended to `logs/shadow.jsonl`, a
/// warning when a shadow hook would have refused, a count for `gateway status`.
pub struct ShadowLog {
    file: PathBuf,
    /// The run's trace, where each shadow callback's answer is a `shadow` record too.
    trace: Option<std::sync::Arc<dyn hermes_host::registry::TraceSink>>,
    /// Shadow firings recorded, and of those how many disagreed with the real decision.
    pub recorded: AtomicU64,
    /// Of [`recorded`](ShadowLog::recorded), those that disagreed.
    pub disagreed: AtomicU64,
}

impl ShadowLog {
    /// Records for `home`, also written to `trace` when the run has one.
    pub fn new(
        home: &hermes_host::home::Home,
        trace: Option<std::sync::Arc<dyn hermes_host::registry::TraceSink>>,
    ) -> ShadowLog {
        ShadowLog {
            file: records_path(home),
            trace,
            recorded: AtomicU64::new(0),
            disagreed: AtomicU64::new(0),
        }
    }

    fn append(&self, line: &Value) {
        let result = hermes_host::private_file::open_append(&self.file)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(e) = result {
            tracing::warn!(
                "cannot record a shadow hook's answer in {}: {e}",
                self.file.display()
            );
        }
    }
}

impl ShadowSink for ShadowLog {
    fn record(&self, record: ShadowRecord) {
        let real = describe(&record.real);
        let mut callbacks = Vec::new();
        let mut all_agreed = true;
        for answer in &record.callbacks {
            if let Some(trace) = &self.trace {
                trace.record(hermes_host::registry::FiringRecord {
                    system: "shadow",
                    ..answer.clone()
                });
            }
            let decision = match &answer.error {
                Some(error) => format!("raised: {error}"),
                None => answer.decision.clone(),
            };
            let blocks = decision.starts_with("block") || decision.starts_with("skip");
            let agreed = if blocks || refuses(&real) {
                blocks == refuses(&real)
            } else {
                true
            };
            all_agreed &= agreed;
            if blocks {
                let reason = decision
                    .split_once(": ")
                    .map_or(decision.as_str(), |(_, r)| r);
                tracing::warn!(
                    "shadow {} would block: {reason} ({}; the real decision: {real})",
                    record.hook,
                    answer.callback
                );
            }
            callbacks.push(json!({
                "callback": answer.callback,
                "decision": decision,
                "agreed": agreed,
            }));
        }
        self.recorded.fetch_add(1, Ordering::Relaxed);
        if !all_agreed {
            self.disagreed.fetch_add(1, Ordering::Relaxed);
        }
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.append(&json!({
            "at": at,
            "hook": record.hook,
            "shadow": describe(&record.shadow),
            "real": real,
            "agreed": all_agreed,
            "callbacks": callbacks,
            "payload": record.payload,
        }));
    }
}

/// The records of `file` since `since` (seconds since the epoch), oldest first; lines that
/// are not records are passed over.
pub fn read_records(file: &Path, since: f64) -> std::io::Result<Vec<Value>> {
    let bytes = match hermes_host::private_file::read_regular(file) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    Ok(String::from_utf8_lossy(&bytes)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["at"].as_f64().is_some_and(|at| at >= since))
        .collect())
}
