//! Slash commands. Every command emits `command:<name>` (`platform, user_id, command,
//! args`) first; then:
//!
//! | command | does |
//! |---|---|
//! | `/new`, `/reset` | `session:end`, `on_session_finalize(old)`, a new session id, `session:reset`, `on_session_reset(new)`; the next turn starts the new session (`session:start`, `on_session_start`) |
//! | `/status` | answers with the session id and how many turns it had |
//! | `/help` | lists the commands |
//! | anything else | answers that the command is unknown |

use hermes_hooks_abi::hooks::payload::SessionResetEvent;
use serde_json::json;

use super::Core;
use super::sessions::{Chat, Live, end_session};
use super::wire::{Inbound, OutboundKind};

const HELP: &str = "Commands: /new or /reset (start a new session), /status, /help";

/// `Some((name, args))` when `text` is a slash command: `/name`, then whitespace or the
/// end. The name is lower-cased, and a `@botname` suffix is dropped, as chat platforms
/// send it.
pub fn parse(text: &str) -> Option<(String, String)> {
    let rest = text.trim_start().strip_prefix('/')?;
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (word, args) = rest.split_at(end);
    let name = word.split_once('@').map_or(word, |(name, _bot)| name);
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    valid.then(|| (name.to_ascii_lowercase(), args.trim().to_string()))
}

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
        "help" => HELP.to_string(),
        other => format!("Unknown command /{other}. {HELP}"),
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

/// What were these items' doc examples: the binary's docs are not doctested.
#[cfg(test)]
mod examples {
    #[test]
    fn parse_works_as_documented() {
        use super::parse as parse_command;
        assert_eq!(
            parse_command("/New  now"),
            Some(("new".into(), "now".into()))
        );
        assert_eq!(
            parse_command("/reset@my_bot"),
            Some(("reset".into(), "".into()))
        );
        assert_eq!(parse_command("/usr/bin is a path"), None);
        assert_eq!(parse_command("hello /new"), None);
    }
}
