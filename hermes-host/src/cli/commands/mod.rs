//! One module per subcommand.

mod plugins;

use super::ExitStatus;
use super::args::Command;
use super::settings::Settings;

/// Runs a parsed command.
pub fn run(command: Command, settings: &Settings) -> anyhow::Result<ExitStatus> {
    match command {
        Command::Plugins { command } => plugins::run(command, settings),
    }
}
