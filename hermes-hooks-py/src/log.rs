//! The library's log lines into Python's `logging`, logger `hermes_hooks`, where the host's
//! own configuration decides what is shown (Hermes writes its warnings to its log files).

use std::io::Write;
use std::sync::Arc;

use pyo3::prelude::*;
use tracing_subscriber::EnvFilter;

/// The environment variable that sets which lines reach Python (`warn` by default), in
/// `RUST_LOG`'s syntax.
const FILTER_VAR: &str = "HERMES_HOOKS_LOG";

/// Installs the forwarding subscriber for this process, unless one is installed already
/// (another Rust extension's): then the lines go where that one sends them.
pub fn install() {
    let filter = EnvFilter::try_from_env(FILTER_VAR).unwrap_or_else(|_| EnvFilter::new("warn"));
    // An error means another subscriber was installed first; its place to write is kept.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .without_time()
        .with_ansi(false)
        .with_target(false)
        .with_level(true)
        .with_writer(|| Line(Vec::new()))
        .try_init();
}

/// The gateway hooks' `[hooks] ...` lines, as info of the same logger.
pub fn gateway_log() -> Arc<dyn hermes_host::gateway::GatewayLog> {
    Arc::new(|line: &str| emit("info", line))
}

/// One formatted event, sent when the formatter drops it.
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        let text = String::from_utf8_lossy(&self.0);
        let text = text.trim_end();
        if text.is_empty() {
            return;
        }
        // `LEVEL message`: the level picks the logging method.
        let (level, message) = text.trim_start().split_once(' ').unwrap_or(("WARN", text));
        let method = match level.trim() {
            "ERROR" => "error",
            "WARN" => "warning",
            "INFO" => "info",
            _ => "debug",
        };
        emit(method, message.trim_start());
    }
}

fn emit(method: &str, message: &str) {
    Python::attach(|py| {
        let sent = py
            .import("logging")
            .and_then(|logging| logging.call_method1("getLogger", ("hermes_hooks",)))
            .and_then(|logger| logger.call_method1(method, ("%s", message)));
        if sent.is_err() {
            // The interpreter is shutting down, or logging is broken: stderr still works.
            let _ = writeln!(std::io::stderr(), "hermes_hooks: {message}");
        }
    });
}
