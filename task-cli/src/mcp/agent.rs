//! `Agent` and `SendMessage`: background agents run by the session's supervisor through the
//! agent CLI configured in `TASKS_AGENT_COMMAND` (a command line, split as a shell would), in
//! the format named by `TASKS_AGENT_RUNNER` (`claude`, the default, `codex` or `gemini`).

use std::sync::Arc;

use task_agent::{AgentExecutor, AgentStart, RunnerFormat, launch_text};
use task_core::TaskKind;

use crate::session::Session;

use super::context::{Context, Failure, Reply, blocking};
use super::schema::{AgentInput, SendMessageInput};

/// The environment variable naming the agent CLI the `Agent` tool runs.
pub const AGENT_COMMAND_ENV: &str = "TASKS_AGENT_COMMAND";
/// The environment variable naming that CLI's event format.
pub const AGENT_RUNNER_ENV: &str = "TASKS_AGENT_RUNNER";

/// How long a foreground `Agent` call waits for its agent (it is killed if the call is
/// abandoned first).
const FOREGROUND_LIMIT: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);

/// The configured agent CLI and its format, or why there is none usable.
pub(crate) fn configured_runner() -> Result<(Vec<String>, RunnerFormat), String> {
    let line = std::env::var(AGENT_COMMAND_ENV)
        .map_err(|_| format!("no agent command is configured (set {AGENT_COMMAND_ENV})"))?;
    let command = shlex::split(&line)
        .filter(|words| !words.is_empty())
        .ok_or_else(|| format!("{AGENT_COMMAND_ENV}={line:?} is not a command line"))?;
    let runner = match std::env::var(AGENT_RUNNER_ENV).as_deref() {
        Err(_) | Ok("") => RunnerFormat::Claude,
        Ok(name) => {
            serde_json::from_value(serde_json::Value::String(name.to_owned())).map_err(|_| {
                format!("{AGENT_RUNNER_ENV}={name:?}: expected claude, codex, gemini or auto")
            })?
        }
    };
    Ok((command, runner))
}

pub(crate) async fn agent(context: &Arc<Context>, input: AgentInput) -> Result<Reply, Failure> {
    if let Some(isolation) = &input.isolation {
        return Err(Failure::invalid(format!(
            "isolation {isolation:?} is not available on this server"
        )));
    }
    let (command, runner) = configured_runner().map_err(Failure::Tool)?;
    let start = AgentStart {
        command,
        runner,
        description: input.description,
        prompt: input.prompt,
        name: None,
        model: input.model,
        subagent_type: input.subagent_type,
    };
    let background = input.run_in_background.unwrap_or(false);
    let mut caller = Session::caller()?;
    caller.background = background;
    let session = context.session.clone();
    let id = blocking(move || session.start::<AgentExecutor>(start, caller)).await?;
    if background {
        let output = context.session.paths().output(&id);
        let shape = serde_json::json!({"agentId": id.as_str(), "status": "async_launched"});
        return Reply::new(launch_text(&id, &output), &shape);
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
    let session = context.session.clone();
    let sent = blocking(move || session.send_message(&input.to, &input.message)).await?;
    let shape: serde_json::Value = serde_json::from_str(&sent.reply).unwrap_or_default();
    Reply::new(sent.reply, &shape)
}
