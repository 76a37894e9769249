//! The files a `hermes run` session keeps under `$HERMES_HOME/sessions/`: its transcript
//! in the JSONL shape Claude Code writes, which Claude-format hooks read through
//! `transcript_path`, and its environment file, which SessionStart hooks get as
//! `CLAUDE_ENV_FILE`.
//!
//! The transcript has one JSON object per line, written as the conversation happens:
//!
//! ```json
//! {"type":"user","message":{"role":"user","content":"fix the test"},"sessionId":"s-1","uuid":"s-1-1","timestamp":"...","cwd":"/srv/proj"}
//! {"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"call-1","name":"Bash","input":{"command":"make test"}}]},...}
//! {"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"call-1","content":"ok"}]},...}
//! {"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Fixed."}]},...}
//! ```
//!
//! Tool names and inputs are Claude's (`Bash`, `file_path`), as in the hooks' payloads. The
//! gateway keeps its own transcripts in the reference's shape; these are `hermes run`'s.
//!
//! What a SessionStart hook writes into the environment file (`export NAME=value` lines, as
//! Claude Code documents) is sourced before each later `terminal` command of the session,
//! as Claude Code sources it before each Bash command.

use std::io::Write as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use hermes_host::private_file;
use serde_json::{Value, json};

/// One session's transcript file, appended to line by line.
pub struct SessionFiles {
    session_id: String,
    cwd: String,
    transcript: PathBuf,
    file: Mutex<Option<std::fs::File>>,
    lines: AtomicU64,
}

impl std::fmt::Debug for SessionFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionFiles")
            .field("transcript", &self.transcript)
            .finish_non_exhaustive()
    }
}

impl SessionFiles {
    /// Creates `<dir>/<session_id>.jsonl` and an empty `<dir>/<session_id>.env`, private to
    /// the user (the directory 0700, the files 0600), for a session working in `cwd`.
    ///
    /// # Errors
    ///
    /// When the directory or a file cannot be created, naming it.
    pub fn create(dir: &Path, session_id: &str, cwd: &Path) -> Result<SessionFiles, String> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        hermes_host::home::check_session_id(session_id)?;
        let transcript = dir.join(format!("{session_id}.jsonl"));
        let env = env_file(dir, session_id);
        // Never through a link, never someone else's file: a link planted at either name
        // would have its target appended to or emptied.
        let file = private_file::open_append(&transcript)
            .map_err(|e| format!("cannot create {}: {e}", transcript.display()))?;
        private_file::create_fresh(&env)
            .map_err(|e| format!("cannot create {}: {e}", env.display()))?;
        Ok(SessionFiles {
            session_id: session_id.to_string(),
            cwd: cwd.display().to_string(),
            transcript,
            file: Mutex::new(Some(file)),
            lines: AtomicU64::new(0),
        })
    }

    /// The user's message.
    pub fn user(&self, text: &str) {
        self.append("user", json!(text));
    }

    /// The model's tool call, with Claude's tool name and input.
    pub fn tool_use(&self, id: &str, name: &str, input: Value) {
        self.append(
            "assistant",
            json!([{"type": "tool_use", "id": id, "name": name, "input": input}]),
        );
    }

    /// What the model got back from a tool call.
    pub fn tool_result(&self, id: &str, content: &str) {
        self.append(
            "user",
            json!([{"type": "tool_result", "tool_use_id": id, "content": content}]),
        );
    }

    /// The model's answer.
    pub fn assistant(&self, text: &str) {
        self.append("assistant", json!([{"type": "text", "text": text}]));
    }

    fn append(&self, role: &str, content: Value) {
        let n = self.lines.fetch_add(1, Ordering::Relaxed) + 1;
        let line = json!({
            "type": role,
            "message": {"role": role, "content": content},
            "sessionId": self.session_id,
            "uuid": format!("{}-{n}", self.session_id),
            "timestamp": hermes_host::shell::consent::utc_now_iso(),
            "cwd": self.cwd,
        });
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let Some(file) = guard.as_mut() else {
            return;
        };
        // One write per line, so a reader never sees half of one.
        if let Err(e) = file.write_all(format!("{line}\n").as_bytes()) {
            tracing::warn!(
                "cannot write {}: {e}; the session goes on without its transcript",
                self.transcript.display()
            );
            *guard = None;
        }
    }
}

/// The environment file of session `session_id` in `dir`: `<dir>/<session_id>.env`.
pub fn env_file(dir: &Path, session_id: &str) -> PathBuf {
    dir.join(format!("{session_id}.env"))
}

/// The shell and the text that source `env_file` before `command`, when a SessionStart
/// hook wrote to it: `bash`, as Claude Code sources it, which reports a bad line (an
/// unterminated quote) and runs the command anyway where `sh` would give up on every
/// later command of the session. `("sh", command)` otherwise (no file, an empty one, or
/// one that is not the user's own private regular file: what it says would run before
/// every command).
pub fn with_env(env_file: &Path, command: &str) -> (&'static str, String) {
    match private_file::private_metadata(env_file) {
        Some(meta) if meta.len() > 0 => {
            let quoted = env_file.display().to_string().replace('\'', "'\\''");
            ("bash", format!(". '{quoted}'\n{command}"))
        }
        _ => ("sh", command.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn the_transcript_is_claude_shaped_jsonl_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let sessions = dir.path().join("sessions");
        let files = SessionFiles::create(&sessions, "s-1", Path::new("/srv/proj")).unwrap();
        files.user("hi");
        files.tool_use("c1", "Bash", json!({"command": "ls"}));
        files.tool_result("c1", "a b");
        files.assistant("done");
        let text = std::fs::read_to_string(&files.transcript).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0]["type"], "user");
        assert_eq!(lines[0]["message"]["content"], "hi");
        assert_eq!(lines[1]["message"]["content"][0]["name"], "Bash");
        assert_eq!(lines[2]["message"]["content"][0]["tool_use_id"], "c1");
        assert_eq!(lines[3]["message"]["content"][0]["text"], "done");
        assert_eq!(lines[3]["cwd"], "/srv/proj");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&files.transcript), 0o600);
        assert_eq!(mode(&env_file(&sessions, "s-1")), 0o600);
        assert_eq!(mode(&sessions), 0o700);
    }

    #[test]
    fn the_env_file_is_sourced_only_once_a_hook_wrote_to_it() {
        let dir = tempfile::tempdir().unwrap();
        SessionFiles::create(dir.path(), "s-2", dir.path()).unwrap();
        let env = env_file(dir.path(), "s-2");
        assert_eq!(with_env(&env, "echo hi"), ("sh", "echo hi".to_string()));
        std::fs::write(&env, "export A=1\n").unwrap();
        let (shell, text) = with_env(&env, "echo hi");
        assert_eq!(shell, "bash");
        assert!(
            text.starts_with(". '") && text.ends_with("\necho hi"),
            "{text}"
        );
        assert_eq!(
            with_env(&dir.path().join("none.env"), "ls"),
            ("sh", "ls".to_string())
        );
    }
}
