//! `--html FILE`: one self-contained page (inline SVG, no scripts, no network assets).
//!
//! Per event: a table of its hooks, each with its median and p99 per firing and a bar on
//! one logarithmic axis shared by the table, so a 2 ms shell hook and a 300 ns plugin are
//! both visible; the hook names are table cells, whole and wrapped. Then per hook, a
//! histogram of its kept samples on a logarithmic time axis, every sample in a bar (the
//! bars' counts, in `data-count`, sum to the sample count in the chart's `data-n`).
//!
//! The SVG is written by hand rather than through a plotting crate: every label is placed
//! here, with human units only (`1 µs`, `10 ms`), and labels that would crowd each other
//! are left out, so no text sits on other text at any zoom.

use std::fmt::Write as _;

use super::report::{Machine, human};
use super::{Results, Row};

/// Bins of a histogram.
const BINS: usize = 30;

/// The width of a summary bar's track and of a histogram's plot area, in pixels.
const TRACK: f64 = 420.0;
const PLOT: f64 = 640.0;

/// Labels closer than this (centre to centre, in pixels) would touch; the later is left out.
const LABEL_GAP: f64 = 56.0;

/// The page.
pub fn page(results: &Results, machine: &Machine) -> String {
    let mut body = String::new();
    let _ = writeln!(
        body,
        "<p class=\"m\">{} · timer {} per interval</p>",
        escape(&machine.line()),
        escape(&human(results.timer_ns as f64))
    );
    let mut events: Vec<&str> = Vec::new();
    for row in &results.rows {
        if !events.contains(&row.event.as_str()) {
            events.push(&row.event);
        }
    }
    for event in events {
        let rows: Vec<&Row> = results.rows.iter().filter(|r| r.event == event).collect();
        let _ = writeln!(body, "<h2>{}</h2>", escape(event));
        body.push_str(&summary(&rows));
        for row in rows {
            let _ = writeln!(
                body,
                "<h3>{} · {} <span class=\"m\">({})</span></h3>\n<p class=\"stats\">n={} firings, errors={}, p50={}, p99={}, max={}</p>",
                escape(row.system),
                escape(&row.hook),
                row.measure,
                row.series.n,
                row.series.errors,
                escape(&human(row.series.quantile(0.5) as f64)),
                escape(&human(row.series.quantile(0.99) as f64)),
                escape(&human(row.series.max() as f64)),
            );
            body.push_str(&histogram(row));
        }
    }
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>hermes bench</title>\n<style>{STYLE}</style>\n</head><body>\n<h1>hermes bench</h1>\n{body}</body></html>\n"
    )
}

const STYLE: &str = "body{font-family:sans-serif;font-size:15px;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}\
.m{color:#666;font-weight:normal}\
h2{margin-top:2em;border-bottom:1px solid #ddd}\
h3{margin:1.4em 0 0.2em;font-size:1em;overflow-wrap:anywhere}\
.stats{margin:0.2em 0;color:#444}\
table.summary{border-collapse:collapse;width:100%}\
table.summary th,table.summary td{padding:3px 8px;vertical-align:middle;text-align:left}\
table.summary td.name{overflow-wrap:anywhere;max-width:300px}\
table.summary td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}\
table.summary tr:nth-child(even) td{background:#f6f6f6}\
svg{display:block}\
svg text{font-family:sans-serif;font-size:11px;fill:#333}";

/// The log scale of a chart: `lo..hi` nanoseconds over `width` pixels.
#[derive(Clone, Copy)]
struct LogScale {
    lo: f64,
    hi: f64,
    width: f64,
}

impl LogScale {
    /// A scale covering `min..max` (ns), widened to whole decades.
    fn covering(min: f64, max: f64, width: f64) -> LogScale {
        let min = min.max(1.0);
        let max = max.max(min * 10.0);
        LogScale {
            lo: 10f64.powf(min.log10().floor()),
            hi: 10f64.powf(max.log10().ceil()),
            width,
        }
    }

    fn x(&self, ns: f64) -> f64 {
        let ns = ns.clamp(self.lo, self.hi);
        (ns.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10()) * self.width
    }

    /// The decades inside the scale, as `(ns, x)`.
    fn decades(&self) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        let mut d = self.lo;
        while d <= self.hi * 1.000_001 {
            out.push((d, self.x(d)));
            d *= 10.0;
        }
        out
    }
}

/// A tick label: `1 ns`, `10 µs`, `1 s` (decades have no decimals).
fn tick(ns: f64) -> String {
    let (value, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    if (value - value.round()).abs() < 1e-9 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

/// The decade ticks of `scale` that get a label: spread so that no two labels touch.
fn labelled(scale: &LogScale) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (ns, x) in scale.decades() {
        if out.last().is_none_or(|(_, last)| x - last >= LABEL_GAP) {
            out.push((ns, x));
        }
    }
    out
}

/// The event's hooks as table rows: name, median, p99, and a bar on a shared log axis.
fn summary(rows: &[&Row]) -> String {
    let medians: Vec<f64> = rows.iter().map(|r| r.series.quantile(0.5) as f64).collect();
    let p99s: Vec<f64> = rows
        .iter()
        .map(|r| r.series.quantile(0.99) as f64)
        .collect();
    let min = medians.iter().copied().fold(f64::INFINITY, f64::min);
    let max = p99s.iter().copied().fold(0.0, f64::max);
    let scale = LogScale::covering(min, max, TRACK);
    let pad = 24.0;
    let width = TRACK + 2.0 * pad;
    let mut html = String::from(
        "<table class=\"summary\">\n<thead><tr><th>hook</th><th class=\"num\">median</th><th class=\"num\">p99</th><th>",
    );
    // The axis: decade lines and labels above the bars, the caption in the header cell's
    // own line, apart from every label.
    let _ = write!(
        html,
        "<div class=\"m\">per firing: bar to the median, line to p99, log scale</div><svg class=\"chart axis\" width=\"{width:.0}\" height=\"22\" viewBox=\"0 0 {width:.0} 22\">"
    );
    for (ns, x) in labelled(&scale) {
        let _ = write!(
            html,
            "<text x=\"{:.1}\" y=\"14\" text-anchor=\"middle\">{}</text>",
            x + pad,
            escape(&tick(ns))
        );
    }
    html.push_str("<line x1=\"0\" y1=\"21\" x2=\"100%\" y2=\"21\" stroke=\"#999\"/></svg></th></tr></thead>\n<tbody>\n");
    for ((row, median), p99) in rows.iter().zip(&medians).zip(&p99s) {
        let color = if row.measure == "event" || row.measure == "emit" {
            "#c0392b"
        } else {
            "#2e6da4"
        };
        let _ = write!(
            html,
            "<tr><td class=\"name\">{} · {} <span class=\"m\">({})</span></td><td class=\"num\">{}</td><td class=\"num\">{}</td><td><svg class=\"bar\" width=\"{width:.0}\" height=\"16\" viewBox=\"0 0 {width:.0} 16\">",
            escape(row.system),
            escape(&row.hook),
            row.measure,
            escape(&human(*median)),
            escape(&human(*p99)),
        );
        for (_, x) in scale.decades() {
            let _ = write!(
                html,
                "<line x1=\"{0:.1}\" y1=\"0\" x2=\"{0:.1}\" y2=\"16\" stroke=\"#e4e4e4\"/>",
                x + pad
            );
        }
        let end = scale.x(*median).max(1.0);
        let _ = write!(
            html,
            "<rect x=\"{pad:.1}\" y=\"3\" width=\"{end:.1}\" height=\"10\" fill=\"{color}\" opacity=\"0.75\"><title>median {}</title></rect>",
            escape(&human(*median))
        );
        let whisker = scale.x(*p99);
        let _ = write!(
            html,
            "<line x1=\"{0:.1}\" y1=\"8\" x2=\"{1:.1}\" y2=\"8\" stroke=\"{color}\"/><line x1=\"{1:.1}\" y1=\"4\" x2=\"{1:.1}\" y2=\"12\" stroke=\"{color}\"/>",
            end + pad,
            whisker.max(end) + pad
        );
        html.push_str("</svg></td></tr>\n");
    }
    html.push_str("</tbody></table>\n");
    html
}

/// The bins of `samples` on `scale`: every sample in one, so the counts sum to the number
/// of samples.
fn bins(samples: &[u64], scale: &LogScale) -> [u64; BINS] {
    let mut counts = [0u64; BINS];
    for &s in samples {
        let f = scale.x(s as f64) / scale.width;
        let bin = ((f * BINS as f64) as usize).min(BINS - 1);
        counts[bin] += 1;
    }
    counts
}

/// A histogram of the row's kept samples on a log axis.
fn histogram(row: &Row) -> String {
    let samples = &row.series.samples;
    if samples.is_empty() {
        return "<p>no samples</p>\n".into();
    }
    let min = samples.iter().copied().min().unwrap_or(1) as f64;
    let max = samples.iter().copied().max().unwrap_or(1) as f64;
    let scale = LogScale::covering(min, max, PLOT);
    let counts = bins(samples, &scale);
    let top = counts.iter().copied().max().unwrap_or(1).max(1);
    let (left, top_px, plot_h) = (48.0, 10.0, 120.0);
    let width = left + PLOT + 24.0;
    let height = top_px + plot_h + 40.0;
    let bottom = top_px + plot_h;
    let mut svg = format!(
        "<svg class=\"chart histogram\" data-n=\"{}\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"{} samples\">\n",
        samples.len(),
        samples.len()
    );
    for (_, x) in scale.decades() {
        let _ = writeln!(
            svg,
            "<line x1=\"{0:.1}\" y1=\"{top_px}\" x2=\"{0:.1}\" y2=\"{bottom}\" stroke=\"#eee\"/>",
            x + left
        );
    }
    let bin_w = PLOT / BINS as f64;
    for (i, &c) in counts.iter().enumerate() {
        let h = c as f64 / top as f64 * plot_h;
        let lo_ns = 10f64.powf(
            scale.lo.log10() + (i as f64 / BINS as f64) * (scale.hi.log10() - scale.lo.log10()),
        );
        let _ = writeln!(
            svg,
            "<rect class=\"bin\" data-count=\"{c}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{h:.1}\" fill=\"#2e6da4\" opacity=\"0.7\"><title>{c} sample(s) from {}</title></rect>",
            left + i as f64 * bin_w + 0.5,
            bottom - h,
            (bin_w - 1.0).max(0.5),
            escape(&human(lo_ns))
        );
    }
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{:.1}\" y2=\"{bottom}\" stroke=\"#999\"/>",
        left + PLOT
    );
    for (ns, x) in labelled(&scale) {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            x + left,
            bottom + 14.0,
            escape(&tick(ns))
        );
    }
    // The count axis: its top and zero, at the left, right-aligned to the plot.
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{top}</text>",
        left - 6.0,
        top_px + 8.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{bottom:.1}\" text-anchor=\"end\">0</text>",
        left - 6.0
    );
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">time per firing (log scale); bars: {} samples</text>",
        left + PLOT / 2.0,
        bottom + 32.0,
        samples.len()
    );
    svg.push_str("</svg>\n");
    svg
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_lands_in_a_bin() {
        let samples: Vec<u64> = (0..200).map(|i| 300 + i * i * 1000).collect();
        let scale = LogScale::covering(300.0, *samples.last().unwrap() as f64, PLOT);
        assert_eq!(bins(&samples, &scale).iter().sum::<u64>(), 200);
    }

    #[test]
    fn ticks_are_human_and_spread() {
        assert_eq!(tick(1.0), "1 ns");
        assert_eq!(tick(1e4), "10 µs");
        assert_eq!(tick(1e6), "1 ms");
        assert_eq!(tick(1e10), "10 s");
        let scale = LogScale::covering(300.0, 2e9, TRACK);
        let xs: Vec<f64> = labelled(&scale).iter().map(|(_, x)| *x).collect();
        assert!(xs.windows(2).all(|w| w[1] - w[0] >= LABEL_GAP), "{xs:?}");
        assert_eq!(scale.lo, 100.0);
        assert_eq!(scale.hi, 1e10);
    }
}
