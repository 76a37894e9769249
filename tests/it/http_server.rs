//! A small HTTP/1.1 server on loopback, for the tests and benchmarks of HTTP hooks: it keeps
//! connections alive, records every request, and answers with what the test's handler says
//! (a status, a body, an optional delay).

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as the server read it.
#[derive(Clone, Debug)]
pub struct Request {
    /// `POST`, `GET`, ...
    pub method: String,
    /// The request target (`/hook`).
    pub path: String,
    /// Header names in lower case; values as sent.
    pub headers: BTreeMap<String, String>,
    /// The body, as text.
    pub body: String,
}

impl Request {
    /// The body parsed as JSON (`Null` when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// What the handler answers.
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: String,
    /// Waited before answering.
    pub delay: Duration,
}

impl Reply {
    /// `200` with `body`.
    pub fn ok(body: &str) -> Reply {
        Reply::status(200, body)
    }

    /// `status` with `body`.
    pub fn status(status: u16, body: &str) -> Reply {
        Reply {
            status,
            body: body.to_string(),
            delay: Duration::ZERO,
        }
    }
}

type Handler = dyn Fn(&Request) -> Reply + Send + Sync;

/// A running server; it stops accepting when dropped (connections end with the process).
pub struct Server {
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Request>>>,
    connections: Arc<AtomicUsize>,
}

impl Server {
    /// Starts a server on `127.0.0.1` at a free port, answering with `handler`.
    pub fn start(handler: impl Fn(&Request) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("the bound address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let handler: Arc<Handler> = Arc::new(handler);
        let (r, c) = (requests.clone(), connections.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                c.fetch_add(1, Ordering::SeqCst);
                let (r, handler) = (r.clone(), handler.clone());
                std::thread::spawn(move || serve(stream, &r, &*handler));
            }
        });
        Server {
            addr,
            requests,
            connections,
        }
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().expect("requests lock").clone()
    }

    /// TCP connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Answers requests on one connection until the client closes it.
fn serve(stream: TcpStream, requests: &Mutex<Vec<Request>>, handler: &Handler) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (method, path) = (
            parts.next().unwrap_or("").to_string(),
            parts.next().unwrap_or("").to_string(),
        );
        let mut headers = BTreeMap::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.insert(name.trim().to_lowercase(), value.trim().to_string());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let request = Request {
            method,
            path,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        };
        let reply = handler(&request);
        requests.lock().expect("requests lock").push(request);
        std::thread::sleep(reply.delay);
        let response = format!(
            "HTTP/1.1 {} Status\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{}",
            reply.status,
            reply.body.len(),
            reply.body
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
