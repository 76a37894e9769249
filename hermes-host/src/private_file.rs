//! Opening the files the host keeps for itself (session transcripts and environment files,
//! log files, state files) so that nobody else's file is written, truncated or read by
//! mistake: never through a symlink, only a regular file, only the user's own.
//!
//! A shared directory (`/tmp`, a home copied from someone else, a world-writable `logs/`)
//! lets another user plant a symlink or a FIFO where the host expects its own file. Opened
//! the ordinary way, a symlink makes the host append to or truncate its target, and a FIFO
//! makes every command hang on `open`. Each function here opens with `O_NOFOLLOW` (and
//! `O_NONBLOCK` while checking), then checks the open descriptor itself (`fstat`), so the
//! check and the use are about the same file.
//!
//! Every error names the path and says what to do.
//!
//! ```
//! use std::io::Write as _;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("s-1.jsonl");
//! let mut file = hermes_host::private_file::open_append(&path).unwrap();
//! file.write_all(b"{}\n").unwrap();
//! std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link.jsonl")).unwrap();
//! assert!(hermes_host::private_file::open_append(&dir.path().join("link.jsonl")).is_err());
//! ```

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::Path;

/// Opens `path` for appending, creating it private to the user (0600) when missing. Refused:
/// a symlink, anything but a regular file, a file owned by another user.
///
/// # Errors
///
/// The IO error of opening, or `InvalidInput` with a message naming the path when it is
/// not the user's own regular file.
pub fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| explain(path, e))?;
    ours(path, &file)?;
    blocking(&file)?;
    Ok(file)
}

/// Creates `path` empty and private (0600), replacing what was there when it was the user's
/// own file or any symlink (the link itself is removed, never its target). A file another
/// user owns is refused, as is anything that is not a regular file or a link.
///
/// # Errors
///
/// The IO error of removing or creating, or `InvalidInput` naming the path when what is
/// there is not the user's to replace.
pub fn create_fresh(path: &Path) -> io::Result<File> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::remove_file(path)?,
        Ok(meta) if meta.is_file() && meta.uid() == euid() => std::fs::remove_file(path)?,
        Ok(meta) if meta.is_file() => {
            return Err(refused(
                path,
                &format!("it belongs to uid {}, not to you", meta.uid()),
            ));
        }
        Ok(_) => return Err(refused(path, "it is not a regular file")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Opens `path` for reading when it is a regular file, following symlinks (a dotfiles
/// `config.yaml` is a link). A FIFO, socket or device is refused instead of blocking
/// every command on it.
///
/// # Errors
///
/// The IO error of opening, or `InvalidInput` naming the path when it is not a regular
/// file.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Err(refused(path, "it is not a regular file"));
    }
    blocking(&file)?;
    Ok(file)
}

/// Reads `path` whole, as [`open_regular`] opens it.
///
/// # Errors
///
/// As [`open_regular`], and the IO error of reading.
pub fn read_regular(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut open_regular(path)?, &mut bytes)?;
    Ok(bytes)
}

/// Whether `path` itself (not a symlink's target) is a regular file of the user's that no
/// one else may write: the condition for running what it says (an environment file that
/// is sourced before commands).
pub fn is_private(path: &Path) -> bool {
    private_metadata(path).is_some()
}

/// The metadata of `path` itself when [`is_private`] holds, for a caller that also needs
/// its size or times without a second look.
pub fn private_metadata(path: &Path) -> Option<std::fs::Metadata> {
    std::fs::symlink_metadata(path)
        .ok()
        .filter(|m| m.is_file() && m.uid() == euid() && m.mode() & 0o022 == 0)
}

fn ours(path: &Path, file: &File) -> io::Result<()> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(refused(path, "it is not a regular file"));
    }
    if meta.uid() != euid() {
        return Err(refused(
            path,
            &format!("it belongs to uid {}, not to you", meta.uid()),
        ));
    }
    Ok(())
}

/// Clears the `O_NONBLOCK` used to open a FIFO without waiting for a writer.
fn blocking(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd as _;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function borrows; no memory is passed.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// ELOOP from `O_NOFOLLOW` says "too many levels of symbolic links"; say what happened.
fn explain(path: &Path, e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        refused(path, "it is a symbolic link")
    } else {
        e
    }
}

fn refused(path: &Path, why: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!(
            "refusing {}: {why}; remove it (or move it away) and hermes creates its own",
            path.display()
        ),
    )
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.yaml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = open_regular(&fifo).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        assert!(open_append(&fifo).is_err());
        assert!(create_fresh(&fifo).is_err());
    }

    #[test]
    fn a_symlink_is_replaced_by_create_fresh_and_its_target_kept() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, "keep me").unwrap();
        let link = dir.path().join("s.env");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let err = open_append(&link).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        create_fresh(&link).unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
        assert!(std::fs::symlink_metadata(&link).unwrap().is_file());
        assert!(is_private(&link));
    }
}
