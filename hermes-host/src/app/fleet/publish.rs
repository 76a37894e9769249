//! A gateway's publisher: every gateway event to JetStream, without ever blocking a turn.
//!
//! [`Publisher::publish`] only tries to put the event on a bounded queue (counted as
//! dropped when it is full). A task on the gateway's runtime takes events in batches and
//! publishes each batch before awaiting its acks, so the round trips overlap. While the
//! broker is unreachable, or while older events still wait in the spool, events go to the
//! spool, so they reach the stream in the order they happened; every second the task tries
//! the broker again and drains the spool first.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_nats::jetstream::message::PublishMessage;
use hermes_host::gateway::GatewayLog;
use sha2::Digest as _;
use tokio::sync::mpsc;

use super::NatsSettings;
use super::spool::{Outgoing, Spool};

/// Events published per batch before their acks are awaited.
const BATCH: usize = 256;

/// How often an unreachable broker is tried again.
const RETRY: Duration = Duration::from_secs(1);

/// A drop is logged at most this often (with the count so far).
const DROP_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// What the publisher did so far.
#[derive(Debug, Default)]
pub struct Counters {
    /// Events the broker acknowledged.
    pub published: AtomicU64,
    /// Events waiting in the spool now.
    pub spooled: AtomicU64,
    /// Events lost: the queue or the spool was full, or one was too large for the broker
    /// even with its long fields cut.
    pub dropped: AtomicU64,
    /// Events the broker answered were duplicates of an id it had seen: published by
    /// someone else first, or sent twice across a reconnect.
    pub duplicates: AtomicU64,
}

/// The publisher of one gateway.
pub struct Publisher {
    tx: std::sync::Mutex<Option<mpsc::Sender<Outgoing>>>,
    settings: NatsSettings,
    ids: EventIds,
    counters: Arc<Counters>,
    log: Arc<dyn GatewayLog>,
    last_drop_log: std::sync::Mutex<Option<Instant>>,
    task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Publisher {
    /// Starts publishing to `settings`' stream on `runtime`, spooling under `spool_dir`.
    /// `home` names the home in each event's headers.
    ///
    /// # Errors
    ///
    /// When the spool cannot be opened.
    pub fn start(
        settings: NatsSettings,
        home: &str,
        spool_dir: &std::path::Path,
        runtime: &tokio::runtime::Handle,
        log: Arc<dyn GatewayLog>,
    ) -> Result<Arc<Publisher>, String> {
        let spool = Spool::open(spool_dir, settings.spool_max_bytes)?;
        let counters = Arc::new(Counters::default());
        counters.spooled.store(spool.len(), Ordering::Relaxed);
        if !spool.is_empty() {
            log.line(&format!(
                "gateway: events: {} event(s) wait in {} from an earlier run; they go first",
                spool.len(),
                spool_dir.display()
            ));
        }
        let (tx, rx) = mpsc::channel(settings.queue);
        let instance = format!(
            "{}-{}-{}",
            hostname(),
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis())
        );
        let task = Task {
            settings: settings.clone(),
            home: home.to_string(),
            instance,
            spool,
            counters: counters.clone(),
            log: log.clone(),
        };
        let handle = runtime.spawn(task.run(rx));
        Ok(Arc::new(Publisher {
            tx: std::sync::Mutex::new(Some(tx)),
            settings,
            ids: EventIds::new(),
            counters,
            log,
            last_drop_log: std::sync::Mutex::new(None),
            task: std::sync::Mutex::new(Some(handle)),
        }))
    }

    /// Queues `event` with `context` for the stream; never waits.
    pub fn publish(&self, event: &str, context: &serde_json::Value) {
        let outgoing = Outgoing {
            id: self.ids.next(),
            event: event.to_string(),
            subject: self.settings.subject(event),
            body: context.to_string(),
            at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_micros() as u64),
        };
        let sent = match self.tx.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(tx) => tx.try_send(outgoing).is_ok(),
            None => false,
        };
        if !sent {
            let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            self.note_drop(dropped, "the event queue is full");
        }
    }

    fn note_drop(&self, dropped: u64, why: &str) {
        let mut last = self.last_drop_log.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if last.is_none_or(|t| now.duration_since(t) >= DROP_LOG_INTERVAL) {
            *last = Some(now);
            self.log.line(&format!(
                "WARN gateway: events: dropped {dropped} event(s) so far: {why} (gateway.events.nats.queue, spool_max_bytes)"
            ));
        }
    }

    /// What the publisher did so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Stops taking events, then waits up to `deadline` for the queue to reach the broker
    /// or the spool: nothing queued is lost.
    pub fn shutdown(&self, runtime: &tokio::runtime::Handle, deadline: Duration) {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(task) = task {
            let _ = runtime.block_on(async { tokio::time::timeout(deadline, task).await });
        }
    }
}

impl crate::app::agent::EventSink for Publisher {
    fn publish(&self, event: &str, context: &serde_json::Value) {
        Publisher::publish(self, event, context);
    }
}

/// Event ids no one else can predict: the broker drops a message whose `Nats-Msg-Id` it
/// has seen within the duplicate window, so a publisher on the stream that could guess the
/// next ids could have the gateway's real events dropped. Each id is 128 bits of
/// SHA-256(secret, counter), the secret 256 bits from the kernel's random source.
struct EventIds {
    secret: [u8; 32],
    next: AtomicU64,
}

impl EventIds {
    fn new() -> EventIds {
        let mut secret = [0u8; 32];
        let read = std::fs::File::open("/dev/urandom")
            .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut secret));
        if read.is_err() {
            // No random source (a chroot without /dev): the clock and this process, hashed
            // with the address of a fresh allocation, rather than no gateway at all.
            let seed = format!(
                "{:?}-{}-{:p}",
                std::time::SystemTime::now(),
                std::process::id(),
                Box::new(0u8)
            );
            secret = sha2::Sha256::digest(seed.as_bytes()).into();
        }
        EventIds {
            secret,
            next: AtomicU64::new(1),
        }
    }

    fn next(&self) -> String {
        use std::fmt::Write as _;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut hasher = sha2::Sha256::new();
        hasher.update(self.secret);
        hasher.update(n.to_le_bytes());
        let digest = hasher.finalize();
        let mut id = String::with_capacity(32);
        for byte in &digest[..16] {
            let _ = write!(id, "{byte:02x}");
        }
        id
    }
}

/// This machine's name, for instance ids.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into())
}

struct Task {
    settings: NatsSettings,
    home: String,
    instance: String,
    spool: Spool,
    counters: Arc<Counters>,
    log: Arc<dyn GatewayLog>,
}

impl Task {
    async fn run(mut self, mut rx: mpsc::Receiver<Outgoing>) {
        let mut jetstream: Option<async_nats::jetstream::Context> = None;
        let mut next_try = Instant::now();
        let mut outage_logged = false;
        let mut closed = false;
        loop {
            // Up to a batch: the first event waits until the next retry is due.
            let mut batch = Vec::new();
            if !closed {
                let wait = if jetstream.is_none() || !self.spool.is_empty() {
                    RETRY.min(
                        next_try
                            .saturating_duration_since(Instant::now())
                            .max(Duration::from_millis(50)),
                    )
                } else {
                    RETRY
                };
                match tokio::time::timeout(wait, rx.recv()).await {
                    Ok(Some(first)) => {
                        batch.push(first);
                        while batch.len() < BATCH {
                            match rx.try_recv() {
                                Ok(e) => batch.push(e),
                                Err(_) => break,
                            }
                        }
                    }
                    Ok(None) => closed = true,
                    Err(_) => {}
                }
            }
            if jetstream.is_none() && Instant::now() >= next_try {
                match super::connect(&self.settings, &format!("hermes gateway {}", self.instance))
                    .await
                {
                    Ok(context) => {
                        if outage_logged {
                            self.log.line(&format!(
                                "gateway: events: {} is back; publishing the {} spooled event(s)",
                                self.settings.url,
                                self.spool.len()
                            ));
                        }
                        outage_logged = false;
                        jetstream = Some(context);
                    }
                    Err(e) => {
                        if !outage_logged {
                            self.log.line(&format!(
                                "WARN gateway: events: {e}; spooling events under {} until it answers",
                                self.settings.url
                            ));
                            outage_logged = true;
                        }
                        next_try = Instant::now() + RETRY;
                    }
                }
            }
            // The spool first: events reach the stream in the order they happened.
            if let Some(context) = &jetstream {
                if !self.drain_spool(context).await {
                    jetstream = None;
                    next_try = Instant::now() + RETRY;
                    self.stopped_answering(&mut outage_logged);
                }
            }
            if !batch.is_empty() {
                let sent = match (&jetstream, self.spool.is_empty()) {
                    (Some(context), true) => self.publish_batch(context, &batch).await,
                    _ => 0,
                };
                if sent < batch.len() {
                    if jetstream.is_some() && self.spool.is_empty() {
                        // The broker failed in the middle: off to the spool from there.
                        jetstream = None;
                        next_try = Instant::now() + RETRY;
                        self.stopped_answering(&mut outage_logged);
                    }
                    let lost = self.spool.append(&batch[sent..]);
                    if lost > 0 {
                        let dropped =
                            self.counters.dropped.fetch_add(lost, Ordering::Relaxed) + lost;
                        self.log.line(&format!(
                            "WARN gateway: events: dropped {dropped} event(s) so far: the spool is full (gateway.events.nats.spool_max_bytes)"
                        ));
                    }
                    self.counters
                        .spooled
                        .store(self.spool.len(), Ordering::Relaxed);
                }
            }
            if closed && batch.is_empty() {
                // Shutting down: one last try at the broker for the spool; what is still
                // there waits for the next run.
                if jetstream.is_none() && !self.spool.is_empty() {
                    jetstream = super::connect(
                        &self.settings,
                        &format!("hermes gateway {}", self.instance),
                    )
                    .await
                    .ok();
                }
                if let Some(context) = &jetstream {
                    self.drain_spool(context).await;
                }
                break;
            }
        }
    }

    /// Says once per outage that the broker stopped answering.
    fn stopped_answering(&self, outage_logged: &mut bool) {
        if !*outage_logged {
            self.log.line(&format!(
                "WARN gateway: events: {} stopped answering; spooling events until it does",
                self.settings.url
            ));
            *outage_logged = true;
        }
    }

    /// Publishes `batch` in order; how many of it are done before the first failure: the
    /// broker acknowledged them (as new or as duplicates), or they were too large for it
    /// even shortened and are dropped with a count and a log line. An event the broker
    /// cannot take is that event's failure, never an outage: sending it would close the
    /// connection, and the spool would send it again, for good.
    async fn publish_batch(
        &self,
        context: &async_nats::jetstream::Context,
        batch: &[Outgoing],
    ) -> usize {
        let max_payload = context.client().server_info().max_payload;
        let mut acks = Vec::with_capacity(batch.len());
        for (i, event) in batch.iter().enumerate() {
            let Some(body) = fit(event, &self.instance, &self.home, max_payload) else {
                let dropped = self.counters.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                self.log.line(&format!(
                    "WARN gateway: events: dropped {} {} ({} bytes): over the broker's max_payload of {max_payload} bytes even with its long fields cut ({dropped} dropped so far)",
                    event.event,
                    event.id,
                    event.body.len()
                ));
                acks.push((i, None));
                continue;
            };
            let message = PublishMessage::build()
                .payload(body.into())
                .message_id(&event.id)
                .header("Hermes-Event", event.event.as_str())
                .header("Hermes-Event-Id", event.id.as_str())
                .header("Hermes-Emitted", event.at.to_string().as_str())
                .header("Hermes-Instance", self.instance.as_str())
                .header("Hermes-Home", self.home.as_str());
            match context.send_publish(event.subject.clone(), message).await {
                Ok(ack) => acks.push((i, Some(ack))),
                Err(_) => break,
            }
        }
        let mut done = 0;
        let mut published = 0;
        for (i, ack) in acks {
            let Some(ack) = ack else {
                done = i + 1;
                continue;
            };
            match ack.await {
                Ok(ack) if ack.duplicate => {
                    done = i + 1;
                    let n = self.counters.duplicates.fetch_add(1, Ordering::Relaxed) + 1;
                    if n == 1 || n % 1000 == 0 {
                        self.log.line(&format!(
                            "WARN gateway: events: the broker already had an event with id {} ({}), so it kept the earlier one: {n} duplicate(s) so far. Another publisher on {} may be sending ids of ours",
                            batch[i].id, batch[i].event, self.settings.stream
                        ));
                    }
                }
                Ok(_) => {
                    done = i + 1;
                    published += 1;
                }
                Err(_) => break,
            }
        }
        self.counters
            .published
            .fetch_add(published, Ordering::Relaxed);
        done
    }

    /// Publishes the spool, oldest first; false when the broker failed on the way.
    async fn drain_spool(&mut self, context: &async_nats::jetstream::Context) -> bool {
        while let Some((segment, events)) = self.spool.oldest() {
            let mut done = 0;
            for chunk in events.chunks(BATCH) {
                let sent = self.publish_batch(context, chunk).await;
                done += sent;
                if sent < chunk.len() {
                    self.spool.published(&segment, &events, done);
                    self.counters
                        .spooled
                        .store(self.spool.len(), Ordering::Relaxed);
                    return false;
                }
            }
            self.spool.published(&segment, &events, done);
            self.counters
                .spooled
                .store(self.spool.len(), Ordering::Relaxed);
        }
        true
    }
}

/// The body of `event` as it can go to a broker whose messages are at most `max_payload`
/// bytes, headers included: as it is, or with every string longer than [`LONG_FIELD`]
/// bytes cut (a client's 1 MiB slash command), or `None` when even that is too large.
fn fit(event: &Outgoing, instance: &str, home: &str, max_payload: usize) -> Option<String> {
    // The headers: names, values, separators and the NATS/1.0 line, generously.
    let headers = 256 + 2 * event.id.len() + event.event.len() + instance.len() + home.len();
    let room = max_payload.checked_sub(headers)?;
    if event.body.len() <= room {
        return Some(event.body.clone());
    }
    let mut value: serde_json::Value = serde_json::from_str(&event.body).ok()?;
    cut_long_strings(&mut value);
    let body = value.to_string();
    (body.len() <= room).then_some(body)
}

/// Strings longer than this are cut when an event is too large for the broker.
const LONG_FIELD: usize = 4096;

fn cut_long_strings(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) if s.len() > LONG_FIELD => {
            let mut end = LONG_FIELD;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            let cut = s.len() - end;
            s.truncate(end);
            s.push_str(&format!("... [{cut} more bytes not published]"));
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(cut_long_strings),
        serde_json::Value::Object(map) => map.values_mut().for_each(cut_long_strings),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(body: String) -> Outgoing {
        Outgoing {
            id: "0123456789abcdef0123456789abcdef".into(),
            event: "command:deploy".into(),
            subject: "hermes.events.command.deploy".into(),
            body,
            at: 0,
        }
    }

    #[test]
    fn a_large_event_is_cut_to_fit_and_one_that_cannot_fit_is_refused() {
        let small = event(r#"{"args":"x"}"#.into());
        assert_eq!(
            fit(&small, "i", "/h", 1 << 20).as_deref(),
            Some(r#"{"args":"x"}"#)
        );
        let big =
            event(serde_json::json!({"args": "y".repeat(2 << 20), "user_id": "u"}).to_string());
        let cut = fit(&big, "i", "/h", 1 << 20).unwrap();
        assert!(cut.len() < 8192, "{}", cut.len());
        let value: serde_json::Value = serde_json::from_str(&cut).unwrap();
        assert_eq!(value["user_id"], "u");
        assert!(
            value["args"]
                .as_str()
                .unwrap()
                .ends_with("more bytes not published]")
        );
        let many = event(
            serde_json::Value::Array(
                vec!["z".repeat(100); 20_000]
                    .into_iter()
                    .map(serde_json::Value::String)
                    .collect(),
            )
            .to_string(),
        );
        assert_eq!(fit(&many, "i", "/h", 1 << 20), None);
    }

    #[test]
    fn event_ids_are_128_bits_and_not_a_counter() {
        let ids = EventIds::new();
        let a = ids.next();
        let b = ids.next();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_ne!(EventIds::new().next(), a);
    }
}
