//! Messages to agents: queued for a running one, resuming a stopped one under its id, also
//! one the supervisor no longer holds (evicted, or run by an earlier supervisor), taken back
//! from its records on disk for as long as they exist.

use task_agent::{AgentError, AgentExecutor, AgentStart, send_reply};
use task_core::{Address, MessageReply, TaskType};
use task_session::engine::Messenger;
use task_session::paths::SessionPaths;
use task_session::record::TaskRecord;
use task_session::restart::StartRecord;

use crate::recorded;

/// Messages go to agents (queued while they run, resuming them once stopped).
pub(crate) struct AgentMessages {
    pub(crate) agents: AgentExecutor,
    pub(crate) paths: SessionPaths,
}

#[async_trait::async_trait]
impl Messenger for AgentMessages {
    async fn send(&self, to: &Address, message: &str, _id: Option<&str>) -> MessageReply {
        let target = to.to_string();
        let mut sent = self.agents.send(&target, message, None).await;
        if matches!(sent, Err(AgentError::NoSuchAgent(_))) {
            match self.take_back(to).await {
                Ok(true) => sent = self.agents.send(&target, message, None).await,
                Ok(false) => {}
                Err(reason) => return MessageReply::refused(reason),
            }
        }
        send_reply(&sent)
    }
}

impl AgentMessages {
    /// Takes back the stopped agent `to` names from its records: whether one is on record, or
    /// why the one on record cannot be resumed.
    async fn take_back(&self, to: &Address) -> Result<bool, String> {
        let (paths, address) = (self.paths.clone(), to.clone());
        let found = tokio::task::spawn_blocking(move || recorded_agent(&paths, &address)).await;
        let Ok(Some((found, start))) = found else {
            return Ok(false);
        };
        let id = found.id();
        let adopted = start
            .and_then(|start| {
                let request = serde_json::from_value::<AgentStart>(start.request.clone())
                    .map_err(|e| e.to_string())?;
                let again = start.resumed().map_err(|e| e.to_string())?;
                Ok((request, again))
            })
            .and_then(|(request, again)| {
                self.agents
                    .adopt_started(&found.task, request, again.caller)
                    .map_err(|e| e.to_string())
            });
        match adopted {
            Ok(()) => {
                tracing::info!(task = %id, "a stopped agent taken back from its record");
                Ok(true)
            }
            Err(error) => {
                tracing::warn!(task = %id, %error, "cannot take the agent back");
                Err(format!("cannot resume agent {id}: {error}"))
            }
        }
    }
}

/// The stopped agent `to` names as the session's records have it, with how it was started: by
/// id, or the newest agent started with that name.
fn recorded_agent(
    paths: &SessionPaths,
    to: &Address,
) -> Option<(TaskRecord, Result<StartRecord, String>)> {
    recorded::stopped(paths, to, TaskType::LocalAgent, |_, start| {
        let Address::Name(name) = to else {
            return false;
        };
        start
            .and_then(|start| serde_json::from_value::<AgentStart>(start.request.clone()).ok())
            .is_some_and(|request| request.name.as_deref() == Some(name.as_str()))
    })
}
