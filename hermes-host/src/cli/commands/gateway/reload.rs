//! Reloading a running gateway's hooks: SIGHUP, and `hermes gateway reload`, which finds
//! the gateway through its pid file and sends it SIGHUP.
//!
//! A reload reads `config.yaml`, the shell hooks (consent is asked again, as at start),
//! the gateway hook directories and the plugin list again, and swaps the new agent in.
//! Messages handled from then on use it; turns already running finish with the hooks they
//! started with. Isolated and Python plugins get fresh workers on their code as it is now. An
//! in-process plugin cannot be unloaded (abi_stable keeps a library loaded for the life of
//! the process), so one whose library changed on disk gets a line saying that the gateway
//! must be restarted for it.
//!
//! A reload is refused, and the hooks loaded before stay, when `config.yaml` does not
//! parse, or when something that is loaded now would fail to load (a plugin or a gateway
//! hook that broke): a typo in a file must not silently switch a guard off. A shell hook
//! that consent or the permission check leaves out is not such a break: a revoked hook
//! stops at the reload, which goes through.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use hermes_host::gateway::GatewayLog;
use hermes_host::hooks::HooksReport;
use hermes_host::plugins::Isolation;

use crate::app::agent::Agent;
use crate::app::server::Server;
use crate::cli::ExitStatus;
use crate::cli::load::load_hooks;
use crate::cli::settings::Settings;

/// The pid file of the gateway serving a home.
pub fn pid_file(settings: &Settings) -> PathBuf {
    settings.home.root().join("gateway.pid")
}

/// Writes this process's pid to the home's pid file; removed when the value is dropped.
pub struct PidFile(PathBuf);

impl PidFile {
    /// Records this process as the gateway of `settings`' home.
    ///
    /// # Errors
    ///
    /// When the file cannot be written.
    pub fn write(settings: &Settings) -> std::io::Result<PidFile> {
        use std::io::Write as _;
        let path = pid_file(settings);
        hermes_host::private_file::create_fresh(&path)?
            .write_all(format!("{}\n", std::process::id()).as_bytes())?;
        Ok(PidFile(path))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        // Only our own: a gateway started later in the same home wrote its pid over ours.
        let ours = hermes_host::private_file::read_regular(&self.0)
            .is_ok_and(|text| text.trim_ascii() == std::process::id().to_string().as_bytes());
        if ours {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// The lock a gateway holds on its home (`gateway.lock`, an `flock` the kernel releases
/// when the process ends, however it ends), so that a second gateway does not start on
/// the same home and take over its pid file unnoticed.
pub struct GatewayLock(#[allow(dead_code)] std::fs::File);

impl GatewayLock {
    /// Takes the lock of `settings`' home.
    ///
    /// # Errors
    ///
    /// Another gateway holds it (named by the pid file, with what to do), or the lock file
    /// cannot be opened.
    pub fn take(settings: &Settings) -> anyhow::Result<GatewayLock> {
        let path = super::state::gateway_lock(settings);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        match super::state::try_lock(&path)? {
            Some(file) => Ok(GatewayLock(file)),
            None => {
                let pid = super::state::lock_holder(&path)
                    .map(|p| format!(" (pid {p})"))
                    .unwrap_or_default();
                bail!(
                    "another gateway{pid} is already serving {}; stop it first, reload it with `hermes gateway reload`, or pass --beside-another to run a second one on the same home",
                    settings.home.root().display()
                );
            }
        }
    }
}

/// `hermes gateway reload`: signals the gateway of this home to reload its hooks.
pub fn signal_running(settings: &Settings) -> anyhow::Result<ExitStatus> {
    // The process holding this home's gateway lock, never a pid a file names: a pid file
    // outlives a gateway killed with SIGKILL, and a copied home names the original's.
    let Some(pid) = super::state::gateway_pid(settings) else {
        bail!(
            "no gateway is running for {} (nothing holds {}); start one with `hermes gateway run`",
            settings.home.root().display(),
            super::state::gateway_lock(settings).display()
        );
    };
    let pid = pid as libc::pid_t;
    // SAFETY: kill(2) with a signal number; the pid was checked above.
    if unsafe { libc::kill(pid, libc::SIGHUP) } != 0 {
        let error = std::io::Error::last_os_error();
        bail!("cannot signal the gateway (pid {pid}): {error}");
    }
    println!("Sent SIGHUP to the gateway (pid {pid}); its log says what was reloaded.");
    Ok(ExitStatus::Success)
}

/// The libraries of in-process plugins, with their modification time and size at load.
#[derive(Default)]
pub struct InProcessLibraries(BTreeMap<String, (PathBuf, Option<(SystemTime, u64)>)>);

fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl InProcessLibraries {
    /// Records the in-process plugins `report` loaded (the first time each is seen: that
    /// is the build the process runs).
    pub fn record(&mut self, report: &HooksReport) {
        for plugin in &report.plugins {
            if plugin.error.is_some() || plugin.isolation != Isolation::InProcess {
                continue;
            }
            if let Some(library) = &plugin.library {
                self.0
                    .entry(plugin.name.clone())
                    .or_insert_with(|| (library.clone(), stamp(library)));
            }
        }
    }

    /// The plugins whose library changed on disk since it was loaded.
    fn changed(&self) -> Vec<(&str, &Path)> {
        self.0
            .iter()
            .filter(|(_, (path, loaded))| stamp(path) != *loaded)
            .map(|(name, (path, _))| (name.as_str(), path.as_path()))
            .collect()
    }
}

/// Why a reload would lose something that is loaded now, if it would.
fn regressions(before: &HooksReport, after: &HooksReport, config: &Path) -> Vec<String> {
    // A shell hook left out by consent or the permission check is a decision the reload
    // applies (a revoked hook stops), not a config.yaml that fails to parse.
    let mut why: Vec<String> = after
        .problems
        .iter()
        .filter(|p| p.file == config && !after.shell.declined.contains(&p.message))
        .map(ToString::to_string)
        .collect();
    for plugin in &after.plugins {
        let was_loaded = before
            .plugins
            .iter()
            .any(|p| p.name == plugin.name && p.error.is_none());
        if let (true, Some(error)) = (was_loaded, &plugin.error) {
            why.push(format!("plugin '{}' no longer loads: {error}", plugin.name));
        }
    }
    for skipped in &after.gateway_skipped {
        if before.gateway.iter().any(|h| h.path == skipped.path) {
            why.push(format!(
                "gateway hook {} no longer loads: {}",
                skipped.path.display(),
                skipped.reason
            ));
        }
    }
    why
}

/// Reloads the hooks of `server`'s agent. Logs what happened; on a refusal the old hooks
/// stay and `report` is unchanged.
pub fn reload(
    server: &Server,
    settings: &Settings,
    report: &mut HooksReport,
    libraries: &mut InProcessLibraries,
    log: &Arc<dyn GatewayLog>,
) {
    let current = server.agent();
    let hooks = match load_hooks(
        settings,
        Some(current.tracer.clone()),
        Some(log.clone()),
        Some(server.work_dir()),
    ) {
        Ok(hooks) => hooks,
        Err(e) => {
            log.line(&format!(
                "gateway: reload failed, keeping the hooks loaded before: {e:#}"
            ));
            return;
        }
    };
    let (registry, gateway, config, new_report) = hooks.into_parts();
    let why = regressions(report, &new_report, &settings.home.config_path());
    if !why.is_empty() {
        log.line(&format!(
            "gateway: reload refused, keeping the hooks loaded before: {}",
            why.join("; ")
        ));
        return;
    }
    let registry = Arc::new(registry);
    let agent = Agent {
        registry: registry.clone(),
        gateway: gateway.map(Arc::new),
        max_stop_continuations: crate::app::agent::stop_continuations(&config),
        max_verify_nudges: crate::app::agent::verify_nudges(&config),
        streams: Arc::new(hermes_host::stream::StreamObservers::start(registry)),
        ..(*current).clone()
    };
    let (plugins, shell, gateway_hooks) = (
        new_report
            .plugins
            .iter()
            .filter(|p| p.error.is_none())
            .count(),
        new_report.shell.registered.len(),
        new_report.gateway.len(),
    );
    drop(current);
    let old = server.replace_agent(agent);
    let retired = std::thread::Builder::new()
        .name("gateway-retire".into())
        .spawn(move || retire(old));
    if let Err(e) = retired {
        log.line(&format!(
            "gateway: the hooks replaced by the reload stop now, without delivering what was queued for them: cannot start a thread ({e})"
        ));
    }
    log.line(&format!(
        "gateway: reloaded: {plugins} plugin(s), {shell} shell hook(s), {gateway_hooks} gateway hook(s)"
    ));
    for (name, path) in libraries.changed() {
        log.line(&format!(
            "gateway: plugin '{name}' changed on disk ({}), but an in-process plugin cannot be unloaded: restart the gateway to run the new build, or set `isolation: process` so that a reload restarts it",
            path.display()
        ));
    }
    libraries.record(&new_report);
    *report = new_report;
}

/// How long the hooks a reload replaced get, once no turn uses them, to deliver what is
/// queued for them.
const RETIRE_DEADLINE: Duration = Duration::from_secs(10);

/// Stops the hooks a reload replaced, once the last turn that started with them is done
/// (their gateway hooks first deliver what is queued). Looks every 100 ms, on a thread of
/// its own that lives only until then.
fn retire(old: Arc<Agent>) {
    while Arc::strong_count(&old) > 1 {
        std::thread::sleep(Duration::from_millis(100));
    }
    if let Some(gateway) = &old.gateway {
        gateway.shutdown(RETIRE_DEADLINE);
    }
}
