//! The client of the sessions API (SPEC §16): [`RemoteSessions`] (create, status, events
//! after a cursor, send, archive) and [`HttpSessions`], its implementation on reqwest with
//! rustls, whose failures are classified ([`ApiError`]); and [`check_access`], the check a
//! front end makes before it starts a remote agent.
//!
//! **Why a crate of its own:** both the remote executor (task-remote, which polls a session
//! for as long as its task lives) and the front ends (the MCP server's `Agent` tool with
//! `isolation: "remote"`, `tasks remote`) talk to a sessions server; a front end that only
//! checks a token must not link the executor. The wire shapes are the contract's
//! ([`task_protocol::remote_api`]); the token file rule is task-output's
//! ([`task_output::token`]).
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use sessions_client::HttpSessions;
//!
//! // A client: no request is made until it is used.
//! let client = HttpSessions::new("http://127.0.0.1:7070", "token", Duration::from_secs(5));
//! assert!(client.is_ok());
//! assert!(HttpSessions::new("ftp://host", "token", Duration::from_secs(5)).is_err());
//! ```
#![deny(missing_docs)]

mod client;
mod error;

use std::path::Path;
use std::time::Duration;

pub use client::{HttpSessions, RemoteSessions};
pub use error::{AccessError, ApiError};

/// The longest one request may take (the default of every client of the sessions API).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Checks, before a task is made, what would make a remote start fail for certain: the token
/// file `token_file`, the server's address `server`, and the server's verdict on the token
/// (each request limited to `timeout`). A front end calls it first, so a bad token is its
/// command's failure rather than a task that fails later.
///
/// # Errors
/// [`AccessError::TokenFile`], or [`AccessError::Api`] with [`ApiError::BadServer`] or
/// [`ApiError::Unauthorized`]. A server that cannot be reached is not an error here: the
/// start retries it within its outage limit.
pub async fn check_access(
    server: &str,
    token_file: &Path,
    timeout: Duration,
) -> Result<(), AccessError> {
    let token = task_output::token::read_token_file(token_file)?;
    HttpSessions::new(server, token, timeout)?
        .check_token()
        .await?;
    Ok(())
}
