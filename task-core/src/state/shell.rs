//! Per-type state of shell commands and monitors (SPEC §5, §6).

use serde::{Deserialize, Serialize};

/// What a shell-run task is: a command or a monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShellKind {
    /// A background command (`local_bash`).
    #[default]
    Shell,
    /// A watch whose every output line is an event (`monitor_mcp`).
    Monitor,
}

/// The data of a `local_bash` or `monitor_mcp` task.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellState {
    /// The command line as the user gave it.
    pub command: String,
    /// Whether the task runs in the background (only those count as background tasks).
    #[serde(default)]
    pub is_backgrounded: bool,
    /// Command or monitor.
    #[serde(default)]
    pub kind: ShellKind,
    /// The exit code, once the process has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The process group it runs in, while it may be alive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ShellProcess>,
    /// The batch job it runs as, when it runs on a batch system (a Slurm cluster) rather than
    /// on this machine; absent for a local command (and in every record written before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Box<BatchJob>>,
}

/// A shell command placed on a batch system: which one, its job once submitted, and why it
/// waits while it does. Recorded from the task's registration on, so that the next supervisor
/// of the session follows the job (found by its id, or by its name, the task's id, when its
/// predecessor died before recording it) instead of taking the task for dead.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchJob {
    /// The batch system (`slurm`).
    pub engine: String,
    /// The job's id there, once submitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// Why the job waits, as the batch system says it (Slurm's reason: `Resources`,
    /// `Priority`, …), while the task is `pending`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// The tasks (`--after`) whose jobs on the same batch system this job waits for: the
    /// batch system holds it (Slurm's `--dependency=afterok:JOB`) instead of the supervisor's
    /// queue, which hands them over once each has a job. Empty for a job that waits for none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<BatchDependency>,
    /// Where the job's output begins in the task's output file, when it does not begin at
    /// its start (an agent resumed in the same task appends each run's job to its
    /// transcript): a supervisor that takes the job over reads it from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_from: Option<u64>,
}

/// A task a batch job waits for, and that task's own job on the same batch system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchDependency {
    /// The task.
    pub task: crate::TaskId,
    /// Its job's id.
    pub job_id: String,
}

impl BatchJob {
    /// A job about to be submitted to `engine`.
    pub fn new(engine: impl Into<String>) -> Self {
        Self {
            engine: engine.into(),
            job_id: None,
            waiting: None,
            after: Vec::new(),
            output_from: None,
        }
    }

    /// What a listing shows of a waiting job: `slurm: Resources`; `None` when it does not wait.
    pub fn waiting_note(&self) -> Option<String> {
        self.waiting
            .as_deref()
            .map(|reason| format!("{}: {reason}", self.engine))
    }
}

/// The process group of a running shell task, recorded so that a process that finds the task
/// orphaned can clean up after it, and can tell that group from a later one given the same
/// number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellProcess {
    /// The process group id (the shell's pid: it leads its own group and session).
    pub pgid: u32,
    /// When the group's leader started, in clock ticks after boot (`/proc/PID/stat` field 22).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_started: Option<u64>,
    /// The session and user the leader was started in; absent in state written before they
    /// were recorded. Present, it also means every process of the task carries the task's id
    /// as its marker (`TASKS_TASK_ID`), which the cleanup of an orphan checks before any signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<ProcessOwner>,
}

/// The session and user a task's processes were started in (see [`ShellProcess::owner`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcessOwner {
    /// The session id (the supervisor's session).
    pub session: u32,
    /// The user id the processes run as.
    pub uid: u32,
}
