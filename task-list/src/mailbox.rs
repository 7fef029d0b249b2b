//! Per-agent inboxes for `task_assignment` messages.
//!
//! Layout: `{list dir}/.inboxes/{agent}.jsonl` (agent name sanitised like a list id), one JSON
//! message per line, appended with `O_APPEND`:
//! `{"type":"task_assignment","taskId":"3","subject":"…","description":"…","assignedBy":"lead",
//! "timestamp":"2025-01-02T03:04:05.678Z"}`. The reference reads only `{digits}.json` in a list
//! directory, so it never mistakes an inbox for a task.

use std::path::PathBuf;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::audit::rfc3339;
use crate::error::{IoContext, Result};
use crate::fsutil;
use crate::id::{TaskId, sanitize_name};
use crate::record::Task;
use crate::store::TaskList;

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

impl TaskList {
    fn inbox_path(&self, agent: &str) -> Result<PathBuf> {
        Ok(self
            .dir()
            .join(INBOX_DIR)
            .join(format!("{}.jsonl", sanitize_name(agent)?)))
    }

    /// Drops a `task_assignment` message for `task`'s new owner into that owner's inbox.
    pub(crate) fn notify_assignment(&self, task: &Task, owner: &str) -> Result<()> {
        let message = MailboxMessage::TaskAssignment {
            task_id: task.id,
            subject: task.subject.clone(),
            description: task.description.clone(),
            assigned_by: self.actor.name.clone(),
            timestamp: rfc3339(SystemTime::now()),
        };
        if let Some(pg) = self.pg() {
            return pg.append_inbox(&sanitize_name(owner)?, &message);
        }
        let path = self.inbox_path(owner)?;
        let dir = self.dir().join(INBOX_DIR);
        std::fs::create_dir_all(&dir).at("create", &dir)?;
        fsutil::append_line(
            &path,
            &serde_json::to_string(&message).unwrap_or_default(),
            self.config.durable,
        )
    }

    /// Reads `agent`'s inbox, oldest first (lines that do not parse are skipped).
    pub fn inbox(&self, agent: &str) -> Result<Vec<MailboxMessage>> {
        if let Some(pg) = self.pg() {
            return pg.inbox(&sanitize_name(agent)?);
        }
        let bytes = fsutil::read_optional(&self.inbox_path(agent)?)?.unwrap_or_default();
        Ok(bytes
            .split(|&b| b == b'\n')
            .filter_map(|line| serde_json::from_slice(line).ok())
            .collect())
    }
}
