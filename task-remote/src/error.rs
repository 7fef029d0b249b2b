//! What can go wrong talking to a sessions server, and with a remote task.

use std::path::PathBuf;

pub use sessions_client::ApiError;

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
    TokenFile(#[from] task_output::token::TokenFileError),
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
