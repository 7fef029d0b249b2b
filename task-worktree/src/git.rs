//! The `git` command-line tool, run with argv (never through a shell) in a process group of its
//! own, killed with that group when it outlives its timeout.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use crate::WorktreeError;

/// How long a killed git's waiter is given to see it gone before it is left to itself.
const AFTER_KILL: Duration = Duration::from_secs(1);

/// Runs git commands, each bounded by `timeout`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Git {
    pub(crate) timeout: Duration,
}

impl Git {
    /// Runs `git ARGS` in `dir` (its variables that would point it elsewhere removed, no
    /// terminal prompt) with stdin closed and returns its stdout; a non-zero exit is
    /// [`WorktreeError::Git`] with its stderr.
    pub(crate) fn run<I, S>(&self, dir: &Path, args: I) -> Result<String, WorktreeError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.run_with(dir, args, Stdio::null())
    }

    /// [`run`](Self::run) with `stdin` as git's standard input (a locked record: git holds
    /// its lock for as long as it runs, even past the death of the process that started it).
    pub(crate) fn run_with<I, S>(
        &self,
        dir: &Path,
        args: I,
        stdin: Stdio,
    ) -> Result<String, WorktreeError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let args: Vec<OsString> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
        let command = || {
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let child = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(&args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE")
            .env_remove("GIT_INDEX_FILE")
            .env_remove("GIT_COMMON_DIR")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(WorktreeError::Spawn)?;
        let group = i32::try_from(child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw);
        let (sender, ended) = mpsc::channel();
        let waiter = std::thread::Builder::new()
            .name("git".into())
            .spawn(move || {
                let _ = sender.send(child.wait_with_output());
            });
        if let Err(error) = waiter {
            kill(group);
            return Err(WorktreeError::Spawn(error));
        }
        let output: Output = match ended.recv_timeout(self.timeout) {
            Ok(output) => output.map_err(WorktreeError::Spawn)?,
            Err(RecvTimeoutError::Timeout) => {
                kill(group);
                let _ = ended.recv_timeout(AFTER_KILL);
                tracing::warn!(command = %command(), timeout = ?self.timeout, "git killed");
                return Err(WorktreeError::Timeout {
                    command: command(),
                    after: self.timeout,
                });
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(WorktreeError::Spawn(std::io::Error::other(
                    "git's waiter ended without a word",
                )));
            }
        };
        if output.status.success() {
            return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
        }
        let said = String::from_utf8_lossy(&output.stderr);
        let reason = match said.trim() {
            "" => format!("exit status {}", output.status),
            said => said.lines().collect::<Vec<_>>().join(" / "),
        };
        Err(WorktreeError::Git {
            command: command(),
            reason,
        })
    }
}

/// `SIGKILL` to git's process group (its hooks and helpers with it).
fn kill(group: Option<rustix::process::Pid>) {
    if let Some(group) = group
        && let Err(error) =
            rustix::process::kill_process_group(group, rustix::process::Signal::KILL)
    {
        tracing::debug!(%error, "git's group already gone");
    }
}
