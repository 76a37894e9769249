//! Session transcripts: one JSON line per entry in `$HERMES_HOME/sessions/<session_id>.jsonl`.
//!
//! Every entry is serialised first and written with a single `write` on a file opened with
//! `O_APPEND`, so the kernel puts each line at the end of the file in one piece: concurrent
//! writers (two chat workers, a plugin's `session.append`, another process) never interleave
//! inside a line, and a writer that dies can at worst lose its own line, never damage
//! another one. Nothing is buffered in this process, so a crash loses nothing that was
//! already reported as written.
//!
//! A turn writes several entries (the user's message, tool calls and results, the answer).
//! It writes them through one [`OpenTranscript`], held for the turn and closed at its end:
//! opening a file is most of what a line costs (a path walk, a descriptor, an inode
//! lookup), and a gateway under load writes two or more lines per answer. The file is not
//! kept open between turns, so the descriptor table does not grow with the number of
//! chats; every process a hook spawns copies that table.
//!
//! A gateway gives its store [`SpareFiles`]: a new transcript is then an empty file made
//! ahead of time and renamed into place, rather than created while the chat waits.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::spare_files::SpareFiles;

/// Appends entries to session transcripts under one directory.
#[derive(Clone)]
pub struct TranscriptStore {
    dir: PathBuf,
    spares: Option<Arc<SpareFiles>>,
}

impl std::fmt::Debug for TranscriptStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptStore")
            .field("dir", &self.dir)
            .field("spares", &self.spares.is_some())
            .finish()
    }
}

/// Why an entry could not be appended.
#[derive(Debug)]
#[non_exhaustive]
pub enum TranscriptError {
    /// The session id cannot name a file (empty, or with a path separator or `..`).
    BadSessionId(String),
    /// The file could not be opened or written.
    Io {
        /// The transcript file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

impl std::fmt::Display for TranscriptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TranscriptError::BadSessionId(id) => {
                write!(f, "session id {id:?} cannot name a transcript file")
            }
            TranscriptError::Io { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for TranscriptError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TranscriptError::BadSessionId(_) => None,
            TranscriptError::Io { source, .. } => Some(source),
        }
    }
}

impl TranscriptStore {
    /// A store writing under `dir` (created on the first append).
    pub fn new(dir: impl Into<PathBuf>) -> TranscriptStore {
        TranscriptStore {
            dir: dir.into(),
            spares: None,
        }
    }

    /// The same store, making new transcripts from `spares` while it has some.
    pub(crate) fn with_spares(mut self, spares: Option<Arc<SpareFiles>>) -> TranscriptStore {
        self.spares = spares;
        self
    }

    /// Stops making spares (at shutdown); the store keeps working without them.
    pub(crate) fn stop_spares(&self) {
        if let Some(spares) = &self.spares {
            spares.stop();
        }
    }

    /// Repairs the transcripts a kill left with their last line cut short: each is
    /// truncated to its last whole line, and the cut bytes are kept beside it in
    /// `<session_id>.jsonl.torn` (`.torn-2`, ... when that exists), so nothing is lost and
    /// every line of every transcript is whole JSON again. Returns one line per repair, or
    /// per transcript that could not be repaired, for the gateway's log. Run at start,
    /// before this process appends to anything.
    pub fn repair_torn_tails(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return lines;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let is_transcript = path.extension().is_some_and(|x| x == "jsonl")
                && entry.file_type().is_ok_and(|t| t.is_file());
            if !is_transcript {
                continue;
            }
            match repair_one(&path) {
                Ok(None) => {}
                Ok(Some((cut, kept))) => lines.push(format!(
                    "gateway: {} ended with a line cut short ({cut} bytes, likely by a kill); truncated to its last whole line, the cut bytes kept in {}",
                    path.display(),
                    kept.display()
                )),
                Err(e) => lines.push(format!(
                    "gateway: {} may end with a line cut short and could not be repaired: {e}",
                    path.display()
                )),
            }
        }
        lines
    }

    /// `<dir>/<session_id>.jsonl`.
    ///
    /// # Errors
    ///
    /// [`TranscriptError::BadSessionId`] when the id is empty or could leave the directory.
    pub fn path_of(&self, session_id: &str) -> Result<PathBuf, TranscriptError> {
        if hermes_host::home::check_session_id(session_id).is_err() {
            return Err(TranscriptError::BadSessionId(session_id.to_string()));
        }
        Ok(self.dir.join(format!("{session_id}.jsonl")))
    }

    /// Appends `entry` as one line to the transcript of `session_id`.
    ///
    /// # Errors
    ///
    /// A bad session id, or the IO error of creating the directory or writing the file.
    pub fn append(&self, session_id: &str, entry: &Value) -> Result<(), TranscriptError> {
        self.open(session_id)?.append(entry)
    }

    /// Opens the transcript of `session_id` for appending (creating it, and the directory,
    /// when missing), for writing several entries through one open file.
    ///
    /// # Errors
    ///
    /// A bad session id, or the IO error of creating the directory or opening the file.
    pub fn open(&self, session_id: &str) -> Result<OpenTranscript, TranscriptError> {
        let path = self.path_of(session_id)?;
        if let Some(spares) = &self.spares {
            // Only a missing transcript takes a spare; finding out costs a failed lookup.
            match OpenOptions::new()
                .append(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
            {
                Ok(file) => return Ok(OpenTranscript { path, file }),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    spares.place(&path);
                }
                Err(source) => return Err(TranscriptError::Io { path, source }),
            }
        }
        // Transcripts hold what users said: private to the user, like config.yaml.
        // Never through a link or into another user's file.
        let open = || hermes_host::private_file::open_append(&path);
        let file = match open() {
            Ok(file) => Ok(file),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                super::spare_files::private_dir(&self.dir).and_then(|()| open())
            }
            Err(e) => Err(e),
        };
        match file {
            Ok(file) => Ok(OpenTranscript { path, file }),
            Err(source) => Err(TranscriptError::Io { path, source }),
        }
    }
}

/// One session's transcript, open for appending; closed when dropped.
#[derive(Debug)]
pub struct OpenTranscript {
    path: PathBuf,
    file: File,
}

impl OpenTranscript {
    /// Appends `entry` as one line.
    ///
    /// # Errors
    ///
    /// The IO error of writing the file (a full disk, say).
    pub fn append(&mut self, entry: &Value) -> Result<(), TranscriptError> {
        let mut line = entry.to_string().into_bytes();
        line.push(b'\n');
        // One write for the whole line: with O_APPEND it lands at the end in one piece.
        // `write_all` only loops on a short write (a full disk), which would fail anyway.
        self.file
            .write_all(&line)
            .map_err(|source| TranscriptError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// Truncates `path` to its last whole line when its last line is cut short, keeping the cut
/// bytes in a `.torn` file beside it: `(bytes cut, where they are)`, or `None` when the file
/// ends with a newline (or is empty).
fn repair_one(path: &std::path::Path) -> std::io::Result<Option<(u64, PathBuf)>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(None);
    }
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] == b'\n' {
        return Ok(None);
    }
    // Walk back to the last newline, a block at a time.
    let mut keep = 0u64;
    let mut end = len;
    let mut block = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let chunk = &mut block[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(at) = chunk.iter().rposition(|&b| b == b'\n') {
            keep = start + at as u64 + 1;
            break;
        }
        end = start;
    }
    let mut cut = Vec::with_capacity((len - keep) as usize);
    file.seek(SeekFrom::Start(keep))?;
    file.read_to_end(&mut cut)?;
    let mut n = 1;
    let kept = loop {
        let mut name = path.as_os_str().to_os_string();
        name.push(if n == 1 {
            ".torn".to_string()
        } else {
            format!(".torn-{n}")
        });
        let candidate = PathBuf::from(name);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&candidate)
        {
            Ok(mut torn) => {
                torn.write_all(&cut)?;
                break candidate;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(e),
        }
    };
    file.set_len(keep)?;
    Ok(Some((len - keep, kept)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_that_leave_the_directory_are_refused() {
        let store = TranscriptStore::new("/tmp/x");
        for id in ["", "../etc", "a/b", ".hidden"] {
            assert!(
                matches!(store.path_of(id), Err(TranscriptError::BadSessionId(_))),
                "{id}"
            );
        }
        assert!(store.path_of("sess-1a-2").is_ok());
    }

    #[test]
    fn lines_written_through_an_open_transcript_land_after_other_writers_lines() {
        let dir = tempfile::tempdir().unwrap();
        // The directory does not exist yet: opening creates it.
        let store = TranscriptStore::new(dir.path().join("sessions"));
        let mut open = store.open("sess-1").unwrap();
        open.append(&serde_json::json!({"n": 1})).unwrap();
        // Another writer (a plugin's `session.append`) while the turn holds the file.
        store
            .append("sess-1", &serde_json::json!({"n": 2}))
            .unwrap();
        open.append(&serde_json::json!({"n": 3})).unwrap();
        drop(open);
        let text = std::fs::read_to_string(store.path_of("sess-1").unwrap()).unwrap();
        assert_eq!(text, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");
    }

    #[test]
    fn concurrent_appends_never_interleave_inside_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let store = TranscriptStore::new(dir.path());
        std::thread::scope(|s| {
            for t in 0..8 {
                let store = &store;
                s.spawn(move || {
                    for i in 0..200 {
                        let entry = serde_json::json!({"t": t, "i": i, "pad": "x".repeat(3000)});
                        store.append("shared", &entry).unwrap();
                    }
                });
            }
        });
        let text = std::fs::read_to_string(store.path_of("shared").unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1600);
        for line in lines {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["pad"].as_str().unwrap().len(), 3000);
        }
    }
}

/// What were these items' doc examples: the binary's docs are not doctested.
#[cfg(test)]
mod examples {
    #[test]
    fn transcriptstore_works_as_documented() {
        use crate::app::server::TranscriptStore;
        let dir = tempfile::tempdir().unwrap();
        let store = TranscriptStore::new(dir.path().join("sessions"));
        store
            .append(
                "sess-1",
                &serde_json::json!({"role": "user", "content": "hi"}),
            )
            .unwrap();
        let text = std::fs::read_to_string(store.path_of("sess-1").unwrap()).unwrap();
        assert_eq!(text, "{\"role\":\"user\",\"content\":\"hi\"}\n");
    }
}
