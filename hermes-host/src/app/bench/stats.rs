//! Comparing two runs: a bootstrap confidence interval for the change of the median, so a
//! regression gate reacts to a real slowdown and not to one noisy run.
//!
//! Both sample sets are resampled with replacement [`RESAMPLES`] times; each round's
//! change is `median(new*) / median(old*) - 1`. The 2.5th and 97.5th percentiles of those
//! changes are the 95% interval; the change is *significant* when the interval does not
//! contain 0. The random numbers come from a fixed seed, so a comparison is reproducible.

/// Bootstrap rounds.
pub const RESAMPLES: usize = 2000;

/// The change from a baseline to now, as fractions (0.1 = 10% slower).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    /// The change of the medians.
    pub point: f64,
    /// Lower end of the 95% interval.
    pub low: f64,
    /// Upper end of the 95% interval.
    pub high: f64,
}

impl Change {
    /// Whether the interval excludes "no change".
    pub fn significant(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// The change from `old` to `new` samples; `None` when either is empty or `old`'s median
/// is 0.
pub fn compare(old: &[u64], new: &[u64]) -> Option<Change> {
    if old.is_empty() || new.is_empty() {
        return None;
    }
    let base = median(&mut old.to_vec());
    if base == 0.0 {
        return None;
    }
    let point = median(&mut new.to_vec()) / base - 1.0;
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let (mut a, mut b) = (vec![0u64; old.len()], vec![0u64; new.len()]);
    let mut changes: Vec<f64> = (0..RESAMPLES)
        .filter_map(|_| {
            resample(old, &mut a, &mut rng);
            resample(new, &mut b, &mut rng);
            let m = median(&mut a);
            (m > 0.0).then(|| median(&mut b) / m - 1.0)
        })
        .collect();
    if changes.is_empty() {
        return None;
    }
    changes.sort_by(f64::total_cmp);
    let at = |q: f64| changes[((changes.len() - 1) as f64 * q).round() as usize];
    Some(Change {
        point,
        low: at(0.025),
        high: at(0.975),
    })
}

fn resample(from: &[u64], into: &mut [u64], rng: &mut XorShift) {
    for slot in into.iter_mut() {
        *slot = from[(rng.next() % from.len() as u64) as usize];
    }
}

/// The median of `values` (reordered in place).
pub fn median(values: &mut [u64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mid = values.len() / 2;
    let (_, m, _) = values.select_nth_unstable(mid);
    let m = *m as f64;
    if values.len() % 2 == 1 {
        m
    } else {
        let below = values[..mid].iter().max().copied().unwrap_or(0) as f64;
        (below + m) / 2.0
    }
}

/// xorshift64*: small, fast, and good enough for resampling indices.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noisy(center: u64, n: usize, seed: u64) -> Vec<u64> {
        let mut rng = XorShift(seed);
        (0..n)
            .map(|_| center + rng.next() % (center / 5 + 1))
            .collect()
    }

    #[test]
    fn four_times_slower_is_a_significant_change_of_about_300_percent() {
        let c = compare(&noisy(1000, 500, 1), &noisy(4000, 500, 2)).unwrap();
        assert!(c.significant());
        assert!((2.8..3.2).contains(&c.point), "{c:?}");
        assert!(c.low > 2.5, "{c:?}");
    }

    #[test]
    fn the_same_distribution_is_not_significant() {
        let c = compare(&noisy(1000, 500, 3), &noisy(1000, 500, 4)).unwrap();
        assert!(!c.significant(), "{c:?}");
    }

    #[test]
    fn medians_of_odd_and_even_lengths() {
        assert_eq!(median(&mut [3, 1, 2]), 2.0);
        assert_eq!(median(&mut [4, 1, 3, 2]), 2.5);
        assert!(compare(&[], &[1]).is_none());
    }
}
