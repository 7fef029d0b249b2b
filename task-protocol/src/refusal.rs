//! Why the supervisor refused input for a task's stdin, as its answer carries it.

use serde::{Deserialize, Serialize};

/// Why input for a task's stdin was refused (the executor's error, by class).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
