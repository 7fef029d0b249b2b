//! The texts the reference returns to its model (SPEC §13, `observed.md`).

use std::fmt::Write as _;

use crate::api::{ClaimResult, CreateResult, GetResult, ListEntry, ListResult, UpdateResult};
use crate::id::TaskId;

/// The reference's answer for an id with no task.
pub const TASK_NOT_FOUND: &str = "Task not found";

/// The agent type the verification nudge asks for.
pub const VERIFICATION_AGENT_TYPE: &str = "verification";

/// What a claim of the next ready task says when none is ready.
pub const NOTHING_READY: &str = "No task is ready.";

/// `TaskList`'s text when the list is empty.
pub const NO_TASKS: &str = "No tasks found";

impl CreateResult {
    /// `Task #1 created successfully: {subject}`.
    pub fn model_text(&self) -> String {
        format!(
            "Task #{} created successfully: {}",
            self.task.id, self.task.subject
        )
    }
}

impl UpdateResult {
    /// `Updated task #2 blockedBy` (the changed fields, comma-separated), plus the verification
    /// nudge when needed; on failure, the error.
    pub fn model_text(&self) -> String {
        if !self.success {
            return self
                .error
                .clone()
                .unwrap_or_else(|| TASK_NOT_FOUND.to_string());
        }
        let mut text = format!("Updated task #{}", self.task_id);
        if !self.updated_fields.is_empty() {
            let _ = write!(text, " {}", self.updated_fields.join(", "));
        }
        if self.verification_nudge_needed {
            let _ = write!(
                text,
                "\n\nNOTE: You just closed out 3+ tasks and none of them was a verification step. \
                 Before writing your final summary, spawn the verification agent \
                 (subagent_type=\"{VERIFICATION_AGENT_TYPE}\"). You cannot self-assign PARTIAL by \
                 listing caveats in your summary — only the verifier issues a verdict."
            );
        }
        text
    }
}

impl GetResult {
    /// `Task #2: two` / `Status: pending` / `Description: d2` / `Blocked by: #2, #1` /
    /// `Blocks: #2, #1` (edge lines only when non-empty), or `Task not found`.
    pub fn model_text(&self) -> String {
        let Some(task) = &self.task else {
            return TASK_NOT_FOUND.to_string();
        };
        let mut text = format!(
            "Task #{}: {}\nStatus: {}\nDescription: {}",
            task.id, task.subject, task.status, task.description
        );
        if !task.blocked_by.is_empty() {
            let _ = write!(text, "\nBlocked by: {}", hash_list(&task.blocked_by));
        }
        if !task.blocks.is_empty() {
            let _ = write!(text, "\nBlocks: {}", hash_list(&task.blocks));
        }
        text
    }
}

impl ListResult {
    /// One line per task: `#2 [pending] Write API [blocked by #1]`, `#1 [completed] one (alice)`.
    pub fn model_text(&self) -> String {
        if self.tasks.is_empty() {
            return NO_TASKS.to_string();
        }
        let lines: Vec<String> = self.tasks.iter().map(ListEntry::model_line).collect();
        lines.join("\n")
    }
}

impl ListEntry {
    /// The entry as `TaskList` shows it: `#2 [pending] Write API (ann) [blocked by #1]`.
    pub fn model_line(&self) -> String {
        let mut line = format!("#{} [{}] {}", self.id, self.status, self.subject);
        if let Some(owner) = &self.owner {
            let _ = write!(line, " ({owner})");
        }
        if !self.blocked_by.is_empty() {
            let _ = write!(line, " [blocked by {}]", hash_list(&self.blocked_by));
        }
        line
    }
}

fn hash_list(ids: &[crate::id::TaskId]) -> String {
    ids.iter()
        .map(|id| format!("#{id}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ClaimResult {
    /// What a claim of task `id` (as given) for `owner` says: `Claimed task #1 for ann`, or
    /// `Cannot claim task #1: already_claimed` (the CLI and the `TaskClaim` tool).
    pub fn claim_text(&self, id: &str, owner: &str) -> String {
        match self.reason {
            None => format!("Claimed task #{id} for {owner}"),
            Some(reason) => {
                let word = serde_json::to_value(reason)
                    .ok()
                    .and_then(|value| value.as_str().map(str::to_owned))
                    .unwrap_or_else(|| format!("{reason:?}"));
                format!("Cannot claim task #{id}: {word}")
            }
        }
    }

    /// What a claim of the next ready task for `owner` says (`None`: nothing was ready).
    pub fn next_text(owner: &str, result: Option<&ClaimResult>) -> String {
        match result {
            None => NOTHING_READY.to_owned(),
            Some(claimed) => match &claimed.task {
                Some(task) if claimed.success => {
                    format!("Claimed task #{} for {owner}: {}", task.id, task.subject)
                }
                _ => format!(
                    "Cannot claim a task for {owner}: agent_busy (owns {})",
                    hash_ids(&claimed.busy_with_tasks)
                ),
            },
        }
    }
}

/// `#1, #2`.
pub fn hash_ids(ids: &[TaskId]) -> String {
    ids.iter()
        .map(|id| format!("#{id}"))
        .collect::<Vec<_>>()
        .join(", ")
}
