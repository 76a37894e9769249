//! The scripted model: a YAML file of user turns and the model's steps, so a whole agent
//! session runs with no network and no API key.
//!
//! ```yaml
//! model: demo-model          # reported to hooks as `model`
//! platform: cli              # reported to hooks as `platform`
//! turns:
//!   - user: Clean up the build directory
//!     steps:
//!       - tool: terminal                      # one tool call
//!         args: {command: "rm -rf build"}
//!       - tools:                              # parallel tool calls in one response
//!           - {tool: read_file, args: {path: notes.txt}}
//!           - {tool: write_file, args: {path: out.txt, content: hi}}
//!       - final: Done.                        # the final answer of the turn
//!         echo: true                          # append what the model received
//!   - user: And now?
//!     steps:
//!       - error: "401 Unauthorized"           # the provider fails; the turn ends
//!   - user: Fix the test
//!     steps:
//!       - final: Fixed.
//!     continuations:                          # when a Stop hook keeps the agent working:
//!       - steps:                              # the model's answer to the 1st continuation
//!           - tool: terminal
//!             args: {command: "make test"}
//!           - final: Tests pass.
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A whole scripted session.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The model name hooks see.
    #[serde(default = "default_model")]
    pub model: String,
    /// The platform hooks see (`cli` for `hermes run`).
    #[serde(default = "default_platform")]
    pub platform: String,
    /// A fixed session id (default: generated).
    #[serde(default)]
    pub session_id: Option<String>,
    /// The user's turns, in order.
    pub turns: Vec<Turn>,
    /// Where the script was read from; relative paths in it are relative to its directory.
    #[serde(skip)]
    pub dir: PathBuf,
}

fn default_model() -> String {
    "scripted-model".into()
}

fn default_platform() -> String {
    "cli".into()
}

/// One user message and the model's steps in answer.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The user's message.
    pub user: String,
    /// The model's responses, in order; the last one should be a `final`.
    #[serde(default)]
    pub steps: Vec<Step>,
    /// The model's responses when a Stop hook (or, for a delegated child's last turn, a
    /// SubagentStop hook) keeps it working after its final answer: one per continuation,
    /// in order. The hook's reason is the model's input for each.
    #[serde(default)]
    pub continuations: Vec<Continuation>,
}

/// The model's answer to one continuation a Stop hook asked for.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Continuation {
    /// The model's responses, in order; the last one should be a `final`.
    pub steps: Vec<Step>,
}

/// One model response: tool calls, or a final answer.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// A single tool call: the tool's name.
    #[serde(default)]
    pub tool: Option<String>,
    /// The single tool call's arguments.
    #[serde(default)]
    pub args: Option<serde_json::Value>,
    /// Several tool calls in one response.
    #[serde(default)]
    pub tools: Vec<ToolCall>,
    /// The final answer.
    #[serde(default, rename = "final")]
    pub final_text: Option<String>,
    /// Append what the model received (the user message with any injected context) to the
    /// final answer, so injected context is visible.
    #[serde(default)]
    pub echo: bool,
    /// The model provider fails with this message instead of answering (a 401, a
    /// timeout): `api_request_error` fires, and the turn ends there, not completed, with
    /// this error.
    #[serde(default)]
    pub error: Option<String>,
    /// The HTTP status of an `error` (429, 500, ...), which `api_request_error` reports
    /// and classifies.
    #[serde(default)]
    pub status: Option<i64>,
    /// The final answer streamed in these pieces: `on_stream_start`, one
    /// `on_stream_delta` per piece, `on_stream_end`. Without `final`, the answer is the
    /// pieces joined.
    #[serde(default)]
    pub stream: Vec<String>,
    /// Text the model says beside its tool calls (`on_interim_message`).
    #[serde(default)]
    pub interim: Option<String>,
}

/// A tool call the model makes.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool's name.
    pub tool: String,
    /// Its arguments (a JSON object).
    #[serde(default)]
    pub args: serde_json::Value,
}

impl Step {
    /// Whether the step says nothing the model would do.
    pub fn is_empty(&self) -> bool {
        self.calls().is_empty()
            && self.final_text.is_none()
            && self.stream.is_empty()
            && !self.echo
            && self.error.is_none()
    }

    /// The final answer: `final`, else the streamed pieces joined.
    pub fn final_answer(&self) -> Option<String> {
        self.final_text
            .clone()
            .or_else(|| (!self.stream.is_empty()).then(|| self.stream.concat()))
    }

    /// The tool calls of this step, in order.
    pub fn calls(&self) -> Vec<ToolCall> {
        let mut calls = Vec::new();
        if let Some(tool) = &self.tool {
            calls.push(ToolCall {
                tool: tool.clone(),
                args: self.args.clone().unwrap_or_else(|| serde_json::json!({})),
            });
        }
        calls.extend(self.tools.iter().cloned());
        calls
    }
}

impl Script {
    /// Reads a script file.
    ///
    /// # Errors
    ///
    /// A message naming the file, the line and what is wrong.
    pub fn read(path: &Path) -> Result<Script, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut script = Script::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        script.dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(script)
    }

    /// Parses script text.
    ///
    /// # Errors
    ///
    /// The parser's message, with line and column.
    pub fn parse(text: &str) -> Result<Script, String> {
        let script: Script = yaml_serde::from_str(text).map_err(|e| e.to_string())?;
        if let Some(id) = &script.session_id {
            // It names files under sessions/: nothing that could leave that directory.
            hermes_host::home::check_session_id(id).map_err(|e| format!("session_id: {e}"))?;
        }
        for (i, turn) in script.turns.iter().enumerate() {
            let lists = std::iter::once((format!("turns[{i}].steps"), &turn.steps)).chain(
                turn.continuations
                    .iter()
                    .enumerate()
                    .map(move |(k, c)| (format!("turns[{i}].continuations[{k}].steps"), &c.steps)),
            );
            for (place, steps) in lists {
                for (j, step) in steps.iter().enumerate() {
                    if step.is_empty() {
                        return Err(format!(
                            "{place}[{j}] has neither `tool`, `tools`, `final`, `stream` nor `error`"
                        ));
                    }
                }
            }
        }
        Ok(script)
    }
}

/// What were these items' doc examples: the binary's docs are not doctested.
#[cfg(test)]
mod examples {
    #[test]
    fn parse_works_as_documented() {
        let s = crate::app::agent::Script::parse(
            "turns:\n  - user: hi\n    steps:\n      - final: hello\n",
        )
        .unwrap();
        assert_eq!(s.turns[0].steps[0].final_text.as_deref(), Some("hello"));
    }
}
