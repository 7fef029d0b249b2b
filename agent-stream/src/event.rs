//! The normalised events every agent CLI format is parsed into.

use serde_json::Value;

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
    /// Assistant text: one whole message (the parsers join the fragments of CLIs that stream
    /// a message in pieces).
    Text(String),
    /// A user turn's text, as the conversation holds it: Claude's user messages (replayed by
    /// `--replay-user-messages`, or in its transcripts), Gemini's `user` message, the line the
    /// runner writes before a Codex turn ([`USER_TURN_TYPE`](crate::format::USER_TURN_TYPE)).
    /// Tool results are not user turns.
    UserMessage(String),
    /// A tool use began.
    ToolStarted(ToolUse),
    /// A tool use ended.
    ToolFinished {
        /// The tool use's id.
        id: String,
        /// Whether the tool reported an error.
        is_error: bool,
        /// Why it failed, in the CLI's words, when it failed and said (a permission refusal,
        /// a command's output and exit code).
        reason: Option<String>,
    },
    /// Token usage of one model message (for CLIs that report only running totals, the usage
    /// since their previous report: see the `format` module).
    Usage(Usage),
    /// The CLI reported an error outside any tool and outside a turn's end: Codex's top-level
    /// `error` lines (among them its `Reconnecting…` while the model endpoint is unreachable),
    /// Gemini's `error` events. The turn goes on unless a [`TurnEnded`](Self::TurnEnded)
    /// follows (task-agent's executor fails a run that reports nothing but errors for too
    /// long).
    Error {
        /// The CLI's own words.
        message: String,
    },
    /// The turn ended: the CLI's final result of this turn.
    TurnEnded(TurnOutcome),
}

/// The tokens one model message used (SPEC §7: input is cumulative per turn, output is this
/// message's alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Input tokens, without the cache.
    pub input_tokens: u64,
    /// Tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
    /// Tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    /// Output tokens of this message alone.
    #[serde(default)]
    pub output_tokens: u64,
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
