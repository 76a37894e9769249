//! The fleet: gateway events on NATS JetStream (feature `nats`).
//!
//! Many gateway processes each serve a share of the chats; observers that need every
//! chat's events (an audit log, metrics by platform) read them from one durable stream on
//! an existing broker instead of running inside each process.
//!
//! - [`publish`]: a gateway publishes every event it emits (`gateway:startup`,
//!   `session:*`, `agent:*`, `command:*`) to `<prefix>.<event, with : as .>`, its context
//!   as the JSON body, with a unique `Nats-Msg-Id` (the broker drops duplicates), the
//!   instance and the home in headers. Publishing never blocks a turn: events wait in a
//!   bounded queue, and while the broker is unreachable in a bounded spool on disk
//!   ([`spool`]), republished in order when it returns.
//! - [`consume`]: `hermes gateway consume` runs a home's gateway hooks from the stream: a
//!   durable pull consumer, an ack once the hooks handled an event, a negative ack with a
//!   backoff when one failed, and a terminal one after the last attempt.

pub mod consume;
pub mod publish;
pub mod spool;

use std::path::PathBuf;
use std::time::Duration;

use hermes_host::config::GatewaySection;
use yaml_serde::Value;

/// How a gateway or a consumer reaches the stream.
#[derive(Clone, Debug, PartialEq)]
pub struct NatsSettings {
    /// The broker, such as `nats://127.0.0.1:4222`.
    pub url: String,
    /// The JetStream stream (created if missing).
    pub stream: String,
    /// Subjects are `<subject_prefix>.<event>`.
    pub subject_prefix: String,
    /// A `.creds` file for the connection.
    pub credentials_file: Option<PathBuf>,
    /// The stream's limits when it is created: the oldest event kept, bytes, events.
    pub max_age: Duration,
    pub max_bytes: i64,
    pub max_msgs: i64,
    /// How long the broker remembers a `Nats-Msg-Id` to drop a duplicate.
    pub duplicate_window: Duration,
    /// Events waiting in memory before they are counted as dropped.
    pub queue: usize,
    /// Bytes the spool may hold on disk before new events are dropped (and counted).
    pub spool_max_bytes: u64,
}

impl NatsSettings {
    /// The defaults, for `url`.
    pub fn for_url(url: &str) -> NatsSettings {
        NatsSettings {
            url: url.to_string(),
            stream: "HERMES_EVENTS".into(),
            subject_prefix: "hermes.events".into(),
            credentials_file: None,
            max_age: Duration::from_secs(7 * 86400),
            max_bytes: 1 << 30,
            max_msgs: -1,
            duplicate_window: Duration::from_secs(600),
            queue: 10_000,
            spool_max_bytes: 64 << 20,
        }
    }

    /// `gateway.events.nats` of config.yaml, when it is there.
    ///
    /// # Errors
    ///
    /// What is wrong with it, naming the key: it is then not used.
    pub fn from_config(gateway: &GatewaySection) -> Result<Option<NatsSettings>, String> {
        let Some(events) = gateway.entries.get("events") else {
            return Ok(None);
        };
        let Some(nats) = events.get("nats") else {
            return Err("gateway.events must be a mapping with a `nats:` entry".into());
        };
        let Value::Mapping(map) = nats else {
            return Err(
                "gateway.events.nats must be a mapping (url, stream, subject_prefix, ...)".into(),
            );
        };
        let text = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
        let number = |key: &str| map.get(key).and_then(Value::as_f64);
        let Some(url) = text("url") else {
            return Err(
                "gateway.events.nats.url is missing: the broker, such as nats://127.0.0.1:4222"
                    .into(),
            );
        };
        const KEYS: &[&str] = &[
            "url",
            "stream",
            "subject_prefix",
            "credentials_file",
            "max_age",
            "max_bytes",
            "max_msgs",
            "duplicate_window",
            "queue",
            "spool_max_bytes",
        ];
        if let Some(unknown) = map
            .keys()
            .filter_map(Value::as_str)
            .find(|k| !KEYS.contains(k))
        {
            return Err(format!(
                "gateway.events.nats.{unknown} is not a setting (known: {})",
                KEYS.join(", ")
            ));
        }
        let mut settings = NatsSettings::for_url(&url);
        if let Some(stream) = text("stream") {
            settings.stream = stream;
        }
        if let Some(prefix) = text("subject_prefix") {
            settings.subject_prefix = prefix;
        }
        settings.credentials_file = text("credentials_file").map(PathBuf::from);
        if let Some(s) = number("max_age").filter(|s| *s > 0.0) {
            settings.max_age = Duration::from_secs_f64(s);
        }
        if let Some(b) = number("max_bytes") {
            settings.max_bytes = b as i64;
        }
        if let Some(m) = number("max_msgs") {
            settings.max_msgs = m as i64;
        }
        if let Some(s) = number("duplicate_window").filter(|s| *s > 0.0) {
            settings.duplicate_window = Duration::from_secs_f64(s);
        }
        if let Some(q) = number("queue").filter(|q| *q >= 1.0) {
            settings.queue = q as usize;
        }
        if let Some(b) = number("spool_max_bytes").filter(|b| *b >= 0.0) {
            settings.spool_max_bytes = b as u64;
        }
        if settings.stream.is_empty() || settings.stream.contains(['.', '*', '>', ' ']) {
            return Err(format!(
                "gateway.events.nats.stream {:?} must be a plain name (no '.', '*', '>' or space)",
                settings.stream
            ));
        }
        Ok(Some(settings))
    }

    /// The subject of `event`: `hermes.events.agent.start` for `agent:start` (tested below:
    /// the binary's items are not doctested).
    pub fn subject(&self, event: &str) -> String {
        let token: String = event
            .chars()
            .map(|c| match c {
                ':' => '.',
                ' ' | '*' | '>' | '\t' => '_',
                c => c,
            })
            .collect();
        format!("{}.{token}", self.subject_prefix)
    }

    /// Every event's subject: `<prefix>.>`.
    pub fn all_subjects(&self) -> String {
        format!("{}.>", self.subject_prefix)
    }
}

/// Connects to the broker and makes sure the stream exists.
///
/// # Errors
///
/// The broker is unreachable, refuses the credentials, or cannot create the stream.
pub async fn connect(
    settings: &NatsSettings,
    name: &str,
) -> Result<async_nats::jetstream::Context, String> {
    let mut options = async_nats::ConnectOptions::new()
        .name(name)
        .connection_timeout(Duration::from_secs(2));
    if let Some(creds) = &settings.credentials_file {
        options = options
            .credentials_file(creds)
            .await
            .map_err(|e| format!("cannot read {}: {e}", creds.display()))?;
    }
    let client = options
        .connect(settings.url.as_str())
        .await
        .map_err(|e| format!("cannot connect to {}: {e}", settings.url))?;
    let mut context = async_nats::jetstream::new(client);
    context.set_timeout(Duration::from_secs(2));
    context
        .get_or_create_stream(async_nats::jetstream::stream::Config {
            name: settings.stream.clone(),
            subjects: vec![settings.all_subjects()],
            max_age: settings.max_age,
            max_bytes: settings.max_bytes,
            max_messages: settings.max_msgs,
            duplicate_window: settings.duplicate_window,
            ..Default::default()
        })
        .await
        .map_err(|e| format!("cannot create or find the stream {}: {e}", settings.stream))?;
    Ok(context)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_become_subjects_and_config_is_read_with_its_defaults() {
        let s = NatsSettings::for_url("nats://x");
        assert_eq!(s.subject("agent:start"), "hermes.events.agent.start");
        assert_eq!(s.subject("command:model"), "hermes.events.command.model");
        assert_eq!(s.all_subjects(), "hermes.events.>");
        let config = hermes_host::config::Config::parse(
            "gateway:\n  events:\n    nats: {url: 'nats://127.0.0.1:4222', stream: AUDIT, max_age: 60}\n",
        )
        .unwrap();
        let s = NatsSettings::from_config(&config.gateway).unwrap().unwrap();
        assert_eq!(
            (s.stream.as_str(), s.max_age),
            ("AUDIT", Duration::from_secs(60))
        );
        let bad = hermes_host::config::Config::parse(
            "gateway:\n  events:\n    nats: {url: x, strem: y}\n",
        )
        .unwrap();
        assert!(
            NatsSettings::from_config(&bad.gateway)
                .unwrap_err()
                .contains("strem")
        );
        assert_eq!(
            NatsSettings::from_config(&hermes_host::config::Config::default().gateway),
            Ok(None)
        );
    }
}
