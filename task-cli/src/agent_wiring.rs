//! Messages to agents: queued for a running one, resuming a stopped one the supervisor holds.
//! One it no longer holds (evicted, or run by an earlier supervisor) is taken back from its
//! records by the supervisor's engine, through the agent executor's `take_back`.

use task_agent::{AgentExecutor, send_reply};
use task_core::{Address, MessageReply};
use task_session::engine::Messenger;

/// Messages go to agents (queued while they run, resuming them once stopped).
pub(crate) struct AgentMessages {
    pub(crate) agents: AgentExecutor,
}

#[async_trait::async_trait]
impl Messenger for AgentMessages {
    async fn send(&self, to: &Address, message: &str, _id: Option<&str>) -> MessageReply {
        send_reply(&self.agents.send(&to.to_string(), message, None).await)
    }
}
