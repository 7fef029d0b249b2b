//! Why a sessions server cannot start.

use std::net::SocketAddr;

/// Everything that can keep a [`SessionsServer`](crate::SessionsServer) from serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The session layer failed, or a file or socket operation did (its [`task_session::Error::Io`]).
    #[error(transparent)]
    Session(#[from] task_session::Error),
    /// A non-loopback address without TLS.
    #[error(
        "refusing to serve {0} without TLS: a non-loopback address needs --tls-cert and --tls-key"
    )]
    NoTls(SocketAddr),
    /// The token file is refused (the client's own check).
    #[error(transparent)]
    TokenFile(#[from] task_output::token::TokenFileError),
    /// No entropy for a new token.
    #[error("no randomness for a token: {0}")]
    NoRandomness(String),
}
