//! Teammates started from requests that crossed a process boundary (`tasks team spawn`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use task_core::{Caller, Launch, LaunchError, Launched, TaskState};

use super::{PendingTeammate, TeamExecutor, TeammateRequest};
use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::launch::{RunnerFormat, command_runner, start_on_runtime};
use crate::worktree::WorktreeRequest;

/// A teammate to start (`in_process_teammate`): `name@team` and the agent CLI that runs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TeammateStart {
    /// Its name in the team.
    pub name: String,
    /// The team.
    pub team: String,
    /// The agent CLI, program then arguments (it must take stream-json input: `claude`).
    pub command: Vec<String>,
    /// Its first turn.
    pub prompt: String,
    /// Whether its plan needs the lead's approval first.
    #[serde(default)]
    pub plan: bool,
    /// Its display colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// Run it in a git worktree of its own, made from the caller's `HEAD`
    /// ([`worktree`](crate::worktree)); a resumed teammate goes on in the one it had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worktree: Option<WorktreeRequest>,
    /// Its budgets ([`crate::budget`]); a resumed teammate has them again from its resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<task_core::AgentBudget>,
}

impl Launch for TeamExecutor {
    type Request = TeammateStart;
    const KIND: &'static str = "teammate";

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
