//! The append-only audit log, `.events.jsonl` in the list directory.
//!
//! One JSON object per line, appended under the list lock after the change it describes is
//! durable: `{"time":"2025-01-02T03:04:05.678Z","actor":"alice","op":"update","taskId":"3",
//! "fields":["status"]}`. The log is never truncated or garbage-collected and survives the
//! deletion of the tasks it mentions. The reference reads only `{digits}.json`, so it ignores it.
//!
//! This module holds the records and the file's name; appending and reading them is the
//! store's ([`crate::TaskList::audit_log`]), in the list directory or the database.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::id::TaskId;

/// The audit log's file name.
pub const AUDIT_LOG_FILE: &str = ".events.jsonl";

/// What kind of change an audit record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditOp {
    /// A task was created.
    Create,
    /// Fields of a task changed (including edges added).
    Update,
    /// A task was deleted.
    Delete,
    /// A `TaskCreated` hook refused a task and it was removed again.
    Rollback,
    /// A task was claimed.
    Claim,
    /// An agent's tasks were unassigned.
    Unassign,
    /// Every task was removed.
    Reset,
    /// `doctor --fix` repaired something.
    Repair,
}

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditRecord {
    /// UTC time, RFC 3339 with milliseconds.
    pub time: String,
    /// Who made the change.
    pub actor: String,
    /// What kind of change.
    pub op: AuditOp,
    /// The task concerned, if the change concerns one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
    /// The fields that changed, in the reference's `updatedFields` vocabulary.
    #[serde(default)]
    pub fields: Vec<String>,
}

impl AuditRecord {
    /// A record stamped now.
    pub(crate) fn now(
        actor: &str,
        op: AuditOp,
        task_id: Option<TaskId>,
        fields: Vec<String>,
    ) -> Self {
        Self {
            time: rfc3339(SystemTime::now()),
            actor: actor.to_string(),
            op,
            task_id,
            fields,
        }
    }
}

pub(crate) use task_output::mailbox::rfc3339;
