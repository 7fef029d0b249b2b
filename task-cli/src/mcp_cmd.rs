//! `tasks mcp`: the task system as a Model Context Protocol server on stdio. The server is
//! task-mcp's [`TasksServer`]; this module resolves the task list as `tasks list` does, reads
//! the executors' settings of the session, and serves stdin/stdout (stdout carries the protocol
//! alone; diagnostics go to stderr).

use std::time::Duration;

use task_list::{Actor, EnvValues, Layout, ListIdHints, TaskList};
use task_mcp::{Deliverer, McpError, McpOptions, McpSettings, RemoteServer, TasksServer};

use crate::cli::{DeliverArg, McpArgs};
use crate::error::{CliError, Result, exit};
use crate::settings::Settings;
use task_session::paths::SessionPaths;
use task_session::session::Session;

impl From<DeliverArg> for Deliverer {
    fn from(arg: DeliverArg) -> Self {
        match arg {
            DeliverArg::Result => Deliverer::Result,
            DeliverArg::Push => Deliverer::Push,
            DeliverArg::Channel => Deliverer::Channel,
        }
    }
}

impl From<McpError> for CliError {
    fn from(error: McpError) -> Self {
        match error {
            McpError::Session(error) => error.into(),
            McpError::List(error) => CliError::List(error.to_string()),
            other => CliError::invalid(other.to_string()),
        }
    }
}

/// What the MCP tools need of the session's executor settings.
fn mcp_settings(settings: Settings) -> McpSettings {
    let mut mcp = McpSettings::default();
    mcp.agent = settings.agent_runner_command();
    mcp.remote = settings
        .remote_server
        .zip(settings.remote_token_file)
        .map(|(server, token_file)| RemoteServer { server, token_file });
    mcp.monitor = settings.shell.monitor_limits();
    mcp
}

/// Serves MCP on stdio for the session at `paths` until the client closes the connection.
pub fn run(paths: SessionPaths, args: McpArgs) -> Result<u8> {
    let session = crate::daemon::session(paths)?;
    let list = open_list(&session, &args)?;
    let settings = mcp_settings(Settings::read(&session.config().executors)?);
    let mut options = McpOptions::new(settings);
    options.delivery = args.deliver.into();
    options.watch.interval = Duration::from_millis(args.watch_ms.max(1));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::io("start", "the async runtime", e))?;
    let server = TasksServer::new(session, list, options);
    runtime.block_on(task_mcp::serve(
        server,
        tokio::io::stdin(),
        tokio::io::stdout(),
    ))?;
    Ok(exit::OK)
}

/// The list the `Task*` list tools use: resolved as `tasks list` resolves it, in the store
/// `--store` / `$TASKS_LIST_STORE` names (files by default).
fn open_list(session: &Session, args: &McpArgs) -> Result<TaskList> {
    let list_error = |e: task_list::Error| CliError::List(e.to_string());
    let mut env = EnvValues::from_env();
    env.tasks_root = Some(session.paths().root().to_string_lossy().into_owned());
    env.tasks_list_root = args
        .lists_root
        .as_ref()
        .map(|root| root.to_string_lossy().into_owned());
    let layout = if args.claude {
        Layout::Claude
    } else {
        Layout::Auto
    };
    let hints = ListIdHints {
        explicit: crate::list_open::session_list(
            args.list.as_deref(),
            args.claude,
            session.paths(),
        ),
        ..ListIdHints::default()
    };
    let id = task_list::resolve_list_id(&env, layout, hints).map_err(list_error)?;
    Ok(
        crate::list_open::open_in(args.store.as_deref(), &env, layout, &id)
            .map_err(list_error)?
            .with_actor(Actor::new(args.actor.clone())),
    )
}
