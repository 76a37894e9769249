//! Dangerous terminal commands and the approval step they go through.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use regex::Regex;

/// A dangerous-command pattern: its key, a description, and the regex.
struct Pattern {
    key: &'static str,
    description: &'static str,
    regex: Regex,
}

const PATTERNS: &[(&str, &str, &str)] = &[
    (
        "recursive_delete",
        "recursive delete",
        r"\brm\s+(-[a-zA-Z]*[rR][a-zA-Z]*|--recursive)\b",
    ),
    ("sudo", "runs a command as root", r"(^|[;&|]\s*)sudo\b"),
    ("mkfs", "formats a filesystem", r"\bmkfs(\.\w+)?\b"),
    ("dd_device", "writes a raw device", r"\bdd\b.*\bof=/dev/"),
    (
        "chmod_777",
        "makes files world-writable",
        r"\bchmod\s+(-R\s+)?777\b",
    ),
    (
        "pipe_to_shell",
        "pipes a download into a shell",
        r"\b(curl|wget)\b[^|]*\|\s*(sudo\s+)?(ba|z)?sh\b",
    ),
    ("fork_bomb", "fork bomb", r":\(\)\s*\{\s*:\|:&\s*\};:"),
    (
        "git_force_push",
        "force-pushes git history",
        r"\bgit\s+push\b.*(--force|-f)\b",
    ),
];

/// The dangerous patterns `command` matches: `(keys, description of the first)`.
pub fn dangerous(command: &str) -> Option<(Vec<&'static str>, &'static str)> {
    static COMPILED: std::sync::OnceLock<Vec<Pattern>> = std::sync::OnceLock::new();
    let patterns = COMPILED.get_or_init(|| {
        PATTERNS
            .iter()
            .filter_map(|(key, description, re)| {
                Regex::new(re).ok().map(|regex| Pattern {
                    key,
                    description,
                    regex,
                })
            })
            .collect()
    });
    let hits: Vec<&Pattern> = patterns
        .iter()
        .filter(|p| p.regex.is_match(command))
        .collect();
    let first = hits.first()?;
    Some((hits.iter().map(|p| p.key).collect(), first.description))
}

/// How approvals are answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalMode {
    /// Approve this command once.
    Once,
    /// Approve, and approve the same patterns for the rest of the session.
    Session,
    /// Approve, and approve the same patterns from now on.
    Always,
    /// Deny every dangerous command.
    Deny,
    /// Ask at the terminal (with a timeout); deny when there is no terminal.
    Prompt,
}

impl std::str::FromStr for ApprovalMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "once" => Ok(ApprovalMode::Once),
            "session" => Ok(ApprovalMode::Session),
            "always" => Ok(ApprovalMode::Always),
            "deny" => Ok(ApprovalMode::Deny),
            "prompt" => Ok(ApprovalMode::Prompt),
            other => Err(format!(
                "unknown approval mode '{other}' (valid: once, session, always, deny, prompt)"
            )),
        }
    }
}

/// Answers approval requests and remembers `session` / `always` answers.
pub struct Approver {
    mode: ApprovalMode,
    timeout: Duration,
    /// Pattern keys approved with `always`, for every session.
    always: Mutex<HashSet<String>>,
    /// Pattern keys approved with `session`, per session key: behind the gateway one agent
    /// serves many chats, and one chat's approval must not cover another's.
    per_session: Mutex<HashMap<String, HashSet<String>>>,
}

impl Approver {
    /// An approver answering by `mode`; a prompt times out after `timeout`.
    pub fn new(mode: ApprovalMode, timeout: Duration) -> Approver {
        Approver {
            mode,
            timeout,
            always: Mutex::new(HashSet::new()),
            per_session: Mutex::new(HashMap::new()),
        }
    }

    /// Whether every pattern key was approved earlier, for good or for `session_key`.
    pub fn remembered(&self, session_key: &str, keys: &[&str]) -> bool {
        let always = self.always.lock().unwrap_or_else(|e| e.into_inner());
        let per_session = self.per_session.lock().unwrap_or_else(|e| e.into_inner());
        let session = per_session.get(session_key);
        !keys.is_empty()
            && keys
                .iter()
                .all(|k| always.contains(*k) || session.is_some_and(|s| s.contains(*k)))
    }

    /// The choice for `command` in `session_key`: `once`, `session`, `always`, `deny` or
    /// `timeout`. `session` and `always` answers are remembered for [`remembered`](Self::remembered).
    pub fn decide(
        &self,
        session_key: &str,
        command: &str,
        description: &str,
        keys: &[&str],
    ) -> &'static str {
        let choice = match self.mode {
            ApprovalMode::Once => "once",
            ApprovalMode::Session => "session",
            ApprovalMode::Always => "always",
            ApprovalMode::Deny => "deny",
            ApprovalMode::Prompt => prompt(
                &format!("⚠ Dangerous command ({description})"),
                command,
                LASTING_CHOICES,
                self.timeout,
            ),
        };
        let keys = keys.iter().map(|k| k.to_string());
        match choice {
            "always" => self
                .always
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .extend(keys),
            "session" => self
                .per_session
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(session_key.to_string())
                .or_default()
                .extend(keys),
            _ => {}
        }
        choice
    }

    /// The choice for a tool call a hook asked approval for (Claude's `permissionDecision:
    /// ask`), described by `summary`, with the hook's `reason`: `once`, `deny` or `timeout`.
    /// Nothing is remembered: only the hook knows which calls are alike, so it is asked
    /// again for every call.
    pub fn decide_ask(&self, summary: &str, reason: &str) -> &'static str {
        match self.mode {
            ApprovalMode::Once | ApprovalMode::Session | ApprovalMode::Always => "once",
            ApprovalMode::Deny => "deny",
            // Only `once` is offered; a lasting answer typed anyway counts once.
            ApprovalMode::Prompt => match prompt(
                &format!("A hook asks for approval ({reason})"),
                summary,
                "[o]nce / [d]eny",
                self.timeout,
            ) {
                "session" | "always" => "once",
                other => other,
            },
        }
    }

    /// Whether a `deny` comes from nobody being there to ask: approvals are prompted for,
    /// and standard input is not a terminal (a headless run, a service).
    pub fn headless(&self) -> bool {
        self.mode == ApprovalMode::Prompt && !std::io::stdin().is_terminal()
    }
}

/// The answers a dangerous command's prompt offers.
const LASTING_CHOICES: &str = "[o]nce / [s]ession / [a]lways / [d]eny";

/// Asks at the terminal, offering `choices`; no terminal means deny, silence past
/// `timeout` means `timeout`.
fn prompt(heading: &str, command: &str, choices: &str, timeout: Duration) -> &'static str {
    if !std::io::stdin().is_terminal() {
        return "deny";
    }
    let mut out = std::io::stderr();
    let _ = write!(
        out,
        "\n{heading}:\n    {command}\nAllow? {choices} (denied in {}s): ",
        timeout.as_secs()
    );
    let _ = out.flush();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        let _ = tx.send(line);
    });
    match rx.recv_timeout(timeout) {
        Ok(line) => match line.trim().to_ascii_lowercase().as_str() {
            "o" | "once" | "y" | "yes" => "once",
            "s" | "session" => "session",
            "a" | "always" => "always",
            _ => "deny",
        },
        Err(_) => {
            let _ = writeln!(out);
            "timeout"
        }
    }
}

/// What were these items' doc examples: the binary's docs are not doctested.
#[cfg(test)]
mod examples {
    #[test]
    fn dangerous_works_as_documented() {
        let (keys, why) = crate::app::agent::approval::dangerous("sudo rm -rf /tmp/x").unwrap();
        assert_eq!(keys, ["recursive_delete", "sudo"]);
        assert_eq!(why, "recursive delete");
        assert!(crate::app::agent::approval::dangerous("ls -la").is_none());
    }

    #[test]
    fn remembered_works_as_documented() {
        use crate::app::agent::{ApprovalMode, Approver};
        use std::time::Duration;
        let approver = Approver::new(ApprovalMode::Session, Duration::from_secs(1));
        approver.decide(
            "local:a",
            "rm -rf x",
            "recursive delete",
            &["recursive_delete"],
        );
        assert!(approver.remembered("local:a", &["recursive_delete"]));
        assert!(!approver.remembered("local:b", &["recursive_delete"]));
    }
}
