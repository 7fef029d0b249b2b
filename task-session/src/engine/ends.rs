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
        let id = state.id();
        let ended = state.base.end_time;
        let policy = {
            let book = lock(&self.book);
            if let Some((at, found)) = book.found.get(&id)
                && *at == ended
            {
                return found.clone();
            }
            book.policies
                .get(&id)
                .copied()
                .unwrap_or(match self.strays {
                    StrayPolicy::Report if state.kind.kills_strays() => StrayPolicy::Kill,
                    session => session,
                })
        };
        let reaped = matches!(
            state.base.end_reason,
            Some(EndReason::Killed | EndReason::SupervisorDied { .. })
        );
        // The look through `/proc`, with no lock held.
        let found = if reaped {
            strays::Found::default()
        } else {
            strays::Found::at_end(&id, policy)
        };
        lock(&self.book).found.insert(id, (ended, found.clone()));
        found
    }
}
