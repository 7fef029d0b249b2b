//! What is done at a task's end besides writing it: its hook, the look for what it left running.

use std::sync::Mutex;

use task_core::{EndReason, TaskState};

use super::writer::Books;
use crate::guard as lock;
use crate::hooks::Hooks;
use crate::strays::{self, StrayPolicy};

/// What the record writer does at a task's end besides writing it.
pub(super) struct EndActions {
    /// Runs the end hook of every end written.
    pub(super) hooks: Hooks,
    /// The stray policy of tasks that brought none (`report` is `kill` for the types that
    /// kill their strays, [`task_core::TaskKind::kills_strays`]).
    pub(super) strays: StrayPolicy,
}

impl EndActions {
    /// What `state`, which ended, left running: looked for once per end (under its policy),
    /// and not after a kill or a supervisor's death (whose reaping took every process of the
    /// task).
    pub(super) fn strays(&self, books: &Mutex<Books>, state: &TaskState) -> strays::Found {
        let id = state.id();
        let ended = state.base.end_time;
        let policy = {
            let books = lock(books);
            if let Some((at, found)) = books.strays.get(&id)
                && *at == ended
            {
                return found.clone();
            }
            books
                .stray_policy
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
        lock(books).strays.insert(id, (ended, found.clone()));
        found
    }
}
