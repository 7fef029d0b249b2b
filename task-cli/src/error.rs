//! The error type of the `tasks` binary and the exit code of each failure.

use std::path::PathBuf;

use task_session::protocol::InputRefusal;

/// Exit codes of `tasks`, documented in `tasks --help` and the crate README.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// A task id that is not a letter followed by 8 characters of `[0-9a-z]`, text that is
    /// none of an id, a prefix of one or a name, or a prefix (or name) that could be several
    /// tasks: nothing is looked up or built from it.
    pub const MALFORMED_ID: u8 = 65;
    /// A well-formed id, a name or a prefix that names no task of the session.
    pub const UNKNOWN_TASK: u8 = 66;
    /// The supervisor could not be reached or refused a request.
    pub const SUPERVISOR: u8 = 69;
    /// Any other failure (bad input, a task-list rule, a corrupt file).
    pub const OTHER: u8 = 70;
    /// A file or socket operation failed.
    pub const IO: u8 = 74;
    /// `wait` gave up at its `--timeout` before every task ended.
    pub const WAIT_TIMEOUT: u8 = 124;
    /// `wait` on a task that was killed (128 + SIGKILL, as a shell reports it).
    pub const KILLED: u8 = 137;
}

/// Everything that can make a `tasks` command fail: the session layer's errors and the task
/// list's.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The session layer failed (a bad id, an unknown task, the supervisor, a state file),
    /// said with what to do about it in this CLI's words.
    #[error("{}", in_cli_words(.0))]
    Session(#[from] task_session::Error),
    /// A task-list task id that is not a positive number.
    #[error(
        "malformed list task id {input:?}: task-list tasks are numbered 1, 2, 3, … as `tasks list` shows them (#1, #2, …)"
    )]
    MalformedListId {
        /// The text given.
        input: String,
    },
    /// The task list store refused the operation.
    #[error("{0}")]
    List(String),
    /// A message was not delivered: its task refused it, or (`unknown`) the address names no
    /// task that takes messages.
    #[error("{reason}")]
    MessageRefused {
        /// Why, in words for the sender.
        reason: String,
        /// The address named no task.
        unknown: bool,
    },
}

/// The session layer's error, with what to do about it as a user of this CLI does it (the
/// library names no command or flag).
fn in_cli_words(error: &task_session::Error) -> String {
    use task_session::Error;
    use task_session::prune::KeepReason;
    match error {
        Error::Input { reason, message } => match reason {
            InputRefusal::NotPiped => format!(
                "{message}; start the command with `tasks run --stdin pipe -- …` to write to it"
            ),
            InputRefusal::Closed => format!("{message} (by `tasks input --close`)"),
            InputRefusal::NotAccepted => format!(
                "{message}: only a command run with `--stdin pipe` does (agents and teammates take messages: `tasks send`)"
            ),
            _ => message.clone(),
        },
        Error::NoRoot => format!("{error}: set --root or $TASKS_ROOT"),
        Error::Kept {
            reason: KeepReason::Undelivered,
            ..
        } => format!("{error} (run `tasks notifications`)"),
        _ => error.to_string(),
    }
}

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

impl CliError {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        use task_session::Error;
        let session = match self {
            CliError::Session(error) => error,
            CliError::MalformedListId { .. } => return exit::MALFORMED_ID,
            CliError::List(_) => return exit::OTHER,
            CliError::MessageRefused { unknown: true, .. } => return exit::UNKNOWN_TASK,
            CliError::MessageRefused { .. } => return exit::OTHER,
        };
        match session {
            Error::MalformedId { .. }
            | Error::MalformedReference { .. }
            | Error::AmbiguousReference { .. } => exit::MALFORMED_ID,
            Error::UnknownTask { .. } | Error::NotFound(_) => exit::UNKNOWN_TASK,
            Error::Io { .. } | Error::MissingCwd(_) => exit::IO,
            Error::Supervisor(_)
            | Error::Refused { .. }
            | Error::NoAnswer { .. }
            | Error::Protocol { .. } => exit::SUPERVISOR,
            Error::Input { reason, .. } => match reason {
                InputRefusal::UnknownTask => exit::UNKNOWN_TASK,
                InputRefusal::ReaderGone | InputRefusal::Failed => exit::IO,
                _ => exit::OTHER,
            },
            _ => exit::OTHER,
        }
    }

    /// Invalid input that is not an id (a JSON argument, an option value).
    pub fn invalid(message: String) -> Self {
        task_session::Error::Invalid(message).into()
    }

    /// A file or socket operation on `path` failed.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        task_session::Error::io(action, path, source).into()
    }

    /// The supervisor could not be reached or refused.
    pub fn supervisor(message: String) -> Self {
        task_session::Error::Supervisor(message).into()
    }
}

/// Result alias of this crate.
pub type Result<T, E = CliError> = std::result::Result<T, E>;
