//! Splits a byte stream from someone else (a gateway client, a persistent hook's stdout)
//! into lines with a bound on each: whatever chunks the bytes arrive in, a line over the
//! limit is reported once and the rest of it skipped up to its newline, so the memory one
//! stream can hold is the limit, not whatever the peer sends.
//!
//! Bytes, not text: a line that is not UTF-8 reaches the caller as it came, to be answered
//! or reported there, instead of ending the stream.
//!
//! ```
//! use hermes_host::lines::{LineSplitter, Piece};
//!
//! let mut lines = LineSplitter::new(8);
//! let mut seen = Vec::new();
//! for chunk in [&b"ab"[..], b"c\n0123456789", b"\nok\n"] {
//!     lines.push(chunk, |piece| match piece {
//!         Piece::Line(n, bytes) => seen.push(format!("{n}: {}", String::from_utf8_lossy(bytes))),
//!         Piece::TooLong(n) => seen.push(format!("{n}: too long")),
//!     });
//! }
//! assert_eq!(seen, ["1: abc", "2: too long", "3: ok"]);
//! ```

use std::io::Read;
use std::time::Instant;

/// Turns inbound bytes into lines of at most `max` bytes each; see the [module](self).
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    line: Vec<u8>,
    too_long: bool,
    line_no: u64,
    partial_since: Option<Instant>,
}

/// One step of [`LineSplitter::push`].
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Complete line number `n` (counted from 1), without its newline.
    Line(u64, &'a [u8]),
    /// Line `n` grew past the limit; it is skipped up to its newline.
    TooLong(u64),
}

impl LineSplitter {
    /// A splitter for lines of at most `max` bytes (the newline not counted).
    pub fn new(max: usize) -> LineSplitter {
        LineSplitter {
            max,
            line: Vec::new(),
            too_long: false,
            line_no: 0,
            partial_since: None,
        }
    }

    /// Lines completed so far (the next one is `line_no() + 1`).
    pub fn line_no(&self) -> u64 {
        self.line_no
    }

    /// When the unfinished line began, if one is open: the clock for a peer that starts a
    /// line and never ends it (slowloris).
    pub fn partial_since(&self) -> Option<Instant> {
        self.partial_since
    }

    /// Feeds `bytes`, calling `each` for every complete line and once for every line that
    /// grows past the limit.
    pub fn push(&mut self, mut bytes: &[u8], mut each: impl FnMut(Piece<'_>)) {
        while !bytes.is_empty() {
            let (part, rest, complete) = match bytes.iter().position(|&b| b == b'\n') {
                Some(at) => (&bytes[..at], &bytes[at + 1..], true),
                None => (bytes, &[][..], false),
            };
            bytes = rest;
            if self.partial_since.is_none() {
                self.partial_since = Some(Instant::now());
            }
            if !self.too_long {
                if self.line.len() + part.len() > self.max {
                    self.too_long = true;
                    // Give the memory back: the line is not kept.
                    self.line = Vec::new();
                    each(Piece::TooLong(self.line_no + 1));
                } else {
                    self.line.extend_from_slice(part);
                }
            }
            if complete {
                self.line_no += 1;
                if !self.too_long {
                    each(Piece::Line(self.line_no, &self.line));
                }
                self.line.clear();
                self.too_long = false;
                self.partial_since = None;
            }
        }
    }

    /// The unfinished last line at end of input, if any (nothing when it was too long).
    pub fn finish(&mut self) -> Option<(u64, Vec<u8>)> {
        self.partial_since = None;
        if self.too_long || self.line.is_empty() {
            self.too_long = false;
            return None;
        }
        self.line_no += 1;
        Some((self.line_no, std::mem::take(&mut self.line)))
    }
}

/// Reads `input` to its end (or until `each` returns false) in lines of at most `max`
/// bytes, the unfinished last line included; a read error ends it as the end of input does.
///
/// ```
/// use hermes_host::lines::{Piece, read_lines};
///
/// let mut seen = Vec::new();
/// read_lines(&b"one\n\xff\ntwo"[..], 16, |piece| {
///     if let Piece::Line(n, bytes) = piece {
///         seen.push((n, bytes.to_vec()));
///     }
///     true
/// });
/// assert_eq!(seen, [(1, b"one".to_vec()), (2, vec![0xff]), (3, b"two".to_vec())]);
/// ```
pub fn read_lines(mut input: impl Read, max: usize, mut each: impl FnMut(Piece<'_>) -> bool) {
    let mut lines = LineSplitter::new(max);
    let mut chunk = vec![0u8; 8 * 1024];
    let mut go_on = true;
    while go_on {
        let n = match input.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        lines.push(&chunk[..n], |piece| {
            if go_on {
                go_on = each(piece);
            }
        });
    }
    if !go_on {
        return;
    }
    if let Some((n, bytes)) = lines.finish() {
        each(Piece::Line(n, &bytes));
    }
}

/// `text` with every control character shown as an escape (`\r`, `\n`, `\t`, `\x1b`,
/// `\u{9b}`), for one line of a log: a value someone else chose (a chat's `user_id`, a
/// plugin's log record) can then neither forge a whole log line with `\r\n` nor drive the
/// terminal of whoever reads the log with escape sequences. Borrowed when there is nothing
/// to escape, which is nearly always.
///
/// ```
/// use hermes_host::lines::escape_controls;
/// assert_eq!(escape_controls("plain"), "plain");
/// assert_eq!(escape_controls("u1\r\nINFO gateway: reloaded"), "u1\\r\\nINFO gateway: reloaded");
/// assert_eq!(escape_controls("\x1b]0;owned\x07"), "\\x1b]0;owned\\x07");
/// ```
pub fn escape_controls(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(max: usize, chunks: &[&[u8]]) -> Vec<String> {
        let mut lines = LineSplitter::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            lines.push(chunk, |piece| {
                out.push(match piece {
                    Piece::Line(n, b) => format!("{n}:{}", String::from_utf8_lossy(b)),
                    Piece::TooLong(n) => format!("{n}:too long"),
                })
            });
        }
        if let Some((n, b)) = lines.finish() {
            out.push(format!("{n}:{} (eof)", String::from_utf8_lossy(&b)));
        }
        out
    }

    #[test]
    fn lines_split_across_chunks_and_an_over_long_one_is_skipped_to_its_newline() {
        assert_eq!(split(8, &[b"ab", b"c\nde", b"f\n"]), ["1:abc", "2:def"]);
        assert_eq!(
            split(4, &[b"12345", b"678\nok\n", b"tail"]),
            ["1:too long", "2:ok", "3:tail (eof)"]
        );
        assert_eq!(split(4, &[b"1234\n12345\n"]), ["1:1234", "2:too long"]);
    }

    #[test]
    fn the_slowloris_clock_runs_only_while_a_line_is_open() {
        let mut lines = LineSplitter::new(8);
        assert!(lines.partial_since().is_none());
        lines.push(b"half", |_| {});
        assert!(lines.partial_since().is_some());
        lines.push(b"\n", |_| {});
        assert!(lines.partial_since().is_none());
        assert_eq!(lines.line_no(), 1);
    }
}
