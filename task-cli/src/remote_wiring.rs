//! The remote agents of a supervisor: task-remote's executor, the remote tasks a dead
//! supervisor left resumed from their sidecars, and messages routed to them.

use task_core::{Address, MessageOutcome, MessageReply, TaskType};
use task_remote::RemoteExecutor;

use crate::agent_wiring::AgentMessages;
use task_session::engine::{Host, Messenger};

/// The remote executor of `host`'s session, with every unfinished remote task of the session
/// followed again from its cursor (a task whose record says it ended is never resumed).
pub(crate) fn executor(host: &Host, config: task_remote::RemoteConfig) -> RemoteExecutor {
    let remotes = RemoteExecutor::new(
        host.registry.clone(),
        host.paths.tasks_dir(),
        host.paths.dir(),
        config,
    )
    .register_with_registry();
    let paths = host.paths.clone();
    let resumed = remotes.resume_all(|id| {
        task_session::record::read(&paths, id).is_ok_and(|record| record.is_terminal())
    });
    if !resumed.is_empty() {
        tracing::info!(?resumed, "remote agents followed again");
    }
    remotes
}

/// Messages to a remote agent go to its session; any other to the agents.
pub(crate) struct RemoteOrAgent {
    pub(crate) remotes: RemoteExecutor,
    pub(crate) agents: AgentMessages,
}

#[async_trait::async_trait]
impl Messenger for RemoteOrAgent {
    async fn send(&self, to: &Address, message: &str, message_id: Option<&str>) -> MessageReply {
        let id = match to {
            Address::Task(id) if id.task_type() == TaskType::RemoteAgent => *id,
            _ => return self.agents.send(to, message, message_id).await,
        };
        let outcome = match self.remotes.send(&id, message).await {
            Ok(()) => MessageOutcome::Relayed,
            Err(error) => MessageOutcome::Refused {
                reason: error.to_string(),
            },
        };
        MessageReply::reached(id, outcome)
    }
}
