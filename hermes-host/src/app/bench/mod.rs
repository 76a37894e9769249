//! `hermes bench`: what the hooks a user installed cost, measured the way the agent fires
//! them.
//!
//! The hooks come from the same `Hooks::load` an agent run uses. For every selected event the
//! bench measures:
//!
//! - each callback alone (`measure: callback`): a native plugin's callback called through
//!   the ABI, a shell hook run as the registry runs it (spawn, payload on stdin, answer
//!   parsed). Beside a native callback, the cost of dispatching the same payload to an
//!   empty registry; beside a shell hook, the same command spawned bare with the same stdin,
//!   interleaved with the hook's firings, and the difference: the host's overhead;
//! - the event as the agent sees it (`measure: event`): every callback of the event through
//!   the registry, with its combining rule and the shell hooks' concurrency;
//! - for gateway events, the caller's cost of `emit` (`measure: emit`), each hook's
//!   delivery from emit to the end of its handler (`measure: delivery`), and the event
//!   until every hook is done (`measure: event`);
//! - for a plugin's tool, asked for as `@tool/<name>` with its arguments in the payload's
//!   `args`, the call as the agent makes it, through every gate (`measure: tool`), beside
//!   the tool alone, interleaved, and the difference: what the gates cost.
//!
//! Hooks run for real, side effects included; the bench writes nothing to the home.

pub mod baseline;
pub mod gates;
pub mod html;
pub mod measure;
pub mod report;
pub mod stats;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use abi_stable::std_types::RResult;
use hermes_hooks_abi::core::{EventView, no_host_calls};
use hermes_host::gateway::GatewayHooks;
use hermes_host::payload::OwnedPayload;
use hermes_host::registry::{Callback, Entry, Registry, Source};
use regex::Regex;
use serde_json::{Map, Value, json};

use measure::{Budget, Fired, Series};

/// The hook systems, as `--system` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    /// Native plugins.
    Native,
    /// Shell hooks.
    Shell,
    /// Python plugins, each measured as one round trip to its worker.
    Python,
    /// Gateway hooks.
    Gateway,
}

impl System {
    /// `native`, `shell`, `python` or `gateway`.
    pub fn as_str(self) -> &'static str {
        match self {
            System::Native => "native",
            System::Shell => "shell",
            System::Python => "python",
            System::Gateway => "gateway",
        }
    }
}

/// Gateway events the bench knows how to fire when a hook subscribes by wildcard.
pub const GATEWAY_EVENTS: [&str; 8] = [
    "gateway:startup",
    "session:start",
    "session:end",
    "session:reset",
    "agent:start",
    "agent:step",
    "agent:end",
    "command:reset",
];

/// What to measure and how.
pub struct Plan {
    /// Events to fire; empty: every event with at least one selected hook.
    pub events: Vec<String>,
    /// Systems to measure; empty: all.
    pub systems: Vec<System>,
    /// Only hooks whose label (or gateway hook name) matches.
    pub hook: Option<Regex>,
    /// Fields merged over every synthetic payload.
    pub payload_override: Map<String, Value>,
    /// `tool_name` of tool events.
    pub for_tool: Option<String>,
    /// Payloads per event from a trace, in recorded order (`--replay`).
    pub replay: Option<Replay>,
    /// Warm-up, stop rule, concurrency.
    pub budget: Budget,
}

/// The firings of a trace, grouped by event in order of first appearance.
#[derive(Clone, Debug, Default)]
pub struct Replay {
    /// `(event, payloads in recorded order)`.
    pub events: Vec<(String, Vec<Value>)>,
}

impl Replay {
    /// Reads a JSON-lines trace of `hermes run --trace json`: its `fire` records (hooks)
    /// and `gateway` records (gateway events), with their payloads.
    ///
    /// # Errors
    ///
    /// A line that is not JSON, or a trace with no payloads (written before traces
    /// carried them), with the line number.
    pub fn parse(text: &str) -> Result<Replay, String> {
        let mut replay = Replay::default();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record: Value = serde_json::from_str(line)
                .map_err(|e| format!("line {}: not a JSON trace record ({e})", i + 1))?;
            let kind = record["kind"].as_str().unwrap_or_default();
            if kind != "fire" && kind != "gateway" {
                continue;
            }
            if kind == "fire" && record["callbacks"].as_u64() == Some(0) {
                continue;
            }
            let (Some(event), Some(payload)) = (record["hook"].as_str(), record.get("payload"))
            else {
                continue;
            };
            match replay.events.iter_mut().find(|(e, _)| e == event) {
                Some((_, payloads)) => payloads.push(payload.clone()),
                None => replay
                    .events
                    .push((event.to_string(), vec![payload.clone()])),
            }
        }
        if replay.events.is_empty() {
            return Err(
                "no firings with payloads in it; record one with `hermes run SCRIPT --trace json --trace-file FILE`"
                    .into(),
            );
        }
        Ok(replay)
    }
}

/// One line of the results.
#[derive(Clone, Debug)]
pub struct Row {
    /// `native`, `shell`, `gateway`, or `all` for an event's row over every system.
    pub system: &'static str,
    /// The hook or gateway event.
    pub event: String,
    /// The callback's label or gateway hook's name; `(event)` / `(emit)` for those rows.
    pub hook: String,
    /// `callback`, `event`, `emit` or `delivery`.
    pub measure: &'static str,
    /// The firings.
    pub series: Series,
    /// For a shell hook: the same command spawned bare.
    pub bare: Option<Series>,
    /// For a native callback: the median cost of dispatching to an empty registry (ns).
    pub dispatch_empty_ns: Option<u64>,
}

impl Row {
    /// The key a baseline matches rows by.
    pub fn key(&self) -> String {
        format!(
            "{}|{}|{}|{}",
            self.system, self.event, self.hook, self.measure
        )
    }
}

/// What a run produced.
pub struct Results {
    /// Rows in measurement order.
    pub rows: Vec<Row>,
    /// Things worth knowing (skipped hooks, matchers that did not match).
    pub notes: Vec<String>,
    /// Whether Ctrl-C cut the run short.
    pub interrupted: bool,
    /// The clock's own cost per interval, in nanoseconds.
    pub timer_ns: u64,
}

/// Called after each measured row, for a progress bar.
pub type Progress<'a> = &'a dyn Fn(&str);

/// The events `plan` selects, validated. Errors name the unknown event and the closest
/// known one.
///
/// # Errors
///
/// An event that is neither a hook of this interface nor a gateway event.
pub fn select_events(
    registry: &Registry,
    gateway: Option<&GatewayHooks>,
    plan: &Plan,
) -> Result<Vec<String>, String> {
    let wants = |s: System| plan.systems.is_empty() || plan.systems.contains(&s);
    let gateway_events = gateway_events(gateway);
    if !plan.events.is_empty() {
        for event in &plan.events {
            if let Some(tool) = event.strip_prefix(TOOL_EVENT) {
                if registry.tools().spec(tool).is_none() {
                    let names: Vec<&str> =
                        registry.tools().specs().map(|s| s.name.as_str()).collect();
                    return Err(format!(
                        "no plugin offers tool '{tool}' (tools: {})",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ));
                }
                continue;
            }
            let known_hook = hermes_hooks_abi::hooks::spec(event).is_some();
            let known_gateway = event.contains(':');
            if !known_hook && !known_gateway {
                let mut names: Vec<&str> = hermes_hooks_abi::hooks::HOOKS
                    .iter()
                    .map(|h| h.name)
                    .collect();
                names.extend(GATEWAY_EVENTS);
                let hint = hermes_host::pyfmt::close_match(event, &names, 0.6)
                    .map(|m| format!("; did you mean '{m}'?"))
                    .unwrap_or_default();
                return Err(format!("unknown event '{event}'{hint}"));
            }
        }
        return Ok(plan.events.clone());
    }
    if let Some(replay) = &plan.replay {
        return Ok(replay.events.iter().map(|(e, _)| e.clone()).collect());
    }
    let mut events: Vec<String> = Vec::new();
    for name in registry.hook_names() {
        let any = registry.entries(name).iter().any(|e| {
            wants(system_of(&e.source)) && plan.hook.as_ref().is_none_or(|r| r.is_match(&e.label))
        });
        if any {
            events.push(name.to_string());
        }
    }
    if wants(System::Gateway) {
        for event in gateway_events {
            let any = gateway.is_some_and(|g| {
                g.resolve(&event)
                    .iter()
                    .any(|h| plan.hook.as_ref().is_none_or(|r| r.is_match(&h.name)))
            });
            if any {
                events.push(event);
            }
        }
    }
    Ok(events)
}

/// How an event names a plugin's tool: `@tool/<name>`, as the tool crosses the ABI.
pub const TOOL_EVENT: &str = "@tool/";

/// A host with no tools of its own, that approves nothing: the bench runs plugins' tools.
struct NoHostTools;

impl hermes_host::tool_call::HostTools for NoHostTools {
    fn run(&self, _tool: &str, _args: &Value) -> Option<String> {
        None
    }
}

/// Measures plugin tool `tool` with the payload's `args`: the call through every gate
/// (middleware, `pre_tool_call`, the tool, `post_tool_call`, transforms), interleaved with
/// the tool alone.
fn tool_row(registry: &Registry, event: &str, tool: &str, plan: &Plan, stop: &AtomicBool) -> Row {
    let args = plan
        .payload_override
        .get("args")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let call = hermes_host::tool_call::Call {
        session_id: "bench-session".into(),
        task_id: "bench-session".into(),
        tool_call_id: "bench-call".into(),
        ..hermes_host::tool_call::Call::new(tool, args.clone())
    };
    let failed = |result: &str| {
        serde_json::from_str::<Value>(result)
            .ok()
            .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_string))
    };
    let gated = |_| -> Fired {
        let done = registry.call_tool(&call, &NoHostTools);
        match failed(&done.result) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    };
    let alone = |_| -> Fired {
        let result = registry
            .tools()
            .dispatch(tool, &args, &Map::new(), &hermes_host::tools::no_dispatch)
            .unwrap_or_default();
        match failed(&result) {
            Some(why) => Err(why),
            None => Ok(()),
        }
    };
    let (series, bare) = measure::measure_pair(&gated, &alone, &plan.budget, stop);
    let source = registry
        .tools()
        .spec(tool)
        .map_or_else(String::new, |s| s.source.clone());
    Row {
        system: "all",
        event: event.to_string(),
        hook: format!("{source}::{tool}"),
        measure: "tool",
        series,
        bare: Some(bare),
        dispatch_empty_ns: None,
    }
}

/// Concrete gateway events the loaded gateway hooks subscribe to.
fn gateway_events(gateway: Option<&GatewayHooks>) -> Vec<String> {
    let Some(gateway) = gateway else {
        return Vec::new();
    };
    let mut events: Vec<String> = Vec::new();
    for hook in gateway.loaded() {
        for pattern in &hook.events {
            let concrete: Vec<String> = if pattern.ends_with('*') {
                GATEWAY_EVENTS
                    .iter()
                    .filter(|e| e.starts_with(pattern.trim_end_matches('*')))
                    .map(|e| e.to_string())
                    .collect()
            } else {
                vec![pattern.clone()]
            };
            for e in concrete {
                if !events.contains(&e) {
                    events.push(e);
                }
            }
        }
    }
    events
}

fn system_of(source: &Source) -> System {
    match source {
        Source::Shell => System::Shell,
        Source::Python(_) => System::Python,
        Source::Plugin(_) | Source::Host => System::Native,
    }
}

/// The payloads `event` is fired with.
fn payloads(plan: &Plan, event: &str) -> Vec<Value> {
    if let Some((_, recorded)) = plan
        .replay
        .as_ref()
        .and_then(|r| r.events.iter().find(|(e, _)| e == event))
    {
        return recorded.clone();
    }
    let mut payload = if event.contains(':') {
        json!({"platform": "local", "user_id": "bench", "session_id": "bench-session", "message": "hello"})
    } else {
        hermes_host::payload::synthetic(event)
            .unwrap_or_else(|| json!({"session_id": "bench-session"}))
    };
    if let Some(object) = payload.as_object_mut() {
        for (k, v) in &plan.payload_override {
            object.insert(k.clone(), v.clone());
        }
        if let Some(tool) = &plan.for_tool {
            if object.contains_key("tool_name") {
                object.insert("tool_name".into(), tool.clone().into());
            }
        }
    }
    vec![payload]
}

/// Measures every selected event. `registry` has the failure counter `failures` attached
/// (see [`counting`]).
pub fn run(
    registry: &Registry,
    gateway: Option<&GatewayHooks>,
    failures: &AtomicU64,
    events: &[String],
    plan: &Plan,
    stop: &AtomicBool,
    progress: Progress<'_>,
) -> Results {
    let mut results = Results {
        rows: Vec::new(),
        notes: Vec::new(),
        interrupted: false,
        timer_ns: measure::timer_cost_ns(),
    };
    let wants = |s: System| plan.systems.is_empty() || plan.systems.contains(&s);
    let empty = Registry::new();
    for event in events {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if let Some(tool) = event.strip_prefix(TOOL_EVENT) {
            results
                .rows
                .push(tool_row(registry, event, tool, plan, stop));
            progress(event);
            continue;
        }
        let payloads: Vec<OwnedPayload> = payloads(plan, event)
            .iter()
            .map(|p| OwnedPayload::from_json(event, p))
            .collect();
        if event.contains(':') {
            if wants(System::Gateway) {
                gateway_rows(gateway, event, plan, stop, &mut results);
                progress(event);
            }
            continue;
        }
        let fields: Vec<Vec<_>> = payloads.iter().map(OwnedPayload::fields).collect();
        let pick = |i: u64| &fields[(i % fields.len() as u64) as usize];
        let entries = registry.entries(event);
        let mut selected_any = false;
        for entry in entries {
            let system = system_of(&entry.source);
            if !wants(system)
                || plan
                    .hook
                    .as_ref()
                    .is_some_and(|r| !r.is_match(&entry.label))
            {
                continue;
            }
            selected_any = true;
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let row = match &entry.callback {
                Callback::External(ext) => {
                    let view0 = EventView::new(event, pick(0), no_host_calls());
                    if !ext.matches(&view0) {
                        results.notes.push(format!(
                            "{}: its matcher does not match this payload (tool '{}'); not measured",
                            entry.label,
                            view0.get_str("tool_name").unwrap_or_default()
                        ));
                        continue;
                    }
                    let fire = |i: u64| -> Fired {
                        let view = EventView::new(event, pick(i), no_host_calls());
                        match ext.run_reporting(&view) {
                            (Err(e), _) => Err(e),
                            (Ok(_), warnings) if !warnings.is_empty() => Err(warnings.join("; ")),
                            (Ok(_), _) => Ok(()),
                        }
                    };
                    match ext.subprocess(&view0) {
                        Some(sub) => {
                            let bare = |_| bare_spawn(&sub);
                            let (series, bare) =
                                measure::measure_pair(&fire, &bare, &plan.budget, stop);
                            Row {
                                system: system.as_str(),
                                event: event.clone(),
                                hook: entry.label.clone(),
                                measure: "callback",
                                series,
                                bare: Some(bare),
                                dispatch_empty_ns: None,
                            }
                        }
                        None => row(system, event, &entry.label, "callback", {
                            measure::measure(&fire, &plan.budget, false, stop)
                        }),
                    }
                }
                Callback::Native(cb) => {
                    let fire = |i: u64| -> Fired {
                        let view = EventView::new(event, pick(i), no_host_calls());
                        match cb.call(&view) {
                            RResult::RErr(e) => Err(e.into_string()),
                            RResult::ROk(_) => Ok(()),
                        }
                    };
                    let mut r = row(system, event, &entry.label, "callback", {
                        measure::measure(&fire, &plan.budget, true, stop)
                    });
                    let dispatch = |i: u64| -> Fired {
                        std::hint::black_box(empty.fire(event, pick(i)));
                        Ok(())
                    };
                    let quick = Budget {
                        iterations: Some(20_000),
                        concurrency: 1,
                        warmup: Some(1000),
                        ..plan.budget
                    };
                    r.dispatch_empty_ns =
                        Some(measure::measure(&dispatch, &quick, true, stop).quantile(0.5));
                    r
                }
                Callback::InProcess(f) => {
                    let fire = |i: u64| -> Fired {
                        let view = EventView::new(event, pick(i), no_host_calls());
                        f(&view).map(|_| ())
                    };
                    row(system, event, &entry.label, "callback", {
                        measure::measure(&fire, &plan.budget, true, stop)
                    })
                }
                // A group (a Python plugin's callbacks for this hook) answers in one round
                // trip: measured once, at its first member, under the plugin's name.
                Callback::Member(_, member) if *member > 0 => continue,
                Callback::Member(group, _) => {
                    let in_group: Vec<&Entry> = entries
                        .iter()
                        .filter(|e| matches!(&e.callback, Callback::Member(g, _) if Arc::ptr_eq(g, group)))
                        .collect();
                    let members = in_group.len();
                    let fire = |i: u64| -> Fired {
                        let view = EventView::new(event, pick(i), no_host_calls());
                        match group.run_all(&view).into_iter().find_map(Result::err) {
                            Some(e) => Err(e),
                            None => Ok(()),
                        }
                    };
                    // Neighbours in one worker answer as one group: the row names them all.
                    let mut names: Vec<String> = Vec::new();
                    for e in &in_group {
                        let name = match &e.source {
                            Source::Python(name) => name.to_string(),
                            _ => e.label.clone(),
                        };
                        if !names.contains(&name) {
                            names.push(name);
                        }
                    }
                    let name = match names.as_slice() {
                        [] => entry.label.clone(),
                        [one] => one.clone(),
                        [first, rest @ ..] => format!("{first} and {} more plugin(s)", rest.len()),
                    };
                    let label = format!("{name} {}", count(members, "callback"));
                    row(system, event, &label, "plugin", {
                        measure::measure(&fire, &plan.budget, false, stop)
                    })
                }
            };
            results.rows.push(row);
        }
        if selected_any && !stop.load(Ordering::Relaxed) {
            let inline = entries
                .iter()
                .all(|e| !matches!(e.callback, Callback::External(_) | Callback::Member(..)));
            let fire = |i: u64| -> Fired {
                let before = failures.load(Ordering::Relaxed);
                std::hint::black_box(registry.fire(event, pick(i)));
                let failed = failures.load(Ordering::Relaxed) - before;
                if failed == 0 {
                    Ok(())
                } else {
                    Err(format!("{failed} callback(s) failed"))
                }
            };
            let series = measure::measure(&fire, &plan.budget, inline, stop);
            results
                .rows
                .push(row_all(event, &count(entries.len(), "callback"), series));
        }
        progress(event);
    }
    results.interrupted = stop.load(Ordering::Relaxed);
    results
}

/// `(1 hook)`, `(3 hooks)`.
fn count(n: usize, what: &str) -> String {
    if n == 1 {
        format!("(1 {what})")
    } else {
        format!("({n} {what}s)")
    }
}

fn row(system: System, event: &str, hook: &str, measure: &'static str, series: Series) -> Row {
    Row {
        system: system.as_str(),
        event: event.to_string(),
        hook: hook.to_string(),
        measure,
        series,
        bare: None,
        dispatch_empty_ns: None,
    }
}

fn row_all(event: &str, hook: &str, series: Series) -> Row {
    Row {
        system: "all",
        event: event.to_string(),
        hook: hook.to_string(),
        measure: "event",
        series,
        bare: None,
        dispatch_empty_ns: None,
    }
}

/// The command spawned as a plain program would: no host, the same argv, environment and
/// stdin, and no supervision (a hook past its timeout is already an error in the hook's own
/// row).
fn bare_spawn(sub: &hermes_host::registry::Subprocess) -> Fired {
    use std::io::Write as _;
    let (argv, stdin) = (&sub.argv, &sub.stdin);
    let Some(program) = argv.first() else {
        return Err(format!("{}: empty command", sub.command));
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(&argv[1..])
        .envs(sub.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", argv[0]))?;
    if let Some(mut input) = child.stdin.take() {
        let _ = input.write_all(stdin.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("cannot wait for {}: {e}", argv[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("exited with {}", out.status))
    }
}

/// Emits `event` repeatedly and times the caller's `emit`, each hook's delivery, and the
/// event until every hook is done.
fn gateway_rows(
    gateway: Option<&GatewayHooks>,
    event: &str,
    plan: &Plan,
    stop: &AtomicBool,
    results: &mut Results,
) {
    let Some(gateway) = gateway else {
        results
            .notes
            .push(format!("{event}: no gateway hooks are loaded"));
        return;
    };
    let contexts: Vec<Value> = payloads(plan, event);
    let targets: Vec<(usize, String, Duration)> = gateway
        .resolve(event)
        .iter()
        .filter(|h| plan.hook.as_ref().is_none_or(|r| r.is_match(&h.name)))
        .filter_map(|h| {
            let index = gateway.loaded().iter().position(|l| l.path == h.path)?;
            Some((index, h.name.clone(), h.timeout))
        })
        .collect();
    if targets.is_empty() {
        results.notes.push(format!(
            "{event}: no selected gateway hook subscribes to it"
        ));
        return;
    }
    let wait_limit = targets
        .iter()
        .map(|t| t.2)
        .max()
        .unwrap_or(Duration::from_secs(30))
        + Duration::from_secs(2);
    let mut emit = Series::new();
    let mut all = Series::new();
    let mut per_hook: Vec<Series> = targets.iter().map(|_| Series::new()).collect();
    let counts = |stats: &hermes_host::gateway::GatewayStats| -> Vec<(u64, u64)> {
        targets
            .iter()
            .map(|(i, _, _)| {
                stats
                    .hooks
                    .get(*i)
                    .map_or((0, 0), |h| (h.delivered, h.failed))
            })
            .collect()
    };
    let warmup = plan
        .budget
        .warmup
        .unwrap_or(measure::WARMUP_DEFAULT_FIRINGS);
    let mut started = Instant::now();
    let mut i: u64 = 0;
    loop {
        let measuring = i >= warmup;
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if measuring {
            let firings = i - warmup;
            let over = match plan.budget.iterations {
                Some(n) => firings >= n,
                None => started.elapsed() >= plan.budget.duration,
            };
            if over {
                break;
            }
        }
        let context = contexts[(i % contexts.len() as u64) as usize].clone();
        let before = counts(&gateway.stats());
        let t0 = Instant::now();
        gateway.emit(event, context);
        let emitted = t0.elapsed();
        let mut pending: Vec<bool> = vec![true; targets.len()];
        let mut gave_up = false;
        while pending.iter().any(|p| *p) {
            let now = counts(&gateway.stats());
            let took = t0.elapsed();
            for (k, (was, is)) in before.iter().zip(&now).enumerate() {
                if pending[k] && (is.0 > was.0 || is.1 > was.1) {
                    pending[k] = false;
                    if measuring {
                        per_hook[k].record(took.as_nanos() as u64, 1);
                        if is.1 > was.1 {
                            per_hook[k].fail("the handler failed (see the gateway log)".into());
                        }
                    }
                }
            }
            if took > wait_limit {
                gave_up = true;
                break;
            }
            std::thread::yield_now();
        }
        if measuring {
            emit.record(emitted.as_nanos() as u64, 1);
            all.record(t0.elapsed().as_nanos() as u64, 1);
            if gave_up {
                all.fail(format!(
                    "a handler did not finish within {}s",
                    wait_limit.as_secs()
                ));
            }
        }
        if gave_up {
            results.notes.push(format!(
                "{event}: a handler did not finish within {}s; stopped measuring this event",
                wait_limit.as_secs()
            ));
            break;
        }
        i += 1;
        if i == warmup {
            // Measuring starts now; the duration counts from here.
            started = Instant::now();
        }
    }
    results.rows.push(Row {
        system: "gateway",
        event: event.to_string(),
        hook: "(emit)".into(),
        measure: "emit",
        series: emit,
        bare: None,
        dispatch_empty_ns: None,
    });
    for ((_, name, _), series) in targets.iter().zip(per_hook) {
        results.rows.push(Row {
            system: "gateway",
            event: event.to_string(),
            hook: name.clone(),
            measure: "delivery",
            series,
            bare: None,
            dispatch_empty_ns: None,
        });
    }
    results.rows.push(Row {
        system: "gateway",
        event: event.to_string(),
        hook: count(targets.len(), "hook"),
        measure: "event",
        series: all,
        bare: None,
        dispatch_empty_ns: None,
    });
}

/// A failure counter shared with the registry, and the registry it is attached to.
pub fn counting(registry: &mut Registry) -> Arc<AtomicU64> {
    let counter = Arc::new(AtomicU64::new(0));
    registry.count_failures(counter.clone());
    counter
}

/// Gateway log lines, counted and kept only for the first few (a failing handler would
/// otherwise print one line per firing).
#[derive(Default)]
pub struct QuietLog {
    lines: Mutex<(u64, Vec<String>)>,
}

impl QuietLog {
    /// How many lines were logged, and the first ten.
    pub fn summary(&self) -> (u64, Vec<String>) {
        self.lines.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl hermes_host::gateway::GatewayLog for QuietLog {
    fn line(&self, line: &str) {
        if let Ok(mut lines) = self.lines.lock() {
            lines.0 += 1;
            if lines.1.len() < 10 {
                lines.1.push(line.to_string());
            }
        }
    }
}
