//! The seam between the core and the crates that run tasks.

use async_trait::async_trait;

use crate::{Registry, TaskId, TaskStatus, TaskType};

/// What an executor crate implements for the task types it runs.
///
/// Registered per type with [`Registry::register_executor`]; [`Registry::kill`] dispatches to
/// it. The executor stops the work (a process tree, an agent's cancellation, a remote
/// session) and records the outcome in the registry (typically `running→killed`, and the
/// notified latch as its type requires).
#[async_trait]
pub trait Task: Send + Sync {
    /// Stops task `id`, which was not terminal when the registry checked.
    ///
    /// If the task ended on its own before it could be killed, return `Ok(())` without
    /// changing it: [`Registry::kill`] then reports [`KillOutcome::AlreadyFinished`] from
    /// the task's state.
    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError>;
}

/// What [`Registry::kill`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KillOutcome {
    /// The executor stopped the task.
    Killed,
    /// The task had already ended with this status: nothing was done.
    AlreadyFinished(TaskStatus),
}

/// Why a kill could not be carried out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KillError {
    /// No task has this id.
    #[error("no task with id {0}")]
    NotFound(TaskId),
    /// Nothing that can kill this type of task was registered.
    #[error("no executor is registered for {0} tasks")]
    NoExecutor(TaskType),
    /// The executor tried and failed.
    #[error("could not kill task {id}: {source}")]
    Failed {
        /// The task.
        id: TaskId,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
