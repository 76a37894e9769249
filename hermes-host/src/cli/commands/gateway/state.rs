//! `HERMES_HOME/gateway.state.json`: what a running gateway says about itself for `hermes
//! gateway status` (its pid, since when, where it listens, its log file, the hooks it
//! loaded and its last reload). Written once the gateway serves, rewritten at each reload,
//! removed when it stops.

use std::path::{Path, PathBuf};

use hermes_host::hooks::HooksReport;
use serde::{Deserialize, Serialize};

use crate::cli::settings::Settings;

/// The state file of `settings`' home.
pub fn path(settings: &Settings) -> PathBuf {
    settings.home.root().join("gateway.state.json")
}

/// What the file holds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct State {
    /// The gateway's process id.
    pub pid: u32,
    /// When it started, in seconds since the epoch.
    pub started: u64,
    /// Where clients reach it: a Unix socket path, `tcp 127.0.0.1:PORT`, `stdin`.
    pub endpoints: Vec<String>,
    /// Its log file, if it has one.
    pub log_file: Option<PathBuf>,
    /// The names of the plugins, shell hooks and gateway hooks loaded.
    pub plugins: Vec<String>,
    /// Shell hooks, as `event: command`.
    pub shell_hooks: Vec<String>,
    /// Gateway hooks, by name.
    pub gateway_hooks: Vec<String>,
    /// The last reload, in seconds since the epoch, and how many there were.
    pub last_reload: Option<u64>,
    /// Reloads since the start.
    pub reloads: u64,
    /// What the publisher did, when the gateway publishes its events (NATS).
    #[serde(default)]
    pub events: Option<EventCounts>,
}

/// Events published to the fleet's stream, waiting in the spool, and lost.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct EventCounts {
    pub published: u64,
    pub spooled: u64,
    pub dropped: u64,
    /// Events the broker had seen by id already (see the publisher's log).
    #[serde(default)]
    pub duplicates: u64,
}

impl State {
    /// The hooks of `report`.
    pub fn set_hooks(&mut self, report: &HooksReport) {
        self.plugins = report
            .plugins
            .iter()
            .filter(|p| p.error.is_none())
            .map(|p| p.name.clone())
            .collect();
        self.shell_hooks = report
            .shell
            .registered
            .iter()
            .map(|s| format!("{}: {}", s.event, s.command))
            .collect();
        self.gateway_hooks = report.gateway.iter().map(|h| h.name.clone()).collect();
    }
}

/// Seconds since the epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The file of a running gateway: rewritten with [`StateFile::update`], removed on drop
/// when it is still this process's.
pub struct StateFile {
    path: PathBuf,
    state: State,
}

impl StateFile {
    /// Writes `state` to `path` (atomically: a reader never sees half of it).
    pub fn write(path: &Path, state: State) -> std::io::Result<StateFile> {
        let file = StateFile {
            path: path.to_path_buf(),
            state,
        };
        file.save()?;
        Ok(file)
    }

    /// Changes the state and writes it again.
    pub fn update(&mut self, change: impl FnOnce(&mut State)) {
        change(&mut self.state);
        if let Err(e) = self.save() {
            tracing::warn!("cannot write {}: {e}", self.path.display());
        }
    }

    fn save(&self) -> std::io::Result<()> {
        let tmp = self
            .path
            .with_extension(format!("json.tmp-{}", std::process::id()));
        let text = serde_json::to_string_pretty(&self.state).map_err(std::io::Error::other)?;
        std::io::Write::write_all(
            &mut hermes_host::private_file::create_fresh(&tmp)?,
            text.as_bytes(),
        )?;
        std::fs::rename(&tmp, &self.path)
    }
}

impl Drop for StateFile {
    fn drop(&mut self) {
        if read(&self.path).is_some_and(|s| s.pid == std::process::id()) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The state in `path`, when there is a readable one (a regular file: a FIFO there would
/// hang every command that asks).
pub fn read(path: &Path) -> Option<State> {
    serde_json::from_slice(&hermes_host::private_file::read_regular(path).ok()?).ok()
}

/// `gateway.lock`: held (`flock`) by the gateway serving the home, for as long as it runs.
pub fn gateway_lock(settings: &Settings) -> PathBuf {
    settings.home.root().join("gateway.lock")
}

/// `gateway.supervisor.lock`: held by the supervisor `gateway start` detaches.
pub fn supervisor_lock(settings: &Settings) -> PathBuf {
    settings.home.root().join("gateway.supervisor.lock")
}

/// The gateway serving this home: the live process of this user holding its lock. Words in
/// a command line prove nothing (any process may have `gateway run` in its arguments, and a
/// copied home's files name the original's pid), and a pid file outlives its process; the
/// kernel's record of who holds the lock on this home's own `gateway.lock` does not.
pub fn gateway_pid(settings: &Settings) -> Option<u32> {
    lock_holder(&gateway_lock(settings))
}

/// The supervisor of this home's gateway, proved as [`gateway_pid`] proves the gateway.
pub fn supervisor_pid(settings: &Settings) -> Option<u32> {
    lock_holder(&supervisor_lock(settings))
}

/// Takes the `flock` on `path` (a regular file, created private, never through a link)
/// without waiting: `Ok(None)` when another process holds it. The kernel releases it when
/// the process ends, however it ends.
///
/// # Errors
///
/// When the file cannot be opened, naming it.
pub fn try_lock(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    use std::os::fd::AsRawFd as _;
    let file = hermes_host::private_file::open_append(path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Ok(None);
    }
    Ok(Some(file))
}

/// The pid holding an `flock` on the file at `path` (that file's device and inode, from
/// `/proc/locks`), when that process is alive and this user's.
pub fn lock_holder(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::symlink_metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let wanted = (
        u64::from(libc::major(meta.dev())),
        u64::from(libc::minor(meta.dev())),
        meta.ino(),
    );
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    // `1: FLOCK  ADVISORY  WRITE 8602 fe:00:5349492 0 EOF`; a waiter's line has `->`.
    let holder = locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.get(1) != Some(&"FLOCK") {
            return None;
        }
        let pid: u32 = fields.get(4)?.parse().ok()?;
        let mut id = fields.get(5)?.split(':');
        let major = u64::from_str_radix(id.next()?, 16).ok()?;
        let minor = u64::from_str_radix(id.next()?, 16).ok()?;
        let ino: u64 = id.next()?.parse().ok()?;
        ((major, minor, ino) == wanted).then_some(pid)
    })?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    let ours = std::fs::metadata(format!("/proc/{holder}")).is_ok_and(|m| m.uid() == me);
    (ours && alive(holder)).then_some(holder)
}

/// Whether `pid` is still a process (not a zombie).
pub fn alive(pid: u32) -> bool {
    let state = stat_fields(pid).and_then(|fields| fields.into_iter().next());
    !matches!(state.as_deref(), Some("Z") | Some("X") | None)
}

/// The fields of `/proc/<pid>/stat` after the command name (`state ppid pgrp ...`): the
/// name is in parentheses and may hold spaces and parentheses itself.
pub fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}
