//! The one error type of the crate.

use std::path::PathBuf;
use std::time::Duration;

use crate::id::JobId;

/// Everything that can go wrong talking to Slurm or reading what a job left behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A job name that Slurm or the job's status files could not carry.
    #[error("invalid job name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// A job specification that cannot be submitted as given.
    #[error("invalid job specification: {0}")]
    InvalidSpec(String),

    /// A configuration value (from the environment) that does not parse.
    #[error("invalid setting {name}={value:?}: {reason}")]
    InvalidSetting {
        /// The environment variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What was expected.
        reason: &'static str,
    },

    /// One of Slurm's commands is neither in the configured directory nor on `PATH`.
    #[error(
        "Slurm command {command} not found (install Slurm's client or set TASKS_SLURM_BIN_DIR)"
    )]
    CommandNotFound {
        /// The command's name (`sbatch`, `squeue`, …).
        command: &'static str,
    },

    /// A Slurm command could not be started.
    #[error("could not run {program}: {source}")]
    Spawn {
        /// The executable.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// A Slurm command did not finish within the configured command timeout; it was killed.
    /// For `sbatch` this leaves it unknown whether the job was submitted: look for it by name.
    #[error("{command} did not finish within {after:?} (killed)")]
    CommandTimeout {
        /// The command's name.
        command: &'static str,
        /// The timeout.
        after: Duration,
    },

    /// A Slurm command exited unsuccessfully.
    #[error("{command} failed ({status}): {stderr}")]
    CommandFailed {
        /// The command's name.
        command: &'static str,
        /// Its exit status, as the operating system reported it.
        status: String,
        /// What it wrote to stderr (trimmed).
        stderr: String,
    },

    /// A Slurm command's output was not what this crate understands.
    #[error("unexpected output from {command}: {detail}")]
    Parse {
        /// The command (or file kind) whose output was read.
        command: &'static str,
        /// What did not parse.
        detail: String,
    },

    /// An `afterok` dependency names a job Slurm does not know (never submitted, or finished
    /// and aged out of slurmctld). Slurm would treat such a dependency as satisfied and start
    /// the job at once, so it is refused; the dependency's own exit status file says how it
    /// ended.
    #[error("dependency {0} is not known to Slurm (finished and aged out, or never submitted)")]
    UnknownDependency(JobId),

    /// Reading or writing one of a job's files failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },

    /// A job's exit status file holds something other than an exit status.
    #[error("{path}: not an exit status: {content:?}")]
    BadStatusFile {
        /// The file.
        path: PathBuf,
        /// Its content (at most 64 bytes).
        content: String,
    },

    /// The one `squeue` that looked at the followed jobs together ([`JobPoller`](crate::JobPoller))
    /// failed, as this says.
    #[error("squeue of the followed jobs: {0}")]
    Poll(String),

    /// [`Slurm::wait_for`](crate::Slurm::wait_for) gave up.
    #[error("job {id}: condition not met within {after:?}")]
    WaitTimeout {
        /// The job waited on.
        id: JobId,
        /// How long it waited.
        after: Duration,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
