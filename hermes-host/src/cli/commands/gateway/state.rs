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
        std::fs::write(&tmp, text)?;
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

/// The state in `path`, when there is a readable one.
pub fn read(path: &Path) -> Option<State> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Whether `pid` is a live `hermes ... gateway run` process (a pid file outlives a process
/// killed with SIGKILL, and its number may be reused).
pub fn is_gateway(pid: u32) -> bool {
    command_has(pid, &[b"gateway", b"run"])
}

/// Whether `pid` is a live process whose command line has `words` in a row.
pub fn command_has(pid: u32, words: &[&[u8]]) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    // A zombie has an empty command line: it is gone for our purposes.
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    args.windows(words.len()).any(|w| w == words)
}
