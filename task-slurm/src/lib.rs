//! Slurm jobs through Slurm's own commands.
//!
//! `task-slurm` places commands on a Slurm cluster and follows them: [`Slurm::submit`]
//! (`sbatch`), [`Slurm::job`], [`Slurm::jobs`] and [`Slurm::find_by_name`] (`squeue`),
//! [`Slurm::cancel`] (`scancel`); [`JobPoller`] answers every follower of a job with one
//! `squeue` a poll interval. Every command runs with an argument vector, never through a shell, with a
//! timeout ([`SlurmConfig`]). It knows nothing of tasks: a job's [`Phase`] is where it stands
//! in a five-state lifecycle (pending, running, completed, failed, killed), and the caller maps
//! that to its own.
//!
//! A submitted job runs a small wrapper (see [`JobSpec::batch_script`]) that writes a start
//! marker when the job starts and the command's exit status when it ends, both beside the
//! output file. Slurm forgets an ended job after its `MinJobAge`; the exit status file does not
//! ([`read_exit_status`], which never guesses: no file is [`RecordedExit::Unknown`]). The
//! output and status files are written on the job's node and read where this crate runs, so
//! their directory must be on a filesystem both share; a job running without its start marker
//! past [`SlurmConfig::start_grace`] shows that it is not ([`JobFiles::check_started`]).
//!
//! Slurm's outputs are read by the pure functions of [`parse`], tested on outputs captured
//! from Slurm 22.05.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use task_slurm::{JobName, JobSpec, Phase, RecordedExit, Slurm, SlurmConfig};
//!
//! # async fn example() -> Result<(), task_slurm::Error> {
//! let slurm = Slurm::new(SlurmConfig::from_env()?);
//! let name = JobName::new("task-7f3a")?;
//! let spec = JobSpec::shell(name, "make test", "/shared/project", "/shared/state/task-7f3a.out")
//!     .with_current_env()
//!     .with_time_limit(Duration::from_secs(3600));
//! let files = spec.files();
//! let id = slurm.submit(&spec).await?;
//!
//! let ended = slurm
//!     .wait_for(id, Duration::from_secs(7200), |job| {
//!         job.is_none_or(|job| job.phase().is_terminal())
//!     })
//!     .await?;
//! match ended.map(|job| job.phase()) {
//!     Some(Phase::Completed) => println!("done"),
//!     Some(Phase::Failed { state, exit_code, .. }) => println!("{state}, exit {exit_code:?}"),
//!     Some(phase) => println!("{phase:?}"),
//!     // Slurm has forgotten the job: its own record is all there is.
//!     None => match files.exit_status().await? {
//!         RecordedExit::Code { code } => println!("exited {code}"),
//!         RecordedExit::Unknown => println!("ended, status unknown"),
//!     },
//! }
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod config;
mod error;
mod files;
mod id;
mod job;
pub mod parse;
mod poll;
mod slurm;
mod spec;

pub use config::SlurmConfig;
pub use error::{Error, Result};
pub use files::{JobFiles, RecordedExit, StartCheck, read_exit_status};
pub use id::JobId;
pub use job::{JobInfo, JobName, JobState, MAX_NAME_LEN, PendingReason, Phase};
pub use parse::StartMarker;
pub use poll::JobPoller;
pub use slurm::Slurm;
pub use spec::{EXIT_NO_START_MARKER, JobSpec, sh_quote};

#[cfg(test)]
mod tests {
    /// Public types can move between and be shared by threads (checked at compile time).
    #[test]
    fn public_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<crate::Slurm>();
        check::<crate::JobPoller>();
        check::<crate::JobSpec>();
        check::<crate::JobInfo>();
        check::<crate::Error>();
    }
}
