//! A started shell or monitor task as whoever started it holds it ([`TaskHandle`]): its id,
//! output file and pid, the write end of its stdin, and the wait for its outcome. The executor
//! makes them; the stdin pipes take theirs over.

use std::path::{Path, PathBuf};

use crate::control::{Outcome, OutcomeWait};
use crate::error::ShellError;
use task_core::TaskId;
use task_core::process::ChildStdin;

/// A started shell or monitor task.
#[derive(Debug)]
pub struct TaskHandle {
    pub(crate) id: TaskId,
    pub(crate) output: PathBuf,
    pub(crate) pid: Option<u32>,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) outcome: OutcomeWait,
}

impl TaskHandle {
    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// The absolute path of its output file.
    pub fn output_file(&self) -> &Path {
        &self.output
    }

    /// The pid of its shell (also its process group id); `None` for a WebSocket monitor.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The write end of its stdin, when [`StdinMode::Piped`](crate::process::StdinMode) was
    /// asked for (once).
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take()
    }

    /// Waits until the task has ended and its end is recorded.
    ///
    /// # Errors
    /// [`ShellError::RunGone`] if the runtime shut down before the task ended.
    pub async fn wait(&mut self) -> Result<Outcome, ShellError> {
        self.outcome
            .wait()
            .await
            .ok_or(ShellError::RunGone(self.id))
    }
}
