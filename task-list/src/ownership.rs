//! Claims and unassignment.

use crate::api::{
    ClaimFailure, ClaimOptions, ClaimResult, TaskRef, UnassignReason, UnassignResult,
};
use crate::audit::{AuditOp, AuditRecord};
use crate::error::Result;
use crate::id::TaskId;
use crate::record::{Task, TaskStatus};
use crate::store::TaskList;

impl TaskList {
    /// Claims `id` for `claimant` (sets the owner; the status is left to `TaskUpdate`). Every
    /// check is made after the locks are taken, so two claimants can never both win.
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
            let mut blocked_by_tasks = Vec::new();
            for blocker in task.blocked_by.clone() {
                if txn
                    .get(blocker)?
                    .is_some_and(|b| b.status != TaskStatus::Completed)
                {
                    blocked_by_tasks.push(blocker);
                }
            }
            if !blocked_by_tasks.is_empty() {
                return Ok(ClaimResult {
                    blocked_by_tasks,
                    ..refusal(ClaimFailure::Blocked, Some(&locked))
                });
            }
            if options.check_agent_busy {
                let busy_with_tasks: Vec<TaskId> = self
                    .snapshot()?
                    .tasks
                    .values()
                    .filter(|t| {
                        t.id != id
                            && t.status != TaskStatus::Completed
                            && t.owner.as_deref() == Some(claimant)
                    })
                    .map(|t| t.id)
                    .collect();
                if !busy_with_tasks.is_empty() {
                    return Ok(ClaimResult {
                        busy_with_tasks,
                        ..refusal(ClaimFailure::AgentBusy, Some(&locked))
                    });
                }
            }
            if locked.owner.is_none() {
                locked.owner = Some(claimant.to_string());
                txn.save(&locked)?;
                txn.record(AuditRecord::now(
                    &self.actor.name,
                    AuditOp::Claim,
                    Some(id),
                    vec!["owner".into()],
                ));
            }
            Ok(ClaimResult {
                success: true,
                reason: None,
                task: Some(locked),
                busy_with_tasks: Vec::new(),
                blocked_by_tasks: Vec::new(),
            })
        })
    }

    /// Puts every non-completed task owned by `owner` back to `pending` with no owner, and
    /// returns the message the reference sends the team lead.
    pub fn unassign(&self, owner: &str, reason: UnassignReason) -> Result<UnassignResult> {
        let unassigned = self.write(false, |txn| {
            let mut unassigned = Vec::new();
            for task in self.snapshot()?.tasks.values() {
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
