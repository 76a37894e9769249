//! The `hermes` command: hook management and the agent host. The command line lives in
//! `cli`, the agent loop and the gateway server in `app`; both sit on the library.

mod app;
mod cli;

fn main() -> std::process::ExitCode {
    quiet_on_broken_pipe();
    // A plugin worker (isolation: process) is this program started with a hidden argument;
    // its plugin logs under the same filter, to the stderr it shares with the host.
    if let Some(args) = hermes_host::isolation::worker_args() {
        cli::init_worker_logging();
        std::process::exit(hermes_host::isolation::worker_main(&args));
    }
    cli::run(std::env::args_os())
}

/// `hermes hooks schema x | head -1`: once the reader is gone, printing fails with EPIPE,
/// and `println!` panics on that. A command whose output nobody reads any more has nothing
/// left to say, so it ends quietly with 141, the status a shell shows for a process ended
/// by SIGPIPE, as `cat` or `grep` would end. (SIGPIPE itself stays ignored: a hook that
/// exits without reading its stdin must not kill the host.)
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to std") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}
