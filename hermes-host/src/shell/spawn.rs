//! Running one shell-hook command.
//!
//! A shell hook is a command line from `config.yaml`. [`run`] turns it into a process, feeds it
//! the JSON payload on stdin, collects what it prints, and gives up on it at its timeout; the
//! process itself is supervised by [`crate::process`], as every child of the host is. Every
//! outcome, including "could not start" and "timed out", comes back as a [`RunResult`]; `run`
//! never panics and never returns early with an error.
//!
//! # Running a hook
//!
//! ```no_run
//! use std::time::Duration;
//! use hermes_host::shell::spawn;
//!
//! let result = spawn::run("~/.hermes/agent-hooks/guard.sh --strict", br#"{"tool_name": "terminal"}"#, Duration::from_secs(10));
//! match (&result.error, result.timed_out) {
//!     (Some(error), _) => eprintln!("could not run the hook: {error}"),
//!     (None, true) => eprintln!("the hook timed out after {}s", result.elapsed_seconds()),
//!     (None, false) => println!("exit={:?} stdout={}", result.returncode, result.stdout),
//! }
//! ```
//!
//! # The command line
//!
//! The command is split into words the way a POSIX shell (Python's `shlex.split`) splits
//! them, and the first word is executed directly: there is **no shell**, so pipes,
//! redirections, globs and `$VAR` are passed through as literal text. Quotes group words
//! (`"/path with space/hook.sh"` is one word) and `#` is an ordinary character. A `~` at the
//! very start of the command is replaced by `$HOME` (`~/hook.sh`); a `~` anywhere else, as in
//! `bash ~/hook.sh`, stays literal, exactly as in the reference. `~user` is not expanded.
//! Use [`argv`] to see how a command is split:
//!
//! ```
//! use hermes_host::shell::spawn::argv;
//! assert_eq!(argv(r#"python3 "/opt/my hooks/a.py" --tag #1"#).unwrap(), ["python3", "/opt/my hooks/a.py", "--tag", "#1"]);
//! assert_eq!(argv("echo 'unclosed").unwrap_err(), "command \"echo 'unclosed\" cannot be parsed: No closing quotation");
//! assert_eq!(argv("   ").unwrap_err(), "empty command");
//! ```
//!
//! The process inherits the environment and the working directory of hermes.
//!
//! # Standard input
//!
//! The payload is written to the process's stdin while its output is being read, and stdin
//! is closed as soon as the payload is written, so a script can read to end of file. A
//! script that exits without reading its stdin is fine: the broken pipe is ignored.
//!
//! # Standard output and error
//!
//! Both are read concurrently with writing stdin, so a hook never deadlocks on a full pipe.
//! Each is kept up to [`OUTPUT_CAP`] bytes (1 MiB); anything beyond is read and dropped,
//! never buffered, and [`RunResult::stdout_dropped`] / [`RunResult::stderr_dropped`] say how
//! much was lost. Output is decoded as UTF-8, invalid bytes becoming U+FFFD.
//!
//! # Timeouts and process groups
//!
//! Each hook runs in a **process group of its own**. The timeout is enforced by hermes, not
//! by the hook: the run is over when the process has exited *and* both of its output pipes
//! are closed. If that has not happened by the timeout, the **whole group** is killed with
//! `SIGKILL`, so a script that started a background child still holding stdout open cannot
//! hang the agent. After the kill hermes waits at most [`KILL_GRACE`] for the pipes to close
//! (a process that left the group with `setsid` could keep them open), then returns
//! regardless.
//!
//! A hook that has printed its answer and exited is not held to its timeout by such a
//! child: once the hook's own process is gone, hermes waits at most [`EXIT_GRACE`] for end
//! of file, then kills the group and decides on what the hook printed. A guard that
//! prints a block and exits 0 therefore blocks, whatever it left running.
//!
//! # Caveats
//!
//! * A hook that exits while a background child keeps running *without* holding its pipes
//!   is not waited for and not killed: the daemon outlives the hook, as it would in a shell.
//! * The group is killed by its id, which is the hook's process id. The kernel does not reuse
//!   a process id while a group of that id still has members, so the kill can only reach
//!   processes the hook started.
//! * Waiting uses `poll(2)` on the pipes and a `pidfd` for the process (Linux 5.3+); on
//!   kernels without pidfds the exit is detected by polling with a short, growing interval.

use std::io;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::{self, Ended, Run};
use crate::pyfmt::repr_str;

/// How many bytes of stdout, and separately of stderr, a run keeps (1 MiB). The rest is read
/// and dropped.
pub const OUTPUT_CAP: usize = 1 << 20;

/// How long a run waits for its pipes to close after the timeout killed its process group.
pub const KILL_GRACE: Duration = process::KILL_GRACE;

/// How long a run waits for its pipes to close after the hook's own process exited, before
/// it kills what the hook left holding them and decides on what was printed.
pub const EXIT_GRACE: Duration = Duration::from_millis(250);

/// What happened when a command ran. Every field is always set, as in the reference's result
/// dict (`returncode, stdout, stderr, timed_out, elapsed_seconds, error`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunResult {
    /// The exit code; the negated signal number when a signal ended the process (as Python
    /// reports it); `None` when it never ran or timed out.
    pub returncode: Option<i32>,
    /// Its stdout (at most [`OUTPUT_CAP`] bytes of it), decoded leniently as UTF-8.
    pub stdout: String,
    /// Its stderr (at most [`OUTPUT_CAP`] bytes of it), decoded leniently as UTF-8.
    pub stderr: String,
    /// Whether the timeout ended the run.
    pub timed_out: bool,
    /// From just before the spawn to the end of the run.
    pub elapsed: Duration,
    /// Why it could not run: `command not found`, `command not executable`,
    /// `command '<cmd>' cannot be parsed: <why>`, `empty command`, or an OS error.
    pub error: Option<String>,
    /// Bytes of stdout read beyond [`OUTPUT_CAP`] and dropped.
    pub stdout_dropped: u64,
    /// Bytes of stderr read beyond [`OUTPUT_CAP`] and dropped.
    pub stderr_dropped: u64,
    /// The response status of an HTTP hook (`None` for a command, or when no response came).
    pub http_status: Option<u16>,
}

impl RunResult {
    /// The elapsed time in seconds, rounded to milliseconds (the reference's
    /// `elapsed_seconds`).
    ///
    /// ```
    /// let r = hermes_host::shell::spawn::RunResult { elapsed: std::time::Duration::from_micros(12_345), ..Default::default() };
    /// assert_eq!(r.elapsed_seconds(), 0.012);
    /// ```
    pub fn elapsed_seconds(&self) -> f64 {
        (self.elapsed.as_secs_f64() * 1000.0).round() / 1000.0
    }

    fn failed(error: String, started: Instant) -> RunResult {
        RunResult {
            error: Some(error),
            elapsed: started.elapsed(),
            ..RunResult::default()
        }
    }
}

/// Splits `command` into the argv [`run`] executes: `~` expanded at the very start, then
/// POSIX shell-word splitting.
///
/// # Errors
///
/// `command '<cmd>' cannot be parsed: No closing quotation` (or `No escaped character`) for
/// an unbalanced quote or a trailing backslash, and `empty command` when there is no word.
pub fn argv(command: &str) -> Result<Vec<String>, String> {
    let words = split_words(&expand_tilde(command))
        .map_err(|why| format!("command {} cannot be parsed: {why}", repr_str(command)))?;
    if words.is_empty() {
        return Err("empty command".into());
    }
    Ok(words)
}

/// `shlex.split(text)`: POSIX shell words, `#` as text. The error is shlex's message.
pub(crate) fn split_words(text: &str) -> Result<Vec<String>, &'static str> {
    let escaped = escape_hashes(text)?;
    shell_words::split(&escaped).map_err(|_| "No closing quotation")
}

/// `os.path.expanduser`: only a leading `~` (up to the first `/`) is expanded, and only the
/// current user's (`$HOME`).
pub(crate) fn expand_tilde(command: &str) -> String {
    let Some(rest) = command.strip_prefix('~') else {
        return command.to_string();
    };
    let user_end = rest.find('/').unwrap_or(rest.len());
    if user_end != 0 {
        return command.to_string(); // `~user`, or `~` followed by other text: left as is
    }
    match std::env::var("HOME") {
        Ok(home) => {
            let joined = format!("{}{}", home.trim_end_matches('/'), &rest[user_end..]);
            if joined.is_empty() {
                "/".to_string()
            } else {
                joined
            }
        }
        Err(_) => command.to_string(),
    }
}

/// Escapes every `#` outside quotes, so the splitter treats it as text the way `shlex.split`
/// does (shell-words would start a comment), and reports the errors `shlex` reports.
fn escape_hashes(command: &str) -> Result<String, &'static str> {
    #[derive(PartialEq)]
    enum State {
        Plain,
        Single,
        Double,
    }
    let mut state = State::Plain;
    let mut out = String::with_capacity(command.len() + 4);
    let mut chars = command.chars();
    while let Some(c) = chars.next() {
        match (&state, c) {
            (State::Plain, '\\') => {
                out.push(c);
                out.push(chars.next().ok_or("No escaped character")?);
            }
            (State::Plain, '\'') => {
                state = State::Single;
                out.push(c);
            }
            (State::Plain, '"') => {
                state = State::Double;
                out.push(c);
            }
            (State::Plain, '#') => out.push_str("\\#"),
            (State::Single, '\'') | (State::Double, '"') => {
                state = State::Plain;
                out.push(c);
            }
            (State::Double, '\\') => {
                out.push(c);
                out.push(chars.next().ok_or("No closing quotation")?);
            }
            _ => out.push(c),
        }
    }
    if state == State::Plain {
        Ok(out)
    } else {
        Err("No closing quotation")
    }
}

/// Runs `command` with `stdin` as its input and returns what happened, after at most
/// `timeout` (plus [`KILL_GRACE`] when the process group had to be killed).
///
/// See the [module documentation](self) for the rules: no shell, own process group, stdin
/// written then closed, output capped, the whole group killed at the timeout.
///
/// ```no_run
/// use std::time::Duration;
/// let r = hermes_host::shell::spawn::run("/bin/cat", b"hello", Duration::from_secs(5));
/// assert_eq!((r.returncode, r.stdout.as_str()), (Some(0), "hello"));
/// ```
pub fn run(command: &str, stdin: &[u8], timeout: Duration) -> RunResult {
    run_with_env(command, stdin, timeout, &[])
}

/// [`run`] with `env` added to the child's environment.
///
/// ```no_run
/// use std::time::Duration;
/// let r = hermes_host::shell::spawn::run_with_env("/usr/bin/env", b"", Duration::from_secs(5), &[("GREETING", "hi")]);
/// assert!(r.stdout.contains("GREETING=hi"));
/// ```
pub fn run_with_env(
    command: &str,
    stdin: &[u8],
    timeout: Duration,
    env: &[(&str, &str)],
) -> RunResult {
    match argv(command) {
        Ok(argv) => run_argv_with_env(&argv, stdin, timeout, env),
        Err(error) => RunResult::failed(error, Instant::now()),
    }
}

/// [`run_with_env`] of an argv already split: a `format: claude` command written for a
/// shell is `[shell, "-c", command]` (see [`crate::shell::claude::argv`]). The program runs
/// in its own process group like any hook, so a timeout kills a whole pipeline.
///
/// ```no_run
/// use std::time::Duration;
/// let argv = ["/bin/sh".to_string(), "-c".into(), "tr a-z A-Z | rev".into()];
/// let r = hermes_host::shell::spawn::run_argv_with_env(&argv, b"abc", Duration::from_secs(5), &[]);
/// assert_eq!(r.stdout, "CBA\n");
/// ```
pub fn run_argv_with_env(
    argv: &[String],
    stdin: &[u8],
    timeout: Duration,
    env: &[(&str, &str)],
) -> RunResult {
    run_argv_in(argv, stdin, timeout, env, None)
}

/// [`run_argv_with_env`] in the directory `dir` (`None`: the process's own): the agent's
/// working directory (`--cwd`), where a hook's formatter or git check must act.
///
/// ```no_run
/// use std::time::Duration;
/// let argv = ["/bin/pwd".to_string()];
/// let r = hermes_host::shell::spawn::run_argv_in(&argv, b"", Duration::from_secs(5), &[], Some(std::path::Path::new("/tmp")));
/// assert_eq!(r.stdout, "/tmp\n");
/// ```
pub fn run_argv_in(
    argv: &[String],
    stdin: &[u8],
    timeout: Duration,
    env: &[(&str, &str)],
    dir: Option<&std::path::Path>,
) -> RunResult {
    let started = Instant::now();
    if argv.is_empty() {
        return RunResult::failed("empty command".into(), started);
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd.envs(env.iter().copied());
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let how = Run::new()
        .input(stdin)
        .capture(OUTPUT_CAP)
        .timeout(timeout)
        .grace(KILL_GRACE)
        .after_exit(EXIT_GRACE);
    let out = match process::run(&mut cmd, &how) {
        Ok(out) => out,
        Err(e) => return RunResult::failed(spawn_error(&e, &argv[0]), started),
    };
    let mut result = RunResult {
        stdout: out.stdout.lossy(),
        stderr: out.stderr.lossy(),
        stdout_dropped: out.stdout.dropped,
        stderr_dropped: out.stderr.dropped,
        ..RunResult::default()
    };
    match out.ended {
        Ended::Completed => {
            result.returncode = out
                .status
                .and_then(|s| s.code().or_else(|| s.signal().map(|signal| -signal)));
        }
        Ended::TimedOut { .. } | Ended::Interrupted { .. } => result.timed_out = true,
        Ended::Failed(error) => result.error = Some(error),
    }
    result.elapsed = started.elapsed();
    result
}

/// The reference's texts for a failed spawn: `command not found`, `command not executable`,
/// else Python's `str(OSError)`: `[Errno 8] Exec format error: '<argv0>'`.
fn spawn_error(e: &io::Error, argv0: &str) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "command not found".into(),
        io::ErrorKind::PermissionDenied => "command not executable".into(),
        _ => match e.raw_os_error() {
            Some(code) => {
                let text = e.to_string();
                let strerror = text.split(" (os error").next().unwrap_or(&text);
                format!("[Errno {code}] {strerror}: {}", repr_str(argv0))
            }
            None => e.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_shlex_with_hash_as_text() {
        assert_eq!(
            argv("a 'b c' \"d\\\"e\" f\\ g #h i#j").unwrap(),
            ["a", "b c", "d\"e", "f g", "#h", "i#j"]
        );
        assert_eq!(argv("echo '#'").unwrap(), ["echo", "#"]);
    }

    #[test]
    fn unparsable_commands_use_the_reference_messages() {
        assert_eq!(
            argv("echo \"abc").unwrap_err(),
            "command 'echo \"abc' cannot be parsed: No closing quotation"
        );
        assert_eq!(
            argv("echo abc\\").unwrap_err(),
            "command 'echo abc\\\\' cannot be parsed: No escaped character"
        );
        assert_eq!(argv("").unwrap_err(), "empty command");
    }

    #[test]
    fn only_a_leading_tilde_is_expanded() {
        let Ok(home) = std::env::var("HOME") else {
            return;
        };
        let home = home.trim_end_matches('/');
        assert_eq!(
            argv("~/hook.sh x").unwrap(),
            [format!("{home}/hook.sh"), "x".to_string()]
        );
        assert_eq!(argv("bash ~/hook.sh").unwrap(), ["bash", "~/hook.sh"]);
        assert_eq!(argv("~someone/hook.sh").unwrap(), ["~someone/hook.sh"]);
    }

    #[test]
    fn a_missing_command_is_reported_as_not_found() {
        let r = run("/nonexistent/hook.sh", b"{}", Duration::from_secs(5));
        assert_eq!(r.error.as_deref(), Some("command not found"));
        assert_eq!(r.returncode, None);
    }

    #[test]
    fn stdin_is_written_then_closed_and_output_is_captured() {
        let r = run(
            "/bin/sh -c 'cat; echo err >&2; exit 3'",
            b"payload",
            Duration::from_secs(5),
        );
        assert_eq!(
            (r.returncode, r.stdout.as_str(), r.stderr.as_str()),
            (Some(3), "payload", "err\n")
        );
        assert!(!r.timed_out && r.error.is_none());
    }

    #[test]
    fn a_large_payload_does_not_deadlock_against_a_large_output() {
        let input = vec![b'x'; 4 << 20];
        let r = run("/bin/cat", &input, Duration::from_secs(20));
        assert_eq!(r.returncode, Some(0));
        assert_eq!(r.stdout.len(), OUTPUT_CAP);
        assert_eq!(r.stdout_dropped, (4 << 20) - OUTPUT_CAP as u64);
    }

    #[test]
    fn a_signal_shows_as_a_negative_return_code() {
        let r = run("/bin/sh -c 'kill -TERM $$'", b"", Duration::from_secs(5));
        assert_eq!(r.returncode, Some(-15));
    }

    #[test]
    fn the_timeout_kills_the_whole_group() {
        let started = Instant::now();
        let r = run(
            "/bin/sh -c 'sleep 30 & sleep 30'",
            b"",
            Duration::from_millis(300),
        );
        assert!(r.timed_out);
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }
}
