//! Tasks kept on disk only while they wait in the queue: described by their launcher
//! ([`task_core::Launch::prepare`]) and registered nowhere, their record written `pending` and
//! queued and their start kept in `{id}.queued.json`; launched under their id at their turn
//! ([`Turner`], the queue's [`Turns`]). A waiting task then costs the supervisor a few words in
//! the queue (see [`crate::queue`]), not an executor's pending start, a registry entry and the
//! record writer's books.

use std::sync::Arc;

use task_core::{Delivery, EndReason, Launched, Priority, Registry, TaskId, TaskState, TaskStatus};

use super::launchers::{self, LaunchAny, Launchers};
use super::writer::Mirror;
use super::{Engine, StartRefused, begin, note_start, refusal};
use crate::error::{Error, Result};
use crate::notice;
use crate::paths::SessionPaths;
use crate::protocol::{ErrorKind, Start};
use crate::queue::{self, Placement, Schedule, Turns, Work};
use crate::ready::Readiness;
use crate::record::{self, TaskRecord};

/// What starts and ends the tasks the queue lets go: the queue's [`Turns`].
pub(super) struct Turner {
    pub(super) paths: SessionPaths,
    pub(super) registry: Arc<Registry>,
    pub(super) launchers: Arc<Launchers>,
    pub(super) mirror: Mirror,
    pub(super) readiness: Arc<Readiness>,
}

impl std::fmt::Debug for Turner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Turner")
    }
}

impl Turns for Turner {
    fn start(&self, id: TaskId, work: Work) {
        begin(&self.mirror, &self.readiness, id, work);
    }

    fn launch_kept(&self, id: TaskId, background: bool) -> bool {
        let kept = queue::kept_start(&self.paths, &id);
        // Removed before it runs: no successor starts it again.
        queue::drop_kept(&self.paths, &id);
        let launched = match kept {
            Some(kept) => self.launch(id, kept),
            None => Err("its kept start cannot be read".to_owned()),
        };
        match launched {
            Ok(Some(work)) => begin(&self.mirror, &self.readiness, id, work),
            Ok(None) => self.readiness.started(id), // its launcher started it
            Err(error) => {
                tracing::warn!(task = %id, %error, "cannot launch it at its turn");
                if !self.register_kept(id, background) {
                    return false;
                }
                let delivery = if background {
                    Delivery::Queue(Priority::Later)
                } else {
                    Delivery::Silent
                };
                let reason = EndReason::SpawnFailed { error };
                queue::end_unstarted(&self.registry, &id, TaskStatus::Failed, &reason, delivery);
                self.readiness.forget(&id);
            }
        }
        true
    }

    fn register_kept(&self, id: TaskId, background: bool) -> bool {
        let found = match record::read(&self.paths, &id) {
            Ok(found) => found,
            Err(error) => {
                tracing::error!(task = %id, %error, "cannot read the record of a queued task to end it");
                return false;
            }
        };
        self.mirror.carry(&found, None);
        if !background {
            self.mirror.expect_no_notice(id);
        }
        match self.registry.register(found.task) {
            Ok(_) => true,
            Err(error) => {
                tracing::error!(task = %id, %error, "cannot register a queued task to end it");
                self.mirror.forget(id);
                false
            }
        }
    }
}

impl Turner {
    /// Launches the task `id` from its `kept` start, under its id and with the time it was made,
    /// notes for its records what the start carries and writes its first record; the work that
    /// starts it (`None`: its launcher started it). The error says why it could not be launched
    /// (nothing of it is registered then).
    fn launch(&self, id: TaskId, kept: queue::Kept) -> std::result::Result<Option<Work>, String> {
        let mut start = kept.start;
        let launcher = self
            .launchers
            .get(&start.kind)
            .ok_or_else(|| format!("this supervisor starts no {:?} tasks", start.kind))?;
        let remembered = launchers::remembered(launcher, &start);
        start.caller.task_id = Some(id);
        let background = start.caller.background;
        let (key, on_end, strays) = (start.key, start.on_end, start.strays);
        let Launched {
            id: made,
            start: work,
        } = launcher
            .launch_json(start.request, start.caller)
            .map_err(|error| error.to_string())?;
        if made != id {
            // Against `Launch::prepare`'s contract: the task it made ends unstarted.
            drop(work);
            return Err(format!("its launcher made it under another id ({made})"));
        }
        if let Some(created) = kept.created_ms {
            let made_then = self.registry.update(&id, |state| {
                (state.base.start_time != created).then(|| {
                    let mut next = state.clone();
                    next.base.start_time = created;
                    next
                })
            });
            if let Err(error) = made_then {
                tracing::debug!(task = %id, %error, "it ended before its creation time was kept");
            }
        }
        note_start(&self.mirror, id, remembered, key, on_end, strays);
        if !background {
            self.mirror.expect_no_notice(id);
        }
        // A failure is kept and retried by the sweep: readers see it queued until then.
        let _ = self.mirror.write_now(id);
        Ok(work)
    }
}

impl Engine {
    /// Keeps a task that must wait on disk only, when its launcher describes it without
    /// registering it ([`task_core::Launch::prepare`]): its record written `pending` and
    /// queued, `kept` (the start, its schedule in) kept for its turn. `Ok(None)`: it is to be
    /// registered at once instead (its launcher registers at once, or it need not wait).
    pub(super) fn keep_until_turn(
        &self,
        launcher: &dyn LaunchAny,
        kept: &Start,
        schedule: &Schedule,
        deadline_ms: Option<u64>,
    ) -> std::result::Result<Option<TaskId>, StartRefused> {
        let Some(state) = launcher
            .prepare_json(&kept.request, &kept.caller)
            .map_err(refusal)?
        else {
            return Ok(None);
        };
        let id = state.id();
        let placement = self.queue.place(schedule);
        if !self.queue.would_wait(id.task_type(), &placement) {
            return Ok(None);
        }
        if let Some(late_by) = deadline_ms.and_then(|d| task_core::now_ms().checked_sub(d))
            && late_by > 0
        {
            return Err(super::expired(late_by, "not made"));
        }
        self.keep_waiting(launcher, state, kept, placement)
            .map_err(|error| StartRefused {
                kind: ErrorKind::Spawn,
                message: format!("cannot record the task, so it was not started: {error}"),
            })?;
        Ok(Some(id))
    }

    /// Queues again under its id, at `placement`, a task a dead predecessor left waiting:
    /// kept on disk only when its launcher describes it, else registered. `created_ms`: when it was made, if its kept start says.
    ///
    /// # Errors
    /// No launcher of its kind; its request is refused; its record cannot be written.
    pub(super) fn queue_again(
        &self,
        id: TaskId,
        start: Start,
        placement: Placement,
        created_ms: Option<u64>,
    ) -> Result<()> {
        let launcher = self
            .launchers
            .get(&start.kind)
            .ok_or_else(|| Error::Invalid(format!("no {:?} launcher", start.kind)))?;
        match launcher.prepare_json(&start.request, &start.caller) {
            Ok(Some(mut state)) if state.id() == id => {
                if let Some(created) = created_ms {
                    state.base.start_time = created;
                }
                self.keep_waiting(launcher, state, &start, placement)
            }
            Ok(_) => self.launch_queued(id, start, placement),
            Err(error) => Err(Error::Invalid(error.to_string())),
        }
    }

    /// Keeps `state` (a task its launcher described, registered nowhere) waiting at
    /// `placement`: `start` kept in `{id}.queued.json`, then its record written `pending` and
    /// queued, then the queue told (which launches it at once if it need not wait after all).
    /// Nothing is left of it when this fails.
    fn keep_waiting(
        &self,
        launcher: &dyn LaunchAny,
        state: TaskState,
        start: &Start,
        mut placement: Placement,
    ) -> Result<()> {
        if self.mirror.is_detached() {
            return Err(Error::Supervisor(
                "the session directory was deleted or replaced".into(),
            ));
        }
        let id = state.id();
        let background = start.caller.background;
        let owner = state.owner_agent_id();
        placement.waiting = true;
        let created = Some(state.base.start_time);
        queue::keep_start(&self.paths, id, start, &placement, created)?;
        let mut found = TaskRecord::new(state);
        found.start_key.clone_from(&start.key);
        found.on_end = self
            .mirror
            .state
            .ends
            .hooks
            .command_for(start.on_end.as_ref());
        found.start = Some(Arc::new(launchers::remembered(launcher, start)));
        found.queue = Some(placement.clone());
        // The next supervisor queues it again, so no reader ends it as an orphan.
        found.survives_supervisor = true;
        if let Err(error) = record::write(&self.paths, &found) {
            queue::drop_kept(&self.paths, &id);
            return Err(error);
        }
        if let Some(check) = start.schedule.as_ref().and_then(|s| s.ready.clone()) {
            self.readiness.expect(id, check);
        }
        if !background && let Err(error) = notice::never_notify(&self.paths, &id) {
            // It still finishes silently; only a dead supervisor's orphan could notify.
            tracing::warn!("cannot mark {id} notified: {error}");
        }
        if self.queue.admit_kept(id, background, owner, placement) {
            // Its dependencies may have ended already.
            self.queue.pump();
        } else if !self.turner.launch_kept(id, background) {
            self.queue.ended(&id);
        }
        Ok(())
    }
}
