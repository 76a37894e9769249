//! Consent: which `(event, command)` pairs the user approved, and asking at the terminal.
//!
//! Approvals live in `$HERMES_HOME/shell-hooks-allowlist.json`, in the reference's format,
//! plus one field of ours, `script_sha256`:
//!
//! ```json
//! {
//!   "approvals": [
//!     {
//!       "approved_at": "2026-04-21T10:11:12.123456Z",
//!       "command": "~/.hermes/agent-hooks/guard.sh",
//!       "event": "pre_tool_call",
//!       "script_mtime_at_approval": "2026-04-20T08:00:00Z",
//!       "script_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
//!     }
//!   ]
//! }
//! ```
//!
//! Every change is a read-modify-write under an exclusive `flock` on the sibling
//! `shell-hooks-allowlist.json.lock`, written to a unique temporary file in the same
//! directory (mode 0600) and renamed over the old file, so concurrent approvers in threads
//! or processes never lose an entry and a reader never sees half a file. A file that cannot
//! be read or parsed counts as empty, with a warning saying how to repair it, so nothing
//! unapproved runs; the next approval sets the broken file aside as
//! `shell-hooks-allowlist.json.corrupt` rather than overwrite it. A file that group or others
//! can write, or that another user owns, counts as empty too, whatever
//! `hooks.strict_permissions` says: approvals someone else can add are no approvals. Keys are written sorted, with an indent
//! of two, as Python's `json.dumps(indent=2, sort_keys=True)` writes them; unknown top-level
//! keys are kept.
//!
//! **Content pinning.** `script_sha256` is the sha256 of the script file at approval time
//! (`null` when the command names no readable file). A hook whose script no longer has that
//! content is not run until it is approved again. Entries without the field (written by the
//! reference, or by hand) are not pinned.

use std::fs::OpenOptions;
use std::io::{self, BufRead, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use super::script;
use crate::home::Home;
use crate::pyfmt::{JsonStyle, dumps, isoformat_utc, repr_str};

/// One approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    /// The hook event.
    pub event: String,
    /// The command, exactly as configured (stripped).
    pub command: String,
    /// When it was approved (`None` in a hand-written entry).
    pub approved_at: Option<String>,
    /// The script's modification time at approval.
    pub script_mtime_at_approval: Option<String>,
    /// The pin: `None` for an entry without `script_sha256` (not pinned); `Some(None)` for a
    /// command that named no readable file; `Some(Some(hex))` for a pinned script.
    pub script_sha256: Option<Option<String>>,
}

impl Approval {
    fn from_json(entry: &Map<String, Value>) -> Option<Approval> {
        let text = |k: &str| entry.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Approval {
            event: text("event")?,
            command: text("command")?,
            approved_at: text("approved_at"),
            script_mtime_at_approval: text("script_mtime_at_approval"),
            script_sha256: entry
                .get("script_sha256")
                .map(|v| v.as_str().map(str::to_string)),
        })
    }

    /// Whether the script still has the approved content (always true when not pinned).
    ///
    /// ```
    /// use hermes_host::shell::consent::Approval;
    /// let a = Approval { event: "e".into(), command: "c".into(), approved_at: None,
    ///     script_mtime_at_approval: None, script_sha256: Some(Some("ab".into())) };
    /// assert!(a.content_matches(Some("ab")) && !a.content_matches(Some("cd")) && !a.content_matches(None));
    /// ```
    pub fn content_matches(&self, current_sha256: Option<&str>) -> bool {
        match &self.script_sha256 {
            None => true,
            Some(pinned) => pinned.as_deref() == current_sha256,
        }
    }
}

/// An allowlist write that failed.
#[derive(Debug)]
pub struct AllowlistError {
    /// The allowlist file.
    pub path: PathBuf,
    /// What failed, as Python words it (`[Errno 13] Permission denied: '<file>'`).
    pub message: String,
}

impl std::fmt::Display for AllowlistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

impl std::error::Error for AllowlistError {}

/// The allowlist file of one home.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let list = hermes_host::shell::consent::Allowlist::new(&hermes_host::home::Home::at(dir.path()));
/// assert!(list.entry_for("pre_tool_call", "./guard.sh").is_none());
/// list.approve("pre_tool_call", "./guard.sh").unwrap();
/// assert!(list.entry_for("pre_tool_call", "./guard.sh").is_some());
/// assert_eq!(list.revoke("./guard.sh").unwrap(), 1);
/// ```
#[derive(Clone, Debug)]
pub struct Allowlist {
    path: PathBuf,
}

impl Allowlist {
    /// The allowlist of `home` (`<home>/shell-hooks-allowlist.json`).
    pub fn new(home: &Home) -> Allowlist {
        Allowlist {
            path: home.allowlist_path(),
        }
    }

    /// The allowlist file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The sibling lock file (`shell-hooks-allowlist.json.lock`).
    pub fn lock_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        self.path.with_file_name(name)
    }

    /// The file's content: `{"approvals": [...]}` plus any other keys. A missing file is
    /// empty; an unreadable or corrupt one is empty plus a warning (also logged).
    pub fn load(&self) -> (Map<String, Value>, Option<String>) {
        let empty = || {
            let mut m = Map::new();
            m.insert("approvals".into(), Value::Array(Vec::new()));
            m
        };
        if let Some(finding) = crate::trust::inspect(&self.path, crate::trust::Role::Allowlist) {
            let message = format!(
                "{}: another user could add approvals to it; treating the shell hook allowlist as empty, so no shell hook runs until approved again. Run `{}`, or approve the hooks again, which sets this file aside as {}",
                finding.what(),
                finding.fix(),
                self.corrupt_path().display()
            );
            tracing::warn!("{message}");
            return (empty(), Some(message));
        }
        let bytes = match std::fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return (empty(), None),
            Err(e) => {
                return (
                    empty(),
                    Some(
                        self.corrupt(&format!("cannot be read ({})", py_os_error(&e, &self.path))),
                    ),
                );
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let parsed = crate::nesting::check_json(text)
            .and_then(|()| serde_json::from_str::<Value>(text).map_err(|e| e.to_string()));
        let mut data = match parsed {
            Ok(Value::Object(data)) => data,
            Ok(_) => {
                return (
                    empty(),
                    Some(self.corrupt("the top level is not a JSON object")),
                );
            }
            Err(e) => {
                return (
                    empty(),
                    Some(self.corrupt(&format!("not valid JSON ({e})"))),
                );
            }
        };
        let mut warning = None;
        if !matches!(data.get("approvals"), Some(Value::Array(_))) {
            if data.contains_key("approvals") {
                warning = Some(self.corrupt("'approvals' is not a list"));
            }
            data.insert("approvals".into(), Value::Array(Vec::new()));
        }
        (data, warning)
    }

    fn corrupt(&self, what: &str) -> String {
        let message = format!(
            "{}: {what}; treating the shell hook allowlist as empty, so no shell hook runs until approved again. \
             To repair it, fix the JSON by hand, or approve any hook again (`hermes hooks allow`, or \
             --accept-hooks): the broken file is then kept as {}-<time>, and the approvals that \
             can still be read from it are carried over",
            self.path.display(),
            self.corrupt_path().display()
        );
        tracing::warn!("{message}");
        message
    }

    /// The stem of where a corrupt or untrusted allowlist is moved before a new one is
    /// written: each copy is `<stem>-<UTC time>-<pid>`, so a later corruption never
    /// overwrites an earlier copy.
    pub fn corrupt_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".corrupt");
        self.path.with_file_name(name)
    }

    /// A new, unused name for a copy of a corrupt allowlist.
    fn corrupt_copy_path(&self) -> PathBuf {
        let stamp: String = utc_now_iso()
            .chars()
            .map(|c| if c == ':' { '-' } else { c })
            .collect();
        let mut name = self.corrupt_path().into_os_string();
        name.push(format!("-{stamp}-{}", std::process::id()));
        PathBuf::from(name)
    }

    /// Every well-formed approval, in file order.
    pub fn approvals(&self) -> Vec<Approval> {
        let (data, _) = self.load();
        entries(&data).filter_map(Approval::from_json).collect()
    }

    /// The approval of exactly `(event, command)`, if any.
    pub fn entry_for(&self, event: &str, command: &str) -> Option<Approval> {
        self.approvals()
            .into_iter()
            .find(|a| a.event == event && a.command == command)
    }

    /// Records an approval of `(event, command)` now, pinned to the script's current content,
    /// replacing any earlier entry of that pair. Returns the new entry.
    ///
    /// # Errors
    ///
    /// When the lock, the temporary file or the rename fails. The caller decides whether the
    /// approval still counts for this run (at registration it does, with the reference's
    /// `Failed to persist ...` warning).
    pub fn approve(&self, event: &str, command: &str) -> Result<Approval, AllowlistError> {
        let script = script::resolved_path(command).filter(|_| !super::http::is_http_url(command));
        self.approve_file(event, command, script.as_deref())
    }

    /// [`approve`](Allowlist::approve), pinning the content of `script`, the file the
    /// command runs as the hook will run it (see
    /// [`ShellHookSpec::script_file`](super::config::ShellHookSpec::script_file)).
    ///
    /// # Errors
    ///
    /// As [`approve`](Allowlist::approve).
    pub fn approve_file(
        &self,
        event: &str,
        command: &str,
        script: Option<&Path>,
    ) -> Result<Approval, AllowlistError> {
        let approval = Approval {
            event: event.to_string(),
            command: command.to_string(),
            approved_at: Some(utc_now_iso()),
            script_mtime_at_approval: script.and_then(script::mtime_iso_file),
            script_sha256: Some(script.and_then(script::sha256_file)),
        };
        let mut entry = Map::new();
        entry.insert("event".into(), event.into());
        entry.insert("command".into(), command.into());
        entry.insert("approved_at".into(), approval.approved_at.clone().into());
        entry.insert(
            "script_mtime_at_approval".into(),
            approval.script_mtime_at_approval.clone().into(),
        );
        entry.insert(
            "script_sha256".into(),
            approval
                .script_sha256
                .clone()
                .flatten()
                .map_or(Value::Null, Value::String),
        );
        self.update(|data| {
            let list = approvals_mut(data);
            list.retain(|e| !is_pair(e, event, command));
            list.push(Value::Object(entry));
        })?;
        Ok(approval)
    }

    /// Removes every entry whose command is exactly `command` (any event) and returns how
    /// many there were. Always rewrites the file, creating it when missing.
    ///
    /// # Errors
    ///
    /// As [`approve`](Allowlist::approve).
    pub fn revoke(&self, command: &str) -> Result<usize, AllowlistError> {
        self.update(|data| {
            let list = approvals_mut(data);
            let before = list.len();
            list.retain(|e| {
                e.as_object()
                    .is_none_or(|o| o.get("command").and_then(Value::as_str) != Some(command))
            });
            before - list.len()
        })
    }

    /// Read-modify-write under the lock, then an atomic replace.
    fn update<T>(
        &self,
        change: impl FnOnce(&mut Map<String, Value>) -> T,
    ) -> Result<T, AllowlistError> {
        let fail = |e: io::Error, path: &Path| AllowlistError {
            path: self.path.clone(),
            message: py_os_error(&e, path),
        };
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail(e, dir))?;
        }
        let lock_path = self.lock_path();
        let lock = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| fail(e, &lock_path))?;
        loop {
            // SAFETY: flock on an fd we own for the whole critical section; it is released
            // when `lock` is closed at the end of this function.
            if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) } == 0 {
                break;
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(fail(err, &lock_path));
            }
        }
        self.remove_orphan_temporaries();
        let (mut data, warning) = self.load();
        if warning.is_some() && self.path.exists() {
            // Never overwrite what could not be read: every such copy is kept, under a name
            // of its own, and the approvals that still parse are carried over (unless the
            // file is one another user could write, whose approvals prove nothing).
            let trusted =
                crate::trust::inspect(&self.path, crate::trust::Role::Allowlist).is_none();
            let salvaged = trusted
                .then(|| std::fs::read(&self.path).ok())
                .flatten()
                .map(|bytes| salvage(&String::from_utf8_lossy(&bytes)));
            let aside = self.corrupt_copy_path();
            std::fs::rename(&self.path, &aside).map_err(|e| fail(e, &self.path))?;
            match salvaged {
                Some((kept, lost)) => {
                    let count = kept.len();
                    approvals_mut(&mut data).extend(kept);
                    tracing::warn!(
                        "moved the unreadable shell hook allowlist {} to {}; {count} approval(s) read from it were kept, {lost} could not be read and are lost (approve those hooks again)",
                        self.path.display(),
                        aside.display()
                    );
                }
                None => tracing::warn!(
                    "moved the untrusted shell hook allowlist {} to {}; none of its approvals were kept",
                    self.path.display(),
                    aside.display()
                ),
            }
        }
        let out = change(&mut data);
        let text = dumps(
            &Value::Object(data),
            JsonStyle {
                ensure_ascii: true,
                indent: Some(2),
                sort_keys: true,
            },
        );
        self.replace(&text)?;
        drop(lock);
        Ok(out)
    }

    /// Removes temporary files a writer killed mid-write left beside the allowlist. Called
    /// under the lock, so no writer is running: every such file is an orphan.
    fn remove_orphan_temporaries(&self) {
        let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) else {
            return;
        };
        let prefix = format!("{}.", name.to_string_lossy());
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let file = entry.file_name();
            let file = file.to_string_lossy();
            if file.starts_with(&prefix) && file.ends_with(".tmp") {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    fn replace(&self, text: &str) -> Result<(), AllowlistError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let dir = self.path.parent().unwrap_or(Path::new("."));
        let name = self
            .path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let (tmp, mut file) = loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let tmp = dir.join(format!("{name}.{}.{n}.tmp", std::process::id()));
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
            {
                Ok(file) => break (tmp, file),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(AllowlistError {
                        path: self.path.clone(),
                        message: py_os_error(&e, &tmp),
                    });
                }
            }
        };
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(AllowlistError {
                path: self.path.clone(),
                message: py_os_error(&e, &tmp),
            });
        }
        Ok(())
    }
}

/// The approvals that can still be read from a corrupt allowlist `text`: every object
/// nested in the top-level object's list that parses on its own and is a well-formed
/// approval. Returns them, and how many entries were there but could not be read.
fn salvage(text: &str) -> (Vec<Value>, usize) {
    let bytes = text.as_bytes();
    let (mut depth, mut start, mut in_string, mut escaped) = (0usize, None, false, false);
    let (mut kept, mut lost) = (Vec::new(), 0usize);
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                // {"approvals": [ {entry}, ... ]}: entries open at depth 3.
                if b == b'{' && depth == 3 {
                    start = Some(i);
                }
            }
            b'}' | b']' => {
                if b == b'}' && depth == 3 {
                    if let Some(from) = start.take() {
                        match serde_json::from_str::<Value>(&text[from..=i]) {
                            Ok(v) if v.as_object().and_then(Approval::from_json).is_some() => {
                                kept.push(v);
                            }
                            _ => lost += 1,
                        }
                    }
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
    }
    // An entry cut off by the end of the file.
    if start.is_some() {
        lost += 1;
    }
    (kept, lost)
}

fn entries(data: &Map<String, Value>) -> impl Iterator<Item = &Map<String, Value>> {
    data.get("approvals")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn approvals_mut(data: &mut Map<String, Value>) -> &mut Vec<Value> {
    if !matches!(data.get("approvals"), Some(Value::Array(_))) {
        data.insert("approvals".into(), Value::Array(Vec::new()));
    }
    match data.get_mut("approvals") {
        Some(Value::Array(list)) => list,
        _ => unreachable!("approvals was just set to a list"),
    }
}

fn is_pair(entry: &Value, event: &str, command: &str) -> bool {
    entry.as_object().is_some_and(|o| {
        o.get("event").and_then(Value::as_str) == Some(event)
            && o.get("command").and_then(Value::as_str) == Some(command)
    })
}

/// Python's `str(OSError)`: `[Errno 13] Permission denied: '/path'`.
fn py_os_error(e: &io::Error, path: &Path) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let text = e.to_string();
            let strerror = text.split(" (os error").next().unwrap_or(&text);
            format!(
                "[Errno {code}] {strerror}: {}",
                repr_str(&path.display().to_string())
            )
        }
        None => e.to_string(),
    }
}

/// Now, in UTC, as `2026-04-21T10:11:12.123456Z`.
pub fn utc_now_iso() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    isoformat_utc(now.as_secs() as i64, now.subsec_micros())
}

/// Asks the user whether a shell hook may run.
pub trait Prompter {
    /// Shows the hook and returns whether the user approved it.
    fn confirm(&mut self, event: &str, command: &str) -> bool;
}

/// The reference's consent prompt (reference §4.3), printed to `output`, the answer read
/// from `input`.
///
/// The CLI builds one over stdout and stdin when stdin is a terminal; tests give it buffers.
///
/// ```
/// use hermes_host::shell::consent::{Prompter, TextPrompt};
/// let mut out = Vec::new();
/// let mut prompt = TextPrompt::new(&b"yes\n"[..], &mut out);
/// assert!(prompt.confirm("pre_tool_call", "./guard.sh"));
/// assert!(String::from_utf8(out).unwrap().ends_with("Allow this hook to run? [y/N]: "));
/// ```
pub struct TextPrompt<R, W> {
    input: R,
    output: W,
}

impl<R: BufRead, W: Write> TextPrompt<R, W> {
    /// A prompt reading answers from `input` and writing to `output`.
    pub fn new(input: R, output: W) -> Self {
        TextPrompt { input, output }
    }
}

/// The text shown before the question, exactly as the reference prints it.
///
/// ```
/// let text = hermes_host::shell::consent::prompt_text("pre_tool_call", "./guard.sh");
/// assert!(text.starts_with("\n⚠ Hermes is about to register a shell hook that will run a\n"));
/// ```
pub fn prompt_text(event: &str, command: &str) -> String {
    if super::http::is_http_url(command) {
        return format!(
            "\n⚠ Hermes is about to register an HTTP hook that will send every\n  {event} payload to a server.\n\n    \
             Event:   {event}\n    URL:     {command}\n\n  The payload holds tool arguments and session data, and the server's\n  \
             answer can block or change what the agent does.  Only approve\n  servers you trust.\n"
        );
    }
    format!(
        "\n⚠ Hermes is about to register a shell hook that will run a\n  command on your behalf.\n\n    \
         Event:   {event}\n    Command: {command}\n\n  Commands run with your full user credentials.  \
         Only approve\n  commands you trust.\n"
    )
}

/// The question after [`prompt_text`].
pub const PROMPT_QUESTION: &str = "Allow this hook to run? [y/N]: ";

impl<R: BufRead, W: Write> Prompter for TextPrompt<R, W> {
    fn confirm(&mut self, event: &str, command: &str) -> bool {
        let _ = write!(
            self.output,
            "{}{PROMPT_QUESTION}",
            prompt_text(event, command)
        );
        let _ = self.output.flush();
        let mut line = String::new();
        match self.input.read_line(&mut line) {
            Ok(0) | Err(_) => {
                let _ = writeln!(self.output);
                let _ = self.output.flush();
                false
            }
            Ok(_) => matches!(line.trim().to_lowercase().as_str(), "y" | "yes"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list() -> (tempfile::TempDir, Allowlist) {
        let dir = tempfile::tempdir().unwrap();
        let list = Allowlist::new(&Home::at(dir.path()));
        (dir, list)
    }

    #[test]
    fn the_prompt_prints_the_reference_text_and_accepts_y_or_yes() {
        let mut out = Vec::new();
        assert!(TextPrompt::new(&b" Y \n"[..], &mut out).confirm("pre_tool_call", "/h/guard.sh"));
        let expected = "\n⚠ Hermes is about to register a shell hook that will run a\n  command on your behalf.\n\n    Event:   pre_tool_call\n    Command: /h/guard.sh\n\n  Commands run with your full user credentials.  Only approve\n  commands you trust.\nAllow this hook to run? [y/N]: ";
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        for answer in ["\n", "n\n", "yep\n", "no\n"] {
            assert!(
                !TextPrompt::new(answer.as_bytes(), Vec::new()).confirm("e", "c"),
                "{answer:?}"
            );
        }
    }

    #[test]
    fn end_of_input_refuses_and_prints_a_newline() {
        let mut out = Vec::new();
        assert!(!TextPrompt::new(&b""[..], &mut out).confirm("e", "c"));
        assert!(String::from_utf8(out).unwrap().ends_with("[y/N]: \n"));
    }

    #[test]
    fn the_file_is_written_sorted_indented_ascii_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, list) = list();
        list.approve("pre_tool_call", "écho").unwrap();
        let text = std::fs::read_to_string(list.path()).unwrap();
        assert!(
            text.starts_with("{\n  \"approvals\": [\n    {\n      \"approved_at\": \""),
            "{text}"
        );
        assert!(text.contains("\"command\": \"\\u00e9cho\",\n      \"event\": \"pre_tool_call\",\n      \"script_mtime_at_approval\": null,\n      \"script_sha256\": null\n    }\n  ]\n}"), "{text}");
        let mode = std::fs::metadata(list.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(list.lock_path().exists());
    }

    #[test]
    fn approving_a_pair_again_replaces_its_entry_and_keeps_other_keys() {
        let (_dir, list) = list();
        std::fs::write(
            list.path(),
            r#"{"approvals": [{"event": "a", "command": "x"}, 7], "note": "mine"}"#,
        )
        .unwrap();
        list.approve("a", "x").unwrap();
        list.approve("b", "x").unwrap();
        let (data, warning) = list.load();
        assert!(warning.is_none());
        assert_eq!(data["note"], "mine");
        let pairs: Vec<_> = list
            .approvals()
            .into_iter()
            .map(|a| (a.event, a.command))
            .collect();
        assert_eq!(
            pairs,
            [
                ("a".to_string(), "x".to_string()),
                ("b".to_string(), "x".to_string())
            ]
        );
        assert_eq!(
            data["approvals"].as_array().unwrap().len(),
            3,
            "the non-dict entry is kept"
        );
    }

    #[test]
    fn a_corrupt_file_counts_as_empty_with_a_warning() {
        let (_dir, list) = list();
        std::fs::write(list.path(), "{not json").unwrap();
        let (data, warning) = list.load();
        assert_eq!(Value::Object(data), serde_json::json!({"approvals": []}));
        let warning = warning.unwrap();
        assert!(
            warning.contains("not valid JSON")
                && warning.contains("treating the shell hook allowlist as empty")
                && warning.contains("fix the JSON by hand"),
            "{warning}"
        );
        // Approving again sets the broken file aside instead of overwriting it.
        list.approve("pre_tool_call", "true").unwrap();
        let aside = corrupt_copies(&list);
        assert_eq!(aside.len(), 1);
        assert_eq!(std::fs::read_to_string(&aside[0]).unwrap(), "{not json");
        assert!(list.load().1.is_none());
        assert_eq!(list.approvals().len(), 1);
        std::fs::write(list.path(), "[1]").unwrap();
        assert!(
            list.load()
                .1
                .unwrap()
                .contains("the top level is not a JSON object")
        );
        std::fs::write(list.path(), "\u{feff}{\"approvals\": []}").unwrap();
        assert!(list.load().1.is_none(), "a UTF-8 BOM is tolerated");
    }

    #[test]
    fn an_allowlist_others_can_write_approves_nothing_until_rewritten_privately() {
        use std::os::unix::fs::PermissionsExt;
        let (_dir, list) = list();
        list.approve("pre_tool_call", "true").unwrap();
        std::fs::set_permissions(list.path(), std::fs::Permissions::from_mode(0o606)).unwrap();
        assert!(list.entry_for("pre_tool_call", "true").is_none());
        let warning = list.load().1.unwrap();
        assert!(
            warning.contains("writable by others") && warning.contains("chmod go-w"),
            "{warning}"
        );
        list.approve("pre_tool_call", "false").unwrap();
        let mode = std::fs::metadata(list.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(list.entry_for("pre_tool_call", "false").is_some());
        assert!(
            list.entry_for("pre_tool_call", "true").is_none(),
            "an approval from the untrusted file is not carried over"
        );
        assert_eq!(corrupt_copies(&list).len(), 1);
    }

    /// The copies of corrupt or untrusted allowlists set aside beside `list`.
    fn corrupt_copies(list: &Allowlist) -> Vec<PathBuf> {
        let stem = list.corrupt_path().to_string_lossy().into_owned();
        let dir = list
            .path()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        std::fs::read_dir(dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.to_string_lossy().starts_with(&format!("{stem}-")))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn revoke_removes_the_command_under_every_event_and_always_writes() {
        let (_dir, list) = list();
        assert_eq!(list.revoke("x").unwrap(), 0);
        assert_eq!(
            std::fs::read_to_string(list.path()).unwrap(),
            "{\n  \"approvals\": []\n}"
        );
        list.approve("a", "x").unwrap();
        list.approve("b", "x").unwrap();
        list.approve("a", "y").unwrap();
        assert_eq!(list.revoke("x").unwrap(), 2);
        assert_eq!(list.approvals().len(), 1);
    }

    #[test]
    fn thirty_two_threads_approving_at_once_lose_no_entry() {
        let (_dir, list) = list();
        std::thread::scope(|s| {
            for i in 0..32 {
                let list = list.clone();
                s.spawn(move || list.approve("pre_tool_call", &format!("hook-{i}")).unwrap());
            }
        });
        assert_eq!(list.approvals().len(), 32);
    }

    #[test]
    fn a_pin_records_the_script_content() {
        let (dir, list) = list();
        let script = dir.path().join("g.sh");
        std::fs::write(&script, "echo 1\n").unwrap();
        let command = format!("bash {}", script.display());
        let approval = list.approve("pre_tool_call", &command).unwrap();
        let sha = script::sha256(&command);
        assert!(sha.is_some());
        assert!(approval.content_matches(sha.as_deref()));
        std::fs::write(&script, "echo 2\n").unwrap();
        assert!(!approval.content_matches(script::sha256(&command).as_deref()));
        assert_eq!(
            list.entry_for("pre_tool_call", &command)
                .unwrap()
                .script_sha256,
            Some(sha)
        );
    }
}
