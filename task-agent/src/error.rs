//! Errors of the agent executor and runners.

use std::path::PathBuf;

use task_core::{IdError, RegistryError, StateError, TaskId};
use task_output::OutputError;

/// What went wrong starting, messaging or resuming an agent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent CLI could not be started.
    #[error("could not start agent command {program:?}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The agent command line is empty.
    #[error("the agent command is empty")]
    EmptyCommand,
    /// The working directory does not exist.
    #[error("working directory {path} does not exist")]
    MissingWorkingDir {
        /// The directory.
        path: PathBuf,
    },
    /// The output file or transcript could not be set up or read.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The registry refused a state change.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A state could not be built.
    #[error(transparent)]
    State(#[from] StateError),
    /// An id could not be made or parsed.
    #[error(transparent)]
    Id(#[from] IdError),
    /// No agent has this name or id.
    #[error("No agent named '{0}' is currently addressable. Spawn a new one or use the agent ID.")]
    NoSuchAgent(String),
    /// The task exists but is not an agent this executor runs.
    #[error("task {0} is not an agent run by this executor")]
    NotAnAgent(TaskId),
    /// Another live agent already has this name.
    #[error("an agent named '{0}' is already running")]
    NameTaken(String),
    /// The agent's input is closed (it is finishing) or its CLI takes no messages.
    #[error("agent {0} does not accept messages now")]
    InputClosed(TaskId),
    /// The agent never reported a session id, so it cannot be resumed.
    #[error("agent {0} cannot be resumed: its CLI never reported a session id")]
    NoSession(TaskId),
    /// This runner cannot resume sessions.
    #[error("the {0} runner cannot resume a finished agent")]
    ResumeUnsupported(&'static str),
    /// The session takes no more input (its stdin is closed, or its CLI reads none).
    #[error("the agent session takes no more input")]
    NoInput,
    /// The dream's consolidation lock could not be taken.
    #[error(transparent)]
    Lock(#[from] crate::consolidation_lock::LockError),
    /// A teammate's mailbox could not be used.
    #[error(transparent)]
    Mailbox(#[from] task_output::mailbox::MailboxError),
    /// A teammate name or team that is not a plain name (`name@team`, each part
    /// `[A-Za-z0-9_.-]`).
    #[error("invalid teammate {0:?}: use NAME@TEAM with letters, digits, '_', '-' and '.'")]
    InvalidTeammate(String),
    /// The agent command gives more than one prompt.
    #[error("the agent command gives more than one prompt: {}", quoted(.0))]
    PromptInCommandTwice(Vec<String>),
    /// A prompt is given both in the agent command and as an option.
    #[error(
        "the prompt is given twice: in the agent command ({in_command:?}) and apart \
         ({option:?}); give it in one place"
    )]
    PromptTwice {
        /// The prompt in the command.
        in_command: String,
        /// The prompt given as an option.
        option: String,
    },
    /// No prompt in the agent command and none as an option.
    #[error(
        "no prompt: give it in the agent command (`claude -p \"…\"`, `codex exec \"…\"`, \
         `gemini -p \"…\"`) or apart"
    )]
    NoPrompt,
    /// The agent's worktree could not be added (it was not started).
    #[error("cannot run the agent in a worktree: {0}")]
    Worktree(#[from] task_worktree::WorktreeError),
    /// Writing to the agent's stdin failed.
    #[error("could not write to the agent's stdin: {0}")]
    Stdin(#[source] std::io::Error),
    /// The batch system the agent is placed on refused or failed its job.
    #[error("batch job: {0}")]
    Batch(String),
    /// The start asks for a batch system this executor was not given.
    #[error("no {0} placement is configured here")]
    NoBatchEngine(String),
    /// The start asks for a batch system and its runner runs no agent CLI a job could run.
    #[error("a {0} runner cannot run as a batch job")]
    NotPlaceable(&'static str),
}

fn quoted(prompts: &[String]) -> String {
    prompts
        .iter()
        .map(|p| format!("{p:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl From<AgentError> for task_core::LaunchError {
    /// A refusal the caller can act on (a name in use, a bad teammate name or mailbox, a
    /// checkout a worktree cannot be based on, a dream lock held by another dream) is an
    /// invalid request; anything else is a failure of this side.
    fn from(error: AgentError) -> Self {
        match error {
            AgentError::NameTaken(_)
            | AgentError::InvalidTeammate(_)
            | AgentError::Mailbox(_)
            | AgentError::Worktree(_)
            | AgentError::NoBatchEngine(_)
            | AgentError::NotPlaceable(_)
            | AgentError::Lock(crate::consolidation_lock::LockError::Busy { .. }) => {
                task_core::LaunchError::Invalid(error.to_string())
            }
            other => task_core::LaunchError::Failed(Box::new(other)),
        }
    }
}
