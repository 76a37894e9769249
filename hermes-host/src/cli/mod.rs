//! Command-line parsing and dispatch. `main` calls [`run`]; each subcommand is a file in
//! `commands/`. Commands receive resolved [`Settings`], never clap types or environment.

mod args;
mod commands;
mod inputs;
mod load;
mod settings;
mod template;
mod template_python;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

pub use settings::Settings;

/// How a command ended, mapped to the process exit code in one place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitStatus {
    /// Everything worked: exit 0.
    Success,
    /// The command ran but reports a failure (a hook blocked, a check failed): exit 1.
    Failure,
    /// The command could not do its job (bad input, IO error): exit 2.
    Error,
    /// The user interrupted it (SIGINT): exit 130, as a shell reports it.
    Interrupted,
}

impl From<ExitStatus> for ExitCode {
    fn from(status: ExitStatus) -> ExitCode {
        match status {
            ExitStatus::Success => ExitCode::SUCCESS,
            ExitStatus::Failure => ExitCode::from(1),
            ExitStatus::Error => ExitCode::from(2),
            ExitStatus::Interrupted => ExitCode::from(130),
        }
    }
}

/// Parses `args`, resolves settings, runs the command, and turns errors into `hermes: ...`.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let cli = match args::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // A benchmark fires a failing hook thousands of times; it counts the failures itself and
    // shows the first, so the per-firing warnings are off unless asked for.
    init_logging(if matches!(cli.command, args::Command::Bench(_)) {
        "error"
    } else {
        "warn"
    });
    if let Err(e) = cli.global.log_format.parse::<crate::app::logfile::Format>() {
        eprintln!("hermes: --log-format: {e}");
        return ExitStatus::Error.into();
    }
    let settings = Settings::resolve(&cli.global);
    if let Some(path) = &settings.log_file {
        match crate::app::logfile::LogFile::open(path, settings.log_format) {
            Ok(file) => crate::app::logfile::set_global(file),
            Err(e) => {
                eprintln!("hermes: --log-file: {e}");
                return ExitStatus::Error.into();
            }
        }
    }
    let ran = commands::run(cli.command, &settings);
    // `async: true` hooks a command fired (`run`, `hooks fire`, `plugins fire`, ...) finish
    // what they do before the process ends, within a bound; each is also bounded by its own
    // timeout. (The gateway waits, and logs it, before its last line.)
    let still = hermes_host::shell::background::wait_idle(std::time::Duration::from_secs(10));
    if still > 0 {
        eprintln!(
            "hermes: {still} async hook(s) still running at exit; not waited for (each ends at its timeout)"
        );
    }
    match ran {
        Ok(status) => status.into(),
        Err(err) => {
            eprintln!("hermes: {err:#}");
            ExitStatus::Error.into()
        }
    }
}

/// The log subscriber of a plugin worker: the host's default filter.
pub fn init_worker_logging() {
    init_logging("warn");
}

/// Installs the binary's log subscriber: `HERMES_LOG`, else `RUST_LOG`, else `default`,
/// written to stderr; and INFO and above to the log file, once a command opens one.
fn init_logging(default: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("HERMES_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new(default));
    use tracing_subscriber::prelude::*;
    let (file_filter, enable) =
        tracing_subscriber::reload::Layer::new(tracing_subscriber::filter::LevelFilter::OFF);
    crate::app::logfile::on_open(Box::new(move || {
        let _ = enable.modify(|f| *f = tracing_subscriber::filter::LevelFilter::INFO);
    }));
    // Records carry values others chose (a chat's user_id, a plugin's log line): their
    // control characters are escaped on the way out, so colour codes of our own are off.
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(|| crate::app::logfile::EscapedStderr)
        .with_ansi(false)
        .with_filter(filter);
    let _ = tracing_subscriber::registry()
        .with(stderr)
        // Off until a command opens a log file, then INFO: the level hint plugins read
        // (`LevelFilter::current`) stays the stderr filter's, so a plugin's `info!` costs
        // nothing per firing where nothing would write it.
        .with(crate::app::logfile::FileLayer.with_filter(file_filter))
        .try_init();
}
