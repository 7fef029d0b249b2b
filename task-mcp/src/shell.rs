//! `Bash`, `TaskOutput`, `TaskStop` and `Monitor`: background tasks of the session, run by its
//! supervisor exactly as `tasks run` runs them (so `tasks ps` in another terminal sees them).

use std::sync::Arc;
use std::time::Duration;

use task_output::format::format_for_model;
use task_protocol::start::{MonitorStart, ShellStart, StdinMode};
use task_protocol::{EndReason, TaskId};

use task_session::protocol::KillResult;
use task_session::session::Session;

use crate::context::{Context, Failure, Reply, blocking};
use crate::schema::{
    BashInput, BashOutput, DEFAULT_BASH_TIMEOUT_MS, MAX_TIMEOUT_MS, MonitorInput, MonitorOutput,
    RetrievalStatus, TaskOutputInput, TaskOutputResult, TaskStopInput, TaskStopOutput, TaskView,
};
use crate::text;

/// How much longer than the command's own timeout a foreground call waits for the supervisor
/// to report the end, before killing the task itself.
const TIMEOUT_GRACE: Duration = Duration::from_secs(5);

/// `Bash`: a foreground command (its output is the result) or a background one (its id is).
pub(crate) async fn bash(context: &Arc<Context>, input: BashInput) -> Result<Reply, Failure> {
    if input.command.trim().is_empty() {
        return Err(Failure::invalid("command is empty"));
    }
    let timeout_ms = input.timeout.unwrap_or(DEFAULT_BASH_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        return Err(Failure::invalid(format!(
            "timeout must be between 1 and {MAX_TIMEOUT_MS} ms, got {timeout_ms}"
        )));
    }
    let background = input.run_in_background.unwrap_or(false);
    let start = ShellStart {
        description: input.description.unwrap_or_else(|| input.command.clone()),
        command: input.command,
        timeout_ms: (!background).then_some(timeout_ms),
        stdin: StdinMode::Null,
        placement: None,
    };
    // The server's own environment and directory stand for its client's. A foreground run's
    // result is its notification: the supervisor never queues one.
    let mut caller = Session::caller()?;
    caller.background = background;
    let id = context.client.start(start, caller).await?;
    if background {
        let output = context.session.paths().output(&id);
        let shape = BashOutput {
            stdout: String::new(),
            stderr: String::new(),
            interrupted: false,
            background_task_id: Some(id.to_string()),
            exit_code: None,
        };
        return Reply::announcing(text::background_started(&id, &output), &shape);
    }
    foreground(context, id, Duration::from_millis(timeout_ms)).await
}

/// Waits for a foreground command (started not to notify) and returns its output, cut to
/// `BASH_MAX_OUTPUT_LENGTH` the way SPEC §4 cuts.
async fn foreground(
    context: &Arc<Context>,
    id: TaskId,
    timeout: Duration,
) -> Result<Reply, Failure> {
    let guard = context.foreground(id);
    let (mut task, ended) = context.wait_terminal(id, timeout + TIMEOUT_GRACE).await?;
    if !ended {
        context.client.kill(&[id]).await?;
        task = context.task(id).await?;
    }
    guard.finish();
    // The executor recorded why the command ended; nothing is guessed from codes or timings.
    let reason = task.end_reason().cloned();
    let interrupted = !ended || matches!(reason, Some(EndReason::TimedOut { .. }));
    let stderr = match &reason {
        _ if !ended => format!(
            "Command timed out after {}",
            task_protocol::human_duration(timeout)
        ),
        // Why it ended outside its command (a timeout, a dead supervisor…), if it did.
        Some(reason) => reason.stderr_note().unwrap_or_default(),
        None => String::new(),
    };
    let limit = text::bash_max_output(std::env::var(text::BASH_MAX_OUTPUT_ENV).ok().as_deref());
    let exit_code = task.exit_code();
    let session = context.session.clone();
    let tail = blocking(move || session.output_tail(&id)).await?;
    let output = format_for_model(&tail, &context.session.paths().output(&id), limit);
    let shape = BashOutput {
        stdout: output.clone(),
        stderr: stderr.clone(),
        interrupted,
        background_task_id: None,
        exit_code,
    };
    Reply::new(text::foreground_result(&output, &stderr, exit_code), &shape)
}

/// `TaskOutput`: the task's state and output, after waiting for its end if asked to.
pub(crate) async fn task_output(
    context: &Context,
    input: TaskOutputInput,
) -> Result<Reply, Failure> {
    if input.timeout > MAX_TIMEOUT_MS {
        return Err(Failure::invalid(format!(
            "timeout must be at most {MAX_TIMEOUT_MS} ms, got {}",
            input.timeout
        )));
    }
    let id = Session::parse_id(&input.task_id)?;
    let task = context.task(id).await?;
    let (task, status) = if task.is_terminal() {
        (task, RetrievalStatus::Success)
    } else if !input.block {
        (task, RetrievalStatus::NotReady)
    } else {
        match context
            .wait_terminal(id, Duration::from_millis(input.timeout))
            .await?
        {
            (task, true) => (task, RetrievalStatus::Success),
            (task, false) => (task, RetrievalStatus::Timeout),
        }
    };
    // An agent's output file is its transcript: what it answers is its result. Other
    // agent-like tasks answer with their conversation as a person reads it.
    let output = match &task.task.kind {
        task_core::TaskKind::Agent(agent) => agent
            .result
            .clone()
            .or_else(|| agent.error.clone())
            .unwrap_or_default(),
        _ if task.task.base.task_type.holds_conversation() => {
            let path = context.session.output_path(&id);
            blocking(move || {
                task_client::conversation::for_model(&path)
                    .map_err(|error| task_session::Error::Invalid(error.to_string()))
            })
            .await?
        }
        _ => {
            let session = context.session.clone();
            blocking(move || session.output_for_model(&id)).await?
        }
    };
    let view = TaskView {
        task_id: task.id().to_string(),
        task_type: task.task.base.task_type.as_str().to_owned(),
        status: task.status().as_str().to_owned(),
        exit_code: task.exit_code(),
        error: task.end_reason().and_then(EndReason::stderr_note),
        end_reason: task.end_reason().cloned(),
        description: task.task.base.description,
        output,
    };
    let text = text::task_output(status, &view);
    Reply::new(
        text,
        &TaskOutputResult {
            retrieval_status: status,
            task: Some(view),
        },
    )
}

/// `TaskStop`: kills a running task and its whole process tree.
pub(crate) async fn task_stop(context: &Context, input: TaskStopInput) -> Result<Reply, Failure> {
    let raw = input
        .task_id
        .or(input.shell_id)
        .ok_or_else(|| Failure::invalid("TaskStop needs task_id (or the deprecated shell_id)"))?;
    let id = Session::parse_id(&raw)?;
    let task = context.task(id).await?;
    if !task.is_terminal() {
        let reports = context.client.kill(&[id]).await?;
        if reports
            .iter()
            .any(|r| r.id == id && r.result == KillResult::Killed)
        {
            let command = task.command().to_owned();
            let shape = TaskStopOutput {
                message: format!("Successfully stopped task: {id} ({command})"),
                task_id: id.to_string(),
                task_type: task.task.base.task_type.as_str().to_owned(),
                command,
            };
            let text = serde_json::to_string(&shape)
                .map_err(|e| Failure::Tool(format!("internal error: {e}")))?;
            return Reply::new(text, &shape);
        }
    }
    let status = context.task(id).await?.status();
    Err(Failure::Tool(format!(
        "Task {id} is not running (status: {})",
        status.as_str()
    )))
}

/// `Monitor`: starts a command whose stdout lines become event notifications.
pub(crate) async fn monitor(context: &Context, input: MonitorInput) -> Result<Reply, Failure> {
    let limits = &context.settings.monitor;
    let max_ms = duration_ms(limits.max_timeout);
    if let Some(requested) = input.timeout_ms.filter(|&ms| ms > max_ms) {
        return Err(Failure::invalid(format!(
            "timeout_ms must be at most {max_ms}, got {requested}"
        )));
    }
    let (command, ws) = match (input.command, input.ws) {
        (Some(command), None) if !command.trim().is_empty() => (Some(command), None),
        (None, Some(ws)) => {
            let ws = task_protocol::start::WsTarget::from(ws);
            ws.check_scheme()
                .map_err(|e| Failure::invalid(e.to_string()))?;
            (None, Some(ws))
        }
        (Some(_), Some(_)) => return Err(Failure::invalid("give either command or ws, not both")),
        _ => return Err(Failure::invalid("Monitor needs a non-empty command, or ws")),
    };
    let source = if ws.is_some() {
        text::MonitorSource::WebSocket
    } else {
        text::MonitorSource::Command
    };
    let lifetime = limits.lifetime(
        input.timeout_ms.map(Duration::from_millis),
        input.persistent,
    );
    let start = MonitorStart {
        command,
        ws,
        description: input.description,
        timeout_ms: input.timeout_ms,
        persistent: input.persistent,
    };
    let caller = Session::caller()?;
    let id = context.client.start(start, caller).await?;
    let shape = MonitorOutput {
        task_id: id.to_string(),
        timeout_ms: lifetime.map_or(0, duration_ms),
        persistent: input.persistent,
    };
    let output = context.session.paths().output(&id);
    let text = text::monitor_started(&id, &output, source, shape.timeout_ms, shape.persistent);
    Reply::announcing(text, &shape)
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
