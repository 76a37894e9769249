//! The `hermes` command: hook management and the agent host. The command line lives in
//! `cli`, the agent loop and the gateway server in `app`; both sit on the library.

mod app;
mod cli;

fn main() -> std::process::ExitCode {
    // A plugin worker (isolation: process) is this program started with a hidden argument;
    // its plugin logs under the same filter, to the stderr it shares with the host.
    if let Some(args) = hermes_host::isolation::worker_args() {
        cli::init_worker_logging();
        std::process::exit(hermes_host::isolation::worker_main(&args));
    }
    cli::run(std::env::args_os())
}
