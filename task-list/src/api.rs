//! Requests and results in the reference's JSON shapes (SPEC §13), for the CLI and MCP layers.

use serde::{Deserialize, Serialize};

use crate::id::TaskId;
use crate::record::{Metadata, Task, TaskStatus};

/// `TaskCreate` input.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateRequest {
    /// Short title.
    pub subject: String,
    /// What needs to be done.
    pub description: String,
    /// Present-tense form for spinners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
    /// Initial metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl CreateRequest {
    /// A request with a subject and a description.
    pub fn new(subject: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            subject: subject.into(),
            description: description.into(),
            ..Self::default()
        }
    }
}

/// `TaskCreate` output: `{task: {id, subject}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateResult {
    /// The new task.
    pub task: TaskRef,
    /// Non-blocking hook failures (not part of the reference's shape).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// A task's id and subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskRef {
    /// The id.
    pub id: TaskId,
    /// The subject.
    pub subject: String,
}

/// The status a `TaskUpdate` may set: the stored ones plus `deleted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpdateStatus {
    /// Back to pending.
    Pending,
    /// Started.
    InProgress,
    /// Done (runs the `TaskCompleted` hooks first).
    Completed,
    /// Delete the task.
    Deleted,
}

impl UpdateStatus {
    /// The stored status, or `None` for `deleted`.
    pub fn stored(self) -> Option<TaskStatus> {
        match self {
            Self::Pending => Some(TaskStatus::Pending),
            Self::InProgress => Some(TaskStatus::InProgress),
            Self::Completed => Some(TaskStatus::Completed),
            Self::Deleted => None,
        }
    }
}

/// `TaskUpdate` input (SPEC §12). Ids are strings, as the model sends them; they are validated.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateRequest {
    /// The task to update.
    pub task_id: String,
    /// New subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// New description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// New spinner text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
    /// New status, or `deleted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<UpdateStatus>,
    /// Tasks this one blocks (edges written on both tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_blocks: Option<Vec<String>>,
    /// Tasks that block this one (edges written on both tasks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_blocked_by: Option<Vec<String>>,
    /// Tasks this one no longer blocks (edges removed from both tasks; not in the reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_blocks: Option<Vec<String>>,
    /// Tasks that no longer block this one (edges removed from both tasks; not in the
    /// reference).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_blocked_by: Option<Vec<String>>,
    /// New owner (an empty string clears it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Merged into the metadata; a key set to `null` is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    /// Moves the task before or after another one in the queue (written as
    /// `metadata.position`; not in the reference, never read from its JSON).
    #[serde(skip)]
    pub place: Option<Placement>,
}

impl UpdateRequest {
    /// An empty update of `task_id`.
    pub fn new(task_id: impl ToString) -> Self {
        Self {
            task_id: task_id.to_string(),
            ..Self::default()
        }
    }
}

/// Where [`crate::UpdateRequest::place`] moves a task: just before or just after another one
/// in the queue order ([`Task::queue_key`] without the priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Just before this task.
    Before(TaskId),
    /// Just after this task.
    After(TaskId),
}

impl Placement {
    /// The task moved next to.
    pub fn anchor(self) -> TaskId {
        match self {
            Self::Before(id) | Self::After(id) => id,
        }
    }
}

/// `{from, to}` of a status change (`to` may be `deleted`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusChange {
    /// Previous status.
    pub from: String,
    /// New status.
    pub to: String,
}

/// `TaskUpdate` output: `{success, taskId, updatedFields, error?, statusChange?}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateResult {
    /// Whether the update was applied.
    pub success: bool,
    /// The task, as requested.
    pub task_id: String,
    /// The fields that changed, in the reference's order and names.
    pub updated_fields: Vec<String>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The status change, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_change: Option<StatusChange>,
    /// The last open task of a list of 3+ was completed with no verification task in the list.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verification_nudge_needed: bool,
    /// Non-blocking hook failures (not part of the reference's shape).
    #[serde(skip)]
    pub warnings: Vec<String>,
}

impl UpdateResult {
    fn empty(task_id: &str, success: bool) -> Self {
        Self {
            success,
            task_id: task_id.to_string(),
            updated_fields: Vec::new(),
            error: None,
            status_change: None,
            verification_nudge_needed: false,
            warnings: Vec::new(),
        }
    }

    pub(crate) fn failed(task_id: &str, error: impl Into<String>) -> Self {
        Self {
            error: Some(error.into()),
            ..Self::empty(task_id, false)
        }
    }

    pub(crate) fn succeeded(task_id: &str, updated_fields: Vec<String>) -> Self {
        Self {
            updated_fields,
            ..Self::empty(task_id, true)
        }
    }
}

/// `TaskGet` output: `{task: {id, subject, description, status, blocks, blockedBy} | null}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetResult {
    /// The task, or `null`.
    pub task: Option<TaskDetails>,
}

/// The task fields `TaskGet` returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskDetails {
    /// Id.
    pub id: TaskId,
    /// Subject.
    pub subject: String,
    /// Description.
    pub description: String,
    /// Status.
    pub status: TaskStatus,
    /// Downstream tasks.
    pub blocks: Vec<TaskId>,
    /// Upstream tasks.
    pub blocked_by: Vec<TaskId>,
}

impl From<&Task> for TaskDetails {
    fn from(task: &Task) -> Self {
        Self {
            id: task.id,
            subject: task.subject.clone(),
            description: task.description.clone(),
            status: task.status,
            blocks: task.blocks.clone(),
            blocked_by: task.blocked_by.clone(),
        }
    }
}

/// `TaskList` output: `{tasks: [{id, subject, status, owner?, blockedBy}]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListResult {
    /// The visible tasks, by id.
    pub tasks: Vec<ListEntry>,
}

/// Which tasks [`crate::TaskList::list_where`] keeps: every condition given must hold (the
/// default keeps every task, as `TaskList` does).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListFilter {
    /// This status.
    pub status: Option<TaskStatus>,
    /// This owner.
    pub owner: Option<String>,
    /// Every one of these labels ([`Task::labels`]).
    pub labels: Vec<String>,
    /// This priority ([`Task::priority`]).
    pub priority: Option<u8>,
    /// Ready: pending, unowned, every blocker completed (as [`crate::TaskList::ready`] says).
    pub ready: bool,
    /// Blocked: some blocker is not completed.
    pub blocked: bool,
    /// The children of this task ([`Task::parent`]).
    pub parent: Option<TaskId>,
}

/// One `TaskList` entry. `blockedBy` lists only blockers that are not completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListEntry {
    /// Id.
    pub id: TaskId,
    /// Subject.
    pub subject: String,
    /// Status.
    pub status: TaskStatus,
    /// Owner.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Unresolved blockers.
    pub blocked_by: Vec<TaskId>,
}

/// Why a claim failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimFailure {
    /// No such task.
    TaskNotFound,
    /// Another agent owns it.
    AlreadyClaimed,
    /// It is completed.
    AlreadyResolved,
    /// Some blockers are not completed (see `blockedByTasks`).
    Blocked,
    /// The claimant owns other open tasks (see `busyWithTasks`).
    AgentBusy,
}

/// Options of a claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClaimOptions {
    /// Refuse when the claimant already owns another open task.
    pub check_agent_busy: bool,
    /// Mark the claimed task `in_progress` in the same write: a worker's claim and start are
    /// one step (without it the status is left to `TaskUpdate`, as the reference does).
    pub start: bool,
}

/// The result of a claim: `{success, reason?, task?, busyWithTasks?, blockedByTasks?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimResult {
    /// Whether the claimant now owns the task.
    pub success: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<ClaimFailure>,
    /// The task as it is now (absent when not found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Task>,
    /// The claimant's other open tasks (`agent_busy`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy_with_tasks: Vec<TaskId>,
    /// The unresolved blockers (`blocked`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_by_tasks: Vec<TaskId>,
}

/// Why an agent's tasks are being unassigned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnassignReason {
    /// The agent was terminated.
    Terminated,
    /// The agent shut down.
    Shutdown,
}

/// The result of [`crate::TaskList::unassign`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnassignResult {
    /// The tasks that went back to `pending` with no owner.
    pub unassigned_tasks: Vec<TaskRef>,
    /// The message for the team lead (`None` when nothing was unassigned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification_message: Option<String>,
}
