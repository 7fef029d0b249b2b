//! `TaskCreated` / `TaskCompleted` hooks: configured commands given JSON on stdin.
//!
//! Exit code 2 means "blocking", with the command's stderr as the feedback. Any other failure
//! (non-zero exit, spawn error, timeout) is reported as a warning and does not block, as in the
//! reference. A hook still running after [`HookConfig::timeout`] is killed with its whole
//! process group; processes a finished hook left behind in its group are killed as well.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use serde::Serialize;
use task_output::{PipeConfig, PipeOutput};

use crate::config::{HookCommand, HookConfig};
use crate::record::Task;
use crate::store::Actor;

/// The exit code with which a hook blocks the operation.
pub const BLOCKING_EXIT_CODE: i32 = 2;

/// Which hook event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum HookEvent {
    /// After a task file is written.
    TaskCreated,
    /// Before a task is marked completed.
    TaskCompleted,
}

/// The JSON a hook receives on stdin (SPEC §12).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct HookInput<'a> {
    hook_event_name: HookEvent,
    task_id: String,
    task_subject: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    task_description: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    teammate_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    team_name: Option<&'a str>,
}

impl<'a> HookInput<'a> {
    pub(crate) fn new(event: HookEvent, task: &'a Task, actor: &'a Actor) -> Self {
        Self {
            hook_event_name: event,
            task_id: task.id.to_string(),
            task_subject: &task.subject,
            task_description: &task.description,
            teammate_name: actor.team.as_ref().map(|_| actor.name.as_str()),
            team_name: actor.team.as_deref(),
        }
    }
}

/// What running an event's hooks came to.
#[derive(Debug, Default)]
pub(crate) struct HookOutcome {
    /// Feedback of the hooks that blocked (joined by newlines), if any did.
    pub(crate) blocking: Option<String>,
    /// Non-blocking failures, for the caller to report.
    pub(crate) warnings: Vec<String>,
}

/// Runs every hook of `event` in order.
pub(crate) fn run_hooks(
    config: &HookConfig,
    event: HookEvent,
    input: &HookInput<'_>,
) -> HookOutcome {
    let commands = match event {
        HookEvent::TaskCreated => &config.task_created,
        HookEvent::TaskCompleted => &config.task_completed,
    };
    let mut outcome = HookOutcome::default();
    if commands.is_empty() {
        return outcome;
    }
    let stdin = serde_json::to_vec(input).unwrap_or_default();
    let mut feedback = Vec::new();
    for command in commands {
        match run_one(command, &stdin, config.timeout) {
            Ok(Ran::Finished(status, stderr)) if status.code() == Some(BLOCKING_EXIT_CODE) => {
                feedback.push(stderr.trim_end().to_string());
            }
            Ok(Ran::Finished(status, stderr)) if !status.success() => {
                outcome.warnings.push(format!(
                    "{event:?} hook {} failed ({status}): {}",
                    command.program.display(),
                    stderr.trim_end()
                ))
            }
            Ok(Ran::Finished(..)) => {}
            Ok(Ran::TimedOut) => outcome.warnings.push(format!(
                "{event:?} hook {} timed out after {} ms and was killed",
                command.program.display(),
                config.timeout.as_millis()
            )),
            Err(e) => outcome.warnings.push(format!(
                "{event:?} hook {} could not run: {e}",
                command.program.display()
            )),
        }
    }
    for warning in &outcome.warnings {
        tracing::warn!("{warning}");
    }
    if !feedback.is_empty() {
        outcome.blocking = Some(feedback.join("\n"));
    }
    outcome
}

enum Ran {
    Finished(ExitStatus, String),
    TimedOut,
}

fn run_one(command: &HookCommand, stdin: &[u8], timeout: Duration) -> std::io::Result<Ran> {
    let mut child = Command::new(&command.program)
        .args(&command.args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()?;
    let pid = child.id();
    let stderr_reader = child
        .stderr
        .take()
        .map(|pipe| std::thread::spawn(move || capture_stderr(pipe)));
    if let Some(mut pipe) = child.stdin.take() {
        // A hook that does not read its input closes the pipe: not an error.
        let _ = pipe.write_all(stdin);
    }
    let status = wait_with_timeout(child, pid, timeout)?;
    let stderr = stderr_reader
        .and_then(|t| t.join().ok())
        .unwrap_or_default();
    Ok(match status {
        Some(status) => Ran::Finished(status, stderr),
        None => Ran::TimedOut,
    })
}

/// Reads a hook's stderr to its end through task-output's pipe mode: kept in memory up to
/// 8 MiB, then spilled to a file of its own in the temporary directory (created `O_EXCL`,
/// never through a symlink; outside a runtime each chunk is written before the next is read).
/// What it said: all of it, or once spilled its last lines and where the whole of it is.
fn capture_stderr(mut pipe: std::process::ChildStderr) -> String {
    static SPILLS: AtomicU64 = AtomicU64::new(0);
    let spill = std::env::temp_dir().join(format!(
        "tasks-list-hook-{}-{}.stderr",
        std::process::id(),
        SPILLS.fetch_add(1, Ordering::Relaxed)
    ));
    let mut output = PipeOutput::new(spill, PipeConfig::default());
    let mut buf = vec![0; 64 * 1024];
    let mut lost = None;
    loop {
        match pipe.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Ok(0) | Err(_) => break,
            Ok(n) if lost.is_none() => {
                lost = output.write_stderr(Bytes::copy_from_slice(&buf[..n])).err();
            }
            // The spill failed: the rest is read (the hook must not block) and dropped.
            Ok(_) => {}
        }
    }
    let mut said = match output.is_spilled() {
        true => output.stdout(),
        false => output.stderr(),
    };
    if let Some(error) = lost {
        said.push_str(&format!("\n(the rest was lost: {error})"));
    }
    said
}

/// Waits for the child; on timeout kills its process group and reaps it (`None`).
fn wait_with_timeout(
    mut child: Child,
    pid: u32,
    timeout: Duration,
) -> std::io::Result<Option<ExitStatus>> {
    let (done, finished) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = done.send(());
        status
    });
    let timed_out = finished.recv_timeout(timeout).is_err();
    if timed_out {
        kill_group(pid);
    }
    let status = waiter
        .join()
        .map_err(|_| std::io::Error::other("hook waiter panicked"))??;
    // Whatever the hook left running in its group would hold stderr open: it goes too.
    kill_group(pid);
    Ok((!timed_out).then_some(status))
}

fn kill_group(pid: u32) {
    let Some(pgid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    match rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => tracing::warn!(pid, error = %e, "could not kill hook process group"),
    }
}
