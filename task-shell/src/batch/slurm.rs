//! [`SlurmEngine`]: the [`BatchEngine`] of a Slurm cluster, over task-slurm.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use task_protocol::start::Placement;
use task_slurm::{
    JobFiles, JobId, JobInfo, JobName, JobPoller, JobSpec, Phase, RecordedExit, Slurm, SlurmConfig,
};

use super::{BatchEngine, BatchError, BatchPhase, BatchSpec, FoundJob};

const NAME: &str = "slurm";

/// Shell tasks as Slurm batch jobs: `sbatch` with task-slurm's wrapper (start marker and exit
/// status beside the output file), `squeue` to follow them (one for every job followed, each
/// poll interval: task-slurm's [`JobPoller`]), `scancel` to kill them.
#[derive(Debug, Clone)]
pub struct SlurmEngine {
    slurm: Slurm,
    poller: JobPoller,
}

impl SlurmEngine {
    /// An engine with `config` (where Slurm's commands are, its clocks).
    pub fn new(config: SlurmConfig) -> Self {
        let slurm = Slurm::new(config);
        Self {
            poller: JobPoller::new(slurm.clone()),
            slurm,
        }
    }

    /// Its configuration.
    pub fn config(&self) -> &SlurmConfig {
        self.slurm.config()
    }
}

fn error(source: task_slurm::Error) -> BatchError {
    BatchError::new(NAME, source)
}

fn name(name: &str) -> Result<JobName, BatchError> {
    JobName::new(name).map_err(error)
}

fn job_id(id: &str) -> Result<JobId, BatchError> {
    id.parse::<JobId>()
        .map_err(|e| BatchError::new(NAME, format!("job id {id:?}: {e}")))
}

/// A Slurm phase in the executor's terms.
fn phase(job: &JobInfo) -> BatchPhase {
    if job.dependency_never_satisfied() {
        return BatchPhase::DependencyFailed;
    }
    match job.phase() {
        Phase::Pending { reason } => BatchPhase::Pending {
            reason: reason.map(|r| r.as_str().to_owned()),
        },
        Phase::Running => BatchPhase::Running,
        Phase::Completed => BatchPhase::Completed,
        Phase::Failed {
            state,
            exit_code,
            signal,
        } => BatchPhase::Failed {
            state: state.as_str().to_owned(),
            exit_code: exit_code.or(signal.map(|s| 128 + s)),
        },
        Phase::Killed => BatchPhase::Killed,
    }
}

/// The status files of the job `name` whose output is `output`.
fn files(name_: &str, output: &Path) -> Result<JobFiles, BatchError> {
    let dir = output.parent().unwrap_or(Path::new("/"));
    Ok(JobFiles::in_dir(dir, &name(name_)?))
}

#[async_trait]
impl BatchEngine for SlurmEngine {
    fn name(&self) -> &'static str {
        NAME
    }

    fn poll_interval(&self) -> Duration {
        self.slurm.config().poll_interval
    }

    fn start_grace(&self) -> Duration {
        self.slurm.config().start_grace
    }

    fn submit_timeout(&self) -> Duration {
        self.slurm.config().command_timeout
    }

    async fn submit(&self, spec: &BatchSpec) -> Result<String, BatchError> {
        let Placement::Slurm { partition, args } = &spec.placement else {
            return Err(BatchError::new(
                NAME,
                format!("not a Slurm placement: {}", spec.placement.engine()),
            ));
        };
        let mut job = JobSpec::shell(
            name(&spec.name)?,
            &spec.command,
            &spec.workdir,
            &spec.output,
        );
        if let Some(stderr) = &spec.stderr {
            job = job.with_error(stderr);
        }
        for (key, value) in &spec.env {
            job = job.with_env(key, value);
        }
        if let Some(partition) = partition {
            job = job.with_partition(partition);
        }
        if let Some(limit) = spec.time_limit {
            job = job.with_time_limit(limit);
        }
        for dependency in &spec.after {
            job = job.with_after_ok(job_id(dependency)?);
        }
        for arg in args {
            job = job.with_extra_arg(arg);
        }
        let id = self.slurm.submit(&job).await.map_err(error)?;
        Ok(id.to_string())
    }

    async fn status(&self, id: &str) -> Result<Option<BatchPhase>, BatchError> {
        let job = self.poller.job(job_id(id)?).await.map_err(error)?;
        Ok(job.as_ref().map(phase))
    }

    async fn find_by_name(&self, name_: &str) -> Result<Option<FoundJob>, BatchError> {
        let job = self
            .slurm
            .find_by_name(&name(name_)?)
            .await
            .map_err(error)?;
        Ok(job.map(|job| FoundJob {
            job_id: job.id.to_string(),
            phase: phase(&job),
        }))
    }

    async fn cancel(&self, id: &str) -> Result<(), BatchError> {
        self.slurm.cancel(job_id(id)?).await.map_err(error)
    }

    async fn recorded_exit(&self, name_: &str, output: &Path) -> Result<Option<i32>, BatchError> {
        match files(name_, output)?.exit_status().await.map_err(error)? {
            RecordedExit::Code { code } => Ok(Some(code)),
            RecordedExit::Unknown => Ok(None),
        }
    }

    async fn forget_records(&self, name_: &str, output: &Path) -> Result<(), BatchError> {
        let files = files(name_, output)?;
        for path in [&files.exit, &files.started] {
            match tokio::fs::remove_file(path).await {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(BatchError::new(NAME, format!("{}: {e}", path.display())));
                }
            }
        }
        Ok(())
    }

    async fn started(&self, name_: &str, output: &Path) -> Result<bool, BatchError> {
        Ok(files(name_, output)?
            .start_marker()
            .await
            .map_err(error)?
            .is_some())
    }
}
