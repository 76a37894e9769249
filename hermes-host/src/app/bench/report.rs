//! The bench's outputs: the table on stdout, the versioned JSON (`--json`,
//! `schema/bench.schema.json`), and the machine facts every output carries.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::{Results, Row};

/// The version of the JSON document; bumped when a field changes meaning or goes away.
pub const SCHEMA_VERSION: u64 = 1;

/// Facts about the machine a run was measured on.
#[derive(Clone, Debug)]
pub struct Machine {
    /// Logical cores available to this process.
    pub cores: usize,
    /// The 1, 5 and 15 minute load averages (zeros where unknown).
    pub load: [f64; 3],
    /// `linux`, `macos`, ...
    pub os: &'static str,
    /// The kernel release, where known.
    pub kernel: String,
    /// This host's version.
    pub host_version: &'static str,
}

impl Machine {
    /// Reads the facts of this machine now.
    pub fn now() -> Machine {
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .map(|text| {
                let mut it = text
                    .split_whitespace()
                    .map(|w| w.parse::<f64>().unwrap_or(0.0));
                [
                    it.next().unwrap_or(0.0),
                    it.next().unwrap_or(0.0),
                    it.next().unwrap_or(0.0),
                ]
            })
            .unwrap_or([0.0; 3]);
        Machine {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load,
            os: std::env::consts::OS,
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            host_version: env!("CARGO_PKG_VERSION"),
        }
    }

    /// A warning when the machine is busier than it has cores: figures will be noisy.
    pub fn load_warning(&self) -> Option<String> {
        (self.load[0] > self.cores as f64).then(|| {
            format!(
                "warning: the machine is loaded (load average {:.2} on {} cores); figures will be noisy",
                self.load[0], self.cores
            )
        })
    }

    /// One line for the table's header.
    pub fn line(&self) -> String {
        format!(
            "{} {} · {} cores · load {:.2} {:.2} {:.2} · hermes {}",
            self.os,
            self.kernel,
            self.cores,
            self.load[0],
            self.load[1],
            self.load[2],
            self.host_version
        )
    }

    fn to_json(&self) -> Value {
        json!({
            "cores": self.cores,
            "load_average": self.load,
            "os": self.os,
            "kernel": self.kernel,
            "host_version": self.host_version,
        })
    }
}

/// A duration in nanoseconds with a unit chosen for its size: `850 ns`, `12.3 µs`,
/// `20.4 ms`, `1.20 s`.
pub fn human(ns: f64) -> String {
    if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 1_000_000.0 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1_000_000_000.0 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// The host's overhead beside a shell hook, or the empty dispatch beside a native callback.
fn beside(row: &Row) -> String {
    if let Some(bare) = &row.bare {
        let overhead = row.series.quantile(0.5) as f64 - bare.quantile(0.5) as f64;
        let sign = if overhead < 0.0 { "-" } else { "+" };
        return format!(
            "bare {} {sign}{}",
            human(bare.quantile(0.5) as f64),
            human(overhead.abs())
        );
    }
    if let Some(ns) = row.dispatch_empty_ns {
        return format!("empty dispatch {}", human(ns as f64));
    }
    String::new()
}

/// The aligned table.
pub fn table(results: &Results, machine: &Machine) -> String {
    let header = [
        "system", "event", "hook", "measure", "n", "errors", "mean", "p50", "p90", "p99", "p99.9",
        "max", "beside",
    ];
    let mut lines: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for row in &results.rows {
        let s = &row.series;
        lines.push(vec![
            row.system.to_string(),
            row.event.clone(),
            row.hook.clone(),
            row.measure.to_string(),
            s.n.to_string(),
            s.errors.to_string(),
            human(s.mean()),
            human(s.quantile(0.5) as f64),
            human(s.quantile(0.9) as f64),
            human(s.quantile(0.99) as f64),
            human(s.quantile(0.999) as f64),
            human(s.max() as f64),
            beside(row),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} · timer {} per interval",
        machine.line(),
        human(results.timer_ns as f64)
    );
    let _ = writeln!(out);
    for line in &lines {
        let mut text = String::new();
        for (c, cell) in line.iter().enumerate() {
            let pad = widths[c] - cell.chars().count();
            // Numbers right-aligned, names left-aligned.
            if (4..12).contains(&c) {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            }
            text.push_str("  ");
        }
        let _ = writeln!(out, "{}", text.trim_end());
    }
    for row in &results.rows {
        if let Some(e) = &row.series.first_error {
            let _ = writeln!(
                out,
                "\n{} failed {} of {} firing(s); the first: {e}",
                row.hook, row.series.errors, row.series.n
            );
        }
    }
    for note in &results.notes {
        let _ = writeln!(out, "note: {note}");
    }
    if results.interrupted {
        let _ = writeln!(
            out,
            "\ninterrupted: the results above are what was measured so far"
        );
    }
    out
}

/// One row as JSON; `samples` adds the kept samples (for baselines).
pub fn row_json(row: &Row, samples: bool) -> Value {
    let s = &row.series;
    let mut v = json!({
        "system": row.system,
        "event": row.event,
        "hook": row.hook,
        "measure": row.measure,
        "n": s.n,
        "errors": s.errors,
        "first_error": s.first_error,
        "batch": s.batch,
        "mean_ns": s.mean().round() as u64,
        "p50_ns": s.quantile(0.5),
        "p90_ns": s.quantile(0.9),
        "p99_ns": s.quantile(0.99),
        "p999_ns": s.quantile(0.999),
        "max_ns": s.max(),
        "bare_p50_ns": row.bare.as_ref().map(|b| b.quantile(0.5)),
        "bare_mean_ns": row.bare.as_ref().map(|b| b.mean().round() as u64),
        "overhead_p50_ns": row.bare.as_ref().map(|b| s.quantile(0.5) as i64 - b.quantile(0.5) as i64),
        "overhead_mean_ns": row.bare.as_ref().map(|b| (s.mean() - b.mean()).round() as i64),
        "dispatch_empty_ns": row.dispatch_empty_ns,
    });
    if samples {
        v["samples"] = json!(s.samples);
    }
    v
}

/// The whole document of `--json` (and, with samples, of a saved baseline).
pub fn document(results: &Results, machine: &Machine, samples: bool, extra: Value) -> Value {
    let mut doc = json!({
        "schema_version": SCHEMA_VERSION,
        "machine": machine.to_json(),
        "timer_ns": results.timer_ns,
        "interrupted": results.interrupted,
        "results": results.rows.iter().map(|r| row_json(r, samples)).collect::<Vec<_>>(),
        "notes": results.notes,
    });
    if let (Some(doc), Value::Object(extra)) = (doc.as_object_mut(), extra) {
        doc.extend(extra);
    }
    doc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_the_size_of_the_value() {
        assert_eq!(human(850.0), "850 ns");
        assert_eq!(human(12_340.0), "12.3 µs");
        assert_eq!(human(20_400_000.0), "20.4 ms");
        assert_eq!(human(1_200_000_000.0), "1.20 s");
    }
}
