//! The cost of one `url:` hook firing on loopback, beside its floors in the same run.
//!
//! - `registry`: `pre_tool_call` through the registry to one HTTP hook (payload built,
//!   POSTed on a kept-alive connection, the answer read and evaluated);
//! - `client_post`: the same POST through the hook's HTTP client alone;
//! - `raw_tcp`: the same request bytes written on a plain kept-alive `TcpStream` and the
//!   response read back, the floor any HTTP client pays.
//!
//! The server is the tests' loopback server (a thread per connection, answering `{}`).
//!
//! Run: `cargo bench -p hermes-tests --bench http_hook`

// In benches a panic is the failure report, so unwrapping is the assertion.
#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use hermes_hooks_abi::hooks::payload::PreToolCallEvent;
use hermes_host::config::Config;
use hermes_host::registry::Registry;
use hermes_host::shell::{self, Consent, http};
use hermes_tests::http_server::{Reply, Server};
use hermes_tests::support::TestHome;

const PAYLOAD: &str = r#"{"hook_event_name": "pre_tool_call", "tool_name": "terminal", "tool_input": {"command": "ls -la /tmp"}, "session_id": "sess-1", "cwd": "/tmp", "extra": {}}"#;

fn http_hook(c: &mut Criterion) {
    let server = Server::start(|_| Reply::ok("{}"));
    let url = server.url("/hook");
    let home = TestHome::new();
    let config = Config::parse(&format!("hooks:\n  pre_tool_call:\n    - url: {url}\n")).unwrap();
    let mut registry = Registry::new();
    let report = shell::register_from_config(
        &home.home(),
        &config.hooks,
        Consent::AcceptForThisRun,
        &mut registry,
    );
    assert_eq!(report.registered.len(), 1, "{:?}", report.warnings);
    let event = PreToolCallEvent {
        tool_name: "terminal",
        args: r#"{"command": "ls -la /tmp"}"#,
        task_id: "task-1",
        session_id: "sess-1",
        tool_call_id: "call-1",
        turn_id: None,
        api_request_id: None,
        middleware_trace: "[]",
    };

    let mut group = c.benchmark_group("http_hook");
    group.measurement_time(Duration::from_secs(5));
    group.bench_function("registry", |b| {
        b.iter(|| black_box(registry.pre_tool_call(black_box(&event))))
    });
    let client = http::Client::new();
    let spec = http::HttpSpec {
        url: url.clone(),
        ..http::HttpSpec::default()
    };
    group.bench_function("client_post", |b| {
        b.iter(|| black_box(client.post(&spec, PAYLOAD.as_bytes(), Duration::from_secs(5))))
    });
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/hook")
        .to_string();
    let stream = TcpStream::connect(&addr).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let request = format!(
        "POST /hook HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{PAYLOAD}",
        PAYLOAD.len()
    );
    group.bench_function("raw_tcp", |b| {
        b.iter(|| {
            writer.write_all(request.as_bytes()).unwrap();
            let mut length = 0;
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            black_box(body)
        })
    });
    group.finish();
}

criterion_group!(benches, http_hook);
criterion_main!(benches);
