//! Errors of workflow runs.

use std::path::PathBuf;

use task_core::{IdError, RegistryError, StateError};
use task_output::OutputError;

use task_agent::AgentError;

/// What went wrong starting or resuming a workflow.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkflowError {
    /// The script does not begin with `export const meta = {…}`.
    #[error("a workflow script must begin with `export const meta = {{ name, description, … }}`")]
    MissingMeta,
    /// `meta` is not a pure literal, or lacks a required field.
    #[error("invalid workflow meta: {0}")]
    InvalidMeta(String),
    /// The script could not be compiled or run.
    #[error("workflow script error: {0}")]
    Script(String),
    /// A run id that is not `wf_` followed by at least 6 of `[a-z0-9-]`.
    #[error("invalid workflow run id {0:?}: expected wf_ followed by at least 6 of [a-z0-9-]")]
    InvalidRunId(String),
    /// No run with this id has a record here.
    #[error("no workflow run {0} in this session")]
    UnknownRun(String),
    /// A file of the run (script, record, journal) could not be read or parsed.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A workflow name that is not `[A-Za-z0-9_-]+`, or that no workflows directory holds.
    #[error("unknown workflow {0:?}")]
    UnknownWorkflow(String),
    /// The JavaScript engine could not be set up.
    #[error("the JavaScript engine could not start: {0}")]
    Engine(String),
    /// An output file could not be set up.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// The registry refused a state change.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A state could not be built.
    #[error(transparent)]
    State(#[from] StateError),
    /// An id could not be made.
    #[error(transparent)]
    Id(#[from] IdError),
    /// An agent could not be set up.
    #[error(transparent)]
    Agent(#[from] AgentError),
}

impl WorkflowError {
    pub(crate) fn file(path: &std::path::Path, message: impl std::fmt::Display) -> Self {
        WorkflowError::File {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}
