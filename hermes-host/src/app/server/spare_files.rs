//! Empty transcript files made ahead of need, so that a chat's first answer does not wait
//! for the filesystem to create one.
//!
//! Creating a file is the slowest step of a chat's first answer, and the least
//! predictable: on ext4 it costs 10 µs on a quiet filesystem and over 150 µs after many
//! recent deletions (the inode allocator skips inodes freed in the last 30 s, and checks
//! each one), and creations in one directory take turns on its lock. Two hundred chats
//! starting at once then queue for tens of milliseconds (BENCHMARKS.md, "A chat's first
//! answer waits on the filesystem's recent deletions").
//!
//! So the gateway keeps `gateway.spare_transcripts` empty files in `sessions/.spare/`,
//! made by one background thread while no session is starting, and a new transcript is
//! a spare renamed into place: a rename allocates no inode. The rename refuses to replace
//! (`RENAME_NOREPLACE`), so a transcript another writer created in the meantime is never
//! lost, and a spare is never handed out twice, even to another process sharing the home:
//! only one rename of a name can succeed. Spares left by a gateway that stopped or crashed
//! are empty files, taken over by the next one. Without spares (none left, the setting at
//! 0, a system or filesystem without `RENAME_NOREPLACE`) a transcript is created as before.

use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hermes_host::gateway::GatewayLog;

/// How long no session must have started before the thread makes spares again: a spare
/// costs the file creation it later saves, and made during a burst of new sessions it
/// would compete with them for the CPU and the filesystem's inode allocator, so it waits
/// for a lull.
const QUIET: Duration = Duration::from_millis(250);

/// The spare files of one sessions directory, and the thread keeping them.
pub(crate) struct SpareFiles {
    dir: PathBuf,
    target: usize,
    state: Mutex<State>,
    /// Wakes the thread: a spare taken from a full set, or `stop`.
    wake: Condvar,
    /// Set when the system refuses `RENAME_NOREPLACE`: every spare is then useless.
    unsupported: AtomicBool,
}

struct State {
    ready: Vec<PathBuf>,
    last_taken: Option<Instant>,
    stopping: bool,
    next_name: u64,
}

impl SpareFiles {
    /// Keeps `target` spares in `<sessions_dir>/.spare/`, made by a thread started here;
    /// `None` when `target` is 0 or the thread cannot start (said in the log).
    pub(crate) fn start(
        sessions_dir: &Path,
        target: usize,
        log: Arc<dyn GatewayLog>,
    ) -> Option<Arc<SpareFiles>> {
        if target == 0 || cfg!(not(any(target_os = "linux", target_os = "android"))) {
            return None;
        }
        let spares = Arc::new(SpareFiles {
            dir: sessions_dir.join(".spare"),
            target,
            state: Mutex::new(State {
                ready: Vec::with_capacity(target),
                last_taken: None,
                stopping: false,
                next_name: 0,
            }),
            wake: Condvar::new(),
            unsupported: AtomicBool::new(false),
        });
        let (keeper, keeper_log) = (spares.clone(), log.clone());
        let started = std::thread::Builder::new()
            .name("gateway-spares".into())
            .spawn(move || keeper.keep_filled(&*keeper_log));
        match started {
            Ok(_) => Some(spares),
            Err(e) => {
                log.line(&format!(
                    "gateway: no spare transcript files: cannot start a thread: {e}; new \
                     sessions create their transcripts as they start"
                ));
                None
            }
        }
    }

    /// Renames a spare to `path` if `path` does not exist; `true` when `path` is now a
    /// new empty file. `false` leaves everything as it was: `path` exists already, or no
    /// spare could be used, and the caller creates the file itself.
    pub(crate) fn place(&self, path: &Path) -> bool {
        if self.unsupported.load(Ordering::Relaxed) {
            return false;
        }
        let spare = {
            let mut state = self.lock();
            let Some(spare) = state.ready.pop() else {
                return false;
            };
            state.last_taken = Some(Instant::now());
            if state.ready.len() + 1 == self.target {
                // The thread sleeps without a deadline only when the set is full.
                self.wake.notify_one();
            }
            spare
        };
        match rename_noreplace(&spare, path) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                self.lock().ready.push(spare);
                false
            }
            Err(e) if is_unsupported(&e) => {
                self.unsupported.store(true, Ordering::Relaxed);
                self.lock().ready.push(spare);
                false
            }
            // The spare is gone (removed by hand) or the directory moved: drop it.
            Err(_) => false,
        }
    }

    /// Stops the thread after the file it is making; the spares stay for the next start.
    pub(crate) fn stop(&self) {
        self.lock().stopping = true;
        self.wake.notify_one();
    }

    /// How many spares are ready now.
    #[cfg(test)]
    pub(crate) fn ready(&self) -> usize {
        self.lock().ready.len()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The thread: takes over the spares already there, then makes one whenever the set
    /// is short and no session started for [`QUIET`]; sleeps otherwise.
    fn keep_filled(&self, log: &dyn GatewayLog) {
        if let Err(e) = private_dir(&self.dir) {
            log.line(&self.give_up(&e));
            return;
        }
        self.adopt();
        loop {
            {
                let mut state = self.lock();
                loop {
                    if state.stopping || self.unsupported.load(Ordering::Relaxed) {
                        return;
                    }
                    if state.ready.len() >= self.target {
                        state = self.wake.wait(state).unwrap_or_else(|e| e.into_inner());
                        continue;
                    }
                    let since = state.last_taken.map_or(QUIET, |t| t.elapsed());
                    if since >= QUIET {
                        break;
                    }
                    state = self
                        .wake
                        .wait_timeout(state, QUIET - since)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
            if let Err(e) = self.make_one() {
                log.line(&self.give_up(&e));
                return;
            }
        }
    }

    fn give_up(&self, e: &std::io::Error) -> String {
        format!(
            "gateway: cannot keep spare transcript files in {}: {e}; new sessions create \
             their transcripts as they start (check the directory, or set \
             gateway.spare_transcripts: 0)",
            self.dir.display()
        )
    }

    /// Takes over the empty files a previous gateway left, and removes anything else:
    /// a file that is not empty, or that has another name (a rename cut short by a crash
    /// cannot leave one, but a hand-made link could).
    fn adopt(&self) {
        use std::os::unix::fs::MetadataExt as _;
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut found = Vec::new();
        for entry in entries.flatten() {
            let path = entry.path();
            let usable = std::fs::symlink_metadata(&path)
                .is_ok_and(|m| m.is_file() && m.len() == 0 && m.nlink() == 1);
            if usable {
                found.push(path);
            } else {
                // Best effort: a directory or a file we cannot remove is simply not used.
                let _ = std::fs::remove_file(&path);
            }
        }
        let mut state = self.lock();
        for path in found {
            if state.ready.len() < self.target {
                state.ready.push(path);
            } else {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    fn make_one(&self) -> std::io::Result<()> {
        let pid = std::process::id();
        loop {
            let name = {
                let mut state = self.lock();
                state.next_name += 1;
                state.next_name
            };
            let path = self.dir.join(format!("{pid}-{name}"));
            // The same call, and so the same mode, as a transcript created in place.
            let made = std::fs::OpenOptions::new()
                .create_new(true)
                .append(true)
                .mode(0o600)
                .open(&path);
            match made {
                Ok(_) => {
                    self.lock().ready.push(path);
                    return Ok(());
                }
                // Left by an earlier process with the same pid: try the next name.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn rename_noreplace(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt as _;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))
    };
    let (from, to) = (c(from)?, c(to)?);
    // SAFETY: both are NUL-terminated paths that outlive the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_NOREPLACE,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Elsewhere a rename may replace what it lands on, which would lose a transcript: no
/// spares.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn rename_noreplace(_from: &Path, _to: &Path) -> std::io::Result<()> {
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// The errors saying the system or filesystem cannot rename without replacing.
fn is_unsupported(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::Unsupported
        || matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS))
}

/// Creates `dir` and its missing parents, new ones readable by the user only.
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt as _;

    fn lines() -> (Arc<dyn GatewayLog>, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let log: Arc<dyn GatewayLog> =
            Arc::new(move |line: &str| sink.lock().unwrap().push(line.to_string()));
        (log, seen)
    }

    /// Waits (up to 10 s) for the thread to have `n` spares ready.
    fn wait_ready(spares: &SpareFiles, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while spares.ready() != n {
            assert!(
                Instant::now() < deadline,
                "{} spares, not {n}",
                spares.ready()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn inodes(dir: &Path) -> Vec<u64> {
        let mut found: Vec<u64> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().ino())
            .collect();
        found.sort_unstable();
        found
    }

    #[test]
    fn a_new_transcript_is_a_spare_renamed_into_place_and_the_set_is_refilled() {
        let home = tempfile::tempdir().unwrap();
        let sessions = home.path().join("sessions");
        let (log, seen) = lines();
        let spares = SpareFiles::start(&sessions, 3, log).unwrap();
        wait_ready(&spares, 3);
        let before = inodes(&sessions.join(".spare"));
        let store = super::super::TranscriptStore::new(&sessions).with_spares(Some(spares.clone()));
        store
            .append("sess-1", &serde_json::json!({"role": "user"}))
            .unwrap();
        let transcript = sessions.join("sess-1.jsonl");
        let ino = std::fs::metadata(&transcript).unwrap().ino();
        assert!(
            before.contains(&ino),
            "the transcript is not one of the spares"
        );
        assert_eq!(
            std::fs::read_to_string(&transcript).unwrap(),
            "{\"role\":\"user\"}\n"
        );
        // A transcript that exists is opened, and takes no spare.
        store
            .append("sess-1", &serde_json::json!({"n": 2}))
            .unwrap();
        assert_eq!(std::fs::metadata(&transcript).unwrap().ino(), ino);
        // After a quiet spell, the set is whole again, with a new file.
        wait_ready(&spares, 3);
        let after = inodes(&sessions.join(".spare"));
        assert_eq!(after.len(), 3);
        assert!(!after.contains(&ino));
        spares.stop();
        assert!(
            seen.lock().unwrap().is_empty(),
            "{:?}",
            seen.lock().unwrap()
        );
    }

    #[test]
    fn a_spare_never_replaces_a_file_already_there() {
        let home = tempfile::tempdir().unwrap();
        let (log, _) = lines();
        let spares = SpareFiles::start(home.path(), 2, log).unwrap();
        wait_ready(&spares, 2);
        let path = home.path().join("sess-1.jsonl");
        std::fs::write(&path, "{\"kept\":true}\n").unwrap();
        assert!(!spares.place(&path));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"kept\":true}\n");
        // The spare went back into the set.
        assert_eq!(spares.ready(), 2);
        assert_eq!(inodes(&home.path().join(".spare")).len(), 2);
        spares.stop();
    }

    #[test]
    fn empty_spares_left_behind_are_taken_over_and_anything_else_removed() {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".spare");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("1-1"), "").unwrap();
        std::fs::write(dir.join("1-2"), "not empty").unwrap();
        std::fs::write(dir.join("1-3"), "").unwrap();
        std::fs::hard_link(dir.join("1-3"), home.path().join("linked.jsonl")).unwrap();
        let kept = std::fs::metadata(dir.join("1-1")).unwrap().ino();
        let (log, _) = lines();
        let spares = SpareFiles::start(home.path(), 2, log).unwrap();
        wait_ready(&spares, 2);
        spares.stop();
        assert!(inodes(&dir).contains(&kept));
        assert!(!dir.join("1-2").exists());
        assert!(!dir.join("1-3").exists());
        assert!(home.path().join("linked.jsonl").exists());
        assert_eq!(inodes(&dir).len(), 2);
    }

    #[test]
    fn a_directory_where_no_spare_can_be_made_is_said_once_and_transcripts_still_work() {
        let home = tempfile::tempdir().unwrap();
        // `.spare` cannot be a directory: a file has its name.
        std::fs::write(home.path().join(".spare"), "").unwrap();
        let (log, seen) = lines();
        let spares = SpareFiles::start(home.path(), 2, log).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while seen.lock().unwrap().is_empty() {
            assert!(Instant::now() < deadline, "nothing logged");
            std::thread::sleep(Duration::from_millis(5));
        }
        let said = seen.lock().unwrap().clone();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].contains(".spare") && said[0].contains("spare_transcripts: 0"),
            "{}",
            said[0]
        );
        let store = super::super::TranscriptStore::new(home.path()).with_spares(Some(spares));
        store.append("sess-1", &serde_json::json!({})).unwrap();
        assert_eq!(
            std::fs::read_to_string(home.path().join("sess-1.jsonl")).unwrap(),
            "{}\n"
        );
    }
}
