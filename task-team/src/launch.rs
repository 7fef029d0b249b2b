//! Teammates started from requests that crossed a process boundary (`tasks team spawn`).

use std::sync::Arc;

use task_core::{Caller, Launch, LaunchError, Launched, TaskKind, TaskState};

use super::{PendingTeammate, TeamExecutor, TeammateRequest};
use task_agent::AgentConfig;
use task_agent::AgentError;
use task_agent::{RunnerFormat, command_runner, placed_runner, start_on_runtime};

pub use task_protocol::start::TeammateStart;

impl Launch for TeamExecutor {
    type Request = TeammateStart;

    /// Registers the teammate `pending`; the start spawns its CLI in the caller's directory and
    /// environment.
    fn launch(&self, start: TeammateStart, caller: Caller) -> Result<Launched, LaunchError> {
        let request = self.request_of(start, caller)?;
        started(self.register(request))
    }

    /// Resumes under its id the teammate a dead supervisor left live, or one that ended and
    /// is sent a message (`previous`, its last recorded state): see [`TeamExecutor::resume`].
    /// One whose agent CLI never said its session has none to resume.
    fn take_back(
        &self,
        previous: &TaskState,
        start: TeammateStart,
        caller: Caller,
    ) -> Result<Launched, LaunchError> {
        if let TaskKind::Teammate(mate) = &previous.kind
            && mate.session_id.is_none()
            && previous.status().is_terminal()
        {
            return Err(LaunchError::Invalid(
                "its agent CLI never said its session, so there is none to resume".into(),
            ));
        }
        let request = self.request_of(start, caller)?;
        started(self.resume(previous, request))
    }

    /// A teammate's session goes on under the next supervisor.
    fn goes_on_after_supervisor_death(&self) -> bool {
        true
    }
}

impl TeamExecutor {
    /// The teammate `start` asks for, run for `caller`: its agent CLI where its placement (else
    /// the default placement) says, a time budget being a batch job's time limit too.
    fn request_of(
        &self,
        start: TeammateStart,
        caller: Caller,
    ) -> Result<TeammateRequest, LaunchError> {
        let cli = command_runner(
            start.command,
            RunnerFormat::Claude,
            AgentConfig::default(),
            &caller,
        )?;
        let limit = start
            .budget
            .and_then(|budget| budget.timeout_ms)
            .map(std::time::Duration::from_millis);
        let runner = placed_runner(&self.engines(), Arc::new(cli), start.placement, limit)?;
        let mut request = TeammateRequest::new(start.name, start.team, runner, start.prompt);
        request.plan_mode = start.plan;
        request.color = start.color;
        request.worktree = start.worktree;
        request.budget = start.budget;
        request.cwd = Some(caller.cwd);
        request.env = caller.env;
        request.replace_env = true;
        request.id = caller.task_id;
        Ok(request)
    }
}

/// A registered teammate, started on the runtime.
fn started(pending: Result<PendingTeammate, AgentError>) -> Result<Launched, LaunchError> {
    let pending = pending?;
    Ok(start_on_runtime(pending.id(), async move {
        pending.start().await.map(|_| ())
    }))
}
