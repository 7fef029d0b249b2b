//! `ready`: which tasks can be picked up now, ranked, and why every other task cannot.

use std::borrow::Borrow;

use serde::{Deserialize, Serialize};

use crate::entry::FileProblem;
use crate::error::Result;
use crate::graph::{ids_of, position, successors};
use crate::id::TaskId;
use crate::record::{Task, TaskStatus};
use crate::snapshot::Snapshot;
use crate::store::TaskList;
use crate::tree::open_children;

/// For every parent with unfinished children, their ids ([`open_children`]).
pub(crate) type OpenChildren = std::collections::HashMap<TaskId, Vec<TaskId>>;

/// A task that can be started now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyTask {
    /// Id.
    pub id: TaskId,
    /// Subject.
    pub subject: String,
    /// How many unfinished tasks depend on it, directly or transitively.
    pub unblocks: usize,
}

/// Why a task is not ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum NotReadyReason {
    /// It is done.
    Completed,
    /// Someone is working on it.
    InProgress,
    /// It has an owner.
    Owned {
        /// The owner.
        owner: String,
    },
    /// Blockers that are not completed yet.
    BlockedBy {
        /// Their ids.
        tasks: Vec<TaskId>,
    },
    /// A blocker that does not exist (deleted, or never existed).
    MissingBlocker {
        /// Its id.
        task: TaskId,
    },
    /// A parent whose children (`metadata.parent`) are not all completed.
    OpenChildren {
        /// Their ids.
        tasks: Vec<TaskId>,
    },
}

/// A task that is not ready, with every reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NotReady {
    /// Id.
    pub id: TaskId,
    /// Subject.
    pub subject: String,
    /// Why not (never empty).
    pub reasons: Vec<NotReadyReason>,
}

/// The answer of [`TaskList::ready`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadyReport {
    /// Pending, unowned tasks whose blockers and children are all completed, in the order
    /// `claim --next` takes them ([`Task::queue_key`]: priority, then position, then id).
    pub ready: Vec<ReadyTask>,
    /// Every other task, by id.
    pub not_ready: Vec<NotReady>,
    /// Files that could not be read (their tasks are in neither list).
    #[serde(skip)]
    pub problems: Vec<FileProblem>,
}

impl TaskList {
    /// Computes the [`ReadyReport`] of the list.
    pub fn ready(&self) -> Result<ReadyReport> {
        let snapshot = self.shared_snapshot()?;
        Ok(report(&snapshot.tasks, snapshot.problems))
    }
}

/// Computes the report of a snapshot.
pub fn ready_report(snapshot: Snapshot) -> ReadyReport {
    let tasks: Vec<&Task> = snapshot.tasks.values().collect();
    report(&tasks, snapshot.problems)
}

/// The report of `tasks` (sorted by id, no duplicates).
fn report<T: Borrow<Task>>(tasks: &[T], problems: Vec<FileProblem>) -> ReadyReport {
    let ids = ids_of(tasks);
    let out = successors(tasks, &ids);
    let children = open_children(tasks);
    let mut ready = Vec::new();
    let mut not_ready = Vec::new();
    let mut seen = vec![0_u32; tasks.len()];
    for ((stamp, task), start) in (1_u32..).zip(tasks).zip(0..) {
        let task = task.borrow();
        let reasons = reasons(task, tasks, &ids, &children);
        if reasons.is_empty() {
            let unblocks = unfinished_descendants(tasks, &out, start, &mut seen, stamp);
            ready.push((
                task.queue_key(),
                ReadyTask {
                    id: task.id,
                    subject: task.subject.clone(),
                    unblocks,
                },
            ));
        } else {
            not_ready.push(NotReady {
                id: task.id,
                subject: task.subject.clone(),
                reasons,
            });
        }
    }
    ready.sort_unstable_by_key(|(key, _)| *key);
    ReadyReport {
        ready: ready.into_iter().map(|(_, task)| task).collect(),
        not_ready,
        problems,
    }
}

/// Why `task` is not ready (empty: it is); `tasks` is the list (sorted by id), `ids` their ids,
/// `children` its [`open_children`].
pub(crate) fn reasons<T: Borrow<Task>>(
    task: &Task,
    tasks: &[T],
    ids: &[TaskId],
    children: &OpenChildren,
) -> Vec<NotReadyReason> {
    let mut reasons = Vec::new();
    match task.status {
        TaskStatus::Completed => return vec![NotReadyReason::Completed],
        TaskStatus::InProgress => reasons.push(NotReadyReason::InProgress),
        TaskStatus::Pending => {}
    }
    if let Some(owner) = &task.owner {
        reasons.push(NotReadyReason::Owned {
            owner: owner.clone(),
        });
    }
    let mut open = Vec::new();
    for &blocker in &task.blocked_by {
        match position(ids, blocker).map(|at| tasks[at].borrow().status) {
            None => reasons.push(NotReadyReason::MissingBlocker { task: blocker }),
            Some(TaskStatus::Completed) => {}
            Some(_) => open.push(blocker),
        }
    }
    if !open.is_empty() {
        reasons.push(NotReadyReason::BlockedBy { tasks: open });
    }
    if let Some(open) = children.get(&task.id) {
        reasons.push(NotReadyReason::OpenChildren {
            tasks: open.clone(),
        });
    }
    reasons
}

/// Unfinished tasks reachable from `tasks[start]` along `out`; `seen` is reused across calls,
/// marked with `stamp`.
fn unfinished_descendants<T: Borrow<Task>>(
    tasks: &[T],
    out: &[Vec<usize>],
    start: usize,
    seen: &mut [u32],
    stamp: u32,
) -> usize {
    seen[start] = stamp;
    let mut stack = vec![start];
    let mut count = 0;
    while let Some(node) = stack.pop() {
        for &next in &out[node] {
            if seen[next] != stamp {
                seen[next] = stamp;
                if tasks[next].borrow().status != TaskStatus::Completed {
                    count += 1;
                }
                stack.push(next);
            }
        }
    }
    count
}
