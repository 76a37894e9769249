//! The adapters: where messages come from and where answers go.
//!
//! Both adapters speak the JSON-lines protocol of [`wire`](super::wire):
//!
//! - [`TcpAdapter`] listens on a loopback address; every connection is a client that sends
//!   messages for any number of chats and receives every outbound message of the chats it
//!   wrote to.
//! - [`serve_lines`] reads messages from any reader (the `hermes` binary gives it stdin)
//!   and writes answers to a writer (stdout).
//!
//! # Connections
//!
//! Each client is a [`Connection`]: a writer thread fed by a channel, so a chat worker never
//! waits on a slow client, and the lines of one chat reach a client in the order they were
//! produced. A connection subscribes to a chat (`<platform>:<chat_id>`) when it sends a
//! message for it. When the client closes its sending side, the connection stays until the
//! answers to everything it sent have been written, then it closes: a client can write its
//! messages, shut down writing, and read answers until end of file.

use std::collections::HashMap;
use std::io::{BufRead, Read as _, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Server;
use super::wire::{Inbound, Outbound, error_line};

/// The longest inbound line accepted; a longer one closes the connection.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// How often the accept loop looks whether the server is shutting down.
const ACCEPT_POLL: Duration = Duration::from_millis(20);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Messages a connection sent that are not fully answered yet, and whether it stopped
/// sending.
#[derive(Default)]
struct Pending {
    inflight: usize,
    read_closed: bool,
}

/// One client: a writer thread fed by a channel.
pub struct Connection {
    id: u64,
    name: String,
    tx: Mutex<Option<Sender<String>>>,
    alive: Arc<AtomicBool>,
    pending: Mutex<Pending>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish()
    }
}

impl Connection {
    /// Queues one line for the client. False when the connection is closed or its client
    /// went away.
    pub fn send_line(&self, line: String) -> bool {
        if !self.alive.load(Ordering::SeqCst) {
            return false;
        }
        match &*lock(&self.tx) {
            Some(tx) => tx.send(line).is_ok(),
            None => false,
        }
    }

    /// A message from this connection was accepted for handling.
    pub(crate) fn begin(&self) {
        lock(&self.pending).inflight += 1;
    }

    /// A message from this connection was handled (answered, skipped, refused or dropped).
    pub(crate) fn end(self: &Arc<Self>, router: &Router) {
        let done = {
            let mut p = lock(&self.pending);
            p.inflight = p.inflight.saturating_sub(1);
            p.read_closed && p.inflight == 0
        };
        if done {
            router.forget(self);
        }
    }

    /// The client will send nothing more: close once every message it sent is answered.
    pub(crate) fn read_closed(self: &Arc<Self>, router: &Router) {
        let done = {
            let mut p = lock(&self.pending);
            p.read_closed = true;
            p.inflight == 0
        };
        if done {
            router.forget(self);
        }
    }

    fn close(&self) {
        lock(&self.tx).take();
    }
}

/// Every open connection, and which chats each one follows.
#[derive(Default)]
pub struct Router {
    next_id: AtomicU64,
    subscriptions: Mutex<HashMap<String, Vec<Arc<Connection>>>>,
    open: Mutex<HashMap<u64, Arc<Connection>>>,
    writers: Mutex<Vec<JoinHandle<()>>>,
}

impl Router {
    /// Opens a connection writing lines to `out`. `on_close` runs on the writer thread
    /// after the last line was written (a TCP connection shuts its socket down there).
    ///
    /// # Errors
    ///
    /// When the writer thread cannot be started.
    pub fn open(
        &self,
        name: String,
        mut out: Box<dyn Write + Send>,
        on_close: Option<Box<dyn FnOnce() + Send>>,
    ) -> std::io::Result<Arc<Connection>> {
        let (tx, rx) = channel::<String>();
        let alive = Arc::new(AtomicBool::new(true));
        let writer_alive = alive.clone();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let handle = std::thread::Builder::new()
            .name(format!("gateway-out-{id}"))
            .spawn(move || {
                for mut line in rx {
                    line.push('\n');
                    if out
                        .write_all(line.as_bytes())
                        .and_then(|()| out.flush())
                        .is_err()
                    {
                        // The client went away: later lines are refused, not queued forever.
                        writer_alive.store(false, Ordering::SeqCst);
                        break;
                    }
                }
                if let Some(on_close) = on_close {
                    on_close();
                }
            })?;
        let conn = Arc::new(Connection {
            id,
            name,
            tx: Mutex::new(Some(tx)),
            alive,
            pending: Mutex::new(Pending::default()),
        });
        lock(&self.open).insert(id, conn.clone());
        let mut writers = lock(&self.writers);
        writers.retain(|w| !w.is_finished());
        writers.push(handle);
        Ok(conn)
    }

    /// `conn` receives the outbound messages of chat `key` from now on.
    pub fn subscribe(&self, key: &str, conn: &Arc<Connection>) {
        let mut subs = lock(&self.subscriptions);
        let list = subs.entry(key.to_string()).or_default();
        if !list.iter().any(|c| c.id == conn.id) {
            list.push(conn.clone());
        }
    }

    /// Sends `message` to every connection following its chat; returns how many took it.
    pub fn send(&self, message: &Outbound) -> usize {
        let key = message.session_key();
        let line = message.to_line();
        let mut subs = lock(&self.subscriptions);
        let Some(list) = subs.get_mut(&key) else {
            return 0;
        };
        list.retain(|c| c.alive.load(Ordering::SeqCst));
        let delivered = list.iter().filter(|c| c.send_line(line.clone())).count();
        if list.is_empty() {
            subs.remove(&key);
        }
        delivered
    }

    /// Closes `conn` once its queued lines are written, and drops its subscriptions.
    fn forget(&self, conn: &Arc<Connection>) {
        {
            let mut subs = lock(&self.subscriptions);
            subs.retain(|_, list| {
                list.retain(|c| c.id != conn.id);
                !list.is_empty()
            });
        }
        lock(&self.open).remove(&conn.id);
        conn.close();
    }

    /// Closes every connection and waits, until `deadline` has passed, for their queued
    /// lines to be written. Returns how many writers were still busy at the deadline.
    pub fn close(&self, deadline: Duration) -> usize {
        let started = Instant::now();
        lock(&self.subscriptions).clear();
        let open: Vec<Arc<Connection>> = lock(&self.open).drain().map(|(_, c)| c).collect();
        for conn in &open {
            conn.close();
        }
        let writers: Vec<JoinHandle<()>> = std::mem::take(&mut *lock(&self.writers));
        let mut busy = 0;
        for writer in writers {
            while !writer.is_finished() && started.elapsed() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if writer.is_finished() {
                let _ = writer.join();
            } else {
                busy += 1;
            }
        }
        busy
    }
}

/// Reads inbound lines from `input` until end of file and hands each message to `server`;
/// answers go to `conn`. A line that is not a usable message is answered with an `error`
/// line and otherwise ignored; blank lines are ignored.
pub fn serve_lines(mut input: impl BufRead, conn: &Arc<Connection>, server: &Server) {
    let mut line_no = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let read = (&mut input)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf);
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        line_no += 1;
        if buf.len() > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
            conn.send_line(error_line(&format!(
                "line {line_no}: longer than {MAX_LINE_BYTES} bytes; closing"
            )));
            break;
        }
        let Ok(text) = std::str::from_utf8(&buf) else {
            conn.send_line(error_line(&format!("line {line_no}: not UTF-8")));
            continue;
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match Inbound::parse(text, server.platform()) {
            Ok(message) => {
                if let Err(why) = server.receive(message, conn) {
                    conn.send_line(error_line(&format!("line {line_no}: {why}")));
                }
            }
            Err(why) => {
                conn.send_line(error_line(&format!("line {line_no}: {why}")));
            }
        }
    }
    conn.read_closed(server.router());
}

/// Reads messages from `input` (stdin) and writes every answer to `output` (stdout), until
/// `input` ends. Answers to messages still being handled are written later, until the
/// server shuts down.
///
/// # Errors
///
/// When the writer thread cannot be started.
pub fn serve_stdio(
    input: impl BufRead,
    output: Box<dyn Write + Send>,
    server: &Server,
) -> std::io::Result<()> {
    let conn = server.router().open("stdio".into(), output, None)?;
    serve_lines(input, &conn, server);
    Ok(())
}

/// A loopback TCP listener speaking the JSON-lines protocol.
pub struct TcpAdapter {
    listener: TcpListener,
}

impl TcpAdapter {
    /// Binds `addr`, which must be a loopback address (port 0 picks a free port).
    ///
    /// # Errors
    ///
    /// `InvalidInput` for a non-loopback address: the protocol has no authentication of
    /// its own, so it is only offered to this machine. Otherwise the bind error.
    pub fn bind(addr: SocketAddr) -> std::io::Result<TcpAdapter> {
        if !addr.ip().is_loopback() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{addr} is not a loopback address; the gateway listens on 127.0.0.1 or [::1] only"
                ),
            ));
        }
        Ok(TcpAdapter {
            listener: TcpListener::bind(addr)?,
        })
    }

    /// The address it listens on.
    ///
    /// # Errors
    ///
    /// The socket's error.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections on a thread of its own until the server shuts down; each
    /// connection is read on a thread of its own.
    ///
    /// # Errors
    ///
    /// When the listener cannot be made non-blocking or the thread cannot be started.
    pub fn serve(self, server: Server) -> std::io::Result<JoinHandle<()>> {
        self.listener.set_nonblocking(true)?;
        std::thread::Builder::new()
            .name("gateway-accept".into())
            .spawn(move || {
                while !server.is_closed() {
                    match self.listener.accept() {
                        Ok((stream, peer)) => accept(stream, peer, &server),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(ACCEPT_POLL)
                        }
                        Err(e) => {
                            tracing::warn!("gateway: accept failed: {e}");
                            std::thread::sleep(ACCEPT_POLL);
                        }
                    }
                }
            })
    }
}

fn accept(stream: TcpStream, peer: SocketAddr, server: &Server) {
    let setup = || -> std::io::Result<(TcpStream, TcpStream)> {
        stream.set_nonblocking(false)?;
        let _ = stream.set_nodelay(true);
        Ok((stream.try_clone()?, stream.try_clone()?))
    };
    let (writer, closer) = match setup() {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!("gateway: connection from {peer}: {e}");
            return;
        }
    };
    let on_close: Box<dyn FnOnce() + Send> = Box::new(move || {
        let _ = closer.shutdown(std::net::Shutdown::Both);
    });
    let conn = match server
        .router()
        .open(format!("tcp {peer}"), Box::new(writer), Some(on_close))
    {
        Ok(conn) => conn,
        Err(e) => {
            tracing::warn!("gateway: connection from {peer}: {e}");
            return;
        }
    };
    let server = server.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("gateway-in-{peer}"))
        .spawn(move || {
            serve_lines(std::io::BufReader::new(stream), &conn, &server);
        });
    if let Err(e) = spawned {
        tracing::warn!("gateway: connection from {peer}: {e}");
    }
}

/// What were these items' doc examples: the binary's docs are not doctested.
#[cfg(test)]
mod examples {
    #[test]
    fn bind_works_as_documented() {
        let tcp = crate::app::server::TcpAdapter::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(tcp.local_addr().unwrap().ip().is_loopback());
        assert!(crate::app::server::TcpAdapter::bind("0.0.0.0:0".parse().unwrap()).is_err());
    }
}
