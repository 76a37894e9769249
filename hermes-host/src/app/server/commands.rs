//! Slash commands. Every command emits `command:<name>` (`platform, user_id, command,
//! args`) first; then:
//!
//! | command | does |
//! |---|---|
//! | `/new`, `/reset` | `session:end`, `on_session_finalize(old)`, a new session id, `session:reset`, `on_session_reset(new)`; the next turn starts the new session (`session:start`, `on_session_start`) |
//! | `/status` | answers with the session id and how many turns it had |
//! | `/help` | lists the commands, the plugins' too |
//! | a plugin's command (`ctx.register_command`) | answers what its handler returns (nothing when it returns `None`) |
//! | anything else | answers that the command is unknown |

use hermes_hooks_abi::hooks::payload::SessionResetEvent;
use serde_json::json;

use super::Core;
use super::sessions::{Chat, Live, end_session};
use super::wire::{Inbound, OutboundKind};

const HELP: &str = "Commands: /new or /reset (start a new session), /status, /help";

/// The built-in commands, then the plugins' (`/name <args hint>`).
fn help(core: &Core) -> String {
    let mut text = HELP.to_string();
    for spec in core.agent().registry.commands().specs() {
        text.push_str(&format!(", /{}", spec.name));
        if !spec.args_hint.is_empty() {
            text.push_str(&format!(" {}", spec.args_hint));
        }
        text.push_str(&format!(" ({})", spec.description));
    }
    text
}

pub use hermes_host::commands::parse;

/// Runs command `name` for `message`.
pub(crate) fn run(
    core: &Core,
    chat: &Chat,
    live: &mut Live,
    message: &Inbound,
    name: &str,
    args: &str,
) {
    core.agent().emit(
        &format!("command:{name}"),
        json!({
            "platform": chat.platform,
            "user_id": message.user_id,
            "command": name,
            "args": args,
        }),
    );
    let answer = match name {
        "new" | "reset" => {
            reset(core, chat, live, &message.user_id);
            format!("Started a new session ({}).", live.session.id)
        }
        "status" => {
            let turns = live.session.turns;
            format!(
                "Session {} on {}: {turns} turn(s), model {}.",
                live.session.id, chat.key, live.session.model
            )
        }
        "help" => help(core),
        other => match core
            .agent()
            .registry
            .commands()
            .run(other, args, &|tool, args| {
                core.agent().dispatch_tool(&live.session, tool, args)
            }) {
            Some(Ok(Some(answer))) => answer,
            // The plugin's handler answered nothing: nothing is sent.
            Some(Ok(None)) => return,
            Some(Err(why)) => {
                core.log
                    .line(&format!("gateway: plugin command /{other} failed: {why}"));
                format!("/{other} failed: {why}")
            }
            None => format!("Unknown command /{other}. {}", help(core)),
        },
    };
    core.reply(
        chat,
        message,
        OutboundKind::Notice,
        &answer,
        Some(&live.session.id),
    );
}

/// `/new` and `/reset`: finalize the old session, swap in a new one, announce the reset.
fn reset(core: &Core, chat: &Chat, live: &mut Live, user_id: &str) {
    let mut fresh = core.new_session(&chat.platform, &chat.chat_id);
    fresh.user_id = Some(user_id.to_string());
    // Claude Code starts the session after its `/clear` with SessionStart `source: clear`.
    hermes_host::run_control::note_session_source(&fresh.id, "clear");
    end_session(core, chat, live, "new_session", Some(&fresh.id));
    core.chats.set_session_id(&chat.key, Some(&fresh.id));
    let old_session_id = std::mem::take(&mut live.session.id);
    *live = Live {
        session: fresh,
        started: false,
        announced: true,
    };
    core.agent().emit(
        "session:reset",
        json!({ "platform": chat.platform, "user_id": user_id, "session_key": chat.key }),
    );
    let event = SessionResetEvent {
        session_id: &live.session.id,
        platform: &chat.platform,
        reason: "new_session",
        old_session_id: Some(&old_session_id),
        new_session_id: Some(&live.session.id),
    };
    core.agent().fire(SessionResetEvent::HOOK, &event.fields());
}
