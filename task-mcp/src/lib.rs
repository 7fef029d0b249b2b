//! The task system as a Model Context Protocol server: the reference harness's tools (SPEC §13),
//! their schemas and model-facing texts, and the foreground-`Bash` semantics, over a
//! [`Session`] and a [`TaskList`], usable by any harness (`tasks mcp` is this crate wired to
//! stdio and the session's settings).
//!
//! A task an agent starts here is visible to `tasks ps` in another terminal, and the other way
//! round: the tools are session-layer requests.
//!
//! | tool         | does                                                              |
//! |--------------|-------------------------------------------------------------------|
//! | `Bash`       | runs a command in the foreground, or in the background            |
//! | `TaskOutput` | reads a background task's output, waiting for its end if asked    |
//! | `TaskStop`   | kills a task and its process tree                                 |
//! | `Monitor`    | starts a command whose stdout lines become event notifications    |
//! | `Agent`, `SendMessage`, `Workflow` | agents and workflows (offered when an agent CLI is configured) |
//! | `TaskCreate`, `TaskGet`, `TaskUpdate`, `TaskList` | the task list (SPEC §12)     |
//! | `TaskClaim`  | claims a task or the best ready one; removes edges; moves a task (not a reference tool) |
//!
//! A foreground `Bash` (or `Agent`) call waits for its task; a call the client cancels kills
//! it, and its end is never notified (the result was the answer).
//!
//! Notifications reach the agent in tool results and as pushed `notifications/message`
//! messages (see [`notify`] for the exact payload); task outputs are resources at
//! `tasks://{id}/output` with `notifications/resources/updated` while they grow.
//!
//! # Example
//!
//! Serving a session and its task list on stdio:
//!
//! ```no_run
//! # async fn example() -> Result<(), task_mcp::McpError> {
//! use task_mcp::{McpOptions, McpSettings, TasksServer};
//! use task_session::paths::SessionPaths;
//! use task_session::session::Session;
//!
//! let session = Session::open(SessionPaths::resolve(None, None)?)?;
//! let list = task_list::TaskList::open("/tmp/lists", "work", task_list::StoreConfig::default())?;
//! let settings = McpSettings::default(); // no agent CLI: no Agent tool
//! let server = TasksServer::new(session, list, McpOptions::new(settings));
//! task_mcp::serve(server, tokio::io::stdin(), tokio::io::stdout()).await?;
//! # Ok(()) }
//! ```

mod agent;
pub mod client;
mod context;
mod error;
mod list;
pub mod notify;
mod outbox;
mod resources;
pub mod schema;
mod server;
mod shell;
mod text;
pub mod transport;
mod workflow;

use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;
use task_protocol::start::{MonitorLimits, RunnerFormat};
use tokio::io::{AsyncRead, AsyncWrite};

pub use error::{McpError, Result};
pub use notify::WatchSettings;
pub use server::TasksServer;
pub use text::{BASH_MAX_OUTPUT_DEFAULT, BASH_MAX_OUTPUT_ENV, bash_max_output};
pub use workflow::WorkflowInput;

#[cfg(doc)]
use task_list::TaskList;
#[cfg(doc)]
use task_session::session::Session;

/// Who delivers a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Deliverer {
    /// The next tool result carries the envelope; pushes only announce it.
    #[default]
    Result,
    /// The push claims and carries the envelope; tool results carry what no push took yet.
    Push,
    /// A Claude Code channel event (`notifications/claude/channel`) claims and carries the
    /// envelope: the client puts it in front of its model mid-session, without a tool call.
    /// Tool results carry what no push took yet. The client must listen
    /// (`claude --dangerously-load-development-channels server:NAME`), and it listens only on
    /// the session protocols, so this server then offers none newer than 2025-11-25.
    Channel,
}

impl Deliverer {
    /// Whether a push claims the notifications it carries.
    pub fn pushes(self) -> bool {
        matches!(self, Deliverer::Push | Deliverer::Channel)
    }
}

/// The sessions server the `Agent` tool's `isolation: "remote"` starts agents on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteServer {
    /// Its URL.
    pub server: String,
    /// The file holding its bearer token.
    pub token_file: PathBuf,
}

/// The executors' settings the tools use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpSettings {
    /// A monitor's default and longest lifetime (`Monitor`'s timeout limit).
    pub monitor: MonitorLimits,
    /// The agent CLI `Agent` and `Workflow` run (its words and format), or why there is none
    /// (then neither tool is offered, unless `remote` is set, and a call answers this text).
    pub agent: std::result::Result<(Vec<String>, RunnerFormat), String>,
    /// The sessions server of `isolation: "remote"` (none: refused).
    pub remote: Option<RemoteServer>,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            monitor: MonitorLimits::default(),
            agent: Err("no agent command is configured".to_owned()),
            remote: None,
        }
    }
}

/// How a [`TasksServer`] delivers notifications and what its tools may run.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct McpOptions {
    /// Who delivers notifications.
    pub delivery: Deliverer,
    /// How often the session is watched for pushes.
    pub watch: WatchSettings,
    /// The executors' settings.
    pub settings: McpSettings,
}

impl McpOptions {
    /// Result delivery and the default watch interval, with `settings`.
    pub fn new(settings: McpSettings) -> Self {
        McpOptions {
            delivery: Deliverer::default(),
            watch: WatchSettings::default(),
            settings,
        }
    }
}

/// Serves MCP on `reader`/`writer` (newline-delimited JSON-RPC, every line bounded:
/// [`transport::BoundedTransport`]) until the client closes the connection.
///
/// # Errors
/// The client did not initialize; the server stopped on an error.
pub async fn serve<R, W>(server: TasksServer, reader: R, writer: W) -> Result<()>
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    let outbox = server.outbox();
    let transport = transport::BoundedTransport::new(reader, writer, transport::MAX_LINE_BYTES)
        .on_answer(Arc::new(move |request, sent| {
            outbox.answered(request, sent)
        }));
    let running = server
        .serve(transport)
        .await
        .map_err(|e| McpError::NotInitialized(e.to_string()))?;
    tracing::info!("serving MCP");
    let reason = running
        .waiting()
        .await
        .map_err(|e| McpError::Stopped(e.to_string()))?;
    tracing::info!(?reason, "MCP client gone");
    Ok(())
}
