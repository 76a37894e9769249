//! The gateway under load: the real `hermes gateway run` binary, thousands of loopback
//! clients, and the figures an operator sizes a deployment by.
//!
//! The run:
//! 1. start the gateway in a fresh home with one executable (shell) gateway hook on
//!    `agent:end`, and measure its idle wake-ups;
//! 2. open `HERMES_BENCH_CONNECTIONS` (default 2000) connections and time until the
//!    gateway has accepted them all (its descriptor count says so);
//! 3. from `HERMES_BENCH_CHATS` (default 200) of them at once, send messages one after
//!    another, each waiting for its answer, and record every answer's latency. The chats
//!    are tasks on one client thread, so that the load generator does not crowd the
//!    gateway's cores with runnable threads (clients are on other machines in a
//!    deployment); `HERMES_BENCH_CLIENT=threads` gives each chat a blocking thread instead;
//! 4. with every connection still open and nothing sent, measure idle wake-ups again.
//!
//! Beside it, in the same run: the round trip of one line on a plain loopback
//! `TcpStream` echo, the floor under any answer; and what creating a file costs in the
//! gateway's home just before the load, since each chat's first answer creates its
//! transcript, and on ext4 that cost varies tenfold with the filesystem's recent history
//! (see [`file_create_cost`]).
//!
//! Thread count and RSS are the gateway's peak during step 3, read from
//! `/proc/PID/status`. The machine's busy and stolen shares of CPU time during step 3 come
//! from `/proc/stat`: on a shared VM, stolen time says the run had less machine. Wake-ups
//! are the sum of `voluntary_ctxt_switches` over `/proc/PID/task/*/status`, per second.
//!
//! Run: `cargo bench -p hermes-host --bench gateway_load`. `HERMES_BENCH_CONNECTIONS`,
//! `HERMES_BENCH_CHATS` and `HERMES_BENCH_MESSAGES` change the load,
//! `HERMES_BENCH_GATEWAY='max_blocking: 8'` the gateway's settings, and
//! `HERMES_BENCH_NO_HOOK=1` leaves the gateway hook out; `HERMES_BENCH_BIN=PATH` runs another
//! build of `hermes` (to compare two commits in one session). The gateway's home is a new
//! temporary directory, under `TMPDIR` when it is set.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// Reads a number from the environment, or the default.
fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn status_field(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The sum of voluntary context switches over every thread of `pid`.
fn wakeups(pid: u32) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .sum()
}

fn idle_wakeups_per_second(pid: u32, over: Duration) -> f64 {
    let before = wakeups(pid);
    std::thread::sleep(over);
    (wakeups(pid).saturating_sub(before)) as f64 / over.as_secs_f64()
}

/// CPU time the process used so far (user + system), from `/proc/PID/stat`.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command name (which is in parentheses and may hold spaces).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<u64> = after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / per_second)
}

/// The machine's CPU time so far, from the `cpu` line of `/proc/stat`, in clock ticks:
/// (all, busy, stolen). Stolen time is what the hypervisor gave other guests while this
/// one had work: a run with much of it measured a slower machine, not slower code.
fn machine_ticks() -> (u64, u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| fields.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let all: u64 = (0..8).map(at).sum();
    let idle = at(3) + at(4);
    (all, all - idle - at(7), at(7))
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

fn raise_open_file_limit() {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

/// A home with one executable gateway hook that appends every `agent:end` to a file.
fn home(dir: &Path) {
    // An operator's gateway: settings, for trying sizes (`max_blocking: 8`, ...).
    if let Ok(gateway) = std::env::var("HERMES_BENCH_GATEWAY") {
        std::fs::write(dir.join("config.yaml"), format!("gateway: {{{gateway}}}\n"))
            .expect("config.yaml");
    }
    if std::env::var_os("HERMES_BENCH_NO_HOOK").is_some() {
        return;
    }
    let hook = dir.join("hooks/logger");
    std::fs::create_dir_all(&hook).expect("the hook directory");
    std::fs::write(
        hook.join("HOOK.yaml"),
        "name: logger\nevents: [agent:end]\n",
    )
    .expect("HOOK.yaml");
    let handler = hook.join("handler");
    std::fs::write(
        &handler,
        "#!/bin/sh\n{ cat; echo; } >> \"$HERMES_HOME/events.log\"\n",
    )
    .expect("handler");
    std::fs::set_permissions(&handler, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// The token the bench's gateway is started with, sent first on every connection.
const TOKEN: &str = "bench-token-0123456789abcdef";

/// A client connection that has sent the gateway's token.
fn connect(addr: SocketAddr) -> TcpStream {
    let mut stream = TcpStream::connect(addr).expect("connect");
    writeln!(stream, r#"{{"token": "{TOKEN}"}}"#).expect("send the token");
    stream
}

fn start(dir: &Path) -> (Child, SocketAddr) {
    // Another build of `hermes` (an older commit, say) can be measured with the same bench.
    let binary = std::env::var_os("HERMES_BENCH_BIN").map_or_else(
        || env!("CARGO_BIN_EXE_hermes").into(),
        std::path::PathBuf::from,
    );
    let mut child = Command::new(binary)
        .arg("--home")
        .arg(dir)
        .args([
            "gateway",
            "run",
            "--listen",
            "127.0.0.1:0",
            "--trace",
            "off",
        ])
        .env_remove("HERMES_HOME")
        .env("HERMES_GATEWAY_TOKEN", TOKEN)
        .env("HERMES_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("hermes starts (build it with `cargo build -p hermes-host`)");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    out.read_line(&mut first).expect("the address line");
    let addr = first.trim().parse().expect("the first line is the address");
    // Keep reading the log, so the gateway never blocks on a full pipe.
    std::thread::spawn(move || for _ in out.lines() {});
    (child, addr)
}

/// The floor: one line's round trip through a plain loopback echo, `rounds` times.
fn bare_echo(rounds: usize) -> Vec<Duration> {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        if let Ok((stream, _)) = listener.accept() {
            let _ = stream.set_nodelay(true);
            let mut writer = stream.try_clone().expect("clone");
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if writer.write_all(format!("{line}\n").as_bytes()).is_err() {
                    break;
                }
            }
        }
    });
    let stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    (0..rounds)
        .map(|i| {
            let started = Instant::now();
            writeln!(
                writer,
                r#"{{"chat_id": "c", "user_id": "u", "text": "m{i}"}}"#
            )
            .expect("write");
            line.clear();
            reader.read_line(&mut line).expect("read");
            started.elapsed()
        })
        .collect()
}

/// What creating one file costs in a new directory of the gateway's home, the mean of
/// `files` creations: each chat's first answer creates its session's transcript there.
/// On ext4 this depends on what the filesystem went through, not on the gateway: a new
/// inode is not taken from those freed in the last minutes (`recently_deleted` in the
/// kernel's inode allocator), so after many deletions nearby (tests, benches, builds
/// cleaning up their temporary directories) each creation scans past them. The files stay
/// until the home is removed, so measuring adds no deletion of its own.
fn file_create_cost(home: &Path, files: usize) -> Duration {
    let dir = home.join("create-probe");
    std::fs::create_dir_all(&dir).expect("the probe directory");
    let started = Instant::now();
    for i in 0..files {
        std::fs::File::create(dir.join(format!("probe-{i}.jsonl"))).expect("a probe file");
    }
    started.elapsed() / files.max(1) as u32
}

fn answers_expected(chats: usize, per_chat: usize) -> usize {
    chats * per_chat
}

/// How many `agent:end` events the hook has written.
fn hook_events(home: &Path) -> usize {
    std::fs::read_to_string(home.join("events.log"))
        .map_or(0, |t| t.lines().filter(|l| !l.trim().is_empty()).count())
}

/// Message `m` of chat `c`, as one protocol line.
fn message(c: usize, m: usize) -> String {
    format!("{{\"chat_id\": \"chat-{c}\", \"user_id\": \"u{c}\", \"text\": \"message {m}\"}}\n")
}

/// The echo model's answer to message `m` quotes it.
fn check_answer(line: &str, m: usize) {
    assert!(
        line.contains(&format!("message {m}")),
        "a wrong answer: {line}"
    );
}

/// What each chat does: send `per_chat` messages, each after the answer to the one before,
/// and time every answer.
async fn chat(c: usize, stream: TcpStream, per_chat: usize) -> Vec<Duration> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    stream.set_nodelay(true).expect("nodelay");
    stream.set_nonblocking(true).expect("non-blocking");
    let stream = tokio::net::TcpStream::from_std(stream).expect("a tokio stream");
    let (reader, mut writer) = stream.into_split();
    let mut reader = tokio::io::BufReader::new(reader);
    let mut line = String::new();
    let mut latencies = Vec::with_capacity(per_chat);
    for m in 0..per_chat {
        let sent = Instant::now();
        writer
            .write_all(message(c, m).as_bytes())
            .await
            .expect("send");
        line.clear();
        let read = tokio::time::timeout(Duration::from_secs(60), reader.read_line(&mut line));
        read.await
            .expect("an answer within 60 s")
            .expect("an answer");
        check_answer(&line, m);
        latencies.push(sent.elapsed());
    }
    latencies
}

/// The chats as tasks on one client thread: the load generator then takes one runnable
/// thread from the machine it shares with the gateway, as clients on other machines would
/// take none.
fn clients_on_one_thread(clients: Vec<TcpStream>, per_chat: usize) -> Vec<Vec<Duration>> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a client runtime");
    runtime.block_on(async {
        let tasks: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(c, stream)| tokio::spawn(chat(c, stream, per_chat)))
            .collect();
        let mut latencies = Vec::new();
        for task in tasks {
            latencies.push(task.await.expect("a chat"));
        }
        latencies
    })
}

/// The chats as one blocking thread each (`HERMES_BENCH_CLIENT=threads`): 200 more runnable
/// threads on the gateway's cores, the way the first version of this bench measured.
fn clients_on_threads(clients: Vec<TcpStream>, per_chat: usize) -> Vec<Vec<Duration>> {
    let barrier = Arc::new(Barrier::new(clients.len()));
    let senders: Vec<_> = clients
        .into_iter()
        .enumerate()
        .map(|(c, stream)| {
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                stream.set_nodelay(true).expect("nodelay");
                stream
                    .set_read_timeout(Some(Duration::from_secs(60)))
                    .expect("timeout");
                let mut writer = stream.try_clone().expect("clone");
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                let mut latencies = Vec::with_capacity(per_chat);
                barrier.wait();
                for m in 0..per_chat {
                    let sent = Instant::now();
                    writer.write_all(message(c, m).as_bytes()).expect("send");
                    line.clear();
                    reader.read_line(&mut line).expect("an answer");
                    check_answer(&line, m);
                    latencies.push(sent.elapsed());
                }
                latencies
            })
        })
        .collect();
    senders
        .into_iter()
        .map(|s| s.join().expect("a sender"))
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing: run small.
    let quick = !std::env::args().any(|a| a == "--bench");
    let connections = setting("HERMES_BENCH_CONNECTIONS", if quick { 50 } else { 2000 });
    let chats = setting("HERMES_BENCH_CHATS", if quick { 10 } else { 200 }).min(connections);
    let per_chat = setting("HERMES_BENCH_MESSAGES", if quick { 3 } else { 25 });
    let idle_window = Duration::from_secs(if quick { 1 } else { 5 });
    let threads_client = std::env::var("HERMES_BENCH_CLIENT").is_ok_and(|v| v == "threads");
    raise_open_file_limit();

    let dir = tempfile::tempdir().expect("a temp dir");
    home(dir.path());
    let (mut child, addr) = start(dir.path());
    let pid = child.id();
    std::thread::sleep(Duration::from_secs(if quick { 1 } else { 3 }));
    let idle_before = idle_wakeups_per_second(pid, idle_window);

    let base_fds = open_fds(pid);
    let started = Instant::now();
    let mut streams: Vec<TcpStream> = (0..connections).map(|_| connect(addr)).collect();
    while open_fds(pid) < base_fds + connections {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the gateway accepted {} of {connections} connections in 60 s",
            open_fds(pid).saturating_sub(base_fds)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let accept_time = started.elapsed();

    let create_cost = file_create_cost(dir.path(), 100);

    let peak_threads = Arc::new(AtomicU64::new(0));
    let peak_rss = Arc::new(AtomicU64::new(0));
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (threads, rss, on) = (peak_threads.clone(), peak_rss.clone(), sampling.clone());
        std::thread::spawn(move || {
            while on.load(Ordering::Relaxed) {
                threads.fetch_max(status_field(pid, "Threads:"), Ordering::Relaxed);
                rss.fetch_max(status_field(pid, "VmRSS:"), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let load_started = Instant::now();
    let cpu_before = cpu_time(pid);
    let machine_before = machine_ticks();
    let clients: Vec<TcpStream> = streams.drain(..chats).collect();
    let per_chat_latencies = if threads_client {
        clients_on_threads(clients, per_chat)
    } else {
        clients_on_one_thread(clients, per_chat)
    };
    let load_took = load_started.elapsed();
    let server_cpu = cpu_time(pid).saturating_sub(cpu_before);
    let machine_after = machine_ticks();
    sampling.store(false, Ordering::Relaxed);
    sampler.join().expect("the sampler");
    // A chat's first answer starts its session (hooks, and a new transcript file, whose
    // cost the probe above measured): reported apart as well.
    let sorted = |mut v: Vec<Duration>| {
        v.sort();
        v
    };
    let latencies = sorted(per_chat_latencies.iter().flatten().copied().collect());
    let firsts = sorted(
        per_chat_latencies
            .iter()
            .filter_map(|l| l.first().copied())
            .collect(),
    );
    let later = sorted(
        per_chat_latencies
            .iter()
            .flat_map(|l| l.iter().skip(1).copied())
            .collect(),
    );

    // The hook's events are delivered behind the answers (a gateway hook never holds one
    // up): idle means after the last of them.
    let expected = if std::env::var_os("HERMES_BENCH_NO_HOOK").is_some() {
        0
    } else {
        answers_expected(chats, per_chat)
    };
    let drained = Instant::now();
    while hook_events(dir.path()) < expected && drained.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let hook_drain = drained.elapsed();
    std::thread::sleep(Duration::from_secs(if quick { 1 } else { 3 }));
    let idle_after = idle_wakeups_per_second(pid, idle_window);
    let idle_threads = status_field(pid, "Threads:");
    let mut echo = bare_echo(2000);
    echo.sort();

    let _ = child.kill();
    let _ = child.wait();
    drop(streams);

    let answers = latencies.len();
    println!(
        "gateway_load: {connections} connections, {chats} chats x {per_chat} messages, one shell gateway hook on agent:end, clients {}",
        if threads_client {
            "on a thread each"
        } else {
            "as tasks on one thread"
        }
    );
    println!("| measurement | value | target |");
    println!("|---|---|---|");
    println!(
        "| accept {connections} connections | {} | < 1 s |",
        ms(accept_time)
    );
    println!(
        "| answer latency p50 / p99 ({answers} answers) | {} / {} | p99 <= 20 ms |",
        ms(percentile(&latencies, 0.50)),
        ms(percentile(&latencies, 0.99))
    );
    println!(
        "| of which each chat's first / the later ones, p50 / p99 | {} / {}; {} / {} | |",
        ms(percentile(&firsts, 0.50)),
        ms(percentile(&firsts, 0.99)),
        ms(percentile(&later, 0.50)),
        ms(percentile(&later, 0.99))
    );
    println!(
        "| answers per second | {:.0} | |",
        answers as f64 / load_took.as_secs_f64()
    );
    println!(
        "| gateway CPU during the load | {:.2} cores of 2, {:.0} µs per answer | |",
        server_cpu.as_secs_f64() / load_took.as_secs_f64(),
        server_cpu.as_secs_f64() * 1e6 / answers.max(1) as f64
    );
    let (all, busy, stolen) = (
        machine_after.0.saturating_sub(machine_before.0).max(1) as f64,
        machine_after.1.saturating_sub(machine_before.1) as f64,
        machine_after.2.saturating_sub(machine_before.2) as f64,
    );
    println!(
        "| the machine during the load: busy / stolen by the hypervisor | {:.0}% / {:.0}% of its CPU time | |",
        busy * 100.0 / all,
        stolen * 100.0 / all
    );
    println!(
        "| bare loopback echo p50 / p99 (same run) | {} / {} | |",
        ms(percentile(&echo, 0.50)),
        ms(percentile(&echo, 0.99))
    );
    println!(
        "| creating a file in the gateway's home, just before the load (same run) | {:.0} µs | |",
        create_cost.as_secs_f64() * 1e6
    );
    println!(
        "| threads: peak under load / idle after | {} / {idle_threads} | <= 16 + busy pool threads |",
        peak_threads.load(Ordering::Relaxed)
    );
    println!(
        "| RSS peak | {:.1} MiB | <= 100 MiB |",
        peak_rss.load(Ordering::Relaxed) as f64 / 1024.0
    );
    println!(
        "| the hook's {} events delivered, after the last answer | {} | |",
        hook_events(dir.path()),
        ms(hook_drain)
    );
    println!(
        "| idle wake-ups per second: before / after (connections open) | {idle_before:.1} / {idle_after:.1} | <= 1 |"
    );
}
