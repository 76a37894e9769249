//! `url:` hooks through the real binary against a real HTTP server on loopback: blocks and
//! context from the response body, connections kept alive, headers expanded only from
//! allowed variables, every failure named with its URL, consent by URL.

use std::time::Duration;

use hermes_tests::http_server::{Reply, Server};
use hermes_tests::support::TestHome;
use serde_json::Value;

/// A policy service: blocks `rm`, adds context on `pre_llm_call`, allows the rest.
fn policy() -> Server {
    Server::start(|request| {
        let payload = request.json();
        match payload["hook_event_name"].as_str() {
            Some("pre_llm_call") => Reply::ok(r#"{"context": "the policy service says hi"}"#),
            _ if payload["tool_input"]["command"]
                .as_str()
                .is_some_and(|c| c.starts_with("rm")) =>
            {
                Reply::ok(
                    r#"{"decision": "block", "reason": "rm is not allowed by the policy service"}"#,
                )
            }
            _ => Reply::ok("{}"),
        }
    })
}

fn hooks_test(home: &TestHome, event: &str) -> Value {
    let run = home.hermes(&["hooks", "test", event, "--json"], &[]);
    run.expect_code(0);
    serde_json::from_str(&run.stdout()).unwrap_or_else(|e| panic!("{e}: {}", run.describe()))
}

#[test]
fn a_url_hook_blocks_over_one_kept_alive_connection_with_only_allowed_variables_expanded() {
    let server = policy();
    let home = TestHome::new();
    let url = server.url("/hook");
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - url: {url}\n      headers:\n        Authorization: 'Bearer ${{HTTP_HOOK_TOKEN}}'\n        X-Leak: 'x${{HTTP_HOOK_SECRET}}x'\n      allowed_env_vars: [HTTP_HOOK_TOKEN]\n"
    ));
    home.hermes(&["hooks", "allow", &url], &[]).expect_code(0);
    let env = [
        ("HERMES_LOG", "warn"),
        ("HTTP_HOOK_TOKEN", "tok-123"),
        ("HTTP_HOOK_SECRET", "do-not-send"),
    ];
    let run = home.terminal_session(&["echo one", "rm -rf junk", "echo two", "echo three"], &env);
    run.expect_code(0);
    assert!(
        run.stdout()
            .contains("rm is not allowed by the policy service"),
        "{}",
        run.describe()
    );
    assert!(run.stdout().contains("three"), "{}", run.describe());
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "{requests:?}");
    assert_eq!(server.connections(), 1, "connections are kept alive");
    for request in &requests {
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/hook")
        );
        assert_eq!(request.headers["content-type"], "application/json");
        assert_eq!(request.headers["authorization"], "Bearer tok-123");
        assert_eq!(
            request.headers["x-leak"], "xx",
            "a variable not in allowed_env_vars is sent empty"
        );
        assert_eq!(request.json()["tool_name"], "terminal");
    }
    assert!(
        run.stderr()
            .contains("names ${HTTP_HOOK_SECRET}, which is not in allowed_env_vars"),
        "{}",
        run.describe()
    );
}

#[test]
fn a_url_hook_adds_context_and_hooks_test_shows_its_status() {
    let server = policy();
    let home = TestHome::new();
    home.config(&format!(
        "hooks:\n  pre_llm_call:\n    - url: {}\n",
        server.url("/ctx")
    ));
    let report = hooks_test(&home, "pre_llm_call");
    let hook = &report["hooks"][0];
    assert_eq!(hook["http_status"], 200, "{report}");
    assert_eq!(
        hook["parsed"]["context"], "the policy service says hi",
        "{report}"
    );
    let text = home.hermes(&["hooks", "test", "pre_llm_call"], &[]);
    assert!(text.stdout().contains("HTTP 200"), "{}", text.describe());
}

/// `hooks test --json` for one `pre_tool_call` url hook with `extra` YAML keys.
fn failing(url: &str, extra: &str) -> Value {
    let home = TestHome::new();
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - url: {url}\n      timeout: 1\n{extra}"
    ));
    let report = hooks_test(&home, "pre_tool_call");
    report["hooks"][0].clone()
}

fn warnings(hook: &Value) -> String {
    hook["warnings"].to_string()
}

#[test]
fn a_500_a_timeout_a_refused_connection_and_bad_json_fail_open_naming_the_url() {
    let server = Server::start(|request| match request.path.as_str() {
        "/500" => Reply::status(500, "database down"),
        "/slow" => Reply {
            delay: Duration::from_secs(3),
            ..Reply::ok("{}")
        },
        _ => Reply::ok("this is not json"),
    });

    let url = server.url("/500");
    let hook = failing(&url, "");
    assert_eq!(hook["parsed"], Value::Null, "fail open: {hook}");
    assert!(
        warnings(&hook).contains(&format!(
            "HTTP hook failed (event=pre_tool_call url={url}): POST {url} answered HTTP 500 Internal Server Error: database down"
        )),
        "{hook}"
    );

    let url = server.url("/slow");
    let hook = failing(&url, "");
    assert_eq!(hook["timed_out"], true, "{hook}");
    assert!(warnings(&hook).contains(&format!("url={url})")), "{hook}");

    let url = server.url("/junk");
    let hook = failing(&url, "");
    assert!(
        warnings(&hook).contains(&format!(
            "HTTP hook response body was not valid JSON (event=pre_tool_call url={url}): this is not json"
        )),
        "{hook}"
    );

    // A port nobody listens on: bind one, then let it go.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    let hook = failing(&url, "");
    assert_eq!(hook["parsed"], Value::Null, "{hook}");
    assert!(
        warnings(&hook).contains(&format!("POST {url} failed: connection refused")),
        "{hook}"
    );
}

#[test]
fn a_fail_closed_url_hook_blocks_on_each_failure() {
    let server = Server::start(|request| match request.path.as_str() {
        "/500" => Reply::status(503, ""),
        _ => Reply::ok("not json"),
    });
    for (path, reason) in [
        ("/500", "POST URL answered HTTP 503 Service Unavailable"),
        ("/junk", "response body was not valid JSON"),
    ] {
        let url = server.url(path);
        let hook = failing(&url, "      fail_closed: true\n");
        let expected = format!("hook {url} failed closed: {}", reason.replace("URL", &url));
        assert_eq!(hook["parsed"]["message"], expected, "{hook}");
    }
}

#[test]
fn consent_is_by_url_and_list_doctor_allow_and_revoke_handle_url_hooks() {
    let server = policy();
    let home = TestHome::new();
    let url = server.url("/hook");
    home.config(&format!("hooks:\n  pre_tool_call:\n    - url: {url}\n"));

    // Not approved: skipped, and the server never hears from it.
    let run = home.terminal_session(&["rm -rf junk"], &[("HERMES_LOG", "warn")]);
    assert!(
        run.stderr().contains("not allowlisted"),
        "{}",
        run.describe()
    );
    assert!(server.requests().is_empty());

    let list: Value =
        serde_json::from_str(&home.hermes(&["hooks", "list", "--json"], &[]).stdout()).unwrap();
    let entry = &list["hooks"][0];
    assert_eq!(
        (entry["type"].as_str(), entry["url"].as_str()),
        (Some("http"), Some(url.as_str()))
    );
    assert_eq!(entry["allowlisted"], false);

    home.hermes(&["hooks", "allow", &url], &[]).expect_code(0);
    let doctor = home.hermes(&["hooks", "doctor"], &[]);
    assert!(
        doctor
            .stdout()
            .contains(&format!("✓ HTTP hook: POSTs the payload to {url}")),
        "{}",
        doctor.describe()
    );
    assert!(
        doctor.stdout().contains("✓ allowlisted"),
        "{}",
        doctor.describe()
    );
    assert!(
        doctor.stdout().contains("produced valid JSON"),
        "{}",
        doctor.describe()
    );

    let run = home.terminal_session(&["rm -rf junk"], &[("HERMES_LOG", "warn")]);
    assert!(
        run.stdout()
            .contains("rm is not allowed by the policy service"),
        "{}",
        run.describe()
    );

    let revoke = home.hermes(&["hooks", "revoke", &url], &[]);
    assert!(
        revoke.stdout().contains("Removed 1 allowlist entry"),
        "{}",
        revoke.describe()
    );
    let list = home.hermes(&["hooks", "list"], &[]);
    assert!(
        list.stdout().contains(&format!("POST {url}")),
        "{}",
        list.describe()
    );
    assert!(
        list.stdout().contains("not allowlisted"),
        "{}",
        list.describe()
    );
}

#[test]
fn hooks_test_posts_a_payload_file_in_either_shape_to_a_url_hook() {
    let server = policy();
    let home = TestHome::new();
    let url = server.url("/hook");
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - url: {url}\n      format: claude\n      matcher: Bash\n"
    ));
    // The same call, once with Hermes keys and once with Claude Code's.
    let shapes = [
        r#"{"tool_name": "terminal", "args": {"command": "rm -rf junk"}, "session_id": "from-file"}"#,
        r#"{"hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rm -rf junk"}, "session_id": "from-file"}"#,
    ];
    for (i, payload) in shapes.iter().enumerate() {
        let file = home.path().join(format!("payload-{i}.json"));
        std::fs::write(&file, payload).unwrap();
        let run = home.hermes(
            &[
                "hooks",
                "test",
                "pre_tool_call",
                "--json",
                "--payload-file",
                file.to_str().unwrap(),
            ],
            &[],
        );
        run.expect_code(0);
        let report: Value = serde_json::from_str(&run.stdout())
            .unwrap_or_else(|e| panic!("{e}: {}", run.describe()));
        let hook = &report["hooks"][0];
        assert_eq!(
            hook["parsed"]["message"],
            "rm is not allowed by the policy service",
            "{}",
            run.describe()
        );
    }
    // What the service received is the file's payload, in the hook's (Claude) shape.
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    for request in &requests {
        let body = request.json();
        assert_eq!(
            (
                &body["tool_name"],
                &body["tool_input"]["command"],
                &body["session_id"]
            ),
            (
                &Value::from("Bash"),
                &Value::from("rm -rf junk"),
                &Value::from("from-file")
            ),
            "{body}"
        );
    }
    // A key of neither shape is refused before anything is sent.
    let typo = home.path().join("typo.json");
    std::fs::write(&typo, r#"{"tool_nmae": "terminal"}"#).unwrap();
    let run = home.hermes(
        &[
            "hooks",
            "test",
            "pre_tool_call",
            "--payload-file",
            typo.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        run.stdout().contains("unknown top-level key(s) tool_nmae"),
        "{}",
        run.describe()
    );
    assert_eq!(server.requests().len(), 2, "nothing more was posted");
}

/// The HTTPS policy service of `tests/fixtures/tls/serve.py`, with the loopback certificate
/// that the test CA (`ca.pem`) signs; stopped on drop.
struct TlsServer {
    child: std::process::Child,
    port: u16,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl TlsServer {
    fn start() -> TlsServer {
        use std::io::BufRead as _;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.log");
        let mut child = std::process::Command::new("python3")
            .arg(tls_fixture("serve.py"))
            .arg(tls_fixture("server.pem"))
            .arg(tls_fixture("server.key"))
            .arg(&log)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs the HTTPS test server (.ci/run installs python3)");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("not a port: {line:?}"));
        TlsServer {
            child,
            port,
            log,
            _dir: dir,
        }
    }

    fn requests(&self) -> usize {
        std::fs::read_to_string(&self.log).map_or(0, |t| t.lines().count())
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tls_fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tls")
        .join(name)
}

#[test]
fn an_https_hook_verifies_the_servers_certificate_against_the_platform_roots() {
    let server = TlsServer::start();
    let url = format!("https://127.0.0.1:{}/hook", server.port);
    let home = TestHome::new();
    home.config(&format!(
        "hooks:\n  pre_tool_call:\n    - url: {url}\n      timeout: 5\n      fail_closed: true\n"
    ));
    let hook = |env: &[(&str, &str)]| -> Value {
        let run = home.hermes(&["hooks", "test", "pre_tool_call", "--json"], env);
        run.expect_code(0);
        let report: Value = serde_json::from_str(&run.stdout())
            .unwrap_or_else(|e| panic!("{e}: {}", run.describe()));
        report["hooks"][0].clone()
    };

    // Signed by a CA the machine does not trust: the handshake is refused, nothing is
    // posted, and the fail-closed hook blocks naming the URL and the certificate.
    let refused = hook(&[]);
    let message = refused["parsed"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with(&format!("hook {url} failed closed: POST {url} failed:"))
            && message.to_lowercase().contains("certificate"),
        "{refused}"
    );
    assert_eq!(
        server.requests(),
        0,
        "a payload was sent to an unverified server"
    );

    // The same server, with its CA among the roots (SSL_CERT_FILE, which the platform
    // verifier reads on Linux): the handshake passes and the service's answer applies, so
    // what refused it above was the verification and nothing else.
    let ca = tls_fixture("ca.pem");
    let trusted = hook(&[("SSL_CERT_FILE", ca.to_str().unwrap())]);
    assert_eq!(
        trusted["parsed"]["message"], "blocked over TLS",
        "{trusted}"
    );
    assert_eq!(server.requests(), 1);
}

#[test]
fn an_https_url_to_a_server_that_does_not_speak_tls_is_an_error_naming_the_url() {
    // The loopback server speaks plain HTTP: the TLS handshake must fail, and the hook must
    // say so with its URL instead of sending the payload in clear or answering nothing.
    let server = policy();
    let url = server.url("/hook").replacen("http://", "https://", 1);
    let hook = failing(&url, "      fail_closed: true\n");
    assert!(
        warnings(&hook).contains(&format!(
            "HTTP hook failed (event=pre_tool_call url={url}): POST {url} failed:"
        )),
        "{hook}"
    );
    assert!(
        hook["parsed"]["message"].as_str().is_some_and(
            |m| m.starts_with(&format!("hook {url} failed closed: POST {url} failed:"))
        ),
        "{hook}"
    );
    assert!(
        server.requests().is_empty(),
        "no request is readable as plain HTTP"
    );
}
