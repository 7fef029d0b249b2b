//! A write transaction: the list lock held, per-file locks for the files it rewrites, atomic
//! writes, one directory fsync and the audit records at the end.

use std::collections::HashMap;

use crate::audit::AuditRecord;
use crate::error::Result;
use crate::fsutil;
use crate::id::TaskId;
use crate::lock::{DirLock, ListGuard};
use crate::record::Task;
use crate::store::{HIGH_WATER_MARK_FILE, TaskList, read_task};

/// A task read under the reference's lock on its file; the lock is held while this lives.
#[derive(Debug)]
pub(crate) struct Locked {
    pub(crate) task: Task,
    _lock: DirLock,
}

/// The list locked for writing.
#[derive(Debug)]
pub(crate) struct Txn<'a> {
    pub(crate) list: &'a TaskList,
    guard: ListGuard,
    cache: HashMap<TaskId, Option<Task>>,
    dirty: bool,
    audit: Vec<AuditRecord>,
}

impl<'a> Txn<'a> {
    pub(crate) fn begin(list: &'a TaskList) -> Result<Self> {
        Ok(Self {
            list,
            guard: ListGuard::acquire(list.dir(), &list.config.lock)?,
            cache: HashMap::new(),
            dirty: false,
            audit: Vec::new(),
        })
    }

    /// Reads a task (cached for the rest of the transaction).
    pub(crate) fn get(&mut self, id: TaskId) -> Result<Option<&Task>> {
        if !self.cache.contains_key(&id) {
            let task = self.list.get(id)?;
            self.cache.insert(id, task);
        }
        Ok(self.cache.get(&id).and_then(Option::as_ref))
    }

    /// Locks a task file and reads it fresh. `None` if the task does not exist.
    pub(crate) fn lock(&mut self, id: TaskId) -> Result<Option<Locked>> {
        let path = self.list.task_path(id);
        let lock = self.guard.lock_file(&path)?;
        let task = read_task(&path)?;
        self.cache.insert(id, task.clone());
        Ok(task.map(|task| Locked { task, _lock: lock }))
    }

    /// Writes a task atomically. Existing tasks must be held through [`Txn::lock`].
    pub(crate) fn save(&mut self, task: &Task) -> Result<()> {
        fsutil::write_atomic(
            self.list.dir(),
            &task.id.file_name(),
            task.to_file_json().as_bytes(),
        )?;
        self.cache.insert(task.id, Some(task.clone()));
        self.dirty = true;
        Ok(())
    }

    /// Removes a locked task's file.
    pub(crate) fn remove(&mut self, locked: Locked) -> Result<()> {
        self.unlink(locked.task.id)
    }

    /// Removes a task file under its lock, without reading it.
    pub(crate) fn remove_id(&mut self, id: TaskId) -> Result<()> {
        let _lock = self.guard.lock_file(&self.list.task_path(id))?;
        self.unlink(id)
    }

    fn unlink(&mut self, id: TaskId) -> Result<()> {
        fsutil::remove_if_exists(&self.list.task_path(id))?;
        self.cache.insert(id, None);
        self.dirty = true;
        Ok(())
    }

    /// Raises the high-water mark to at least `id` (never lowers it).
    pub(crate) fn raise_high_water_mark(&mut self, id: u64) -> Result<()> {
        if self.list.high_water_mark()? < id {
            fsutil::write_atomic(
                self.list.dir(),
                HIGH_WATER_MARK_FILE,
                id.to_string().as_bytes(),
            )?;
            self.dirty = true;
        }
        Ok(())
    }

    /// Queues an audit record, written at commit.
    pub(crate) fn record(&mut self, record: AuditRecord) {
        self.audit.push(record);
    }

    /// Makes the writes durable, then appends the audit records, then releases the locks.
    pub(crate) fn commit(self) -> Result<()> {
        if self.dirty {
            fsutil::sync_dir(self.list.dir())?;
        }
        for record in &self.audit {
            self.list.append_audit(record)?;
        }
        drop(self.guard);
        Ok(())
    }
}
