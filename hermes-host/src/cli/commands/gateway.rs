//! `hermes gateway hooks | emit | run | reload`.

mod consume;
mod reload;
mod run;
mod service;
mod state;

use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use hermes_host::gateway::{GatewayHooks, GatewayLog, LoadedHook, MemoryLog, SkippedHook};
use serde_json::json;

use crate::cli::ExitStatus;
use crate::cli::args::GatewayCommand;
use crate::cli::settings::Settings;

pub fn run(command: GatewayCommand, settings: &Settings) -> anyhow::Result<ExitStatus> {
    match command {
        GatewayCommand::Hooks { json } => hooks(settings, json),
        GatewayCommand::Emit {
            event,
            context,
            deadline,
        } => emit(settings, &event, context.as_deref(), deadline),
        GatewayCommand::Run(args) => run::run(*args, settings),
        GatewayCommand::Reload => reload::signal_running(settings),
        GatewayCommand::Install { run_args } => service::install(settings, &run_args),
        GatewayCommand::Uninstall => service::uninstall(),
        GatewayCommand::Start { run_args } => service::start(settings, &run_args),
        GatewayCommand::Stop { timeout } => {
            service::stop(settings, std::time::Duration::from_secs(timeout))
        }
        GatewayCommand::Restart { timeout, run_args } => {
            service::restart(settings, &run_args, std::time::Duration::from_secs(timeout))
        }
        GatewayCommand::Status { json } => service::status(settings, json),
        GatewayCommand::Supervise { run_args } => service::supervise(settings, &run_args),
        GatewayCommand::Consume(args) => consume::run(*args, settings),
    }
}

/// Prints `[hooks] ...` lines to stdout, flushed, as the reference's `print(flush=True)`.
fn stdout_log() -> Arc<dyn GatewayLog> {
    Arc::new(|line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    })
}

/// Writes `text` to stdout; a closed stdout (`hermes gateway hooks | head`) is not an error.
fn print(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn emit(
    settings: &Settings,
    event: &str,
    context: Option<&str>,
    deadline: f64,
) -> anyhow::Result<ExitStatus> {
    let context: serde_json::Value = match context {
        None => json!({}),
        Some(text) => serde_json::from_str(text)
            .with_context(|| format!("--context is not valid JSON: {text}"))?,
    };
    if !(context.is_object() || context.is_null()) {
        bail!(
            "--context must be a JSON object, such as '{{\"platform\": \"cli\", \"user_id\": \"me\"}}'"
        );
    }
    if !deadline.is_finite() || deadline < 0.0 {
        bail!("--deadline must be a number of seconds, 0 or more");
    }
    // Through the facade, so plugins' native gateway callbacks receive the event too.
    let loaded = crate::cli::load::load_gateway(settings, stdout_log())?;
    let Some(hooks) = loaded.gateway() else {
        print(&format!("No gateway hook listens to '{event}'.\n"));
        return Ok(ExitStatus::Success);
    };
    let targets: Vec<&str> = hooks
        .resolve(event)
        .iter()
        .map(|h| h.name.as_str())
        .collect();
    if targets.is_empty() {
        print(&format!("No gateway hook listens to '{event}'.\n"));
        return Ok(ExitStatus::Success);
    }
    print(&format!("Emitting '{event}' to: {}\n", targets.join(", ")));
    hooks.emit(event, context);
    let report = hooks.shutdown(Duration::from_secs_f64(deadline));
    let stats = hooks.stats();
    let delivered: u64 = stats.hooks.iter().map(|h| h.delivered).sum();
    let failed: u64 = stats.hooks.iter().map(|h| h.failed).sum();
    let undelivered = report.undelivered_total();
    print(&format!(
        "Delivered: {delivered}, failed: {failed}, not delivered: {undelivered}\n"
    ));
    Ok(if failed == 0 && undelivered == 0 {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}

fn hooks(settings: &Settings, as_json: bool) -> anyhow::Result<ExitStatus> {
    // The listing says everything the `[hooks]` lines would, so they are kept, not printed.
    let hooks = GatewayHooks::discover(&settings.home, Arc::new(MemoryLog::default()));
    let text = if as_json {
        let out = json!({
            "hooks_dir": hooks.hooks_dir(),
            "loaded": hooks.loaded().iter().map(loaded_json).collect::<Vec<_>>(),
            "skipped": hooks.skipped().iter().map(skipped_json).collect::<Vec<_>>(),
        });
        format!("{}\n", serde_json::to_string_pretty(&out)?)
    } else {
        hooks_text(&hooks)
    };
    print(&text);
    hooks.shutdown(Duration::from_secs(2));
    Ok(ExitStatus::Success)
}

fn hooks_text(hooks: &GatewayHooks) -> String {
    let dir = hooks.hooks_dir().display();
    if !hooks.hooks_dir().is_dir() {
        return format!(
            "No gateway hooks: {dir} does not exist.\nCreate {dir}/<name>/ with a HOOK.yaml and a handler (handler.py, an executable `handler`, or a native library).\n"
        );
    }
    if hooks.loaded().is_empty() && hooks.skipped().is_empty() {
        return format!("No gateway hooks in {dir}.\n");
    }
    let mut out = format!("Gateway hooks in {dir}:\n\n");
    if hooks.loaded().is_empty() {
        out.push_str("  (none loaded)\n");
    }
    for hook in hooks.loaded() {
        let _ = writeln!(
            out,
            "  {}  [{}]  events: {}",
            hook.name,
            hook.kind.as_str(),
            hook.events.join(", ")
        );
        if !hook.description.is_empty() {
            let _ = writeln!(out, "      {}", hook.description);
        }
        let _ = writeln!(out, "      handler: {}", hook.handler.display());
        for warning in &hook.warnings {
            let _ = writeln!(out, "      warning: {warning}");
        }
    }
    if !hooks.skipped().is_empty() {
        out.push_str("\nNot loaded:\n");
        for skip in hooks.skipped() {
            let dir_name = skip
                .path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let shown = match &skip.name {
                Some(name) if *name != dir_name => format!("{dir_name} ({name})"),
                _ => dir_name,
            };
            let _ = writeln!(out, "  {shown}: {}", skip.reason);
        }
    }
    out
}

fn loaded_json(hook: &LoadedHook) -> serde_json::Value {
    json!({
        "name": hook.name,
        "description": hook.description,
        "events": hook.events,
        "path": hook.path,
        "kind": hook.kind.as_str(),
        "handler": hook.handler,
        "timeout_secs": hook.timeout.as_secs_f64(),
        "warnings": hook.warnings,
    })
}

fn skipped_json(skip: &SkippedHook) -> serde_json::Value {
    json!({
        "path": skip.path,
        "name": skip.name,
        "reason": skip.reason,
        "message": skip.line,
    })
}
