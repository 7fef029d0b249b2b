//! `Agent` and `SendMessage`: background agents run by the session's supervisor through the
//! agent CLI configured in `TASKS_AGENT_COMMAND` or the session's `config.json`
//! (`agent_command`: a command line, split as a shell would), in the format named by
//! `TASKS_AGENT_RUNNER` / `agent_runner` (`claude`, the default, `codex`, `gemini` or `auto`).

use std::sync::Arc;

use task_core::TaskKind;
use task_protocol::start::{AgentStart, RemoteStart, RemoteSubtype, WorktreeRequest};
use task_protocol::texts::agent_launch;
use task_protocol::{Address, AddressError};

use task_session::session::Session;

use crate::McpError;
use crate::context::{Context, Failure, Reply};
use crate::schema::{AgentInput, Isolation, SendMessageInput};

/// How long a foreground `Agent` call waits for its agent (it is killed if the call is
/// abandoned first).
const FOREGROUND_LIMIT: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

pub(crate) async fn agent(context: &Arc<Context>, input: AgentInput) -> Result<Reply, Failure> {
    let worktree = match input.isolation {
        Some(Isolation::Remote) => return remote_agent(context, input).await,
        Some(Isolation::Worktree) => Some(WorktreeRequest::default()),
        None => None,
    };
    let (command, runner) = context.settings.agent.clone().map_err(Failure::Tool)?;
    let start = AgentStart {
        command,
        runner,
        description: input.description,
        prompt: input.prompt,
        name: None,
        model: input.model.map(|model| model.as_str().to_owned()),
        subagent_type: input.subagent_type,
        worktree,
        budget: None,
        placement: None,
    };
    let background = input.run_in_background.unwrap_or(false);
    let mut caller = Session::caller()?;
    caller.background = background;
    let id = context.client.start(start, caller).await?;
    if background {
        let output = context.session.paths().output(&id);
        let shape = serde_json::json!({"agentId": id.as_str(), "status": "async_launched"});
        return Reply::announcing(agent_launch(&id, &output), &shape);
    }
    // In the foreground the result is the answer, and no notification follows.
    let guard = context.foreground(id);
    let (task, _) = context.wait_terminal(id, FOREGROUND_LIMIT).await?;
    guard.finish();
    let (result, error) = match &task.task.kind {
        TaskKind::Agent(agent) => (agent.result.clone(), agent.error.clone()),
        _ => (None, None),
    };
    let shape = serde_json::json!({
        "agentId": id.as_str(), "status": task.status(), "result": result, "error": error,
    });
    match (result, error) {
        (Some(result), _) => Reply::new(result, &shape),
        (None, error) => {
            Err(Failure::Tool(error.unwrap_or_else(|| {
                format!("the agent ended {}", task.status().as_str())
            })))
        }
    }
}

pub(crate) async fn send_message(
    context: &Context,
    input: SendMessageInput,
) -> Result<Reply, Failure> {
    let to: Address = input
        .to
        .parse()
        .map_err(|e: AddressError| Failure::invalid(e.to_string()))?;
    let sent = context.client.send_message(&to, &input.message).await?;
    let result = sent.model_result(&to);
    Reply::new(result.to_string(), &result)
}

/// `Agent` with `isolation: "remote"`: a remote agent on the configured sessions server
/// (`TASKS_REMOTE_SERVER` and `TASKS_REMOTE_TOKEN_FILE`, or `remote_server` and
/// `remote_token_file` in the session's config), always in the background.
async fn remote_agent(context: &Arc<Context>, input: AgentInput) -> Result<Reply, Failure> {
    let Some(crate::RemoteServer { server, token_file }) = &context.settings.remote else {
        return Err(Failure::invalid(
            "isolation \"remote\" needs a sessions server: set TASKS_REMOTE_SERVER and \
             TASKS_REMOTE_TOKEN_FILE (or remote_server and remote_token_file in config.json)",
        ));
    };
    let start = RemoteStart {
        server: server.clone(),
        token_file: token_file.clone(),
        remote_task_type: RemoteSubtype::RemoteAgent,
        description: input.description,
        prompt: input.prompt,
        metadata: None,
    };
    let caller = Session::caller()?;
    // The token and the server's verdict on it are checked here, before a task is made: a
    // refused token is this call's failure, not a task that fails later. (A front-end check:
    // the supervisor's launcher must not wait on the network while it admits a start.)
    let token_file = caller.cwd.join(&start.token_file);
    sessions_client::check_access(&start.server, &token_file, sessions_client::REQUEST_TIMEOUT)
        .await
        .map_err(|e| McpError::RemoteAccess(e.to_string()))?;
    let id = context.client.start(start, caller).await?;
    let output = context.session.paths().output(&id);
    let shape = serde_json::json!({"taskId": id.as_str(), "status": "remote_launched"});
    Reply::new(
        format!(
            "Remote agent launched (task {id}). You will be notified when it completes. Its \
             events are appended to {}.",
            output.display()
        ),
        &shape,
    )
}
