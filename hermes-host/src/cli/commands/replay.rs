//! `hermes hooks replay TRACE...`: a policy tried against recorded traffic. Every firing a
//! JSON trace recorded (`hermes run --trace json --trace-file FILE`, the gateway's traces)
//! is fired again, with its recorded payload, at the hooks of the home given (`--home`,
//! all three systems), without running any tool or model; each outcome is compared with
//! the recorded one (or with a saved set, `--expect`), and the differences are summed up
//! per hook and per rule. The exit status is 1 when an outcome changed, so a policy
//! repository can run it in CI.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use hermes_host::payload::OwnedPayload;
use hermes_host::registry::FiringRecord;
use serde_json::{Value, json};

use crate::app::agent::trace::describe;
use crate::app::bench::QuietLog;
use crate::app::shadow::{refuses, rule_of};
use crate::cli::ExitStatus;
use crate::cli::load::load_hooks;
use crate::cli::settings::Settings;

/// What `hermes hooks replay` was asked.
pub(super) struct Request<'a> {
    pub traces: &'a [PathBuf],
    pub as_json: bool,
    pub expect: Option<&'a Path>,
    pub write_expect: Option<&'a Path>,
    pub no_side_effects: bool,
    pub cwd: Option<&'a Path>,
}

/// One recorded firing.
struct Firing {
    /// `trace:line`, for examples.
    at: String,
    hook: String,
    payload: Value,
    /// The recorded outcome, as traces word it; for a gateway event, none.
    recorded: Option<String>,
}

/// How a firing's outcome compares with the recorded one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Change {
    Same,
    NewlyBlocked,
    NewlyAllowed,
    Changed,
    Error,
}

impl Change {
    fn name(self) -> &'static str {
        match self {
            Change::Same => "same",
            Change::NewlyBlocked => "newly blocked",
            Change::NewlyAllowed => "newly allowed",
            Change::Changed => "changed",
            Change::Error => "error",
        }
    }
}

fn classify(recorded: &str, now: &str, failed: bool) -> Change {
    if failed {
        Change::Error
    } else if recorded == now {
        Change::Same
    } else if refuses(now) && !refuses(recorded) {
        Change::NewlyBlocked
    } else if refuses(recorded) && !refuses(now) {
        Change::NewlyAllowed
    } else {
        Change::Changed
    }
}

/// The recorded firings of `trace`, in order.
fn read_trace(trace: &Path, out: &mut Vec<Firing>) -> anyhow::Result<()> {
    let bytes = hermes_host::private_file::read_regular(trace)
        .with_context(|| format!("cannot read the trace {}", trace.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let before = out.len();
    // A session transcript's tool calls, by id, until their results say how they went.
    let mut calls: Vec<(String, Firing)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: Value = serde_json::from_str(line).with_context(|| {
            format!(
                "{}:{}: not a JSON trace record; record one with `hermes run SCRIPT --trace json --trace-file FILE`",
                trace.display(),
                i + 1
            )
        })?;
        if record.get("message").is_some() && record.get("sessionId").is_some() {
            transcript_firing(&record, trace, i + 1, &mut calls);
            continue;
        }
        let kind = record["kind"].as_str().unwrap_or_default();
        let (Some(hook), Some(payload)) = (record["hook"].as_str(), record.get("payload")) else {
            continue;
        };
        let recorded = match kind {
            "fire" => Some(record["decision"].as_str().unwrap_or_default().to_string()),
            "gateway" => None,
            _ => continue,
        };
        out.push(Firing {
            at: format!("{}:{}", trace.display(), i + 1),
            hook: hook.to_string(),
            payload: payload.clone(),
            recorded,
        });
    }
    // A tool call whose result is an error (a hook's block, or the tool's own failure: the
    // transcript does not say which) is not compared; one that ran was allowed.
    let mut unknown = 0;
    for (_, mut firing) in calls {
        match firing.recorded.as_deref() {
            Some("allowed") => out.push(firing),
            _ => {
                unknown += 1;
                firing.recorded = None;
            }
        }
    }
    if unknown > 0 {
        eprintln!(
            "hermes: {}: {unknown} tool call(s) of the transcript ended in an error (a hook's block or the tool's failure; it does not say which) and are not compared",
            trace.display()
        );
    }
    if out.len() == before {
        bail!(
            "{}: no firings with payloads in it; record one with `hermes run SCRIPT --trace json --trace-file FILE`",
            trace.display()
        );
    }
    Ok(())
}

/// The `pre_tool_call` firing a session transcript's line rebuilds: a `tool_use` starts
/// one (its outcome unknown), and its `tool_result` says it ran (`allowed`) or not.
fn transcript_firing(record: &Value, trace: &Path, line: usize, calls: &mut Vec<(String, Firing)>) {
    let session = record["sessionId"].as_str().unwrap_or_default();
    for part in record["message"]["content"]
        .as_array()
        .into_iter()
        .flatten()
    {
        match part["type"].as_str() {
            Some("tool_use") => {
                let name = part["name"].as_str().unwrap_or_default();
                let tool = hermes_host::shell::claude::hermes_tool_name(name);
                let input = part["input"].as_object().cloned().unwrap_or_default();
                let args = hermes_host::shell::claude::hermes_args(tool, &input);
                let id = part["id"].as_str().unwrap_or_default().to_string();
                let firing = Firing {
                    at: format!("{}:{line}", trace.display()),
                    hook: "pre_tool_call".into(),
                    payload: json!({
                        "tool_name": tool, "args": args, "task_id": session,
                        "session_id": session, "tool_call_id": id,
                    }),
                    recorded: Some(String::new()),
                };
                calls.push((id, firing));
            }
            Some("tool_result") => {
                let id = part["tool_use_id"].as_str().unwrap_or_default();
                let content = part["content"].as_str().unwrap_or_default();
                let failed =
                    serde_json::from_str::<Value>(content).is_ok_and(|v| v.get("error").is_some());
                if let Some((_, firing)) = calls.iter_mut().find(|(i, _)| i == id) {
                    firing.recorded = Some(if failed { "error" } else { "allowed" }.into());
                }
            }
            _ => {}
        }
    }
}

/// What a replayed firing came to.
struct Replayed {
    hook: String,
    at: String,
    payload: Value,
    before: String,
    now: String,
    change: Change,
}

/// `hermes hooks replay`.
pub(super) fn replay(settings: &Settings, request: &Request<'_>) -> anyhow::Result<ExitStatus> {
    let mut firings = Vec::new();
    for trace in request.traces {
        read_trace(trace, &mut firings)?;
    }
    // The baseline: the trace's own outcomes, or a saved set of them in trace order.
    let expected: Option<Vec<Value>> = match request.expect {
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let saved: Value = serde_json::from_str(&text).with_context(|| {
                format!(
                    "{}: not JSON (write one with --write-expect)",
                    file.display()
                )
            })?;
            Some(saved["outcomes"].as_array().cloned().unwrap_or_default())
        }
        None => None,
    };
    let sink = Arc::new(Mutex::new(Vec::<FiringRecord>::new()));
    let log: Option<Arc<dyn hermes_host::gateway::GatewayLog>> = if request.no_side_effects {
        None
    } else {
        Some(Arc::new(QuietLog::default()))
    };
    let hooks = load_hooks(settings, Some(sink.clone()), log, request.cwd)?;
    let mut results: Vec<Replayed> = Vec::new();
    let mut side_effects: Vec<String> = Vec::new();
    let mut skipped = 0usize;
    let mut gateway_events = 0usize;
    let mut decided = 0usize;
    for firing in &firings {
        let Some(recorded) = &firing.recorded else {
            // A gateway event: its hooks decide nothing, they act.
            if request.no_side_effects {
                skipped += 1;
                continue;
            }
            if let Some(gateway) = hooks.gateway() {
                for hook in gateway.resolve(&firing.hook) {
                    let name = format!("gateway hook {} ({})", hook.name, firing.hook);
                    if !side_effects.contains(&name) {
                        side_effects.push(name);
                    }
                }
            }
            hooks.emit(&firing.hook, firing.payload.clone());
            gateway_events += 1;
            continue;
        };
        let observer = recorded.starts_with("observed");
        if observer && request.no_side_effects {
            skipped += 1;
            continue;
        }
        if let Ok(mut records) = sink.lock() {
            records.clear();
        }
        let owned = OwnedPayload::from_json(&firing.hook, &firing.payload);
        let now = describe(&hooks.fire(&firing.hook, &owned.fields()));
        let records = sink.lock().map(|r| r.clone()).unwrap_or_default();
        let failed = records.iter().any(|r| r.error.is_some());
        if observer {
            for r in &records {
                let name = format!("{} ({})", r.callback, firing.hook);
                if !side_effects.contains(&name) {
                    side_effects.push(name);
                }
            }
        }
        let before = match &expected {
            Some(saved) => saved
                .get(decided)
                .and_then(|o| o["outcome"].as_str())
                .unwrap_or("(not in the expected set)")
                .to_string(),
            None => recorded.clone(),
        };
        decided += 1;
        let change = classify(&before, &now, failed);
        results.push(Replayed {
            hook: firing.hook.clone(),
            at: firing.at.clone(),
            payload: firing.payload.clone(),
            before,
            now,
            change,
        });
    }
    // What the gateway hooks were handed is delivered before the report.
    if let Some(gateway) = hooks.gateway() {
        let report = gateway.shutdown(Duration::from_secs(30));
        if report.undelivered_total() > 0 {
            side_effects.push(format!(
                "{} gateway event(s) not delivered within 30 s",
                report.undelivered_total()
            ));
        }
    }
    if let Some(file) = request.write_expect {
        let outcomes: Vec<Value> = results
            .iter()
            .map(|r| json!({ "hook": r.hook, "at": r.at, "outcome": r.now }))
            .collect();
        let text = serde_json::to_string_pretty(&json!({ "outcomes": outcomes }))?;
        std::fs::write(file, text + "\n")
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    let changed: Vec<&Replayed> = results
        .iter()
        .filter(|r| r.change != Change::Same)
        .collect();
    if request.as_json {
        print_json(&results, &changed, &side_effects, skipped, gateway_events)?;
    } else {
        print_text(
            settings,
            &results,
            &changed,
            &side_effects,
            skipped,
            gateway_events,
            request,
        );
    }
    Ok(if changed.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// Per hook: how many firings came to each kind of change, in first-seen order.
fn per_hook(results: &[Replayed]) -> Vec<(String, [usize; 5])> {
    let mut out: Vec<(String, [usize; 5])> = Vec::new();
    for r in results {
        let slot = match out.iter_mut().position(|(h, _)| *h == r.hook) {
            Some(i) => i,
            None => {
                out.push((r.hook.clone(), [0; 5]));
                out.len() - 1
            }
        };
        out[slot].1[r.change as usize] += 1;
    }
    out
}

/// Per rule (the callback that refuses now, or refused before): the changed firings.
fn per_rule<'a>(changed: &[&'a Replayed]) -> Vec<(String, Vec<&'a Replayed>)> {
    let mut out: Vec<(String, Vec<&Replayed>)> = Vec::new();
    for r in changed {
        let rule = rule_of(&r.now)
            .or_else(|| rule_of(&r.before))
            .unwrap_or("(no rule)")
            .to_string();
        match out.iter_mut().find(|(k, _)| *k == rule) {
            Some((_, list)) => list.push(r),
            None => out.push((rule, vec![r])),
        }
    }
    out
}

/// A firing as an example: the tool and its arguments, else the payload, cut short.
fn example(r: &Replayed) -> String {
    format!("{} ({})", call_summary(&r.payload), r.at)
}

/// A firing's payload in a line: the tool and its arguments, else the payload, cut to 120
/// characters.
fn call_summary(payload: &Value) -> String {
    let what = match (payload["tool_name"].as_str(), payload.get("args")) {
        (Some(tool), Some(args)) => format!("{tool} {args}"),
        _ => payload.to_string(),
    };
    if what.chars().count() <= 120 {
        return what;
    }
    let mut cut: String = what.chars().take(120).collect();
    cut.push('…');
    cut
}

fn print_text(
    settings: &Settings,
    results: &[Replayed],
    changed: &[&Replayed],
    side_effects: &[String],
    skipped: usize,
    gateway_events: usize,
    request: &Request<'_>,
) {
    let against = match request.expect {
        Some(file) => format!("the expected outcomes in {}", file.display()),
        None => "the recorded outcomes".to_string(),
    };
    println!(
        "Replayed {} firing(s) against the hooks of {}, compared with {against}:",
        results.len(),
        settings.home.root().display()
    );
    for (hook, counts) in per_hook(results) {
        println!(
            "  {hook}: {} same, {} newly blocked, {} newly allowed, {} changed, {} error(s)",
            counts[0], counts[1], counts[2], counts[3], counts[4]
        );
    }
    for (rule, list) in per_rule(changed) {
        let blocked = list
            .iter()
            .filter(|r| r.change == Change::NewlyBlocked)
            .count();
        println!(
            "  rule {rule}: {} change(s), {blocked} call(s) it would have blocked",
            list.len()
        );
        for r in list.iter().take(3) {
            println!("    {}: {}", r.change.name(), example(r));
            println!("      before: {}", r.before);
            println!("      now:    {}", r.now);
        }
    }
    if gateway_events > 0 {
        println!("  {gateway_events} gateway event(s) re-emitted to the gateway hooks");
    }
    if skipped > 0 {
        println!("  {skipped} observer firing(s) and gateway event(s) skipped (--no-side-effects)");
    }
    if !side_effects.is_empty() {
        println!(
            "Hooks that act outside their answer ran (files they write, messages they post happened); --no-side-effects skips them:"
        );
        for name in side_effects {
            println!("  {name}");
        }
    }
    if changed.is_empty() {
        println!("No outcome changed.");
    } else {
        println!("{} outcome(s) changed.", changed.len());
    }
}

fn print_json(
    results: &[Replayed],
    changed: &[&Replayed],
    side_effects: &[String],
    skipped: usize,
    gateway_events: usize,
) -> anyhow::Result<()> {
    let hooks: serde_json::Map<String, Value> = per_hook(results)
        .into_iter()
        .map(|(hook, c)| {
            (
                hook,
                json!({ "same": c[0], "newly_blocked": c[1], "newly_allowed": c[2], "changed": c[3], "errors": c[4] }),
            )
        })
        .collect();
    let changes: Vec<Value> = changed
        .iter()
        .map(|r| {
            json!({
                "hook": r.hook, "at": r.at, "change": r.change.name(), "payload": r.payload,
                "before": r.before, "now": r.now,
            })
        })
        .collect();
    let out = json!({
        "firings": results.len(),
        "hooks": hooks,
        "changes": changes,
        "side_effects": side_effects,
        "skipped": skipped,
        "gateway_events": gateway_events,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

/// `hermes hooks shadow-report [--since AGE]`: per hook, how often the shadow hooks agreed
/// with the deciding ones over the records of `logs/shadow.jsonl`, and the disagreements
/// with examples.
pub(super) fn shadow_report(
    settings: &Settings,
    since: Option<&str>,
    as_json: bool,
) -> anyhow::Result<ExitStatus> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let since_at = match since {
        Some(age) => now - parse_age(age)?.as_secs_f64(),
        None => 0.0,
    };
    let file = crate::app::shadow::records_path(&settings.home);
    let records = crate::app::shadow::read_records(&file, since_at)
        .with_context(|| format!("cannot read {}", file.display()))?;
    // Per hook and shadow callback: (firings, agreed, disagreements).
    let mut rows: Vec<ShadowRow<'_>> = Vec::new();
    for r in &records {
        let hook = r["hook"].as_str().unwrap_or("?");
        for answer in r["callbacks"].as_array().into_iter().flatten() {
            let callback = answer["callback"].as_str().unwrap_or("?");
            let slot = match rows
                .iter()
                .position(|(h, c, ..)| h == hook && c == callback)
            {
                Some(i) => i,
                None => {
                    rows.push((hook.to_string(), callback.to_string(), 0, 0, Vec::new()));
                    rows.len() - 1
                }
            };
            rows[slot].2 += 1;
            if answer["agreed"].as_bool() == Some(true) {
                rows[slot].3 += 1;
            } else {
                rows[slot].4.push((r, answer));
            }
        }
    }
    if as_json {
        let out: Vec<Value> = rows
            .iter()
            .map(|(hook, callback, n, agreed, disagreements)| {
                let examples: Vec<Value> = disagreements
                    .iter()
                    .map(|(r, a)| json!({ "payload": r["payload"], "shadow": a["decision"], "real": r["real"] }))
                    .collect();
                json!({ "hook": hook, "callback": callback, "firings": n, "agreed": agreed, "disagreements": examples })
            })
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({ "file": file, "shadows": out }))?
        );
        return Ok(ExitStatus::Success);
    }
    if records.is_empty() {
        println!(
            "No shadow records in {}{}. Mark a hook `shadow: true` (or a plugin in plugins.shadow) and run the agent.",
            file.display(),
            since
                .map(|s| format!(" from the last {s}"))
                .unwrap_or_default()
        );
        return Ok(ExitStatus::Success);
    }
    println!("Shadow hooks in {}:", file.display());
    for (hook, callback, n, agreed, disagreements) in &rows {
        println!(
            "  {hook} {callback}: {n} firing(s), agreed with the deciding hooks on {agreed}, disagreed on {}",
            disagreements.len()
        );
        for (r, answer) in disagreements.iter().take(3) {
            println!("    {}", call_summary(&r["payload"]));
            println!(
                "      shadow: {}",
                answer["decision"].as_str().unwrap_or_default()
            );
            println!("      real:   {}", r["real"].as_str().unwrap_or_default());
        }
    }
    Ok(ExitStatus::Success)
}

/// One line of the shadow report: a hook, a shadow callback, its firings, how many agreed,
/// and the disagreements (the record and the callback's answer).
type ShadowRow<'a> = (String, String, usize, usize, Vec<(&'a Value, &'a Value)>);

/// `30s`, `15m`, `24h`, `7d`, or a number of seconds.
fn parse_age(text: &str) -> anyhow::Result<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| anyhow::anyhow!("--since {text}: give an age such as 30m, 24h or 7d"))?;
    let scale = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        other => bail!("--since {text}: unknown unit '{other}' (s, m, h or d)"),
    };
    Ok(Duration::from_secs(n.saturating_mul(scale)))
}
