//! Log files: what a long-running command (the gateway above all) writes beside stderr, so
//! an operator can read it later with `hermes logs`.
//!
//! Every line has a time and a level, so it can be filtered: in the text format
//! `2026-12-06T09:40:00.123456Z INFO hooks.boot-md: Running BOOT.md (15 chars)`, the line
//! stderr shows after the time and level; in the JSON format one object per line,
//! `{"time": ..., "level": ..., "message": ...}`. A file that grows past its size limit is
//! rotated: `gateway.log` becomes `gateway.log.1`, the older ones move up, and the oldest
//! beyond [`KEEP`] is removed.
//!
//! Two sources write here: the gateway's own lines (hook loading, a handler's `logging`
//! records, refusals), which already start with their level when they have one, and the
//! `tracing` events of the library and the binary, through [`FileLayer`].

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::json;

/// The size past which a log file is rotated.
pub const MAX_BYTES: u64 = 10 * 1024 * 1024;

/// Rotated files kept besides the current one (`.1` to `.3`).
pub const KEEP: usize = 3;

/// The levels, from the least to the most severe, as lines spell them.
pub const LEVELS: [&str; 5] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];

/// How lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// `<time> <LEVEL> <message>`.
    #[default]
    Text,
    /// `{"time": ..., "level": ..., "message": ...}`.
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(text: &str) -> Result<Format, String> {
        match text {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            other => Err(format!("unknown log format '{other}' (valid: text, json)")),
        }
    }
}

/// One log file, appended to by every thread, rotated by size.
pub struct LogFile {
    path: PathBuf,
    format: Format,
    max_bytes: u64,
    state: Mutex<State>,
}

struct State {
    file: Option<std::fs::File>,
    written: u64,
    /// Said once: a log that cannot be written must not flood stderr about it.
    failed: bool,
}

impl LogFile {
    /// Opens (creates) `path` for appending, private to the user, creating its directory.
    ///
    /// # Errors
    ///
    /// When the directory or the file cannot be created, naming it.
    pub fn open(path: &Path, format: Format) -> Result<Arc<LogFile>, String> {
        LogFile::open_with_limit(path, format, MAX_BYTES)
    }

    /// [`open`](LogFile::open) with another size limit.
    ///
    /// # Errors
    ///
    /// As for [`open`](LogFile::open).
    pub fn open_with_limit(
        path: &Path,
        format: Format,
        max_bytes: u64,
    ) -> Result<Arc<LogFile>, String> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let file = append(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let written = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Arc::new(LogFile {
            path: path.to_path_buf(),
            format,
            max_bytes,
            state: Mutex::new(State {
                file: Some(file),
                written,
                failed: false,
            }),
        }))
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes one line of the gateway's: its level is its first word when that is a level
    /// (`INFO hooks.boot-md: ...`), else `INFO`.
    pub fn line(&self, line: &str) {
        let (level, message) = split_level(line);
        self.write(level, message);
    }

    /// Writes one line at `level` (one of [`LEVELS`]).
    pub fn write(&self, level: &str, message: &str) {
        let time = hermes_host::shell::consent::utc_now_iso();
        let text = match self.format {
            // One record, one line, whatever a client or a plugin put in the message.
            Format::Text => format!(
                "{time} {level} {}\n",
                hermes_host::lines::escape_controls(message)
            ),
            Format::Json => {
                format!(
                    "{}\n",
                    json!({"time": time, "level": level, "message": message})
                )
            }
        };
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.written + text.len() as u64 > self.max_bytes && state.written > 0 {
            state.file = None;
            match self.rotate() {
                Ok(file) => {
                    state.file = Some(file);
                    state.written = 0;
                }
                Err(e) => self.failed(&mut state, &e),
            }
        }
        let result = match state.file.as_mut() {
            Some(file) => file.write_all(text.as_bytes()),
            None => return,
        };
        match result {
            Ok(()) => state.written += text.len() as u64,
            Err(e) => self.failed(&mut state, &e.to_string()),
        }
    }

    fn failed(&self, state: &mut State, why: &str) {
        if !state.failed {
            state.failed = true;
            eprintln!(
                "hermes: cannot write the log file {}: {why}; logging to stderr only",
                self.path.display()
            );
        }
    }

    /// `path` -> `path.1` -> ... -> `path.KEEP` (the oldest is removed), then a new `path`.
    fn rotate(&self) -> Result<std::fs::File, String> {
        let numbered = |n: usize| PathBuf::from(format!("{}.{n}", self.path.display()));
        let _ = std::fs::remove_file(numbered(KEEP));
        for n in (1..KEEP).rev() {
            let _ = std::fs::rename(numbered(n), numbered(n + 1));
        }
        std::fs::rename(&self.path, numbered(1)).map_err(|e| e.to_string())?;
        append(&self.path).map_err(|e| e.to_string())
    }
}

/// Never through a symlink, never into another user's file: `--log-file` may name a
/// shared directory where someone else put a link to a file of yours.
fn append(path: &Path) -> std::io::Result<std::fs::File> {
    hermes_host::private_file::open_append(path)
}

/// Standard error for the log subscriber: each record's control characters are shown
/// escaped (its final newline kept), so a value in it cannot forge another line or reach
/// the terminal as an escape sequence.
pub struct EscapedStderr;

impl std::io::Write for EscapedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (body, newline) = match buf.strip_suffix(b"\n") {
            Some(body) => (body, true),
            None => (buf, false),
        };
        let text = String::from_utf8_lossy(body);
        let mut err = std::io::stderr().lock();
        err.write_all(hermes_host::lines::escape_controls(&text).as_bytes())?;
        if newline {
            err.write_all(b"\n")?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// `("INFO", "hooks.boot-md: ...")` for `INFO hooks.boot-md: ...`; a line without a level
/// word is `INFO`.
pub fn split_level(line: &str) -> (&'static str, &str) {
    let trimmed = line.trim_start();
    for level in LEVELS {
        if let Some(rest) = trimmed.strip_prefix(level) {
            if rest.starts_with(' ') || rest.is_empty() {
                return (level, rest.trim_start());
            }
        }
    }
    // Python's names for two of them.
    for (name, level) in [("WARNING", "WARN"), ("CRITICAL", "ERROR")] {
        if let Some(rest) = trimmed.strip_prefix(name) {
            if rest.starts_with(' ') {
                return (level, rest.trim_start());
            }
        }
    }
    ("INFO", line)
}

/// The file [`FileLayer`] writes `tracing` events to, once a command opened one.
static SINK: OnceLock<Arc<LogFile>> = OnceLock::new();

/// What turns [`FileLayer`]'s filter on, installed with the subscriber.
static ENABLE: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

/// Installs what [`set_global`] calls to let INFO events through to the file: the layer's
/// filter stays off until then, so the level hint is unchanged while no file is open.
pub fn on_open(enable: Box<dyn Fn() + Send + Sync>) {
    let _ = ENABLE.set(enable);
}

/// Makes `file` where `tracing` events go from now on (the first call wins).
pub fn set_global(file: Arc<LogFile>) {
    if SINK.set(file).is_ok() {
        if let Some(enable) = ENABLE.get() {
            enable();
        }
    }
}

/// The file `tracing` events go to, when a command opened one.
pub fn global() -> Option<Arc<LogFile>> {
    SINK.get().cloned()
}

/// A `tracing` layer writing events at INFO and above to the global log file, whatever
/// filter stderr has: the file is what an operator reads afterwards. Its filter is off
/// until a file is opened (see [`on_open`]).
pub struct FileLayer;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for FileLayer {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let Some(file) = SINK.get() else {
            return;
        };
        let meta = event.metadata();
        if *meta.level() > tracing::Level::INFO {
            return;
        }
        let mut message = Message(String::new());
        event.record(&mut message);
        let level = match *meta.level() {
            tracing::Level::ERROR => "ERROR",
            tracing::Level::WARN => "WARN",
            tracing::Level::INFO => "INFO",
            tracing::Level::DEBUG => "DEBUG",
            tracing::Level::TRACE => "TRACE",
        };
        file.write(level, &format!("{}: {}", meta.target(), message.0));
    }
}

struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        } else {
            self.0.push_str(&format!(" {}={value:?}", field.name()));
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.0 = value.to_string();
        } else {
            self.0.push_str(&format!(" {}={value}", field.name()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_time_and_level_and_a_full_file_rotates_keeping_three() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/gateway.log");
        let log = LogFile::open_with_limit(&path, Format::Text, 200).unwrap();
        log.line("INFO hooks.boot-md: Running BOOT.md (15 chars)");
        log.line("[hooks] Loaded hook 'boot-md'");
        log.line("WARNING hooks.x: careful");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].ends_with(" INFO hooks.boot-md: Running BOOT.md (15 chars)"),
            "{text}"
        );
        assert!(
            lines[1].ends_with(" INFO [hooks] Loaded hook 'boot-md'"),
            "{text}"
        );
        assert!(lines[2].ends_with(" WARN hooks.x: careful"), "{text}");
        assert!(
            lines[0].starts_with("20") && lines[0].contains('T'),
            "{text}"
        );
        for i in 0..40 {
            log.line(&format!("ERROR line {i}"));
        }
        for n in 1..=KEEP {
            assert!(
                PathBuf::from(format!("{}.{n}", path.display())).exists(),
                "no .{n}"
            );
        }
        assert!(!PathBuf::from(format!("{}.{}", path.display(), KEEP + 1)).exists());
        assert!(std::fs::metadata(&path).unwrap().len() <= 200);
        let last = std::fs::read_to_string(&path).unwrap();
        assert!(last.trim_end().ends_with("ERROR line 39"), "{last}");
    }

    #[test]
    fn the_json_format_is_one_object_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.log");
        let log = LogFile::open(&path, Format::Json).unwrap();
        log.line("WARN gateway: refused tcp 127.0.0.1:5");
        let line: serde_json::Value =
            serde_json::from_str(std::fs::read_to_string(&path).unwrap().trim()).unwrap();
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["message"], "gateway: refused tcp 127.0.0.1:5");
        assert!(line["time"].as_str().unwrap().ends_with('Z'));
    }
}
