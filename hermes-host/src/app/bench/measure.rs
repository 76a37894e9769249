//! Timing one operation: warm-up, batching of sub-microsecond operations, the stop rule,
//! concurrency, and the samples kept for percentiles and comparisons.
//!
//! A *sample* is the time of one firing in nanoseconds. Operations that take less than
//! [`BATCH_TARGET`] are timed in batches, as criterion does, and each batch contributes its
//! mean as one sample: the clock is read twice per batch, not twice per firing, so its own
//! cost (measured by [`timer_cost_ns`] and reported) does not dominate a 10 ns callback.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// A batch is grown until it takes at least this long.
pub const BATCH_TARGET: Duration = Duration::from_micros(20);

/// How many samples a series keeps verbatim (evenly thinned beyond), for the bootstrap
/// comparison against a baseline and for the plots.
pub const KEPT_SAMPLES: usize = 4000;

/// When warm-up ends and when measuring ends.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Warm-up firings; `None`: until [`WARMUP_DEFAULT_FIRINGS`] firings or
    /// [`WARMUP_DEFAULT_TIME`], whichever comes first.
    pub warmup: Option<u64>,
    /// Measured firings (per thread); when `None`, `duration` decides.
    pub iterations: Option<u64>,
    /// How long to measure when `iterations` is not given.
    pub duration: Duration,
    /// Threads firing at once.
    pub concurrency: usize,
}

/// Default warm-up: this many firings...
pub const WARMUP_DEFAULT_FIRINGS: u64 = 5;
/// ...or this long, whichever comes first.
pub const WARMUP_DEFAULT_TIME: Duration = Duration::from_secs(1);

/// What one firing did.
pub type Fired = Result<(), String>;

/// The samples of one measured operation.
#[derive(Clone, Debug)]
pub struct Series {
    /// Nanoseconds per firing.
    pub hist: Histogram<u64>,
    /// Firings measured.
    pub n: u64,
    /// Firings that failed.
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// Up to [`KEPT_SAMPLES`] samples, in the order taken.
    pub samples: Vec<u64>,
    /// Firings per sample (1 unless batched).
    pub batch: u64,
    /// Every `stride`-th sample is kept.
    stride: u64,
    seen: u64,
}

impl Default for Series {
    fn default() -> Self {
        Series::new()
    }
}

impl Series {
    /// An empty series.
    pub fn new() -> Series {
        Series {
            // 1 ns to an hour, 3 significant digits; values beyond are clamped.
            hist: Histogram::new_with_bounds(1, 3_600_000_000_000, 3)
                .expect("constant histogram bounds are valid"),
            n: 0,
            errors: 0,
            first_error: None,
            samples: Vec::new(),
            batch: 1,
            stride: 1,
            seen: 0,
        }
    }

    /// Records one sample of `ns` per firing, standing for `firings` firings.
    pub fn record(&mut self, ns: u64, firings: u64) {
        self.hist.saturating_record(ns.max(1));
        self.n += firings;
        self.seen += 1;
        if self.seen % self.stride == 0 {
            self.samples.push(ns);
            if self.samples.len() >= KEPT_SAMPLES {
                // Keep every other one and double the stride: still evenly spread.
                let mut i = 0;
                self.samples.retain(|_| {
                    i += 1;
                    i % 2 == 0
                });
                self.stride *= 2;
            }
        }
    }

    /// Counts a failed firing.
    pub fn fail(&mut self, message: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(message);
        }
    }

    /// Adds `other`'s samples to these.
    pub fn merge(&mut self, other: Series) {
        let _ = self.hist.add(&other.hist);
        self.n += other.n;
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.samples.extend(other.samples);
        self.batch = self.batch.max(other.batch);
    }

    /// The value at `quantile` (0..=1) in nanoseconds; 0 when empty.
    pub fn quantile(&self, quantile: f64) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.value_at_quantile(quantile)
        }
    }

    /// The mean in nanoseconds.
    pub fn mean(&self) -> f64 {
        if self.hist.is_empty() {
            0.0
        } else {
            self.hist.mean()
        }
    }

    /// The largest sample in nanoseconds.
    pub fn max(&self) -> u64 {
        if self.hist.is_empty() {
            0
        } else {
            self.hist.max()
        }
    }
}

/// The median cost of reading the clock twice (one timed interval), in nanoseconds.
pub fn timer_cost_ns() -> u64 {
    let mut costs: Vec<u64> = (0..10_001)
        .map(|_| {
            let a = Instant::now();
            let b = Instant::now();
            (b - a).as_nanos() as u64
        })
        .collect();
    costs.sort_unstable();
    costs[costs.len() / 2]
}

/// Measures `op` (called with the firing's index) under `budget`, batching when it is
/// cheap and `batchable`. `stop` ends the measurement early (Ctrl-C).
pub fn measure(
    op: &(dyn Fn(u64) -> Fired + Sync),
    budget: &Budget,
    batchable: bool,
    stop: &AtomicBool,
) -> Series {
    warm_up(op, budget, stop);
    let batch = if batchable { calibrate(op) } else { 1 };
    let threads = budget.concurrency.max(1);
    if threads == 1 {
        return run_loop(op, budget, batch, stop, 0);
    }
    let mut total = Series::new();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| scope.spawn(move || run_loop(op, budget, batch, stop, t as u64 * 1_000_000)))
            .collect();
        for handle in handles {
            if let Ok(series) = handle.join() {
                total.merge(series);
            }
        }
    });
    total
}

/// Measures two operations interleaved (`a`, then `b`, then `a`, ...), so both see the same
/// machine: a shell hook and the same command spawned bare.
pub fn measure_pair(
    a: &(dyn Fn(u64) -> Fired + Sync),
    b: &(dyn Fn(u64) -> Fired + Sync),
    budget: &Budget,
    stop: &AtomicBool,
) -> (Series, Series) {
    warm_up(a, budget, stop);
    warm_up(b, budget, stop);
    let (mut sa, mut sb) = (Series::new(), Series::new());
    let started = Instant::now();
    let mut i = 0;
    while !done(budget, i, started, stop) {
        for (op, series) in [(a, &mut sa), (b, &mut sb)] {
            let t = Instant::now();
            let fired = op(i);
            series.record(t.elapsed().as_nanos() as u64, 1);
            if let Err(e) = fired {
                series.fail(e);
            }
        }
        i += 1;
    }
    (sa, sb)
}

fn warm_up(op: &(dyn Fn(u64) -> Fired + Sync), budget: &Budget, stop: &AtomicBool) {
    let started = Instant::now();
    let mut i = 0;
    loop {
        let over = match budget.warmup {
            Some(n) => i >= n,
            None => i >= WARMUP_DEFAULT_FIRINGS || started.elapsed() >= WARMUP_DEFAULT_TIME,
        };
        if over || stop.load(Ordering::Relaxed) {
            return;
        }
        let _ = op(i);
        i += 1;
    }
}

/// The batch size that makes one batch take at least [`BATCH_TARGET`].
fn calibrate(op: &(dyn Fn(u64) -> Fired + Sync)) -> u64 {
    let mut batch = 1u64;
    while batch < 1 << 20 {
        let t = Instant::now();
        for i in 0..batch {
            let _ = op(i);
        }
        if t.elapsed() >= BATCH_TARGET {
            break;
        }
        batch *= 2;
    }
    batch
}

fn done(budget: &Budget, firings: u64, started: Instant, stop: &AtomicBool) -> bool {
    stop.load(Ordering::Relaxed)
        || match budget.iterations {
            Some(n) => firings >= n,
            None => started.elapsed() >= budget.duration,
        }
}

fn run_loop(
    op: &(dyn Fn(u64) -> Fired + Sync),
    budget: &Budget,
    batch: u64,
    stop: &AtomicBool,
    first_index: u64,
) -> Series {
    let mut series = Series::new();
    series.batch = batch;
    let started = Instant::now();
    let mut firings = 0u64;
    while !done(budget, firings, started, stop) {
        let size = match budget.iterations {
            Some(n) => batch.min(n - firings),
            None => batch,
        };
        let t = Instant::now();
        let mut failure = None;
        for k in 0..size {
            if let Err(e) = op(first_index + firings + k) {
                failure.get_or_insert((0u64, e)).0 += 1;
            }
        }
        let took = t.elapsed().as_nanos() as u64;
        series.record(took / size.max(1), size);
        if let Some((count, message)) = failure {
            series.fail(message);
            series.errors += count - 1;
        }
        firings += size;
    }
    series
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(iterations: u64) -> Budget {
        Budget {
            warmup: Some(0),
            iterations: Some(iterations),
            duration: Duration::ZERO,
            concurrency: 1,
        }
    }

    #[test]
    fn a_batched_cheap_operation_counts_every_firing_and_every_failure() {
        let stop = AtomicBool::new(false);
        let op = |i: u64| {
            if i % 10 == 0 {
                Err(format!("bad {i}"))
            } else {
                Ok(())
            }
        };
        let series = measure(&op, &budget(1000), true, &stop);
        assert_eq!(series.n, 1000);
        assert_eq!(series.errors, 100);
        assert_eq!(series.first_error.as_deref(), Some("bad 0"));
        assert!(series.batch > 1, "a no-op was not batched");
    }

    #[test]
    fn a_sleeping_operation_measures_at_least_its_sleep() {
        let stop = AtomicBool::new(false);
        let op = |_| {
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        };
        let series = measure(&op, &budget(5), true, &stop);
        assert_eq!((series.n, series.batch), (5, 1));
        assert!(
            series.quantile(0.5) >= 2_000_000,
            "{}",
            series.quantile(0.5)
        );
    }

    #[test]
    fn concurrency_fires_from_every_thread_and_kept_samples_stay_bounded() {
        let stop = AtomicBool::new(false);
        let mut b = budget(50_000);
        b.concurrency = 3;
        let series = measure(&|_| Ok(()), &b, false, &stop);
        assert_eq!(series.n, 150_000);
        assert!(series.samples.len() <= 3 * KEPT_SAMPLES);
    }

    #[test]
    fn a_raised_stop_flag_ends_the_measurement() {
        let stop = AtomicBool::new(true);
        let mut b = budget(0);
        b.iterations = None;
        b.duration = Duration::from_secs(3600);
        assert_eq!(measure(&|_| Ok(()), &b, false, &stop).n, 0);
    }
}
