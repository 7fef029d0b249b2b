//! Shell commands run as jobs of a batch system instead of children of the supervisor.
//!
//! The seam is task-core's [`task_core::batch`] ([`BatchEngine`]: submit a job named by the
//! task's id, look it up by id and by name, cancel it, read what its wrapper recorded beside
//! the output file), which task-agent's agents on a batch system share. The executor does the
//! rest alike for every engine (`batch::run`): the task stays `pending` while the job waits
//! (the engine's reason in [`task_core::BatchJob::waiting`]), is `running` while it runs, and
//! ends as the job ended, once. A job submitted to wait for other tasks' jobs
//! ([`task_core::BatchJob::after`]) whose dependency can never be satisfied is cancelled and
//! its task ends as a task the queue held does when a dependency failed
//! ([`task_core::EndReason::DependencyFailed`]). `SlurmEngine` (feature `slurm`) adapts
//! task-slurm; a Kubernetes `Job` engine would be one more implementation (ARCHITECTURE.md).

pub(crate) mod run;
#[cfg(feature = "slurm")]
mod slurm;

pub use task_core::batch::{BatchEngine, BatchError, BatchPhase, BatchSpec, Engines, FoundJob};

#[cfg(feature = "slurm")]
pub use slurm::SlurmEngine;
