//! How gateway handler processes (executable handlers and Python workers) are set up; they
//! are spawned and supervised by [`crate::process`], as every child of the host is.
//!
//! Every handler process:
//!
//! - runs in its own process group, so a timeout kills the handler *and* whatever it
//!   started, and Ctrl-C in the terminal reaches the gateway, not its handlers;
//! - runs in its hook directory, with `HERMES_HOME`, `HERMES_HOOK_NAME`, `HERMES_HOOK_DIR`
//!   and `HERMES_HOOK_CONFIG` (the `config:` mapping of `HOOK.yaml`, as JSON) set;
//! - writes its stdout and stderr to the gateway's stderr, never to a pipe the gateway
//!   reads: a handler's `print` cannot block on a full pipe, cannot corrupt a protocol, and
//!   a grandchild holding the output open cannot hold the gateway.

use std::path::Path;
use std::process::{Command, Stdio};

/// What every handler process of one hook is started with, and what it reaches back to.
#[derive(Clone)]
pub(crate) struct HandlerEnv {
    /// `$HERMES_HOME`.
    pub home: std::path::PathBuf,
    /// The hook's name.
    pub name: String,
    /// The hook directory (also the working directory).
    pub dir: std::path::PathBuf,
    /// `config:` of `HOOK.yaml`, as JSON text.
    pub config_json: String,
    /// The gateway's capabilities, for `{"call": ..}` lines of a Python worker.
    pub services: super::services::ServiceSlot,
    /// The gateway's log, for `{"log": ..}` lines of a Python worker.
    pub log: std::sync::Arc<dyn super::GatewayLog>,
    /// `config.yaml` as JSON, handed to a Python worker's `hermes_cli.config`.
    pub host_config: Option<std::sync::Arc<str>>,
    /// `$HERMES_HOME/.env`, `(name, value)`, in a Python worker's environment as Hermes
    /// loads it for its hooks (empty for other handlers).
    pub dotenv: crate::dotenv::Vars,
}

impl HandlerEnv {
    /// A command for `program`, set up as the module doc says; the caller pipes stdin and
    /// [`crate::process`] gives it its own process group.
    pub fn command(&self, program: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(&self.dir)
            .env("HERMES_HOME", &self.home)
            .env("HERMES_HOOK_NAME", &self.name)
            .env("HERMES_HOOK_DIR", &self.dir)
            .env("HERMES_HOOK_CONFIG", &self.config_json)
            .stdout(stderr_stdio())
            .stderr(Stdio::inherit());
        cmd
    }
}

pub(crate) use crate::process::{describe_status, stderr_stdio};

/// `1.5s`, `60s`: a duration as the reference prints timeouts.
pub(crate) fn seconds(d: std::time::Duration) -> String {
    let secs = d.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}s")
    } else {
        format!("{secs}s")
    }
}
