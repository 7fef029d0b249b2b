//! Workflows started from requests that crossed a process boundary (`tasks workflow`, the
//! MCP `Workflow` tool): the [`Launch`] side of [`WorkflowExecutor`], kind `"workflow"`.

use std::sync::Arc;

use task_core::{Caller, Launch, LaunchError, Launched};

use super::{ScriptSource, WorkflowError, WorkflowExecutor, WorkflowRequest};
use task_agent::RunnerFormatExt;

pub use task_protocol::start::WorkflowStart;

fn source(start: &WorkflowStart) -> Result<ScriptSource, WorkflowError> {
    match (&start.script_path, &start.script, &start.name) {
        (Some(path), _, _) => Ok(ScriptSource::Path(path.clone())),
        (None, Some(text), _) => Ok(ScriptSource::Inline(text.clone())),
        (None, None, Some(name)) => Ok(ScriptSource::Name(name.clone())),
        (None, None, None) if start.resume_from_run_id.is_some() => Ok(ScriptSource::Resumed),
        (None, None, None) => Err(WorkflowError::Script(
            "give a script, a scriptPath, a name or a resumeFromRunId".into(),
        )),
    }
}

impl Launch for WorkflowExecutor {
    type Request = WorkflowStart;

    /// Registers the run `pending` (its id, run id and files exist at once); the returned
    /// start runs it on the current tokio runtime, its agents in the caller's directory and
    /// environment; the caller's agent owns it.
    fn launch(&self, start: WorkflowStart, caller: Caller) -> Result<Launched, LaunchError> {
        let invalid = |error: WorkflowError| LaunchError::Invalid(error.to_string());
        let source = source(&start).map_err(invalid)?;
        let runner = start
            .runner
            .command_runner(start.command, self.inner.agents.config().clone())
            .map_err(|error| LaunchError::Invalid(error.to_string()))?;
        let mut request = WorkflowRequest::new(Arc::new(runner), source);
        request.args = start.args;
        request.resume_from = start.resume_from_run_id;
        request.cwd = Some(caller.cwd);
        request.env = caller.env;
        request.replace_env = true;
        request.tool_use_id = caller.tool_use_id;
        request.owner_agent_id = caller.agent_id;
        request.id = caller.task_id;
        let prepared = self.prepare(request).map_err(|error| match error {
            WorkflowError::Output(_) | WorkflowError::Registry(_) | WorkflowError::Id(_) => {
                LaunchError::Failed(Box::new(error))
            }
            other => invalid(other),
        })?;
        let id = prepared.handle.id;
        let executor = self.clone();
        Ok(Launched {
            id,
            start: Some(Box::new(move || {
                if let Err(error) = executor.begin(prepared) {
                    tracing::warn!(task = %id, %error, "the workflow did not start");
                }
            })),
        })
    }
}
