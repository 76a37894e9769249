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
    config: Option<PathBuf>,
    _dir: tempfile::TempDir,
}

impl Broker {
    fn start() -> Broker {
        Broker::start_with(None)
    }

    /// A broker whose configuration file says `config` (`max_payload: 65536`, say).
    fn start_with(config: Option<&str>) -> Broker {
        let dir = tempfile::tempdir().unwrap();
        let config = config.map(|text| {
            let path = dir.path().join("nats.conf");
            std::fs::write(&path, text).unwrap();
            path
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut broker = Broker {
            child: None,
            port,
            store: dir.path().join("store"),
            config,
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
        let mut cmd = Command::new("nats-server");
        if let Some(config) = &self.config {
            cmd.arg("-c").arg(config);
        }
        let child = cmd
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

/// `hermes gateway run --stdin` on `home`, publishing to `broker`: stdin piped for the
/// messages, stderr for the log.
fn stdin_gateway(home: &Path, broker: &Broker) -> Child {
    hermes(home)
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
        .unwrap()
}

/// Runs a stdin gateway on a fresh home with `chats` chats of one message each, publishing
/// to `broker`; returns how many events it published (its last log line says).
fn gateway_burst(broker: &Broker, chats: usize) -> u64 {
    let home = tempfile::tempdir().unwrap();
    let mut child = stdin_gateway(home.path(), broker);
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

/// The events of a gateway that are in the stream, from its last log line: those the
/// broker took as new, and those it already had (an ack lost in an outage, the event sent
/// again from the spool).
fn published(log: &str) -> Option<u64> {
    let line = log
        .lines()
        .filter(|l| l.contains(" published, "))
        .find_map(|l| l.strip_prefix("gateway: events: "))?;
    let new: u64 = line.split(' ').next()?.parse().ok()?;
    let again: u64 = line
        .rsplit(", ")
        .next()
        .and_then(|part| part.strip_suffix(" duplicate(s) the broker had already"))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    Some(new + again)
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

/// Publishes one message on the broker's core protocol, as any client allowed on the
/// stream's subjects could: `headers` as `Name: value` lines.
fn raw_publish(broker: &Broker, subject: &str, headers: &[(&str, &str)], body: &str) {
    use std::io::Read as _;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", broker.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut head = String::from("NATS/1.0\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let frame = format!(
        "CONNECT {{\"verbose\":false,\"pedantic\":false,\"headers\":true}}\r\nHPUB {subject} {} {}\r\n{head}{body}\r\nPING\r\n",
        head.len(),
        head.len() + body.len()
    );
    stream.write_all(frame.as_bytes()).unwrap();
    // PONG after PING: the server has the message.
    let mut seen = String::new();
    let mut buf = [0u8; 4096];
    while !seen.contains("PONG") {
        let n = stream.read(&mut buf).unwrap();
        assert!(n > 0, "the broker closed the connection: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(!seen.contains("-ERR"), "{seen}");
}

#[test]
fn the_subject_names_the_event_whatever_the_header_says() {
    let broker = Broker::start();
    let home = consumer_home(ALL_EVENTS, 0.0);
    // A gateway creates the stream (and publishes gateway:startup).
    gateway_burst(&broker, 0);
    let reader = consume(home.path(), &broker, &[]);
    // A publisher allowed only `agent.end` claims a command, then a wildcard name.
    raw_publish(
        &broker,
        "hermes.events.agent.end",
        &[
            ("Hermes-Event", "command:deploy"),
            ("Hermes-Event-Id", "forged-1"),
        ],
        "{}",
    );
    raw_publish(
        &broker,
        "hermes.events.agent.end",
        &[("Hermes-Event", "agent:*"), ("Hermes-Event-Id", "forged-2")],
        "{}",
    );
    wait_for("both messages handled", Duration::from_secs(30), || {
        let seen = handled(home.path());
        seen.contains_key("forged-1") && seen.contains_key("forged-2")
    });
    std::thread::sleep(Duration::from_millis(500));
    let log = stop(reader);
    let mut forged: Vec<(String, String)> = audit(home.path())
        .iter()
        .filter(|l| l["id"].as_str().is_some_and(|id| id.starts_with("forged")))
        .map(|l| {
            (
                l["id"].as_str().unwrap().to_string(),
                l["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    // Events run concurrently: compare as a set.
    forged.sort();
    assert_eq!(
        forged,
        [
            ("forged-1".to_string(), "agent:end".to_string()),
            ("forged-2".to_string(), "agent:end".to_string())
        ],
        "{log}"
    );
}

#[test]
fn event_ids_are_unguessable_and_one_event_over_max_payload_loses_nothing_else() {
    // A broker that takes messages of 64 KiB at most (the default is 1 MiB).
    let broker = Broker::start_with(Some("max_payload: 65536\n"));
    let consumer = consumer_home(ALL_EVENTS, 0.0);
    let reader = consume(consumer.path(), &broker, &[]);
    let home = tempfile::tempdir().unwrap();
    // What the next ids would have been before: host-pid-start-counter. A publisher that
    // sends them first cannot make the broker drop the gateway's events any more.
    for n in 1..=20 {
        raw_publish(
            &broker,
            "hermes.events.other",
            &[("Nats-Msg-Id", &format!("guess-{n}"))],
            "{}",
        );
    }
    let mut child = stdin_gateway(home.path(), &broker);
    {
        let mut stdin = child.stdin.take().unwrap();
        // A 200 kB slash command: its `command:deploy` event is over the broker's limit.
        let big = format!("/deploy {}", "x".repeat(200_000));
        writeln!(
            stdin,
            "{}",
            json!({"chat_id": "big", "user_id": "u", "text": big})
        )
        .unwrap();
        for i in 0..3 {
            writeln!(
                stdin,
                "{}",
                json!({"chat_id": format!("c{i}"), "user_id": "u", "text": "hi"})
            )
            .unwrap();
        }
    }
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    assert!(!log.contains("stopped answering"), "{log}");
    let total = published(&log).unwrap_or_else(|| panic!("no events line:\n{log}"));
    wait_for("every event in the audit", Duration::from_secs(60), || {
        handled(consumer.path()).len() as u64 >= total
    });
    let consumer_log = stop(reader);
    let lines = audit(consumer.path());
    let events: Vec<&str> = lines.iter().filter_map(|l| l["event"].as_str()).collect();
    assert!(
        events.contains(&"command:deploy"),
        "{events:?}\n{log}\n{consumer_log}"
    );
    assert_eq!(
        events.iter().filter(|e| **e == "agent:end").count(),
        3,
        "{events:?}\n{log}"
    );
    for line in &lines {
        let id = line["id"].as_str().unwrap();
        assert!(
            id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()),
            "an event id that could be guessed: {id}"
        );
    }
}

#[test]
fn an_event_queued_behind_a_hanging_one_is_timed_from_its_own_start() {
    let broker = Broker::start();
    let home = tempfile::tempdir().unwrap();
    let hook = home.path().join("hooks/slow");
    std::fs::create_dir_all(&hook).unwrap();
    std::fs::write(
        hook.join("HOOK.yaml"),
        format!("name: slow\nevents: {ALL_EVENTS}\n"),
    )
    .unwrap();
    // The first delivery of gateway:startup hangs past the handler timeout; everything
    // else is quick but waits behind it on the hook's queue.
    std::fs::write(
        hook.join("handler.py"),
        "import json, os, time\nHOME = os.environ['HERMES_HOME']\ndef handle(event_type, context):\n    if event_type == 'gateway:startup' and context.get('delivery_count') == 1:\n        time.sleep(5)\n    with open(os.path.join(HOME, 'audit.jsonl'), 'a') as f:\n        f.write(json.dumps({'event': event_type, 'id': context.get('event_id'), 'n': context.get('delivery_count')}) + '\\n')\n",
    )
    .unwrap();
    let reader = consume(
        home.path(),
        &broker,
        &["--handler-timeout", "2", "--ack-wait", "20"],
    );
    let total = gateway_burst(&broker, 3);
    wait_for("every event handled", Duration::from_secs(60), || {
        handled(home.path()).len() as u64 >= total
    });
    std::thread::sleep(Duration::from_secs(3));
    let log = stop(reader);
    let lines = audit(home.path());
    let innocent: Vec<&Value> = lines
        .iter()
        .filter(|l| l["event"] != "gateway:startup")
        .collect();
    assert_eq!(innocent.len() as u64, total - 1, "{lines:?}\n{log}");
    for line in &innocent {
        assert_eq!(line["n"], 1, "handled more than once: {lines:?}\n{log}");
    }
    assert!(
        log.contains(", 0 terminated") && !log.contains("will not be delivered again"),
        "an event was terminated:\n{log}"
    );
}
