//! The seam between the core and the crates that run tasks: the [`Task`] trait the registry
//! dispatches to, and the outcomes of a kill.

use std::time::Duration;

use async_trait::async_trait;

use crate::input::{Input, InputError};
use crate::{Registry, TaskId, TaskState, TaskStatus, TaskType};

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

    /// How long a task of this type that just ended (`ended`, already terminal) stays in the
    /// registry after it is notified, unless someone retains it: finished agents stay for the
    /// panel grace (`PANEL_GRACE`), killed teammates for `STOPPED_DISPLAY`. Default: none.
    fn eviction_grace(&self, ended: &TaskState) -> Option<Duration> {
        let _ = ended;
        None
    }

    /// How long after its end (`ended`, already terminal) a task of this type may still send
    /// its completion notice: a reader of its record waits that long for the notice before
    /// the end is shown without one. An agent sends it once its CLI has exited, which takes
    /// up to its kill grace and the kill after it. Default: none (the notice comes with the
    /// end).
    fn notice_delay(&self, ended: &TaskState) -> Duration {
        let _ = ended;
        Duration::ZERO
    }

    /// Completes the state of a task registered again under its id (a resume): the registry
    /// has already kept `retain` and `startTime` from `previous`; an executor whose type keeps
    /// more across a resume (an agent's messages and pending messages) copies it here.
    /// Default: nothing more.
    fn carry_forward(&self, resumed: &mut TaskState, previous: &TaskState) {
        let _ = (resumed, previous);
    }

    /// Cleans up after a task whose supervising process died while it was live (`orphan` is
    /// its last recorded state): kill what it left running, roll back what it held. Called by
    /// whichever process finds the orphan, which may not be the one that ran it, so it works
    /// from the recorded state alone, and must never harm anything the task did not create.
    /// Default: nothing to clean.
    fn reap_orphan(&self, orphan: &TaskState) -> Result<(), KillError> {
        let _ = orphan;
        Ok(())
    }

    /// Whether `task` (live) outlives the process that supervises it: its work goes on
    /// without that process (a remote session runs on its server) and the next supervisor of
    /// its session follows it again from what it left on disk, so it is never read as ended
    /// because its supervisor died. Whoever says yes here promises that the next supervisor
    /// either resumes the task or ends it with the true reason. Default: no (a local process
    /// dies with its supervisor, which is then the true reason of its end).
    fn survives_supervisor(&self, task: &TaskState) -> bool {
        let _ = task;
        false
    }

    /// How a host's queue admits tasks of `task_type` (one this executor is registered for):
    /// the class whose default parallelism limits them in a group with no limit of its own.
    /// Default: [`Admission::UNCLASSED`].
    fn admission(&self, task_type: crate::TaskType) -> Admission {
        let _ = task_type;
        Admission::UNCLASSED
    }

    /// Writes `input` to the standard input of task `id` (live when the registry checked),
    /// whole and before any other writer's bytes, then closes it if asked. Return
    /// [`InputError::NotPiped`] (or any error) if the task ended meanwhile:
    /// [`Registry::write_input`] then reports [`InputError::Finished`] from its state.
    /// Default: tasks of this type take no input ([`InputError::NotAccepted`]).
    async fn write_input(
        &self,
        registry: &Registry,
        id: &TaskId,
        input: Input<'_>,
    ) -> Result<(), InputError> {
        let _ = input;
        let task_type = registry
            .get(id)
            .map_or(id.task_type(), |s| s.base.task_type);
        Err(InputError::NotAccepted { id: *id, task_type })
    }
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

/// How a host's queue admits the tasks of one type ([`Task::admission`]): tasks of one class
/// in one group share that class's default limit (a host's setting `parallel_{class}` replaces
/// it), unless their group has a limit of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admission {
    /// The class's name (`agents`, `shells`): the setting `parallel_{class}` sets its limit.
    pub class: &'static str,
    /// How many tasks of the class one group runs at once by default (0: unlimited).
    pub default_parallel: u32,
}

impl Admission {
    /// Agents of every kind (local, remote, teammates): 20 at once in a group (SPEC).
    pub const AGENTS: Self = Self {
        class: "agents",
        default_parallel: 20,
    };
    /// Shell commands: unlimited by default.
    pub const SHELLS: Self = Self {
        class: "shells",
        default_parallel: 0,
    };
    /// Everything else (monitors, workflows, dreams): unlimited, and in no class to limit.
    pub const UNCLASSED: Self = Self {
        class: "other",
        default_parallel: 0,
    };
}
