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
    /// Events lost: the queue or the spool was full.
    pub dropped: AtomicU64,
}

/// The publisher of one gateway.
pub struct Publisher {
    tx: std::sync::Mutex<Option<mpsc::Sender<Outgoing>>>,
    settings: NatsSettings,
    instance: String,
    next: AtomicU64,
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
            instance: instance.clone(),
            spool,
            counters: counters.clone(),
            log: log.clone(),
        };
        let handle = runtime.spawn(task.run(rx));
        Ok(Arc::new(Publisher {
            tx: std::sync::Mutex::new(Some(tx)),
            settings,
            instance,
            next: AtomicU64::new(1),
            counters,
            log,
            last_drop_log: std::sync::Mutex::new(None),
            task: std::sync::Mutex::new(Some(handle)),
        }))
    }

    /// Queues `event` with `context` for the stream; never waits.
    pub fn publish(&self, event: &str, context: &serde_json::Value) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let outgoing = Outgoing {
            id: format!("{}-{n}", self.instance),
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

    /// Publishes `batch` in order; how many the broker acknowledged before the first
    /// failure.
    async fn publish_batch(
        &self,
        context: &async_nats::jetstream::Context,
        batch: &[Outgoing],
    ) -> usize {
        let mut acks = Vec::with_capacity(batch.len());
        for event in batch {
            let message = PublishMessage::build()
                .payload(event.body.clone().into())
                .message_id(&event.id)
                .header("Hermes-Event", event.event.as_str())
                .header("Hermes-Event-Id", event.id.as_str())
                .header("Hermes-Emitted", event.at.to_string().as_str())
                .header("Hermes-Instance", self.instance.as_str())
                .header("Hermes-Home", self.home.as_str());
            match context.send_publish(event.subject.clone(), message).await {
                Ok(ack) => acks.push(ack),
                Err(_) => break,
            }
        }
        let mut sent = 0;
        for ack in acks {
            match ack.await {
                Ok(_) => sent += 1,
                Err(_) => break,
            }
        }
        self.counters
            .published
            .fetch_add(sent as u64, Ordering::Relaxed);
        sent
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
