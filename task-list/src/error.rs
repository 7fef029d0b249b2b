//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong in a task-list operation that is not an ordinary, typed
/// "no" (those are results: see [`crate::UpdateResult`] and [`crate::ClaimResult`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A filesystem operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("read", "write", "rename", …).
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A task id is not a decimal number.
    #[error("invalid task id {0:?}: expected a decimal number such as \"1\"")]
    InvalidId(String),
    /// A list id or agent name is empty after sanitising.
    #[error("invalid name {0:?}: it must contain at least one character")]
    InvalidName(String),
    /// A lock could not be taken within the configured retries.
    #[error("lock {path} is held by another process (gave up after {attempts} attempts)")]
    LockBusy {
        /// The lock directory.
        path: PathBuf,
        /// How many times acquisition was tried.
        attempts: u32,
    },
    /// A task file exists but does not hold a valid task.
    #[error("task file {path} is malformed: {message}")]
    Corrupt {
        /// The task file.
        path: PathBuf,
        /// What the parser said.
        message: String,
    },
    /// A `TaskCreated` hook refused the new task (the task was rolled back).
    #[error("TaskCreated hook feedback:\n{feedback}")]
    CreateBlocked {
        /// The hook's stderr.
        feedback: String,
    },
    /// No lists root could be determined (no `HOME` and nothing configured).
    #[error("cannot determine the lists root: set TASKS_LIST_ROOT or HOME")]
    NoListsRoot,
    /// A PostgreSQL operation failed (after the retries, when it was retryable). The operation
    /// did not happen: every operation is one transaction.
    #[error("PostgreSQL {op} on {store}: {source}")]
    Database {
        /// What was being done ("connect", "write", "snapshot", …).
        op: &'static str,
        /// The store URL, password redacted.
        store: String,
        /// Whether running the operation again may succeed (serialization failure, deadlock,
        /// lost connection).
        retryable: bool,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
    /// An agent's inbox could not be written or read (task-output's shared mailbox).
    #[error(transparent)]
    Mailbox(#[from] task_output::mailbox::MailboxError),
    /// A store URL that names no supported store, or that does not parse.
    #[error("unsupported task-list store {store:?}: {message}")]
    InvalidStore {
        /// The store as given (password redacted).
        store: String,
        /// What is wrong with it.
        message: String,
    },
    /// An import into a list that is already in use (imports never merge).
    #[error(
        "cannot import into list {list:?}: it already has {tasks} task(s) and {records} audit record(s)"
    )]
    ImportTargetNotEmpty {
        /// The target list.
        list: String,
        /// How many tasks it has.
        tasks: usize,
        /// How many audit records it has.
        records: usize,
    },
    /// A document that is not a list export this crate can read.
    #[error("not a task-list export: {0}")]
    InvalidExport(String),
    /// The filesystem watcher failed.
    #[error("watch {path}: {source}")]
    Watch {
        /// The watched directory.
        path: PathBuf,
        /// The watcher's error.
        #[source]
        source: notify::Error,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Attaches an operation name and a path to an I/O error.
pub(crate) trait IoContext<T> {
    fn at(self, op: &'static str, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, op: &'static str, path: &std::path::Path) -> Result<T> {
        self.map_err(|source| Error::Io {
            op,
            path: path.to_path_buf(),
            source,
        })
    }
}
