//! Create, read, list, delete and reset.

use std::sync::atomic::Ordering;

use crate::api::{
    CreateRequest, CreateResult, GetResult, ListEntry, ListResult, StatusChange, TaskDetails,
    TaskRef, UpdateResult,
};
use crate::audit::{AuditOp, AuditRecord};
use crate::error::{Error, Result};
use crate::fsutil;
use crate::hooks::{HookEvent, HookInput, run_hooks};
use crate::id::TaskId;
use crate::record::{Task, TaskStatus};
use crate::store::TaskList;
use crate::txn::Txn;

/// The reference's answer for an id with no task.
pub const TASK_NOT_FOUND: &str = "Task not found";

impl TaskList {
    /// Creates a task: id = max(highest file id, high-water mark) + 1, never reused. Then runs
    /// the `TaskCreated` hooks; if one blocks, the task is deleted again (its id stays used) and
    /// [`Error::CreateBlocked`] carries the feedback.
    pub fn create(&self, request: &CreateRequest) -> Result<CreateResult> {
        let task = self.write_new_task(request)?;
        let outcome = run_hooks(
            &self.config.hooks,
            HookEvent::TaskCreated,
            &HookInput::new(HookEvent::TaskCreated, &task, &self.actor),
        );
        if let Some(feedback) = outcome.blocking {
            self.remove_task(task.id, AuditOp::Rollback)?;
            return Err(Error::CreateBlocked { feedback });
        }
        Ok(CreateResult {
            task: TaskRef {
                id: task.id,
                subject: task.subject,
            },
            warnings: outcome.warnings,
        })
    }

    fn write_new_task(&self, request: &CreateRequest) -> Result<Task> {
        let mut txn = Txn::begin(self, true)?;
        let mut task = Task::new(self.next_id()?, &request.subject, &request.description);
        task.active_form.clone_from(&request.active_form);
        task.metadata.clone_from(&request.metadata);
        txn.save(&task)?;
        txn.record(AuditRecord::now(
            &self.actor.name,
            AuditOp::Create,
            Some(task.id),
            Vec::new(),
        ));
        txn.commit()?;
        Ok(task)
    }

    /// The next id, max(highest file id, high-water mark) + 1; call with the list lock held.
    ///
    /// The first call on a handle scans the directory. Later calls start from the highest id
    /// seen and probe upwards: every id above the high-water mark up to the highest file exists
    /// (creates are sequential and a delete raises the mark to the deleted id, here and in the
    /// reference), so the first missing file above max(hint, mark) is the answer.
    fn next_id(&self) -> Result<TaskId> {
        let mut highest = match self.id_hint.load(Ordering::Acquire) {
            0 => fsutil::task_ids(self.dir())?
                .last()
                .map_or(0, |id| id.get()),
            hint => hint,
        }
        .max(self.high_water_mark()?);
        while fsutil::exists(&self.dir().join(format!("{}.json", highest + 1)))? {
            highest += 1;
        }
        let next = TaskId::new(highest + 1)?;
        self.id_hint.store(next.get(), Ordering::Release);
        Ok(next)
    }

    /// `TaskGet`: the task's details, or `{task: null}`.
    pub fn get_details(&self, id: TaskId) -> Result<GetResult> {
        Ok(GetResult {
            task: self.get(id)?.as_ref().map(TaskDetails::from),
        })
    }

    /// `TaskList`: every visible task (not `metadata._internal`), blockers filtered to the
    /// unresolved ones. Malformed files are skipped here; see [`TaskList::snapshot`].
    pub fn list(&self) -> Result<ListResult> {
        let snapshot = self.snapshot()?;
        let completed = |id: &TaskId| {
            snapshot
                .tasks
                .get(id)
                .is_some_and(|t| t.status == TaskStatus::Completed)
        };
        let tasks = snapshot
            .tasks
            .values()
            .filter(|task| !task.is_internal())
            .map(|task| ListEntry {
                id: task.id,
                subject: task.subject.clone(),
                status: task.status,
                owner: task.owner.clone(),
                blocked_by: task
                    .blocked_by
                    .iter()
                    .copied()
                    .filter(|b| !completed(b))
                    .collect(),
            })
            .collect();
        Ok(ListResult { tasks })
    }

    /// Deletes a task (`TaskUpdate {status: "deleted"}`): raises the high-water mark, removes
    /// the file and strips the id from every other task's `blocks`/`blockedBy`.
    pub fn delete(&self, id: TaskId) -> Result<UpdateResult> {
        let task_id = id.to_string();
        Ok(match self.remove_task(id, AuditOp::Delete)? {
            None => UpdateResult::failed(&task_id, TASK_NOT_FOUND),
            Some(from) => UpdateResult {
                status_change: Some(StatusChange {
                    from: from.to_string(),
                    to: "deleted".into(),
                }),
                ..UpdateResult::succeeded(&task_id, vec!["deleted".into()])
            },
        })
    }

    /// Removes a task and every reference to it; its former status, or `None` if absent.
    pub(crate) fn remove_task(&self, id: TaskId, op: AuditOp) -> Result<Option<TaskStatus>> {
        let mut txn = Txn::begin(self, false)?;
        let Some(locked) = txn.lock(id)? else {
            return Ok(None);
        };
        let status = locked.status;
        txn.raise_high_water_mark(id.get())?;
        txn.remove(id)?;
        for other in self.snapshot()?.tasks.values() {
            if other.blocks.contains(&id) || other.blocked_by.contains(&id) {
                strip(&mut txn, other.id, id)?;
            }
        }
        txn.record(AuditRecord::now(
            &self.actor.name,
            op,
            Some(id),
            vec!["deleted".into()],
        ));
        txn.commit()?;
        Ok(Some(status))
    }

    /// Removes every task; the high-water mark keeps their ids from being reused. Returns how
    /// many task files were removed. (The audit log is kept.)
    pub fn reset(&self) -> Result<usize> {
        let mut txn = Txn::begin(self, true)?;
        let ids = fsutil::task_ids(self.dir())?;
        if let Some(highest) = ids.last() {
            txn.raise_high_water_mark(highest.get())?;
        }
        for &id in &ids {
            txn.remove(id)?;
        }
        txn.record(AuditRecord::now(
            &self.actor.name,
            AuditOp::Reset,
            None,
            Vec::new(),
        ));
        txn.commit()?;
        Ok(ids.len())
    }
}

/// Removes `gone` from `id`'s edges, under `id`'s file lock.
pub(crate) fn strip(txn: &mut Txn<'_>, id: TaskId, gone: TaskId) -> Result<()> {
    if let Some(mut locked) = txn.lock(id)? {
        locked.blocks.retain(|&b| b != gone);
        locked.blocked_by.retain(|&b| b != gone);
        txn.save(&locked)?;
    }
    Ok(())
}
