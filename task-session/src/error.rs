//! The error type of the session layer.

use std::io;
use std::path::PathBuf;

use task_core::TaskId;
use task_protocol::wire::ErrorKind;

/// Everything that can make a session operation fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A task id failed validation; nothing was built from it.
    #[error(
        "malformed task id {input:?}: expected a lowercase letter followed by 8 characters of [0-9a-z]"
    )]
    MalformedId {
        /// The text given.
        input: String,
    },
    /// No task of this session has that id (or name, or id prefix: [`crate::resolve`]).
    #[error("no task {id} in session {session:?}")]
    UnknownTask {
        /// The id, name or prefix given.
        id: String,
        /// The session searched.
        session: String,
    },
    /// Text given for a task that is none of an id, a name or a prefix ([`crate::resolve`]);
    /// nothing was looked up or built from it.
    #[error(
        "malformed task id {input:?} ({why}): give a task id, a unique prefix of one (3 characters or more), an agent's NAME or a teammate's NAME@TEAM"
    )]
    MalformedReference {
        /// The text given (its first 64 characters).
        input: String,
        /// What is wrong with it.
        why: String,
    },
    /// A prefix that starts several ids, or a name several live tasks have.
    #[error(
        "{input:?} is ambiguous: it could be {}{}; give more of the id",
        candidates.iter().map(TaskId::as_str).collect::<Vec<_>>().join(", "),
        if *more > 0 { format!(" and {more} more") } else { String::new() }
    )]
    AmbiguousReference {
        /// The text given.
        input: String,
        /// The tasks it could be (the first few, by id).
        candidates: Vec<TaskId>,
        /// How many more it could be.
        more: usize,
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
    #[error(
        "cannot find a state directory: no root was given, and none of $TASKS_ROOT, $XDG_STATE_HOME and $HOME is set"
    )]
    NoRoot,
    /// The supervisor could not be started or reached, or answered with an error.
    #[error("supervisor: {0}")]
    Supervisor(String),
    /// A supervisor of an earlier directory at this session's path (deleted or replaced under
    /// it) still holds the session's root lock: no second supervisor starts until it has
    /// noticed and left (within a sweep interval, once it has killed its tasks).
    #[error(
        "the supervisor (pid {pid}) of the directory that was at {} before it was deleted or replaced has not left yet; try again once it has",
        dir.display()
    )]
    PredecessorStillThere {
        /// Its pid, as the root lock file says (0 if unknown).
        pid: u32,
        /// The session directory's path.
        dir: PathBuf,
    },
    /// The running supervisor does not serve this client's protocol version; nothing was done.
    #[error(
        "this client speaks protocol version {client}, the session's running supervisor version {supervisor} (it serves versions {oldest} to {supervisor}); nothing was done. Use the build that started the supervisor, or let its tasks end (it exits once idle) and try again"
    )]
    Protocol {
        /// The version this client speaks.
        client: u32,
        /// The version the supervisor speaks.
        supervisor: u32,
        /// The oldest client version it serves.
        oldest: u32,
    },
    /// The supervisor found no task that a request names (a dependency, a task to read): its
    /// refusal [`ErrorKind::UnknownTask`].
    #[error("{0}")]
    NotFound(String),
    /// The supervisor refused the request for a reason of its own kind (a start it could not
    /// make, a request read after its deadline, an internal failure); nothing was done. A
    /// request it did not understand is [`Error::Invalid`], one naming no task of the session
    /// [`Error::NotFound`] ([`Error::refused`]).
    #[error("supervisor: {message}")]
    Refused {
        /// What kind of refusal.
        kind: ErrorKind,
        /// The supervisor's words.
        message: String,
    },
    /// Invalid input that is not an id (a JSON argument, an option value).
    #[error("{0}")]
    Invalid(String),
    /// Input for a task's stdin was refused, or only partly written (`tasks input`).
    #[error("{message}")]
    Input {
        /// Why.
        reason: crate::refusal::InputRefusal,
        /// What the supervisor said, with what to do about it.
        message: String,
    },
    /// A task that cannot be removed now (`tasks rm`).
    #[error("task {id} is kept: {reason}")]
    Kept {
        /// The task.
        id: String,
        /// Why.
        reason: crate::refusal::KeepReason,
    },
}

impl Error {
    /// The error a supervisor's refusal stands for, by its kind: [`ErrorKind::BadRequest`] is
    /// [`Error::Invalid`], [`ErrorKind::UnknownTask`] [`Error::NotFound`], any other
    /// [`Error::Refused`] with its kind.
    pub fn refused(kind: ErrorKind, message: String) -> Self {
        match kind {
            ErrorKind::BadRequest => Error::Invalid(message),
            ErrorKind::UnknownTask => Error::NotFound(message),
            kind => Error::Refused { kind, message },
        }
    }

    /// The kind of the supervisor's refusal this error stands for, if it is one.
    pub fn refusal(&self) -> Option<ErrorKind> {
        match self {
            Error::Refused { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// Builds an [`Error::Io`] for `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
