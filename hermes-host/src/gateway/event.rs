//! One emitted gateway event, as every hook's queue and handler sees it: the name, the
//! context, and the JSON forms handlers read, each serialised once for all hooks.

use std::sync::{Arc, OnceLock};

/// One emitted event, shared by every queue it is on.
pub(crate) struct Event {
    /// The event name, such as `agent:start`.
    pub event_type: String,
    /// The context object.
    pub context: serde_json::Value,
    context_json: OnceLock<String>,
    request_json: OnceLock<Arc<str>>,
}

impl Event {
    pub(crate) fn new(event_type: &str, context: serde_json::Value) -> Event {
        Event {
            event_type: event_type.to_string(),
            context,
            context_json: OnceLock::new(),
            request_json: OnceLock::new(),
        }
    }

    /// The context as compact JSON, serialised once for all hooks.
    pub(crate) fn context_json(&self) -> &str {
        self.context_json.get_or_init(|| self.context.to_string())
    }

    /// `{"event_type": ..., "context": {...}}` on one line: what an executable handler reads
    /// on stdin and a Python worker reads as a request. Serialised once for all hooks.
    pub(crate) fn request_json(&self) -> &str {
        self.request_arc_ref()
    }

    /// [`request_json`](Self::request_json), shared.
    pub(crate) fn request_arc(&self) -> Arc<str> {
        self.request_arc_ref().clone()
    }

    fn request_arc_ref(&self) -> &Arc<str> {
        self.request_json.get_or_init(|| {
            let event_type = serde_json::Value::String(self.event_type.clone());
            format!(
                r#"{{"event_type":{event_type},"context":{}}}"#,
                self.context_json()
            )
            .into()
        })
    }
}
