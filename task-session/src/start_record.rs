//! How a task was started: its kind, working directory, owner and request, as sent to the
//! supervisor, kept by the supervisor in the task's record (`start`), so that `tasks restart
//! ID` starts the same thing again under a new id and a message resumes a stopped agent.
//!
//! A restart runs in the environment of the `tasks restart` that asks for it. The caller's
//! environment is written down only for a kind that resumes (an agent, a teammate:
//! [`StartRequest::RESUMABLE`](task_protocol::start::StartRequest::RESUMABLE)), in the record's
//! `caller` (the file is the user's own, `0600` in the private session directory, like the
//! agent's transcript beside it), so that a resume runs in the environment the task started
//! with ([`StartRecord::resumed`]), whoever sends the message and whichever supervisor runs it.

use serde::{Deserialize, Serialize};
use task_core::Caller;

use crate::error::{Error, Result};
use crate::protocol::Start;

/// The format of a start record written today.
pub const FORMAT: u32 = 1;

/// How a task was started.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartRecord {
    /// [`FORMAT`].
    pub format: u32,
    /// The launcher's kind (`shell`, `monitor`, `agent`, …).
    pub kind: String,
    /// The working directory it ran in.
    pub cwd: std::path::PathBuf,
    /// The agent that owned it (other text than a task id reads as none).
    #[serde(
        default,
        deserialize_with = "task_core::lenient_task_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub agent_id: Option<task_core::TaskId>,
    /// The launcher's request, as sent.
    pub request: serde_json::Value,
    /// The task's own end hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_end: Option<String>,
    /// What is done with the processes it leaves running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strays: Option<crate::strays::StrayPolicy>,
    /// Who started it, whole environment included: kept for a kind that resumes
    /// ([`StartRecord::keeping_caller`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<Caller>,
}

impl StartRecord {
    /// The record of `start` (its environment left out).
    pub fn of(start: &Start) -> Self {
        Self {
            format: FORMAT,
            kind: start.kind.clone(),
            cwd: start.caller.cwd.clone(),
            agent_id: start.caller.agent_id,
            request: start.request.clone(),
            on_end: start.on_end.clone(),
            strays: start.strays,
            caller: None,
        }
    }

    /// The record of `start`, its caller (environment included) kept for resuming it.
    pub fn keeping_caller(start: &Start) -> Self {
        Self {
            caller: Some(start.caller.clone()),
            ..Self::of(start)
        }
    }

    /// The same task resumed: in the environment it was started with when its record keeps
    /// it, else (a record from before callers were kept) as [`StartRecord::again`] would.
    ///
    /// # Errors
    /// As [`StartRecord::again`], when the record keeps no caller.
    pub fn resumed(&self) -> Result<Start> {
        let Some(caller) = &self.caller else {
            return self.again();
        };
        let mut start = self.again_as(caller.clone());
        start.caller.cwd.clone_from(&self.cwd);
        Ok(start)
    }

    /// The same start again, from the process asking for it (its environment), in the
    /// original working directory and for the original owner.
    pub fn again(&self) -> Result<Start> {
        let mut caller = Caller::current().map_err(Error::MissingCwd)?;
        caller.cwd.clone_from(&self.cwd);
        Ok(self.again_as(caller))
    }

    /// This start again for `caller`, owned by the original owner.
    fn again_as(&self, mut caller: Caller) -> Start {
        caller.agent_id = self.agent_id;
        Start {
            kind: self.kind.clone(),
            caller,
            request: self.request.clone(),
            key: None,
            retry: false,
            schedule: None,
            on_end: self.on_end.clone(),
            strays: self.strays,
        }
    }
}
