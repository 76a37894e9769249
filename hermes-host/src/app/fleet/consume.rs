//! `hermes gateway consume`: a home's gateway hooks, fed from the stream instead of a
//! local gateway.
//!
//! A durable pull consumer (several `consume` processes on one durable split the work).
//! Each event goes to the same hooks, with the same wildcards, as a local emit, with the
//! delivery count and the event id added to its context; it is acknowledged once every
//! hook handled it. When a hook failed, the event is acknowledged negatively with a delay
//! (1, 2, 4 ... 60 s: never a tight loop) and delivered again, up to `max_deliver` times,
//! then terminated with a log line. An event whose consumer died, or whose hooks took
//! longer than the ack wait, is delivered again by the broker: delivery is at least once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_nats::jetstream::AckKind;
use async_nats::jetstream::consumer::pull;
use futures_util::StreamExt as _;
use hermes_host::gateway::{GatewayHooks, GatewayLog, Waited};

use super::NatsSettings;

/// How `consume` runs.
#[derive(Clone, Debug)]
pub struct ConsumeOptions {
    /// The durable consumer's name.
    pub durable: String,
    /// How long the hooks may take with one event before it counts as failed.
    pub handler_timeout: Duration,
    /// How long the broker waits for an ack before delivering again (a crashed consumer).
    pub ack_wait: Duration,
    /// Deliveries of one event before it is terminated.
    pub max_deliver: i64,
    /// Events handled at once.
    pub concurrency: usize,
}

/// What a consumer did.
#[derive(Debug, Default)]
pub struct ConsumeCounters {
    pub handled: AtomicU64,
    pub failed: AtomicU64,
    pub redelivered: AtomicU64,
    pub terminated: AtomicU64,
}

/// The delay before the `delivered`-th delivery's retry: 1, 2, 4 ... 60 s.
pub fn backoff(delivered: i64) -> Duration {
    let exponent = u32::try_from(delivered.clamp(1, 7) - 1).unwrap_or(0);
    Duration::from_secs((1u64 << exponent).min(60))
}

/// Runs until `stop` resolves: takes events from the stream and runs `hooks` on them. A
/// broker that does not answer yet, or goes away, is tried again every second.
///
/// # Errors
///
/// None today: every failure is retried; the type leaves room for one that cannot be.
pub async fn run(
    settings: &NatsSettings,
    options: &ConsumeOptions,
    hooks: Arc<GatewayHooks>,
    log: Arc<dyn GatewayLog>,
    counters: Arc<ConsumeCounters>,
    stop: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    tokio::pin!(stop);
    // The broker may come up after the consumer: try again every second until it answers.
    let mut said = false;
    let (jetstream, mut messages) = loop {
        let attempt = async {
            let jetstream = super::connect(
                settings,
                &format!("hermes gateway consume {}", options.durable),
            )
            .await?;
            let messages = subscribe(&jetstream, settings, options).await?;
            Ok::<_, String>((jetstream, messages))
        };
        match attempt.await {
            Ok(ready) => break ready,
            Err(why) => {
                if !said {
                    log.line(&format!(
                        "WARN gateway consume: {why}; trying again every second"
                    ));
                    said = true;
                }
                tokio::select! {
                    _ = &mut stop => return Ok(()),
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    };
    log.line(&format!(
        "gateway consume: reading {} on {} as durable '{}'; {} gateway hook(s)",
        settings.stream,
        settings.url,
        options.durable,
        hooks.loaded().len()
    ));
    let permits = Arc::new(tokio::sync::Semaphore::new(options.concurrency.max(1)));
    let mut failing = false;
    loop {
        let next = tokio::select! {
            _ = &mut stop => break,
            next = messages.next() => next,
        };
        let message = match next {
            Some(Ok(message)) => {
                if failing {
                    log.line("gateway consume: reading the stream again");
                    failing = false;
                }
                message
            }
            problem => {
                // The broker went away or the pull subscription broke: subscribe again
                // (the durable consumer keeps the position), once a second.
                if !failing {
                    let why = match problem {
                        Some(Err(e)) => e.to_string(),
                        _ => "the message stream ended".into(),
                    };
                    log.line(&format!(
                        "WARN gateway consume: reading the stream: {why}; trying again every second"
                    ));
                    failing = true;
                }
                tokio::select! {
                    _ = &mut stop => break,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
                if let Ok(fresh) = subscribe(&jetstream, settings, options).await {
                    messages = fresh;
                }
                continue;
            }
        };
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        // Handed to the hooks here, in the stream's order (each hook's queue keeps it);
        // only the wait for the outcome, and the ack, run beside the next events.
        let Some(started) = start(message, &settings.subject_prefix, &hooks, &log, &counters).await
        else {
            continue;
        };
        let (log, counters, options) = (log.clone(), counters.clone(), options.clone());
        tokio::spawn(async move {
            finish(started, &options, &log, &counters).await;
            drop(permit);
        });
    }
    // Let the events in hand finish: their acks are what at-least-once needs.
    let _ = tokio::time::timeout(
        options.handler_timeout,
        permits.acquire_many(options.concurrency.max(1) as u32),
    )
    .await;
    Ok(())
}

/// The durable consumer's messages (created with its settings when it does not exist).
async fn subscribe(
    jetstream: &async_nats::jetstream::Context,
    settings: &NatsSettings,
    options: &ConsumeOptions,
) -> Result<pull::Stream, String> {
    let stream = jetstream
        .get_stream(&settings.stream)
        .await
        .map_err(|e| format!("cannot open the stream {}: {e}", settings.stream))?;
    let consumer = stream
        .get_or_create_consumer(
            &options.durable,
            pull::Config {
                durable_name: Some(options.durable.clone()),
                ack_policy: async_nats::jetstream::consumer::AckPolicy::Explicit,
                ack_wait: options.ack_wait,
                // Terminated by us after `max_deliver`, with a log line; the broker's own
                // limit is a backstop.
                max_deliver: options.max_deliver + 1,
                max_ack_pending: (options.concurrency * 4) as i64,
                filter_subject: settings.all_subjects(),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| {
            format!(
                "cannot create the durable consumer {}: {e}",
                options.durable
            )
        })?;
    consumer
        .messages()
        .await
        .map_err(|e| format!("cannot read from the consumer {}: {e}", options.durable))
}

/// One event: run the hooks, then ack, nak with a backoff, or terminate.
/// An event handed to the hooks, waiting for their outcome.
struct Started {
    message: async_nats::jetstream::Message,
    delivery: hermes_host::gateway::Delivery,
    event: String,
    id: String,
    delivered: i64,
}

/// Hands `message`'s event to the hooks; `None` when it names no event (it is terminated,
/// with a log line).
async fn start(
    message: async_nats::jetstream::Message,
    prefix: &str,
    hooks: &Arc<GatewayHooks>,
    log: &Arc<dyn GatewayLog>,
    counters: &ConsumeCounters,
) -> Option<Started> {
    let delivered = message.info().map_or(1, |i| i.delivered);
    let header = |name: &str| {
        message
            .headers
            .as_ref()
            .and_then(|h| h.get(name))
            .map(|v| v.as_str().to_string())
    };
    let id = header("Hermes-Event-Id")
        .or_else(|| header("Nats-Msg-Id"))
        .unwrap_or_default();
    // The subject, never a header, says which event this is: the broker's permissions are
    // on subjects, so a publisher allowed only `agent.end` cannot name `command:*` here.
    let Some(event) = event_of_subject(message.subject.as_str(), prefix) else {
        counters.terminated.fetch_add(1, Ordering::Relaxed);
        log.line(&format!(
            "WARN gateway consume: refused a message on {:?}: not an event subject under {prefix} (a wildcard or an empty name); terminated",
            message.subject.as_str()
        ));
        let _ = message.ack_with(AckKind::Term).await;
        return None;
    };
    let mut context = serde_json::from_slice::<serde_json::Value>(&message.payload)
        .ok()
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    if let Some(map) = context.as_object_mut() {
        map.insert("delivery_count".into(), delivered.into());
        map.insert("event_id".into(), id.clone().into());
        // When the gateway emitted it (seconds since the epoch), for end-to-end latency.
        if let Some(micros) = header("Hermes-Emitted").and_then(|t| t.parse::<u64>().ok()) {
            map.insert("emitted_at".into(), (micros as f64 / 1e6).into());
        }
    }
    if delivered > 1 {
        counters.redelivered.fetch_add(1, Ordering::Relaxed);
    }
    let delivery = hooks.emit_tracked(&event, context);
    Some(Started {
        message,
        delivery,
        event,
        id,
        delivered,
    })
}

/// Waits for the hooks' outcome of a started event and acknowledges it: done, failed and
/// to be delivered again after a backoff, or terminated.
async fn finish(
    started: Started,
    options: &ConsumeOptions,
    log: &Arc<dyn GatewayLog>,
    counters: &ConsumeCounters,
) {
    let Started {
        message,
        mut delivery,
        event,
        id,
        delivered,
    } = started;
    let timeout = options.handler_timeout;
    // The handler timeout counts from when a hook starts on the event; while it waits
    // behind others (or runs within its time), the broker is told it is in progress, so
    // it neither counts as failed nor is delivered again.
    let step = (options.ack_wait / 2).max(Duration::from_millis(500));
    let outcome = loop {
        let waited = tokio::task::spawn_blocking(move || {
            let waited = delivery.wait_step(timeout, step);
            (delivery, waited)
        })
        .await;
        match waited {
            Ok((_, Waited::Finished(outcome))) => break outcome,
            Ok((back, Waited::Queued | Waited::Running)) => {
                delivery = back;
                let _ = message.ack_with(AckKind::Progress).await;
            }
            Err(e) => break Err(vec![format!("the handler task failed: {e}")]),
        }
    };
    match outcome {
        Ok(()) => {
            counters.handled.fetch_add(1, Ordering::Relaxed);
            if let Err(e) = message.ack().await {
                log.line(&format!(
                    "WARN gateway consume: cannot ack {event} {id}: {e}; it will be delivered again"
                ));
            }
        }
        Err(errors) => {
            counters.failed.fetch_add(1, Ordering::Relaxed);
            let why = errors.join("; ");
            if delivered >= options.max_deliver {
                counters.terminated.fetch_add(1, Ordering::Relaxed);
                log.line(&format!(
                    "ERROR gateway consume: {event} {id} failed on delivery {delivered} of {}: {why}; terminated, it will not be delivered again",
                    options.max_deliver
                ));
                let _ = message.ack_with(AckKind::Term).await;
            } else {
                let delay = backoff(delivered);
                log.line(&format!(
                    "WARN gateway consume: {event} {id} failed on delivery {delivered} of {}: {why}; delivering it again in {} s",
                    options.max_deliver,
                    delay.as_secs()
                ));
                let _ = message.ack_with(AckKind::Nak(Some(delay))).await;
            }
        }
    }
}

/// The event a subject carries: `<prefix>.agent.end` is `agent:end` (the first dot after
/// the prefix is the colon); `None` for a subject outside the prefix, an empty name, or a
/// name with a wildcard (`agent:*` names hooks, never an event).
pub fn event_of_subject(subject: &str, prefix: &str) -> Option<String> {
    let rest = subject.strip_prefix(prefix)?.strip_prefix('.')?;
    let event = rest.replacen('.', ":", 1);
    let bad = event.is_empty() || event.ends_with(':') || event.contains(['*', '>']);
    (!bad).then_some(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_names_the_event_and_wildcards_name_none() {
        let event = |s: &str| event_of_subject(s, "hermes.events");
        assert_eq!(
            event("hermes.events.agent.end").as_deref(),
            Some("agent:end")
        );
        assert_eq!(
            event("hermes.events.command.deploy").as_deref(),
            Some("command:deploy")
        );
        assert_eq!(event("hermes.events.agent.*"), None);
        assert_eq!(event("hermes.events.agent.>"), None);
        assert_eq!(event("hermes.events.agent"), Some("agent".into()));
        assert_eq!(event("hermes.events."), None);
        assert_eq!(event("other.agent.end"), None);
        assert_eq!(event("hermes.eventsx.agent.end"), None);
    }

    #[test]
    fn retries_back_off_and_stop_growing() {
        let secs: Vec<u64> = (1..=9).map(|d| backoff(d).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }
}
