//! `--html FILE`: one self-contained page (inline SVG, no scripts, no network assets) with
//! a latency distribution per measured row and, per event, the median of each of its
//! hooks beside the event's own.

use plotters::prelude::*;

use super::report::{Machine, human};
use super::{Results, Row};

const BINS: usize = 40;

/// The page.
pub fn page(results: &Results, machine: &Machine) -> String {
    let mut body = String::new();
    body.push_str(&format!(
        "<p class=\"m\">{} · timer {} per interval</p>\n",
        escape(&machine.line()),
        escape(&human(results.timer_ns as f64))
    ));
    let mut events: Vec<&str> = Vec::new();
    for row in &results.rows {
        if !events.contains(&row.event.as_str()) {
            events.push(&row.event);
        }
    }
    for event in events {
        let rows: Vec<&Row> = results.rows.iter().filter(|r| r.event == event).collect();
        body.push_str(&format!("<h2>{}</h2>\n", escape(event)));
        body.push_str(&breakdown(&rows));
        for row in rows {
            body.push_str(&format!(
                "<h3>{} · {} ({})</h3>\n<p>n={} errors={} p50={} p99={} max={}</p>\n",
                escape(row.system),
                escape(&row.hook),
                row.measure,
                row.series.n,
                row.series.errors,
                escape(&human(row.series.quantile(0.5) as f64)),
                escape(&human(row.series.quantile(0.99) as f64)),
                escape(&human(row.series.max() as f64)),
            ));
            body.push_str(&distribution(row));
        }
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>hermes bench</title>\n<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}.m{{color:#555}}svg{{display:block;margin:0.5em 0}}</style>\n</head><body>\n<h1>hermes bench</h1>\n{body}</body></html>\n"
    )
}

/// A histogram of the row's kept samples, from the smallest to the 99.9th percentile.
fn distribution(row: &Row) -> String {
    let samples = &row.series.samples;
    if samples.is_empty() {
        return "<p>no samples</p>\n".into();
    }
    let low = samples.iter().copied().min().unwrap_or(0) as f64;
    let high = (row.series.quantile(0.999) as f64).max(low + 1.0);
    let width = (high - low) / BINS as f64;
    let mut counts = [0u32; BINS];
    for &s in samples {
        let bin = (((s as f64 - low) / width) as usize).min(BINS - 1);
        counts[bin] += 1;
    }
    let top = counts.iter().copied().max().unwrap_or(1).max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 220)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d(low..high, 0u32..top + top / 10 + 1);
        if let Ok(mut chart) = chart {
            let _ = chart.configure_mesh().x_labels(6).y_labels(4).draw();
            let _ = chart.draw_series(counts.iter().enumerate().map(|(i, &c)| {
                let x0 = low + i as f64 * width;
                Rectangle::new([(x0, 0), (x0 + width, c)], BLUE.mix(0.6).filled())
            }));
        }
        let _ = root.present();
    }
    // Plotters needs a font backend to lay out text, which would mean shipping a font or
    // linking fontconfig; the labels are plain SVG text placed at the plot's known edges.
    let (left, right, bottom) = (60.0, 890.0, 190.0);
    let mut labels = String::new();
    for k in 0..=5 {
        let f = k as f64 / 5.0;
        let anchor = match k {
            0 => "start",
            5 => "end",
            _ => "middle",
        };
        labels.push_str(&text(
            left + f * (right - left),
            bottom + 16.0,
            anchor,
            &human(low + f * (high - low)),
        ));
    }
    labels.push_str(&text(left - 6.0, 18.0, "end", &top.to_string()));
    labels.push_str(&text(left - 6.0, bottom, "end", "0"));
    labels.push_str(&text(
        (left + right) / 2.0,
        216.0,
        "middle",
        "time per firing (bars: samples)",
    ));
    with_labels(svg, &labels)
}

/// Horizontal bars: each row's median, so the hooks that make an event slow stand out.
fn breakdown(rows: &[&Row]) -> String {
    let top = rows
        .iter()
        .map(|r| r.series.quantile(0.5))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let height = 40 + 26 * rows.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, height)).into_drawing_area();
        let _ = root.fill(&WHITE);
        let chart = ChartBuilder::on(&root)
            .margin(10)
            .x_label_area_size(25)
            .y_label_area_size(260)
            .build_cartesian_2d(0.0..top * 1.1, 0..rows.len());
        if let Ok(mut chart) = chart {
            let _ = chart.configure_mesh().disable_y_mesh().x_labels(6).draw();
            let _ = chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
                let color = if r.measure == "event" { RED } else { BLUE };
                Rectangle::new(
                    [(0.0, i), (r.series.quantile(0.5) as f64, i + 1)],
                    color.mix(0.5).filled(),
                )
            }));
        }
        let _ = root.present();
    }
    let (left, right, top_px, bottom) = (270.0, 890.0, 10.0, f64::from(height) - 35.0);
    let slot = (bottom - top_px) / rows.len().max(1) as f64;
    let mut labels = String::new();
    for (i, r) in rows.iter().enumerate() {
        // Row 0 is the lowest bar: cartesian y grows upwards.
        let y = bottom - (i as f64 + 0.5) * slot + 4.0;
        labels.push_str(&text(
            left - 6.0,
            y,
            "end",
            &format!("{} ({})", r.hook, r.measure),
        ));
        labels.push_str(&text(
            left + 4.0,
            y,
            "start",
            &human(r.series.quantile(0.5) as f64),
        ));
    }
    labels.push_str(&text(left, bottom + 16.0, "start", "0"));
    labels.push_str(&text(
        right,
        bottom + 16.0,
        "end",
        &format!("{} (median per firing)", human(top * 1.1)),
    ));
    with_labels(svg, &labels)
}

/// One SVG text element, escaped.
fn text(x: f64, y: f64, anchor: &str, content: &str) -> String {
    format!(
        "<text x=\"{x:.0}\" y=\"{y:.0}\" text-anchor=\"{anchor}\" font-family=\"sans-serif\" font-size=\"11\">{}</text>\n",
        escape(content)
    )
}

/// `svg` with `labels` added just before its end.
fn with_labels(svg: String, labels: &str) -> String {
    match svg.rfind("</svg>") {
        Some(end) => format!("{}{labels}{}\n", &svg[..end], &svg[end..]),
        None => svg + "\n",
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
