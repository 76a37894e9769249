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
                anyhow::anyhow!("--since {text}: give a duration such as 90s, 10m, 2h or 1d")
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
    // What is there: the rotated files, oldest first, then the current one.
    let mut matching: Vec<String> = Vec::new();
    for n in (1..=KEEP).rev() {
        let old = PathBuf::from(format!("{}.{n}", path.display()));
        if let Ok(file) = std::fs::File::open(&old) {
            collect(std::io::BufReader::new(file), &filter, &mut matching);
        }
    }
    let mut current = std::fs::File::open(&path).ok();
    if let Some(file) = current.as_mut() {
        collect(std::io::BufReader::new(&mut *file), &filter, &mut matching);
    }
    let skip = if args.lines == 0 {
        0
    } else {
        matching.len().saturating_sub(args.lines)
    };
    let mut out = std::io::stdout().lock();
    for line in &matching[skip..] {
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

fn collect(reader: impl std::io::BufRead, filter: &Filter, out: &mut Vec<String>) {
    for line in reader.split(b'\n').map_while(Result::ok) {
        let line = String::from_utf8_lossy(&line).into_owned();
        if filter.keeps(&line) {
            out.push(line);
        }
    }
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
                while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let text = String::from_utf8_lossy(&line[..line.len() - 1]).into_owned();
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

/// `90s`, `10m`, `2h`, `1d`, or a bare number of seconds.
fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => (&text[..i], &text[i..]),
        None => (text, "s"),
    };
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
    Some(Duration::from_secs_f64(seconds))
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
        assert_eq!(parse_duration("5"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("5w"), None);
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
