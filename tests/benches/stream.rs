//! The streaming observers: a stream of 10,000 deltas with one native observer (the `noop`
//! test plugin's `on_stream_delta`, a release build) and one Python observer (a plugin of
//! one no-op callback, in the home's interpreter), against the same stream with no
//! observer, in the same run.
//!
//! - `stream_10k/publish/*`: the stream's own pace, what the agent's thread pays to hand
//!   10,000 deltas on (a copy and a lock per observer). With no observer it is one check.
//! - `stream_10k/delivered/native` and `.../python`: the deltas handed on in runs of at
//!   most the queue's depth, each run delivered to the observer on its thread before the
//!   next, so none is dropped: what a delta costs the observer side.
//!
//! Run: `cargo bench -p hermes-tests --bench stream`

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use hermes_hooks_abi::hooks::payload::StreamDeltaEvent;
use hermes_host::registry::Registry;
use hermes_host::stream::{QUEUE, StreamObservers};
use hermes_tests::support::TestHome;

const DELTAS: usize = 10_000;

const PYTHON_OBSERVER: &str = "def on_delta(delta, **kwargs):\n    pass\n\ndef register(ctx):\n    ctx.register_hook('on_stream_delta', on_delta)\n";

/// A home with the observers asked for, loaded.
fn observers(native: bool, python: bool) -> (TestHome, Arc<Registry>) {
    let home = TestHome::new();
    let mut enabled = Vec::new();
    if native {
        home.install_release("noop", "noop", None, Some("{count: 0, stream: true}"));
        enabled.push("noop");
    }
    if python {
        let dir = home.path().join("plugins/py-observer");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("plugin.yaml"),
            "name: py-observer\nversion: 0.1.0\n",
        )
        .unwrap();
        std::fs::write(dir.join("__init__.py"), PYTHON_OBSERVER).unwrap();
        enabled.push("py-observer");
    }
    home.config(&format!("plugins:\n  enabled: [{}]\n", enabled.join(", ")));
    let (registry, report) = home.load();
    assert!(
        report.plugins.iter().all(|p| p.loaded()),
        "{:?}",
        report.plugins[0].error
    );
    assert_eq!(registry.entries("on_stream_delta").len(), enabled.len());
    (home, Arc::new(registry))
}

/// Hands `count` deltas to `streams`, as the agent's stream does.
fn publish(streams: &StreamObservers, count: usize) {
    for i in 0..count {
        let delta = if i % 2 == 0 { "Hello" } else { ", world" };
        let event = StreamDeltaEvent {
            session_id: "sess-1",
            turn_id: Some("sess-1-t1"),
            iteration: 1,
            model: "m",
            provider: "scripted",
            surface: "cli",
            delta,
            kind: "text",
        };
        streams.publish(StreamDeltaEvent::HOOK, black_box(&event.fields()));
    }
}

/// Hands on [`DELTAS`] deltas in runs of at most the queue's depth, each run delivered
/// before the next, so that none is dropped.
fn delivered(streams: &StreamObservers) {
    let mut left = DELTAS;
    while left > 0 {
        let run = left.min(QUEUE);
        publish(streams, run);
        assert!(streams.drain(Duration::from_secs(60)));
        left -= run;
    }
}

fn stream(c: &mut Criterion) {
    let mut group = c.benchmark_group("stream_10k");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    let (_none_home, none) = observers(false, false);
    let quiet = StreamObservers::start(none);
    group.bench_function("publish/no_observer", |b| {
        b.iter(|| publish(&quiet, DELTAS))
    });
    let (_both_home, both) = observers(true, true);
    let watched = StreamObservers::start(both);
    group.bench_function("publish/native_and_python", |b| {
        // Drained between samples outside the timing, so a full queue's drops are not
        // what is timed.
        b.iter_custom(|iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                publish(&watched, DELTAS);
                took += started.elapsed();
                watched.drain(Duration::from_secs(120));
            }
            took
        })
    });
    eprintln!(
        "stream_10k/publish/native_and_python: {} deltas dropped by a full queue",
        watched.dropped()
    );
    let (_native_home, native) = observers(true, false);
    let to_native = StreamObservers::start(native);
    group.bench_function("delivered/native", |b| b.iter(|| delivered(&to_native)));
    let (_python_home, python) = observers(false, true);
    let to_python = StreamObservers::start(python);
    group.bench_function("delivered/python", |b| b.iter(|| delivered(&to_python)));
    assert_eq!(to_python.dropped(), 0);
    assert_eq!(to_native.dropped(), 0);
    group.finish();
}

criterion_group!(benches, stream);
criterion_main!(benches);
