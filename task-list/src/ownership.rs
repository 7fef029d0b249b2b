//! Claims and unassignment.

use crate::api::{
    ClaimFailure, ClaimOptions, ClaimResult, TaskRef, UnassignReason, UnassignResult,
};
use crate::audit::{AuditOp, AuditRecord};
use crate::backend::StoreTxn;
use crate::error::Result;
use crate::graph::ids_of;
use crate::id::TaskId;
use crate::ready::{OpenChildren, reasons};
use crate::record::{Task, TaskStatus};
use crate::snapshot::Snapshot;
use crate::store::TaskList;
use crate::tree::open_children;

impl TaskList {
    /// Claims `id` for `claimant` (sets the owner; the status is left to `TaskUpdate`, unless
    /// [`ClaimOptions::start`] marks it `in_progress` in the same write). Every
    /// check is made after the locks are taken, so two claimants can never both win. A task
    /// with open blockers, or a parent with open children, is refused as
    /// [`ClaimFailure::Blocked`], with those tasks in `blocked_by_tasks`.
    pub fn claim(&self, id: TaskId, claimant: &str, options: ClaimOptions) -> Result<ClaimResult> {
        self.write(options.check_agent_busy, |txn| {
            let Some(mut locked) = txn.lock(id)? else {
                return Ok(refusal(ClaimFailure::TaskNotFound, None));
            };
            let task = &locked;
            if task.owner.as_deref().is_some_and(|owner| owner != claimant) {
                return Ok(refusal(ClaimFailure::AlreadyClaimed, Some(task)));
            }
            if task.status == TaskStatus::Completed {
                return Ok(refusal(ClaimFailure::AlreadyResolved, Some(task)));
            }
            let blocked_by_tasks = open_blockers(txn, task)?;
            if !blocked_by_tasks.is_empty() {
                return Ok(ClaimResult {
                    blocked_by_tasks,
                    ..refusal(ClaimFailure::Blocked, Some(&locked))
                });
            }
            // A parent is ready once its children are completed: they block it.
            let snapshot = txn.overlay(self.snapshot()?);
            let tasks: Vec<&Task> = snapshot.tasks.values().collect();
            if let Some(children) = open_children(&tasks).remove(&id) {
                return Ok(ClaimResult {
                    blocked_by_tasks: children,
                    ..refusal(ClaimFailure::Blocked, Some(&locked))
                });
            }
            if options.check_agent_busy {
                let busy_with_tasks = busy_with(&snapshot, claimant, Some(id));
                if !busy_with_tasks.is_empty() {
                    return Ok(ClaimResult {
                        busy_with_tasks,
                        ..refusal(ClaimFailure::AgentBusy, Some(&locked))
                    });
                }
            }
            let starts = options.start && locked.status == TaskStatus::Pending;
            if locked.owner.is_none() || starts {
                self.take(txn, &mut locked, claimant, options)?;
            }
            Ok(won(locked))
        })
    }

    /// Claims for `claimant` the best task that is ready now (pending, unowned, every blocker
    /// and every child completed), in [`Task::queue_key`] order: the highest priority (0
    /// first), then the lowest position ([`Task::position`]), then the lowest id. The
    /// choice and the claim are one write transaction, so any number of claimants on any number
    /// of hosts each get a different task. `None`: nothing is ready (not an error). With
    /// [`ClaimOptions::check_agent_busy`], a claimant that owns an unfinished task is refused
    /// with [`ClaimFailure::AgentBusy`] (no task is named).
    pub fn claim_next(&self, claimant: &str, options: ClaimOptions) -> Result<Option<ClaimResult>> {
        self.write(options.check_agent_busy, |txn| {
            let snapshot = txn.overlay(self.snapshot()?);
            if options.check_agent_busy {
                let busy_with_tasks = busy_with(&snapshot, claimant, None);
                if !busy_with_tasks.is_empty() {
                    return Ok(Some(ClaimResult {
                        busy_with_tasks,
                        ..refusal(ClaimFailure::AgentBusy, None)
                    }));
                }
            }
            let (ranked, children) = ready_by_rank(&snapshot);
            for id in ranked {
                // Checked again under the task's lock: a writer that takes no list lock (the
                // reference) may have changed it since the snapshot.
                let Some(mut locked) = txn.lock(id)? else {
                    continue;
                };
                let free = locked.status == TaskStatus::Pending && locked.owner.is_none();
                if free
                    && open_blockers(txn, &locked)?.is_empty()
                    && still_open(txn, children.get(&id).map_or(&[], Vec::as_slice))?.is_empty()
                {
                    self.take(txn, &mut locked, claimant, options)?;
                    return Ok(Some(won(locked)));
                }
            }
            Ok(None)
        })
    }

    /// Makes `claimant` the owner of `task` (locked), starts it if `options` say so (a pending
    /// task becomes `in_progress`), and records the claim with the fields it changed.
    fn take(
        &self,
        txn: &mut dyn StoreTxn,
        task: &mut Task,
        claimant: &str,
        options: ClaimOptions,
    ) -> Result<()> {
        let mut fields = Vec::new();
        if task.owner.as_deref() != Some(claimant) {
            task.owner = Some(claimant.to_string());
            fields.push("owner".to_owned());
        }
        if options.start && task.status == TaskStatus::Pending {
            task.status = TaskStatus::InProgress;
            fields.push("status".to_owned());
        }
        txn.save(task)?;
        txn.record(AuditRecord::now(
            &self.actor.name,
            AuditOp::Claim,
            Some(task.id),
            fields,
        ));
        Ok(())
    }

    /// Puts every non-completed task owned by `owner` back to `pending` with no owner, and
    /// returns the message the reference sends the team lead.
    pub fn unassign(&self, owner: &str, reason: UnassignReason) -> Result<UnassignResult> {
        let unassigned = self.write(false, |txn| {
            let mut unassigned = Vec::new();
            for task in txn.overlay(self.snapshot()?).tasks.values() {
                if task.owner.as_deref() != Some(owner) || task.status == TaskStatus::Completed {
                    continue;
                }
                let Some(mut locked) = txn.lock(task.id)? else {
                    continue;
                };
                if locked.owner.as_deref() != Some(owner) || locked.status == TaskStatus::Completed
                {
                    continue;
                }
                locked.owner = None;
                locked.status = TaskStatus::Pending;
                txn.save(&locked)?;
                txn.record(AuditRecord::now(
                    &self.actor.name,
                    AuditOp::Unassign,
                    Some(task.id),
                    vec!["owner".into(), "status".into()],
                ));
                unassigned.push(TaskRef {
                    id: task.id,
                    subject: locked.subject.clone(),
                });
            }
            Ok(unassigned)
        })?;
        let notification_message =
            (!unassigned.is_empty()).then(|| unassign_message(owner, reason, &unassigned));
        Ok(UnassignResult {
            unassigned_tasks: unassigned,
            notification_message,
        })
    }
}

/// A successful claim of `task`.
fn won(task: Task) -> ClaimResult {
    ClaimResult {
        success: true,
        reason: None,
        task: Some(task),
        busy_with_tasks: Vec::new(),
        blocked_by_tasks: Vec::new(),
    }
}

/// `task`'s blockers that exist and are not completed.
fn open_blockers(txn: &mut dyn StoreTxn, task: &Task) -> Result<Vec<TaskId>> {
    still_open(txn, &task.blocked_by)
}

/// Those of `tasks` that exist and are not completed.
fn still_open(txn: &mut dyn StoreTxn, tasks: &[TaskId]) -> Result<Vec<TaskId>> {
    let mut open = Vec::new();
    for &id in tasks {
        if txn
            .get(id)?
            .is_some_and(|t| t.status != TaskStatus::Completed)
        {
            open.push(id);
        }
    }
    Ok(open)
}

/// The unfinished tasks `claimant` owns, but `except`.
fn busy_with(snapshot: &Snapshot, claimant: &str, except: Option<TaskId>) -> Vec<TaskId> {
    snapshot
        .tasks
        .values()
        .filter(|t| {
            Some(t.id) != except
                && t.status != TaskStatus::Completed
                && t.owner.as_deref() == Some(claimant)
        })
        .map(|t| t.id)
        .collect()
}

/// The ready tasks of `snapshot`, best first ([`Task::queue_key`]), and the open children of
/// every parent.
fn ready_by_rank(snapshot: &Snapshot) -> (Vec<TaskId>, OpenChildren) {
    let tasks: Vec<&Task> = snapshot.tasks.values().collect();
    let ids = ids_of(&tasks);
    let children = open_children(&tasks);
    let mut ready: Vec<&Task> = tasks
        .iter()
        .copied()
        .filter(|task| reasons(task, &tasks, &ids, &children).is_empty())
        .collect();
    ready.sort_by_key(|task| task.queue_key());
    (ready.into_iter().map(|task| task.id).collect(), children)
}

fn refusal(reason: ClaimFailure, task: Option<&Task>) -> ClaimResult {
    ClaimResult {
        success: false,
        reason: Some(reason),
        task: task.cloned(),
        busy_with_tasks: Vec::new(),
        blocked_by_tasks: Vec::new(),
    }
}

/// `{name} was terminated|has shut down. N task(s) were unassigned: #id "subject", … Use
/// TaskList to check availability and TaskUpdate with owner to reassign them to idle teammates.`
fn unassign_message(owner: &str, reason: UnassignReason, tasks: &[TaskRef]) -> String {
    let what = match reason {
        UnassignReason::Terminated => "was terminated",
        UnassignReason::Shutdown => "has shut down",
    };
    let list: Vec<String> = tasks
        .iter()
        .map(|t| format!("#{} \"{}\"", t.id, t.subject))
        .collect();
    format!(
        "{owner} {what}. {} task(s) were unassigned: {}. Use TaskList to check availability and TaskUpdate with owner to reassign them to idle teammates.",
        tasks.len(),
        list.join(", ")
    )
}
