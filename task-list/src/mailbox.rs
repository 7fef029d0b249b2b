//! Per-agent inboxes for `task_assignment` messages.
//!
//! Layout: `{list dir}/.inboxes/{agent}.jsonl` (agent name sanitised like a list id), one JSON
//! message per line: a [`task_output::mailbox::Mailbox`], the workspace's one mailbox (appends
//! locked and safe in many processes, a killed writer's torn line skipped, never fatal):
//! `{"type":"task_assignment","taskId":"3","subject":"…","description":"…","assignedBy":"lead",
//! "timestamp":"2025-01-02T03:04:05.678Z"}`. The reference reads only `{digits}.json` in a list
//! directory, so it never mistakes an inbox for a task.

use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use task_output::mailbox::Mailbox;

use crate::audit::rfc3339;
use crate::error::Result;
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
    fn inbox_mailbox(&self, agent: &str) -> Result<Mailbox> {
        let mailbox = Mailbox::open(&self.dir().join(INBOX_DIR), &sanitize_name(agent)?)?;
        Ok(mailbox.with_sync(self.config.durable))
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
        self.inbox_mailbox(owner)?.append(&message)?;
        Ok(())
    }

    /// Reads `agent`'s inbox, oldest first. Lines that do not parse are skipped; so is, with a
    /// warning, an inbox that is not a regular file (never followed nor waited on) or is larger
    /// than [`crate::StoreConfig::max_log_bytes`].
    pub fn inbox(&self, agent: &str) -> Result<Vec<MailboxMessage>> {
        if let Some(pg) = self.pg() {
            return pg.inbox(&sanitize_name(agent)?);
        }
        let mailbox = self.inbox_mailbox(agent)?;
        let path = mailbox.path();
        let label = match path.file_name() {
            Some(name) => format!("{INBOX_DIR}/{}", name.to_string_lossy()),
            None => INBOX_DIR.to_owned(),
        };
        let mut messages = Vec::new();
        fsutil::each_json_line(path, &label, self.config.max_log_bytes, |message| {
            messages.push(message)
        })?;
        Ok(messages)
    }
}
