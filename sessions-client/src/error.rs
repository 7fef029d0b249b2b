//! What can go wrong talking to a sessions server.

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

/// Why a front end's access check ([`check_access`](crate::check_access)) refused a server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// The sessions API refused the token, or the server's address is unusable.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The token file is refused (unreadable, open to others, empty).
    #[error(transparent)]
    TokenFile(#[from] task_output::token::TokenFileError),
}
