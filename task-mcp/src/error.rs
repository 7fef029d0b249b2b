//! Why the MCP server, or a blocking job of one of its tools, failed.

/// Everything that can make the server or one of its internal jobs fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The session layer failed (a bad id, an unknown task, the supervisor, a state file).
    #[error(transparent)]
    Session(#[from] task_session::Error),
    /// The task list store failed.
    #[error(transparent)]
    List(#[from] task_list::Error),
    /// A job on the blocking pool panicked or was cancelled.
    #[error("internal error: a blocking job failed: {0}")]
    Blocking(String),
    /// The client closed the connection before initializing it.
    #[error("mcp: the client did not initialize: {0}")]
    NotInitialized(String),
    /// The server stopped on an error.
    #[error("mcp: the server stopped: {0}")]
    Stopped(String),
    /// A remote agent's server refused the token or cannot be reached.
    #[error("cannot start remote agent: {0}")]
    RemoteAccess(String),
}

/// Result alias of this crate.
pub type Result<T, E = McpError> = std::result::Result<T, E>;
