//! The error type of the `tasks` commands (task-client's, with the exit code of each failure),
//! and the words of the long commands' own errors.

pub use task_client::cli::error::{CliError, Result, exit};

/// An agent command line's error in this CLI's words: a prompt given apart is `--prompt`.
pub fn agent_command_error(error: &task_agent::AgentError) -> CliError {
    use task_agent::AgentError;
    CliError::invalid(match error {
        AgentError::PromptTwice { in_command, option } => format!(
            "the prompt is given twice: in the agent command ({in_command:?}) and with --prompt ({option:?}); give it in one place"
        ),
        AgentError::NoPrompt => "no prompt: give it in the agent command (`claude -p \"…\"`, `codex exec \"…\"`, `gemini -p \"…\"`) or with --prompt".to_owned(),
        other => other.to_string(),
    })
}
