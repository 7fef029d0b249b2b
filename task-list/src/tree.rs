//! Parents and positions: a task's children (`metadata.parent`) and its place in the queue
//! (`metadata.position`), both kept in metadata so the reference harness reads and keeps them.

use std::borrow::Borrow;
use std::collections::HashMap;

use crate::api::{GetResult, Placement, TaskDetails};
use crate::backend::StoreTxn;
use crate::error::Result;
use crate::id::TaskId;
use crate::record::{Metadata, PARENT_KEY, POSITION_KEY, POSITION_STEP, Task, TaskStatus};
use crate::render::hash_ids;
use crate::store::TaskList;

/// A task with its place in the tree, read from one snapshot: what `tasks list get` and the
/// MCP `TaskGet` answer ([`TaskList::get_in_tree`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TreeGet {
    /// The task (absent: not found).
    pub task: Option<Task>,
    /// Its children (tasks whose `metadata.parent` it is), by id.
    pub children: Vec<TaskId>,
}

impl TreeGet {
    /// The reference's `TaskGet` answer for the task.
    pub fn details(&self) -> GetResult {
        GetResult {
            task: self.task.as_ref().map(TaskDetails::from),
        }
    }

    /// The lines that follow [`GetResult::model_text`], in its style: `\nParent: #1` and
    /// `\nChildren: #3, #4`, each only when the task has one (empty when it has neither).
    pub fn tree_text(&self) -> String {
        let mut text = String::new();
        if let Some(parent) = self.task.as_ref().and_then(Task::parent) {
            text.push_str(&format!("\nParent: #{parent}"));
        }
        if !self.children.is_empty() {
            text.push_str(&format!("\nChildren: {}", hash_ids(&self.children)));
        }
        text
    }

    /// Adds `parent` and `children` to the `task` object of a [`GetResult`]'s JSON, each only
    /// when the task has one.
    pub fn add_tree(&self, value: &mut serde_json::Value) {
        if let Some(parent) = self.task.as_ref().and_then(Task::parent) {
            value["task"]["parent"] = serde_json::json!(parent);
        }
        if !self.children.is_empty() {
            value["task"]["children"] = serde_json::json!(self.children);
        }
    }
}

impl TaskList {
    /// Task `id` and its children. The task is read as [`TaskList::get`] reads it, so an
    /// entry that cannot be read is its error (not a task that is not there); its children
    /// come from a snapshot of the list taken next.
    pub fn get_in_tree(&self, id: TaskId) -> Result<TreeGet> {
        let Some(task) = self.get(id)? else {
            return Ok(TreeGet {
                task: None,
                children: Vec::new(),
            });
        };
        let snapshot = self.snapshot()?;
        Ok(TreeGet {
            task: Some(task),
            children: children_of(snapshot.tasks.values(), id),
        })
    }
}

/// For every task with unfinished children, their ids (ascending when `tasks` is sorted by id).
pub(crate) fn open_children<T: Borrow<Task>>(tasks: &[T]) -> HashMap<TaskId, Vec<TaskId>> {
    let mut open: HashMap<TaskId, Vec<TaskId>> = HashMap::new();
    for task in tasks {
        let task = task.borrow();
        if let Some(parent) = task
            .parent()
            .filter(|_| task.status != TaskStatus::Completed)
        {
            open.entry(parent).or_default().push(task.id);
        }
    }
    open
}

/// Every child of `id` in `tasks`, by id.
pub(crate) fn children_of<'t>(
    tasks: impl IntoIterator<Item = &'t Task>,
    id: TaskId,
) -> Vec<TaskId> {
    tasks
        .into_iter()
        .filter(|t| t.parent() == Some(id))
        .map(|t| t.id)
        .collect()
}

/// Refuses `parent` for task `id` (`None`: a task not created yet) when it does not exist, is
/// the task itself, or is one of its descendants (the parent chain would loop).
pub(crate) fn check_parent(
    txn: &mut dyn StoreTxn,
    id: Option<TaskId>,
    parent: TaskId,
) -> Result<std::result::Result<(), String>> {
    let mut at = parent;
    // A chain longer than the list loops through tasks written by someone else: stop there.
    for _ in 0..=txn.task_ids()?.len() {
        if let Some(id) = id.filter(|&id| id == at) {
            return Ok(Err(format!(
                "Cannot set parent: #{parent} is #{id} or one of its descendants"
            )));
        }
        let Some(task) = txn.get(at)? else {
            if at == parent {
                return Ok(Err(format!(
                    "Cannot set parent: task #{parent} does not exist"
                )));
            }
            return Ok(Ok(()));
        };
        match task.parent() {
            Some(up) => at = up,
            None => return Ok(Ok(())),
        }
    }
    Ok(Ok(()))
}

/// The positions to write so that `moved` stands next to `placement`'s anchor: one entry (the
/// moved task) when there is room between the neighbours, else every task renumbered
/// `POSITION_STEP` apart in the new order. `None`: the anchor is not in `tasks`.
pub(crate) fn placed(
    tasks: &[&Task],
    moved: TaskId,
    placement: Placement,
) -> Option<Vec<(TaskId, i64)>> {
    let mut order: Vec<(i64, TaskId)> = tasks
        .iter()
        .filter(|t| t.id != moved)
        .map(|t| (t.position(), t.id))
        .collect();
    order.sort_unstable();
    let at = order.iter().position(|&(_, id)| id == placement.anchor())?;
    let slot = match placement {
        Placement::Before(_) => at,
        Placement::After(_) => at + 1,
    };
    let below = slot.checked_sub(1).map_or(i64::MIN / 2, |i| order[i].0);
    let above = order.get(slot).map_or(i64::MAX / 2, |&(p, _)| p);
    let middle = below + (above - below) / 2;
    if middle > below && middle < above {
        let middle = match (slot == 0, slot == order.len()) {
            (true, _) => above - POSITION_STEP,
            (_, true) => below + POSITION_STEP,
            _ => middle,
        };
        return Some(vec![(moved, middle)]);
    }
    order.insert(slot, (0, moved));
    Some(
        order
            .into_iter()
            .zip(1_i64..)
            .map(|((_, id), rank)| (id, rank * POSITION_STEP))
            .collect(),
    )
}

/// Writes `position` into `task`'s metadata; whether it changed.
pub(crate) fn set_position(task: &mut Task, position: i64) -> bool {
    let metadata = task.metadata.get_or_insert_with(Default::default);
    let value = serde_json::Value::from(position);
    metadata.insert(POSITION_KEY.into(), value.clone()) != Some(value)
}

/// The parent a metadata patch sets: `None` when it leaves `metadata.parent` alone,
/// `Some(None)` when it clears it or sets something that is not an id (then [`Task::parent`]
/// reads none), `Some(Some(parent))` otherwise.
pub(crate) fn requested_parent(metadata: Option<&Metadata>) -> Option<Option<TaskId>> {
    let value = metadata?.get(PARENT_KEY)?;
    let mut probe = Task::new(TaskId::new(1).ok()?, "", "");
    probe.metadata = Some(Metadata::from_iter([(
        PARENT_KEY.to_owned(),
        value.clone(),
    )]));
    Some(probe.parent())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn task(id: u64, position: Option<i64>) -> Task {
        let mut t = Task::new(TaskId::new(id).unwrap(), format!("t{id}"), "");
        if let Some(p) = position {
            set_position(&mut t, p);
        }
        t
    }

    fn ids(n: u64) -> TaskId {
        TaskId::new(n).unwrap()
    }

    #[test]
    fn a_move_between_neighbours_writes_one_position() {
        let tasks = [task(1, None), task(2, None), task(3, None)];
        let refs: Vec<&Task> = tasks.iter().collect();
        assert_eq!(
            placed(&refs, ids(3), Placement::Before(ids(2))),
            Some(vec![(ids(3), 1536)])
        );
        assert_eq!(
            placed(&refs, ids(3), Placement::Before(ids(1))),
            Some(vec![(ids(3), 0)])
        );
        assert_eq!(
            placed(&refs, ids(1), Placement::After(ids(3))),
            Some(vec![(ids(1), 4096)])
        );
        assert_eq!(placed(&refs, ids(1), Placement::After(ids(9))), None);
    }

    #[test]
    fn no_room_renumbers_every_task_in_the_new_order() {
        let tasks = [task(1, Some(10)), task(2, Some(11)), task(3, None)];
        let refs: Vec<&Task> = tasks.iter().collect();
        assert_eq!(
            placed(&refs, ids(3), Placement::After(ids(1))),
            Some(vec![(ids(1), 1024), (ids(3), 2048), (ids(2), 3072)])
        );
    }
}
