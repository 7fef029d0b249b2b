//! Per-agent inboxes for `task_assignment` messages.
//!
//! Layout: `{list dir}/.inboxes/{agent}.jsonl` (agent name sanitised like a list id), one JSON
//! message per line: a [`task_output::mailbox::Mailbox`], the workspace's one mailbox (appends
//! locked and safe in many processes, a killed writer's torn line skipped, never fatal):
//! `{"type":"task_assignment","taskId":"3","subject":"…","description":"…","assignedBy":"lead",
//! "timestamp":"2025-01-02T03:04:05.678Z"}`. The reference reads only `{digits}.json` in a list
//! directory, so it never mistakes an inbox for a task.
//!
//! This module holds the message and the layout; delivering and reading them is
//! [`crate::inbox`]'s.

use serde::{Deserialize, Serialize};

use crate::id::TaskId;

/// The directory holding the inboxes, inside the list directory.
pub const INBOX_DIR: &str = ".inboxes";

/// A message in an agent's inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum MailboxMessage {
    /// A task was assigned to the inbox's agent.
    #[serde(rename_all = "camelCase")]
    TaskAssignment {
        /// The task.
        task_id: TaskId,
        /// Its subject.
        subject: String,
        /// Its description.
        description: String,
        /// Who assigned it.
        assigned_by: String,
        /// When (RFC 3339 UTC).
        timestamp: String,
    },
}
