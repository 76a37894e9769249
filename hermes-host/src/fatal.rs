//! Naming the plugin that crashed the host, or that has been running too long.
//!
//! A native plugin loaded in-process that segfaults or aborts takes the host down with it:
//! that cannot be undone in-process (`isolation: process` is the way to survive it). What
//! this module adds is the name. The dispatcher marks, per thread, which callback is
//! running ([`Firing`]: one plain store on each side of a callback, no system call), and a
//! handler for `SIGSEGV`, `SIGBUS`, `SIGILL`, `SIGFPE` and `SIGABRT`, on an alternate signal
//! stack, writes one line naming the plugin, the callback and the hook, and suggesting
//! `isolation: process`. It then restores whatever handled the signal before it (the
//! default action, or Rust's own stack-overflow handler) and returns, so the signal is
//! delivered again to that handler: the exit status and core dump are as before.
//!
//! The same marks let a watchdog name a callback that runs too long. Each thread that
//! fires a hook owns a slot the ticker thread can read; every [`TICK`] the ticker looks
//! at each slot, and a callback still running after `plugins.slow_callback_warning`
//! (default 500 ms) gets a warning naming it, while it runs: a plugin that hangs is named
//! too, not only one that returns late. The dispatcher never reads a clock for this.
//!
//! The handler uses only async-signal-safe calls (`write`, `sigaction`), reads only a
//! thread-local that has no destructor and needs no lazy initialisation, and writes at most
//! once per process.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

/// What a crash or a slow-callback warning names: a callback and the hook it is registered
/// on. Marks are interned for the life of the process ([`Mark::intern`]), so a pointer to
/// one read from another thread or from a signal handler is always valid.
pub struct Mark {
    label: String,
    hook: String,
}

impl Mark {
    /// The mark of `label` (`plugin::callback`) on `hook`: one per distinct pair in the
    /// process, never freed. Their number is bounded by the callbacks ever registered.
    pub fn intern(label: &str, hook: &str) -> &'static Mark {
        static MARKS: Mutex<Vec<&'static Mark>> = Mutex::new(Vec::new());
        let mut marks = MARKS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(mark) = marks.iter().find(|m| m.label == label && m.hook == hook) {
            return mark;
        }
        let mark: &'static Mark = Box::leak(Box::new(Mark {
            label: label.to_string(),
            hook: hook.to_string(),
        }));
        marks.push(mark);
        mark
    }
}

/// One thread's running mark, readable by the ticker: a [`Mark`] pointer or null. The
/// ticker sets the low bit of a pointer it has seen (marks are word-aligned), so it can
/// tell one long call from many short calls of the same callback: a new call stores the
/// pointer untagged.
#[repr(align(64))]
struct Slot {
    mark: AtomicPtr<Mark>,
    free: AtomicBool,
}

/// Every slot ever handed to a thread; a slot is reused once its thread has ended.
static SLOTS: Mutex<Vec<&'static Slot>> = Mutex::new(Vec::new());

/// Where a thread's marks go when it cannot own a slot (it is being torn down): the
/// ticker does not watch it and the signal handler does not see it.
static DISCARD: Slot = Slot {
    mark: AtomicPtr::new(std::ptr::null_mut()),
    free: AtomicBool::new(false),
};

thread_local! {
    /// This thread's slot, or null before its first firing: readable from a signal handler.
    static SLOT: Cell<*const Slot> = const { Cell::new(std::ptr::null()) };
    /// Gives the slot back when the thread ends.
    static RELEASE: SlotRelease = const { SlotRelease(Cell::new(std::ptr::null())) };
}

struct SlotRelease(Cell<*const Slot>);

impl Drop for SlotRelease {
    fn drop(&mut self) {
        let slot = self.0.get();
        if slot.is_null() {
            return;
        }
        let _ = SLOT.try_with(|s| s.set(std::ptr::null()));
        // SAFETY: slots are leaked, so the pointer stays valid.
        let slot = unsafe { &*slot };
        slot.mark.store(std::ptr::null_mut(), Ordering::Relaxed);
        slot.free.store(true, Ordering::Release);
    }
}

/// This thread's first firing: claim a slot (a free one, or a new one).
#[cold]
#[inline(never)]
fn claim_slot() -> &'static Slot {
    let slot = {
        let mut slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
        match slots.iter().find(|s| {
            s.free
                .compare_exchange(true, false, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }) {
            Some(slot) => *slot,
            None => {
                let slot: &'static Slot = Box::leak(Box::new(Slot {
                    mark: AtomicPtr::new(std::ptr::null_mut()),
                    free: AtomicBool::new(false),
                }));
                slots.push(slot);
                slot
            }
        }
    };
    if RELEASE.try_with(|r| r.0.set(slot)).is_err() {
        slot.free.store(true, Ordering::Release);
        return &DISCARD;
    }
    SLOT.with(|s| s.set(slot));
    slot
}

/// A coarse clock: a ticker thread adds one every [`TICK`] once [`install`] ran.
static TICKS: AtomicU64 = AtomicU64::new(0);

/// The coarse clock's period.
pub const TICK: Duration = Duration::from_millis(10);

/// What the ticker needs to know of the firings, in one byte: [`BUSY`] and [`PARKED`].
///
/// A firing loads it and stores only when it is not exactly [`BUSY`]: once per tick, not
/// once per firing. A store per firing made every firing thread take the line away from
/// the others (two turn threads firing `pre_tool_call` at once), and used a store slot on
/// the hottest path for a flag that was already set.
static TICKER_STATE: AtomicU8 = AtomicU8::new(0);
/// A firing began since the ticker last looked.
const BUSY: u8 = 1;
/// The ticker is parked: the next firing must wake it.
const PARKED: u8 = 2;
/// The ticker thread, for waking it.
static TICKER: std::sync::OnceLock<std::thread::Thread> = std::sync::OnceLock::new();

/// The ticker: advances [`TICKS`] and watches every slot each [`TICK`] while firings
/// happen, and parks once no firing began for a second and no callback is running. An idle
/// host then costs no wake-ups at all. A firing that finds it parked wakes it; the relaxed
/// flags may, rarely, let one firing miss that, and the next one wakes it.
fn tick() {
    let mut quiet: u64 = 0;
    let mut watches: Vec<Watch> = Vec::new();
    loop {
        std::thread::sleep(TICK);
        let now = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
        let slow = SLOW_TICKS.load(Ordering::Relaxed);
        let running = watch_slots(&mut watches, now, slow, report_slow);
        let busy = TICKER_STATE.fetch_and(!BUSY, Ordering::Relaxed) & BUSY != 0;
        if busy || running {
            quiet = 0;
            continue;
        }
        quiet += 1;
        if quiet < 1000 / TICK.as_millis() as u64 {
            continue;
        }
        // Parks only if no firing began since the look above: a firing after this sees
        // PARKED and wakes the ticker.
        let parked = TICKER_STATE.compare_exchange(0, PARKED, Ordering::SeqCst, Ordering::SeqCst);
        if parked.is_ok() {
            std::thread::park();
        }
        TICKER_STATE.fetch_and(!PARKED, Ordering::SeqCst);
        quiet = 0;
    }
}

/// What the ticker knows of one slot's running call.
#[derive(Default)]
struct Watch {
    /// The call's mark, untagged (null: none running).
    mark: usize,
    /// The tick at which it was first seen.
    since: u64,
    /// Whether it was warned about.
    warned: bool,
}

/// Looks at every slot once, at tick `now`: hands `report` a call that has been running
/// for `slow` ticks (0: never), once, and then the same call when it has returned (`true`).
/// Returns whether any callback is running.
fn watch_slots(
    watches: &mut Vec<Watch>,
    now: u64,
    slow: u64,
    mut report: impl FnMut(&'static Mark, u64, bool),
) -> bool {
    let slots = SLOTS.lock().unwrap_or_else(|e| e.into_inner());
    watches.resize_with(slots.len(), Watch::default);
    let mut running = false;
    for (slot, watch) in slots.iter().zip(watches.iter_mut()) {
        let seen = slot.mark.load(Ordering::Relaxed);
        let mark = seen as usize & !1;
        if mark != watch.mark || seen as usize & 1 == 0 {
            // A different call from the one watched: say how long a warned one took, then
            // tag the new one so that the next look can tell it is still the same call.
            if let Some(mark) = watch.warned.then(|| interned(watch.mark)).flatten() {
                report(mark, now - watch.since, true);
            }
            *watch = Watch {
                mark,
                since: now,
                warned: false,
            };
            if mark != 0 && seen as usize & 1 == 0 {
                let _ = slot.mark.compare_exchange(
                    seen,
                    (mark | 1) as *mut Mark,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        } else if slow != 0 && !watch.warned && now - watch.since >= slow {
            watch.warned = true;
            if let Some(mark) = interned(mark) {
                report(mark, now - watch.since, false);
            }
        }
        running |= mark != 0;
    }
    running
}

/// A firing found the state other than [`BUSY`]: marks it busy, and wakes the ticker if
/// it was parked.
#[cold]
#[inline(never)]
fn note_busy() {
    if TICKER_STATE.swap(BUSY, Ordering::SeqCst) & PARKED == 0 {
        return;
    }
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
/// [`begin`](Firing::begin) finds the thread's slot and what it held (a callback that
/// fires a hook itself is the outer mark); each callback then costs one plain store on
/// each side ([`enter`](Firing::enter), [`leave`](Firing::leave)). This sits between every
/// two callbacks, so it is kept that small: no clock is read here, the ticker does the
/// timing. After a callback the outer mark is back, so a crash in the host between two
/// callbacks is not blamed on a plugin, and a nested firing's callbacks do not hide the
/// callback that fired them.
pub struct Firing {
    slot: &'static Slot,
    outer: *mut Mark,
}

impl Firing {
    /// Begins a firing on this thread.
    #[inline(always)]
    pub fn begin() -> Firing {
        let slot = SLOT.with(Cell::get);
        let slot = if slot.is_null() {
            claim_slot()
        } else {
            // SAFETY: slots are leaked; SLOT is null or points at this thread's slot.
            unsafe { &*slot }
        };
        if TICKER_STATE.load(Ordering::Relaxed) != BUSY {
            note_busy();
        }
        Firing {
            slot,
            outer: slot.mark.load(Ordering::Relaxed),
        }
    }

    /// Marks `mark`'s callback as running until [`leave`](Firing::leave).
    #[inline(always)]
    pub fn enter(&self, mark: &'static Mark) {
        self.slot
            .mark
            .store(std::ptr::from_ref(mark).cast_mut(), Ordering::Relaxed);
    }

    /// Ends the running callback's mark.
    #[inline(always)]
    pub fn leave(&self) {
        self.slot.mark.store(self.outer, Ordering::Relaxed);
    }
}

/// The running callback's label and hook on this thread, when a callback is marked.
fn marks() -> Option<(&'static [u8], &'static [u8])> {
    let slot = SLOT.with(Cell::get);
    if slot.is_null() {
        return None;
    }
    // SAFETY: slots and marks are leaked, so both pointers stay valid; the low bit is the
    // ticker's tag.
    unsafe {
        let mark = ((*slot).mark.load(Ordering::Relaxed) as usize & !1) as *const Mark;
        mark.as_ref()
            .map(|m| (m.label.as_bytes(), m.hook.as_bytes()))
    }
}

/// The mark an untagged slot value points at.
fn interned(mark: usize) -> Option<&'static Mark> {
    // SAFETY: a slot holds null or a pointer to an interned mark, which is never freed.
    unsafe { (mark as *const Mark).as_ref() }
}

/// Warns about `mark`'s call, running for `ticks`, or says it returned.
#[cold]
fn report_slow(mark: &'static Mark, ticks: u64, returned: bool) {
    let (label, hook) = (&mark.label, &mark.hook);
    let ms = ticks * TICK.as_millis() as u64;
    if returned {
        tracing::warn!("Plugin callback {label} returned after about {ms} ms in hook '{hook}'");
        return;
    }
    let plugin = label.split("::").next().unwrap_or_default();
    tracing::warn!(
        "Plugin callback {label} has been running for {ms} ms in hook '{hook}', and an in-process callback cannot be stopped; set `isolation: process` and a `timeout:` in its plugin.yaml (or plugins.isolation.{plugin}: process) to bound it"
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// What `watch_slots` reported about `mark`, over ticks `from..to`.
    fn watch(
        watches: &mut Vec<Watch>,
        ticks: std::ops::Range<u64>,
        mark: &'static Mark,
    ) -> Vec<(u64, bool)> {
        let mut seen = Vec::new();
        for now in ticks {
            watch_slots(watches, now, 5, |m, t, returned| {
                if std::ptr::eq(m, mark) {
                    seen.push((t, returned));
                }
            });
        }
        seen
    }

    #[test]
    fn a_call_running_past_the_threshold_is_reported_once_and_again_when_it_returns() {
        let mark = Mark::intern("fatal-test::stuck", "pre_tool_call");
        let (entered, wait_entered) = mpsc::channel();
        let (release, wait_release) = mpsc::channel::<()>();
        let (left, wait_left) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let firing = Firing::begin();
            firing.enter(mark);
            entered.send(()).unwrap();
            wait_release.recv().unwrap();
            firing.leave();
            left.send(()).unwrap();
        });
        wait_entered.recv().unwrap();
        let mut watches = Vec::new();
        assert_eq!(watch(&mut watches, 1000..1012, mark), vec![(5, false)]);
        release.send(()).unwrap();
        wait_left.recv().unwrap();
        assert_eq!(watch(&mut watches, 1012..1014, mark), vec![(12, true)]);
        thread.join().unwrap();
    }

    #[test]
    fn many_short_calls_of_one_callback_are_not_one_long_call() {
        let mark = Mark::intern("fatal-test::quick", "pre_tool_call");
        let (call, calls) = mpsc::channel::<()>();
        let (done, wait_done) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let firing = Firing::begin();
            // Each message is one call, still running when the watcher looks.
            while calls.recv().is_ok() {
                firing.enter(mark);
                done.send(()).unwrap();
                let _ = calls.recv();
                firing.leave();
            }
        });
        let mut watches = Vec::new();
        let mut seen = Vec::new();
        for now in 0..20 {
            call.send(()).unwrap();
            wait_done.recv().unwrap();
            seen.extend(watch(&mut watches, now..now + 1, mark));
            call.send(()).unwrap();
        }
        drop(call);
        thread.join().unwrap();
        assert_eq!(seen, vec![]);
    }

    #[test]
    fn a_nested_firing_puts_the_outer_callback_back() {
        let outer = Mark::intern("fatal-test::outer", "pre_llm_call");
        let inner = Mark::intern("fatal-test::inner", "pre_tool_call");
        let firing = Firing::begin();
        firing.enter(outer);
        {
            let nested = Firing::begin();
            nested.enter(inner);
            assert_eq!(
                marks(),
                Some((&b"fatal-test::inner"[..], &b"pre_tool_call"[..]))
            );
            nested.leave();
        }
        assert_eq!(marks().map(|(l, _)| l), Some(&b"fatal-test::outer"[..]));
        firing.leave();
        assert_eq!(marks(), None);
    }

    #[test]
    fn a_mark_is_interned_once_per_label_and_hook() {
        let a = Mark::intern("fatal-test::same", "on_session_start");
        assert!(std::ptr::eq(
            a,
            Mark::intern("fatal-test::same", "on_session_start")
        ));
        assert!(!std::ptr::eq(
            a,
            Mark::intern("fatal-test::same", "on_session_end")
        ));
    }
}
