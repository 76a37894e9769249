//! A thread pool for hook-running jobs that keeps the threads using the CPU near the number
//! of cores, while any number of its threads wait on hooks' processes.
//!
//! A host that runs many agent turns at once (the gateway: a job per busy chat) wants many
//! threads, so that a turn waiting on a slow shell hook stalls only its own chat. But with
//! more runnable threads than cores the scheduler slices between them: each job waits
//! behind all the others in an order nobody chose, and the switching costs CPU. A
//! [`RunPool`] lets a thread take a queued job only while fewer than `max_running` jobs
//! are using the CPU; jobs are taken first come, first served, and a thread that finishes
//! one takes the next without sleeping in between.
//!
//! [`waiting`] is how a job says it is about to wait on the world outside the process (a
//! hook's subprocess, an HTTP hook, an isolated plugin's worker, a terminal command): for
//! the length of the wait the job does not count as running, and another thread (up to
//! `max_threads`) takes the next queued job. The registry calls it around every
//! out-of-process hook, so embedding hosts get this without doing anything.
//!
//! Code that blocks without saying so (an in-process plugin that sleeps or hangs) would hold
//! its place for ever; so a queued job that waited `patience` is started anyway, on
//! another thread. Such a hook then costs the others that much latency, not their
//! progress.
//!
//! ```
//! use std::sync::mpsc;
//! use std::time::Duration;
//! use hermes_host::cpu_slots::{self, RunPool};
//!
//! let pool = RunPool::new("turns", 2, 16, Duration::from_millis(10));
//! let (done, answers) = mpsc::channel();
//! for i in 0..4 {
//!     let done = done.clone();
//!     pool.spawn(move || {
//!         // ... fire hooks, run the turn; a subprocess is waited on outside the count:
//!         let ok = cpu_slots::waiting(|| std::process::Command::new("true").status().is_ok());
//!         done.send((i, ok)).unwrap();
//!     });
//! }
//! let mut got: Vec<(i32, bool)> = answers.iter().take(4).collect();
//! got.sort();
//! assert_eq!(got, vec![(0, true), (1, true), (2, true), (3, true)]);
//! ```

use std::cell::RefCell;
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How long a thread of the pool stays idle before it ends.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

/// A pool of at most `max_threads` threads, at most `max_running` of them running jobs
/// that are not [`waiting`]. Dropping it lets its idle threads end; queued jobs still run.
///
/// ```
/// use std::time::Duration;
/// use hermes_host::cpu_slots::RunPool;
///
/// let pool = RunPool::new("turns", 1, 4, Duration::from_millis(10));
/// let (done, finished) = std::sync::mpsc::channel();
/// pool.spawn(move || done.send("answered").unwrap());
/// assert_eq!(finished.recv().unwrap(), "answered");
/// assert!(pool.threads() <= 4);
/// ```
pub struct RunPool {
    shared: Arc<Shared>,
}

struct Shared {
    name: String,
    state: Mutex<State>,
    /// Idle threads wait here for a job they may take.
    work: Condvar,
    max_running: usize,
    max_threads: usize,
    patience: Duration,
}

struct State {
    queue: VecDeque<(Instant, Job)>,
    /// Jobs using the CPU: taken, and not inside [`waiting`].
    running: usize,
    threads: usize,
    /// Threads waiting for a job, or started and not looking at the queue yet.
    idle: usize,
    closed: bool,
}

thread_local! {
    /// The pool whose job this thread runs, and whether the job counts as running now.
    static CURRENT: RefCell<Option<(Arc<Shared>, bool)>> = const { RefCell::new(None) };
}

impl RunPool {
    /// A pool named `name` (its threads' name) with no thread yet: threads start as jobs
    /// need them. `max_running` and `max_threads` are at least 1, and `max_threads` at
    /// least `max_running`.
    pub fn new(name: &str, max_running: usize, max_threads: usize, patience: Duration) -> RunPool {
        let max_running = max_running.max(1);
        RunPool {
            shared: Arc::new(Shared {
                name: name.to_string(),
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    running: 0,
                    threads: 0,
                    idle: 0,
                    closed: false,
                }),
                work: Condvar::new(),
                max_running,
                max_threads: max_threads.max(max_running),
                patience,
            }),
        }
    }

    /// Queues `job`; it runs on a thread of the pool, after the jobs queued before it.
    /// When no thread can be started at all, it runs here, late rather than never.
    pub fn spawn(&self, job: impl FnOnce() + Send + 'static) {
        let start = {
            let mut state = self.shared.lock();
            state.queue.push_back((Instant::now(), Box::new(job)));
            self.shared.find_taker(&mut state)
        };
        if start && !self.shared.start_thread() {
            // Not one thread: run what is queued on the caller, oldest first, until a
            // thread exists again to take the rest.
            loop {
                let job = {
                    let mut state = self.shared.lock();
                    if state.threads > 0 {
                        break;
                    }
                    state.queue.pop_front()
                };
                match job {
                    Some((_, job)) => job(),
                    None => break,
                }
            }
        }
    }

    /// Jobs using the CPU now.
    pub fn running(&self) -> usize {
        self.shared.lock().running
    }

    /// Threads the pool has now (running, waiting or idle).
    pub fn threads(&self) -> usize {
        self.shared.lock().threads
    }
}

impl Drop for RunPool {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.work.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes sure someone will take the queue's next job: an idle thread is woken, or a
    /// new thread is reserved (while there are fewer than `max_threads`). When the running
    /// places are full, one idle thread is kept to time the oldest job's patience. `true`
    /// when a thread was reserved: the caller starts it with [`Shared::start_thread`] once
    /// it has let go of the lock, since starting a thread takes longer than anything else
    /// done under it.
    fn find_taker(&self, state: &mut State) -> bool {
        if state.queue.is_empty() {
            return false;
        }
        let free = self.max_running.saturating_sub(state.running);
        // Threads to take queued jobs now, or one to time the oldest job's patience.
        let wanted = state.queue.len().min(free).max(1);
        if state.idle >= wanted {
            if free > 0 {
                self.work.notify_one();
            }
            return false;
        }
        if state.threads >= self.max_threads {
            // Every thread is busy: the first to finish takes the job.
            return false;
        }
        // A thread counts as idle from now until it looks at the queue, so the next job
        // queued meanwhile does not reserve one more.
        state.threads += 1;
        state.idle += 1;
        true
    }

    /// Starts the thread [`Shared::find_taker`] reserved. When it cannot, the reservation
    /// is given back; `false` when the pool then has no thread at all.
    fn start_thread(self: &Arc<Self>) -> bool {
        let shared = self.clone();
        let started = std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || shared.serve());
        match started {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!("{}: cannot start a thread: {e}", self.name);
                let mut state = self.lock();
                state.threads -= 1;
                state.idle -= 1;
                state.threads > 0
            }
        }
    }

    /// A thread of the pool: takes jobs while it may, parks while it may not.
    fn serve(self: Arc<Self>) {
        let mut state = self.lock();
        state.idle -= 1;
        loop {
            let may_take = match state.queue.front() {
                Some((queued, _)) => {
                    state.running < self.max_running || queued.elapsed() >= self.patience
                }
                None => false,
            };
            if may_take {
                let Some((_, job)) = state.queue.pop_front() else {
                    continue;
                };
                state.running += 1;
                drop(state);
                CURRENT.with(|c| *c.borrow_mut() = Some((self.clone(), true)));
                // A job reports its own failures; a panic must not end the thread, which
                // is counted.
                let _ = catch_unwind(AssertUnwindSafe(job));
                let counted = CURRENT
                    .with(|c| c.borrow_mut().take())
                    .is_some_and(|(_, r)| r);
                state = self.lock();
                if counted {
                    state.running -= 1;
                }
                continue;
            }
            let wait = match state.queue.front() {
                // Places are full: wake when the oldest job's patience runs out.
                Some((queued, _)) => self.patience.saturating_sub(queued.elapsed()),
                None if state.closed => break,
                None => KEEP_ALIVE,
            };
            state.idle += 1;
            let (next, timeout) = self
                .work
                .wait_timeout(state, wait)
                .unwrap_or_else(|e| e.into_inner());
            state = next;
            state.idle -= 1;
            if timeout.timed_out() && state.queue.is_empty() && wait == KEEP_ALIVE {
                break;
            }
        }
        state.threads -= 1;
    }
}

/// Runs `wait` (something that waits on the world outside this process) without counting
/// this thread's job as running, so that the pool can start another job meanwhile. Outside
/// a [`RunPool`] job it just runs `wait`.
///
/// ```
/// use std::time::Duration;
/// use hermes_host::cpu_slots::{self, RunPool};
///
/// // One running place: the second job runs while the first waits on `sleep`.
/// let pool = RunPool::new("turns", 1, 2, Duration::from_secs(60));
/// let (done, finished) = std::sync::mpsc::channel();
/// let first = done.clone();
/// pool.spawn(move || {
///     cpu_slots::waiting(|| std::process::Command::new("sleep").arg("0.2").status().unwrap());
///     first.send("first").unwrap();
/// });
/// pool.spawn(move || done.send("second").unwrap());
/// assert_eq!(finished.recv().unwrap(), "second");
/// assert_eq!(finished.recv().unwrap(), "first");
/// ```
pub fn waiting<T>(wait: impl FnOnce() -> T) -> T {
    let shared = CURRENT.with(|c| match &mut *c.borrow_mut() {
        Some((shared, running @ true)) => {
            *running = false;
            Some(shared.clone())
        }
        _ => None,
    });
    let Some(shared) = shared else {
        return wait();
    };
    let start = {
        let mut state = shared.lock();
        state.running -= 1;
        shared.find_taker(&mut state)
    };
    if start {
        // This thread is one of the pool's, so the pool is never left without a thread.
        shared.start_thread();
    }
    /// Counts the job as running again when the wait ends, also by a panic. It does not
    /// wait for a place: the job is under way, and finishing it frees one.
    struct Resume(Arc<Shared>);
    impl Drop for Resume {
        fn drop(&mut self) {
            self.0.lock().running += 1;
            CURRENT.with(|c| {
                if let Some((_, running)) = &mut *c.borrow_mut() {
                    *running = true;
                }
            });
        }
    }
    let _resume = Resume(shared);
    wait()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;

    fn pool(max_running: usize, max_threads: usize) -> RunPool {
        RunPool::new(
            "test-pool",
            max_running,
            max_threads,
            Duration::from_secs(60),
        )
    }

    #[test]
    fn no_more_jobs_run_at_once_than_max_running() {
        let pool = pool(2, 8);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (done, finished) = mpsc::channel();
        for _ in 0..8 {
            let (running, most, done) = (running.clone(), most.clone(), done.clone());
            pool.spawn(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                running.fetch_sub(1, Ordering::SeqCst);
                done.send(()).unwrap();
            });
        }
        finished.iter().take(8).for_each(drop);
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert!(pool.threads() <= 3, "{} threads", pool.threads());
    }

    #[test]
    fn a_job_waiting_on_another_process_lets_the_next_job_run() {
        let pool = pool(1, 4);
        let (other_ran, wait_other) = mpsc::channel();
        let (done, finished) = mpsc::channel();
        pool.spawn(move || {
            let ran = waiting(|| wait_other.recv_timeout(Duration::from_secs(30)).is_ok());
            done.send(ran).unwrap();
        });
        pool.spawn(move || other_ran.send(()).unwrap());
        assert_eq!(finished.recv_timeout(Duration::from_secs(60)), Ok(true));
    }

    #[test]
    fn jobs_start_in_the_order_they_were_queued() {
        let pool = pool(1, 4);
        let order = Arc::new(Mutex::new(Vec::new()));
        let (done, finished) = mpsc::channel();
        for i in 0..20 {
            let (order, done) = (order.clone(), done.clone());
            pool.spawn(move || {
                order.lock().unwrap().push(i);
                done.send(()).unwrap();
            });
        }
        finished.iter().take(20).for_each(drop);
        assert_eq!(*order.lock().unwrap(), (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn a_job_that_waited_its_patience_starts_beside_a_stuck_one() {
        let pool = RunPool::new("test-pool", 1, 4, Duration::from_millis(20));
        let stuck_in = Arc::new(Barrier::new(2));
        let (release, stuck) = mpsc::channel::<()>();
        let barrier = stuck_in.clone();
        pool.spawn(move || {
            barrier.wait();
            let _ = stuck.recv();
        });
        stuck_in.wait();
        // The first job never says it waits: the second starts after its patience.
        let (done, finished) = mpsc::channel();
        pool.spawn(move || done.send(()).unwrap());
        assert_eq!(finished.recv_timeout(Duration::from_secs(30)), Ok(()));
        release.send(()).unwrap();
    }

    #[test]
    fn a_panicking_job_leaves_the_pool_working() {
        let pool = pool(1, 1);
        pool.spawn(|| waiting(|| panic!("the hook's process vanished")));
        let (done, finished) = mpsc::channel();
        pool.spawn(move || done.send(()).unwrap());
        assert_eq!(finished.recv_timeout(Duration::from_secs(30)), Ok(()));
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(pool.running(), 0);
    }
}
