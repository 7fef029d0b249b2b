//! `tasks mcp`: the task system as a Model Context Protocol server on stdio.
//!
//! The server speaks MCP over stdin/stdout (stdout carries the protocol alone; diagnostics go
//! to stderr) and exposes the reference harness's tools (SPEC §13) over the same session and
//! task list as the CLI: a task an agent starts here is visible to `tasks ps` in another
//! terminal, and the other way round.
//!
//! | tool         | does                                                              |
//! |--------------|-------------------------------------------------------------------|
//! | `Bash`       | runs a command in the foreground, or in the background            |
//! | `TaskOutput` | reads a background task's output, waiting for its end if asked    |
//! | `TaskStop`   | kills a task and its process tree                                 |
//! | `Monitor`    | starts a command whose stdout lines become event notifications    |
//! | `TaskCreate`, `TaskGet`, `TaskUpdate`, `TaskList` | the task list (SPEC §12)     |
//! | `TaskClaim`  | claims a task or the best ready one; removes edges (not a reference tool) |
//!
//! Notifications reach the agent in tool results and as pushed `notifications/message`
//! messages (see [`notify`] for the exact payload); task outputs are resources at
//! `tasks://{id}/output` with `notifications/resources/updated` while they grow.

mod agent;
mod context;
mod list;
pub mod notify;
mod resources;
pub mod schema;
mod server;
mod shell;
mod text;
mod transport;
mod workflow;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use rmcp::ServiceExt;

use crate::error::{CliError, Result, exit};
use task_session::paths::SessionPaths;

pub use notify::WatchSettings;
pub use server::TasksServer;

/// Serve the task tools over the Model Context Protocol on stdio (for agents).
#[derive(Debug, Clone, Args)]
pub struct McpArgs {
    /// The task list of the Task* list tools (default: $TASKS_LIST_ID, else the session name).
    #[arg(long = "list", env = "TASKS_LIST_ID", value_name = "ID")]
    pub list: Option<String>,
    /// Lists root directory (default {root}/lists).
    #[arg(long, env = "TASKS_LIST_ROOT", value_name = "DIR")]
    pub lists_root: Option<PathBuf>,
    /// Use the reference harness's lists ($CLAUDE_CONFIG_DIR/tasks, else ~/.claude/tasks).
    #[arg(long, conflicts_with = "lists_root")]
    pub claude: bool,
    /// Keep the list in a PostgreSQL database: `postgres://user@host/db` (as `tasks list`).
    #[arg(long, env = "TASKS_LIST_STORE", value_name = "URL",
          conflicts_with_all = ["lists_root", "claude"])]
    pub store: Option<String>,
    /// Who is acting on the list (recorded in its audit log).
    #[arg(long, env = "TASKS_ACTOR", value_name = "NAME", default_value = "mcp")]
    pub actor: String,
    /// Who delivers notifications: `result` (the next tool result; pushes only announce) or
    /// `push` (the pushed `notifications/message` is the delivery).
    #[arg(long, value_enum, default_value_t = Deliverer::Result)]
    pub deliver: Deliverer,
    /// How often to look for notifications and output changes to push, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 500)]
    pub watch_ms: u64,
}

/// Who delivers a notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Deliverer {
    /// The next tool result carries the envelope; pushes only announce it.
    #[default]
    Result,
    /// The push claims and carries the envelope; tool results carry what no push took yet.
    Push,
}

/// Serves MCP on stdio for the session at `paths` until the client closes the connection.
pub fn run(paths: SessionPaths, args: McpArgs) -> Result<u8> {
    let session = crate::daemon::session(paths)?;
    let list = list::open_list(&session, &args)?;
    let context = context::Context::new(session, list, args.deliver)?;
    let watch = WatchSettings {
        interval: Duration::from_millis(args.watch_ms.max(1)),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::io("start", "the async runtime", e))?;
    runtime.block_on(serve(TasksServer::new(context, watch)))?;
    Ok(exit::OK)
}

async fn serve(server: TasksServer) -> Result<()> {
    let outbox = server.outbox();
    let transport = transport::BoundedTransport::new(
        tokio::io::stdin(),
        tokio::io::stdout(),
        transport::MAX_LINE_BYTES,
    )
    .on_answer(Arc::new(move |request, sent| {
        outbox.answered(request, sent)
    }));
    let running = server
        .serve(transport)
        .await
        .map_err(|e| CliError::invalid(format!("mcp: the client did not initialize: {e}")))?;
    tracing::info!("serving MCP on stdio");
    let reason = running
        .waiting()
        .await
        .map_err(|e| CliError::invalid(format!("mcp: the server stopped: {e}")))?;
    tracing::info!(?reason, "MCP client gone");
    Ok(())
}
