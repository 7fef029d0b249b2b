//! Jobs as Slurm reports them, and their mapping to a task's lifecycle.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::id::JobId;

/// The longest job name accepted (Slurm itself takes more; file names take 255 bytes).
pub const MAX_NAME_LEN: usize = 200;

/// A job's name: the task's id, which also names the job's status files
/// (`NAME.exit`, `NAME.started`), so it is checked to be a plain file name.
///
/// Accepted: 1 to [`MAX_NAME_LEN`] ASCII letters, digits, `.`, `_` and `-`, not starting with
/// `.` or `-`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct JobName(String);

impl JobName {
    /// Checks `name`.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] when it is empty, too long, starts with `.` or `-`, or holds a
    /// character other than ASCII letters, digits, `.`, `_` and `-`.
    pub fn new(name: &str) -> Result<Self> {
        let invalid = |reason| {
            Err(Error::InvalidName {
                name: name.to_owned(),
                reason,
            })
        };
        if name.is_empty() {
            return invalid("empty");
        }
        if name.len() > MAX_NAME_LEN {
            return invalid("longer than 200 bytes");
        }
        if name.starts_with('.') || name.starts_with('-') {
            return invalid("starts with '.' or '-'");
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return invalid("only ASCII letters, digits, '.', '_' and '-' are allowed");
        }
        Ok(Self(name.to_owned()))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for JobName {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        JobName::new(&name).map_err(serde::de::Error::custom)
    }
}

/// A job's state, as Slurm names it (`squeue --Format=State`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
#[non_exhaustive]
pub enum JobState {
    /// `PENDING`: waiting for resources, priority, a dependency, a hold…
    Pending,
    /// `RUNNING`.
    Running,
    /// `CONFIGURING`: allocated, its nodes being readied.
    Configuring,
    /// `COMPLETING`: ended, its processes being cleaned up; the final state is not known yet.
    Completing,
    /// `SUSPENDED`.
    Suspended,
    /// `COMPLETED`: every process exited 0.
    Completed,
    /// `CANCELLED`: by `scancel` (a user or an administrator) or by Slurm.
    Cancelled,
    /// `FAILED`: a non-zero exit code or another failure.
    Failed,
    /// `TIMEOUT`: killed at its time limit.
    Timeout,
    /// `OUT_OF_MEMORY`.
    OutOfMemory,
    /// `NODE_FAIL`: a node of the job failed.
    NodeFail,
    /// `BOOT_FAIL`: a node could not be booted.
    BootFail,
    /// `DEADLINE`: could not start before its deadline.
    Deadline,
    /// `PREEMPTED`.
    Preempted,
    /// Any other state (`REQUEUED`, `REQUEUE_HOLD`, `RESIZING`, `SIGNALING`, `STAGE_OUT`,
    /// `STOPPED`, `SPECIAL_EXIT`, `REVOKED`, … or one a later Slurm adds), as Slurm spelled it.
    Other(String),
}

impl JobState {
    /// Slurm's spelling.
    pub fn as_str(&self) -> &str {
        match self {
            JobState::Pending => "PENDING",
            JobState::Running => "RUNNING",
            JobState::Configuring => "CONFIGURING",
            JobState::Completing => "COMPLETING",
            JobState::Suspended => "SUSPENDED",
            JobState::Completed => "COMPLETED",
            JobState::Cancelled => "CANCELLED",
            JobState::Failed => "FAILED",
            JobState::Timeout => "TIMEOUT",
            JobState::OutOfMemory => "OUT_OF_MEMORY",
            JobState::NodeFail => "NODE_FAIL",
            JobState::BootFail => "BOOT_FAIL",
            JobState::Deadline => "DEADLINE",
            JobState::Preempted => "PREEMPTED",
            JobState::Other(other) => other,
        }
    }

    /// Parses Slurm's spelling (any case; `CANCELLED by 0` as `scontrol` prints it is
    /// `CANCELLED`). Never fails: an unknown word is [`JobState::Other`].
    pub fn parse(s: &str) -> Self {
        let word = s
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        match word.as_str() {
            "PENDING" | "PD" => JobState::Pending,
            "RUNNING" | "R" => JobState::Running,
            "CONFIGURING" | "CF" => JobState::Configuring,
            "COMPLETING" | "CG" => JobState::Completing,
            "SUSPENDED" | "S" => JobState::Suspended,
            "COMPLETED" | "CD" => JobState::Completed,
            "CANCELLED" | "CA" => JobState::Cancelled,
            "FAILED" | "F" => JobState::Failed,
            "TIMEOUT" | "TO" => JobState::Timeout,
            "OUT_OF_MEMORY" | "OOM" => JobState::OutOfMemory,
            "NODE_FAIL" | "NF" => JobState::NodeFail,
            "BOOT_FAIL" | "BF" => JobState::BootFail,
            "DEADLINE" | "DL" => JobState::Deadline,
            "PREEMPTED" | "PR" => JobState::Preempted,
            _ => JobState::Other(word),
        }
    }

    /// Whether Slurm is done with the job: it will not run (again) without someone requeuing
    /// it. `COMPLETING` is not terminal (the final state is decided when it ends).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            JobState::Completed
                | JobState::Cancelled
                | JobState::Failed
                | JobState::Timeout
                | JobState::OutOfMemory
                | JobState::NodeFail
                | JobState::BootFail
                | JobState::Deadline
                | JobState::Preempted
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<JobState> for String {
    fn from(state: JobState) -> String {
        state.as_str().to_owned()
    }
}

impl From<String> for JobState {
    fn from(s: String) -> JobState {
        JobState::parse(&s)
    }
}

/// Why a job is pending (Slurm's `Reason` of a `PENDING` job).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
#[non_exhaustive]
pub enum PendingReason {
    /// `Resources`: waiting for CPUs, memory, nodes to free up.
    Resources,
    /// `Priority`: jobs of higher priority go first.
    Priority,
    /// `Dependency`: waiting for the jobs it depends on.
    Dependency,
    /// `DependencyNeverSatisfied`: a job it depends on ended in a way that can never satisfy
    /// the dependency (an `afterok` job failed). Slurm 22.05 leaves such a job `PENDING` for
    /// ever (unless the site sets `SchedulerParameters=kill_invalid_depend`, which cancels it).
    DependencyNeverSatisfied,
    /// `BeginTime`: not before its `--begin` time.
    BeginTime,
    /// `JobHeldUser`: held by its user (`scontrol hold`, `sbatch --hold`).
    HeldByUser,
    /// `JobHeldAdmin`: held by an administrator.
    HeldByAdmin,
    /// `PartitionConfig`: the request exceeds what the partition offers (more CPUs than its
    /// nodes have, …): it waits until the configuration changes.
    PartitionConfig,
    /// Any other reason, as Slurm spelled it.
    Other(String),
}

impl PendingReason {
    /// Parses Slurm's reason; `None` for an empty reason or `None`.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        Some(match s {
            "" | "None" | "(null)" => return None,
            "Resources" => PendingReason::Resources,
            "Priority" => PendingReason::Priority,
            "Dependency" => PendingReason::Dependency,
            "DependencyNeverSatisfied" => PendingReason::DependencyNeverSatisfied,
            "BeginTime" => PendingReason::BeginTime,
            "JobHeldUser" => PendingReason::HeldByUser,
            "JobHeldAdmin" => PendingReason::HeldByAdmin,
            "PartitionConfig" => PendingReason::PartitionConfig,
            other => PendingReason::Other(other.to_owned()),
        })
    }

    /// Slurm's spelling.
    pub fn as_str(&self) -> &str {
        match self {
            PendingReason::Resources => "Resources",
            PendingReason::Priority => "Priority",
            PendingReason::Dependency => "Dependency",
            PendingReason::DependencyNeverSatisfied => "DependencyNeverSatisfied",
            PendingReason::BeginTime => "BeginTime",
            PendingReason::HeldByUser => "JobHeldUser",
            PendingReason::HeldByAdmin => "JobHeldAdmin",
            PendingReason::PartitionConfig => "PartitionConfig",
            PendingReason::Other(other) => other,
        }
    }

    /// Whether the job will never start by itself: a dependency that can no longer be
    /// satisfied, a hold, or a request the partition cannot meet. Someone (the task system,
    /// a user, an administrator) has to cancel, release or change it.
    pub fn never_starts_by_itself(&self) -> bool {
        matches!(
            self,
            PendingReason::DependencyNeverSatisfied
                | PendingReason::HeldByUser
                | PendingReason::HeldByAdmin
                | PendingReason::PartitionConfig
        )
    }
}

impl fmt::Display for PendingReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<PendingReason> for String {
    fn from(reason: PendingReason) -> String {
        reason.as_str().to_owned()
    }
}

impl From<String> for PendingReason {
    fn from(s: String) -> PendingReason {
        PendingReason::parse(&s).unwrap_or(PendingReason::Other(s))
    }
}

/// Where a job is in a task's five-state lifecycle (pending, running, completed, failed,
/// killed).
///
/// | Slurm state | Phase |
/// |---|---|
/// | `PENDING` (and `REQUEUED`, `REQUEUE_HOLD`, `REQUEUE_FED`, `SPECIAL_EXIT`, `RESV_DEL_HOLD`) | `Pending { reason }` |
/// | `RUNNING`, `CONFIGURING`, `COMPLETING`, `SUSPENDED` (and `STOPPED`, `RESIZING`, `SIGNALING`, `STAGE_OUT`) | `Running` |
/// | `COMPLETED` | `Completed` |
/// | `FAILED`, `TIMEOUT`, `OUT_OF_MEMORY`, `NODE_FAIL`, `BOOT_FAIL`, `DEADLINE`, `PREEMPTED` | `Failed { state, exit_code, signal }` |
/// | `CANCELLED` | `Killed` |
/// | any other state | `Running` (not terminal: polled again; logged once per lookup) |
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// Not started yet, and why (when Slurm says).
    Pending {
        /// Slurm's reason.
        reason: Option<PendingReason>,
    },
    /// Started and not ended (or ending).
    Running,
    /// Ended with exit code 0.
    Completed,
    /// Ended otherwise than completed or cancelled.
    Failed {
        /// Slurm's state (`FAILED`, `TIMEOUT`, …).
        state: JobState,
        /// The batch script's exit code, when it exited.
        exit_code: Option<i32>,
        /// The signal that ended the batch script, when one did.
        signal: Option<i32>,
    },
    /// Cancelled.
    Killed,
}

impl Phase {
    /// Whether the phase is one of the three ends (completed, failed, killed).
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Phase::Completed | Phase::Failed { .. } | Phase::Killed
        )
    }
}

/// One job, as `squeue` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobInfo {
    /// Its id.
    pub id: JobId,
    /// Its name (`--job-name`).
    pub name: String,
    /// Its state.
    pub state: JobState,
    /// Slurm's reason for the state (`Resources`, `Priority`, `Dependency`,
    /// `DependencyNeverSatisfied`, `NonZeroExitCode`, …), `None` when Slurm gives none.
    pub reason: Option<String>,
    /// The batch script's exit code, once the job has ended; `None` while it has not, when a
    /// signal ended it, or when it never ran.
    pub exit_code: Option<i32>,
    /// The signal that ended the batch script, once the job has ended and if one did.
    pub signal: Option<i32>,
    /// The nodes it runs or ran on (Slurm's host list), `None` before it has any.
    pub nodes: Option<String>,
    /// Its remaining dependencies as Slurm shows them (`afterok:12(unfulfilled)`,
    /// `afterok:12(failed)`), `None` when it has none left.
    pub dependency: Option<String>,
}

impl JobInfo {
    /// The job's place in the task lifecycle (the table on [`Phase`]).
    pub fn phase(&self) -> Phase {
        match &self.state {
            JobState::Pending => Phase::Pending {
                reason: self.reason.as_deref().and_then(PendingReason::parse),
            },
            JobState::Running
            | JobState::Configuring
            | JobState::Completing
            | JobState::Suspended => Phase::Running,
            JobState::Completed => Phase::Completed,
            JobState::Cancelled => Phase::Killed,
            JobState::Failed
            | JobState::Timeout
            | JobState::OutOfMemory
            | JobState::NodeFail
            | JobState::BootFail
            | JobState::Deadline
            | JobState::Preempted => Phase::Failed {
                state: self.state.clone(),
                exit_code: self.exit_code,
                signal: self.signal,
            },
            JobState::Other(word) => match word.as_str() {
                "REQUEUED" | "REQUEUE_HOLD" | "REQUEUE_FED" | "SPECIAL_EXIT" | "RESV_DEL_HOLD" => {
                    Phase::Pending {
                        reason: self.reason.as_deref().and_then(PendingReason::parse),
                    }
                }
                "STOPPED" | "RESIZING" | "SIGNALING" | "STAGE_OUT" => Phase::Running,
                _ => {
                    tracing::warn!(job = %self.id, state = %word, "unknown Slurm job state; taken as running");
                    Phase::Running
                }
            },
        }
    }

    /// Whether an `afterok` (or other) dependency of this job can never be satisfied: Slurm's
    /// reason `DependencyNeverSatisfied`, whether the job is still `PENDING` (Slurm 22.05's
    /// default) or was cancelled for it (`kill_invalid_depend`).
    pub fn dependency_never_satisfied(&self) -> bool {
        self.reason.as_deref() == Some("DependencyNeverSatisfied")
    }
}
