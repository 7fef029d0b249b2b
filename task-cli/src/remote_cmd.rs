//! `tasks remote`: a remote agent, run by a sessions server and followed by this session's
//! supervisor (task-remote's `RemoteExecutor`).

use task_core::{Caller, TaskId};
use task_remote::{RemoteConfig, RemoteStart};

use crate::cli::RemoteArgs;
use crate::error::{CliError, Result};
use task_session::session::Session;

/// Starts the remote agent; returns its id and whether to wait for it.
pub(crate) fn start(session: &Session, args: RemoteArgs) -> Result<(TaskId, bool)> {
    let prompt = args.prompt.join(" ");
    if prompt.trim().is_empty() {
        return Err(CliError::invalid("the prompt is empty".into()));
    }
    let description = args
        .description
        .unwrap_or_else(|| prompt.lines().next().unwrap_or_default().to_owned());
    let start = RemoteStart {
        server: args.server,
        token_file: args.token_file,
        remote_task_type: args.subtype,
        description,
        prompt,
        metadata: None,
    };
    let caller = Session::caller()?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::invalid(format!("cannot start remote agent: {e}")))?
        .block_on(check_access(&start, &caller))?;
    let id = session.start(start, caller)?;
    Ok((id, args.wait))
}

/// Refuses, before any task is made, a remote start the server would refuse: an unreadable
/// token file, an unusable address, a token the server does not accept.
pub(crate) async fn check_access(start: &RemoteStart, caller: &Caller) -> Result<()> {
    let timeout = RemoteConfig::default().request_timeout;
    task_remote::check_access(start, &caller.cwd, timeout)
        .await
        .map_err(|e| CliError::invalid(format!("cannot start remote agent: {e}")))
}
