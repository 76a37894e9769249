//! One function per parser of outside input, each taking the raw bytes a fuzzer (or a
//! corpus file) gives it and driving the host's own code the way the host drives it: the
//! fuzz binaries in `fuzz/` call these under libFuzzer, and `tests/corpus.rs` replays every
//! committed seed and regression through them in `cargo test`, so a fixed crash stays fixed
//! on a machine without the fuzzer.
//!
//! A target must return for every input. A panic, a hang or unbounded memory is a bug in
//! the host, never in the input.
//!
//! ```
//! // Any bytes at all: a target answers, it never panics.
//! hermes_fuzz_targets::config_hooks(b"hooks:\n  pre_tool_call:\n    - command: [\n");
//! hermes_fuzz_targets::isolation_frames(&[255, 255, 255, 255, 1]);
//! ```

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use hermes_host::lines::{LineSplitter, Piece};
use hermes_host::plugins::isolation::wire::{self, Kind};
use hermes_host::shell::config::{Format, ShellHookSpec};
use hermes_host::shell::spawn::RunResult;
use hermes_host::shell::{self, claude, claude_import, persistent};
use hermes_host::trust::Policy;
use hermes_host::{config::Config, home::Home};

/// The gateway's client protocol lives in the `hermes` binary (it is the server's, not the
/// hook library's); its module depends on serde alone, so it is compiled in here as is.
#[path = "../../../hermes-host/src/app/server/wire.rs"]
#[allow(dead_code, missing_docs)]
mod gateway_wire;

/// A fuzz target: any bytes in, nothing out.
pub type Target = fn(&[u8]);

/// Every target, by the name its fuzz binary, seed corpus and regressions directory have.
pub const TARGETS: &[(&str, Target)] = &[
    ("config_hooks", config_hooks),
    ("plugin_yaml", plugin_yaml),
    ("hook_yaml", hook_yaml),
    ("shell_answer", shell_answer),
    ("gateway_lines", gateway_lines),
    ("isolation_frames", isolation_frames),
    ("persistent_lines", persistent_lines),
    ("allowlist", allowlist),
    ("claude_import", claude_import),
];

/// Events a shell answer is read for: the blocking one, the context ones, an observer.
const EVENTS: &[&str] = &[
    "pre_tool_call",
    "post_tool_call",
    "pre_llm_call",
    "on_session_start",
    "transform_tool_result",
    "on_session_end",
];

/// `config.yaml` as the host reads it at start: the document, the `hooks:` block into
/// shell hook specs (matchers compiled, URLs and headers checked), the permission policy,
/// the plugin lists and settings, and every spec's matcher and command line.
pub fn config_hooks(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(config) = Config::parse(text) else {
        return;
    };
    let parsed = shell::config::parse(&config.hooks);
    let _ = Policy::from_config(&config);
    let _ = config.hooks.auto_accept;
    let _ = config.plugins_disabled();
    for name in config.plugins_enabled().unwrap_or_default() {
        let _ = config.plugins.settings_for(&name);
    }
    for spec in &parsed.specs {
        let _ = spec.label();
        for tool in [None, Some("terminal"), Some("Bash"), Some("mcp__x__y")] {
            let _ = spec.matches_tool(tool);
        }
        if spec.http.is_none() {
            let _ = shell::spawn::argv(&spec.command);
        }
        let _ = shell::allow_command(spec);
    }
}

/// `plugin.yaml`, for a plugin directory that does not exist (the parser does not read
/// the disk; confinement is checked at discovery).
pub fn plugin_yaml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = hermes_host::plugins::Manifest::parse(text, Path::new("/nonexistent/plugins/fuzzed"));
}

/// `HOOK.yaml` beside a `handler.py`, through the gateway's directory scan with the strict
/// permission policy (which reads the real directory the bytes were written to).
pub fn hook_yaml(data: &[u8]) {
    // The directory and handler once; only HOOK.yaml changes from input to input.
    static HOOKS: OnceLock<Option<PathBuf>> = OnceLock::new();
    let hooks = HOOKS.get_or_init(|| {
        let hooks = scratch("hooks");
        let dir = hooks.join("fuzzed");
        std::fs::create_dir_all(&dir).ok()?;
        std::fs::write(
            dir.join("handler.py"),
            "def handle(event, context):\n    pass\n",
        )
        .ok()?;
        Some(hooks)
    });
    let Some(hooks) = hooks else {
        return;
    };
    if std::fs::write(hooks.join("fuzzed").join("HOOK.yaml"), data).is_ok() {
        let _ = hermes_host::gateway::discover::scan(hooks, &Policy::STRICT);
    }
}

/// A finished shell hook run, read as each format reads it. The first byte picks the exit
/// (0, 1, 2, killed, timed out, could not run), the second the event; the rest is stdout,
/// then stderr after the first NUL byte.
pub fn shell_answer(data: &[u8]) {
    let exit = data.first().copied().unwrap_or(0);
    let event = EVENTS[usize::from(data.get(1).copied().unwrap_or(0)) % EVENTS.len()];
    let rest = data.get(2..).unwrap_or_default();
    let text = String::from_utf8_lossy(rest);
    let (stdout, stderr) = text.split_once('\0').unwrap_or((&text, ""));
    let mut run = RunResult {
        stdout: stdout.to_string(),
        stderr: stderr.to_string(),
        ..RunResult::default()
    };
    match exit % 6 {
        0 => run.returncode = Some(0),
        1 => run.returncode = Some(1),
        2 => run.returncode = Some(2),
        3 => run.returncode = Some(-9),
        4 => run.timed_out = true,
        _ => run.error = Some("command not found".into()),
    }
    for format in [Format::Hermes, Format::Claude] {
        for fail_closed in [false, true] {
            let mut spec = ShellHookSpec::new(event, "./fuzzed.sh");
            spec.format = format;
            spec.fail_closed = fail_closed;
            let _ = shell::evaluate(&spec, &run);
        }
    }
    for tool in [
        "terminal",
        "write_file",
        "patch",
        "read_file",
        "unmapped_tool",
    ] {
        let _ = claude::decide(event, tool, &run);
    }
    // The same JSON as a payload given to `hermes hooks test --payload-file` in Claude's
    // shape.
    if let shell::wire::Stdout::Json(serde_json::Value::Object(map)) =
        shell::wire::read_stdout(stdout)
    {
        let kwargs = claude::hermes_kwargs(&map);
        let _ = claude::payload(event, &kwargs, &claude::Context::default());
        let _ = shell::wire::payload(event, &kwargs, "/");
    }
}

/// Bytes a gateway client sends: split into bounded lines in chunks the first byte picks,
/// each line parsed as the server parses it (and a message's reply line written back).
pub fn gateway_lines(data: &[u8]) {
    let chunk = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let data = data.get(1..).unwrap_or_default();
    // Small enough that the fuzzer reaches the over-long path with short inputs.
    let mut lines = LineSplitter::new(256);
    let handle = |bytes: &[u8]| {
        if let Ok(Some(inbound)) = gateway_wire::Inbound::from_line(bytes, "local") {
            let _ = inbound.session_key();
            let _ = gateway_wire::error_line(&inbound.text);
        }
    };
    for piece in data.chunks(chunk) {
        lines.push(piece, |piece| {
            if let Piece::Line(_, bytes) = piece {
                handle(bytes);
            }
        });
    }
    if let Some((_, bytes)) = lines.finish() {
        handle(&bytes);
    }
}

/// Frames from the other end of an isolated plugin's socket, read until the stream ends
/// or breaks the protocol, each decoded as the side that receives that kind decodes it.
pub fn isolation_frames(data: &[u8]) {
    let mut input = data;
    while let Ok((kind, mut r)) = wire::read_frame(&mut input) {
        let ok = match kind {
            Kind::Hello => wire::Hello::decode(&mut r).is_ok(),
            Kind::Fire => wire::Fire::decode(&mut r).is_ok(),
            Kind::Answer => r.answer().and_then(|_| r.end()).is_ok(),
            Kind::Call => (r.str(), r.str()).0.is_ok(),
            Kind::CallResult => r.u8().and_then(|_| r.str()).is_ok(),
        };
        if !ok {
            return;
        }
    }
}

/// A persistent hook's stdout: bounded lines, each classified for the firing waiting on
/// it (the first byte), and an answer evaluated as the hook's format reads it.
pub fn persistent_lines(data: &[u8]) {
    let id = u64::from(data.first().copied().unwrap_or(0));
    let data = data.get(1..).unwrap_or_default();
    let spec = ShellHookSpec::new("pre_tool_call", "./policy.py");
    let mut lines = LineSplitter::new(4096);
    lines.push(data, |piece| {
        let Piece::Line(_, bytes) = piece else {
            return;
        };
        if let persistent::ReplyLine::Answer(text) = persistent::reply_line(bytes, id) {
            let run = RunResult {
                returncode: Some(0),
                stdout: text.to_string(),
                ..RunResult::default()
            };
            let _ = shell::evaluate(&spec, &run);
        }
    });
}

/// The consent allowlist file as found on disk (hand-edited, truncated, another
/// version's): loaded, listed and looked up.
pub fn allowlist(data: &[u8]) {
    static HOME: OnceLock<Home> = OnceLock::new();
    let allowlist = shell::consent::Allowlist::new(HOME.get_or_init(|| Home::at(scratch("home"))));
    if std::fs::write(allowlist.path(), data).is_err() {
        return;
    }
    let _ = allowlist.load();
    let _ = allowlist.approvals();
    let _ = allowlist.entry_for("pre_tool_call", "./guard.sh");
}

/// A directory of this process's own under the temporary directory, made once.
fn scratch(name: &str) -> PathBuf {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    let root = ROOT.get_or_init(|| {
        let root = std::env::temp_dir().join(format!("hermes-fuzz-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&root);
        root
    });
    let dir = root.join(name);
    let _ = std::fs::create_dir_all(&dir);
    dir
}

/// Removes this process's scratch directory (the corpus replay calls it when done).
pub fn clean_scratch() {
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("hermes-fuzz-{}", std::process::id())),
    );
}

/// `hermes hooks import claude`: a Claude Code settings document, then after the first NUL
/// byte the `config.yaml` it is imported into. Every hook found is inserted; into an empty
/// config, each must read back from the YAML exactly as the settings had it (command or
/// URL, matcher, timeout), whatever characters it holds.
pub fn claude_import(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (settings, config) = text.split_once('\0').unwrap_or((&text, ""));
    let Ok(settings) = serde_json::from_str::<serde_json::Value>(settings) else {
        return;
    };
    let (entries, _) = claude_import::entries(&settings);
    if let (Ok(_), Ok(merged)) = (
        Config::parse(config),
        claude_import::insert(config, &entries),
    ) {
        let _ = Config::parse(&merged).map(|c| shell::config::parse(&c.hooks));
    }
    let Ok(fresh) = claude_import::insert("", &entries) else {
        panic!("an empty config.yaml refused the import");
    };
    let parsed = Config::parse(&fresh).unwrap_or_else(|e| panic!("{e}:\n{fresh}"));
    let mut read = Vec::new();
    let hooks = parsed.get("hooks").and_then(|h| h.as_mapping());
    for (event, list) in hooks.into_iter().flatten() {
        for hook in list.as_sequence().into_iter().flatten() {
            let field = |key: &str| hook.get(key).and_then(|v| v.as_str()).map(str::to_string);
            let target = match field("command") {
                Some(command) => ("command", command),
                None => ("url", field("url").unwrap_or_default()),
            };
            read.push((
                event.as_str().unwrap_or_default().to_string(),
                target,
                field("matcher"),
                hook.get("timeout").and_then(|v| v.as_u64()),
            ));
        }
    }
    let mut want: Vec<_> = entries
        .iter()
        .map(|e| {
            (
                e.event.to_string(),
                (e.target.0, e.target.1.clone()),
                e.matcher.clone(),
                e.timeout,
            )
        })
        .collect();
    read.sort();
    want.sort();
    assert_eq!(read, want, "the import did not read back:\n{fresh}");
}
