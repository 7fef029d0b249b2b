//! Bookkeeping in the task-core registry: every status change, exit code and notification of
//! shell and monitor tasks goes through here, so the lifecycle rules live in one place.

use std::sync::Arc;

use task_core::summary::{self, ShellEnd};
use task_core::{
    Delivery, EndReason, Notification, Priority, Registry, RegistryError, ShellProcess, TaskId,
    TaskKind, TaskState, TaskStatus,
};

pub(crate) use task_core::summary::MonitorEnd;

use crate::error::ShellError;

/// The summary of one monitor event: `Monitor "{desc}" event` (the line itself goes in
/// `<event>`).
pub fn monitor_event_summary(description: &str) -> String {
    format!("Monitor \"{description}\" event")
}

/// A handle on the registry with the operations shell and monitor tasks need.
#[derive(Debug, Clone)]
pub(crate) struct Book {
    registry: Arc<Registry>,
}

impl Book {
    pub(crate) fn new(registry: Arc<Registry>) -> Self {
        Self { registry }
    }

    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Inserts a new `pending` task.
    pub(crate) fn register(&self, state: TaskState) -> Result<(), ShellError> {
        self.registry.register(state)?;
        Ok(())
    }

    /// `pending→running` once the process exists.
    /// Marks a task running in the process group `process` (none: a WebSocket monitor).
    pub(crate) fn mark_running(&self, id: &TaskId, process: Option<ShellProcess>) {
        let started = self
            .registry
            .transition_with(id, TaskStatus::Running, |state| {
                if let TaskKind::Shell(shell) = &mut state.kind {
                    shell.process = process;
                }
            });
        if let Err(error) = started {
            tracing::warn!(task = %id, %error, "could not mark the task running");
        }
    }

    /// `pending→running` for a batch job seen running (or ended) while its task was still
    /// `pending`; the reason it waited is cleared. Nothing for a task past `pending`.
    pub(crate) fn mark_running_batch(&self, id: &TaskId) {
        if self
            .registry
            .get(id)
            .is_none_or(|state| state.status() != TaskStatus::Pending)
        {
            return;
        }
        let started = self
            .registry
            .transition_with(id, TaskStatus::Running, |state| {
                if let TaskKind::Shell(shell) = &mut state.kind
                    && let Some(batch) = &mut shell.batch
                {
                    batch.waiting = None;
                }
            });
        if let Err(error) = started {
            tracing::debug!(task = %id, %error, "could not mark the batch task running");
        }
    }

    /// `pending→failed` with exit code 1: the process could not be started. `delivery` is
    /// silent when the caller gets the error directly.
    pub(crate) fn mark_spawn_failed(&self, id: &TaskId, delivery: Delivery, error: String) {
        let reason = EndReason::SpawnFailed { error };
        match self
            .registry
            .transition_with(id, TaskStatus::Failed, set_end(&reason))
        {
            Ok(state) => {
                let summary = summary::shell_ended(&state.base.description, &reason);
                let note = Notification::for_task(&state, TaskStatus::Failed.terminal(), summary);
                self.registry.notify_once(id, note, delivery);
            }
            // Ended before it could start (a queued task killed, or whose dependency failed).
            Err(RegistryError::IllegalTransition { from, .. }) if from.is_terminal() => {
                tracing::debug!(task = %id, %from, "ended before its start");
            }
            Err(error) => tracing::warn!(task = %id, %error, "could not record the spawn failure"),
        }
    }

    /// See [`mark_killed`].
    pub(crate) fn mark_killed(&self, id: &TaskId) {
        mark_killed(&self.registry, id);
    }

    /// Records a shell command's exit (0 → completed, else failed) and sends its one
    /// notification: queued with priority `later` when backgrounded, silent when a foreground
    /// caller receives the result itself. Returns the task's final status, which stays
    /// `killed` if a kill got there first.
    /// Records the end of a shell command that was not killed on request: `completed` for an
    /// exit with 0, `failed` for anything else.
    pub(crate) fn finish_shell(&self, id: &TaskId, reason: EndReason) -> TaskStatus {
        let to = match reason {
            EndReason::Exited { code: 0 } => TaskStatus::Completed,
            _ => TaskStatus::Failed,
        };
        let summary_reason = reason.clone();
        self.finish(id, to, reason, |state| {
            let background = shell_state(state).is_some_and(|s| s.is_backgrounded);
            let delivery = if background {
                Delivery::Queue(Priority::Later)
            } else {
                Delivery::Silent
            };
            (
                summary::shell_ended(&state.base.description, &summary_reason),
                delivery,
            )
        })
    }

    /// Records a monitor's end and queues its one notification with priority `next`.
    pub(crate) fn finish_monitor(
        &self,
        id: &TaskId,
        to: TaskStatus,
        reason: EndReason,
        end: MonitorEnd,
    ) -> TaskStatus {
        self.finish(id, to, reason, |state| {
            (
                summary::monitor(&state.base.description, end),
                Delivery::Queue(Priority::Next),
            )
        })
    }

    fn finish(
        &self,
        id: &TaskId,
        to: TaskStatus,
        reason: EndReason,
        notice: impl FnOnce(&TaskState) -> (String, Delivery),
    ) -> TaskStatus {
        match self.registry.transition_with(id, to, set_end(&reason)) {
            Ok(state) => {
                let (summary, delivery) = notice(&state);
                let note = Notification::for_task(&state, to.terminal(), summary);
                self.registry.notify_once(id, note, delivery);
                to
            }
            Err(error) => {
                tracing::debug!(task = %id, %error, "the task had already ended");
                self.registry.get(id).map_or(to, |state| state.status())
            }
        }
    }

    /// Changes the batch job of shell task `id` (its job id, why it waits) and has its record
    /// rewritten; a task already ended is left alone.
    pub(crate) fn update_batch(&self, id: &TaskId, change: impl Fn(&mut task_core::BatchJob)) {
        let mut changed = false;
        let updated = self.registry.update(id, |state| {
            changed = false;
            if state.status().is_terminal() {
                return None;
            }
            let mut next = state.clone();
            let TaskKind::Shell(shell) = &mut next.kind else {
                return None;
            };
            let batch = shell.batch.as_mut()?;
            let before = batch.clone();
            change(batch);
            if *batch == before {
                return None;
            }
            changed = true;
            Some(next)
        });
        match updated {
            Ok(_) if changed => {
                if let Some(state) = self.registry.get(id)
                    && let TaskKind::Shell(task_core::ShellState {
                        batch: Some(batch), ..
                    }) = &state.kind
                {
                    let mut detail = serde_json::Map::new();
                    detail.insert("engine".into(), batch.engine.clone().into());
                    if let Some(job) = &batch.job_id {
                        detail.insert("jobId".into(), job.clone().into());
                    }
                    if let Some(waiting) = &batch.waiting {
                        detail.insert("waiting".into(), waiting.clone().into());
                    }
                    self.registry.emit_progress(id, detail);
                }
            }
            Ok(_) => {}
            Err(error) => tracing::debug!(task = %id, %error, "cannot record its batch job"),
        }
    }

    /// The batch job of shell task `id` as the registry holds it.
    pub(crate) fn batch(&self, id: &TaskId) -> Option<task_core::BatchJob> {
        let state = self.registry.get(id)?;
        shell_state(&state)?.batch.as_deref().cloned()
    }

    /// Records the end of a batch job cancelled by someone else than this task system (an
    /// administrator, the batch system): `killed`, notified like any end it did not ask for.
    pub(crate) fn finish_cancelled(&self, id: &TaskId) -> TaskStatus {
        self.finish(id, TaskStatus::Killed, EndReason::Killed, |state| {
            let background = shell_state(state).is_some_and(|s| s.is_backgrounded);
            let delivery = if background {
                Delivery::Queue(Priority::Later)
            } else {
                Delivery::Silent
            };
            (
                format!(
                    "{} (cancelled outside the task system)",
                    summary::shell(&state.base.description, ShellEnd::Stopped)
                ),
                delivery,
            )
        })
    }

    /// Queues the stall warning of SPEC §3 (no `<status>`, priority `next`, with its trailer).
    pub(crate) fn notify_stall(&self, id: &TaskId, tail: &str) {
        if let Some(state) = self.registry.get(id) {
            self.registry
                .notifications()
                .enqueue(Notification::stall(&state, tail), Priority::Next);
        }
    }

    /// Queues one monitor event with priority `next`.
    pub(crate) fn monitor_event(&self, id: &TaskId, line: String) {
        if let Some(state) = self.registry.get(id) {
            let summary = monitor_event_summary(&state.base.description);
            let note = Notification {
                event: Some(line),
                ..Notification::for_task(&state, None, summary)
            };
            self.registry.notifications().enqueue(note, Priority::Next);
        }
    }

    /// Moves a foreground shell task to the background.
    pub(crate) fn set_backgrounded(&self, id: &TaskId) -> Result<(), ShellError> {
        let mut finished = None;
        self.registry.update(id, |state| {
            if state.status().is_terminal() {
                finished = Some(state.status());
                return None;
            }
            finished = None;
            let mut next = state.clone();
            match &mut next.kind {
                TaskKind::Shell(shell) if !shell.is_backgrounded => shell.is_backgrounded = true,
                _ => return None,
            }
            Some(next)
        })?;
        match finished {
            Some(status) => Err(ShellError::AlreadyFinished { id: *id, status }),
            None => Ok(()),
        }
    }

    /// The status of `id`, or [`ShellError::UnknownTask`].
    pub(crate) fn status(&self, id: &TaskId) -> Result<TaskStatus, ShellError> {
        self.registry
            .get(id)
            .map(|s| s.status())
            .ok_or(ShellError::UnknownTask(*id))
    }
}

/// `→killed` with exit code 137 and the notified latch set: the caller asked for the kill,
/// so no notification follows (SPEC §3).
pub(crate) fn mark_killed(registry: &Registry, id: &TaskId) {
    match registry.transition_with(id, TaskStatus::Killed, set_end(&EndReason::Killed)) {
        Ok(state) => {
            let summary = match shell_state(&state).map(|s| s.kind) {
                Some(task_core::ShellKind::Monitor) => {
                    summary::monitor(&state.base.description, MonitorEnd::Stopped)
                }
                _ => summary::shell(&state.base.description, ShellEnd::Stopped),
            };
            let note = Notification::for_task(&state, TaskStatus::Killed.terminal(), summary);
            registry.notify_once(id, note, Delivery::Silent);
        }
        Err(error) => tracing::debug!(task = %id, %error, "kill found the task already ended"),
    }
}

fn shell_state(state: &TaskState) -> Option<&task_core::ShellState> {
    match &state.kind {
        TaskKind::Shell(shell) => Some(shell),
        _ => None,
    }
}

/// Records how a task ended: its reason, the exit code that goes with it, and no process
/// group any more (nothing of it is left to clean up).
fn set_end(reason: &EndReason) -> impl FnMut(&mut TaskState) + '_ {
    move |state| state.record_end(reason)
}
