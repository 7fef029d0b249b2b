//! Why the session refuses an operation, as data that both the error type ([`crate::Error`])
//! and the supervisor's answers carry: input for a task's stdin refused ([`InputRefusal`],
//! re-exported by [`crate::protocol`]) and a task kept from removal ([`KeepReason`],
//! re-exported by [`crate::prune`]).

use serde::Serialize;

/// Why a task is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KeepReason {
    /// It has not ended.
    #[error("it is still live")]
    Live,
    /// Its completion notification has not been delivered.
    #[error("its completion notification has not been delivered")]
    Undelivered,
    /// It ended moments ago: its supervisor may still hold it.
    #[error("it ended moments ago; try again in a few seconds")]
    Settling,
    /// A running supervisor could resume it (an agent or a teammate takes messages).
    #[error("the running supervisor can still resume it with a message")]
    Resumable,
}

pub use task_protocol::InputRefusal;

/// The class of `error`, as the supervisor's answer carries it.
pub fn input_refusal(error: &task_core::InputError) -> InputRefusal {
    use task_core::InputError as E;
    match error {
        E::NotFound(_) => InputRefusal::UnknownTask,
        E::Finished { .. } => InputRefusal::Finished,
        E::NotAccepted { .. } | E::NoExecutor(_) => InputRefusal::NotAccepted,
        E::NotPiped(_) => InputRefusal::NotPiped,
        E::Closed(_) => InputRefusal::Closed,
        E::ReaderGone(_) => InputRefusal::ReaderGone,
        E::Stalled { .. } => InputRefusal::Stalled,
        _ => InputRefusal::Failed,
    }
}
