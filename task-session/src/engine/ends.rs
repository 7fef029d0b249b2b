//! What is done at a task's end besides writing it: its hook, the look for what it left running.

use std::collections::HashMap;
use std::sync::Mutex;

use task_core::{EndReason, TaskId, TaskState};

use crate::guard as lock;
use crate::hooks::Hooks;
use crate::strays::{self, StrayPolicy};

/// What the record writer does at a task's end besides writing it.
pub(super) struct EndActions {
    /// Runs the end hook of every end written.
    pub(super) hooks: Hooks,
    /// The stray policy of tasks that brought none (`report` is `kill` for the types that
    /// kill their strays, [`task_core::TaskKind::kills_strays`]).
    strays: StrayPolicy,
    /// Each task's own stray policy and what was found at its end; locked only to read or
    /// note, never across the look itself.
    book: Mutex<StrayBook>,
}

/// What [`EndActions`] notes per task; every entry leaves when its task is forgotten.
#[derive(Default)]
struct StrayBook {
    /// The stray policy each task brought.
    policies: HashMap<TaskId, StrayPolicy>,
    /// What each ended task left running, found at the end that ended at this time.
    found: HashMap<TaskId, (Option<u64>, strays::Found)>,
}

impl EndActions {
    /// Runs `hooks` at every end, and looks for strays under `strays` for tasks that bring no
    /// policy of their own.
    pub(super) fn new(hooks: Hooks, strays: StrayPolicy) -> Self {
        Self {
            hooks,
            strays,
            book: Mutex::default(),
        }
    }

    /// Notes the stray policy task `id` brought.
    pub(super) fn set_stray_policy(&self, id: TaskId, policy: StrayPolicy) {
        lock(&self.book).policies.insert(id, policy);
    }

    /// Drops everything noted about `id`.
    pub(super) fn forget(&self, id: &TaskId) {
        let mut book = lock(&self.book);
        book.policies.remove(id);
        book.found.remove(id);
    }

    /// What `state`, which ended, left running: looked for once per end (under its policy),
    /// and not after a kill or a supervisor's death (whose reaping took every process of the
    /// task).
    pub(super) fn strays(&self, state: &TaskState) -> strays::Found {
        self.look_for_strays(&[state]).pop().unwrap_or_default()
    }

    /// What each of `ended` left running, as [`EndActions::strays`] says, in one look through
    /// `/proc` for all the ends not looked for yet: a burst of ends written together costs one
    /// look, not one each. What is found is noted for each end, so an end is looked for once.
    pub(super) fn look_for_strays(&self, ended: &[&TaskState]) -> Vec<strays::Found> {
        let mut found: Vec<Option<strays::Found>> = Vec::with_capacity(ended.len());
        // The ends to look for: where in `ended`, the task and its policy.
        let mut looks: Vec<(usize, TaskId, StrayPolicy)> = Vec::new();
        {
            let book = lock(&self.book);
            for (at, state) in ended.iter().enumerate() {
                let id = state.id();
                if let Some((when, noted)) = book.found.get(&id)
                    && *when == state.base.end_time
                {
                    found.push(Some(noted.clone()));
                    continue;
                }
                found.push(None);
                let reaped = matches!(
                    state.base.end_reason,
                    Some(EndReason::Killed | EndReason::SupervisorDied { .. })
                );
                let policy = if reaped {
                    StrayPolicy::Ignore
                } else {
                    book.policies
                        .get(&id)
                        .copied()
                        .unwrap_or(match self.strays {
                            StrayPolicy::Report if state.kind.kills_strays() => StrayPolicy::Kill,
                            session => session,
                        })
                };
                looks.push((at, id, policy));
            }
        }
        if !looks.is_empty() {
            // The look through `/proc`, with no lock held.
            let ends: Vec<(TaskId, StrayPolicy)> =
                looks.iter().map(|&(_, id, policy)| (id, policy)).collect();
            let looked = strays::Found::at_ends(&ends);
            let mut book = lock(&self.book);
            for ((at, id, _), result) in looks.into_iter().zip(looked) {
                book.found
                    .insert(id, (ended[at].base.end_time, result.clone()));
                found[at] = Some(result);
            }
        }
        found.into_iter().map(Option::unwrap_or_default).collect()
    }
}
