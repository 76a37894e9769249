//! One module per subcommand.

mod bench;
mod claude_install;
mod gateway;
mod hooks;
mod hooks_import;
mod install_files;
mod logs;
mod plugins;
mod replay;
mod run;

use super::ExitStatus;
use super::args::Command;
use super::settings::Settings;

/// Runs a parsed command.
pub fn run(command: Command, settings: &Settings) -> anyhow::Result<ExitStatus> {
    if keeps_files_in_home(&command) {
        // Another user's (or a world-writable) home could hold a session environment file
        // that is sourced before every terminal command, or a gateway state file naming
        // their process; `hooks doctor` reports the same instead of refusing.
        settings.home.check_trusted().map_err(anyhow::Error::msg)?;
    }
    match command {
        Command::Plugins { command } => plugins::run(command, settings),
        Command::Run(args) => run::run(args, settings),
        Command::Hooks { command } => hooks::run(command, settings),
        Command::Gateway { command } => gateway::run(command, settings),
        Command::Bench(args) => bench::run(*args, settings),
        Command::Logs(args) => logs::run(args, settings),
    }
}

/// Whether `command` reads or writes `sessions/`, `logs/` or the gateway's files in the
/// home (everything but making a new plugin, printing schemas, and the doctor, which
/// reports an untrusted home as its first problem).
fn keeps_files_in_home(command: &Command) -> bool {
    use super::args::{HooksCommand, PluginsCommand};
    match command {
        Command::Hooks { command } => !matches!(
            command,
            Some(HooksCommand::Doctor { .. } | HooksCommand::Schema { .. })
        ),
        Command::Plugins { command } => !matches!(command, PluginsCommand::New { .. }),
        _ => true,
    }
}
