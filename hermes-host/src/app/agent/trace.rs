//! The trace of every hook firing: which system, which hook, what it decided, how long it
//! took. Human-readable lines by default, JSON lines for machines.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use hermes_hooks_abi::core::{EventView, Field, no_host_calls};
use hermes_host::registry::{DispatchVerdict, FiringRecord, Outcome, TraceSink};
use hermes_host::shell::wire::kwargs_from_view;

/// How the trace is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFormat {
    /// No trace.
    Off,
    /// One readable line per record.
    Text,
    /// One JSON object per line.
    Json,
}

impl std::str::FromStr for TraceFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(TraceFormat::Off),
            "text" => Ok(TraceFormat::Text),
            "json" => Ok(TraceFormat::Json),
            other => Err(format!(
                "unknown trace format '{other}' (valid: text, json, off)"
            )),
        }
    }
}

/// One trace record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TraceRecord {
    /// `fire` (a hook fired, with its combined outcome), `callback` (one callback's answer)
    /// or `gateway` (a gateway event emitted).
    pub kind: &'static str,
    /// `agent`, `plugin`, `shell`, `host` or `gateway`.
    pub system: &'static str,
    /// The hook or gateway event.
    pub hook: String,
    /// The callback's label, for `callback` records.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback: Option<String>,
    /// What was decided, in words.
    pub decision: String,
    /// How long it took, in microseconds.
    pub duration_us: u64,
    /// The failure, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For `fire` records: how many callbacks the hook had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callbacks: Option<usize>,
    /// In JSON traces, for `fire` records the payload's fields (as shell hooks receive
    /// them) and for `gateway` records the event's context, so `hermes bench --replay` can
    /// fire the run again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
}

/// Writes trace records as they happen (and keeps none: a gateway runs for weeks).
pub struct Tracer {
    format: TraceFormat,
    out: Mutex<Box<dyn Write + Send>>,
}

impl Tracer {
    /// A tracer writing `format` to `out`.
    pub fn new(format: TraceFormat, out: Box<dyn Write + Send>) -> Tracer {
        Tracer {
            format,
            out: Mutex::new(out),
        }
    }

    /// Records that `hook` fired at `callbacks` callbacks with `fields`, and what the
    /// combined outcome was.
    pub fn fired(
        &self,
        hook: &str,
        fields: &[Field<'_>],
        callbacks: usize,
        outcome: &Outcome,
        took: Duration,
    ) {
        let payload = (self.format == TraceFormat::Json).then(|| {
            let view = EventView::new(hook, fields, no_host_calls());
            serde_json::Value::Object(kwargs_from_view(&view, false))
        });
        self.write(TraceRecord {
            payload,
            kind: "fire",
            system: "agent",
            hook: hook.to_string(),
            callback: None,
            decision: describe(outcome),
            duration_us: took.as_micros() as u64,
            error: None,
            callbacks: Some(callbacks),
        });
    }

    /// Records a gateway event and its context.
    pub fn gateway(&self, event: &str, context: &serde_json::Value, hooks: usize) {
        let payload = (self.format == TraceFormat::Json).then(|| context.clone());
        self.write(TraceRecord {
            payload,
            kind: "gateway",
            system: "gateway",
            hook: event.to_string(),
            callback: None,
            decision: format!("queued for {hooks} hook(s)"),
            duration_us: 0,
            error: None,
            callbacks: Some(hooks),
        });
    }

    fn write(&self, record: TraceRecord) {
        // A hook nobody listens to is noise in the readable trace; JSON keeps every firing.
        let quiet = self.format == TraceFormat::Text
            && record.kind == "fire"
            && record.callbacks == Some(0);
        if self.format != TraceFormat::Off && !quiet {
            let line = match self.format {
                TraceFormat::Json => serde_json::to_string(&record).unwrap_or_default(),
                _ => text_line(&record),
            };
            if let Ok(mut out) = self.out.lock() {
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
        }
    }
}

impl TraceSink for Tracer {
    fn record(&self, r: FiringRecord) {
        self.write(TraceRecord {
            kind: "callback",
            system: r.system,
            hook: r.hook,
            callback: Some(r.callback),
            decision: r.decision,
            duration_us: r.duration.as_micros() as u64,
            error: r.error,
            callbacks: None,
            payload: None,
        });
    }
}

fn text_line(r: &TraceRecord) -> String {
    let took = format!("{:.2} ms", r.duration_us as f64 / 1000.0);
    match (r.kind, &r.callback) {
        ("callback", Some(cb)) => {
            let decision = r
                .error
                .as_ref()
                .map_or_else(|| r.decision.clone(), |e| format!("raised: {e}"));
            format!(
                "[trace]   {:<7} {cb}: {}  ({took})",
                r.system,
                one_line(&decision)
            )
        }
        ("gateway", _) => format!("[trace] gateway {}: {}", r.hook, r.decision),
        _ => format!("[trace] {} -> {}  ({took})", r.hook, one_line(&r.decision)),
    }
}

fn one_line(text: &str) -> String {
    let flat = text.replace('\n', "\\n");
    if flat.chars().count() > 160 {
        format!("{}...", flat.chars().take(157).collect::<String>())
    } else {
        flat
    }
}

/// A combined outcome in words.
pub fn describe(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Observed => "observed (answers are ignored for this hook)".into(),
        Outcome::Tool(v) => match (&v.blocked, &v.modified_args) {
            (Some(b), _) if b.approval.is_some() => {
                format!("needs approval, asked by {}: {}", b.by, b.message)
            }
            (Some(b), _) => format!("blocked by {}: {}", b.by, b.message),
            (None, Some(args)) => format!(
                "allowed, arguments modified: {}",
                serde_json::Value::Object((**args).clone())
            ),
            (None, None) => "allowed".into(),
        },
        Outcome::Context(Some(text)) => format!("context: {text}"),
        Outcome::Context(None) => "no context".into(),
        Outcome::Replace(Some(text)) => format!("replaced with: {text}"),
        Outcome::Replace(None) => "unchanged".into(),
        Outcome::Dispatch(DispatchVerdict::Dispatch) => "dispatch".into(),
        Outcome::Dispatch(DispatchVerdict::Skip { reason, by }) => {
            format!("skipped by {by}: {reason}")
        }
        Outcome::Dispatch(DispatchVerdict::Rewrite { text, by }) => {
            format!("rewritten by {by}: {text}")
        }
        Outcome::Dispatch(DispatchVerdict::Allow { by }) => format!("allowed by {by}"),
        Outcome::Verify(Some(c)) => format!("kept working by {}: {}", c.by, c.message),
        Outcome::Verify(None) => "may finish".into(),
    }
}

/// What were these items' doc examples: the binary's docs are not doctested.
#[cfg(test)]
mod examples {
    #[test]
    fn describe_works_as_documented() {
        use hermes_host::registry::Outcome;
        assert_eq!(
            crate::app::agent::trace::describe(&Outcome::Observed),
            "observed (answers are ignored for this hook)"
        );
    }
}
