//! What can go wrong talking to a sessions server, and with a remote task.

use std::path::PathBuf;

/// Why a request to the sessions API failed, classified by what the caller should do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// The server refused the credentials (401/403): retrying cannot help.
    #[error("the server refused the token (HTTP {status}): {message}")]
    Unauthorized {
        /// 401 or 403.
        status: u16,
        /// The server's words.
        message: String,
    },
    /// A fault that may pass: a 5xx or 429, a timeout, a refused or reset connection, a body
    /// that is not the JSON the API promises (a truncated or malformed answer).
    #[error("transient fault: {0}")]
    Transient(String),
    /// No such session on the server.
    #[error("the server has no session {0}")]
    NotFound(String),
    /// The server rejected the request (another 4xx): retrying the same request cannot help.
    #[error("the server rejected the request (HTTP {status}): {message}")]
    Rejected {
        /// The status.
        status: u16,
        /// The server's words.
        message: String,
    },
    /// The client could not be built or the URL is not usable.
    #[error("bad server address {url:?}: {reason}")]
    BadServer {
        /// The address given.
        url: String,
        /// Why it cannot be used.
        reason: String,
    },
}

impl ApiError {
    /// Whether retrying later may succeed.
    pub fn is_transient(&self) -> bool {
        matches!(self, ApiError::Transient(_))
    }
}

/// Why a remote task could not be started, resumed or messaged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteError {
    /// The sessions API failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The token file is refused (unreadable, open to others, empty): the same check and words
    /// as the server's.
    #[error(transparent)]
    TokenFile(#[from] crate::token::TokenFileError),
    /// The sidecar or the output file failed.
    #[error(transparent)]
    Output(#[from] task_output::OutputError),
    /// The sidecar is not valid JSON of the expected shape.
    #[error("bad sidecar {path}: {reason}")]
    BadSidecar {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The registry refused a state.
    #[error(transparent)]
    Registry(#[from] task_core::RegistryError),
    /// The state could not be built.
    #[error(transparent)]
    State(#[from] task_core::StateError),
    /// An id could not be drawn.
    #[error(transparent)]
    Id(#[from] task_core::IdError),
    /// The task is not a remote agent this executor knows.
    #[error("no remote agent {0}")]
    NoSuchTask(String),
    /// The task has ended: it takes no messages.
    #[error("remote agent {0} has ended")]
    Ended(task_core::TaskId),
}
