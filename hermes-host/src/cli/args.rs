//! The clap definition of the command line. Data only: no I/O, no defaults from the
//! environment (those are resolved in `settings`).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Hermes hooks: native plugins, shell hooks and gateway hooks for an AI agent.
#[derive(Parser, Debug)]
#[command(name = "hermes", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes.
#[derive(Args, Debug, Clone, Default)]
pub struct GlobalArgs {
    /// Use DIR as the Hermes home (sets HERMES_HOME for everything this run starts).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Use the named profile, ~/.hermes/profiles/NAME (letters, digits, - and _).
    #[arg(short = 'p', long, global = true, value_name = "NAME", value_parser = profile_name)]
    pub profile: Option<String>,
    /// Load no plugins and register no shell hooks (also HERMES_SAFE_MODE=1).
    #[arg(long, global = true)]
    pub safe_mode: bool,
    /// Approve shell hooks that are not yet allowlisted, and record the approval.
    #[arg(long, global = true)]
    pub accept_hooks: bool,
    /// Also write the log to FILE (rotated by size; read it with `hermes logs FILE`).
    /// `hermes gateway run` writes HERMES_HOME/logs/gateway.log unless told otherwise.
    #[arg(long, global = true, value_name = "FILE")]
    pub log_file: Option<PathBuf>,
    /// The log file's format: text (the lines stderr shows, with time and level) or json
    /// (one object per line).
    #[arg(long, global = true, value_name = "FORMAT", default_value = "text")]
    pub log_format: String,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run a scripted agent session (no network, no API key) with every hook firing.
    Run(RunArgs),
    /// Manage native plugins.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Shell hooks (the hooks: block of config.yaml): list, test, revoke, doctor, allow, fire, schema.
    Hooks {
        #[command(subcommand)]
        command: Option<HooksCommand>,
    },
    /// Gateway hooks ($HERMES_HOME/hooks/NAME/HOOK.yaml): list them, emit an event to them, run the local gateway.
    Gateway {
        #[command(subcommand)]
        command: GatewayCommand,
    },
    /// Measure what the installed hooks cost: native plugins, shell hooks and gateway hooks.
    Bench(Box<BenchArgs>),
    /// Read a log file (default: the gateway's, HERMES_HOME/logs/gateway.log), filtered.
    Logs(LogsArgs),
}

/// `hermes logs`.
#[derive(Args, Debug)]
pub struct LogsArgs {
    /// The log: a path, or a name under HERMES_HOME/logs (`gateway` is gateway.log).
    #[arg(value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// Keep printing lines as they are written (across rotations), until interrupted.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// Only lines at LEVEL or above: trace, debug, info, warn or error.
    #[arg(long, value_name = "LEVEL")]
    pub level: Option<String>,
    /// Only lines from the last DURATION: 90s, 10m, 2h, 1d.
    #[arg(long, value_name = "DURATION")]
    pub since: Option<String>,
    /// Only lines containing TEXT.
    #[arg(long, value_name = "TEXT")]
    pub grep: Option<String>,
    /// How many of the last matching lines to print first (0: all of them).
    #[arg(short = 'n', long, value_name = "N", default_value_t = 200)]
    pub lines: usize,
}

/// `hermes bench`.
#[derive(Args, Debug)]
#[command(
    long_about = "Measure what the hooks installed in the home cost, loaded as an agent run loads them.\n\n\
Hooks run for real, side effects included: a shell hook that posts to a server posts once per \
firing. The bench writes nothing to the home (no allowlist, config or plugin file): shell hooks \
that are not allowlisted are skipped with a note (approve them with `hermes hooks allow`, or pass \
--accept-hooks to run them for this bench only).",
    after_help = "Exit status:\n  0    every gate passed (or none was set)\n  1    a gate failed: a significant regression beyond --fail-on-regression, or a budget exceeded\n  2    bad usage or configuration: a bad budget, a missing baseline, an unknown event\n  130  interrupted (Ctrl-C); the results gathered so far are printed"
)]
pub struct BenchArgs {
    /// Events to fire, such as pre_tool_call or agent:start [default: every event with a hook].
    pub events: Vec<String>,
    /// Only this hook system: native, python, shell or gateway (repeatable).
    #[arg(long, value_name = "SYSTEM")]
    pub system: Vec<String>,
    /// Only hooks whose label (a plugin's `name::callback`, a shell hook's command, a gateway hook's name) matches REGEX.
    #[arg(long, value_name = "REGEX")]
    pub hook: Option<String>,
    /// A JSON object merged over every synthetic payload.
    #[arg(long, value_name = "FILE")]
    pub payload_file: Option<std::path::PathBuf>,
    /// Set tool_name of tool events (shell hooks whose matcher does not match it are not run).
    #[arg(long, value_name = "TOOL")]
    pub for_tool: Option<String>,
    /// Fire the events recorded in a `hermes run --trace json` trace, with their payloads.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["payload_file", "for_tool"])]
    pub replay: Option<std::path::PathBuf>,
    /// Warm-up firings per measurement [default: 5 firings or 1 s, whichever comes first].
    #[arg(long, value_name = "N")]
    pub warmup: Option<u64>,
    /// Firings per measurement (per thread); overrides --duration.
    #[arg(long, value_name = "N")]
    pub iterations: Option<u64>,
    /// How long each measurement runs, such as 500ms or 10s.
    #[arg(long, value_name = "DURATION", default_value = "300ms")]
    pub duration: String,
    /// Fire from N threads at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrency: usize,
    /// Print the results as JSON (schema/bench.schema.json) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained HTML report with latency plots to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// Save this run as baseline NAME.
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// Compare with baseline NAME.
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Where baselines live [default: $HERMES_HOME/bench].
    #[arg(long, value_name = "DIR")]
    pub baseline_dir: Option<std::path::PathBuf>,
    /// Exit 1 when a hook or event is significantly slower than the baseline by more than PCT percent.
    #[arg(long, value_name = "PCT", requires = "baseline")]
    pub fail_on_regression: Option<f64>,
    /// Exit 1 when EVENT's statistic exceeds DURATION, such as pre_tool_call=40ms (repeatable; adds to bench.budgets in config.yaml).
    #[arg(long, value_name = "EVENT=DURATION")]
    pub budget: Vec<String>,
    /// The statistic budgets limit: p50, p90, p99, max or mean.
    #[arg(long, value_name = "STAT", default_value = "p99")]
    pub budget_stat: String,
}

#[derive(Subcommand, Debug)]
pub enum PluginsCommand {
    /// List discovered plugins: version, library, enabled or why not, hooks registered.
    #[command(visible_alias = "ls")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Enable a plugin in config.yaml (plugins.enabled).
    Enable {
        /// The plugin's name or key.
        name: String,
        /// Enable it even when it is not installed or cannot load (as `plugins list` would
        /// show it).
        #[arg(long)]
        force: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Disable a plugin in config.yaml (plugins.disabled).
    Disable {
        /// The plugin's name or key.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Remove an installed plugin from the home's plugins directory and disable it; a
    /// Claude Code plugin's hook approvals go too, its data directory stays.
    Uninstall {
        /// The plugin's name or key.
        name: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a new plugin crate (the plugin template, without cargo-generate), or with
    /// --python a Python plugin.
    New {
        /// The plugin's name: a crate name such as my-plugin (letters, digits, - and _).
        name: String,
        /// The hooks to start with, comma-separated [default: pre_tool_call,on_session_end].
        #[arg(long, value_name = "HOOK,...", value_delimiter = ',')]
        hooks: Option<Vec<String>>,
        /// Also add a native gateway hook for agent:* events.
        #[arg(long)]
        gateway: bool,
        /// Write a Python plugin (plugin.yaml, __init__.py and a unittest test) instead of
        /// a Rust crate.
        #[arg(long, conflicts_with = "gateway")]
        python: bool,
        /// Write the crate into DIR/NAME [default: the current directory].
        #[arg(long, value_name = "DIR")]
        path: Option<PathBuf>,
        /// Write into DIR/NAME even when it is not empty (files of the template are replaced).
        #[arg(long)]
        force: bool,
        /// The author for Cargo.toml and plugin.yaml.
        #[arg(long, default_value = "Your Name")]
        author: String,
        /// One line saying what the plugin does.
        #[arg(long, default_value = "A hermes-hooks plugin.")]
        description: String,
    },
    /// Build a plugin crate in release mode, install it into the home and enable it.
    ///
    /// A plugin.yaml you edited in the home is kept (the library is still updated); --force
    /// replaces it with the crate's. Settings in config.yaml (plugins.settings.NAME) are
    /// never touched.
    Install {
        /// The plugin's directory: a Rust crate (Cargo.toml and plugin.yaml), a Python plugin
        /// (plugin.yaml and __init__.py), a Claude Code plugin (.claude-plugin/plugin.json) or
        /// a Claude Code marketplace (with --plugin).
        crate_dir: PathBuf,
        /// Build in debug mode instead (faster to build, slower hooks).
        #[arg(long)]
        debug: bool,
        /// Replace an installed plugin.yaml even when it was edited after the last install.
        #[arg(long)]
        force: bool,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// In a Claude Code marketplace directory (.claude-plugin/marketplace.json), the
        /// plugin to install.
        #[arg(long, value_name = "NAME")]
        plugin: Option<String>,
        /// Accept a Claude Code plugin's hook commands without asking.
        #[arg(long)]
        yes: bool,
    },
    /// Fire one hook at the loaded plugins and print what they decided.
    Fire {
        /// The hook, such as pre_tool_call.
        hook: String,
        /// The payload: a JSON object of the hook's fields (missing fields are empty).
        #[arg(long, value_name = "JSON")]
        payload: Option<String>,
        /// Read the payload from a file.
        #[arg(long, value_name = "FILE", conflicts_with = "payload")]
        payload_file: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// `hermes gateway ...`. One variant per action.
#[derive(Subcommand, Debug)]
pub enum GatewayCommand {
    /// List the gateway hooks that loaded, and why the others did not.
    Hooks {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Load the gateway hooks, emit one event to them, and wait for its delivery.
    Emit {
        /// The event, such as agent:start or command:model.
        event: String,
        /// The context: a JSON object (default {}).
        #[arg(long, value_name = "JSON")]
        context: Option<String>,
        /// Seconds to wait for the handlers before giving up on them.
        #[arg(long, value_name = "SECS", default_value_t = 30.0)]
        deadline: f64,
    },
    /// Run the agent behind a local message gateway (a Unix socket in the home by default;
    /// a loopback TCP and/or stdin adapter).
    Run(Box<GatewayRunArgs>),
    /// Make the running gateway of this home reload config.yaml, shell hooks, gateway hooks
    /// and plugins (it is sent SIGHUP; its pid is in HERMES_HOME/gateway.pid).
    Reload,
    /// Write a systemd user unit for this home's gateway (enabled where systemd runs);
    /// arguments after -- go to `gateway run`.
    Install {
        /// Arguments of `hermes gateway run` (default: the Unix socket in the home).
        #[arg(last = true, value_name = "RUN_ARGS")]
        run_args: Vec<String>,
    },
    /// Remove the systemd user unit (stopping and disabling it where systemd runs).
    Uninstall,
    /// Start the gateway in the background: through systemd when its unit is installed,
    /// else a supervised process of its own; arguments after -- go to `gateway run`.
    Start {
        /// Arguments of `hermes gateway run` (default: those of the last start).
        #[arg(last = true, value_name = "RUN_ARGS")]
        run_args: Vec<String>,
    },
    /// Stop the gateway: SIGTERM, a graceful shutdown, then SIGKILL after the bound.
    Stop {
        /// Seconds to wait for the graceful shutdown.
        #[arg(long, value_name = "SECS", default_value_t = 30)]
        timeout: u64,
    },
    /// Stop the gateway if it runs, then start it.
    Restart {
        /// Seconds to wait for the graceful shutdown.
        #[arg(long, value_name = "SECS", default_value_t = 30)]
        timeout: u64,
        /// Arguments of `hermes gateway run` (default: those of the last start).
        #[arg(last = true, value_name = "RUN_ARGS")]
        run_args: Vec<String>,
    },
    /// Whether the gateway runs: pid, uptime, endpoints, hooks, last reload, log file.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run this home's gateway hooks on the events of a NATS JetStream stream, as a durable
    /// consumer (several processes on one durable split the work).
    Consume(Box<GatewayConsumeArgs>),
    /// Run `gateway run` and start it again when it fails (what `gateway start` detaches).
    #[command(hide = true)]
    Supervise {
        #[arg(last = true)]
        run_args: Vec<String>,
    },
}

/// `hermes gateway consume`.
#[derive(Args, Debug)]
pub struct GatewayConsumeArgs {
    /// The broker (else gateway.events.nats.url in config.yaml).
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
    /// The durable consumer's name: processes that share it share the work.
    #[arg(long, value_name = "NAME", default_value = "hermes-hooks")]
    pub durable: String,
    /// Seconds the hooks may take with one event before it counts as failed.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub handler_timeout: f64,
    /// Seconds the broker waits for an ack before delivering an event again (default: the
    /// handler timeout plus 10).
    #[arg(long, value_name = "SECS")]
    pub ack_wait: Option<f64>,
    /// Deliveries of one event before it is terminated with a log line.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub max_deliver: i64,
    /// Events handled at once.
    #[arg(long, value_name = "N", default_value_t = 16)]
    pub concurrency: usize,
}

/// `hermes gateway run`.
#[derive(Args, Debug)]
pub struct GatewayRunArgs {
    /// Listen for JSON-lines clients on this loopback address (port 0: any free port); the
    /// bound address is the first line on stdout. Clients send the gateway's token first
    /// (HERMES_GATEWAY_TOKEN or gateway.token in config.yaml).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<std::net::SocketAddr>,
    /// Listen on a Unix socket at PATH, which only this user can connect to. The default
    /// endpoint, at HERMES_HOME/gateway.sock, when neither --listen nor --stdin is given;
    /// its path is the first line on stdout.
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Read JSON-lines messages from stdin and write answers to stdout; end of input stops
    /// the gateway (after every message is answered).
    #[arg(long)]
    pub stdin: bool,
    /// The scripted model (YAML: model, replies of {match, steps}); default: echo.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// The platform of messages that name none.
    #[arg(long, default_value = "local", value_name = "NAME")]
    pub platform: String,
    /// End a session after this many seconds without a message.
    #[arg(long, value_name = "SECS")]
    pub idle_timeout: Option<f64>,
    /// How dangerous terminal commands are approved: once, session, always or deny.
    #[arg(long, default_value = "deny", value_name = "MODE")]
    pub approvals: String,
    /// The trace of every hook firing: text, json or off.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    pub trace: String,
    /// Write the trace to FILE instead of stderr.
    #[arg(long, value_name = "FILE")]
    pub trace_file: Option<PathBuf>,
    /// The directory tools run in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Seconds a terminal command may run.
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub terminal_timeout: u64,
    /// Seconds gateway hooks get at shutdown to deliver their queued events.
    #[arg(long, default_value_t = 10.0, value_name = "SECS")]
    pub shutdown_deadline: f64,
    /// Seconds running turns get to finish after SIGINT/SIGTERM (default:
    /// `gateway.shutdown_grace` in config.yaml, else 10).
    #[arg(long, value_name = "SECS")]
    pub shutdown_grace: Option<f64>,
    /// Async worker threads (default: `gateway.workers`, else the number of cores).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Start even when another gateway serves this home (each keeps its own sessions;
    /// `gateway reload` then reaches the one started last).
    #[arg(long)]
    pub beside_another: bool,
    /// Publish every gateway event to NATS JetStream at URL (else gateway.events.nats in
    /// config.yaml; the stream and subject prefix come from there, or their defaults).
    #[arg(long, value_name = "URL")]
    pub events_nats: Option<String>,
}

/// `hermes hooks ...`: inspect and manage shell hooks.
#[derive(Subcommand, Debug)]
pub enum HooksCommand {
    /// Add another agent's hooks to config.yaml (`claude`: Claude Code's settings.json, as
    /// `format: claude` entries). Shows the lines first; nothing is approved.
    Import {
        /// Where the hooks come from: claude.
        source: String,
        /// The settings file (default: .claude/settings.json, then ~/.claude/settings.json).
        file: Option<PathBuf>,
        /// Write without asking.
        #[arg(long)]
        yes: bool,
    },
    /// List the configured shell hooks and whether each is allowlisted.
    #[command(visible_alias = "ls")]
    List {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The directory the agent works in (`--cwd` of `hermes run` and `hermes gateway
        /// run`): what `$CLAUDE_PROJECT_DIR` in a `format: claude` command stands for
        /// (default: the current directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// Run the hooks of one event once on a synthetic payload (the allowlist is not consulted).
    Test {
        /// The event, such as pre_tool_call.
        event: String,
        /// Set tool_name, and only run tool hooks whose matcher matches it.
        #[arg(long, value_name = "TOOL")]
        for_tool: Option<String>,
        /// A JSON object merged over the synthetic payload.
        #[arg(long, value_name = "FILE")]
        payload_file: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The directory the agent works in (`--cwd` of `hermes run` and `hermes gateway
        /// run`): where the hooks run, their payload's `cwd` and `CLAUDE_PROJECT_DIR`
        /// (default: the current directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// Remove every allowlist entry of a command (under any event).
    #[command(visible_aliases = ["remove", "rm"])]
    Revoke {
        /// The command, exactly as in config.yaml.
        command: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The directory the agent works in (`--cwd` of `hermes run` and `hermes gateway
        /// run`): what `$CLAUDE_PROJECT_DIR` in a `format: claude` command stands for
        /// (default: the current directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// Check every configured hook: script, allowlist, changes since approval, a JSON smoke test.
    Doctor {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The directory the agent works in (`--cwd` of `hermes run` and `hermes gateway
        /// run`): where the hooks run, their payload's `cwd` and `CLAUDE_PROJECT_DIR`
        /// (default: the current directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// Approve a command without a prompt, pinned to its script's current content.
    #[command(visible_alias = "approve")]
    Allow {
        /// The command, exactly as in config.yaml.
        command: String,
        /// Approve it for this event only (default: every event that uses it in config.yaml).
        #[arg(long, value_name = "EVENT")]
        event: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The directory the agent works in (`--cwd` of `hermes run` and `hermes gateway
        /// run`): what `$CLAUDE_PROJECT_DIR` in a `format: claude` command stands for
        /// (default: the current directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// Fire every firing of recorded traces again at this home's hooks (all three systems,
    /// no tool or model runs) and compare each outcome with the recorded one; exit 1 when
    /// one changed. Record a trace with `hermes run SCRIPT --trace json --trace-file FILE`.
    Replay {
        /// JSON traces (`--trace json`), replayed in order.
        #[arg(required = true, value_name = "TRACE")]
        traces: Vec<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Compare with the outcomes saved in FILE (by --write-expect) instead of the
        /// trace's own.
        #[arg(long, value_name = "FILE")]
        expect: Option<PathBuf>,
        /// Save this replay's outcomes to FILE, for a later --expect.
        #[arg(long, value_name = "FILE")]
        write_expect: Option<PathBuf>,
        /// Fire no observer hook and emit no gateway event: only hooks whose answer decides.
        #[arg(long)]
        no_side_effects: bool,
        /// The directory the agent works in, as the recorded run had it.
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// Sum up what shadow hooks (`shadow: true`, `plugins.shadow`) would have done: per
    /// hook, how often they agreed with the deciding hooks, and the disagreements.
    ShadowReport {
        /// Only records of the last AGE (30m, 24h, 7d).
        #[arg(long, value_name = "AGE")]
        since: Option<String>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Register plugins and approved shell hooks as an agent run does, then fire one event.
    Fire {
        /// The event, such as pre_tool_call.
        event: String,
        /// The payload: a JSON object of the event's fields (missing fields are empty).
        #[arg(long, value_name = "JSON")]
        payload: Option<String>,
        /// Read the payload from a file.
        #[arg(long, value_name = "FILE", conflicts_with = "payload")]
        payload_file: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// The directory the agent works in (`--cwd` of `hermes run` and `hermes gateway
        /// run`): where the hooks run, their payload's `cwd` and `CLAUDE_PROJECT_DIR`
        /// (default: the current directory).
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
    },
    /// Print the JSON Schema of an event's payload (what a hook reads on stdin).
    Schema {
        /// The event, such as pre_tool_call.
        event: String,
        /// Print the schema of the answer a hook may print on stdout instead.
        #[arg(long)]
        answer: bool,
    },
}

/// `hermes run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The session script (YAML: model, platform, turns of user messages and model steps).
    pub script: PathBuf,
    /// How dangerous terminal commands are approved: once, session, always, deny, or prompt
    /// (ask at the terminal; deny when there is none).
    #[arg(long, default_value = "prompt", value_name = "MODE")]
    pub approvals: String,
    /// Seconds to wait at the approval prompt before denying.
    #[arg(long, default_value_t = 60, value_name = "SECS")]
    pub approval_timeout: u64,
    /// The trace of every hook firing: text, json or off.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    pub trace: String,
    /// Write the trace to FILE instead of stderr.
    #[arg(long, value_name = "FILE")]
    pub trace_file: Option<PathBuf>,
    /// The directory tools run in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// Seconds a terminal command may run.
    #[arg(long, default_value_t = 120, value_name = "SECS")]
    pub terminal_timeout: u64,
}

/// A profile is a directory under `profiles/`: a plain name, so that `-p ..` or `-p /etc`
/// cannot point the home somewhere else.
fn profile_name(name: &str) -> Result<String, String> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        Ok(name.to_string())
    } else {
        Err("a profile is a plain name (letters, digits, '-' and '_') under ~/.hermes/profiles/; for a home elsewhere, use --home DIR".into())
    }
}
