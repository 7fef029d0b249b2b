//! The texts the reference returns to its model for `Agent` and `SendMessage` calls
//! (`fixtures/reference/model-facing/observed.md`), for the front ends to hand back verbatim.

use task_core::{MessageOutcome, MessageReply};

use crate::error::AgentError;
use crate::executor::SendOutcome;

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
