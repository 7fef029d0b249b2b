//! Messages to agents: queued for a running one, resuming a stopped one under its id, also
//! one the supervisor no longer holds (evicted, or run by an earlier supervisor), taken back
//! from its records on disk for as long as they exist.

use task_agent::{AgentError, AgentExecutor, AgentStart, send_reply};
use task_core::{Address, MessageReply, TaskType};
use task_session::engine::Messenger;
use task_session::paths::SessionPaths;
use task_session::record::{self, TaskRecord};
use task_session::restart::{self, StartRecord};

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
        if matches!(sent, Err(AgentError::NoSuchAgent(_))) && self.take_back(to).await {
            sent = self.agents.send(&target, message, None).await;
        }
        send_reply(&sent)
    }
}

impl AgentMessages {
    /// Takes back the stopped agent `to` names from its records; whether one was.
    async fn take_back(&self, to: &Address) -> bool {
        let (paths, address) = (self.paths.clone(), to.clone());
        let found = tokio::task::spawn_blocking(move || recorded_agent(&paths, &address)).await;
        let Ok(Some((found, start))) = found else {
            return false;
        };
        let id = found.id();
        let adopted = serde_json::from_value::<AgentStart>(start.request.clone())
            .map_err(|e| e.to_string())
            .and_then(|request| {
                let again = start.again().map_err(|e| e.to_string())?;
                self.agents
                    .adopt_started(&found.task, request, again.caller)
                    .map_err(|e| e.to_string())
            });
        match adopted {
            Ok(()) => {
                tracing::info!(task = %id, "a stopped agent taken back from its record");
                true
            }
            Err(error) => {
                tracing::warn!(task = %id, %error, "cannot take the agent back");
                false
            }
        }
    }
}

/// The stopped agent `to` names as the session's records have it, with how it was started: by
/// id, or the newest agent started with that name.
fn recorded_agent(paths: &SessionPaths, to: &Address) -> Option<(TaskRecord, StartRecord)> {
    let stopped_agent = |found: &TaskRecord| {
        found.task.base.task_type == TaskType::LocalAgent && found.is_terminal()
    };
    match to {
        Address::Task(id) => {
            let found = record::read(paths, id).ok().filter(stopped_agent)?;
            let start = restart::recall(paths, id).ok()?;
            Some((found, start))
        }
        Address::Name(name) => record::list(paths)
            .ok()?
            .tasks
            .into_iter()
            .filter(stopped_agent)
            .filter_map(|found| {
                let start = restart::recall(paths, &found.id()).ok()?;
                let request = serde_json::from_value::<AgentStart>(start.request.clone()).ok()?;
                (request.name.as_deref() == Some(name.as_str())).then_some((found, start))
            })
            .max_by_key(|(found, _)| found.task.base.start_time),
        Address::Teammate { .. } => None,
    }
}
