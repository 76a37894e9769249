//! The watchdog's ticker parks when no hook fires, and the next firing wakes it.
//!
//! Its own test binary, so that no other test's firings keep the ticker awake. The ticker
//! is watched from outside, through its thread's voluntary context switches in
//! `/proc/self/task/*/status`: ticking, it switches every 10 ms; parked, not at all.

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use hermes_host::fatal::{Firing, Mark, install, set_slow_threshold};

/// The ticker thread's voluntary context switches.
fn ticker_switches() -> Option<u64> {
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "hermes-ticker" {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).ok()?;
        return status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|n| n.trim().parse().ok());
    }
    None
}

/// Waits (up to 10 s) for 300 ms without a switch of the ticker: parked.
fn wait_parked() {
    let deadline = Instant::now() + Duration::from_secs(10);
    // The thread names itself once it runs.
    let mut last = loop {
        if let Some(n) = ticker_switches() {
            break n;
        }
        assert!(Instant::now() < deadline, "no thread named hermes-ticker");
        std::thread::sleep(Duration::from_millis(5));
    };
    let mut still_since = Instant::now();
    while still_since.elapsed() < Duration::from_millis(300) {
        assert!(Instant::now() < deadline, "the ticker never parked");
        std::thread::sleep(Duration::from_millis(20));
        let now = ticker_switches().unwrap();
        if now != last {
            last = now;
            still_since = Instant::now();
        }
    }
}

#[test]
fn an_idle_ticker_parks_and_the_next_firing_wakes_it() {
    install();
    set_slow_threshold(Some(Duration::from_millis(50)));
    let mark = Mark::intern("ticker-test::slow", "pre_tool_call");
    // Twice: the second time also checks that the wake left the state able to park again.
    for round in 0..2 {
        // An idle host: one firing to start the ticker's count, then nothing for a second.
        let _ = Firing::begin();
        wait_parked();
        let parked = ticker_switches().unwrap();
        let firing = Firing::begin();
        firing.enter(mark);
        std::thread::sleep(Duration::from_millis(200));
        firing.leave();
        let woken = ticker_switches().unwrap();
        // 200 ms of ticking is about 20 switches; a ticker left parked makes none.
        assert!(
            woken >= parked + 5,
            "round {round}: the ticker made {} switches during a 200 ms callback",
            woken - parked
        );
    }
}
