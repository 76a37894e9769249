//! `hermes logs`: reads a log file (the gateway's by default), its rotated predecessors
//! first, filtered by level, age and text, and with `--follow` keeps printing what is
//! written, across rotations.

use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;

use crate::app::logfile::{KEEP, LEVELS};
use crate::cli::ExitStatus;
use crate::cli::args::LogsArgs;
use crate::cli::settings::Settings;

/// How often `--follow` looks for new lines.
const POLL: Duration = Duration::from_millis(100);

/// The most of one line that is kept and shown; the rest is counted. A log line is far
/// shorter; a file that is not a log (or a line someone filled) must not fill memory.
const MAX_LINE: usize = 64 * 1024;

pub fn run(args: LogsArgs, settings: &Settings) -> anyhow::Result<ExitStatus> {
    let path = resolve(args.file.as_deref(), settings);
    let min_level = match &args.level {
        None => 0,
        Some(name) => match level_rank(&name.to_ascii_uppercase()) {
            Some(rank) => rank,
            None => bail!("--level {name}: not a level (valid: trace, debug, info, warn, error)"),
        },
    };
    let since = match &args.since {
        None => None,
        Some(text) => {
            let age = parse_duration(text).ok_or_else(|| {
                anyhow::anyhow!(
                    "--since {text}: give a duration with its unit, such as 90s, 10m, 2h or 1d"
                )
            })?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let cutoff = now.saturating_sub(age);
            Some(hermes_host::pyfmt::isoformat_utc(
                cutoff.as_secs() as i64,
                cutoff.subsec_micros(),
            ))
        }
    };
    let filter = Filter {
        min_level,
        since,
        grep: args.grep.clone(),
    };
    if !path.exists() && !args.follow {
        bail!(
            "{} does not exist yet: the gateway writes it when it runs (`hermes gateway start`), other commands with --log-file",
            path.display()
        );
    }
    if let Ok(meta) = std::fs::metadata(&path) {
        if !meta.is_file() {
            bail!(
                "{} is not a regular file (a device or a pipe never ends); give a log file",
                path.display()
            );
        }
    }
    // What is there: the rotated files, oldest first, then the current one. With `-n`,
    // only the last lines are kept; without, each is printed as it is read.
    let mut out = std::io::stdout().lock();
    let mut last: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let mut each = |line: String| -> bool {
        if args.lines == 0 {
            return writeln!(out, "{line}").is_ok();
        }
        if last.len() == args.lines {
            last.pop_front();
        }
        last.push_back(line);
        true
    };
    let mut current = None;
    for n in (0..=KEEP).rev() {
        let file = if n == 0 {
            path.clone()
        } else {
            PathBuf::from(format!("{}.{n}", path.display()))
        };
        let Ok(mut opened) = hermes_host::private_file::open_regular(&file) else {
            continue;
        };
        if !collect(&mut opened, &filter, &mut each) {
            return Ok(ExitStatus::Success);
        }
        if n == 0 {
            current = Some(opened);
        }
    }
    for line in last {
        if writeln!(out, "{line}").is_err() {
            return Ok(ExitStatus::Success);
        }
    }
    let _ = out.flush();
    drop(out);
    if !args.follow {
        return Ok(ExitStatus::Success);
    }
    follow(&path, current, &filter)
}

/// The log named on the command line: a path, or a name under `<home>/logs` (`gateway` is
/// `gateway.log`); the gateway's log when none is given.
fn resolve(file: Option<&Path>, settings: &Settings) -> PathBuf {
    let logs = settings.home.root().join("logs");
    match file {
        None => logs.join("gateway.log"),
        Some(p) if p.components().count() == 1 && !p.exists() => {
            let name = p.display().to_string();
            if name.ends_with(".log") {
                logs.join(name)
            } else {
                logs.join(format!("{name}.log"))
            }
        }
        Some(p) => p.to_path_buf(),
    }
}

struct Filter {
    min_level: usize,
    since: Option<String>,
    grep: Option<String>,
}

impl Filter {
    fn keeps(&self, line: &str) -> bool {
        let (time, level) = fields(line);
        if self.min_level > 0 && level.and_then(level_rank).unwrap_or(2) < self.min_level {
            return false;
        }
        if let (Some(since), Some(time)) = (&self.since, time) {
            // Both are `YYYY-MM-DDTHH:MM:SS.ffffffZ`: text order is time order.
            if time < since.as_str() {
                return false;
            }
        }
        self.grep.as_deref().is_none_or(|text| line.contains(text))
    }
}

/// The time and level of a line, in either format.
fn fields(line: &str) -> (Option<&str>, Option<&str>) {
    if line.starts_with('{') {
        let time = json_str(line, "\"time\":");
        let level = json_str(line, "\"level\":");
        return (time, level);
    }
    let mut words = line.splitn(3, ' ');
    (words.next(), words.next())
}

/// The string value after `key` in a one-line JSON object, without parsing all of it.
fn json_str<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = &line[line.find(key)? + key.len()..];
    let rest = rest.trim_start().strip_prefix('"')?;
    Some(&rest[..rest.find('"')?])
}

fn level_rank(level: &str) -> Option<usize> {
    LEVELS.iter().position(|l| *l == level).map(|i| i + 1)
}

/// Hands every line of `reader` that `filter` keeps to `each`, shown as [`shown`] shows
/// it; `false` when `each` said to stop (stdout closed).
fn collect(
    reader: impl std::io::Read,
    filter: &Filter,
    each: &mut impl FnMut(String) -> bool,
) -> bool {
    let mut go_on = true;
    hermes_host::lines::read_lines(reader, MAX_LINE, |piece| {
        let line = match piece {
            hermes_host::lines::Piece::Line(_, bytes) => shown(bytes),
            hermes_host::lines::Piece::TooLong(n) => {
                format!("[line {n}: longer than {MAX_LINE} bytes; not shown]")
            }
        };
        if filter.keeps(&line) {
            go_on = each(line);
        }
        go_on
    });
    go_on
}

/// One line of a log file as it is printed: UTF-8 (lossy), control characters visible, so
/// that what a client or a plugin put in a message cannot drive the reader's terminal.
fn shown(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.strip_suffix('\r').unwrap_or(&text);
    hermes_host::lines::escape_controls(text).into_owned()
}

/// Prints lines as they are appended to `path`, reopening it when it is rotated (a new
/// file at the path) or truncated, until the process is interrupted or stdout closes.
fn follow(
    path: &Path,
    mut file: Option<std::fs::File>,
    filter: &Filter,
) -> anyhow::Result<ExitStatus> {
    use std::os::unix::fs::MetadataExt as _;
    let mut pending: Vec<u8> = Vec::new();
    let mut position = match file.as_mut() {
        Some(f) => f.stream_position().unwrap_or(0),
        None => 0,
    };
    loop {
        let mut grew = false;
        if let Some(f) = file.as_mut() {
            let mut chunk = Vec::new();
            if f.read_to_end(&mut chunk).is_ok() && !chunk.is_empty() {
                grew = true;
                position += chunk.len() as u64;
                pending.extend_from_slice(&chunk);
                if pending.len() > MAX_LINE && !pending.contains(&b'\n') {
                    // A line that never ends: keep its start, drop the middle.
                    pending.truncate(MAX_LINE);
                }
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let text = shown(&line[..line.len() - 1]);
                    if filter.keeps(&text) {
                        let mut out = std::io::stdout().lock();
                        if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
                            return Ok(ExitStatus::Success);
                        }
                    }
                }
            }
        }
        if !grew {
            // A rotation puts a new file at the path; a truncation makes it shorter.
            let replaced = match (std::fs::metadata(path), file.as_ref()) {
                (Ok(now), Some(open)) => open
                    .metadata()
                    .map(|m| m.ino() != now.ino() || now.len() < position)
                    .unwrap_or(true),
                (Ok(_), None) => true,
                (Err(_), _) => false,
            };
            if replaced {
                file = std::fs::File::open(path).ok();
                position = 0;
                pending.clear();
                continue;
            }
            std::thread::sleep(POLL);
        }
    }
}

/// `90s`, `10m`, `2h`, `1d`: a number and its unit (a bare number is refused: minutes
/// or seconds?). `None` for anything else, and for an age past what a clock can hold.
fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let i = text.find(|c: char| !c.is_ascii_digit() && c != '.')?;
    let (number, unit) = (&text[..i], &text[i..]);
    let value: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)?;
    let seconds = match unit {
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86400.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds)
        .ok()
        .filter(|d| d.as_secs() < 1 << 40)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_filters_read_both_formats() {
        assert_eq!(parse_duration("90s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("2h"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Some(Duration::from_secs(86400)));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("5w"), None);
        assert_eq!(parse_duration("99999999999999999999d"), None);
        let filter = Filter {
            min_level: level_rank("INFO").unwrap(),
            since: Some("2026-12-06T09:00:00.000000Z".into()),
            grep: Some("boot-md".into()),
        };
        assert!(
            filter
                .keeps("2026-12-06T09:40:00.000001Z INFO hooks.boot-md: Running BOOT.md (3 chars)")
        );
        assert!(!filter.keeps("2026-12-06T09:40:00.000001Z DEBUG hooks.boot-md: x"));
        assert!(!filter.keeps("2026-12-06T08:40:00.000001Z INFO hooks.boot-md: old"));
        assert!(!filter.keeps("2026-12-06T09:40:00.000001Z INFO other"));
        assert!(filter.keeps(
            r#"{"time":"2026-12-06T09:40:00.000001Z","level":"WARN","message":"boot-md failed"}"#
        ));
    }
}
