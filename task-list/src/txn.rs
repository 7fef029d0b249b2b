//! A write transaction: the list lock held, the reference's lock on every task file it reads
//! for writing, and all writes applied at commit through a journal, so a multi-file change
//! (an edge, a delete) is all-or-nothing even if the writer is killed half way.
//!
//! Commit: if more than one file changes, the new contents are first written to `.journal`
//! (atomically, fsynced); then each file is replaced atomically (temp file, fsync, rename) or
//! removed, the audit records are appended (one write, one fdatasync), the directory is
//! fsynced and the journal removed. The next transaction on the list finds a leftover journal
//! (its writer died) and replays it before anything else. A crash between the audit append and
//! the directory fsync can leave, on a filesystem that does not commit metadata in order, an
//! audit record of a single-file change whose rename was lost; never a torn task file. The reference reads only `{digits}.json`, so it ignores the journal.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use std::sync::atomic::Ordering;

use crate::audit::AuditRecord;
use crate::backend::StoreTxn;
use crate::error::{Error, Result};
use crate::fsutil;
use crate::id::TaskId;
use crate::lock::{DirLock, ListGuard};
use crate::record::Task;
use crate::store::{HIGH_WATER_MARK_FILE, TaskList, read_task};

/// The journal of a transaction in flight.
pub(crate) const JOURNAL_FILE: &str = ".journal";

/// One file change: new contents, or removal.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct FileChange {
    name: String,
    contents: Option<String>,
}

/// The list locked for writing.
#[derive(Debug)]
pub(crate) struct Txn<'a> {
    pub(crate) list: &'a TaskList,
    // Field order is drop order: task-file locks go before the list lock.
    file_locks: Vec<DirLock>,
    guard: ListGuard,
    cache: HashMap<TaskId, Option<Task>>,
    changes: Vec<FileChange>,
    /// Where each staged file is in `changes`.
    staged: HashMap<String, usize>,
    audit: Vec<AuditRecord>,
}

impl<'a> Txn<'a> {
    /// Locks the list. `reference_list_lock`: also take the reference's list lock
    /// (`.lock.lock`), which the reference takes for create, reset and busy-checked claims;
    /// other writes are protected, as in the reference, by the locks of the task files they write.
    pub(crate) fn begin(list: &'a TaskList, reference_list_lock: bool) -> Result<Self> {
        let txn = Self {
            list,
            file_locks: Vec::new(),
            guard: ListGuard::acquire(list.dir(), &list.config.lock, reference_list_lock)?,
            cache: HashMap::new(),
            changes: Vec::new(),
            staged: HashMap::new(),
            audit: Vec::new(),
        };
        txn.replay_journal()?;
        Ok(txn)
    }

    fn lock_file(&mut self, id: TaskId) -> Result<()> {
        let path = self.list.task_path(id);
        if !self.file_locks.iter().any(|l| l.protects(&path)) {
            self.file_locks.extend(self.guard.lock_file(&path)?);
        }
        Ok(())
    }

    fn stage(&mut self, name: String, contents: Option<String>) {
        match self.staged.get(&name) {
            Some(&at) => self.changes[at].contents = contents,
            None => {
                self.staged.insert(name.clone(), self.changes.len());
                self.changes.push(FileChange { name, contents });
            }
        }
    }

    /// Finishes the transaction of a writer that died after writing its journal.
    fn replay_journal(&self) -> Result<()> {
        let dir = self.list.dir();
        let path = dir.join(JOURNAL_FILE);
        let Some(bytes) = fsutil::read_optional(&path)? else {
            return Ok(());
        };
        // A journal is renamed into place complete, so one that does not parse cannot exist
        // unless something else wrote it: keep it for inspection and refuse to guess.
        let changes: Vec<FileChange> =
            serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
                path: path.clone(),
                message: e.to_string(),
            })?;
        let mut locks = Vec::new();
        for change in &changes {
            let valid = change.name == HIGH_WATER_MARK_FILE
                || TaskId::from_file_name(&change.name).is_some();
            if !valid {
                return Err(Error::Corrupt {
                    path,
                    message: format!("journal names a file outside the list: {:?}", change.name),
                });
            }
            if change.name != HIGH_WATER_MARK_FILE {
                locks.extend(self.guard.lock_file(&dir.join(&change.name))?);
            }
        }
        tracing::warn!(list = %self.list.list_id(), files = changes.len(), "replaying the journal of an interrupted write");
        apply(self.list, &changes)?;
        fsutil::remove_if_exists(&path)
    }
}

impl StoreTxn for Txn<'_> {
    /// Reads a task (cached for the rest of the transaction, including its own writes).
    fn get(&mut self, id: TaskId) -> Result<Option<&Task>> {
        if !self.cache.contains_key(&id) {
            let task = self.list.get(id)?;
            self.cache.insert(id, task);
        }
        Ok(self.cache.get(&id).and_then(Option::as_ref))
    }

    /// Takes the reference's lock on a task file (held until commit) and reads the task fresh.
    /// `None` if the task does not exist.
    fn lock(&mut self, id: TaskId) -> Result<Option<Task>> {
        self.lock_file(id)?;
        let task = match self.staged.contains_key(&id.file_name()) {
            true => self.cache.get(&id).cloned().flatten(),
            false => read_task(&self.list.task_path(id))?,
        };
        self.cache.insert(id, task.clone());
        Ok(task)
    }

    /// Stages a task's new contents. Existing tasks must have been read through [`Txn::lock`].
    fn save(&mut self, task: &Task) -> Result<()> {
        self.stage(task.id.file_name(), Some(task.to_file_json()));
        self.cache.insert(task.id, Some(task.clone()));
        Ok(())
    }

    /// Stages the removal of a task file (locking it first).
    fn remove(&mut self, id: TaskId) -> Result<()> {
        self.lock_file(id)?;
        self.stage(id.file_name(), None);
        self.cache.insert(id, None);
        Ok(())
    }

    /// Raises the high-water mark to at least `id` (never lowers it).
    fn raise_high_water_mark(&mut self, id: u64) -> Result<()> {
        if self.list.high_water_mark()? < id {
            self.stage(HIGH_WATER_MARK_FILE.to_string(), Some(id.to_string()));
        }
        Ok(())
    }

    /// Queues an audit record, written at commit.
    fn record(&mut self, record: AuditRecord) {
        self.audit.push(record);
    }

    /// The first call on a handle scans the directory. Later calls start from the highest id
    /// seen and probe upwards: every id above the high-water mark up to the highest file exists
    /// (creates are sequential and a delete raises the mark to the deleted id, here and in the
    /// reference), so the first missing file above max(hint, mark) is the answer.
    fn next_id(&mut self) -> Result<TaskId> {
        let list = self.list;
        let mut highest = match list.id_hint.load(Ordering::Acquire) {
            0 => fsutil::task_ids(list.dir())?
                .last()
                .map_or(0, |id| id.get()),
            hint => hint,
        }
        .max(list.high_water_mark()?);
        while fsutil::exists(&list.dir().join(format!("{}.json", highest + 1)))? {
            highest += 1;
        }
        let next = TaskId::new(highest + 1)?;
        list.id_hint.store(next.get(), Ordering::Release);
        Ok(next)
    }

    fn task_ids(&mut self) -> Result<Vec<TaskId>> {
        fsutil::task_ids(self.list.dir())
    }

    /// Applies the staged changes (through the journal when there are several) and appends the
    /// audit records, then makes both durable with one fsync of the directory, then releases the
    /// locks. The audit append comes before the directory fsync so that, on filesystems that
    /// commit metadata in one journal (ext4, xfs), its fdatasync also commits the renames and
    /// the directory fsync finds nothing left to flush: a create costs two device flushes, not
    /// three. Every file and the directory are still fsynced before the change counts as done.
    fn commit(self: Box<Self>) -> Result<()> {
        let dir = self.list.dir();
        let durable = self.list.config.durable;
        let journaled = self.changes.len() > 1;
        if journaled {
            let journal = serde_json::to_vec(&self.changes).unwrap_or_default();
            fsutil::write_atomic(dir, JOURNAL_FILE, &journal, durable)?;
            fsutil::sync_dir(dir, durable)?;
        }
        write_files(self.list, &self.changes)?;
        self.list.append_audit(&self.audit)?;
        fsutil::sync_dir(dir, durable)?;
        if journaled {
            fsutil::remove_if_exists(&dir.join(JOURNAL_FILE))?;
        }
        Ok(())
    }
}

/// Applies `changes` and makes them durable.
fn apply(list: &TaskList, changes: &[FileChange]) -> Result<()> {
    write_files(list, changes)?;
    fsutil::sync_dir(list.dir(), list.config.durable)
}

/// Replaces or removes each file (each replacement fsynced when durable; the directory not).
fn write_files(list: &TaskList, changes: &[FileChange]) -> Result<()> {
    let dir = list.dir();
    let durable = list.config.durable;
    for change in changes {
        match &change.contents {
            Some(contents) => {
                fsutil::write_atomic(dir, &change.name, contents.as_bytes(), durable)?
            }
            None => fsutil::remove_if_exists(&dir.join(&change.name))?,
        }
    }
    Ok(())
}
