//! `TaskUpdate`: fields, status (with the `TaskCompleted` hooks), ownership and edges.

use std::collections::HashMap;

use crate::api::Placement;
use crate::api::{StatusChange, UpdateRequest, UpdateResult, UpdateStatus};
use crate::audit::{AuditOp, AuditRecord};
use crate::backend::StoreTxn;
use crate::error::Result;
use crate::hooks::{HookEvent, HookInput, run_hooks};
use crate::id::TaskId;
use crate::record::{Task, TaskStatus};
use crate::render::TASK_NOT_FOUND;
use crate::store::TaskList;
use crate::tree::{check_parent, placed, requested_parent, set_position};

/// A dependency edge: `blocker` blocks `blocked`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Edge {
    blocker: TaskId,
    blocked: TaskId,
}

impl TaskList {
    /// Applies a `TaskUpdate`. Every refusal (unknown task, bad id, self-edge, edge to a missing
    /// task, edge closing a cycle, blocking `TaskCompleted` hook) is a result with
    /// `success: false` and an `error`, and nothing is written. `Err` is for I/O and locking.
    pub fn update(&self, request: &UpdateRequest) -> Result<UpdateResult> {
        let raw_id = request.task_id.as_str();
        let Ok(id) = TaskId::parse(raw_id) else {
            return Ok(UpdateResult::failed(raw_id, TASK_NOT_FOUND));
        };
        if request.status == Some(UpdateStatus::Deleted) {
            return self.delete(id);
        }
        let added = [
            (&request.add_blocks, true),
            (&request.add_blocked_by, false),
        ];
        let removed = [
            (&request.remove_blocks, true),
            (&request.remove_blocked_by, false),
        ];
        let edges = match (
            requested_edges(id, added, "add"),
            requested_edges(id, removed, "remove"),
        ) {
            (Ok(added), Ok(removed)) => EdgeChanges { added, removed },
            (Err(message), _) | (_, Err(message)) => {
                return Ok(UpdateResult::failed(raw_id, message));
            }
        };
        let Some(before) = self.get(id)? else {
            return Ok(UpdateResult::failed(raw_id, TASK_NOT_FOUND));
        };
        let mut warnings = Vec::new();
        if request.status == Some(UpdateStatus::Completed) && before.status != TaskStatus::Completed
        {
            let input = HookInput::new(HookEvent::TaskCompleted, &before, &self.actor);
            let outcome = run_hooks(&self.config.hooks, HookEvent::TaskCompleted, &input);
            warnings = outcome.warnings;
            if let Some(feedback) = outcome.blocking {
                let message = format!("TaskCompleted hook feedback:\n{feedback}");
                return Ok(UpdateResult {
                    warnings,
                    ..UpdateResult::failed(raw_id, message)
                });
            }
        }
        let mut result = self.apply(id, request, &edges)?;
        result.warnings = warnings;
        if result.success && result.updated_fields.iter().any(|f| f == "status") {
            result.verification_nudge_needed = self.verification_nudge_needed(request)?;
        }
        Ok(result)
    }

    fn apply(
        &self,
        id: TaskId,
        request: &UpdateRequest,
        edges: &EdgeChanges,
    ) -> Result<UpdateResult> {
        let raw_id = request.task_id.as_str();
        let applied = self.write(request.place.is_some(), |txn| {
            let Some(mut locked) = txn.lock(id)? else {
                return Ok(Err(TASK_NOT_FOUND.to_string()));
            };
            if let Err(message) = check_edges(txn, &edges.added)? {
                return Ok(Err(message));
            }
            if let Some(Some(parent)) = requested_parent(request.metadata.as_ref())
                && let Err(message) = check_parent(txn, Some(id), parent)?
            {
                return Ok(Err(message));
            }
            let from = locked.status;
            let mut fields = apply_fields(&mut locked, request, self);
            if let Some(placement) = request.place {
                match self.place(txn, &mut locked, placement)? {
                    Err(message) => return Ok(Err(message)),
                    Ok(true) if !fields.iter().any(|f| f == "metadata") => {
                        fields.push("metadata".into());
                    }
                    Ok(_) => {}
                }
            }
            let mut others = Vec::new();
            for (field, this_blocks) in [("blocks", true), ("blockedBy", false)] {
                let added = edge_targets(id, &edges.added, this_blocks);
                let removed = edge_targets(id, &edges.removed, this_blocks);
                let side = match this_blocks {
                    true => &mut locked.blocks,
                    false => &mut locked.blocked_by,
                };
                if edit_side(side, &added, &removed) {
                    fields.push(field.to_string());
                }
                others.extend(added.into_iter().map(|other| (other, this_blocks, true)));
                others.extend(removed.into_iter().map(|other| (other, this_blocks, false)));
            }
            if !fields.is_empty() {
                txn.save(&locked)?;
            }
            for (other, other_is_blocked, present) in others {
                set_reverse_edge(txn, other, id, other_is_blocked, present)?;
            }
            if !fields.is_empty() {
                txn.record(AuditRecord::now(
                    &self.actor.name,
                    AuditOp::Update,
                    Some(id),
                    fields.clone(),
                ));
            }
            Ok(Ok((locked, from, fields)))
        })?;
        let (task, from, fields) = match applied {
            Ok(applied) => applied,
            Err(message) => return Ok(UpdateResult::failed(raw_id, message)),
        };
        if let Some(owner) = task
            .owner
            .as_ref()
            .filter(|_| self.config.teammates && fields.iter().any(|f| f == "owner"))
        {
            self.notify_assignment(&task, owner)?;
        }
        let status_change = (task.status != from).then(|| StatusChange {
            from: from.to_string(),
            to: task.status.to_string(),
        });
        Ok(UpdateResult {
            status_change,
            ..UpdateResult::succeeded(raw_id, fields)
        })
    }

    /// Moves `task` (locked) next to `placement`'s anchor: its new position is set on it (saved
    /// by the caller), and any other task renumbered is saved here. `Ok(true)`: its position
    /// changed.
    fn place(
        &self,
        txn: &mut dyn StoreTxn,
        task: &mut Task,
        placement: Placement,
    ) -> Result<std::result::Result<bool, String>> {
        let anchor = placement.anchor();
        if anchor == task.id {
            return Ok(Err(format!("Cannot move task #{anchor} next to itself")));
        }
        let snapshot = txn.overlay(self.snapshot()?);
        let tasks: Vec<&Task> = snapshot.tasks.values().collect();
        let Some(positions) = placed(&tasks, task.id, placement) else {
            return Ok(Err(format!(
                "Cannot move: task #{anchor} does not exist (it may have been deleted)"
            )));
        };
        let mut changed = false;
        for (other, position) in positions {
            if other == task.id {
                changed = set_position(task, position);
            } else if let Some(mut locked) = txn.lock(other)?
                && set_position(&mut locked, position)
            {
                txn.save(&locked)?;
            }
        }
        Ok(Ok(changed))
    }

    /// The last open task of a list of 3+ was just completed and no subject mentions "verif".
    fn verification_nudge_needed(&self, request: &UpdateRequest) -> Result<bool> {
        if !self.config.verification_nudge || request.status != Some(UpdateStatus::Completed) {
            return Ok(false);
        }
        let tasks = self.snapshot()?.tasks;
        Ok(tasks.len() >= 3
            && tasks.values().all(|t| t.status == TaskStatus::Completed)
            && !tasks
                .values()
                .any(|t| t.subject.to_lowercase().contains("verif")))
    }
}

/// Applies the scalar fields in the reference's order and returns their names.
fn apply_fields(task: &mut Task, request: &UpdateRequest, list: &TaskList) -> Vec<String> {
    let mut fields = Vec::new();
    let mut set = |name: &str, changed: bool| {
        if changed {
            fields.push(name.to_string());
        }
    };
    set(
        "subject",
        replace(&mut task.subject, request.subject.as_ref()),
    );
    set(
        "description",
        replace(&mut task.description, request.description.as_ref()),
    );
    if let Some(form) = &request.active_form {
        set("activeForm", task.active_form.as_ref() != Some(form));
        task.active_form = Some(form.clone());
    }
    let auto_owner = (request.status == Some(UpdateStatus::InProgress)
        && request.owner.is_none()
        && task.owner.is_none()
        && list.config.teammates)
        .then(|| list.actor.name.clone());
    if let Some(owner) = request.owner.clone().or(auto_owner) {
        let owner = Some(owner).filter(|o| !o.is_empty());
        set("owner", task.owner != owner);
        task.owner = owner;
    }
    if let Some(patch) = &request.metadata {
        let merged = task.metadata.get_or_insert_with(Default::default);
        for (key, value) in patch {
            if value.is_null() {
                merged.remove(key);
            } else {
                merged.insert(key.clone(), value.clone());
            }
        }
        set("metadata", true);
    }
    if let Some(status) = request.status.and_then(UpdateStatus::stored) {
        set("status", task.status != status);
        task.status = status;
    }
    fields
}

fn replace(slot: &mut String, value: Option<&String>) -> bool {
    match value {
        Some(value) if value != slot => {
            value.clone_into(slot);
            true
        }
        _ => false,
    }
}

/// The edges an update adds and removes.
#[derive(Debug, Default)]
struct EdgeChanges {
    added: Vec<Edge>,
    removed: Vec<Edge>,
}

/// Parses the edges of `lists` (each: ids, and whether this task blocks them); refuses bad
/// ids and self-edges. `verb` (`add`, `remove`) words the refusals.
fn requested_edges(
    id: TaskId,
    lists: [(&Option<Vec<String>>, bool); 2],
    verb: &str,
) -> Result<Vec<Edge>, String> {
    let mut edges = Vec::new();
    for (list, this_blocks) in lists {
        for raw in list.iter().flatten() {
            let other = TaskId::parse(raw)
                .map_err(|_| format!("Cannot {verb} dependency: invalid task id {raw:?}"))?;
            if other == id {
                return Err(format!(
                    "Cannot {verb} dependency: task #{id} cannot block itself"
                ));
            }
            let (blocker, blocked) = if this_blocks {
                (id, other)
            } else {
                (other, id)
            };
            edges.push(Edge { blocker, blocked });
        }
    }
    Ok(edges)
}

/// Adds `added` (each once) to one side of a task's edges and takes `removed` out of it;
/// whether the side changed.
fn edit_side(side: &mut Vec<TaskId>, added: &[TaskId], removed: &[TaskId]) -> bool {
    let before = side.clone();
    for &id in added {
        if !side.contains(&id) {
            side.push(id);
        }
    }
    side.retain(|id| !removed.contains(id));
    *side != before
}

/// The other ends of this task's `edges` on one side (`blocks` when `this_blocks`).
fn edge_targets(id: TaskId, edges: &[Edge], this_blocks: bool) -> Vec<TaskId> {
    edges
        .iter()
        .filter_map(|e| match this_blocks {
            true if e.blocker == id => Some(e.blocked),
            false if e.blocked == id => Some(e.blocker),
            _ => None,
        })
        .collect()
}

/// Refuses edges to missing tasks and edges that would close a cycle (checked one by one,
/// each against the graph plus the edges accepted before it).
fn check_edges(txn: &mut dyn StoreTxn, edges: &[Edge]) -> Result<Result<(), String>> {
    let mut accepted: Vec<Edge> = Vec::new();
    for &edge in edges {
        for end in [edge.blocker, edge.blocked] {
            if txn.get(end)?.is_none() {
                return Ok(Err(format!(
                    "Cannot add dependency: task #{end} does not exist (it may have been deleted)"
                )));
            }
        }
        if let Some(path) = blocks_path(txn, edge.blocked, edge.blocker, &accepted)? {
            let cycle: Vec<String> = std::iter::once(edge.blocker)
                .chain(path)
                .map(|id| id.to_string())
                .collect();
            return Ok(Err(format!(
                "Cannot add dependency: #{} blocking #{} would create a cycle: {}",
                edge.blocker,
                edge.blocked,
                cycle.join(" → ")
            )));
        }
        accepted.push(edge);
    }
    Ok(Ok(()))
}

/// A path `from → … → to` along `blocks` edges (plus `extra`), if there is one.
fn blocks_path(
    txn: &mut dyn StoreTxn,
    from: TaskId,
    to: TaskId,
    extra: &[Edge],
) -> Result<Option<Vec<TaskId>>> {
    let mut parent: HashMap<TaskId, TaskId> = HashMap::from([(from, from)]);
    let mut stack = vec![from];
    while let Some(node) = stack.pop() {
        if node == to {
            let mut path = vec![node];
            let mut at = node;
            while at != from {
                at = parent[&at];
                path.push(at);
            }
            path.reverse();
            return Ok(Some(path));
        }
        let mut next: Vec<TaskId> = txn.get(node)?.map(|t| t.blocks.clone()).unwrap_or_default();
        next.extend(
            extra
                .iter()
                .filter(|e| e.blocker == node)
                .map(|e| e.blocked),
        );
        for n in next {
            if let std::collections::hash_map::Entry::Vacant(slot) = parent.entry(n) {
                slot.insert(node);
                stack.push(n);
            }
        }
    }
    Ok(None)
}

/// Writes the other end of an edge: `id` added to (`present`) or removed from `other`'s
/// `blockedBy` when `other_is_blocked`, else its `blocks`.
fn set_reverse_edge(
    txn: &mut dyn StoreTxn,
    other: TaskId,
    id: TaskId,
    other_is_blocked: bool,
    present: bool,
) -> Result<()> {
    let Some(mut locked) = txn.lock(other)? else {
        if present {
            tracing::warn!(task = %other, "task vanished while adding an edge to it");
        }
        return Ok(());
    };
    let side = if other_is_blocked {
        &mut locked.blocked_by
    } else {
        &mut locked.blocks
    };
    let (added, removed): (&[TaskId], &[TaskId]) = match present {
        true => (&[id], &[]),
        false => (&[], &[id]),
    };
    if edit_side(side, added, removed) {
        txn.save(&locked)?;
    }
    Ok(())
}
