//! The crate's error type.

use std::path::PathBuf;

use crate::entry::EntryFault;

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
    /// A broken invariant of this crate (a bug), reported instead of a panic.
    #[error("internal error: {0}")]
    Internal(String),
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
    /// An entry of the list directory that is not read: a FIFO, a symlink, a directory, a file
    /// over the size limit… where a task file or another file of the list is expected.
    #[error("{} is not read: {fault}", path.display())]
    BadEntry {
        /// The entry.
        path: PathBuf,
        /// What is wrong with it.
        fault: EntryFault,
    },
    /// A `TaskCreated` hook refused the new task (the task was rolled back).
    #[error("TaskCreated hook feedback:\n{feedback}")]
    CreateBlocked {
        /// The hook's stderr.
        feedback: String,
    },
    /// The new task's `metadata.parent` names a task that does not exist (nothing was written).
    #[error("{0}")]
    InvalidParent(String),
    /// No lists root could be determined (no `HOME` and nothing configured).
    #[error("cannot determine the lists root: set TASKS_LIST_ROOT or HOME")]
    NoListsRoot,
    /// A PostgreSQL operation failed (after the retries, when it was retryable). The operation
    /// did not happen: every operation is one transaction. The message carries the client's
    /// causes (the server's own message, why a certificate was refused), which the client's
    /// error alone does not show ("db error", "error performing TLS handshake").
    #[error("PostgreSQL {op} on {store}: {}", chain(.source))]
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
    /// PostgreSQL connection settings that cannot be used: an `sslmode` libpq does not know,
    /// a `PGPORT` that is not a port, root certificates that cannot be read, … Nothing was
    /// connected to.
    #[error("PostgreSQL settings of {store}: {source}")]
    PgSettings {
        /// The connection string (password hidden).
        store: String,
        /// What is wrong.
        #[source]
        source: PgSettingsError,
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

/// What is wrong with PostgreSQL connection settings ([`Error::PgSettings`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgSettingsError {
    /// An `sslmode` that is not one of libpq's.
    #[error(
        "invalid sslmode {value:?} in {from}: expected disable, allow, prefer, require, verify-ca or verify-full"
    )]
    InvalidSslMode {
        /// The value given.
        value: String,
        /// Where: "the connection string" or "PGSSLMODE".
        from: &'static str,
    },
    /// `sslrootcert=system` with an `sslmode` that would not check the host name (libpq
    /// refuses it too).
    #[error("sslmode {mode:?} may not be used with sslrootcert=system (use verify-full)")]
    WeakSslModeWithSystemRoots {
        /// The mode given.
        mode: &'static str,
    },
    /// A `PGPORT` that is not a list of ports.
    #[error(
        "invalid PGPORT {value:?}: expected a port number, or one per host separated by commas"
    )]
    InvalidPort {
        /// The value given.
        value: String,
    },
    /// More than one port in `PGPORT`, but not one per host.
    #[error("PGPORT gives {ports} ports for {hosts} hosts")]
    PortCount {
        /// How many ports.
        ports: usize,
        /// How many hosts.
        hosts: usize,
    },
    /// `verify-ca` / `verify-full` with a root certificate file that does not exist.
    #[error(
        "root certificate file {path} does not exist: provide it, or change sslrootcert or sslmode"
    )]
    RootCertMissing {
        /// The file.
        path: PathBuf,
    },
    /// A root certificate file that cannot be read or holds no usable certificate.
    #[error("root certificate file {path}: {message}")]
    RootCert {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// rustls refused the TLS settings.
    #[error("TLS setup: {0}")]
    Tls(#[from] rustls::Error),
}

/// `error` and its causes, `: `-separated; a cause whose text its predecessor already shows
/// (an I/O error wrapping another) is not repeated.
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.ends_with(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
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
