//! `tasks remote`: a remote agent, run by a sessions server and followed by this session's
//! supervisor (task-remote's `RemoteExecutor`).

use std::path::PathBuf;

use clap::Args;
use task_core::{Caller, RemoteSubtype, TaskId};
use task_remote::{RemoteConfig, RemoteExecutor, RemoteStart};

use crate::error::{CliError, Result};
use task_session::session::Session;

/// Start a remote agent: a session on a sessions server (`tasks serve` on another machine).
#[derive(Debug, Args)]
pub struct RemoteArgs {
    /// The server's base URL (`http://127.0.0.1:7070`, `https://build-box:7070`).
    #[arg(long, env = "TASKS_REMOTE_SERVER", value_name = "URL")]
    pub server: String,
    /// The file holding the server's bearer token.
    #[arg(long, env = "TASKS_REMOTE_TOKEN_FILE", value_name = "FILE")]
    pub token_file: PathBuf,
    /// The remote task type: remote-agent, ultraplan, ultrareview, autofix-pr, background-pr.
    #[arg(long = "type", default_value = "remote-agent", value_parser = parse_subtype)]
    pub subtype: RemoteSubtype,
    /// Human description (default: the prompt's first line).
    #[arg(short, long)]
    pub description: Option<String>,
    /// Wait for it to end, print its notification and exit with its status.
    #[arg(long)]
    pub wait: bool,
    /// The prompt: its words joined by spaces.
    #[arg(required = true, last = true, value_name = "PROMPT")]
    pub prompt: Vec<String>,
}

fn parse_subtype(text: &str) -> std::result::Result<RemoteSubtype, String> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|_| {
        format!(
            "{text:?}: expected remote-agent, ultraplan, ultrareview, autofix-pr or background-pr"
        )
    })
}

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
    let id = session.start::<RemoteExecutor>(start, caller)?;
    Ok((id, args.wait))
}

/// Refuses, before any task is made, a remote start the server would refuse: an unreadable
/// token file, an unusable address, a token the server does not accept.
pub(crate) async fn check_access(start: &RemoteStart, caller: &Caller) -> Result<()> {
    let timeout = RemoteConfig::default().request_timeout;
    start
        .check_access(&caller.cwd, timeout)
        .await
        .map_err(|e| CliError::invalid(format!("cannot start remote agent: {e}")))
}
