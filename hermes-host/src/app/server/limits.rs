//! The gateway's limits and runtime sizes, read from the `gateway:` block of `config.yaml`.
//!
//! Every input a client controls has a bound here: a line's length, how long a partial
//! line may stay open, how many clients may connect, and how many bytes of answers may wait
//! for a client that does not read them. The runtime's sizes (async workers, the blocking
//! pool that runs agent turns and hooks) and the shutdown grace live here too, because an
//! operator tunes them together.
//!
//! A key with a value of the wrong type or out of range is reported (naming the key and
//! the default used instead) and the default applies; an unknown key is reported too, so a
//! typo does not silently leave a limit at its default.

use std::time::Duration;

use hermes_host::config::GATEWAY_KEYS;
use hermes_host::config::{Config, GatewaySection, Setting};
use yaml_serde::Value;

/// How the gateway is sized and bounded. [`GatewayLimits::default`] is what an empty
/// `gateway:` block gives.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayLimits {
    /// Async worker threads (`gateway.workers`; default: the number of cores).
    pub workers: usize,
    /// The most threads running agent turns and hook firings at once
    /// (`gateway.max_blocking`).
    pub max_blocking: usize,
    /// The most of those threads using the CPU at once (`gateway.max_running`; default:
    /// the number of cores). A turn waiting on a hook's process, an HTTP hook, an isolated
    /// plugin or a terminal command does not count; a turn that waited
    /// [`RUNNING_PATIENCE`] for its place runs anyway.
    pub max_running: usize,
    /// The most clients connected at once (`gateway.max_connections`); one more is told so
    /// and closed.
    pub max_connections: usize,
    /// The longest inbound line (`gateway.max_line_bytes`); a longer one is answered with
    /// an error and skipped, and the connection stays usable.
    pub max_line_bytes: usize,
    /// How long a partial line may stay unfinished (`gateway.idle_timeout`, seconds)
    /// before the connection is closed: the slowloris bound. A connection with no partial
    /// line may stay idle for ever (a client waiting for answers).
    pub idle_timeout: Duration,
    /// The most bytes of answers queued for one client (`gateway.write_buffer_bytes`); a
    /// client that lets more pile up is not reading, and is dropped.
    pub write_buffer_bytes: usize,
    /// How long in-flight turns get to finish after SIGINT or SIGTERM
    /// (`gateway.shutdown_grace`, seconds) before they are interrupted.
    pub shutdown_grace: Duration,
    /// The most history entries a chat's session keeps in memory (`gateway.history_window`);
    /// older ones are in its transcript on disk. The hooks' `conversation_history` is this
    /// window.
    pub history_window: usize,
    /// The most live sessions (`gateway.max_sessions`): a new chat beyond it ends the
    /// session of the chat that has been quiet longest (`session:end`,
    /// `on_session_finalize`).
    pub max_sessions: usize,
    /// How long a chat may be quiet before its session ends
    /// (`gateway.session_idle_timeout`, seconds; `--idle-timeout` overrides it).
    pub session_idle_timeout: Duration,
    /// Empty transcript files kept ready in `sessions/.spare/`
    /// (`gateway.spare_transcripts`; 0: none), so that as many chats can start at once
    /// without waiting for the filesystem to create their files.
    pub spare_transcripts: usize,
}

/// How long a turn waits for one of the `gateway.max_running` places before it runs
/// without one: what an in-process hook that blocks without saying so costs the others.
pub const RUNNING_PATIENCE: Duration = Duration::from_millis(10);

/// `gateway.max_line_bytes` by default: 1 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;

impl Default for GatewayLimits {
    fn default() -> GatewayLimits {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        GatewayLimits {
            workers: cores,
            max_blocking: 64,
            max_running: cores,
            max_connections: 10_000,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            idle_timeout: Duration::from_secs(30),
            write_buffer_bytes: 8 << 20,
            shutdown_grace: Duration::from_secs(10),
            spare_transcripts: 256,
            history_window: 200,
            max_sessions: 10_000,
            session_idle_timeout: Duration::from_secs(24 * 3600),
        }
    }
}

/// The keys of the `gateway:` block that are not limits, read elsewhere.
const OTHER_KEYS: &[&str] = &["allowed_users", "token", "events"];

impl GatewayLimits {
    /// The limits of `config`, with one warning line per key that could not be used (the
    /// tests below show both).
    pub fn from_config(config: &Config) -> (GatewayLimits, Vec<String>) {
        GatewayLimits::from_section(&config.gateway)
    }

    /// The limits of the `gateway:` section, as [`from_config`](GatewayLimits::from_config).
    pub fn from_section(gateway: &GatewaySection) -> (GatewayLimits, Vec<String>) {
        let mut limits = GatewayLimits::default();
        let mut warnings = Vec::new();
        if let Setting::Invalid(_) = gateway.present {
            warnings.push(
                "config.yaml: `gateway:` must be a mapping; using the default limits".to_string(),
            );
            return (limits, warnings);
        }
        for (key, value) in &gateway.entries {
            let Some(key) = key.as_str() else { continue };
            let mut bad = |what: &str, default: String| {
                warnings.push(format!(
                    "config.yaml: gateway.{key} must be {what}; using the default, {default}"
                ));
            };
            match key {
                "workers" => match count(value, 1, 1024) {
                    Some(n) => limits.workers = n,
                    None => bad("a whole number from 1 to 1024", limits.workers.to_string()),
                },
                "max_blocking" => match count(value, 1, 4096) {
                    Some(n) => limits.max_blocking = n,
                    None => bad("a whole number from 1 to 4096", limits.max_blocking.to_string()),
                },
                "max_running" => match count(value, 1, 4096) {
                    Some(n) => limits.max_running = n,
                    None => bad("a whole number from 1 to 4096", limits.max_running.to_string()),
                },
                "max_connections" => match count(value, 1, 1_000_000) {
                    Some(n) => limits.max_connections = n,
                    None => bad(
                        "a whole number from 1 to 1000000",
                        limits.max_connections.to_string(),
                    ),
                },
                "max_line_bytes" => match count(value, 64, 1 << 30) {
                    Some(n) => limits.max_line_bytes = n,
                    None => bad(
                        "a number of bytes from 64 to 1073741824",
                        limits.max_line_bytes.to_string(),
                    ),
                },
                "write_buffer_bytes" => match count(value, 1024, 1 << 32) {
                    Some(n) => limits.write_buffer_bytes = n,
                    None => bad(
                        "a number of bytes from 1024 to 4294967296",
                        limits.write_buffer_bytes.to_string(),
                    ),
                },
                "idle_timeout" => match seconds(value) {
                    Some(d) if !d.is_zero() => limits.idle_timeout = d,
                    _ => bad(
                        "a number of seconds above 0",
                        format!("{} s", limits.idle_timeout.as_secs_f64()),
                    ),
                },
                "shutdown_grace" => match seconds(value) {
                    Some(d) => limits.shutdown_grace = d,
                    None => bad(
                        "a number of seconds, 0 or more",
                        format!("{} s", limits.shutdown_grace.as_secs_f64()),
                    ),
                },
                "spare_transcripts" => match count(value, 0, 65_536) {
                    Some(n) => limits.spare_transcripts = n,
                    None => bad(
                        "a whole number from 0 to 65536",
                        limits.spare_transcripts.to_string(),
                    ),
                },
                "history_window" => match count(value, 2, 1_000_000) {
                    Some(n) => limits.history_window = n,
                    None => bad(
                        "a whole number from 2 to 1000000",
                        limits.history_window.to_string(),
                    ),
                },
                "max_sessions" => match count(value, 1, 10_000_000) {
                    Some(n) => limits.max_sessions = n,
                    None => bad(
                        "a whole number from 1 to 10000000",
                        limits.max_sessions.to_string(),
                    ),
                },
                "session_idle_timeout" => match seconds(value) {
                    Some(d) if !d.is_zero() => limits.session_idle_timeout = d,
                    _ => bad(
                        "a number of seconds above 0",
                        format!("{} s", limits.session_idle_timeout.as_secs_f64()),
                    ),
                },
                other if OTHER_KEYS.contains(&other) => {}
                other => warnings.push({
                    let known: Vec<&str> = GATEWAY_KEYS.iter().map(|(k, _, _)| *k).collect();
                    format!(
                        "config.yaml: gateway.{other} is not a gateway setting{} (known: {}); ignoring it",
                        hermes_host::pyfmt::close_match(other, &known, 0.6)
                            .map(|close| format!(" — did you mean '{close}'?"))
                            .unwrap_or_default(),
                        known.join(", ")
                    )
                }),
            }
        }
        (limits, warnings)
    }
}

fn count(value: &Value, min: u64, max: u64) -> Option<usize> {
    value
        .as_u64()
        .filter(|n| (min..=max).contains(n))
        .and_then(|n| usize::try_from(n).ok())
}

fn seconds(value: &Value) -> Option<Duration> {
    value
        .as_f64()
        .filter(|s| s.is_finite() && *s >= 0.0 && *s < 1e9)
        .map(Duration::from_secs_f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> (GatewayLimits, Vec<String>) {
        let config = Config::parse(yaml).unwrap();
        GatewayLimits::from_config(&config)
    }

    #[test]
    fn an_empty_block_gives_the_defaults() {
        assert_eq!(parse("{}\n"), (GatewayLimits::default(), vec![]));
        assert_eq!(
            parse("gateway:\n  allowed_users: [a]\n").1,
            Vec::<String>::new()
        );
    }

    #[test]
    fn each_key_is_read_and_a_bad_one_names_itself_and_the_default() {
        let (limits, warnings) = parse(
            "gateway:\n  workers: 3\n  max_blocking: 8\n  max_running: 1\n  max_connections: 5\n  max_line_bytes: 4096\n  idle_timeout: 0.5\n  write_buffer_bytes: 65536\n  shutdown_grace: 2\n  spare_transcripts: 0\n",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(
            (
                limits.workers,
                limits.max_blocking,
                limits.max_connections,
                limits.max_line_bytes
            ),
            (3, 8, 5, 4096)
        );
        assert_eq!(limits.max_running, 1);
        assert_eq!(limits.idle_timeout, Duration::from_millis(500));
        assert_eq!(limits.write_buffer_bytes, 65536);
        assert_eq!(limits.shutdown_grace, Duration::from_secs(2));
        assert_eq!(limits.spare_transcripts, 0);

        let (limits, warnings) = parse(
            "gateway:\n  workers: zero\n  idle_timeout: 0\n  max_conections: 4\n  max_running: 0\n",
        );
        assert_eq!(limits, GatewayLimits::default());
        assert_eq!(warnings.len(), 4, "{warnings:?}");
        assert!(warnings[3].contains("gateway.max_running must be a whole number from 1"));
        assert!(warnings[0].starts_with("config.yaml: gateway.workers must be a whole number"));
        assert!(warnings[0].contains("using the default"));
        assert!(warnings[1].contains("gateway.idle_timeout"));
        assert!(warnings[2].contains("gateway.max_conections is not a gateway setting"));
    }
}
