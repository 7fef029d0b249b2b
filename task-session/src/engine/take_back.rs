//! Taking a task back from its records: a stopped agent or teammate that a message resumes,
//! and a teammate a dead supervisor left running, whose session goes on. The engine finds the
//! task and how it was started on disk, and hands both to the launcher of its kind
//! ([`task_core::Launch::take_back`]) with the caller it was started by: it runs in the
//! environment it started in, whoever sends the message and whichever supervisor runs it.

use std::sync::Arc;

use task_core::{Address, Launched, MessageOutcome, MessageReply, TaskId};

use super::Engine;
use crate::record::{self, TaskRecord};

/// A task registered again from its record, not started yet.
pub(super) struct TakenBack {
    /// Its record as it was.
    pub(super) previous: TaskRecord,
    /// What starts it, if registering did not.
    pub(super) work: Option<crate::queue::Work>,
}

impl Engine {
    /// Registers again, from its records, the stopped task `to` names (by id, or the newest
    /// one of that name) if a message can resume it: `None` when no stopped task on record
    /// answers to `to`, `Some(Err(reason))` when one does and cannot be resumed.
    pub(super) async fn take_back_stopped(
        &self,
        to: &Address,
    ) -> Option<std::result::Result<TakenBack, String>> {
        let (paths, address) = (self.paths.clone(), to.clone());
        let found = tokio::task::spawn_blocking(move || stopped_on_record(&paths, &address))
            .await
            .ok()??;
        let id = found.id();
        Some(self.take_back(found).map_err(|error| {
            tracing::warn!(task = %id, %error, "cannot take the task back");
            format!("cannot resume {id}: {error}")
        }))
    }

    /// Registers `previous` again under its id with the launcher of its kind, from how it was
    /// started; what its records carried (its start, key and end hook) is kept for its next
    /// ones.
    pub(super) fn take_back(&self, previous: TaskRecord) -> std::result::Result<TakenBack, String> {
        let start = crate::restart::start_of(&self.paths, &previous).map_err(|e| e.to_string())?;
        let launcher = self
            .launchers
            .get(&start.kind)
            .ok_or_else(|| format!("this supervisor runs no {:?} tasks", start.kind))?;
        let again = start.resumed().map_err(|e| e.to_string())?;
        // Its previous end is not settled while it is registered again (which would forget
        // what is noted now); its first record waits for the notes.
        let held = self.mirror.hold(previous.id());
        self.mirror.carry(&previous, Some(Arc::new(start)));
        let launched = launcher.take_back_json(&previous.task, again.request, again.caller);
        drop(held);
        let Launched { id, start: work } = launched.map_err(|e| e.to_string())?;
        if id != previous.id() {
            return Err(format!("its launcher took it back as {id}"));
        }
        tracing::info!(task = %id, "taken back from its record");
        Ok(TakenBack { previous, work })
    }

    /// Starts the work of a task taken back, if registering did not start it.
    pub(super) fn run_taken_back(&self, id: TaskId, work: Option<crate::queue::Work>) {
        if let Some(work) = work {
            super::begin(&self.mirror, &self.readiness, id, work);
        }
    }
}

/// What a message that resumed `taken` says: resumed, with how its previous run ended, however
/// its executor handed the message over (a teammate's mailbox: posted).
pub(super) fn resumed(taken: &TakenBack, sent: MessageReply) -> MessageReply {
    match sent.outcome {
        MessageOutcome::Posted => MessageReply::reached(
            taken.previous.id(),
            MessageOutcome::Resumed {
                previous: taken.previous.status(),
                output_file: taken.previous.task.base.output_file.clone(),
            },
        ),
        _ => sent,
    }
}

/// The stopped task `to` names on the session's records: by id, or else the newest stopped
/// task that answers to the name.
fn stopped_on_record(paths: &crate::paths::SessionPaths, to: &Address) -> Option<TaskRecord> {
    match to {
        Address::Task(id) => record::read(paths, id).ok().filter(TaskRecord::is_terminal),
        Address::Name(_) | Address::Teammate { .. } => record::list(paths)
            .ok()?
            .tasks
            .into_iter()
            .filter(|found| found.is_terminal() && found.task.kind.answers_to(to))
            .max_by_key(|found| found.task.base.start_time),
    }
}
