//! `ready`: which tasks can be picked up now, ranked, and why every other task cannot.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::graph::Graph;
use crate::id::TaskId;
use crate::record::{Task, TaskStatus};
use crate::store::{FileProblem, Snapshot, TaskList};

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
    /// Pending, unowned tasks whose blockers are all completed; most unblocking first, then by id.
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
        Ok(ready_report(self.snapshot()?))
    }
}

/// Computes the report of a snapshot.
pub fn ready_report(snapshot: Snapshot) -> ReadyReport {
    let graph = Graph::new(&snapshot);
    let mut ready = Vec::new();
    let mut not_ready = Vec::new();
    let mut seen = vec![0_u32; graph.tasks().len()];
    for (stamp, task) in (1_u32..).zip(graph.tasks()) {
        let reasons = reasons(task, &snapshot);
        if reasons.is_empty() {
            ready.push(ReadyTask {
                id: task.id,
                subject: task.subject.clone(),
                unblocks: unfinished_descendants(&graph, task.id, &mut seen, stamp),
            });
        } else {
            not_ready.push(NotReady {
                id: task.id,
                subject: task.subject.clone(),
                reasons,
            });
        }
    }
    ready.sort_by(|a, b| b.unblocks.cmp(&a.unblocks).then(a.id.cmp(&b.id)));
    ReadyReport {
        ready,
        not_ready,
        problems: snapshot.problems,
    }
}

fn reasons(task: &Task, snapshot: &Snapshot) -> Vec<NotReadyReason> {
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
    for blocker in &task.blocked_by {
        match snapshot.tasks.get(blocker) {
            None => reasons.push(NotReadyReason::MissingBlocker { task: *blocker }),
            Some(b) if b.status != TaskStatus::Completed => open.push(*blocker),
            Some(_) => {}
        }
    }
    if !open.is_empty() {
        reasons.push(NotReadyReason::BlockedBy { tasks: open });
    }
    reasons
}

/// Unfinished tasks reachable from `id`; `seen` is reused across calls, marked with `stamp`.
fn unfinished_descendants(graph: &Graph, id: TaskId, seen: &mut [u32], stamp: u32) -> usize {
    let Some(start) = graph.index_of(id) else {
        return 0;
    };
    seen[start] = stamp;
    let mut stack = vec![start];
    let mut count = 0;
    while let Some(node) = stack.pop() {
        for &next in graph.successors(node) {
            if seen[next] != stamp {
                seen[next] = stamp;
                if graph.tasks()[next].status != TaskStatus::Completed {
                    count += 1;
                }
                stack.push(next);
            }
        }
    }
    count
}
