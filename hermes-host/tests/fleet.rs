//! The fleet against a real broker: Debian's `nats-server` with JetStream, started on a
//! free loopback port for each test and stopped after. Gateways publish their events
//! (`hermes gateway run --events-nats`), consumers run a home's gateway hooks on them
//! (`hermes gateway consume`), and an audit hook (`handler.py`) records each event it
//! handled, with its id and delivery count, once it is done with it.

// In tests a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A `nats-server -js` on a free loopback port, with its store in a temporary directory.
struct Broker {
    child: Option<Child>,
    port: u16,
    store: PathBuf,
    _dir: tempfile::TempDir,
}

impl Broker {
    fn start() -> Broker {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut broker = Broker {
            child: None,
            port,
            store: dir.path().join("store"),
            _dir: dir,
        };
        broker.up();
        broker
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts the server (again, on the same port and store) and waits until it accepts.
    fn up(&mut self) {
        let child = Command::new("nats-server")
            .args(["-js", "-sd"])
            .arg(&self.store)
            .args(["-a", "127.0.0.1", "-p", &self.port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run nats-server ({e}); install Debian's nats-server (.ci/run does)")
            });
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the server outright.
    fn down(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.down();
    }
}

fn hermes(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hermes"));
    cmd.arg("--home").arg(home);
    for var in ["HERMES_HOME", "RUST_LOG", "HERMES_LOG"] {
        cmd.env_remove(var);
    }
    cmd
}

/// A home whose gateway hook records every event once handled: `audit.jsonl` gets
/// `{"event", "id", "n", "pid", "t"}`. The handler first sleeps `sleep` seconds, and fails
/// while the file `fail` exists in the home.
fn consumer_home(events: &str, sleep: f64) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let hook = home.path().join("hooks/audit");
    std::fs::create_dir_all(&hook).unwrap();
    std::fs::write(
        hook.join("HOOK.yaml"),
        format!("name: audit\nevents: {events}\n"),
    )
    .unwrap();
    std::fs::write(
        hook.join("handler.py"),
        format!(
            "import json, os, time\nHOME = os.environ['HERMES_HOME']\ndef handle(event_type, context):\n    time.sleep({sleep})\n    if os.path.exists(os.path.join(HOME, 'fail')):\n        with open(os.path.join(HOME, 'attempts.jsonl'), 'a') as f:\n            f.write(json.dumps({{'id': context.get('event_id'), 'n': context.get('delivery_count'), 't': time.time()}}) + '\\n')\n        raise RuntimeError('the audit store is down')\n    with open(os.path.join(HOME, 'audit.jsonl'), 'a') as f:\n        f.write(json.dumps({{'event': event_type, 'id': context.get('event_id'), 'n': context.get('delivery_count'), 'pid': os.getppid(), 't': time.time()}}) + '\\n')\n"
        ),
    )
    .unwrap();
    home
}

const ALL_EVENTS: &str = "[\"gateway:startup\", \"session:*\", \"agent:*\", \"command:*\"]";

fn consume(home: &Path, broker: &Broker, extra: &[&str]) -> Child {
    hermes(home)
        .args([
            "gateway",
            "consume",
            "--nats",
            &broker.url(),
            "--durable",
            "audit",
        ])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Stops a consumer with SIGTERM; returns its log.
fn stop(child: Child) -> String {
    // SAFETY: kill(2) on the test's own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn audit(home: &Path) -> Vec<Value> {
    std::fs::read_to_string(home.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// How many times each event id was handled.
fn handled(home: &Path) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for line in audit(home) {
        *seen
            .entry(line["id"].as_str().unwrap_or("").to_string())
            .or_insert(0) += 1;
    }
    seen
}

/// Runs a stdin gateway on a fresh home with `chats` chats of one message each, publishing
/// to `broker`; returns how many events it published (its last log line says).
fn gateway_burst(broker: &Broker, chats: usize) -> u64 {
    let home = tempfile::tempdir().unwrap();
    let mut child = hermes(home.path())
        .args([
            "gateway",
            "run",
            "--stdin",
            "--trace",
            "off",
            "--events-nats",
            &broker.url(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for i in 0..chats {
            writeln!(
                stdin,
                "{}",
                json!({"chat_id": format!("c{i}"), "user_id": "u", "text": "hi"})
            )
            .unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    published(&log).unwrap_or_else(|| panic!("no events line:\n{log}"))
}

fn published(log: &str) -> Option<u64> {
    log.lines()
        .filter(|l| l.contains(" published, "))
        .find_map(|l| l.strip_prefix("gateway: events: "))
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn three_gateways_and_two_consumers_deliver_every_event_once() {
    let broker = Broker::start();
    let home = consumer_home(ALL_EVENTS, 0.01);
    let consumers = [
        consume(home.path(), &broker, &["--concurrency", "4"]),
        consume(home.path(), &broker, &["--concurrency", "4"]),
    ];
    let total: u64 = (0..3).map(|_| gateway_burst(&broker, 15)).sum();
    // Each gateway: gateway:startup, then per chat session:start, agent:start, agent:end,
    // and session:end at its shutdown.
    assert!(total >= 3 * (1 + 15 * 4), "{total}");
    wait_for("every event in the audit", Duration::from_secs(90), || {
        handled(home.path()).len() as u64 >= total
    });
    let logs: Vec<String> = consumers.into_iter().map(stop).collect();
    let seen = handled(home.path());
    assert_eq!(
        seen.len() as u64,
        total,
        "every event once, and no stranger"
    );
    let duplicates: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        duplicates.is_empty(),
        "duplicates without a crash: {duplicates:?}"
    );
    // Both consumers took a share.
    for log in &logs {
        let share: u64 = log
            .lines()
            .find_map(|l| l.strip_prefix("gateway consume: stopped; "))
            .and_then(|r| r.split(' ').next()?.parse().ok())
            .unwrap_or(0);
        assert!(share > 0, "a consumer handled nothing:\n{log}");
    }
}

#[test]
fn a_consumer_killed_mid_stream_is_taken_over_and_its_events_redelivered() {
    let broker = Broker::start();
    let home = consumer_home(ALL_EVENTS, 0.2);
    let args = [
        "--concurrency",
        "4",
        "--ack-wait",
        "2",
        "--handler-timeout",
        "1",
    ];
    let first = consume(home.path(), &broker, &args);
    let second = consume(home.path(), &broker, &args);
    let total = gateway_burst(&broker, 10);
    wait_for("the first events", Duration::from_secs(60), || {
        audit(home.path()).len() >= 4
    });
    // SAFETY: kill(2) on the test's own child.
    unsafe { libc::kill(first.id() as libc::pid_t, libc::SIGKILL) };
    let _ = first.wait_with_output();
    std::thread::sleep(Duration::from_secs(1));
    let restarted = consume(home.path(), &broker, &args);
    wait_for(
        "every event after the kill",
        Duration::from_secs(120),
        || handled(home.path()).len() as u64 >= total,
    );
    stop(second);
    stop(restarted);
    let lines = audit(home.path());
    let seen = handled(home.path());
    assert_eq!(seen.len() as u64, total, "none lost");
    let redelivered = lines.iter().filter(|l| l["n"].as_i64() > Some(1)).count();
    assert!(
        redelivered > 0,
        "the killed consumer's events came back with a delivery count above 1: {lines:?}"
    );
    let duplicates = seen.values().filter(|n| **n > 1).count();
    eprintln!("{total} events, {redelivered} redelivered, {duplicates} handled twice (the kill)");
}

#[test]
fn with_the_broker_down_for_10s_the_gateway_answers_and_spooled_events_arrive_after() {
    let mut broker = Broker::start();
    let consumer = consumer_home(ALL_EVENTS, 0.0);
    let reader = consume(consumer.path(), &broker, &[]);
    // The consumer connects after its hooks load; a broker that is down then is tried
    // again, but this test is about the gateway's spool.
    wait_for("the consumer", Duration::from_secs(30), || {
        std::fs::read_to_string(consumer.path().join("logs/consume.log"))
            .is_ok_and(|l| l.contains("reading HERMES_EVENTS"))
    });
    let home = tempfile::tempdir().unwrap();
    let mut gateway = hermes(home.path())
        .args([
            "gateway",
            "run",
            "--trace",
            "off",
            "--events-nats",
            &broker.url(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(gateway.stdout.as_mut().unwrap())
        .read_line(&mut first)
        .unwrap();
    let socket = first.trim().to_string();
    let ask = |i: usize| -> bool {
        let Ok(mut stream) = std::os::unix::net::UnixStream::connect(&socket) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
        let text = format!("m{i}");
        if writeln!(
            stream,
            "{}",
            json!({"chat_id": format!("c{i}"), "user_id": "u", "text": text})
        )
        .is_err()
        {
            return false;
        }
        let mut line = String::new();
        let _ = BufReader::new(stream).read_line(&mut line);
        serde_json::from_str::<Value>(&line).is_ok_and(|v| v["text"] == text)
    };
    for i in 0..10 {
        assert!(ask(i), "answered before the outage");
    }
    broker.down();
    let outage = Instant::now();
    let mut i = 10;
    while outage.elapsed() < Duration::from_secs(10) {
        assert!(
            ask(i),
            "the gateway stopped answering while the broker was down"
        );
        i += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let spooled = std::fs::read_dir(home.path().join("spool/events"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(spooled > 0, "nothing was spooled during the outage");
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("gateway.state.json")).unwrap(),
    )
    .unwrap();
    assert!(state["events"]["spooled"].as_u64() > Some(0), "{state}");
    broker.up();
    for j in i..i + 5 {
        assert!(ask(j), "answered after the outage");
    }
    wait_for("the spool to drain", Duration::from_secs(60), || {
        std::fs::read_to_string(home.path().join("gateway.state.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .is_some_and(|s| s["events"]["spooled"] == 0)
    });
    // SAFETY: kill(2) on the test's own child.
    unsafe { libc::kill(gateway.id() as libc::pid_t, libc::SIGTERM) };
    let out = gateway.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stdout);
    let total = published(&log).unwrap_or_else(|| panic!("{log}"));
    assert!(log.contains("is back; publishing the"), "{log}");
    assert!(log.contains(", 0 spooled, 0 dropped"), "{log}");
    let deadline = Instant::now() + Duration::from_secs(90);
    while (handled(consumer.path()).len() as u64) < total {
        if Instant::now() > deadline {
            let got = handled(consumer.path()).len();
            panic!(
                "{got} of {total} events reached the consumer; its log:\n{}",
                stop(reader)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stop(reader);
    assert_eq!(handled(consumer.path()).len() as u64, total);
    // In order: each chat's events arrived as they happened.
    let lines = audit(consumer.path());
    let starts = lines.iter().position(|l| l["event"] == "gateway:startup");
    assert_eq!(starts, Some(0), "the first event first: {:?}", &lines[..3]);
}

#[test]
fn a_failing_handler_is_retried_with_a_backoff_then_terminated_with_a_log_line() {
    let broker = Broker::start();
    let home = consumer_home("[\"gateway:startup\"]", 0.0);
    std::fs::write(home.path().join("fail"), "").unwrap();
    let reader = consume(home.path(), &broker, &["--max-deliver", "3"]);
    gateway_burst(&broker, 0);
    let attempts = || -> Vec<Value> {
        std::fs::read_to_string(home.path().join("attempts.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    wait_for("three attempts", Duration::from_secs(60), || {
        attempts().len() >= 3
    });
    std::thread::sleep(Duration::from_secs(3));
    let log = stop(reader);
    let tries = attempts();
    assert_eq!(
        tries.len(),
        3,
        "no fourth attempt after the termination: {tries:?}"
    );
    let t: Vec<f64> = tries.iter().map(|a| a["t"].as_f64().unwrap()).collect();
    assert!(t[1] - t[0] >= 0.9, "the first retry waited 1 s: {t:?}");
    assert!(t[2] - t[1] >= 1.9, "the second retry waited 2 s: {t:?}");
    for needle in [
        "failed on delivery 1 of 3",
        "the audit store is down",
        "delivering it again in 1 s",
        "delivering it again in 2 s",
        "failed on delivery 3 of 3",
        "terminated, it will not be delivered again",
    ] {
        assert!(log.contains(needle), "{needle:?} missing:\n{log}");
    }
}
