//! The agent CLI's process: its group, signals, and the tail of its stderr.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// The longest stderr line kept (longer ones are cut).
const MAX_STDERR_LINE: usize = 4096;

/// Sends `signal` to process group `pgid`; a group already gone is not an error.
pub(crate) fn signal_group(pgid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) else {
        return;
    };
    if let Err(errno) = kill_process_group(pid, signal)
        && errno != rustix::io::Errno::SRCH
    {
        tracing::warn!(pgid, %errno, "could not signal agent process group");
    }
}

/// The last lines a process wrote to stderr, shared with the task that reads them.
#[derive(Debug, Clone, Default)]
pub(crate) struct StderrTail {
    lines: Arc<Mutex<VecDeque<String>>>,
}

impl StderrTail {
    /// Reads `stderr` to its end, keeping the last `keep` lines.
    pub(crate) fn follow(
        &self,
        stderr: impl AsyncRead + Unpin + Send + 'static,
        keep: usize,
    ) -> tokio::task::JoinHandle<()> {
        let lines = Arc::clone(&self.lines);
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        buf.truncate(MAX_STDERR_LINE);
                        let line = String::from_utf8_lossy(&buf).trim_end().to_owned();
                        if let Ok(mut lines) = lines.lock() {
                            lines.push_back(line);
                            while lines.len() > keep {
                                lines.pop_front();
                            }
                        }
                    }
                }
            }
        })
    }

    /// The lines kept, oldest first.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .map(|lines| lines.iter().cloned().collect())
            .unwrap_or_default()
    }
}

/// Makes the CLI receive `SIGKILL` when the thread that spawned it exits (Linux), so an agent
/// never outlives a crashed supervisor. Spawn from a tokio worker or another long-lived
/// thread, never from `spawn_blocking` (its threads exit when idle).
#[cfg(target_os = "linux")]
pub(crate) fn die_with_parent(command: &mut tokio::process::Command) {
    use rustix::process::{getpid, getppid, set_parent_process_death_signal};
    let parent = getpid();
    // SAFETY: the closure runs in the forked child before `exec`, where only async-signal-safe
    // work is allowed: two raw system calls through rustix (`prctl(PR_SET_PDEATHSIG)`,
    // `getppid`), which neither allocate nor lock, and an `io::Error` from a raw errno, which
    // does not allocate either.
    unsafe {
        command.pre_exec(move || {
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // The supervisor may have died between fork and prctl: then no signal would come.
            if getppid() != Some(parent) {
                return Err(rustix::io::Errno::SRCH.into());
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn die_with_parent(_command: &mut tokio::process::Command) {}

/// When process `pid` started, in clock ticks after boot (`/proc/PID/stat` field 22); with the
/// pid it names one process even across pid reuse. `None` when there is no such process.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which may itself contain spaces and parentheses.
    let (_, after_name) = stat.rsplit_once(") ")?;
    after_name.split_ascii_whitespace().nth(19)?.parse().ok()
}

/// The process group of a freshly spawned CLI, as recorded in its state.
pub(crate) fn recorded_group(pgid: u32) -> task_core::ShellProcess {
    task_core::ShellProcess {
        pgid,
        leader_started: start_time(pgid),
        // No marker in an agent's environment: its orphan is reaped by group and start time.
        owner: None,
    }
}

/// Kills the process group an orphaned agent left, unless its leader is alive and is not the
/// process that was recorded (the number was reused). Returns whether it signalled the group.
pub(crate) fn kill_orphaned_group(group: task_core::ShellProcess) -> bool {
    match (start_time(group.pgid), group.leader_started) {
        (Some(now), Some(then)) if now == then => {}
        (None, _) => {}
        (Some(_), _) => return false,
    }
    signal_group(group.pgid, Signal::KILL);
    true
}
