//! Agents' inboxes on a list: a `task_assignment` message ([`MailboxMessage`]) delivered to a
//! task's new owner, and an inbox read back, in the list directory ([`INBOX_DIR`]) or in the
//! database.

use std::time::SystemTime;

use task_output::mailbox::Mailbox;

use crate::audit::rfc3339;
use crate::error::Result;
use crate::fsutil;
use crate::id::sanitize_name;
use crate::mailbox::{INBOX_DIR, MailboxMessage};
use crate::record::Task;
use crate::store::TaskList;

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
