//! The normalised events every agent CLI format is parsed into.

use serde_json::Value;
use task_core::MessageUsage;

/// One thing an agent did, whatever CLI it runs in.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AgentEvent {
    /// The session started; `session_id` is what a resume needs.
    Init {
        /// The CLI's session (Claude, Gemini) or thread (Codex) id.
        session_id: String,
        /// The model, when the CLI says.
        model: Option<String>,
    },
    /// Assistant text (a whole message, or a chunk of one for CLIs that stream deltas).
    Text(String),
    /// A tool use began.
    ToolStarted(ToolUse),
    /// A tool use ended.
    ToolFinished {
        /// The tool use's id.
        id: String,
        /// Whether the tool reported an error.
        is_error: bool,
    },
    /// Token usage of one model message.
    Usage(MessageUsage),
    /// The turn ended: the CLI's final result of this turn.
    TurnEnded(TurnOutcome),
}

/// A tool use as the CLI reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolUse {
    /// Its id (`toolu_…`, a Codex item id, a Gemini tool id).
    pub id: String,
    /// The tool's name (`Bash`, `Read`, `command_execution`, `run_shell_command`, …).
    pub name: String,
    /// Its input.
    pub input: Value,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TurnOutcome {
    /// The agent answered; `result` is its final text when the CLI gives one.
    Success {
        /// The final text.
        result: Option<String>,
    },
    /// The turn failed (`error_max_turns`, `error_during_execution`, a failed Codex turn, …).
    Error {
        /// The CLI's error kind (Claude's `subtype`, `turn.failed`, Gemini's error type).
        kind: String,
        /// Its message, when the CLI gives one.
        message: Option<String>,
    },
}

impl TurnOutcome {
    /// The text a failure notification shows: the message, else the kind.
    pub fn error_text(&self) -> Option<String> {
        match self {
            TurnOutcome::Success { .. } => None,
            TurnOutcome::Error { kind, message } => {
                Some(message.clone().unwrap_or_else(|| kind.clone()))
            }
        }
    }
}
