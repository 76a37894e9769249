//! The agent's tools: `terminal`, `read_file`, `write_file` (and `delegate_task`, which lives
//! in the agent loop because it runs child sessions).
//!
//! Tools return the text the model sees. Failures are results too (`{"error": ...}`), never
//! a panic or an early exit of the loop.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use hermes_host::process::{self, Ended, Run};

/// How much terminal output the model sees; the rest is cut with a note.
pub const TERMINAL_OUTPUT_LIMIT: usize = 8 * 1024;

/// How much terminal output is read at all; the rest is discarded while the command runs.
const TERMINAL_READ_CAP: usize = 4 << 20;

/// What a terminal command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TerminalRun {
    /// Combined stdout and stderr, before truncation.
    pub output: String,
    /// The exit code (-1 when killed by a signal or the command could not start).
    pub returncode: i64,
    /// Whether it was stopped by an interrupt or its timeout.
    pub stopped: Option<&'static str>,
}

/// Runs `command` with `<shell> -c` in `cwd` (`sh`, or `bash` where Claude Code's Bash
/// semantics matter), in its own process group, until it exits, its timeout passes, or
/// `interrupt` is set (then the whole group is killed). When the command itself exits,
/// whatever it left running in its group is killed too, so its output is complete when
/// the command is.
pub fn run_terminal(
    shell: &str,
    command: &str,
    cwd: &Path,
    timeout: Duration,
    interrupt: &AtomicBool,
) -> TerminalRun {
    let mut cmd = Command::new(shell);
    cmd.arg("-c")
        .arg(format!("exec 2>&1; {command}"))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stderr(Stdio::null());
    let how = Run::new()
        .capture_stdout(TERMINAL_READ_CAP)
        .timeout(timeout)
        .interrupt(interrupt)
        .kill_group_on_exit();
    let out = match process::run(&mut cmd, &how) {
        Ok(out) => out,
        Err(e) => {
            return TerminalRun {
                output: format!("cannot start {shell}: {e}"),
                returncode: -1,
                stopped: None,
            };
        }
    };
    let stopped = match out.ended {
        Ended::Completed | Ended::Failed(_) => None,
        Ended::TimedOut { .. } => Some("timed out"),
        Ended::Interrupted { .. } => Some("interrupted"),
    };
    TerminalRun {
        output: out.stdout.lossy(),
        returncode: out.status.and_then(|s| s.code()).map_or(-1, i64::from),
        stopped,
    }
}

/// Cuts `output` to [`TERMINAL_OUTPUT_LIMIT`] bytes (at a character boundary) with a note.
pub fn truncate(output: &str) -> String {
    if output.len() <= TERMINAL_OUTPUT_LIMIT {
        return output.to_string();
    }
    let mut end = TERMINAL_OUTPUT_LIMIT;
    while !output.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[output truncated: {} bytes in all]",
        &output[..end],
        output.len()
    )
}

/// `read_file`: the file's text, or an error result.
pub fn read_file(cwd: &Path, args: &serde_json::Value) -> String {
    let Some(path) = args["path"].as_str() else {
        return error("read_file needs a `path` argument");
    };
    match std::fs::read(resolve(cwd, path)) {
        Ok(bytes) => serde_json::json!({ "content": String::from_utf8_lossy(&bytes) }).to_string(),
        Err(e) => error(&format!("cannot read {path}: {e}")),
    }
}

/// `write_file`: writes `content` to `path`, creating parent directories.
pub fn write_file(cwd: &Path, args: &serde_json::Value) -> String {
    let (Some(path), Some(content)) = (args["path"].as_str(), args["content"].as_str()) else {
        return error("write_file needs `path` and `content` arguments");
    };
    let full = resolve(cwd, path);
    if let Some(parent) = full.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    match std::fs::write(&full, content) {
        Ok(()) => serde_json::json!({ "written": path, "bytes": content.len() }).to_string(),
        Err(e) => error(&format!("cannot write {path}: {e}")),
    }
}

/// The file a path argument names: joined to `cwd` exactly as a Claude payload's path is
/// (`hermes_host::shell::claude::absolute_paths`), never folded, so a tool opens the path a
/// hook judged and the kernel alone resolves `..` and symlinks.
fn resolve(cwd: &Path, path: &str) -> PathBuf {
    let p = Path::new(path);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }
}

/// A tool error result, `{"error": "<message>"}`, with the reference's spacing.
/// The built-in tools the scripted model is offered, in the order the error for an unknown
/// tool lists them.
pub const NAMES: [&str; 5] = [
    "terminal",
    "read_file",
    "write_file",
    "delegate_task",
    "send_message",
];

pub fn error(message: &str) -> String {
    format!(
        "{{\"error\": {}}}",
        serde_json::Value::String(message.to_string())
    )
}

/// What were these items' doc examples: the binary's docs are not doctested.
#[cfg(test)]
mod examples {
    #[test]
    fn truncate_works_as_documented() {
        let long = "x".repeat(10_000);
        let cut = crate::app::agent::tools::truncate(&long);
        assert!(cut.len() < 10_000 && cut.ends_with("[output truncated: 10000 bytes in all]"));
    }

    #[test]
    fn error_works_as_documented() {
        assert_eq!(crate::app::agent::tools::error("no"), r#"{"error": "no"}"#);
    }
}
