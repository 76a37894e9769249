//! The adapters: where messages come from and where answers go.
//!
//! Both adapters speak the JSON-lines protocol of [`wire`](super::wire):
//!
//! - [`UnixAdapter`], the default, listens on `$HERMES_HOME/gateway.sock`, which only the
//!   home's owner can connect to; [`TcpAdapter`] listens on a loopback address and admits
//!   a client only after its first line gives the gateway's token. Every connection of
//!   either is a client that sends
//!   messages for any number of chats and receives every outbound message of the chats it
//!   wrote to. The listener and every connection are tasks on the gateway's tokio runtime,
//!   so the number of threads does not grow with the number of clients.
//! - [`serve_lines`] reads messages from any reader (the `hermes` binary gives it stdin)
//!   and writes answers to a writer (stdout), on a thread of its own.
//!
//! # Connections
//!
//! Each client is a [`Connection`]: a writer (a task for TCP, a thread for stdio) fed by a
//! channel, so a chat worker never waits on a slow client, and the lines of one chat reach
//! a client in the order they were produced. A connection subscribes to a chat
//! (`<platform>:<chat_id>`) when it sends a message for it. When the client closes its
//! sending side, the connection stays until the answers to everything it sent have been
//! written, then it closes: a client can write its messages, shut down writing, and read
//! answers until end of file.
//!
//! # Limits
//!
//! Every input is bounded by [`GatewayLimits`], and each breach gets an `error` line to
//! the client and a log line naming the peer: a line longer than `max_line_bytes` is
//! skipped (the connection stays usable), as are a line that is not UTF-8 or not a message;
//! a partial line left unfinished for `idle_timeout` closes the connection (slowloris); a
//! client beyond `max_connections` is told so and closed; a client that does not read its
//! answers is dropped once `write_buffer_bytes` of them wait.

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{mpsc, watch};

use super::Server;
use super::limits::GatewayLimits;
use super::wire::{Inbound, Outbound, error_line};
use hermes_host::gateway::GatewayLog;
use hermes_host::lines::{LineSplitter, Piece, read_lines};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(m: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(m: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|e| e.into_inner())
}

/// Messages a connection sent that are not fully answered yet, and whether it stopped
/// sending.
#[derive(Default)]
struct Pending {
    inflight: usize,
    read_closed: bool,
}

/// Where a connection's lines go: a writer thread (stdio) or a writer task (TCP).
enum Sink {
    Thread(std::sync::mpsc::Sender<String>),
    Task(mpsc::UnboundedSender<String>),
}

impl Sink {
    fn send(&self, line: String) -> bool {
        match self {
            Sink::Thread(tx) => tx.send(line).is_ok(),
            Sink::Task(tx) => tx.send(line).is_ok(),
        }
    }
}

/// One client.
pub struct Connection {
    id: u64,
    name: String,
    tx: Mutex<Option<Sink>>,
    alive: Arc<AtomicBool>,
    /// Bytes queued for the client and not written yet.
    queued: Arc<AtomicUsize>,
    /// The most bytes that may wait (`gateway.write_buffer_bytes`).
    write_limit: usize,
    /// Set to `true` to drop the connection at once, queued lines and all.
    kill: watch::Sender<bool>,
    pending: Mutex<Pending>,
    log: Arc<dyn GatewayLog>,
    /// The chats it follows, so that forgetting it visits those and not every chat: a
    /// gateway with thousands of chats sees whole batches of clients leave at once (a
    /// load balancer restarting), each under the subscription table's write lock.
    /// Locked after that table.
    follows: Mutex<Vec<String>>,
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
    /// Queues one line for the client. False when the connection is closed, its client
    /// went away, or it stopped reading (more than `write_buffer_bytes` waiting: then the
    /// connection is dropped, with a log line naming it).
    pub fn send_line(&self, line: String) -> bool {
        if !self.alive.load(Ordering::SeqCst) {
            return false;
        }
        let size = line.len() + 1;
        let waiting = self.queued.fetch_add(size, Ordering::SeqCst) + size;
        if waiting > self.write_limit {
            self.queued.fetch_sub(size, Ordering::SeqCst);
            if self.alive.swap(false, Ordering::SeqCst) {
                self.log.line(&format!(
                    "gateway: {} is not reading its answers ({waiting} bytes would wait, more than gateway.write_buffer_bytes = {}); dropping the connection",
                    self.name, self.write_limit
                ));
                lock(&self.tx).take();
                let _ = self.kill.send(true);
            }
            return false;
        }
        let sent = match &*lock(&self.tx) {
            Some(tx) => tx.send(line),
            None => false,
        };
        if !sent {
            self.queued.fetch_sub(size, Ordering::SeqCst);
        }
        sent
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

/// How many writers are still running, so that [`Router::close`] can wait for them
/// without polling.
#[derive(Default)]
struct Writers {
    running: Mutex<usize>,
    finished: Condvar,
}

impl Writers {
    fn started(&self) {
        *lock(&self.running) += 1;
    }

    fn finished(&self) {
        let mut running = lock(&self.running);
        *running = running.saturating_sub(1);
        self.finished.notify_all();
    }
}

/// Counts a writer as finished when it ends, however it ends.
struct WriterDone(Arc<Writers>);

impl Drop for WriterDone {
    fn drop(&mut self) {
        self.0.finished();
    }
}

/// Every open connection, and which chats each one follows.
pub struct Router {
    next_id: AtomicU64,
    /// Read on every answer and every message, written only when a chat gains or loses a
    /// follower: a read-write lock, so chat workers do not queue behind each other.
    subscriptions: RwLock<HashMap<String, Vec<Arc<Connection>>>>,
    open: Mutex<HashMap<u64, Arc<Connection>>>,
    writers: Arc<Writers>,
    write_limit: usize,
    log: Arc<dyn GatewayLog>,
}

impl Router {
    /// A router whose connections hold at most `write_limit` bytes of answers for a client
    /// and log to `log`.
    pub fn new(write_limit: usize, log: Arc<dyn GatewayLog>) -> Router {
        Router {
            next_id: AtomicU64::new(0),
            subscriptions: RwLock::new(HashMap::new()),
            open: Mutex::new(HashMap::new()),
            writers: Arc::new(Writers::default()),
            write_limit,
            log,
        }
    }

    fn register(&self, name: String, sink: Sink) -> (Arc<Connection>, ConnectionParts) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let alive = Arc::new(AtomicBool::new(true));
        let queued = Arc::new(AtomicUsize::new(0));
        let (kill, killed) = watch::channel(false);
        let conn = Arc::new(Connection {
            id,
            name,
            tx: Mutex::new(Some(sink)),
            alive: alive.clone(),
            queued: queued.clone(),
            write_limit: self.write_limit,
            kill,
            pending: Mutex::new(Pending::default()),
            log: self.log.clone(),
            follows: Mutex::new(Vec::new()),
        });
        lock(&self.open).insert(id, conn.clone());
        self.writers.started();
        let parts = ConnectionParts {
            alive,
            queued,
            killed,
            done: WriterDone(self.writers.clone()),
        };
        (conn, parts)
    }

    /// Opens a connection writing lines to `out` on a thread of its own. `on_close` runs on
    /// that thread after the last line was written.
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
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let (conn, parts) = self.register(name, Sink::Thread(tx));
        let spawned = std::thread::Builder::new()
            .name(format!("gateway-out-{}", conn.id))
            .spawn(move || {
                let parts = parts;
                for mut line in rx {
                    let size = line.len() + 1;
                    line.push('\n');
                    let written = out.write_all(line.as_bytes()).and_then(|()| out.flush());
                    parts.queued.fetch_sub(size, Ordering::SeqCst);
                    if written.is_err() || *parts.killed.borrow() {
                        // The client went away: later lines are refused, not queued forever.
                        parts.alive.store(false, Ordering::SeqCst);
                        break;
                    }
                }
                if let Some(on_close) = on_close {
                    on_close();
                }
            });
        if let Err(e) = spawned {
            self.forget(&conn);
            return Err(e);
        }
        Ok(conn)
    }

    /// Opens a connection whose lines a task writes to `out`, and returns the receiver of
    /// its kill switch too (the reading side stops when it turns `true`).
    fn open_task(&self, name: String, mut out: Writer) -> (Arc<Connection>, watch::Receiver<bool>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let (conn, parts) = self.register(name, Sink::Task(tx));
        let killed_for_reader = parts.killed.clone();
        tokio::spawn(async move {
            let ConnectionParts {
                alive,
                queued,
                mut killed,
                done: _done,
            } = parts;
            loop {
                let line = tokio::select! {
                    biased;
                    () = wait_killed(&mut killed) => return,
                    line = rx.recv() => line,
                };
                let Some(mut line) = line else { break };
                let size = line.len() + 1;
                line.push('\n');
                let written = tokio::select! {
                    biased;
                    () = wait_killed(&mut killed) => return,
                    written = out.write_all(line.as_bytes()) => written,
                };
                queued.fetch_sub(size, Ordering::SeqCst);
                if written.is_err() {
                    alive.store(false, Ordering::SeqCst);
                    return;
                }
            }
            let _ = out.shutdown().await;
        });
        (conn, killed_for_reader)
    }

    /// `conn` receives the outbound messages of chat `key` from now on.
    pub fn subscribe(&self, key: &str, conn: &Arc<Connection>) {
        let follows = |subs: &HashMap<String, Vec<Arc<Connection>>>| {
            subs.get(key)
                .is_some_and(|list| list.iter().any(|c| c.id == conn.id))
        };
        if follows(&read(&self.subscriptions)) {
            return;
        }
        let mut subs = write(&self.subscriptions);
        if !follows(&subs) {
            subs.entry(key.to_string()).or_default().push(conn.clone());
            lock(&conn.follows).push(key.to_string());
        }
    }

    /// Sends `message` to every connection following its chat; returns how many took it.
    pub fn send(&self, message: &Outbound) -> usize {
        let key = message.session_key();
        let line = message.to_line();
        let (delivered, stale) = {
            let subs = read(&self.subscriptions);
            let Some(list) = subs.get(&key) else {
                return 0;
            };
            let delivered = list.iter().filter(|c| c.send_line(line.clone())).count();
            (delivered, delivered < list.len())
        };
        if stale {
            let mut subs = write(&self.subscriptions);
            if let Some(list) = subs.get_mut(&key) {
                list.retain(|c| c.alive.load(Ordering::SeqCst));
                if list.is_empty() {
                    subs.remove(&key);
                }
            }
        }
        delivered
    }

    /// Closes `conn` once its queued lines are written, and drops its subscriptions.
    fn forget(&self, conn: &Arc<Connection>) {
        {
            let mut subs = write(&self.subscriptions);
            for key in std::mem::take(&mut *lock(&conn.follows)) {
                if let Some(list) = subs.get_mut(&key) {
                    list.retain(|c| c.id != conn.id);
                    if list.is_empty() {
                        subs.remove(&key);
                    }
                }
            }
        }
        lock(&self.open).remove(&conn.id);
        conn.close();
    }

    /// Closes every connection and waits, until `deadline` has passed, for their queued
    /// lines to be written. Returns how many writers were still busy at the deadline.
    pub fn close(&self, deadline: Duration) -> usize {
        let started = Instant::now();
        write(&self.subscriptions).clear();
        let open: Vec<Arc<Connection>> = lock(&self.open).drain().map(|(_, c)| c).collect();
        for conn in &open {
            conn.close();
        }
        let mut running = lock(&self.writers.running);
        while *running > 0 {
            let Some(left) = deadline.checked_sub(started.elapsed()) else {
                break;
            };
            running = match self.writers.finished.wait_timeout(running, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        *running
    }
}

/// What a connection's writer holds.
struct ConnectionParts {
    alive: Arc<AtomicBool>,
    queued: Arc<AtomicUsize>,
    killed: watch::Receiver<bool>,
    done: WriterDone,
}

/// Returns once `killed` turns `true`; never, if its connection is gone without that.
async fn wait_killed(killed: &mut watch::Receiver<bool>) {
    loop {
        if *killed.borrow_and_update() {
            return;
        }
        if killed.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Handles one complete inbound line from `conn`: a message goes to `server`; anything
/// else is answered with an `error` line. Blank lines are ignored.
fn handle_line(line_no: u64, bytes: &[u8], conn: &Arc<Connection>, server: &Server) {
    match Inbound::from_line(bytes, server.platform()) {
        Ok(None) => {}
        Ok(Some(message)) => {
            if let Err(why) = server.receive(message, conn) {
                conn.send_line(error_line(&format!("line {line_no}: {why}")));
            }
        }
        Err(why) => {
            conn.send_line(error_line(&format!("line {line_no}: {why}")));
        }
    }
}

fn too_long_line(line_no: u64, max: usize) -> String {
    error_line(&format!(
        "line {line_no}: longer than {max} bytes (gateway.max_line_bytes); skipped"
    ))
}

/// Reads inbound lines from `input` until end of file and hands each message to `server`;
/// answers go to `conn`. A line that is not a usable message, or longer than
/// `gateway.max_line_bytes` as for the sockets, is answered with an `error` line and
/// otherwise ignored; blank lines are ignored.
pub fn serve_lines(input: impl BufRead, conn: &Arc<Connection>, server: &Server) {
    let max = server.max_line_bytes();
    read_lines(input, max, |piece| {
        match piece {
            Piece::Line(n, bytes) => handle_line(n, bytes, conn, server),
            Piece::TooLong(n) => {
                server.log_line(&format!(
                    "gateway: stdin sent line {n} longer than {max} bytes (gateway.max_line_bytes); skipping it"
                ));
                conn.send_line(too_long_line(n, max));
            }
        }
        true
    });
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

/// How many connections may wait for `accept`.
const LISTEN_BACKLOG: libc::c_int = 4096;

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
        let listener = TcpListener::bind(addr)?;
        // std listens with a backlog of 128: a burst of clients beyond it waits for SYN
        // retransmission (a second or more). Listening again only raises the backlog (the
        // kernel caps it at net.core.somaxconn).
        // SAFETY: listen(2) on a socket this function owns.
        unsafe { libc::listen(std::os::fd::AsRawFd::as_raw_fd(&listener), LISTEN_BACKLOG) };
        Ok(TcpAdapter { listener })
    }

    /// The address it listens on.
    ///
    /// # Errors
    ///
    /// The socket's error.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Accepts connections as a task on `runtime` until the server begins shutting down;
    /// each connection is a reading task and a writing task.
    ///
    /// # Errors
    ///
    /// When the listener cannot be handed to the runtime.
    pub fn serve(
        self,
        server: Server,
        runtime: &tokio::runtime::Handle,
        limits: &GatewayLimits,
        token: Arc<str>,
    ) -> std::io::Result<tokio::task::JoinHandle<()>> {
        self.listener.set_nonblocking(true)?;
        let _inside = runtime.enter();
        let listener = Listener::Tcp(tokio::net::TcpListener::from_std(self.listener)?);
        let limits = Arc::new(limits.clone());
        Ok(runtime.spawn(accept_loop(listener, server, limits, Some(token))))
    }
}

/// The longest first line a client may send (its token line).
const MAX_TOKEN_LINE: usize = 4096;

/// Connections still to send their token line: beyond this many, a new one closes the
/// oldest of them once that one has had [`AUTH_GRACE`] (a client that has the token sends
/// it at once, so a burst of real clients is never cut). They do not count against
/// `gateway.max_connections`, and the newest always gets its chance, so a flood of
/// token-less connections never locks out the token's holder.
const MAX_AUTHENTICATING: usize = 64;

/// Beyond this many still authenticating, the oldest is closed however young: a bound on
/// what a flood can hold, descriptors included.
const MAX_AUTHENTICATING_HARD: usize = 1024;

/// How long a connection may take to send its token before a newer one may close it.
const AUTH_GRACE: Duration = Duration::from_secs(1);

/// How long a connection has to send its token line (or `gateway.idle_timeout`, if less).
const AUTH_DEADLINE: Duration = Duration::from_secs(5);

/// Reads a client's first line, `{"token": "..."}`, within `within`, and checks the token
/// (in constant time). Returns what the client sent after that line.
async fn read_token_line(
    input: &mut Reader,
    token: &str,
    within: Duration,
) -> Result<Vec<u8>, String> {
    // Small: every connection still authenticating holds one.
    let mut chunk = [0u8; 512];
    let mut got: Vec<u8> = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    let newline = loop {
        if let Some(at) = got.iter().position(|&b| b == b'\n') {
            break at;
        }
        if got.len() > MAX_TOKEN_LINE {
            return Err(format!(
                "its first line is longer than {MAX_TOKEN_LINE} bytes"
            ));
        }
        match tokio::time::timeout_at(deadline, input.read(&mut chunk)).await {
            Err(_) => return Err("it sent no token line in time".into()),
            Ok(Ok(0)) | Ok(Err(_)) => return Err("it closed before sending a token".into()),
            Ok(Ok(n)) => got.extend_from_slice(&chunk[..n]),
        }
    };
    let line = &got[..newline];
    let sent = serde_json::from_slice::<serde_json::Value>(line)
        .ok()
        .and_then(|v| v.get("token").and_then(|t| t.as_str()).map(str::to_string));
    match sent {
        Some(sent) if constant_time_eq(sent.as_bytes(), token.as_bytes()) => {
            Ok(got[newline + 1..].to_vec())
        }
        Some(_) => Err("its token is wrong".into()),
        None => Err("its first line is not {\"token\": \"...\"}".into()),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The default endpoint: a Unix socket in `$HERMES_HOME` that only its owner can connect
/// to (mode 0600), speaking the same JSON-lines protocol as [`TcpAdapter`], with no token.
pub struct UnixAdapter {
    listener: Option<std::os::unix::net::UnixListener>,
    path: std::path::PathBuf,
    /// The socket file's device and inode once placed: only that file is removed at the
    /// end, never whatever has taken the name since.
    placed: Option<(u64, u64)>,
}

impl UnixAdapter {
    /// Binds a socket at `path`, private to this user from the moment it can be reached: it
    /// is bound under a temporary name, made 0600, then renamed into place. A socket file
    /// left by a gateway that is gone (a socket of this user's that nobody answers on) is
    /// replaced; one that answers is another gateway's; anything else at `path` (a regular
    /// file, a link, a directory, another user's socket) is refused and left alone.
    ///
    /// # Errors
    ///
    /// `AddrInUse` when a gateway answers at `path`, `AlreadyExists` when something that is
    /// not a stale socket of ours is there; otherwise the bind, chmod or rename error.
    pub fn bind(path: &std::path::Path) -> std::io::Result<UnixAdapter> {
        use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
        match std::fs::symlink_metadata(path) {
            Ok(meta) => {
                // SAFETY: geteuid has no preconditions and cannot fail.
                let ours = meta.uid() == unsafe { libc::geteuid() };
                if !meta.file_type().is_socket() || !ours {
                    let what = if meta.file_type().is_socket() {
                        format!("a socket of uid {}", meta.uid())
                    } else if meta.file_type().is_symlink() {
                        "a symbolic link".to_string()
                    } else if meta.is_dir() {
                        "a directory".to_string()
                    } else {
                        "a file, not a socket".to_string()
                    };
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::AlreadyExists,
                        format!(
                            "refusing to replace {}: it is {what}; give --socket a path where nothing is, or move it away",
                            path.display()
                        ),
                    ));
                }
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::AddrInUse,
                        format!("a gateway already answers at {}", path.display()),
                    ));
                }
                std::fs::remove_file(path)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut temporary = path.as_os_str().to_os_string();
        temporary.push(format!(".{}.tmp", std::process::id()));
        let temporary = std::path::PathBuf::from(temporary);
        let _ = std::fs::remove_file(&temporary);
        let listener = std::os::unix::net::UnixListener::bind(&temporary)?;
        let placed = std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
            .and_then(|()| std::fs::rename(&temporary, path));
        if let Err(e) = placed {
            let _ = std::fs::remove_file(&temporary);
            return Err(e);
        }
        let placed = std::fs::symlink_metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        Ok(UnixAdapter {
            listener: Some(listener),
            path: path.to_path_buf(),
            placed,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Accepts connections as a task on `runtime`, as [`TcpAdapter::serve`] does. The socket
    /// file is removed when the adapter is dropped.
    ///
    /// # Errors
    ///
    /// When the listener cannot be handed to the runtime.
    pub fn serve(
        &mut self,
        server: Server,
        runtime: &tokio::runtime::Handle,
        limits: &GatewayLimits,
    ) -> std::io::Result<tokio::task::JoinHandle<()>> {
        let Some(listener) = self.listener.take() else {
            return Err(std::io::Error::other("the socket is served already"));
        };
        listener.set_nonblocking(true)?;
        let _inside = runtime.enter();
        let listener = Listener::Unix(tokio::net::UnixListener::from_std(listener)?);
        let limits = Arc::new(limits.clone());
        Ok(runtime.spawn(accept_loop(listener, server, limits, None)))
    }
}

impl Drop for UnixAdapter {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt as _;
        let still_ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| Some((m.dev(), m.ino())) == self.placed);
        if still_ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Counts a connection as closed when its reading task ends.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A listener of either kind, and what its `accept` gives.
enum Listener {
    Tcp(tokio::net::TcpListener),
    Unix(tokio::net::UnixListener),
}

type Reader = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type Writer = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

impl Listener {
    /// The next client: its reading and writing halves, and its name for the log.
    async fn accept(&self) -> std::io::Result<(Reader, Writer, String)> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, peer) = listener.accept().await?;
                let _ = stream.set_nodelay(true);
                let (input, output) = stream.into_split();
                Ok((Box::new(input), Box::new(output), format!("tcp {peer}")))
            }
            Listener::Unix(listener) => {
                let (stream, _) = listener.accept().await?;
                // Only processes of the socket's owner can connect (mode 0600); the log
                // names the one that did.
                let who = stream
                    .peer_cred()
                    .ok()
                    .and_then(|c| c.pid())
                    .map_or_else(|| "unix".to_string(), |pid| format!("unix pid {pid}"));
                let (input, output) = stream.into_split();
                Ok((Box::new(input), Box::new(output), who))
            }
        }
    }
}

async fn accept_loop(
    listener: Listener,
    server: Server,
    limits: Arc<GatewayLimits>,
    token: Option<Arc<str>>,
) {
    let open = Arc::new(AtomicUsize::new(0));
    let authenticating = Arc::new(Authenticating::default());
    let mut closing = server.closing();
    loop {
        let accepted = tokio::select! {
            biased;
            () = wait_killed(&mut closing) => return,
            accepted = listener.accept() => accepted,
        };
        let (input, mut output, name) = match accepted {
            Ok(client) => client,
            Err(e) => {
                // Out of descriptors, most likely: back off rather than spin on the error.
                server.log_line(&format!(
                    "gateway: cannot accept a connection: {e}; retrying in 100 ms"
                ));
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(token) = token.clone() else {
            // A Unix socket's mode already admits only its owner: no token line.
            let Some(guard) = admit(&open, &limits, &server, &name, &mut output) else {
                continue;
            };
            tokio::spawn(serve_connection(
                (input, output, name),
                server.clone(),
                limits.clone(),
                Vec::new(),
                guard,
            ));
            continue;
        };
        let (ticket, evicted) = authenticating.enter();
        if evicted % 1000 == 1 {
            server.log_line(&format!(
                "gateway: {MAX_AUTHENTICATING} connections were still to send their token: closed the oldest to make room ({evicted} so far)"
            ));
        }
        let (open, server, limits) = (open.clone(), server.clone(), limits.clone());
        let authenticating = authenticating.clone();
        tokio::spawn(async move {
            let mut input = input;
            let within = limits.idle_timeout.min(AUTH_DEADLINE);
            let checked = tokio::select! {
                checked = read_token_line(&mut input, &token, within) => Some(checked),
                () = ticket.1.notified() => None,
            };
            authenticating.leave(ticket.0);
            let rest = match checked {
                Some(Ok(rest)) => rest,
                // Made room for a newer connection: counted above, not logged one by one.
                None => return,
                Some(Err(why)) => {
                    server.log_line(&format!("gateway: refused {name}: {why}"));
                    let line = error_line(&format!(
                        "{why}; send {{\"token\": \"...\"}} with the gateway's token (gateway.token in its config.yaml, or HERMES_GATEWAY_TOKEN) as the first line"
                    ));
                    let _ = tokio::time::timeout(Duration::from_secs(1), async {
                        output.write_all(format!("{line}\n").as_bytes()).await?;
                        output.shutdown().await
                    })
                    .await;
                    return;
                }
            };
            // Only a client that gave the token takes one of the slots.
            if let Some(guard) = admit(&open, &limits, &server, &name, &mut output) {
                serve_connection((input, output, name), server, limits, rest, guard).await;
            }
        });
    }
}

/// The connections still to send their token line, oldest first, each with what closes it.
#[derive(Default)]
struct Authenticating {
    waiting: std::sync::Mutex<
        std::collections::VecDeque<(u64, std::time::Instant, Arc<tokio::sync::Notify>)>,
    >,
    next: std::sync::atomic::AtomicU64,
    evicted: std::sync::atomic::AtomicU64,
}

impl Authenticating {
    /// A place for a new connection, closing the oldest waiting one when
    /// [`MAX_AUTHENTICATING`] are taken and it had its [`AUTH_GRACE`] (or
    /// [`MAX_AUTHENTICATING_HARD`] are); also how many were closed so far for that (0: none
    /// now).
    fn enter(&self) -> ((u64, Arc<tokio::sync::Notify>), u64) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let notify = Arc::new(tokio::sync::Notify::new());
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        let mut evicted = 0;
        let oldest_is_due = waiting
            .front()
            .is_some_and(|(_, since, _)| since.elapsed() >= AUTH_GRACE);
        let full = waiting.len() >= MAX_AUTHENTICATING_HARD
            || (waiting.len() >= MAX_AUTHENTICATING && oldest_is_due);
        if full {
            if let Some((_, _, oldest)) = waiting.pop_front() {
                oldest.notify_one();
                evicted = self.evicted.fetch_add(1, Ordering::Relaxed) + 1;
            }
        }
        waiting.push_back((id, std::time::Instant::now(), notify.clone()));
        ((id, notify), evicted)
    }

    fn leave(&self, id: u64) {
        let mut waiting = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(at) = waiting.iter().position(|(i, _, _)| *i == id) {
            waiting.remove(at);
        }
    }
}

/// Takes one of `gateway.max_connections` for a client, or tells it the gateway is full
/// (closing it) and returns `None`.
fn admit(
    open: &Arc<AtomicUsize>,
    limits: &GatewayLimits,
    server: &Server,
    name: &str,
    output: &mut Writer,
) -> Option<Open> {
    if open.load(Ordering::SeqCst) >= limits.max_connections {
        server.log_line(&format!(
            "gateway: refused {name}: {} clients are connected (gateway.max_connections)",
            limits.max_connections
        ));
        let line = error_line(&format!(
            "the gateway has {} clients connected, its limit (gateway.max_connections); try again later",
            limits.max_connections
        ));
        let mut output = std::mem::replace(output, Box::new(tokio::io::sink()));
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                output.write_all(format!("{line}\n").as_bytes()).await?;
                output.shutdown().await
            })
            .await;
        });
        return None;
    }
    open.fetch_add(1, Ordering::SeqCst);
    Some(Open(open.clone()))
}

/// One TCP client: reads its lines under the limits until it stops sending, the gateway
/// shuts down, or the connection is dropped.
async fn serve_connection(
    (mut input, output, name): (Reader, Writer, String),
    server: Server,
    limits: Arc<GatewayLimits>,
    rest: Vec<u8>,
    _open: Open,
) {
    // Allocated only now: a connection that never authenticates costs no buffer.
    let mut chunk = vec![0u8; 16 * 1024];
    let (conn, mut killed) = server.router().open_task(name.clone(), output);
    let mut closing = server.closing();
    let mut lines = LineSplitter::new(limits.max_line_bytes);
    let take = |piece: Piece<'_>| match piece {
        Piece::Line(n, bytes) => handle_line(n, bytes, &conn, &server),
        Piece::TooLong(n) => {
            server.log_line(&format!(
                "gateway: {name} sent line {n} longer than {} bytes (gateway.max_line_bytes); skipping it",
                limits.max_line_bytes
            ));
            conn.send_line(too_long_line(n, limits.max_line_bytes));
        }
    };
    // What came with the token line is the first of the messages.
    lines.push(&rest, take);
    loop {
        let deadline = lines
            .partial_since()
            .map(|since| tokio::time::Instant::from_std(since + limits.idle_timeout));
        let read = async {
            match deadline {
                Some(at) => tokio::time::timeout_at(at, input.read(&mut chunk))
                    .await
                    .ok(),
                None => Some(input.read(&mut chunk).await),
            }
        };
        let read = tokio::select! {
            biased;
            () = wait_killed(&mut killed) => break,
            () = wait_killed(&mut closing) => break,
            read = read => read,
        };
        let n = match read {
            None => {
                server.log_line(&format!(
                    "gateway: closing {name}: a line stayed unfinished for {} s (gateway.idle_timeout)",
                    limits.idle_timeout.as_secs_f64()
                ));
                conn.send_line(error_line(&format!(
                    "line {}: unfinished for {} s (gateway.idle_timeout); closing",
                    lines.line_no() + 1,
                    limits.idle_timeout.as_secs_f64()
                )));
                break;
            }
            Some(Ok(0)) | Some(Err(_)) => {
                if let Some((n, bytes)) = lines.finish() {
                    handle_line(n, &bytes, &conn, &server);
                }
                break;
            }
            Some(Ok(n)) => n,
        };
        lines.push(&chunk[..n], take);
    }
    conn.read_closed(server.router());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn followers(router: &Router, key: &str) -> Option<Vec<u64>> {
        read(&router.subscriptions)
            .get(key)
            .map(|list| list.iter().map(|c| c.id).collect())
    }

    #[test]
    fn a_connection_that_goes_stops_following_its_chats_and_others_keep_theirs() {
        let log: Arc<dyn GatewayLog> = Arc::new(|_: &str| {});
        let router = Router::new(1 << 20, log);
        let a = router
            .open("a".into(), Box::new(std::io::sink()), None)
            .unwrap();
        let b = router
            .open("b".into(), Box::new(std::io::sink()), None)
            .unwrap();
        router.subscribe("local:c1", &a);
        router.subscribe("local:c2", &a);
        router.subscribe("local:c2", &b);
        router.subscribe("local:c2", &a);
        router.subscribe("local:c3", &b);
        a.read_closed(&router);
        assert_eq!(followers(&router, "local:c1"), None);
        assert_eq!(followers(&router, "local:c2"), Some(vec![b.id]));
        assert_eq!(followers(&router, "local:c3"), Some(vec![b.id]));
        b.read_closed(&router);
        assert!(read(&router.subscriptions).is_empty());
        router.close(Duration::from_secs(5));
    }

    #[test]
    fn bind_works_as_documented() {
        let tcp = crate::app::server::TcpAdapter::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        assert!(tcp.local_addr().unwrap().ip().is_loopback());
        assert!(crate::app::server::TcpAdapter::bind("0.0.0.0:0".parse().unwrap()).is_err());
    }
}
