//! The texts the reference returns to its model for `Agent` and `SendMessage` calls
//! (`fixtures/reference/model-facing/observed.md`), for the front ends to hand back verbatim.

use std::path::Path;

use serde_json::json;
use task_core::TaskId;

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

/// The JSON result of `SendMessage {to, message}`: the reference's texts for a resume and for
/// an unknown name; for a message queued to a running agent (which the reference words
/// differently per version) this project's `Message queued for {to}; it will be delivered at
/// its next turn.`
pub fn send_result(to: &str, result: &Result<SendOutcome, AgentError>) -> String {
    let value = match result {
        Ok(SendOutcome::Resumed { handle, previous }) => json!({
            "success": true,
            "message": format!(
                "Agent \"{to}\" was stopped ({}); resumed it in the background with your message. You'll be notified when it finishes. Output: {}",
                previous,
                handle.output_file.display()
            ),
            "resumedAgentId": handle.id.as_str(),
        }),
        Ok(SendOutcome::Queued(_)) => json!({
            "success": true,
            "message": format!("Message queued for {to}; it will be delivered at its next turn."),
        }),
        Err(error) => json!({"success": false, "message": error.to_string()}),
    };
    value.to_string()
}
