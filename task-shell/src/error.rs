//! Errors of the shell and monitor executors.

use std::io;
use std::path::PathBuf;

use task_core::{IdError, KillError, RegistryError, TaskId, TaskStatus};
use task_output::OutputError;

/// Why a shell or monitor operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShellError {
    /// The command line was empty or only whitespace.
    #[error("the command is empty")]
    EmptyCommand,
    /// A monitor was given a URL that is not a WebSocket's.
    #[error("not a WebSocket URL (ws://… or wss://…): {0:?}")]
    NotWebSocket(String),
    /// A monitor was given both a command and a WebSocket, or neither.
    #[error("a monitor watches a command or a WebSocket: give exactly one")]
    MonitorSource,
    /// The working directory does not exist or is not a directory.
    #[error("working directory {} does not exist or is not a directory", path.display())]
    MissingWorkingDir {
        /// The directory asked for.
        path: PathBuf,
    },
    /// The shell could not be started.
    #[error("could not start {}: {source}", shell.display())]
    Spawn {
        /// The shell binary.
        shell: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// The WebSocket of a monitor could not be opened or failed while open.
    #[error("websocket {url}: {source}")]
    WebSocket {
        /// The URL of the socket.
        url: String,
        /// The protocol or I/O error.
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
    /// The subprotocol list cannot be sent as an HTTP header.
    #[error("invalid websocket subprotocols {protocols:?}")]
    InvalidProtocols {
        /// The subprotocols given.
        protocols: Vec<String>,
    },
    /// No task has this id (never registered, or already evicted).
    #[error("no task with id {0}")]
    UnknownTask(TaskId),
    /// The task has already ended, so there is nothing left to do.
    #[error("task {id} has already finished ({status})")]
    AlreadyFinished {
        /// The task.
        id: TaskId,
        /// The status it ended with.
        status: TaskStatus,
    },
    /// A task id could not be drawn.
    #[error(transparent)]
    Id(#[from] IdError),
    /// The output file could not be created or opened.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The registry refused a change.
    #[error(transparent)]
    Registry(RegistryError),
    /// The registry could not kill the task.
    #[error(transparent)]
    Kill(KillError),
    /// A shell was placed on a batch system this executor was not given
    /// ([`ShellExecutor::with_batch_engine`](crate::ShellExecutor::with_batch_engine)).
    #[error("no {engine} batch system is configured for this supervisor")]
    NoBatchEngine {
        /// The batch system asked for.
        engine: String,
    },
    /// A shell placed on a batch system was asked for a stdin pipe, which a job cannot have.
    #[error("a command placed on a batch system takes no stdin pipe")]
    BatchStdin,
    /// The task is not a live shell placed on a batch system.
    #[error("task {0} is not a live batch job")]
    NotBatch(TaskId),
    /// The task's run stopped without reporting an outcome (its runtime shut down).
    #[error("the run of task {0} stopped before the task ended")]
    RunGone(TaskId),
}

impl From<RegistryError> for ShellError {
    fn from(error: RegistryError) -> Self {
        match error {
            RegistryError::NotFound(id) => ShellError::UnknownTask(id),
            other => ShellError::Registry(other),
        }
    }
}
