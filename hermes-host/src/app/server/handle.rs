//! What a chat's worker does with one job, in the reference's order.
//!
//! A message:
//!
//! 1. `pre_gateway_dispatch` (not for internal messages), before authorisation: a skip
//!    drops the message with the log line `pre_gateway_dispatch skip: reason=<r>
//!    platform=<p> chat=<c>`, a rewrite replaces its text, an allow (or no answer)
//!    dispatches it;
//! 2. authorisation (not for internal messages): a user not in `gateway.allowed_users`
//!    gets a short refusal;
//! 3. a slash command (`/new`, `/reset`, ...) runs as a command (see `commands`);
//! 4. anything else is a turn: `session:start` on the session's first turn, the user's
//!    message to the transcript, [`Agent::run_turn`](crate::app::agent::Agent::run_turn) (plugin
//!    and shell hooks, `agent:start|step|end`), the new history entries to the transcript,
//!    and the answer to the chat.
//!
//! Ending a session (idle expiry, shutdown, `/new`): `session:end`, then
//! `on_session_finalize`.

use std::time::{Duration, Instant};

use hermes_hooks_abi::hooks::payload::GatewayDispatchEvent;
use serde_json::{Value, json};

use super::Core;
use super::capabilities::Capabilities;
use super::commands;
use super::sessions::{Chat, Job, Live, end_session};
use super::transcript::OpenTranscript;
use super::wire::{Inbound, Outbound, OutboundKind};
use hermes_host::gateway::HostCallsOf;
use hermes_host::registry::{DispatchVerdict, Outcome};

/// Runs one job of `chat`. `live` is the chat's session (taken out of the chat while the
/// job runs); `idle_for` is how long the chat had been idle when the job was taken.
pub(crate) fn run(core: &Core, chat: &Chat, job: Job, live: &mut Option<Live>, idle_for: Duration) {
    match job {
        Job::Message { message, origin } => {
            if let Some(live) = live.as_mut() {
                handle_message(core, chat, live, message);
            }
            origin.end(&core.router);
        }
        Job::Expire => {
            let idle = core.options.idle_timeout.unwrap_or(Duration::MAX);
            let Some(current) = live.as_mut() else { return };
            if current.is_known() && idle_for >= idle {
                end_session(core, chat, current, "session_expired", None);
                let fresh = core.new_session(&chat.platform, &chat.chat_id);
                core.chats.set_session_id(&chat.key, Some(&fresh.id));
                *live = Some(Live::fresh(fresh));
            }
        }
        Job::Close => {
            if let Some(current) = live.take() {
                if current.is_known() {
                    end_session(core, chat, &current, "shutdown", None);
                    core.chats.count_finalized();
                }
                core.chats.clear_session_id(&chat.key, &current.session.id);
            }
        }
        Job::Evict => {
            if let Some(current) = live.take() {
                if current.is_known() {
                    core.log.line(&format!(
                        "gateway: ended the session of {} chat {}, the one quiet longest: {} sessions are live (gateway.max_sessions)",
                        chat.platform, chat.chat_id, core.options.limits.max_sessions
                    ));
                    end_session(core, chat, &current, "session_evicted", None);
                }
                core.chats.clear_session_id(&chat.key, &current.session.id);
            }
        }
    }
}

fn handle_message(core: &Core, chat: &Chat, live: &mut Live, message: Inbound) {
    let mut text = message.text.clone();
    if !message.internal {
        match pre_gateway_dispatch(core, chat, &message) {
            DispatchVerdict::Skip { reason, .. } => {
                core.log.line(&format!(
                    "pre_gateway_dispatch skip: reason={reason} platform={} chat={}",
                    message.platform, message.chat_id
                ));
                return;
            }
            DispatchVerdict::Rewrite { text: new_text, .. } => text = new_text,
            DispatchVerdict::Allow { .. } | DispatchVerdict::Dispatch => {}
        }
        if !core.options.allowed_users.allows(&message.user_id) {
            core.log.line(&format!(
                "gateway: unauthorised user {} on {} chat {}: message refused",
                message.user_id, message.platform, message.chat_id
            ));
            core.reply(
                chat,
                &message,
                OutboundKind::Refusal,
                "Sorry, you are not authorised to use this agent.",
                None,
            );
            return;
        }
    }
    live.session.user_id = Some(message.user_id.clone());
    if let Some((name, args)) = commands::parse(&text) {
        commands::run(core, chat, live, &message, &name, &args);
        return;
    }
    turn(core, chat, live, &message, &text);
}

/// Fires `pre_gateway_dispatch` with the capability handles and traces its outcome.
fn pre_gateway_dispatch(core: &Core, chat: &Chat, message: &Inbound) -> DispatchVerdict {
    let event = GatewayDispatchEvent {
        platform: &message.platform,
        chat_id: &message.chat_id,
        user_id: &message.user_id,
        text: &message.text,
        message_id: message.message_id.as_deref(),
        session_key: &chat.key,
        chat_type: &message.chat_type,
        user_name: message.user_name.as_deref(),
    };
    let started = Instant::now();
    let agent = core.agent();
    let registry = &agent.registry;
    let capabilities = Capabilities { core };
    let verdict = registry.pre_gateway_dispatch(&event, &HostCallsOf(&capabilities));
    let callbacks = registry.entries(GatewayDispatchEvent::HOOK).len();
    agent.tracer.fired(
        GatewayDispatchEvent::HOOK,
        &event.fields(),
        callbacks,
        &Outcome::Dispatch(verdict.clone()),
        started.elapsed(),
    );
    verdict
}

/// One agent turn for `text` (the message's text after any rewrite).
fn turn(core: &Core, chat: &Chat, live: &mut Live, message: &Inbound, text: &str) {
    if !live.started {
        live.started = true;
        core.agent().emit(
            "session:start",
            json!({
                "platform": chat.platform,
                "user_id": message.user_id,
                "session_id": live.session.id,
                "session_key": chat.key,
            }),
        );
    }
    let session_id = live.session.id.clone();
    let mut transcript = core.recorder(&session_id);
    let mut entry = json!({
        "role": "user",
        "content": text,
        "platform": chat.platform,
        "chat_id": chat.chat_id,
        "user_id": message.user_id,
    });
    if let Some(id) = &message.message_id {
        entry["message_id"] = json!(id);
    }
    if text != message.text {
        entry["original"] = json!(message.text);
    }
    transcript.record(entry);

    let before = live.session.history.len();
    let steps = core.script.steps_for(text);
    let result = core.agent().run_turn(&mut live.session, text, &steps);
    // The turn's new history: the user's message (already written), then tool calls,
    // tool results and the answer.
    let new = live.session.history.get(before..).unwrap_or_default();
    let skip = usize::from(new.first().is_some_and(|m| m["role"] == "user"));
    for message in &new[skip..] {
        transcript.record(message.clone());
    }
    if result.interrupted {
        transcript.record(json!({ "role": "system", "content": "[interrupted]" }));
    }
    if let Some(stop) = &result.stopped {
        transcript.record(json!({ "role": "system", "content": format!("[{stop}]") }));
        core.reply(
            chat,
            message,
            OutboundKind::Notice,
            &format!("A hook stopped this turn: {}", stop.reason),
            Some(&session_id),
        );
    }
    if let Some(error) = &result.error {
        transcript
            .record(json!({ "role": "system", "content": format!("[model error: {error}]") }));
        core.log.line(&format!(
            "gateway: the model failed on {} chat {}: {error}",
            chat.platform, chat.chat_id
        ));
        core.reply(
            chat,
            message,
            OutboundKind::Notice,
            &format!("The model could not answer ({error}). Try again later."),
            Some(&session_id),
        );
    }
    if let Some(answer) = result.response {
        core.reply(
            chat,
            message,
            OutboundKind::Reply,
            &answer,
            Some(&session_id),
        );
    }
    keep_window(
        &mut live.session.history,
        core.options.limits.history_window,
    );
}

/// The most bytes of text a chat's history keeps in memory, whatever its window in entries:
/// 200 entries of 1 MiB messages would be 200 MiB for one chat.
pub const HISTORY_MAX_BYTES: usize = 16 << 20;

/// Bounds what a chat keeps in memory: its last `window` history entries, and at most
/// [`HISTORY_MAX_BYTES`] of their text, the last two entries always (everything is in its
/// transcript). Trimmed in steps of a quarter window, so a long chat does not shift its
/// whole window on every turn.
fn keep_window(history: &mut Vec<serde_json::Value>, window: usize) {
    if history.len() > window + window / 4 {
        let drop = history.len() - window;
        history.drain(..drop);
        history.shrink_to(window + window / 4 + 16);
    }
    let sizes: Vec<usize> = history.iter().map(text_bytes).collect();
    let mut total: usize = sizes.iter().sum();
    let mut drop = 0;
    while total > HISTORY_MAX_BYTES && history.len() - drop > 2 {
        total -= sizes[drop];
        drop += 1;
    }
    if drop > 0 {
        history.drain(..drop);
    }
}

impl Core {
    /// Sends `text` to the chat `message` came from.
    pub(crate) fn reply(
        &self,
        chat: &Chat,
        message: &Inbound,
        kind: OutboundKind,
        text: &str,
        session_id: Option<&str>,
    ) {
        let outbound = Outbound {
            platform: chat.platform.clone(),
            chat_id: chat.chat_id.clone(),
            kind,
            text: text.to_string(),
            session_id: session_id.map(str::to_string),
            reply_to: message.message_id.clone(),
        };
        if self.router.send(&outbound) == 0 {
            tracing::debug!(
                "gateway: nobody follows chat {} any more; answer dropped",
                chat.key
            );
        }
    }

    /// Appends entries to the transcript of `session_id` through one open file, for the
    /// several entries of a turn.
    pub(crate) fn recorder<'a>(&'a self, session_id: &'a str) -> Recorder<'a> {
        Recorder {
            core: self,
            session_id,
            open: None,
        }
    }
}

/// Writes a session's entries, stamped with the time, through one open transcript file,
/// opened at the first entry and closed when dropped. A failure is logged, and the chat
/// goes on: the next entry tries to open the file again, as a lone entry would.
pub(crate) struct Recorder<'a> {
    core: &'a Core,
    session_id: &'a str,
    open: Option<OpenTranscript>,
}

impl Recorder<'_> {
    /// Appends `entry`, stamped with the time.
    pub(crate) fn record(&mut self, entry: Value) {
        let mut stamped = serde_json::Map::new();
        stamped.insert("ts".into(), json!(unix_time()));
        if let Value::Object(fields) = entry {
            stamped.extend(fields);
        }
        let stamped = Value::Object(stamped);
        let written = match self.open.as_mut() {
            Some(file) => file.append(&stamped),
            None => self
                .core
                .transcripts
                .open(self.session_id)
                .and_then(|file| self.open.insert(file).append(&stamped)),
        };
        if let Err(e) = written {
            self.open = None;
            self.core
                .log
                .line(&format!("gateway: transcript not written: {e}"));
        }
    }
}

fn unix_time() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The bytes of text in a JSON value (its strings, keys included), without serialising it.
fn text_bytes(value: &serde_json::Value) -> usize {
    match value {
        serde_json::Value::String(s) => s.len(),
        serde_json::Value::Array(items) => items.iter().map(text_bytes).sum(),
        serde_json::Value::Object(map) => map.iter().map(|(k, v)| k.len() + text_bytes(v)).sum(),
        _ => 8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_is_bounded_in_bytes_as_well_as_entries() {
        let big = "x".repeat(1 << 20);
        let mut history: Vec<serde_json::Value> = (0..40)
            .map(|i| serde_json::json!({"role": "user", "content": format!("{i}{big}")}))
            .collect();
        keep_window(&mut history, 200);
        let total: usize = history.iter().map(text_bytes).sum();
        assert!(total <= HISTORY_MAX_BYTES, "{total}");
        assert!(
            history.last().unwrap()["content"]
                .as_str()
                .unwrap()
                .starts_with("39")
        );
        // The last two entries stay, however large.
        let mut huge: Vec<serde_json::Value> = (0..3)
            .map(|_| serde_json::json!({"content": "y".repeat(HISTORY_MAX_BYTES)}))
            .collect();
        keep_window(&mut huge, 200);
        assert_eq!(huge.len(), 2);
    }
}
