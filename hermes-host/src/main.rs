//! The `hermes` command: hook management and the agent host. The command line lives in
//! `cli`, the agent loop and the gateway server in `app`; both sit on the library.

mod app;
mod cli;

fn main() -> std::process::ExitCode {
    cli::run(std::env::args_os())
}
