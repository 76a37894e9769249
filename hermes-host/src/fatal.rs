//! Naming the plugin that crashed the host.
//!
//! A native plugin loaded in-process that segfaults or aborts takes the host down with it:
//! that cannot be undone in-process (`isolation: process` is the way to survive it). What
//! this module adds is the name. The dispatcher marks, per thread, which callback is
//! running ([`Firing`]: a thread-local store per callback, no system call), and a handler
//! for `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE` and `SIGABRT`, on an alternate signal stack,
//! writes one line naming the plugin, the callback and the hook, and suggesting
//! `isolation: process`. It then restores whatever handled the signal before it (the
//! default action, or Rust's own stack-overflow handler) and returns, so the signal is
//! delivered again to that handler: the exit status and core dump are as before.
//!
//! The same marks time each callback on a coarse clock (a ticker thread that parks while
//! nothing fires, one relaxed load at each end): a callback that ran longer than `plugins.slow_callback_warning` (default
//! 500 ms) gets a warning naming it when it returns.
//!
//! The handler uses only async-signal-safe calls (`write`, `sigaction`), reads only a
//! thread-local that has no destructor and needs no lazy initialisation, and writes at most
//! once per process.

use std::cell::Cell;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

thread_local! {
    /// The running callback's label, or null: readable from a signal handler.
    static LABEL: Cell<*const String> = const { Cell::new(std::ptr::null()) };
    /// The hook being fired, as raw parts.
    static HOOK: Cell<(*const u8, usize)> = const { Cell::new((std::ptr::null(), 0)) };
}

/// A coarse clock: a ticker thread adds one every [`TICK`] once [`install`] ran. Reading it
/// is one relaxed load, so timing every callback costs next to nothing.
static TICKS: AtomicU64 = AtomicU64::new(0);

/// The coarse clock's period.
pub const TICK: Duration = Duration::from_millis(10);

/// A firing began since the ticker last looked (a plain store per firing).
static BUSY: AtomicBool = AtomicBool::new(false);
/// The ticker is parked: the next firing must wake it.
static PARKED: AtomicBool = AtomicBool::new(false);
/// The ticker thread, for waking it.
static TICKER: std::sync::OnceLock<std::thread::Thread> = std::sync::OnceLock::new();

/// The ticker: advances [`TICKS`] every [`TICK`] while firings happen, and parks once no
/// firing began for a second (and for longer than the slow-callback threshold, so a
/// callback that began before the pause is still timed up to the threshold). An idle host
/// then costs no wake-ups at all. A firing that finds it parked wakes it; the relaxed
/// flags may, rarely, let one firing miss that, and the next one wakes it.
fn tick() {
    let mut quiet: u64 = 0;
    loop {
        std::thread::sleep(TICK);
        TICKS.fetch_add(1, Ordering::Relaxed);
        if BUSY.swap(false, Ordering::Relaxed) {
            quiet = 0;
            continue;
        }
        quiet += 1;
        let park_after =
            (1000 / TICK.as_millis() as u64).max(SLOW_TICKS.load(Ordering::Relaxed) + 1);
        if quiet < park_after {
            continue;
        }
        PARKED.store(true, Ordering::SeqCst);
        if !BUSY.load(Ordering::SeqCst) {
            std::thread::park();
        }
        PARKED.store(false, Ordering::SeqCst);
        quiet = 0;
    }
}

#[cold]
fn wake_ticker() {
    PARKED.store(false, Ordering::Relaxed);
    if let Some(ticker) = TICKER.get() {
        ticker.unpark();
    }
}

/// A callback running longer than this many ticks gets a warning (0: never).
static SLOW_TICKS: AtomicU64 = AtomicU64::new(DEFAULT_SLOW.as_millis() as u64 / 10);

/// The default of `plugins.slow_callback_warning`.
pub const DEFAULT_SLOW: Duration = Duration::from_millis(500);

/// Sets how long an in-process callback may run before it gets a warning (`None`: never).
pub fn set_slow_threshold(threshold: Option<Duration>) {
    let ticks = threshold.map_or(0, |t| {
        (t.as_millis() as u64 / TICK.as_millis() as u64).max(1)
    });
    SLOW_TICKS.store(ticks, Ordering::Relaxed);
}

/// The marks of one firing on this thread.
///
/// [`begin`](Firing::begin) marks the hook once per firing; each callback then costs a
/// thread-local store on each side ([`enter`](Firing::enter), [`leave`](Firing::leave))
/// and one relaxed load of the coarse clock, compared with a value held in a register. This
/// sits between every two callbacks, so it is kept that small. Dropping the firing puts
/// back the marks that were there before it, so a callback that fires a hook itself is
/// still named afterwards.
pub struct Firing {
    slow: u64,
    started: u64,
    outer_label: *const String,
    outer_hook: (*const u8, usize),
}

impl Firing {
    /// Marks `hook` as being fired on this thread; it must outlive the returned value.
    #[inline(always)]
    pub fn begin(hook: &str) -> Firing {
        BUSY.store(true, Ordering::Relaxed);
        if PARKED.load(Ordering::Relaxed) {
            wake_ticker();
        }
        let outer_hook = HOOK.with(|h| h.replace((hook.as_ptr(), hook.len())));
        Firing {
            slow: SLOW_TICKS.load(Ordering::Relaxed),
            started: TICKS.load(Ordering::Relaxed),
            outer_label: LABEL.with(Cell::get),
            outer_hook,
        }
    }

    /// Marks `label` (`plugin::callback`) as running; it must outlive the matching
    /// [`leave`](Firing::leave).
    #[inline(always)]
    pub fn enter(&self, label: &String) {
        LABEL.with(|l| l.set(label));
    }

    /// Ends the running callback's mark: warns when it ran longer than the threshold (it
    /// cannot be stopped in-process; the warning says how to make it stoppable). The mark
    /// is cleared, so a crash in the host between two callbacks is not blamed on a plugin.
    #[inline(always)]
    pub fn leave(&mut self) {
        let now = TICKS.load(Ordering::Relaxed);
        if self.slow != 0 && now.saturating_sub(self.started) >= self.slow {
            warn_slow(now - self.started);
        }
        self.started = now;
        LABEL.with(|l| l.set(std::ptr::null()));
    }
}

impl Drop for Firing {
    #[inline(always)]
    fn drop(&mut self) {
        LABEL.with(|l| l.set(self.outer_label));
        HOOK.with(|h| h.set(self.outer_hook));
    }
}

/// The running callback's label and hook, when a callback is marked.
fn marks() -> Option<(&'static [u8], &'static [u8])> {
    let label = LABEL.with(Cell::get);
    let (hook, hook_len) = HOOK.with(Cell::get);
    if label.is_null() {
        return None;
    }
    // SAFETY: the marks point at a registry entry's label and a hook name, both alive
    // while their firing runs, which is the only time the marks are set (see `Firing`).
    // The 'static is a lie kept inside this module: callers use the slices at once.
    unsafe {
        let label: &String = &*label;
        Some((
            std::slice::from_raw_parts(label.as_ptr(), label.len()),
            std::slice::from_raw_parts(hook, hook_len),
        ))
    }
}

#[cold]
fn warn_slow(ticks: u64) {
    let Some((label, hook)) = marks() else {
        return;
    };
    let (label, hook) = (
        String::from_utf8_lossy(label),
        String::from_utf8_lossy(hook),
    );
    let plugin = label.split("::").next().unwrap_or_default();
    tracing::warn!(
        "Plugin callback {label} took about {} ms in hook '{hook}', and an in-process callback cannot be stopped; set `isolation: process` and a `timeout:` in its plugin.yaml (or plugins.isolation.{plugin}: process) to bound it",
        ticks * TICK.as_millis() as u64
    );
}

const SIGNALS: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGILL,
    libc::SIGFPE,
    libc::SIGABRT,
];

/// The actions that were in place before [`install`], restored by the handler.
static mut PREVIOUS: [std::mem::MaybeUninit<libc::sigaction>; 5] =
    [const { std::mem::MaybeUninit::uninit() }; 5];
static INSTALLED: Once = Once::new();
static REPORTED: AtomicBool = AtomicBool::new(false);

/// Installs the handler, once per process (later calls do nothing). Signals whose handler
/// someone else set (other than Rust's own) are left alone only in the sense that the
/// handler passes them on: it always restores and re-delivers to the previous action.
pub fn install() {
    INSTALLED.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("hermes-ticker".into())
            .spawn(tick);
        if let Ok(handle) = spawned {
            let _ = TICKER.set(handle.thread().clone());
        }
        // SAFETY: sigaltstack, sigaction with valid structs; the alternate stack is leaked
        // on purpose (it must live as long as the thread). PREVIOUS is written here once,
        // before any handler that reads it is installed.
        unsafe {
            let size = 64 * 1024;
            let stack = Box::leak(vec![0u8; size].into_boxed_slice());
            let ss = libc::stack_t {
                ss_sp: stack.as_mut_ptr().cast(),
                ss_flags: 0,
                ss_size: size,
            };
            let mut old_ss: libc::stack_t = std::mem::zeroed();
            // Keep a stack someone (Rust's runtime) already set for this thread.
            if libc::sigaltstack(std::ptr::null(), &mut old_ss) == 0
                && old_ss.ss_flags & libc::SS_DISABLE != 0
            {
                libc::sigaltstack(&ss, std::ptr::null_mut());
            }
            for (i, &sig) in SIGNALS.iter().enumerate() {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_fatal as *const () as libc::sighandler_t;
                action.sa_flags = libc::SA_ONSTACK | libc::SA_SIGINFO;
                libc::sigemptyset(&mut action.sa_mask);
                let previous = &raw mut PREVIOUS;
                libc::sigaction(sig, &action, (*previous)[i].as_mut_ptr());
            }
        }
    });
}

extern "C" fn on_fatal(sig: libc::c_int, _info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    if let Some((label, hook)) = marks().filter(|_| !REPORTED.swap(true, Ordering::SeqCst)) {
        let plugin = match label.windows(2).position(|w| w == b"::") {
            Some(end) => &label[..end],
            None => label,
        };
        let name: &[u8] = match sig {
            libc::SIGSEGV => b"SIGSEGV (signal 11)",
            libc::SIGBUS => b"SIGBUS",
            libc::SIGILL => b"SIGILL",
            libc::SIGFPE => b"SIGFPE",
            libc::SIGABRT => b"SIGABRT (signal 6)",
            _ => b"a fatal signal",
        };
        for part in [
            &b"hermes: "[..],
            name,
            b" in plugin '",
            plugin,
            b"' (callback ",
            label,
            b", hook '",
            hook,
            b"'); set `isolation: process` in its plugin.yaml (or plugins.isolation.",
            plugin,
            b": process in config.yaml) so that a crash is reported and survived\n",
        ] {
            // SAFETY: write(2) on stderr is async-signal-safe.
            unsafe { libc::write(2, part.as_ptr().cast(), part.len()) };
        }
    }
    if let Some(i) = SIGNALS.iter().position(|&s| s == sig) {
        // SAFETY: PREVIOUS[i] was written by install() before this handler was set;
        // sigaction is async-signal-safe. Returning re-runs the faulting instruction (or,
        // for abort(), lets it raise again) under the previous action.
        unsafe {
            let previous = &raw const PREVIOUS;
            libc::sigaction(sig, (*previous)[i].as_ptr(), std::ptr::null_mut());
        }
    }
    if sig == libc::SIGFPE || sig == libc::SIGILL || sig == libc::SIGBUS || sig == libc::SIGSEGV {
        // A signal sent with kill() rather than by a fault would not come back on return.
        // SAFETY: raise is async-signal-safe; the signal is blocked until we return.
        unsafe { libc::raise(sig) };
    }
}
