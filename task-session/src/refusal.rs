//! Why the session refuses an operation, as data that both the error type ([`crate::Error`])
//! and the supervisor's answers carry: input for a task's stdin refused ([`InputRefusal`],
//! re-exported by [`crate::protocol`]) and a task kept from removal ([`KeepReason`],
//! re-exported by [`crate::prune`]).

use serde::{Deserialize, Serialize};

/// Why a task is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KeepReason {
    /// It has not ended.
    #[error("it is still live")]
    Live,
    /// Its completion notification has not been delivered.
    #[error("its completion notification has not been delivered (run `tasks notifications`)")]
    Undelivered,
    /// It ended moments ago: its supervisor may still hold it.
    #[error("it ended moments ago; try again in a few seconds")]
    Settling,
    /// A running supervisor could resume it (an agent or a teammate takes messages).
    #[error("the running supervisor can still resume it with a message")]
    Resumable,
}

/// Why input for a task's stdin was refused (task-core's [`task_core::InputError`], by class).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum InputRefusal {
    /// No task of the session has that id.
    UnknownTask,
    /// The task has ended.
    Finished,
    /// Tasks of its type take no input.
    NotAccepted,
    /// It was started with stdin `/dev/null`.
    NotPiped,
    /// Its stdin was closed on request.
    Closed,
    /// Its process closed its stdin (`EPIPE`).
    ReaderGone,
    /// It did not read the bytes in time; part of them may have gone through.
    Stalled,
    /// Writing failed otherwise.
    Failed,
}

impl InputRefusal {
    /// The class of `error`.
    pub fn of(error: &task_core::InputError) -> Self {
        use task_core::InputError as E;
        match error {
            E::NotFound(_) => Self::UnknownTask,
            E::Finished { .. } => Self::Finished,
            E::NotAccepted { .. } | E::NoExecutor(_) => Self::NotAccepted,
            E::NotPiped(_) => Self::NotPiped,
            E::Closed(_) => Self::Closed,
            E::ReaderGone(_) => Self::ReaderGone,
            E::Stalled { .. } => Self::Stalled,
            _ => Self::Failed,
        }
    }
}
