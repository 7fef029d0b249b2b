//! Writing to a live task's standard input: what a front end asks for, and why it may be
//! refused. The executor of the task's type decides whether its tasks take input at all
//! ([`Task::write_input`](crate::Task::write_input)); [`Registry::write_input`](crate::Registry::write_input)
//! routes a request to it after checking the task is live.

use std::time::Duration;

use crate::{TaskId, TaskStatus, TaskType};

/// Bytes for a task's standard input, and whether to close it afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input<'a> {
    /// Written whole, in order, before anything another writer sends to the same task.
    pub bytes: &'a [u8],
    /// Close the task's stdin after `bytes` (end of file for its reader).
    pub close: bool,
    /// How long to wait for the task to take the bytes (its pipe may be full).
    pub patience: Duration,
}

/// Why input could not be written to a task. A refusal writes nothing, except
/// [`InputError::Stalled`], which says how much went through.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// No task has this id.
    #[error("no task with id {0}")]
    NotFound(TaskId),
    /// The task has ended: nothing reads its input any more.
    #[error("task {id} has already ended ({status})")]
    Finished {
        /// The task.
        id: TaskId,
        /// How it ended.
        status: TaskStatus,
    },
    /// Tasks of this type take no input on stdin.
    #[error("task {id} is a {task_type} task, which takes no input on stdin")]
    NotAccepted {
        /// The task.
        id: TaskId,
        /// Its type.
        task_type: TaskType,
    },
    /// The task was started with stdin `/dev/null`, not a pipe.
    #[error("task {0} was started without a stdin pipe (its stdin is /dev/null)")]
    NotPiped(TaskId),
    /// Its stdin was closed on request earlier.
    #[error("the stdin of task {0} is already closed")]
    Closed(TaskId),
    /// The task's processes closed their end of the pipe (writing got `EPIPE`).
    #[error("task {0} closed its stdin: nothing reads its input any more")]
    ReaderGone(TaskId),
    /// The task did not take the bytes in time (its pipe stayed full).
    #[error(
        "task {id} did not read its input: {written} of {total} bytes went through in {}",
        crate::human_duration(*waited)
    )]
    Stalled {
        /// The task.
        id: TaskId,
        /// Bytes written before giving up.
        written: usize,
        /// Bytes asked for.
        total: usize,
        /// How long it waited.
        waited: Duration,
    },
    /// Nothing that runs this type of task was registered.
    #[error("no executor is registered for {0} tasks")]
    NoExecutor(TaskType),
    /// Writing failed otherwise.
    #[error("cannot write to the stdin of task {id}: {source}")]
    Failed {
        /// The task.
        id: TaskId,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
}
