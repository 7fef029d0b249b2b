//! The error type of the `tasks` binary and the exit code of each failure.

use std::io;
use std::path::PathBuf;

use crate::protocol::InputRefusal;

/// Exit codes of `tasks`, documented in `tasks --help` and the crate README.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// A task id that is not a letter followed by 8 characters of `[0-9a-z]`.
    pub const MALFORMED_ID: u8 = 65;
    /// A well-formed id that names no task of the session.
    pub const UNKNOWN_TASK: u8 = 66;
    /// The supervisor could not be reached or refused a request.
    pub const SUPERVISOR: u8 = 69;
    /// Any other failure (bad input, a task-list rule, a corrupt file).
    pub const OTHER: u8 = 70;
    /// A file or socket operation failed.
    pub const IO: u8 = 74;
    /// `wait` gave up at its `--timeout` before every task ended.
    pub const WAIT_TIMEOUT: u8 = 124;
    /// `wait` on a task that was killed (128 + SIGKILL, as a shell reports it).
    pub const KILLED: u8 = 137;
}

/// Everything that can make a `tasks` command fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// A task id failed validation; nothing was built from it.
    #[error(
        "malformed task id {input:?}: expected a lowercase letter followed by 8 characters of [0-9a-z]"
    )]
    MalformedId {
        /// The text given.
        input: String,
    },
    /// A task-list task id that is not a positive number.
    #[error(
        "malformed list task id {input:?}: task-list tasks are numbered 1, 2, 3, … as `tasks list` shows them (#1, #2, …)"
    )]
    MalformedListId {
        /// The text given.
        input: String,
    },
    /// No task of this session has that id.
    #[error("no task {id} in session {session:?}")]
    UnknownTask {
        /// The id.
        id: String,
        /// The session searched.
        session: String,
    },
    /// A file or socket operation failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done ("read", "create", …).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// A state file exists but cannot be understood.
    #[error("corrupt state file {}: {reason}", path.display())]
    CorruptState {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A state directory that is not private to this user.
    #[error("refusing to use {}: {reason}", path.display())]
    UnsafeState {
        /// The directory.
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// The caller's working directory is gone or inaccessible: a task never runs elsewhere.
    #[error(
        "cannot use the current directory as the task's working directory ({0}); cd to an existing directory"
    )]
    MissingCwd(io::Error),
    /// The supervisor did not answer in time.
    #[error(
        "the supervisor (pid {pid}) did not answer within {waited}; it may be stopped (kill -CONT {pid}) or overloaded. The request will not be carried out later."
    )]
    NoAnswer {
        /// The supervisor's pid, as its lock file says (0 if unknown).
        pid: u32,
        /// How long the client waited.
        waited: String,
    },
    /// The session name would escape the root or is empty.
    #[error("invalid session name {0:?}: use letters, digits, '-', '_' and '.' (not leading)")]
    InvalidSession(String),
    /// No state directory could be derived (no `--root`, `$TASKS_ROOT`, `$XDG_STATE_HOME` or `$HOME`).
    #[error("cannot find a state directory: set --root or $TASKS_ROOT")]
    NoRoot,
    /// The supervisor could not be started or reached, or answered with an error.
    #[error("supervisor: {0}")]
    Supervisor(String),
    /// The task list store refused the operation.
    #[error("{0}")]
    List(String),
    /// Invalid input that is not an id (a JSON argument, an option value).
    #[error("{0}")]
    Invalid(String),
    /// Input for a task's stdin was refused, or only partly written (`tasks input`).
    #[error("{message}")]
    Input {
        /// Why.
        reason: crate::protocol::InputRefusal,
        /// What the supervisor said, with what to do about it.
        message: String,
    },
    /// A task that cannot be removed now (`tasks rm`).
    #[error("task {id} is kept: {reason}")]
    Kept {
        /// The task.
        id: String,
        /// Why.
        reason: crate::prune::KeepReason,
    },
}

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::MalformedId { .. } | CliError::MalformedListId { .. } => exit::MALFORMED_ID,
            CliError::UnknownTask { .. } => exit::UNKNOWN_TASK,
            CliError::Io { .. } => exit::IO,
            CliError::Supervisor(_) | CliError::NoAnswer { .. } => exit::SUPERVISOR,
            CliError::MissingCwd(_) => exit::IO,
            CliError::Input { reason, .. } => match reason {
                InputRefusal::UnknownTask => exit::UNKNOWN_TASK,
                InputRefusal::ReaderGone | InputRefusal::Failed => exit::IO,
                _ => exit::OTHER,
            },
            CliError::CorruptState { .. }
            | CliError::UnsafeState { .. }
            | CliError::InvalidSession(_)
            | CliError::NoRoot
            | CliError::List(_)
            | CliError::Invalid(_)
            | CliError::Kept { .. } => exit::OTHER,
        }
    }

    /// Builds an [`CliError::Io`] for `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        CliError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = CliError> = std::result::Result<T, E>;
