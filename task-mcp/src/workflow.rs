//! `Workflow`: JavaScript workflow scripts run by the session's supervisor, their agents
//! through the configured agent CLI (offered only when one is configured, like `Agent`).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use task_client::workflow::Launched;
use task_protocol::start::WorkflowStart;

use task_session::session::Session;

use crate::context::{Context, Failure, Reply};

/// `Workflow` input (the reference's schema).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkflowInput {
    /// Self-contained workflow script. Must begin with `export const meta = { name, description, phases }` (pure literal, no computed values) followed by the script body using agent()/parallel()/pipeline()/phase().
    #[schemars(length(max = 524288))]
    pub script: Option<String>,
    /// Name of a predefined workflow. Resolves to a self-contained script.
    pub name: Option<String>,
    /// Ignored — set the workflow description in the script's `meta` block.
    #[allow(dead_code)] // Accepted and ignored, as the reference does.
    pub description: Option<String>,
    /// Ignored — set the workflow title in the script's `meta` block.
    #[allow(dead_code)] // Accepted and ignored, as the reference does.
    pub title: Option<String>,
    /// Optional input value exposed to the script as the global `args`, verbatim. Pass arrays/objects as actual JSON values, NOT as a JSON-encoded string.
    pub args: Option<Value>,
    /// Path to a workflow script file on disk. Every Workflow invocation persists its script and returns the path in the tool result. Takes precedence over `script` and `name`.
    pub script_path: Option<String>,
    /// Run ID of a prior Workflow invocation to resume from. Completed agent() calls with unchanged (prompt, opts) return their cached results instantly; only edited or new calls re-run. Stop the prior run first (TaskStop) before resuming.
    #[schemars(regex(pattern = r"^wf_[a-z0-9-]{6,}$"))]
    pub resume_from_run_id: Option<String>,
}

pub(crate) async fn workflow(
    context: &Arc<Context>,
    input: WorkflowInput,
) -> Result<Reply, Failure> {
    let (command, runner) = context.settings.agent.clone().map_err(Failure::Tool)?;
    let start = WorkflowStart {
        command,
        runner,
        script: input.script,
        script_path: input.script_path.map(Into::into),
        name: input.name,
        args: input.args,
        resume_from_run_id: input.resume_from_run_id,
    };
    let caller = Session::caller()?;
    let id = context.client.start(start, caller).await?;
    let tasks_dir = context.session.paths().tasks_dir();
    let run = Launched::read(&tasks_dir, &id).map_err(|e| Failure::Tool(e.to_string()))?;
    let launch = run.text(&id);
    let Launched {
        run_id,
        script_path,
        ..
    } = run;
    let shape = serde_json::json!({
        "taskId": id.as_str(), "runId": run_id, "status": "async_launched",
        "scriptPath": script_path, "outputFile": context.session.paths().output(&id),
    });
    Reply::announcing(launch, &shape)
}
