//! The gates a run can fail: a regression against a baseline (`--fail-on-regression PCT`)
//! and per-event budgets (`--budget EVENT=DURATION`, `bench.budgets:` in `config.yaml`).

use std::time::Duration;

use serde_json::{Value, json};

use super::baseline::Baseline;
use super::report::human;
use super::stats::{self, Change};
use super::{Results, Row};

/// A row compared with its baseline.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// The row's key.
    pub key: String,
    /// Baseline and current medians (ns).
    pub before_p50: u64,
    /// Current median (ns).
    pub after_p50: u64,
    /// The change, when both sides have samples.
    pub change: Option<Change>,
}

/// Compares every row with the baseline; rows on one side only are reported as such.
pub fn compare(results: &Results, baseline: &Baseline) -> (Vec<Comparison>, Vec<String>) {
    let mut comparisons = Vec::new();
    let mut notes = Vec::new();
    for row in &results.rows {
        let key = row.key();
        match baseline.rows.iter().find(|(k, _, _)| *k == key) {
            Some((_, p50, samples)) => comparisons.push(Comparison {
                key,
                before_p50: *p50,
                after_p50: row.series.quantile(0.5),
                change: stats::compare(samples, &row.series.samples),
            }),
            None => notes.push(format!("new since the baseline: {}", pretty(&key))),
        }
    }
    for (key, _, _) in &baseline.rows {
        if !results.rows.iter().any(|r| r.key() == *key) {
            notes.push(format!(
                "in the baseline but not measured now: {}",
                pretty(key)
            ));
        }
    }
    (comparisons, notes)
}

/// `shell pre_tool_call guard.sh (callback)` from a row key.
pub fn pretty(key: &str) -> String {
    let parts: Vec<&str> = key.split('|').collect();
    match parts.as_slice() {
        [system, event, hook, measure] => format!("{system} {event} {hook} ({measure})"),
        _ => key.to_string(),
    }
}

/// The comparison lines of the table.
pub fn comparison_text(comparisons: &[Comparison]) -> String {
    let mut out = String::from("\nchange against the baseline (median, 95% interval):\n");
    for c in comparisons {
        let change = match &c.change {
            Some(ch) => format!(
                "{:+.1}% [{:+.1}%, {:+.1}%]{}",
                ch.point * 100.0,
                ch.low * 100.0,
                ch.high * 100.0,
                if ch.significant() {
                    ""
                } else {
                    " (no significant change)"
                }
            ),
            None => "no samples to compare".into(),
        };
        out.push_str(&format!(
            "  {}: {} -> {}  {change}\n",
            pretty(&c.key),
            human(c.before_p50 as f64),
            human(c.after_p50 as f64)
        ));
    }
    out
}

/// Comparisons as JSON.
pub fn comparisons_json(comparisons: &[Comparison]) -> Value {
    json!(
        comparisons
            .iter()
            .map(|c| json!({
                "key": c.key,
                "before_p50_ns": c.before_p50,
                "after_p50_ns": c.after_p50,
                "change": c.change.map(|ch| ch.point),
                "change_low": c.change.map(|ch| ch.low),
                "change_high": c.change.map(|ch| ch.high),
                "significant": c.change.map(|ch| ch.significant()),
            }))
            .collect::<Vec<_>>()
    )
}

/// The regressions beyond `pct` percent that are significant, as messages.
pub fn regressions(comparisons: &[Comparison], pct: f64) -> Vec<String> {
    comparisons
        .iter()
        .filter_map(|c| {
            let ch = c.change?;
            (ch.point * 100.0 > pct && ch.low > 0.0).then(|| {
                format!(
                    "regression: {} is {:+.1}% slower (95% interval {:+.1}% to {:+.1}%), beyond the allowed {pct}%",
                    pretty(&c.key),
                    ch.point * 100.0,
                    ch.low * 100.0,
                    ch.high * 100.0
                )
            })
        })
        .collect()
}

/// Which statistic a budget limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stat {
    /// Median.
    P50,
    /// 90th percentile.
    P90,
    /// 99th percentile.
    P99,
    /// Largest.
    Max,
    /// Mean.
    Mean,
}

impl Stat {
    /// Parses `p50`, `p90`, `p99`, `max`, `mean`.
    ///
    /// # Errors
    ///
    /// Any other name, with the valid ones.
    pub fn parse(s: &str) -> Result<Stat, String> {
        Ok(match s {
            "p50" => Stat::P50,
            "p90" => Stat::P90,
            "p99" => Stat::P99,
            "max" => Stat::Max,
            "mean" => Stat::Mean,
            other => {
                return Err(format!(
                    "unknown budget statistic '{other}' (valid: p50, p90, p99, max, mean)"
                ));
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Stat::P50 => "p50",
            Stat::P90 => "p90",
            Stat::P99 => "p99",
            Stat::Max => "max",
            Stat::Mean => "mean",
        }
    }

    fn of(self, row: &Row) -> u64 {
        let s = &row.series;
        match self {
            Stat::P50 => s.quantile(0.5),
            Stat::P90 => s.quantile(0.9),
            Stat::P99 => s.quantile(0.99),
            Stat::Max => s.max(),
            Stat::Mean => s.mean().round() as u64,
        }
    }
}

/// Parses `40ms`, `250us`, `1.5s`, `2m`, `900ns`.
///
/// # Errors
///
/// Text that is not a non-negative number followed by a unit, with an example.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("'{text}' is not a duration (try 40ms, 250us or 1.5s)"))?;
    let scale = match unit.trim() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" | "min" => 60.0,
        _ => {
            return Err(format!(
                "'{text}' has no known unit (use ns, us, ms, s or m)"
            ));
        }
    };
    let secs = value * scale;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!(
            "'{text}' is not a duration (try 40ms, 250us or 1.5s)"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parses `EVENT=DURATION`.
///
/// # Errors
///
/// A missing `=` or a bad duration.
pub fn parse_budget(text: &str) -> Result<(String, Duration), String> {
    let (event, duration) = text.split_once('=').ok_or_else(|| {
        format!("budget '{text}' must be EVENT=DURATION, such as pre_tool_call=40ms")
    })?;
    Ok((event.trim().to_string(), parse_duration(duration)?))
}

/// The budget failures: an event whose row's statistic exceeds its budget, naming the
/// figure and the slowest hook of the event.
pub fn budget_failures(
    results: &Results,
    budgets: &[(String, Duration)],
    stat: Stat,
) -> Vec<String> {
    let mut failures = Vec::new();
    for (event, budget) in budgets {
        let Some(row) = results
            .rows
            .iter()
            .find(|r| r.event == *event && r.measure == "event")
        else {
            continue;
        };
        let figure = stat.of(row);
        if u128::from(figure) <= budget.as_nanos() {
            continue;
        }
        let slowest = results
            .rows
            .iter()
            .filter(|r| r.event == *event && matches!(r.measure, "callback" | "delivery"))
            .max_by_key(|r| stat.of(r))
            .map(|r| format!("; slowest hook: {} ({})", r.hook, human(stat.of(r) as f64)))
            .unwrap_or_default();
        failures.push(format!(
            "budget exceeded: {event} {} is {}, over its budget of {}{slowest}",
            stat.name(),
            human(figure as f64),
            human(budget.as_nanos() as f64)
        ));
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_the_usual_units() {
        assert_eq!(parse_duration("40ms"), Ok(Duration::from_millis(40)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("10").is_err());
        assert_eq!(
            parse_budget("pre_tool_call=40ms"),
            Ok(("pre_tool_call".into(), Duration::from_millis(40)))
        );
        assert!(parse_budget("pre_tool_call").is_err());
    }
}
