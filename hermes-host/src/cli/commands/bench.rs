//! `hermes bench`: resolves the command line into a plan, loads the hooks the way an agent
//! run does (writing nothing), runs the measurement, prints it, and applies the gates.

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use hermes_host::{ConsentPolicy, Hooks, LoadOptions};
use regex::Regex;
use serde_json::{Value, json};

use crate::app::bench::gates::{self, Stat};
use crate::app::bench::measure::Budget;
use crate::app::bench::report::{self, Machine};
use crate::app::bench::{self, Plan, QuietLog, Replay, System, baseline, html};
use crate::cli::ExitStatus;
use crate::cli::args::BenchArgs;
use crate::cli::settings::Settings;

/// Set by SIGINT; every measurement loop checks it.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// A usage or configuration error: printed as `hermes bench: ...`, exit 2.
fn usage(message: impl std::fmt::Display) -> anyhow::Result<ExitStatus> {
    eprintln!("hermes bench: {message}");
    Ok(ExitStatus::Error)
}

/// Runs `hermes bench`.
pub fn run(args: BenchArgs, settings: &Settings) -> anyhow::Result<ExitStatus> {
    let mut systems = Vec::new();
    for s in &args.system {
        systems.push(match s.as_str() {
            "native" => System::Native,
            "shell" => System::Shell,
            "python" => System::Python,
            "gateway" => System::Gateway,
            other => {
                return usage(format!(
                    "unknown system '{other}' (valid: native, python, shell, gateway)"
                ));
            }
        });
    }
    let hook = match args.hook.as_deref().map(Regex::new).transpose() {
        Ok(hook) => hook,
        Err(e) => return usage(format!("--hook is not a valid regular expression: {e}")),
    };
    let duration = match gates::parse_duration(&args.duration) {
        Ok(d) => d,
        Err(e) => return usage(format!("--duration: {e}")),
    };
    let stat = match Stat::parse(&args.budget_stat) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let payload_override = match &args.payload_file {
        None => serde_json::Map::new(),
        Some(file) => {
            let text = match std::fs::read_to_string(file) {
                Ok(text) => text,
                Err(e) => return usage(format!("cannot read {}: {e}", file.display())),
            };
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(map)) => map,
                _ => return usage(format!("{} must hold a JSON object", file.display())),
            }
        }
    };
    let replay = match &args.replay {
        None => None,
        Some(file) => {
            let parsed = std::fs::read_to_string(file)
                .map_err(|e| e.to_string())
                .and_then(|text| Replay::parse(&text));
            match parsed {
                Ok(replay) => Some(replay),
                Err(e) => return usage(format!("--replay {}: {e}", file.display())),
            }
        }
    };
    if let Some(name) = args.save_baseline.iter().chain(&args.baseline).next() {
        if let Err(e) = baseline::check_name(name) {
            return usage(e);
        }
    }
    let baseline_dir = args
        .baseline_dir
        .clone()
        .unwrap_or_else(|| settings.home.root().join("bench"));
    let old = match &args.baseline {
        None => None,
        Some(name) => match baseline::load(&baseline_dir, name) {
            Ok(b) => Some(b),
            Err(e) => return usage(e),
        },
    };
    let plan = Plan {
        events: args.events.clone(),
        systems,
        hook,
        payload_override,
        for_tool: args.for_tool.clone(),
        replay,
        budget: Budget {
            warmup: args.warmup,
            iterations: args.iterations,
            duration,
            concurrency: args.concurrency.max(1),
        },
    };

    // Load as an agent run does, but never write: no recorded approvals.
    let log = Arc::new(QuietLog::default());
    let wants_gateway = plan.systems.is_empty() || plan.systems.contains(&System::Gateway);
    let options = LoadOptions {
        safe_mode: settings.discover.safe_mode,
        project_plugins: settings.discover.project_dir.clone(),
        consent: if settings.accept_hooks {
            ConsentPolicy::AcceptForThisRun
        } else {
            ConsentPolicy::ReadOnly
        },
        gateway_log: wants_gateway
            .then(|| log.clone() as Arc<dyn hermes_host::gateway::GatewayLog>),
        ..LoadOptions::default()
    };
    let hooks = match Hooks::load(&settings.home, &options) {
        Ok(hooks) => hooks,
        Err(e) => return usage(e),
    };
    let mut budgets = Vec::new();
    match config_budgets(hooks.config(), &settings.home.config_path()) {
        Ok(found) => budgets.extend(found),
        Err(e) => return usage(e),
    }
    for b in &args.budget {
        match gates::parse_budget(b) {
            Ok(budget) => budgets.push(budget),
            Err(e) => return usage(e),
        }
    }
    let mut notes: Vec<String> = skipped_shell_hooks(&hooks);
    let (mut registry, gateway, _config, _report) = hooks.into_parts();
    let failures = bench::counting(&mut registry);
    let events = match bench::select_events(&registry, gateway.as_ref(), &plan) {
        Ok(events) => events,
        Err(e) => return usage(e),
    };
    for (event, _) in &budgets {
        if !events.contains(event) {
            notes.push(format!(
                "budget for {event}: not checked, the event was not measured"
            ));
        }
    }
    let machine = Machine::now();
    if let Some(warning) = machine.load_warning() {
        eprintln!("{warning}");
    }
    if events.is_empty() {
        notes.push(
            "no hooks to measure: install a plugin, configure a shell hook, or add a gateway hook"
                .into(),
        );
    }

    // SAFETY: the handler only stores to an atomic.
    unsafe { libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t) };
    let bar = (!args.json && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(events.len() as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let progress = |event: &str| {
        if let Some(bar) = &bar {
            bar.set_message(event.to_string());
            bar.inc(1);
        }
    };
    let mut results = bench::run(
        &registry,
        gateway.as_ref(),
        &failures,
        &events,
        &plan,
        &STOP,
        &progress,
    );
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    if let Some(gateway) = &gateway {
        gateway.shutdown(Duration::from_secs(5));
        let (lines, first) = log.summary();
        let errors: Vec<&String> = first.iter().filter(|l| l.contains("Error")).collect();
        if let Some(line) = errors.first() {
            notes.push(format!(
                "the gateway log had {lines} line(s); the first error: {line}"
            ));
        }
    }
    notes.append(&mut results.notes);
    results.notes = notes;

    let mut failed_gates = Vec::new();
    let mut extra = serde_json::Map::new();
    let mut comparison_text = String::new();
    if let Some(old) = &old {
        let (comparisons, notes) = gates::compare(&results, old);
        results.notes.extend(notes);
        comparison_text = gates::comparison_text(&comparisons);
        extra.insert("comparisons".into(), gates::comparisons_json(&comparisons));
        if let Some(pct) = args.fail_on_regression {
            failed_gates.extend(gates::regressions(&comparisons, pct));
        }
    }
    failed_gates.extend(gates::budget_failures(&results, &budgets, stat));
    extra.insert("gate_failures".into(), json!(failed_gates));

    if args.json {
        let doc = report::document(&results, &machine, false, Value::Object(extra.clone()));
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{}", report::table(&results, &machine));
        print!("{comparison_text}");
        for failure in &failed_gates {
            println!("{failure}");
        }
    }
    if let Some(file) = &args.html {
        std::fs::write(file, html::page(&results, &machine))
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", file.display()))?;
    }
    if let Some(name) = &args.save_baseline {
        if results.interrupted {
            eprintln!("hermes bench: interrupted, so baseline '{name}' was not saved");
        } else {
            let doc = report::document(&results, &machine, true, Value::Object(extra));
            match baseline::save(&baseline_dir, name, &doc) {
                Ok(path) => eprintln!("saved baseline '{name}' to {}", path.display()),
                Err(e) => return usage(e),
            }
        }
    }
    if results.interrupted {
        return Ok(ExitStatus::Interrupted);
    }
    Ok(if failed_gates.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

/// `bench.budgets:` of `config.yaml`: a mapping of event to duration text.
fn config_budgets(
    config: &hermes_host::config::Config,
    path: &std::path::Path,
) -> Result<Vec<(String, Duration)>, String> {
    let Some(budgets) = config.get("bench").and_then(|b| b.get("budgets")) else {
        return Ok(Vec::new());
    };
    let Some(map) = budgets.as_mapping() else {
        return Err(format!(
            "bench.budgets in {} must map events to durations, such as `pre_tool_call: 40ms`",
            path.display()
        ));
    };
    let mut out = Vec::new();
    for (event, duration) in map {
        let (Some(event), Some(text)) = (event.as_str(), duration.as_str()) else {
            return Err(format!(
                "bench.budgets in {} must map events to durations, such as `pre_tool_call: 40ms`",
                path.display()
            ));
        };
        let duration = gates::parse_duration(text)
            .map_err(|e| format!("bench.budgets.{event} in {}: {e}", path.display()))?;
        out.push((event.to_string(), duration));
    }
    Ok(out)
}

/// One note per shell hook that consent skipped, naming the way to approve it.
fn skipped_shell_hooks(hooks: &Hooks) -> Vec<String> {
    let Ok(pattern) = Regex::new(r"^shell hook for (\S+) \((.*)\) not allowlisted") else {
        return Vec::new();
    };
    hooks
        .report()
        .shell
        .warnings
        .iter()
        .filter_map(|w| {
            let c = pattern.captures(w)?;
            Some(format!(
                "shell hook {} for {} is not allowlisted, so it was not run; approve it with `hermes hooks allow '{}'`, or bench it once with --accept-hooks (records nothing)",
                &c[2], &c[1], &c[2]
            ))
        })
        .collect()
}
