//! The script file a hook command runs: which file it is, whether it can run, when it last
//! changed and what it contains (for approvals pinned to content).

use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

use super::spawn::{expand_tilde, split_words};
use crate::pyfmt::isoformat_utc;

/// Extensions that mark a word of the command as the script (case-insensitive).
const SCRIPT_EXTENSIONS: [&str; 13] = [
    ".sh", ".bash", ".zsh", ".fish", ".py", ".pyw", ".rb", ".pl", ".lua", ".js", ".mjs", ".cjs",
    ".ts",
];

/// The script word of `command` (reference §4.9): the first word ending in a script
/// extension; else the first word containing `/` or starting with `~`; else the first word.
/// An unparsable command is returned unchanged; an empty one gives `""`.
///
/// ```
/// use hermes_host::shell::script::script_path;
/// assert_eq!(script_path("python3 /opt/hooks/a.py --x"), "/opt/hooks/a.py");
/// assert_eq!(script_path("/usr/bin/env bash ~/h"), "/usr/bin/env");
/// assert_eq!(script_path("my-binary --verbose"), "my-binary");
/// ```
pub fn script_path(command: &str) -> String {
    let words = match split_words(command) {
        Ok(words) => words,
        Err(_) => return command.to_string(),
    };
    if words.is_empty() {
        return command.to_string();
    }
    if let Some(w) = words.iter().find(|w| {
        let lower = w.to_lowercase();
        SCRIPT_EXTENSIONS.iter().any(|ext| lower.ends_with(ext))
    }) {
        return w.clone();
    }
    if let Some(w) = words.iter().find(|w| w.contains('/') || w.starts_with('~')) {
        return w.clone();
    }
    words[0].clone()
}

/// The script's path with `~` expanded, or `None` for an empty command.
pub fn resolved_path(command: &str) -> Option<PathBuf> {
    let path = script_path(command);
    (!path.is_empty()).then(|| PathBuf::from(expand_tilde(&path)))
}

/// The script's modification time as `2026-04-21T10:11:12.123456Z`, or `None` when it
/// cannot be read (the reference's `script_mtime_at_approval`).
pub fn mtime_iso(command: &str) -> Option<String> {
    mtime_iso_file(&resolved_path(command)?)
}

/// [`mtime_iso`] of the file at `path`.
pub fn mtime_iso_file(path: &std::path::Path) -> Option<String> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    let (secs, nanos) = match modified.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (d.as_secs() as i64, d.subsec_nanos());
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    };
    let mut micros = (nanos + 500) / 1000;
    let mut secs = secs;
    if micros == 1_000_000 {
        secs += 1;
        micros = 0;
    }
    Some(isoformat_utc(secs, micros))
}

/// The hex sha256 of the script file, or `None` when it is not a readable regular file (a
/// command found on `PATH`, or a missing script).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let script = dir.path().join("h.sh");
/// std::fs::write(&script, "").unwrap();
/// let sha = hermes_host::shell::script::sha256(&format!("bash {}", script.display()));
/// assert_eq!(sha.unwrap(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
/// ```
pub fn sha256(command: &str) -> Option<String> {
    // An HTTP hook's "command" is its URL: there is no file to pin.
    if super::http::is_http_url(command) {
        return None;
    }
    let path = resolved_path(command)?;
    sha256_file(&path)
}

/// The hex sha256 of the regular file at `path`.
pub fn sha256_file(path: &std::path::Path) -> Option<String> {
    if !std::fs::metadata(path).ok()?.is_file() {
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    let digest = Sha256::digest(&bytes);
    Some(digest.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `command` can run as configured (reference §4.9): the script must be an existing
/// regular file; executable when it is the command itself, readable when an interpreter runs
/// it. A command found only through `PATH` counts as missing.
pub fn is_executable(command: &str) -> bool {
    let path = script_path(command);
    if path.is_empty() {
        return false;
    }
    let expanded = PathBuf::from(expand_tilde(&path));
    if !std::fs::metadata(&expanded).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Ok(words) = split_words(command) else {
        return false;
    };
    let bare = words.first() == Some(&path);
    let Ok(c_path) = std::ffi::CString::new(expanded.as_os_str().as_bytes()) else {
        return false;
    };
    let mode = if bare { libc::X_OK } else { libc::R_OK };
    // SAFETY: access() reads a NUL-terminated path that lives across the call.
    unsafe { libc::access(c_path.as_ptr(), mode) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_word_prefers_extensions_then_paths_then_the_first_word() {
        assert_eq!(script_path("/usr/bin/env bash hook.SH"), "hook.SH");
        assert_eq!(script_path("node ~/x"), "~/x");
        assert_eq!(script_path("echo 'unclosed"), "echo 'unclosed");
        assert_eq!(script_path(""), "");
    }

    #[test]
    fn executability_depends_on_how_the_script_is_invoked() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("h.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
        let bare = script.display().to_string();
        assert!(!is_executable(&bare));
        assert!(is_executable(&format!("bash {bare}")));
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(is_executable(&bare));
        assert!(!is_executable("definitely-not-a-file-here --x"));
    }

    #[test]
    fn mtimes_print_in_the_reference_format() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("h.sh");
        std::fs::write(&script, "x").unwrap();
        let iso = mtime_iso(&script.display().to_string()).unwrap();
        assert!(iso.ends_with('Z') && iso.len() >= 20, "{iso}");
        assert_eq!(mtime_iso("/nonexistent/h.sh"), None);
    }
}
