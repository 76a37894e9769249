//! Appending JSON lines so that concurrent writers never interleave.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Write},
    path::Path,
};

use serde_json::Value;

/// Appends `value` as one line to `path`, creating the file and its directory if missing.
///
/// The file is opened with `O_APPEND` and the line, newline included, goes out in a single
/// `write`, so lines from concurrent writers (threads or processes) never interleave.
///
/// # Errors
///
/// The IO error when the file cannot be opened or written, or a `WriteZero` error when
/// only part of the line was written.
pub fn append(path: &Path, value: &Value) -> io::Result<()> {
    let mut line = value.to_string();
    line.push('\n');
    let mut file = match open_for_append(path) {
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                fs::create_dir_all(dir)?;
            }
            open_for_append(path)?
        }
        opened => opened?,
    };
    let written = file.write(line.as_bytes())?;
    if written == line.len() {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("wrote {written} of {} bytes", line.len()),
        ))
    }
}

/// [`append`], logging a failure with `tracing::warn!` instead of returning it, for hooks:
/// a lost line must never fail or stop the agent.
pub fn append_or_warn(path: &Path, value: &Value) {
    if let Err(err) = append(path, value) {
        tracing::warn!("{}: cannot append a line: {err}", path.display());
    }
}

fn open_for_append(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn each_value_becomes_one_line_at_the_end_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        fs::write(&path, "{\"first\":true}\n").unwrap();
        append(&path, &json!({"n": 1, "text": "a\nb"})).unwrap();
        append(&path, &json!({"n": 2})).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\"first\":true}\n{\"n\":1,\"text\":\"a\\nb\"}\n{\"n\":2}\n"
        );
    }

    #[test]
    fn missing_directories_are_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/log.jsonl");
        append(&path, &json!(1)).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "1\n");
    }

    #[test]
    fn concurrent_writers_never_interleave_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.jsonl");
        let padding = "x".repeat(2000);
        std::thread::scope(|scope| {
            for writer in 0..8 {
                let (path, padding) = (&path, &padding);
                scope.spawn(move || {
                    for n in 0..50 {
                        append(path, &json!({"writer": writer, "n": n, "pad": padding})).unwrap();
                    }
                });
            }
        });
        let text = fs::read_to_string(&path).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect();
        assert_eq!(lines.len(), 400);
        for writer in 0..8 {
            let mine: Vec<_> = lines.iter().filter(|l| l["writer"] == writer).collect();
            assert_eq!(mine.len(), 50);
            assert!(mine.iter().enumerate().all(|(n, l)| l["n"] == n));
        }
    }

    #[test]
    fn a_directory_in_place_of_the_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(append(dir.path(), &json!(1)).is_err());
    }
}
