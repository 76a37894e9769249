//! Child processes: the one place that kills a process group.
//!
//! Every child the host supervises (shell hooks, gateway handlers, the Python worker, the
//! agent's terminal tool) is spawned in a process group of its own, so that a timeout or an
//! interrupt can end it together with everything it started. Killing that group is here,
//! once.
//!
//! Spawning itself is still done by each caller's module (`shell::spawn` for hooks,
//! `gateway::process` for handlers, the agent's tools); moving it here, with stdin feeding,
//! bounded capture and timeouts shared, is the next step.

use std::io;

/// Kills the process group `pid` leads (a child spawned with `process_group(0)` and
/// everything it started). A group that is already gone is not an error.
///
/// # Errors
///
/// `InvalidInput` for a pid out of range; the OS error when the signal cannot be sent (for
/// example `EPERM`).
///
/// ```
/// use std::os::unix::process::CommandExt;
/// let child = std::process::Command::new("sleep").arg("30").process_group(0).spawn().unwrap();
/// hermes_host::process::kill_group(child.id()).unwrap();
/// # let mut child = child; let _ = child.wait();
/// ```
pub fn kill_group(pid: u32) -> io::Result<()> {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "process id out of range",
        ));
    };
    // SAFETY: killpg only sends a signal; an invalid or vanished group yields ESRCH.
    if unsafe { libc::killpg(pgid, libc::SIGKILL) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(())
    } else {
        Err(err)
    }
}
