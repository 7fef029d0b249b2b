//! The texts the reference returns to its model for `Agent` and `SendMessage` calls
//! (`fixtures/reference/model-facing/observed.md`), for the front ends to hand back verbatim.

use std::path::Path;

use task_core::{MessageOutcome, MessageReply, TaskId};

use crate::error::AgentError;
use crate::executor::SendOutcome;

/// The result of a background `Agent` call.
pub fn launch_text(id: &TaskId, output_file: &Path) -> String {
    format!(
        "Async agent launched successfully.\n\
agentId: {id} (internal ID - do not mention to user. Use SendMessage with to: '{id}', summary: '<5-10 word recap>' to continue this agent.)\n\
The agent is working in the background. You will be notified automatically when it completes.\n\
Do not duplicate this agent's work — avoid working with the same files or topics it is using.\n\
output_file: {}\n\
Do NOT Read or tail this file via the shell tool — it is the full subagent JSONL transcript and reading it will overflow your context. If the user asks for progress, say the agent is still running; you'll get a completion notification.",
        output_file.display()
    )
}

/// What became of a message [`AgentExecutor::send`](crate::AgentExecutor::send) took, as the
/// typed reply every front end words (`MessageReply::model_result` is the reference's
/// `SendMessage` result).
pub fn send_reply(result: &Result<SendOutcome, AgentError>) -> MessageReply {
    match result {
        Ok(SendOutcome::Resumed { handle, previous }) => MessageReply::reached(
            handle.id,
            MessageOutcome::Resumed {
                previous: *previous,
                output_file: handle.output_file.clone(),
            },
        ),
        Ok(SendOutcome::Queued(id)) => MessageReply::reached(*id, MessageOutcome::Queued),
        Err(error @ AgentError::NoSuchAgent(_)) => MessageReply::unknown(error.to_string()),
        Err(error) => MessageReply::refused(error.to_string()),
    }
}
