//! `hermes run SCRIPT`: a scripted agent session with every hook firing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::time::Duration;

use crate::app::agent::{Agent, ApprovalMode, Approver, Script, Stdout};
use anyhow::Context;

use crate::cli::ExitStatus;
use crate::cli::args::RunArgs;
use crate::cli::load::load_hooks;
use crate::cli::settings::Settings;

/// Set by the SIGINT handler; a second SIGINT exits at once.
static SIGINT_SEEN: AtomicBool = AtomicBool::new(false);

/// The agent's interrupt flag, for the handler: a reference leaked from its `Arc`, so it
/// lives as long as the process.
static INTERRUPT: AtomicPtr<AtomicBool> = AtomicPtr::new(std::ptr::null_mut());

extern "C" fn on_sigint(_signal: libc::c_int) {
    if SIGINT_SEEN.swap(true, Ordering::SeqCst) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(130) };
    }
    // SAFETY: null, or the leaked flag of `interrupt_on_sigint`, which is never freed; an
    // atomic store is async-signal-safe.
    if let Some(flag) = unsafe { INTERRUPT.load(Ordering::SeqCst).as_ref() } {
        flag.store(true, Ordering::SeqCst);
    }
}

/// Routes SIGINT to `flag`: the current turn stops, running commands are killed, and the
/// session still ends with `on_session_end(interrupted=true)` and `on_session_finalize`.
/// The handler sets the flag itself, so no thread watches for the signal.
fn interrupt_on_sigint(flag: Arc<AtomicBool>) {
    INTERRUPT.store(Arc::into_raw(flag).cast_mut(), Ordering::SeqCst);
    // SAFETY: the handler only touches atomics (and _exit on a second signal).
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };
}

/// How long a finished run waits for its shadow hooks to record what they were handed.
const SHADOW_FLUSH: Duration = Duration::from_secs(2);

pub fn run(args: RunArgs, settings: &Settings) -> anyhow::Result<ExitStatus> {
    let script = Script::read(&args.script).map_err(anyhow::Error::msg)?;
    let mode: ApprovalMode = args.approvals.parse().map_err(anyhow::Error::msg)?;
    let tracer = crate::cli::inputs::tracer(&args.trace, args.trace_file.as_deref())?;
    let hooks = load_hooks(settings, Some(tracer.clone()), None, args.cwd.as_deref())?;
    let cwd = match args.cwd {
        Some(dir) => dir,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let interrupt = Arc::new(AtomicBool::new(false));
    interrupt_on_sigint(interrupt.clone());
    let (registry, _, config, _) = hooks.into_parts();
    let registry = Arc::new(registry);
    let agent = Agent {
        streams: Arc::new(hermes_host::stream::StreamObservers::start(
            registry.clone(),
        )),
        max_verify_nudges: crate::app::agent::verify_nudges(&config),
        registry,
        gateway: None,
        tracer,
        approver: Arc::new(Approver::new(
            mode,
            Duration::from_secs(args.approval_timeout),
        )),
        interrupt: interrupt.clone(),
        transcript: Arc::new(Stdout),
        surface: "cli",
        terminal_timeout: Duration::from_secs(args.terminal_timeout),
        max_stop_continuations: crate::app::agent::stop_continuations(&config),
        session_files: Some(settings.home.sessions_dir()),
        claude_transcripts: true,
        events: None,
    };
    let results = agent.run_script(&script, &cwd);
    // Streaming observers read their queues on threads of their own: what they were handed
    // is delivered before the run ends, within a bound.
    for note in agent.streams.exit_notes(SHADOW_FLUSH) {
        eprintln!("hermes: {note}");
    }
    // Shadow hooks record what they would have done on a thread of their own: a little
    // time to finish before the process ends, never the run's.
    let unrecorded = agent.registry.flush_shadows(SHADOW_FLUSH);
    if unrecorded > 0 {
        eprintln!(
            "hermes: {unrecorded} shadow hook firing(s) still running at exit; not recorded in {}",
            crate::app::shadow::records_path(&settings.home).display()
        );
    }
    if results.iter().any(|r| r.interrupted) {
        eprintln!("hermes: interrupted");
        return Ok(ExitStatus::Interrupted);
    }
    Ok(ExitStatus::Success)
}
