//! Create, read, list, delete and reset.

use crate::api::{
    CreateRequest, CreateResult, GetResult, ListEntry, ListFilter, ListResult, StatusChange,
    TaskDetails, TaskRef, UpdateResult,
};
use crate::audit::{AuditOp, AuditRecord};
use crate::backend::StoreTxn;
use crate::error::{Error, Result};
use crate::graph::ids_of;
use crate::hooks::{HookEvent, HookInput, run_hooks};
use crate::id::TaskId;
use crate::ready::{NotReadyReason, OpenChildren, reasons};
use crate::record::{Task, TaskStatus};
use crate::render::TASK_NOT_FOUND;
use crate::store::TaskList;
use crate::tree::{check_parent, children_of, open_children, requested_parent};

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
        self.write(true, |txn| {
            if let Some(Some(parent)) = requested_parent(request.metadata.as_ref())
                && let Err(message) = check_parent(txn, None, parent)?
            {
                return Err(Error::InvalidParent(message));
            }
            let mut task = Task::new(txn.next_id()?, &request.subject, &request.description);
            task.active_form.clone_from(&request.active_form);
            task.metadata.clone_from(&request.metadata);
            txn.save(&task)?;
            txn.record(AuditRecord::now(
                &self.actor.name,
                AuditOp::Create,
                Some(task.id),
                Vec::new(),
            ));
            Ok(task)
        })
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
        self.list_where(&ListFilter::default())
    }

    /// [`TaskList::list`], only the tasks `filter` keeps.
    pub fn list_where(&self, filter: &ListFilter) -> Result<ListResult> {
        let snapshot = self.snapshot()?;
        let all: Vec<&Task> = snapshot.tasks.values().collect();
        let ids = ids_of(&all);
        let children = open_children(&all);
        let completed = |id: &TaskId| {
            snapshot
                .tasks
                .get(id)
                .is_some_and(|t| t.status == TaskStatus::Completed)
        };
        let tasks = all
            .iter()
            .filter(|task| !task.is_internal() && filter.keeps(task, &all, &ids, &children))
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

    /// The children of task `id` (the tasks whose `metadata.parent` is `id`), by id.
    pub fn children(&self, id: TaskId) -> Result<Vec<TaskId>> {
        Ok(children_of(self.snapshot()?.tasks.values(), id))
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
        self.write(false, |txn| {
            let Some(locked) = txn.lock(id)? else {
                return Ok(None);
            };
            let status = locked.status;
            txn.raise_high_water_mark(id.get())?;
            txn.remove(id)?;
            for other in txn.overlay(self.snapshot()?).tasks.values() {
                if other.blocks.contains(&id) || other.blocked_by.contains(&id) {
                    strip(txn, other.id, id)?;
                }
            }
            txn.record(AuditRecord::now(
                &self.actor.name,
                op,
                Some(id),
                vec!["deleted".into()],
            ));
            Ok(Some(status))
        })
    }

    /// Removes every task; the high-water mark keeps their ids from being reused. Returns how
    /// many tasks were removed. (The audit log is kept.)
    pub fn reset(&self) -> Result<usize> {
        self.write(true, |txn| {
            let ids = txn.task_ids()?;
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
            Ok(ids.len())
        })
    }
}

impl ListFilter {
    /// Whether `task` of the list `tasks` (sorted by id; `ids` their ids; `children` their
    /// open children) passes.
    fn keeps(&self, task: &Task, tasks: &[&Task], ids: &[TaskId], children: &OpenChildren) -> bool {
        let labels = task.labels();
        let why_not = || reasons(task, tasks, ids, children);
        self.status.is_none_or(|s| task.status == s)
            && self
                .owner
                .as_ref()
                .is_none_or(|o| task.owner.as_ref() == Some(o))
            && self.labels.iter().all(|l| labels.contains(&l.as_str()))
            && self.priority.is_none_or(|p| task.priority() == p)
            && self.parent.is_none_or(|p| task.parent() == Some(p))
            && (!self.ready || why_not().is_empty())
            && (!self.blocked
                || why_not()
                    .iter()
                    .any(|r| matches!(r, NotReadyReason::BlockedBy { .. })))
    }
}

/// Removes `gone` from `id`'s edges, under `id`'s lock.
pub(crate) fn strip(txn: &mut dyn StoreTxn, id: TaskId, gone: TaskId) -> Result<()> {
    if let Some(mut locked) = txn.lock(id)? {
        locked.blocks.retain(|&b| b != gone);
        locked.blocked_by.retain(|&b| b != gone);
        txn.save(&locked)?;
    }
    Ok(())
}
