//! Loading every hook an agent run registers, through the library's facade with the
//! binary's settings: the consent policy of `--accept-hooks` or the terminal, the trace, and
//! (for the gateway) the gateway log. Every surface of the binary that runs the agent goes
//! through here, so no surface runs it without the hooks.

use std::os::unix::fs::DirBuilderExt as _;
use std::sync::Arc;

use anyhow::Context;
use hermes_host::config::{Config, ConfigError};
use hermes_host::gateway::GatewayLog;
use hermes_host::registry::TraceSink;
use hermes_host::{ConsentPolicy, Hooks, LoadOptions};

use super::settings::Settings;

/// Loads plugins and shell hooks into one registry (and gateway hooks when `gateway_log`
/// is given), tracing to `trace` when given, for an agent working in `work_dir` (`--cwd`;
/// `None`: the current directory). Safe mode skips plugins and shell hooks, as the later
/// reference does.
pub fn load_hooks(
    settings: &Settings,
    trace: Option<Arc<dyn TraceSink>>,
    gateway_log: Option<Arc<dyn GatewayLog>>,
    work_dir: Option<&std::path::Path>,
) -> anyhow::Result<Hooks> {
    let loaded = settings.home.load_config();
    load_hooks_with_config(settings, loaded, trace, gateway_log, work_dir)
}

/// [`load_hooks`] from a `config.yaml` the caller has read already.
pub fn load_hooks_with_config(
    settings: &Settings,
    loaded: (Config, Option<ConfigError>),
    trace: Option<Arc<dyn TraceSink>>,
    gateway_log: Option<Arc<dyn GatewayLog>>,
    work_dir: Option<&std::path::Path>,
) -> anyhow::Result<Hooks> {
    // Hooks written for Hermes log into `<home>/logs/` (the seed's log-orchestration.sh
    // appends to logs/orchestration.log) and expect it to exist, as Hermes makes it.
    if settings.home.root().is_dir() {
        let logs = settings.home.root().join("logs");
        if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&logs) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                tracing::warn!(
                    "cannot create {}: {e}; hooks that log there will fail",
                    logs.display()
                );
            }
        }
    }
    let options = LoadOptions {
        // Absolute: a hook is told it as its `cwd`, from a process of its own.
        work_dir: work_dir.map(|d| std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf())),
        ..options(settings, trace, gateway_log)
    };
    Hooks::load_with_config(&settings.home, loaded, &options).context("cannot load hooks")
}

/// Plugins alone, for `hermes plugins`: no shell hooks, no gateway hooks.
pub fn load_plugins(
    settings: &Settings,
    trace: Option<Arc<dyn TraceSink>>,
) -> anyhow::Result<Hooks> {
    let options = LoadOptions {
        shell_hooks: false,
        ..options(settings, trace, None)
    };
    Hooks::load(&settings.home, &options).context("cannot load plugins")
}

/// Plugins as `hermes plugins list` shows them: the pip-installed ones too, enabled or
/// not.
pub fn list_plugins(settings: &Settings) -> anyhow::Result<Hooks> {
    let options = LoadOptions {
        shell_hooks: false,
        list_pip_plugins: true,
        ..options(settings, None, None)
    };
    Hooks::load(&settings.home, &options).context("cannot load plugins")
}

/// Plugins and gateway hooks, for `hermes gateway emit`: a plugin's native gateway
/// callbacks are gateway hooks too. No shell hooks (they are not gateway hooks).
pub fn load_gateway(settings: &Settings, log: Arc<dyn GatewayLog>) -> anyhow::Result<Hooks> {
    let options = LoadOptions {
        shell_hooks: false,
        ..options(settings, None, Some(log))
    };
    Hooks::load(&settings.home, &options).context("cannot load gateway hooks")
}

/// The facade's options for this invocation's settings.
fn options(
    settings: &Settings,
    trace: Option<Arc<dyn TraceSink>>,
    gateway_log: Option<Arc<dyn GatewayLog>>,
) -> LoadOptions {
    LoadOptions {
        safe_mode: settings.discover.safe_mode,
        project_plugins: settings.discover.project_dir.clone(),
        consent: if settings.accept_hooks {
            ConsentPolicy::AcceptAndRecord
        } else {
            ConsentPolicy::PromptOnTerminal
        },
        shadow_sink: Some(Arc::new(crate::app::shadow::ShadowLog::new(
            &settings.home,
            trace.clone(),
        ))),
        trace,
        gateway_log,
        ..LoadOptions::default()
    }
}
