//! Re-running a task: each start is remembered beside the task's record
//! (`{id}.start.json`: its kind, working directory, owner and request, as sent to the
//! supervisor), so `tasks restart ID` starts the same thing again under a new id.
//!
//! A restart runs in the environment of the `tasks restart` that asks for it. The caller's
//! environment is written down only for a kind that resumes (an agent, a teammate:
//! [`StartRequest::RESUMABLE`](task_protocol::start::StartRequest::RESUMABLE)), in the record's
//! `caller` (the file is the user's own, `0600` in the private session directory, like the
//! agent's transcript beside it), so that a resume runs in the environment the task started
//! with ([`StartRecord::resumed`]), whoever sends the message and whichever supervisor runs it.

use serde::{Deserialize, Serialize};
use task_core::{Caller, TaskId};

use crate::error::{Error, Result};
use crate::paths::SessionPaths;
use crate::protocol::Start;

/// The format of `{id}.start.json` written today.
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

/// Writes how `id` was started. Failing to is not failing the start: the task runs, and only
/// `restart` will say it cannot.
pub fn remember(paths: &SessionPaths, id: &TaskId, start: &StartRecord) {
    let written = serde_json::to_vec_pretty(start)
        .map_err(|e| Error::Invalid(e.to_string()))
        .and_then(|body| crate::record::replace(paths, &paths.start_request(id), &body));
    if let Err(error) = written {
        tracing::warn!(task = %id, %error, "cannot record how the task started; it cannot be restarted");
    }
}

/// How `id` was started.
pub fn recall(paths: &SessionPaths, id: &TaskId) -> Result<StartRecord> {
    crate::record::read(paths, id)?;
    let path = paths.start_request(id);
    let bytes = task_output::open::read_untrusted(&path, crate::paths::MAX_STATE_FILE_BYTES)
        .map_err(|e| match e {
            task_output::OutputError::NotFound { .. } => Error::Invalid(format!(
                "task {id} cannot be restarted: how it was started was not recorded"
            )),
            _ => Error::io("read", &path, e.into()),
        })?;
    serde_json::from_slice(&bytes).map_err(|e| Error::CorruptState {
        path,
        reason: e.to_string(),
    })
}
