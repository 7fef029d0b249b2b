//! The store behind a [`TaskList`]: the list directory (the default, reference-compatible) or a
//! PostgreSQL database. Every operation is written once, against [`StoreTxn`]; a store only
//! supplies reads and a write transaction, so both stores give the same semantics and texts.
//! `TaskList::write` (in `txn`) runs an operation on the list's store.

use std::sync::Arc;
use std::time::Duration;

use crate::MailboxMessage;
use crate::audit::AuditRecord;
use crate::entry::FileProblem;
use crate::error::{Error, Result};
use crate::id::TaskId;
use crate::record::Task;
use crate::snapshot::Snapshot;

/// Where a list lives.
#[derive(Debug, Clone)]
pub(crate) enum Backend {
    /// `{lists root}/{list id}/`, the reference's format.
    Files,
    /// A database (PostgreSQL; shared by every handle cloned from one connection).
    Database(Arc<dyn DatabaseStore>),
}

/// A list kept in a database: what the file store does by itself, asked of a store object.
///
/// A trait object rather than a variant holding the PostgreSQL store: the only reference to the
/// implementation is the `connect` that builds it, so a program that never connects to a
/// database (the `tasks` binary's short commands) links none of its client, TLS or protocol
/// code.
pub(crate) trait DatabaseStore: Send + Sync + std::fmt::Debug {
    /// Runs `body` in a write transaction and commits it (retried on a serialization failure
    /// or a lost connection before the commit).
    fn write_erased(
        &self,
        body: &mut (dyn FnMut(&mut dyn StoreTxn) -> Result<()> + Send),
    ) -> Result<()>;
    /// Reads one task.
    fn get(&self, id: TaskId) -> Result<Option<Task>>;
    /// Every task of the list.
    fn snapshot(&self) -> Result<Snapshot>;
    /// The high-water mark.
    fn high_water_mark(&self) -> Result<u64>;
    /// The audit log, oldest first.
    fn audit_log(&self) -> Result<(Vec<AuditRecord>, Vec<FileProblem>)>;
    /// Appends `message` to `agent`'s inbox.
    fn append_inbox(&self, agent: &str, message: &MailboxMessage) -> Result<()>;
    /// `agent`'s inbox, oldest first.
    fn inbox(&self, agent: &str) -> Result<Vec<MailboxMessage>>;
    /// Starts listening for changes to the list.
    fn watch(self: Arc<Self>) -> Result<Box<dyn ChangeFeed>>;
}

/// Changes to a list in a database, as they are committed.
pub(crate) trait ChangeFeed: Send + std::fmt::Debug {
    /// Waits up to `wait` (forever with `None`) for a change: `true` one came, `false` timed
    /// out.
    fn wait(&mut self, wait: Option<Duration>) -> Result<bool>;
    /// Waits for `quiet` without a change, at most `cap` in all.
    fn drain(&mut self, quiet: Duration, cap: Duration);
}

/// A write transaction on a list: the list locked against every other writer, the tasks it
/// writes locked, and all its changes applied at [`StoreTxn::commit`] or not at all.
pub(crate) trait StoreTxn {
    /// Reads a task (cached for the rest of the transaction, including its own writes).
    fn get(&mut self, id: TaskId) -> Result<Option<&Task>>;
    /// Locks a task for writing and reads it fresh; `None` if it does not exist.
    fn lock(&mut self, id: TaskId) -> Result<Option<Task>>;
    /// Stages a task's new contents (existing tasks must have been read through `lock`).
    fn save(&mut self, task: &Task) -> Result<()>;
    /// Stages the removal of a task.
    fn remove(&mut self, id: TaskId) -> Result<()>;
    /// Raises the high-water mark to at least `id` (never lowers it).
    fn raise_high_water_mark(&mut self, id: u64) -> Result<()>;
    /// The next id: max(highest task id, high-water mark) + 1.
    fn next_id(&mut self) -> Result<TaskId>;
    /// Every task id in the list, including unreadable ones (ascending).
    fn task_ids(&mut self) -> Result<Vec<TaskId>>;
    /// `snapshot` (of the list, read outside the transaction) with what the transaction has
    /// staged in place: the file store's transactions may carry other writers' changes (group
    /// commit), which a body must see. On a database one transaction carries one writer's
    /// changes: `snapshot` is returned as it is.
    fn overlay(&self, snapshot: Snapshot) -> Snapshot {
        snapshot
    }
    /// Queues an audit record, written with the changes.
    fn record(&mut self, record: AuditRecord);
    /// Applies everything staged, atomically.
    fn commit(self: Box<Self>) -> Result<()>;
}

impl Error {
    /// Whether the operation may be run again from the start (it did not commit).
    pub(crate) fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Database {
                retryable: true,
                ..
            }
        )
    }
}
