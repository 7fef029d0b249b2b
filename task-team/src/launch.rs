//! Teammates started from requests that crossed a process boundary (`tasks team spawn`).

use std::sync::Arc;

use task_core::{Caller, Launch, LaunchError, Launched, TaskState};

use super::{PendingTeammate, TeamExecutor, TeammateRequest};
use task_agent::AgentConfig;
use task_agent::AgentError;
use task_agent::{RunnerFormat, command_runner, start_on_runtime};

pub use task_protocol::start::TeammateStart;

impl Launch for TeamExecutor {
    type Request = TeammateStart;

    /// Registers the teammate `pending`; the start spawns its CLI in the caller's directory and
    /// environment.
    fn launch(&self, start: TeammateStart, caller: Caller) -> Result<Launched, LaunchError> {
        let request = request_of(start, caller)?;
        started(self.register(request))
    }
}

impl TeamExecutor {
    /// Resumes under its id the teammate a dead supervisor left live, or one that ended and
    /// is sent a message (`previous`, its last
    /// recorded state; `start`, how it was spawned) for `caller` (its original directory, the
    /// environment of the process that resumes it): see [`TeamExecutor::resume`].
    ///
    /// # Errors
    /// As [`Launch::launch`].
    pub fn relaunch(
        &self,
        previous: &TaskState,
        start: TeammateStart,
        caller: Caller,
    ) -> Result<Launched, LaunchError> {
        let request = request_of(start, caller)?;
        started(self.resume(previous, request))
    }
}

/// The teammate `start` asks for, run for `caller`.
fn request_of(start: TeammateStart, caller: Caller) -> Result<TeammateRequest, LaunchError> {
    let runner = command_runner(
        start.command,
        RunnerFormat::Claude,
        AgentConfig::default(),
        &caller,
    )?;
    let mut request = TeammateRequest::new(start.name, start.team, Arc::new(runner), start.prompt);
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

/// A registered teammate, started on the runtime.
fn started(pending: Result<PendingTeammate, AgentError>) -> Result<Launched, LaunchError> {
    let pending = pending?;
    Ok(start_on_runtime(pending.id(), async move {
        pending.start().await.map(|_| ())
    }))
}
