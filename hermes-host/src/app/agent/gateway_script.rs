//! The scripted model behind the gateway: a YAML file of replies chosen by regex, so a
//! gateway answers any chat message with no network and no API key.
//!
//! ```yaml
//! model: demo-model                  # reported to hooks as `model`
//! replies:                           # the first `match` that matches the message wins
//!   - match: "(?i)clean up"
//!     steps:                         # the agent script's step format
//!       - tool: terminal
//!         args: {command: "rm -rf build"}
//!       - final: Done.
//!   - match: "^remember"
//!     steps:
//!       - final: "Noted: {text}"     # {text} is the user's message
//!         echo: true
//! ```
//!
//! A message no reply matches gets a final answer that is the message itself.

use std::path::{Path, PathBuf};

use regex::Regex;
use serde::Deserialize;

use super::script::Step;

/// A gateway script: the model name and the replies.
#[derive(Clone, Debug)]
pub struct GatewayScript {
    /// The model name hooks see.
    pub model: String,
    /// The replies, tried in order.
    pub replies: Vec<Reply>,
    /// Where the script was read from (`delegate_task` child scripts are relative to it).
    pub dir: PathBuf,
}

/// One reply: a pattern and the model's steps when it matches.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The pattern, matched anywhere in the message (anchor it with `^`/`$` if needed).
    pub pattern: Regex,
    /// The model's responses, in order; `{text}` in a `final` is the user's message.
    pub steps: Vec<Step>,
}

/// The file's shape. Unknown keys are rejected, so a typo is an error, not a silent default.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GatewayScriptWire {
    #[serde(default = "default_model")]
    model: String,
    #[serde(default)]
    replies: Vec<ReplyWire>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyWire {
    #[serde(rename = "match")]
    pattern: String,
    #[serde(default)]
    steps: Vec<Step>,
}

fn default_model() -> String {
    "scripted-model".into()
}

impl Default for GatewayScript {
    /// No replies: every message is answered with itself.
    fn default() -> Self {
        GatewayScript {
            model: default_model(),
            replies: Vec::new(),
            dir: PathBuf::new(),
        }
    }
}

impl GatewayScript {
    /// Reads a gateway script file.
    ///
    /// # Errors
    ///
    /// A message naming the file and what is wrong (YAML syntax, an unknown key, a bad
    /// regex, a step with nothing in it).
    pub fn read(path: &Path) -> Result<GatewayScript, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut script =
            GatewayScript::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        script.dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(script)
    }

    /// Parses gateway script text.
    ///
    /// # Errors
    ///
    /// The parser's message, or which reply is wrong and why.
    pub fn parse(text: &str) -> Result<GatewayScript, String> {
        let wire: GatewayScriptWire = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
        let mut replies = Vec::with_capacity(wire.replies.len());
        for (i, reply) in wire.replies.into_iter().enumerate() {
            let pattern = Regex::new(&reply.pattern)
                .map_err(|e| format!("replies[{i}].match is not a valid regex: {e}"))?;
            for (j, step) in reply.steps.iter().enumerate() {
                if step.is_empty() {
                    return Err(format!(
                        "replies[{i}].steps[{j}] has neither `tool`, `tools`, `final`, `stream` nor `error`"
                    ));
                }
            }
            replies.push(Reply {
                pattern,
                steps: reply.steps,
            });
        }
        Ok(GatewayScript {
            model: wire.model,
            replies,
            dir: PathBuf::new(),
        })
    }

    /// The model's steps for `message`: the first matching reply's, with `{text}` in its
    /// final answers replaced by the message; else one final answer that is the message.
    pub fn steps_for(&self, message: &str) -> Vec<Step> {
        match self.replies.iter().find(|r| r.pattern.is_match(message)) {
            Some(reply) => reply
                .steps
                .iter()
                .map(|step| {
                    let mut step = step.clone();
                    if let Some(text) = &mut step.final_text {
                        *text = text.replace("{text}", message);
                    }
                    step
                })
                .collect(),
            // Built through serde, so fields added to `Step` later take their defaults.
            None => serde_json::from_value(serde_json::json!([{ "final": message }]))
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_matching_reply_wins() {
        let s = GatewayScript::parse(
            "model: m\nreplies:\n  - match: a\n    steps: [{final: first}]\n  - match: ab\n    steps: [{final: second}]\n",
        )
        .unwrap();
        assert_eq!(s.model, "m");
        assert_eq!(s.steps_for("ab")[0].final_text.as_deref(), Some("first"));
    }

    #[test]
    fn text_placeholder_is_the_message() {
        let s =
            GatewayScript::parse("replies:\n  - match: .\n    steps: [{final: 'got {text}'}]\n")
                .unwrap();
        assert_eq!(s.steps_for("x y")[0].final_text.as_deref(), Some("got x y"));
    }

    #[test]
    fn bad_regexes_and_unknown_keys_are_errors() {
        assert!(
            GatewayScript::parse("replies:\n  - match: '('\n")
                .unwrap_err()
                .contains("replies[0].match")
        );
        assert!(GatewayScript::parse("turns: []\n").is_err());
        assert!(
            GatewayScript::parse("replies:\n  - match: a\n    steps: [{}]\n")
                .unwrap_err()
                .contains("steps[0]")
        );
    }
}

/// What were these items' doc examples: the binary's docs are not doctested.
#[cfg(test)]
mod examples {
    #[test]
    fn parse_works_as_documented() {
        use crate::app::agent::GatewayScript;
        let s = GatewayScript::parse("replies:\n  - match: hi\n    steps:\n      - final: hello\n")
            .unwrap();
        assert_eq!(s.steps_for("oh hi")[0].final_text.as_deref(), Some("hello"));
        assert_eq!(s.steps_for("bye")[0].final_text.as_deref(), Some("bye"));
    }
}
