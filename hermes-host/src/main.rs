//! The `hermes` command: hook management and the agent host. All logic lives in `cli`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::run(std::env::args_os())
}
