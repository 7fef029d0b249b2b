//! Remote agents started from requests that crossed a process boundary: the [`Launch`] side of
//! [`RemoteExecutor`] (`"remote"` requests, from `tasks remote` or the MCP `Agent` tool with
//! `isolation: "remote"`).

use std::path::Path;
use std::time::Duration;

use task_core::{Caller, Launch, LaunchError, Launched};

use crate::error::{ApiError, RemoteError};
use crate::executor::{RemoteExecutor, RemoteRequest};

pub use task_protocol::start::RemoteStart;

/// Checks, before a task is made, what would make its start fail for certain: the token
/// file (read relative to `cwd`), the server's address, and the server's verdict on the
/// token (each request limited to `timeout`). A front end calls it first, so a bad token
/// is its command's failure rather than a task that fails later.
///
/// # Errors
/// [`RemoteError::TokenFile`], or [`RemoteError::Api`] with
/// [`ApiError::BadServer`](crate::ApiError::BadServer) or
/// [`ApiError::Unauthorized`](crate::ApiError::Unauthorized). A server that cannot be
/// reached is not an error here: the start retries it within its outage limit.
pub async fn check_access(
    start: &RemoteStart,
    cwd: &Path,
    timeout: Duration,
) -> Result<(), RemoteError> {
    sessions_client::check_access(&start.server, &cwd.join(&start.token_file), timeout)
        .await
        .map_err(|refused| match refused {
            sessions_client::AccessError::Api(error) => RemoteError::Api(error),
            sessions_client::AccessError::TokenFile(error) => RemoteError::TokenFile(error),
            other => RemoteError::Api(ApiError::Transient(other.to_string())),
        })
}

impl Launch for RemoteExecutor {
    type Request = RemoteStart;

    /// Reads the token and registers the task `pending`; the returned start creates the session
    /// on the current tokio runtime.
    fn launch(&self, start: RemoteStart, caller: Caller) -> Result<Launched, LaunchError> {
        let mut request = RemoteRequest::new(
            start.server,
            caller.cwd.join(start.token_file),
            start.description,
            start.prompt,
        );
        request.subtype = start.remote_task_type;
        request.metadata = start.metadata;
        request.tool_use_id = caller.tool_use_id;
        request.owner_agent_id = caller.agent_id;
        request.id = caller.task_id;
        let pending = self.register(request).map_err(|error| match error {
            RemoteError::TokenFile(_) | RemoteError::Api(_) => {
                LaunchError::Invalid(error.to_string())
            }
            other => LaunchError::Failed(Box::new(other)),
        })?;
        Ok(Launched::on_runtime(pending.id(), pending.start()))
    }
}
