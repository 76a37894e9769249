//! One module per subcommand.

mod bench;
mod gateway;
mod hooks;
mod hooks_import;
mod logs;
mod plugins;
mod run;

use super::ExitStatus;
use super::args::Command;
use super::settings::Settings;

/// Runs a parsed command.
pub fn run(command: Command, settings: &Settings) -> anyhow::Result<ExitStatus> {
    match command {
        Command::Plugins { command } => plugins::run(command, settings),
        Command::Run(args) => run::run(args, settings),
        Command::Hooks { command } => hooks::run(command, settings),
        Command::Gateway { command } => gateway::run(command, settings),
        Command::Bench(args) => bench::run(*args, settings),
        Command::Logs(args) => logs::run(args, settings),
    }
}
