//! The placement seam: tasks run as jobs of a batch system instead of children of the
//! supervisor.
//!
//! [`BatchEngine`] is what a batch system has to offer a task: submit a job named by the task's
//! id (its command's output appended to a file of the task's), look it up by id and by name,
//! cancel it, and read what its wrapper recorded beside that file (the start marker, the exit
//! status). It lives here, below the executors, so that every executor that places work on a
//! batch system shares one seam: task-shell's shells (its `batch` run maps the phases to the
//! lifecycle) and task-agent's agents (the agent CLI runs inside the job, its transcript the
//! job's output). task-shell's `SlurmEngine` (feature `slurm`) adapts task-slurm; the wiring
//! hands the same engine to both. A Kubernetes `Job` engine would be one more implementation
//! (ARCHITECTURE.md).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use task_protocol::start::Placement;

/// A job to submit: the task's command in the caller's directory and environment, its output
/// the task's output file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BatchSpec {
    /// The job's name: the task's id (it names the wrapper's status files too).
    pub name: String,
    /// Shell text, run with `sh -c` on the job's node.
    pub command: String,
    /// The working directory on the node (the caller's).
    pub workdir: PathBuf,
    /// The task's output file (stdout of the job, and stderr unless [`BatchSpec::stderr`] is
    /// set); its directory must be shared with the nodes.
    pub output: PathBuf,
    /// A separate file for the job's stderr (an agent's: its output is the CLI's event
    /// stream), on a filesystem shared with the nodes too.
    pub stderr: Option<PathBuf>,
    /// The job's whole environment (the caller's).
    pub env: Vec<(String, String)>,
    /// Where, and the engine's own options.
    pub placement: Placement,
    /// Ended by the batch system after this long (the task's timeout), if set.
    pub time_limit: Option<Duration>,
    /// Jobs of the same engine that must complete successfully before this one starts (the
    /// engine waits: Slurm's `--dependency=afterok`). A shell's run fills it from its task's
    /// [`BatchJob::after`](crate::BatchJob::after) just before submitting.
    pub after: Vec<String>,
}

impl BatchSpec {
    /// A job named `name` (the task's id) running shell text `command` in `workdir` with
    /// exactly `env`, its output appended to `output`, placed by `placement`; stderr in the
    /// output, no time limit, no dependencies.
    pub fn new(
        name: impl Into<String>,
        command: impl Into<String>,
        workdir: impl Into<PathBuf>,
        output: impl Into<PathBuf>,
        env: Vec<(String, String)>,
        placement: Placement,
    ) -> Self {
        Self {
            name: name.into(),
            command: command.into(),
            workdir: workdir.into(),
            output: output.into(),
            stderr: None,
            env,
            placement,
            time_limit: None,
            after: Vec::new(),
        }
    }
}

/// Where a job is, in the task's lifecycle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchPhase {
    /// Waiting to start, and why, in the engine's words (`Resources`, `Priority`, …).
    Pending {
        /// The engine's reason, if it gives one.
        reason: Option<String>,
    },
    /// Started and not ended.
    Running,
    /// Ended with exit code 0.
    Completed,
    /// Ended otherwise than completed or cancelled.
    Failed {
        /// The engine's state (`FAILED`, `TIMEOUT`, `OUT_OF_MEMORY`, …).
        state: String,
        /// The exit code it reported, if any.
        exit_code: Option<i32>,
    },
    /// Cancelled.
    Killed,
    /// It will never start: a job it waits for ([`BatchSpec::after`]) did not complete
    /// successfully (Slurm's `DependencyNeverSatisfied`, whether it leaves the job pending or
    /// cancels it).
    DependencyFailed,
}

/// A job found by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundJob {
    /// Its id.
    pub job_id: String,
    /// Where it is.
    pub phase: BatchPhase,
}

/// An engine's failure (a command that failed or timed out, an output it did not understand).
#[derive(Debug, thiserror::Error)]
#[error("{engine}: {source}")]
pub struct BatchError {
    /// The engine.
    pub engine: &'static str,
    /// What went wrong.
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl BatchError {
    /// An error of `engine`.
    pub fn new(
        engine: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            engine,
            source: source.into(),
        }
    }
}

/// A batch system shell tasks can be placed on.
///
/// Every method may fail for the moment (a controller that does not answer): the executor
/// logs it and asks again at the next poll, so a method must never guess an answer.
#[async_trait]
pub trait BatchEngine: Send + Sync + std::fmt::Debug {
    /// Its name, as [`Placement::engine`] gives it (`slurm`).
    fn name(&self) -> &'static str;

    /// Between two looks at a job.
    fn poll_interval(&self) -> Duration;

    /// How long a job may run without its start marker before the node is taken not to share
    /// the state directory.
    fn start_grace(&self) -> Duration;

    /// The longest a submission may take (after which it is killed): a submission in flight
    /// when a supervisor died is visible by name at the latest this long after.
    fn submit_timeout(&self) -> Duration;

    /// Submits `spec` and returns the job's id.
    async fn submit(&self, spec: &BatchSpec) -> Result<String, BatchError>;

    /// Where job `job_id` is; `None` when the engine no longer knows it (ended and forgotten).
    /// An engine may answer many callers with one look (Slurm's: one `squeue` a poll
    /// interval for every job asked about), so an answer may take up to a poll interval.
    async fn status(&self, job_id: &str) -> Result<Option<BatchPhase>, BatchError>;

    /// The newest job named `name` the engine still knows, if any.
    async fn find_by_name(&self, name: &str) -> Result<Option<FoundJob>, BatchError>;

    /// Cancels job `job_id`; a job that already ended, or that is unknown, is not an error.
    async fn cancel(&self, job_id: &str) -> Result<(), BatchError>;

    /// The exit status the job named `name` recorded beside `output`, `None` while there is
    /// none (not ended, or ended without recording one): never guessed.
    async fn recorded_exit(&self, name: &str, output: &Path) -> Result<Option<i32>, BatchError>;

    /// Whether the job named `name` has written its start marker beside `output`.
    async fn started(&self, name: &str, output: &Path) -> Result<bool, BatchError>;

    /// Removes what an earlier job named `name` recorded beside `output` (its exit status and
    /// start marker) before another job of that name is submitted (an agent resumed in the
    /// same task), so that what is read there afterwards is the new job's.
    async fn forget_records(&self, name: &str, output: &Path) -> Result<(), BatchError>;
}

/// The engines an executor can place tasks on, by name, and the placement of tasks started
/// without one (configuration: `placement_default`).
#[derive(Debug, Clone, Default)]
pub struct Engines {
    engines: Vec<Arc<dyn BatchEngine>>,
    default: Option<Placement>,
}

impl Engines {
    /// Adds `engine`, replacing one of the same name.
    pub fn add(&mut self, engine: Arc<dyn BatchEngine>) {
        self.engines.retain(|e| e.name() != engine.name());
        self.engines.push(engine);
    }

    /// The engine named `name` ([`Placement::engine`]).
    pub fn get(&self, name: &str) -> Option<Arc<dyn BatchEngine>> {
        self.engines.iter().find(|e| e.name() == name).cloned()
    }

    /// Places the tasks started without a placement by `placement` (`None`: on this machine).
    pub fn set_default(&mut self, placement: Option<Placement>) {
        self.default = placement;
    }

    /// The batch system a task that asks for `requested` runs on: there, else the default
    /// placement; `None` (this machine) for [`Placement::Local`], whatever the default.
    pub fn placement(&self, requested: Option<Placement>) -> Option<Placement> {
        match requested.or_else(|| self.default.clone())? {
            Placement::Local => None,
            placed => Some(placed),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn local_escapes_the_default_placement() {
        let slurm = Placement::parse("slurm:debug").unwrap();
        let mut engines = Engines::default();
        assert_eq!(engines.placement(None), None);
        assert_eq!(engines.placement(Some(Placement::Local)), None);
        engines.set_default(Some(slurm.clone()));
        assert_eq!(engines.placement(None), Some(slurm.clone()));
        assert_eq!(engines.placement(Some(Placement::Local)), None);
        engines.set_default(Some(Placement::Local));
        assert_eq!(engines.placement(None), None);
        assert_eq!(engines.placement(Some(slurm.clone())), Some(slurm));
    }
}
