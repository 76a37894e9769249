//! `hermes hooks list | test | revoke | doctor | allow | fire | schema`: shell hooks.
//!
//! Texts and exit codes follow the reference's `hermes hooks` (every subcommand exits 0,
//! even when it reports problems), except that messages name the real config path instead
//! of `~/.hermes/config.yaml`, `allow` exits 1 when it cannot approve, and every subcommand
//! takes `--json`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use hermes_host::config::Config;
use hermes_host::payload::OwnedPayload;
use hermes_host::pyfmt::{JsonStyle, dumps, float_repr, parse_isoformat_utc, repr_str};
use hermes_host::registry::FiringRecord;
use hermes_host::run_control::{self, Permission, Stop};
use hermes_host::shell::consent::{Allowlist, Approval};
use hermes_host::shell::spawn::RunResult;
use hermes_host::shell::{self, Evaluation, ShellHookSpec, config, script};
use hermes_host::trust::Policy;
use serde_json::{Map, Value, json};

use crate::app::agent::trace::describe;

use crate::cli::ExitStatus;
use crate::cli::args::HooksCommand;
use crate::cli::inputs::payload_text;
use crate::cli::load::load_hooks;
use crate::cli::settings::Settings;

/// `hermes hooks schema <event> [--answer]`: the JSON Schema of the event's payload, or of
/// its answer, exactly as committed under `schema/shell/`.
fn schema(event: &str, answer: bool) -> anyhow::Result<ExitStatus> {
    let schema = if answer {
        hermes_host::schema::answer_schema(event)
    } else {
        hermes_host::schema::payload_schema(event)
    }?;
    println!("{}", serde_json::to_string_pretty(&schema)?);
    Ok(ExitStatus::Success)
}

pub fn run(command: Option<HooksCommand>, settings: &Settings) -> anyhow::Result<ExitStatus> {
    let Some(command) = command else {
        println!("Usage: hermes hooks {{list|test|revoke|doctor}}");
        println!("Run 'hermes hooks --help' for details.");
        return Ok(ExitStatus::Success);
    };
    match command {
        HooksCommand::List { json, cwd } => list(settings, json, cwd.as_deref()),
        HooksCommand::Import { source, file, yes } => {
            super::hooks_import::import(settings, &source, file.as_deref(), yes)
        }
        HooksCommand::Test {
            event,
            for_tool,
            payload_file,
            json,
            cwd,
        } => test(
            settings,
            &event,
            for_tool.as_deref(),
            payload_file.as_deref(),
            json,
            cwd.as_deref(),
        ),
        HooksCommand::Revoke { command, json, cwd } => {
            revoke(settings, &command, json, cwd.as_deref())
        }
        HooksCommand::Schema { event, answer } => schema(&event, answer),
        HooksCommand::Doctor { json, cwd } => doctor(settings, json, cwd.as_deref()),
        HooksCommand::Allow {
            command,
            event,
            json,
            cwd,
        } => allow(settings, &command, event.as_deref(), json, cwd.as_deref()),
        HooksCommand::Replay {
            traces,
            json,
            expect,
            write_expect,
            no_side_effects,
            cwd,
        } => super::replay::replay(
            settings,
            &super::replay::Request {
                traces: &traces,
                as_json: json,
                expect: expect.as_deref(),
                write_expect: write_expect.as_deref(),
                no_side_effects,
                cwd: cwd.as_deref(),
            },
        ),
        HooksCommand::ShadowReport { since, json } => {
            super::replay::shadow_report(settings, since.as_deref(), json)
        }
        HooksCommand::Fire {
            event,
            payload,
            payload_file,
            json,
            cwd,
        } => {
            let text = payload_text(payload, payload_file)?;
            fire(settings, &event, &text, json, cwd.as_deref())
        }
    }
}

fn load_config(settings: &Settings) -> Config {
    let (config, problem) = settings.home.load_config();
    if let Some(problem) = problem {
        tracing::warn!("{problem}");
    }
    config
}

/// The shell hooks of config.yaml, for an agent working in `work_dir` (`--cwd`; `None`:
/// here): a `format: claude` command has `$CLAUDE_PROJECT_DIR` filled in with it, as
/// `hermes run --cwd` fills it in, so that what `allow` records is what that run looks up.
fn specs(
    settings: &Settings,
    work_dir: Option<&std::path::Path>,
) -> (Vec<ShellHookSpec>, Vec<String>) {
    let parsed = config::parse(&load_config(settings).hooks);
    (with_work_dir(parsed.specs, work_dir), parsed.warnings)
}

/// `specs` for an agent working in `work_dir` (`None`: here).
fn with_work_dir(mut specs: Vec<ShellHookSpec>, work_dir: Option<&Path>) -> Vec<ShellHookSpec> {
    if let Some(dir) = work_dir {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        for spec in &mut specs {
            spec.set_work_dir(Some(dir.clone()));
        }
    }
    specs
}

fn print_json(value: &Value) -> anyhow::Result<ExitStatus> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(ExitStatus::Success)
}

/// The reference's `_truncate`: longer than `n` characters → the first n−3 plus `...`.
fn truncate(text: &str, n: usize) -> String {
    if text.chars().count() <= n {
        text.to_string()
    } else {
        format!("{}...", text.chars().take(n - 3).collect::<String>())
    }
}

/// `(drift, mtime_at, mtime_now)`: true when the script is newer than at approval, false when
/// unchanged, `None` when either time is unknown or the script is older.
fn mtime_drift(
    spec: &ShellHookSpec,
    approval: &Approval,
) -> (Option<bool>, Option<String>, Option<String>) {
    let now = spec
        .script_file()
        .as_deref()
        .and_then(script::mtime_iso_file);
    let at = approval.script_mtime_at_approval.clone();
    let (Some(now_s), Some(at_s)) = (&now, &at) else {
        return (None, at, now);
    };
    let drift = match (parse_isoformat_utc(now_s), parse_isoformat_utc(at_s)) {
        (Some(n), Some(a)) if n > a => Some(true),
        (Some(n), Some(a)) if n == a => Some(false),
        (Some(_), Some(_)) => None,
        _ if now_s > at_s => Some(true),
        _ if now_s == at_s => Some(false),
        _ => None,
    };
    (drift, at, now)
}

/// Whether an approval's content pin no longer matches the script.
fn content_changed(spec: &ShellHookSpec, approval: &Approval) -> bool {
    !approval.content_matches(spec.script_sha256().as_deref())
}

fn list(
    settings: &Settings,
    as_json: bool,
    work_dir: Option<&std::path::Path>,
) -> anyhow::Result<ExitStatus> {
    let (specs, warnings) = specs(settings, work_dir);
    let config_path = settings.home.config_path();
    let allowlist = Allowlist::new(&settings.home);
    let approvals = allowlist.approvals();
    let entry_for = |spec: &ShellHookSpec| {
        approvals
            .iter()
            .find(|a| a.event == spec.event && a.command == spec.command)
    };
    if as_json {
        let hooks: Vec<Value> = specs
            .iter()
            .map(|spec| {
                let entry = entry_for(spec);
                let (drift, _, mtime_now) = entry.map(|e| mtime_drift(spec, e)).unwrap_or((None, None, None));
                json!({
                    "event": spec.event,
                    "command": spec.command,
                    "type": if spec.http.is_some() { "http" } else { "command" },
                    "format": if spec.format == shell::config::Format::Claude { "claude" } else { "hermes" },
                    "shell": through_shell(spec),
                    "url": spec.http.as_ref().map(|h| h.url.as_str()),
                    "headers": spec.http.as_ref().map(|h| h.headers.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>()),
                    "matcher": spec.matcher.as_ref().map(|m| m.as_str()),
                    "timeout": spec.timeout,
                    "fail_closed": spec.fail_closed,
                    "async": spec.background,
                    "priority": spec.priority,
                    "allowlisted": entry.is_some(),
                    "approved_at": entry.and_then(|e| e.approved_at.clone()),
                    "script_mtime_at_approval": entry.and_then(|e| e.script_mtime_at_approval.clone()),
                    "script_mtime_now": mtime_now,
                    "modified_since_approval": drift,
                    "script_sha256_at_approval": entry.and_then(|e| e.script_sha256.clone()).flatten(),
                    "content_changed": entry.is_some_and(|e| content_changed(spec, e)),
                })
            })
            .collect();
        return print_json(
            &json!({ "config": config_path, "allowlist": allowlist.path(), "hooks": hooks, "warnings": warnings }),
        );
    }
    if specs.is_empty() {
        println!("No shell hooks configured in {}.", config_path.display());
        println!("See `hermes hooks --help` or");
        println!("    website/docs/user-guide/features/hooks.md");
        println!("for the config schema and worked examples.");
        return Ok(ExitStatus::Success);
    }
    println!("Configured shell hooks ({} total):\n", specs.len());
    let mut events: Vec<&str> = specs.iter().map(|s| s.event.as_str()).collect();
    events.sort_unstable();
    events.dedup();
    for event in events {
        println!("  [{event}]");
        for spec in specs.iter().filter(|s| s.event == event) {
            let entry = entry_for(spec);
            let status = if entry.is_some() {
                "✓ allowed"
            } else {
                "✗ not allowlisted"
            };
            let matcher = spec
                .matcher
                .as_ref()
                .map(|m| format!(" matcher={}", repr_str(m.as_str())))
                .unwrap_or_default();
            let kind = if spec.http.is_some() { "POST " } else { "" };
            let format = match (spec.format, through_shell(spec)) {
                (shell::config::Format::Claude, Some(sh)) => {
                    format!(", format=claude, through {sh}")
                }
                (shell::config::Format::Claude, None) => ", format=claude".to_string(),
                _ => String::new(),
            };
            let format = if spec.background {
                format!("{format}, async")
            } else {
                format
            };
            println!(
                "    - {kind}{}{matcher} (timeout={}s{format}, {status})",
                one_line(&spec.command),
                spec.timeout
            );
            let Some(entry) = entry else { continue };
            if let Some(approved_at) = entry.approved_at.as_deref().filter(|a| !a.is_empty()) {
                println!("      approved_at: {approved_at}");
                if let (Some(true), Some(at), Some(now)) = mtime_drift(spec, entry) {
                    println!(
                        "      ⚠ script modified since approval (was {at}, now {now}) — run `hermes hooks doctor` to re-validate"
                    );
                }
            }
            if content_changed(spec, entry) {
                println!(
                    "      ✗ script content changed since approval — it will not run until re-approved: {}",
                    shell::allow_command(spec)
                );
            }
        }
        println!();
    }
    Ok(ExitStatus::Success)
}

/// The shell a `format: claude` command runs through: every one, as written.
fn through_shell(spec: &shell::ShellHookSpec) -> Option<&'static str> {
    let claude = spec.format == shell::config::Format::Claude && spec.http.is_none();
    claude.then(shell::claude::shell)
}

/// `text` on one line: line breaks and other control characters escaped (`\n`), so that a
/// multi-line command stays one entry of the listing.
fn one_line(text: &str) -> String {
    let mut line = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    line
}

fn unknown_event(event: &str) {
    println!("Unknown event: {}", repr_str(event));
    println!(
        "Valid events: {}",
        hermes_hooks_abi::hooks::names_sorted().join(", ")
    );
}

/// Python's `str(exc)` for an `OSError` while reading `path`.
fn os_error_text(e: &std::io::Error, path: &Path) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let text = e.to_string();
            let strerror = text.split(" (os error").next().unwrap_or(&text);
            format!(
                "[Errno {code}] {strerror}: {}",
                repr_str(&path.display().to_string())
            )
        }
        None => e.to_string(),
    }
}

fn decision_json(evaluation: &Evaluation) -> Option<Value> {
    evaluation.decision.as_ref().map(|d| d.to_wire())
}

/// What a Claude-format answer asks of the agent beyond its decision, in words: one line
/// for the approval step, one for a stop.
fn run_control_words(permission: Option<&Permission>, stop: Option<&Stop>) -> Vec<String> {
    let mut words = Vec::new();
    match permission {
        Some(Permission::Ask(reason)) => words.push(format!(
            "approval: ask ({reason}); the call goes through the host's approval step"
        )),
        Some(Permission::Allow) => words.push(
            "approval: allow; the host's own approval prompt is skipped for this call".into(),
        ),
        None => {}
    }
    if let Some(stop) = stop {
        words.push(format!("stop: ends the {} ({})", stop.reach(), stop.reason));
    }
    words
}

/// The same as JSON: `{"permission": ..., "reason": ...}` and `{"stop": ..., "reason": ...}`.
fn run_control_json(permission: Option<&Permission>, stop: Option<&Stop>) -> (Value, Value) {
    let permission = match permission {
        Some(Permission::Ask(reason)) => json!({ "decision": "ask", "reason": reason }),
        Some(Permission::Allow) => json!({ "decision": "allow" }),
        None => Value::Null,
    };
    let stop = stop.map_or(
        Value::Null,
        |s| json!({ "ends": s.reach(), "reason": s.reason }),
    );
    (permission, stop)
}

fn run_json(run: &RunResult, evaluation: &Evaluation) -> Value {
    let (permission, stop) =
        run_control_json(evaluation.permission.as_ref(), evaluation.stop.as_ref());
    json!({
        "returncode": run.returncode,
        "stdout": run.stdout,
        "stderr": run.stderr,
        "timed_out": run.timed_out,
        "elapsed_seconds": run.elapsed_seconds(),
        "error": run.error,
        "stdout_dropped": run.stdout_dropped,
        "stderr_dropped": run.stderr_dropped,
        "http_status": run.http_status,
        "parsed": decision_json(evaluation),
        "permission": permission,
        "stop": stop,
        "feedback": evaluation.feedback,
        "continue": evaluation.continue_with,
        "warnings": evaluation.warnings,
    })
}

/// A `--payload-file` object as this event's keyword arguments. Either shape is accepted:
/// Hermes keys (the event's fields, and `extra`), or Claude Code's (`tool_input`,
/// `hook_event_name`, ...), which are mapped to Hermes names. A key of neither shape is an
/// error listing the known ones, so a typo is not silently ignored.
fn payload_keys(event: &str, custom: &Map<String, Value>) -> Result<Map<String, Value>, String> {
    let fields: Vec<&str> = hermes_hooks_abi::hooks::spec(event)
        .map(|s| s.fields.iter().map(|f| f.name).collect())
        .unwrap_or_default();
    let hermes_key = |k: &str| fields.contains(&k) || k == "extra";
    let claude_key = |k: &str| shell::claude::PAYLOAD_KEYS.contains(&k);
    let unknown: Vec<&str> = custom
        .keys()
        .map(String::as_str)
        .filter(|k| !hermes_key(k) && !claude_key(k))
        .collect();
    if !unknown.is_empty() {
        return Err(format!(
            "unknown top-level key(s) {}; {event} takes {} (Hermes) or {} (Claude Code)",
            unknown.join(", "),
            fields
                .iter()
                .chain(["extra"].iter())
                .copied()
                .collect::<Vec<_>>()
                .join(", "),
            shell::claude::PAYLOAD_KEYS.join(", ")
        ));
    }
    let claude_shaped = custom.keys().any(|k| claude_key(k) && !hermes_key(k));
    Ok(if claude_shaped {
        let mut kwargs = shell::claude::hermes_kwargs(custom);
        // Kept for Claude-format hooks, which get it as given (see `test`).
        if let Some(path) = custom.get("transcript_path").filter(|p| p.is_string()) {
            kwargs.insert("transcript_path".into(), path.clone());
        }
        kwargs
    } else {
        custom.clone()
    })
}

fn test(
    settings: &Settings,
    event: &str,
    for_tool: Option<&str>,
    payload_file: Option<&Path>,
    as_json: bool,
    work_dir: Option<&Path>,
) -> anyhow::Result<ExitStatus> {
    let fail = |error: String| -> anyhow::Result<ExitStatus> {
        if as_json {
            return print_json(&json!({ "event": event, "error": error }));
        }
        println!("{error}");
        Ok(ExitStatus::Success)
    };
    if hermes_hooks_abi::hooks::spec(event).is_none() {
        if as_json {
            return print_json(
                &json!({ "event": event, "error": "unknown event", "valid_events": hermes_hooks_abi::hooks::names_sorted() }),
            );
        }
        unknown_event(event);
        return Ok(ExitStatus::Success);
    }
    let mut payload: Map<String, Value> = hermes_host::payload::synthetic(event)
        .and_then(|v| v.as_object().cloned())
        .unwrap_or_else(|| {
            let mut m = Map::new();
            m.insert("session_id".into(), "test-session".into());
            m
        });
    let for_tool = for_tool.filter(|t| !t.is_empty());
    if let Some(tool) = for_tool {
        payload.insert("tool_name".into(), tool.into());
    }
    let mut notes = Vec::new();
    if let Some(file) = payload_file {
        let text = match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(e) => {
                return fail(format!(
                    "Error reading payload file: {}",
                    os_error_text(&e, file)
                ));
            }
        };
        match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(custom)) => match payload_keys(event, &custom) {
                Ok(custom) => payload.extend(custom),
                Err(error) => {
                    return fail(format!("Error in payload file {}: {error}", file.display()));
                }
            },
            Ok(_) => {
                let note = format!("Warning: {} is not a JSON object; ignoring", file.display());
                if !as_json {
                    println!("{note}");
                }
                notes.push(note);
            }
            Err(e) => return fail(format!("Error reading payload file: {e}")),
        }
    }
    let config = load_config(settings);
    let policy = Policy::from_config(&config);
    let specs: Vec<ShellHookSpec> = with_work_dir(config::parse(&config.hooks).specs, work_dir)
        .into_iter()
        .filter(|s| s.event == event)
        .filter(|s| for_tool.is_none_or(|tool| !s.is_tool_event() || s.matches_tool(Some(tool))))
        .collect();
    if specs.is_empty() {
        if as_json {
            return print_json(
                &json!({ "event": event, "for_tool": for_tool, "notes": notes, "hooks": [] }),
            );
        }
        println!("No shell hooks configured for event: {event}");
        if let Some(tool) = for_tool {
            println!("(with matcher filter --for-tool={tool})");
        }
        return Ok(ExitStatus::Success);
    }
    if !as_json {
        println!("Firing {} hook(s) for event '{event}':\n", specs.len());
    }
    let mut results = Vec::new();
    for spec in &specs {
        if !as_json {
            println!("  → {}", spec.command);
        }
        // A test run executes the script as the agent would, so it gets the same ownership
        // and permission check: a script anyone can write is not run here either.
        match shell::script_trust(spec, &policy) {
            Err(refusal) => {
                if as_json {
                    results.push(json!({ "command": spec.command, "error": refusal }));
                } else {
                    println!("    ✗ {refusal}\n");
                }
                continue;
            }
            Ok(warnings) => {
                for warning in warnings {
                    if !as_json {
                        println!("    ⚠ {warning}");
                    }
                    notes.push(warning);
                }
            }
        }
        // A supplied transcript_path is Claude's key: Hermes-format hooks never see it.
        let mut kwargs = payload.clone();
        if spec.format != shell::config::Format::Claude {
            kwargs.remove("transcript_path");
        }
        let (run, evaluation) = shell::run_once(spec, &kwargs);
        if as_json {
            let mut r = run_json(&run, &evaluation);
            r["command"] = json!(spec.command);
            results.push(r);
        } else {
            print_run_result(&run, &evaluation);
            println!();
        }
    }
    if as_json {
        return print_json(
            &json!({ "event": event, "for_tool": for_tool, "notes": notes, "hooks": results }),
        );
    }
    Ok(ExitStatus::Success)
}

fn print_parsed(evaluation: &Evaluation) {
    match decision_json(evaluation) {
        Some(wire) => println!(
            "      parsed (Hermes wire shape): {}",
            dumps(
                &wire,
                JsonStyle {
                    ensure_ascii: true,
                    ..Default::default()
                }
            )
        ),
        None => println!("      parsed: <none — hook contributed nothing to the dispatcher>"),
    }
    for line in run_control_words(evaluation.permission.as_ref(), evaluation.stop.as_ref()) {
        println!("      {line}");
    }
    for text in &evaluation.feedback {
        println!("      feedback for the model: {text}");
    }
    if let Some(reason) = &evaluation.continue_with {
        println!("      continue: the agent keeps working ({reason})");
    }
}

fn print_run_result(run: &RunResult, evaluation: &Evaluation) {
    if let Some(error) = &run.error {
        println!("      ✗ error: {error}");
        if evaluation.decision.is_some() {
            print_parsed(evaluation); // a fail_closed hook's block
        }
        return;
    }
    if run.timed_out {
        println!(
            "      ✗ timed out after {}s",
            float_repr(run.elapsed_seconds())
        );
        if evaluation.decision.is_some() {
            print_parsed(evaluation);
        }
        return;
    }
    let rc = run
        .returncode
        .map_or("None".to_string(), |rc| rc.to_string());
    match run.http_status {
        Some(status) => println!(
            "      HTTP {status}  elapsed={}s",
            float_repr(run.elapsed_seconds())
        ),
        None => println!(
            "      exit={rc}  elapsed={}s",
            float_repr(run.elapsed_seconds())
        ),
    }
    let out = if run.http_status.is_some() {
        "body"
    } else {
        "stdout"
    };
    for (stream, text) in [(out, &run.stdout), ("stderr", &run.stderr)] {
        let text = text.trim();
        if !text.is_empty() {
            println!("      {stream}: {}", truncate(text, 400));
        }
    }
    print_parsed(evaluation);
}

fn revoke(
    settings: &Settings,
    command: &str,
    as_json: bool,
    work_dir: Option<&std::path::Path>,
) -> anyhow::Result<ExitStatus> {
    let allowlist = Allowlist::new(&settings.home);
    let mut removed = allowlist.revoke(command)?;
    // The approval of a `format: claude` command named as config.yaml writes it is under
    // the command as it runs (see `allow`).
    let (specs, _) = specs(settings, work_dir);
    if let Some(spec) = specs
        .iter()
        .find(|s| s.written == command && s.command != command)
    {
        removed += allowlist.revoke(&spec.command)?;
    }
    if as_json {
        return print_json(&json!({ "command": command, "removed": removed }));
    }
    if removed == 0 {
        println!("No allowlist entry found for command: {command}");
        return Ok(ExitStatus::Success);
    }
    println!("Removed {removed} allowlist entry/entries for: {command}");
    println!(
        "Note: currently running CLI / gateway processes keep their already-registered callbacks until they restart."
    );
    Ok(ExitStatus::Success)
}

fn doctor(
    settings: &Settings,
    as_json: bool,
    work_dir: Option<&Path>,
) -> anyhow::Result<ExitStatus> {
    // A home another user can write is the first problem: every other command refuses it.
    if let Err(why) = settings.home.check_trusted() {
        if as_json {
            print_json(&json!({ "hooks": [], "problems": 1, "home_error": why }))?;
        } else {
            println!("{why}");
            println!("1 issue(s) found.  Fix the home first: hermes refuses to use it.");
        }
        return Ok(ExitStatus::Failure);
    }
    let (config, unreadable) = settings.home.load_config();
    // A config.yaml that cannot be read is the first problem, not "no hooks": its hooks
    // are off until it is fixed.
    if let Some(problem) = unreadable {
        if as_json {
            print_json(
                &json!({ "hooks": [], "problems": 1, "config_error": problem.to_string() }),
            )?;
        } else {
            println!("{problem}");
            println!("1 issue(s) found.  Fix config.yaml: none of its hooks run until then.");
        }
        return Ok(ExitStatus::Failure);
    }
    let config::ParsedHooks {
        specs,
        mut warnings,
    } = config::parse(&config.hooks);
    let specs = with_work_dir(specs, work_dir);
    // Every misspelt or mistyped key is a problem: a guard with `fail_close:` fails open.
    warnings.extend(config.unknown_keys().iter().cloned());
    if specs.is_empty() {
        if as_json {
            print_json(&json!({ "hooks": [], "problems": warnings.len(), "warnings": warnings }))?;
        } else if warnings.is_empty() {
            println!("No shell hooks configured — nothing to check.");
        } else {
            for warning in &warnings {
                println!("{warning}");
            }
            println!("{} issue(s) found.  Fix config.yaml.", warnings.len());
        }
        return Ok(if warnings.is_empty() {
            ExitStatus::Success
        } else {
            ExitStatus::Failure
        });
    }
    if !as_json {
        for warning in &warnings {
            println!("{warning}");
        }
        if !warnings.is_empty() {
            println!();
        }
    }
    if !as_json {
        println!("Checking {} configured shell hook(s)...\n", specs.len());
    }
    let allowlist = Allowlist::new(&settings.home);
    let policy = Policy::from_config(&config);
    let mut problems = warnings.len();
    let mut reports = Vec::new();
    for spec in &specs {
        if !as_json {
            println!("  [{}] {}", spec.event, spec.command);
        }
        let checks = doctor_one(spec, &allowlist, &policy);
        problems += checks.iter().filter(|c| c.problem).count();
        if as_json {
            let checks: Vec<Value> = checks
                .iter()
                .map(|c| json!({ "problem": c.problem, "line": c.line }))
                .collect();
            reports.push(json!({ "event": spec.event, "command": spec.command, "checks": checks }));
        } else {
            for check in &checks {
                println!("      {}", check.line);
            }
            println!();
        }
    }
    let status = if problems > 0 {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    };
    if as_json {
        print_json(&json!({ "hooks": reports, "problems": problems, "warnings": warnings }))?;
        return Ok(status);
    }
    if problems > 0 {
        println!("{problems} issue(s) found.  Fix before relying on these hooks.");
    } else {
        println!("All shell hooks look healthy.");
    }
    Ok(status)
}

struct Check {
    line: String,
    problem: bool,
}

fn ok(line: impl Into<String>) -> Check {
    Check {
        line: line.into(),
        problem: false,
    }
}

fn problem(line: impl Into<String>) -> Check {
    Check {
        line: line.into(),
        problem: true,
    }
}

fn doctor_one(spec: &ShellHookSpec, allowlist: &Allowlist, policy: &Policy) -> Vec<Check> {
    let mut checks = Vec::new();
    let executable = match &spec.http {
        Some(http) => {
            checks.push(ok(format!(
                "✓ HTTP hook: POSTs the payload to {} (headers: {})",
                http.url,
                if http.headers.is_empty() {
                    "none".to_string()
                } else {
                    http.headers
                        .iter()
                        .map(|(k, _)| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            )));
            for (header, var) in http.unlisted_vars() {
                checks.push(problem(format!(
                    "✗ header {header} names ${{{var}}}, which is not in allowed_env_vars, so it is sent empty"
                )));
            }
            true
        }
        None => {
            let executable = script::is_executable(&spec.command);
            checks.push(if executable {
                ok("✓ script exists and is executable")
            } else {
                problem("✗ script missing or not executable (chmod +x the file, or fix the path)")
            });
            // The file consent pins and a `format: claude` hook runs: a relative path is
            // the project's (where the hook runs), as in Claude Code. Hermes hooks keep the
            // reference's report, line for line.
            if let (shell::config::Format::Claude, Some(file)) = (spec.format, spec.script_file()) {
                let whose = if spec.work_dir.is_some() {
                    " (in the agent's directory)"
                } else {
                    ""
                };
                checks.push(ok(format!("  runs {}{whose}", file.display())));
            }
            executable
        }
    };
    let mut refused = false;
    // Silent when all is well, so the report stays the reference's line for line.
    if spec.http.is_none() {
        match shell::script_trust(spec, policy) {
            Ok(warnings) => checks.extend(warnings.iter().map(|w| problem(format!("⚠ {w}")))),
            Err(refusal) => {
                refused = true;
                checks.push(problem(format!("✗ {refusal}")));
            }
        }
    }
    let entry = allowlist.entry_for(&spec.event, &spec.command);
    match &entry {
        Some(e) => checks.push(ok(format!("✓ allowlisted (approved {})", e.approved_at.as_deref().unwrap_or("?")))),
        None => checks.push(problem(
            "✗ not allowlisted — hook will NOT fire at runtime (run with --accept-hooks once, or confirm at the TTY prompt)",
        )),
    }
    let mut changed = false;
    if let Some(e) = &entry {
        if e.script_mtime_at_approval
            .as_deref()
            .is_some_and(|m| !m.is_empty())
        {
            match mtime_drift(spec, e) {
                (Some(true), Some(at), Some(now)) => checks.push(problem(format!(
                    "⚠ script modified since approval (was {at}, now {now}) — review changes, then `hermes hooks revoke` + re-approve to refresh"
                ))),
                (Some(false), _, _) => checks.push(ok("✓ script unchanged since approval")),
                _ => {}
            }
        }
        if e.script_sha256.is_some() {
            changed = content_changed(spec, e);
            if changed {
                checks.push(problem(format!(
                    "✗ script content changed since approval — hook will NOT fire until re-approved (run `{}`)",
                    shell::allow_command(spec)
                )));
            } else if matches!(e.script_sha256, Some(Some(_))) {
                checks.push(ok("✓ script content matches the approved sha256"));
            }
        }
    }
    if entry.is_none() {
        checks.push(ok(
            "ℹ skipped JSON smoke test — not allowlisted yet. Approve the hook first (via TTY prompt or --accept-hooks), then re-run `hermes hooks doctor`.",
        ));
    } else if changed {
        checks.push(ok(
            "ℹ skipped JSON smoke test — script changed since approval. Re-approve it first, then re-run `hermes hooks doctor`.",
        ));
    } else if refused {
        checks.push(ok(
            "ℹ skipped JSON smoke test — the script fails the permission check. Fix its mode or owner first, then re-run `hermes hooks doctor`.",
        ));
    } else if executable {
        let kwargs =
            hermes_host::payload::synthetic(&spec.event).unwrap_or_else(|| json!({"extra": {}}));
        let kwargs = kwargs.as_object().cloned().unwrap_or_default();
        let (run, _) = shell::run_once(spec, &kwargs);
        let secs = float_repr(run.elapsed_seconds());
        if run.timed_out {
            checks.push(problem(format!(
                "✗ timed out after {secs}s on synthetic payload (timeout={}s)",
                spec.timeout
            )));
        } else if let Some(error) = &run.error {
            checks.push(problem(format!("✗ execution error: {error}")));
        } else {
            let rc = run
                .returncode
                .map_or("None".to_string(), |rc| rc.to_string());
            let stdout = run.stdout.trim();
            if stdout.is_empty() {
                checks.push(ok(format!(
                    "✓ ran clean with empty stdout (exit={rc}, {secs}s) — hook is observer-only"
                )));
            } else if serde_json::from_str::<Value>(stdout).is_ok() {
                checks.push(ok(format!(
                    "✓ produced valid JSON on synthetic payload (exit={rc}, {secs}s)"
                )));
            } else {
                checks.push(problem(format!(
                    "✗ stdout was not valid JSON (exit={rc}, {secs}s): {}",
                    truncate(stdout, 120)
                )));
            }
        }
        let per_tool_call = matches!(
            spec.event.as_str(),
            "pre_tool_call" | "post_tool_call" | "transform_tool_result"
        );
        if per_tool_call && !spec.persistent && !run.timed_out && run.error.is_none() {
            if let Some(interpreter) = interpreter(&spec.command) {
                checks.push(ok(format!(
                    "⚠ starts a new {interpreter} on every tool call (this firing took {secs}s); set `persistent: true` and answer one JSON line per firing (docs/hooks.md, Persistent hooks) to pay that once"
                )));
            }
        }
    }
    checks
}

/// `python3`, `node`, ...: the interpreter a command starts, by its first word or the
/// script's `#!` line, when it is one whose start-up dominates a small hook.
fn interpreter(command: &str) -> Option<String> {
    let argv = hermes_host::shell::spawn::argv(command).ok()?;
    let is_slow = |word: &str| {
        let name = word.rsplit('/').next().unwrap_or(word);
        (name.starts_with("python") || name == "node" || name.starts_with("ruby"))
            .then(|| name.to_string())
    };
    if let Some(name) = is_slow(&argv[0]) {
        return Some(name);
    }
    let first = std::fs::read(&argv[0]).ok()?;
    let line = String::from_utf8_lossy(&first[..first.len().min(200)]).into_owned();
    let shebang = line.lines().next()?.strip_prefix("#!")?.to_string();
    shebang.split_whitespace().find_map(is_slow)
}

fn allow(
    settings: &Settings,
    command: &str,
    event: Option<&str>,
    as_json: bool,
    work_dir: Option<&std::path::Path>,
) -> anyhow::Result<ExitStatus> {
    let allowlist = Allowlist::new(&settings.home);
    let config_path = settings.home.config_path();
    let (specs, _) = specs(settings, work_dir);
    let events: Vec<String> = match event {
        Some(event) => {
            if hermes_hooks_abi::hooks::spec(event).is_none() {
                if as_json {
                    print_json(
                        &json!({ "command": command, "error": "unknown event", "event": event, "valid_events": hermes_hooks_abi::hooks::names_sorted() }),
                    )?;
                } else {
                    unknown_event(event);
                }
                return Ok(ExitStatus::Failure);
            }
            vec![event.to_string()]
        }
        None => {
            let mut events: Vec<String> = Vec::new();
            for spec in specs
                .iter()
                .filter(|s| s.command == command || s.written == command)
            {
                if !events.contains(&spec.event) {
                    events.push(spec.event.clone());
                }
            }
            if events.is_empty() {
                let message = format!(
                    "No hook in {} uses the command: {command}\nCheck the spelling (it must match the config exactly), or pass --event <event> to approve it anyway.",
                    config_path.display()
                );
                if as_json {
                    print_json(&json!({ "command": command, "error": message }))?;
                } else {
                    println!("{message}");
                }
                return Ok(ExitStatus::Failure);
            }
            events
        }
    };
    // A `format: claude` command named as config.yaml writes it is approved as it runs,
    // with `$CLAUDE_PROJECT_DIR` filled in: that is what consent looks up.
    let spec = specs
        .iter()
        .find(|s| s.written == command || s.command == command);
    let command = spec.map_or(command, |s| s.command.as_str());
    let file = spec.map_or_else(
        || script::resolved_path(command),
        ShellHookSpec::script_file,
    );
    let current = file.as_deref().and_then(script::sha256_file);
    let mut approved = Vec::new();
    let mut already = Vec::new();
    for event in &events {
        let fresh = allowlist
            .entry_for(event, command)
            .is_some_and(|a| a.script_sha256.is_some() && a.content_matches(current.as_deref()));
        if fresh {
            already.push(event.clone());
        } else {
            allowlist.approve_file(event, command, file.as_deref())?;
            approved.push(event.clone());
        }
    }
    if as_json {
        return print_json(
            &json!({ "command": command, "approved": approved, "already_allowlisted": already, "script_sha256": current }),
        );
    }
    for event in &already {
        println!("[{event}] {command} is already allowlisted.");
    }
    if approved.is_empty() {
        println!("Nothing to do.");
    } else {
        println!("Approved {} entry/entries for: {command}", approved.len());
        for event in &approved {
            println!("  [{event}]");
        }
    }
    Ok(ExitStatus::Success)
}

fn fire(
    settings: &Settings,
    event: &str,
    payload_text: &str,
    as_json: bool,
    work_dir: Option<&Path>,
) -> anyhow::Result<ExitStatus> {
    let payload: Value = serde_json::from_str(payload_text)
        .context("the payload is not valid JSON; give a JSON object")?;
    if !payload.is_object() {
        anyhow::bail!("the payload must be a JSON object of the event's fields");
    }
    if hermes_hooks_abi::hooks::spec(event).is_none() {
        unknown_event(event);
        return Ok(ExitStatus::Failure);
    }
    let sink = Arc::new(Mutex::new(Vec::<FiringRecord>::new()));
    let hooks = load_hooks(settings, Some(sink.clone()), None, work_dir)?;
    let (registry, _, _, report) = hooks.into_parts();
    let report = report.shell;
    let owned = OwnedPayload::from_json(event, &payload);
    let outcome = registry.fire(event, &owned.fields());
    // What Claude-format hooks asked of the agent, taken as an agent would after firing.
    let key = |k: &str| payload[k].as_str().unwrap_or_default();
    let session = payload
        .as_object()
        .map(hermes_host::shell::claude::session_of)
        .unwrap_or_default();
    let permission = run_control::take_permission(session, key("tool_call_id"));
    let stop = run_control::take_stop(session);
    let feedback = run_control::take_feedback(session, key("tool_call_id"));
    let continue_with = run_control::take_continue(session);
    let records = sink.lock().map(|r| r.clone()).unwrap_or_default();
    let summary = describe(&outcome);
    if as_json {
        let calls: Vec<_> = records
            .iter()
            .map(|r| json!({ "system": r.system, "callback": r.callback, "decision": r.decision, "duration_us": r.duration.as_micros() as u64, "error": r.error }))
            .collect();
        let registered: Vec<_> = report
            .registered
            .iter()
            .map(|s| json!({ "event": s.event, "command": s.command }))
            .collect();
        let (permission, stop) = run_control_json(permission.as_ref(), stop.as_ref());
        return print_json(
            &json!({ "event": event, "registered": registered, "warnings": report.warnings, "callbacks": calls, "outcome": summary, "permission": permission, "stop": stop, "feedback": feedback, "continue": continue_with }),
        );
    }
    if records.is_empty() {
        println!("No callbacks fired for '{event}'.");
    } else {
        println!("Fired '{event}' at {} callback(s):", records.len());
        for r in &records {
            let decision = match &r.error {
                Some(e) => format!("raised: {e}"),
                None => r.decision.clone(),
            };
            println!(
                "  {}  {decision}  ({} ms)",
                r.callback,
                r.duration.as_millis()
            );
        }
    }
    println!("Outcome: {summary}");
    for line in run_control_words(permission.as_ref(), stop.as_ref()) {
        println!("  {line}");
    }
    for text in &feedback {
        println!("  feedback for the model: {text}");
    }
    for reason in &continue_with {
        println!("  continue: the agent keeps working ({reason})");
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_n_characters_including_the_ellipsis() {
        assert_eq!(truncate("abcdef", 6), "abcdef");
        assert_eq!(truncate("abcdefg", 6), "abc...");
        assert_eq!(truncate("ééééééé", 6), "ééé...");
    }

    #[test]
    fn every_tool_and_session_event_has_a_synthetic_payload() {
        for event in [
            "pre_tool_call",
            "post_tool_call",
            "pre_llm_call",
            "on_session_end",
            "subagent_stop",
        ] {
            assert!(hermes_host::payload::synthetic(event).is_some(), "{event}");
        }
        assert!(hermes_host::payload::synthetic("transform_llm_output").is_none());
    }
}
