//! What a dead predecessor left: its queued tasks queued again, its live tasks ended (or
//! taken over by their executors).

use task_core::{Launched, TaskId, TaskStatus};

use super::{Engine, begin};
use crate::error::{Error, Result};
use crate::protocol::Start;
use crate::queue::Admitted;
use crate::record::{self, TaskRecord};

impl Engine {
    /// Queues again, under their ids and in their order, the tasks a dead predecessor left
    /// waiting (their starts kept in `{id}.queued.json`), with the queue paused: the caller
    /// resumes it. A task that cannot be registered again is left to [`Engine::end_orphans`].
    fn requeue(&self) -> Result<()> {
        let mut kept: Vec<_> = record::list(&self.paths)?
            .tasks
            .into_iter()
            .filter(|r| r.status() == TaskStatus::Pending && self.registry.get(&r.id()).is_none())
            .filter_map(|r| Some((r.id(), crate::queue::kept_start(&self.paths, &r.id())?)))
            .collect();
        kept.sort_by_key(|(_, kept)| kept.placement.seq);
        self.queue.pause();
        for (id, kept) in kept {
            self.queue.continue_after(kept.placement.seq);
            let mut start = kept.start;
            start.caller.task_id = Some(id);
            // It never ran: its output file is the empty one its registration made.
            let output = self.paths.output(&id);
            if std::fs::metadata(&output).is_ok_and(|meta| meta.len() == 0) {
                let _ = std::fs::remove_file(&output);
            }
            let requeued = self.queue_again(id, start, kept.placement, kept.created_ms);
            if let Err(error) = requeued {
                tracing::warn!(task = %id, %error, "cannot queue it again");
                crate::queue::drop_kept(&self.paths, &id);
            }
        }
        Ok(())
    }

    /// Registers a task a predecessor left queued under its id and queues it at `placement`.
    pub(super) fn launch_queued(
        &self,
        id: TaskId,
        start: Start,
        placement: crate::queue::Placement,
    ) -> Result<()> {
        let launcher = self
            .launchers
            .get(&start.kind)
            .ok_or_else(|| Error::Invalid(format!("no {:?} launcher", start.kind)))?;
        let background = start.caller.background;
        let remembered = super::launchers::remembered(launcher, &start);
        let kept = start.clone();
        let Launched {
            id: made,
            start: work,
        } = launcher
            .launch_json(start.request, start.caller)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        if made != id {
            // Its launcher cannot take an id: the new task goes, the old one is an orphan.
            self.abandon(made);
            return Err(Error::Invalid(
                "its launcher gives every task a new id".into(),
            ));
        }
        self.mirror.started_with(id, remembered);
        if let Some(check) = kept.schedule.as_ref().and_then(|s| s.ready.clone()) {
            self.readiness.expect(id, check);
        }
        let task_type = id.task_type();
        let admitted = self
            .queue
            .admit(id, task_type, background, placement, work, Some(&kept));
        let _ = self.mirror.write_now(id);
        if let Admitted::Now(Some(work)) = admitted {
            begin(&self.mirror, &self.readiness, id, work);
        }
        tracing::info!(task = %id, "queued again after its supervisor died");
        Ok(())
    }

    /// Sets the parallelism limit of `group` (0: unlimited) and starts what now fits.
    ///
    /// # Errors
    /// A bad group name; the limit cannot be written.
    pub fn set_group_limit(&self, group: &str, parallel: u32) -> Result<()> {
        self.queue.set_limit(group, parallel)
    }

    /// Pauses `group` (it starts none of its waiting tasks; its running tasks go on) or
    /// resumes it and starts what now fits; kept across supervisors.
    ///
    /// # Errors
    /// A bad group name; the change cannot be written.
    pub fn pause_group(&self, group: &str, paused: bool) -> Result<()> {
        self.queue.set_paused(group, paused)
    }

    /// Ends every task a dead supervisor left live on disk: its executor reaps what it left
    /// (the process group of a shell, verified to be the one it started) and its record is
    /// written `failed` with [`task_core::EndReason::SupervisorDied`] and its completion due.
    /// Call before serving anything (the caller holds the session lock).
    ///
    /// First the tasks it left queued are queued again (see [`crate::queue`]); the queue starts
    /// nothing until every orphan is ended, so no task this supervisor starts (and may already
    /// have ended and forgotten) is taken for an orphan.
    pub fn end_orphans(&self) -> Result<()> {
        self.requeue()?;
        let ended = self.end_left_live();
        self.queue.resume();
        ended
    }

    /// Takes back the task of `found`, which a dead supervisor left live, when its kind goes
    /// on under the next supervisor ([`task_core::Launch::goes_on_after_supervisor_death`]: a
    /// teammate's session) or its executor says that it outlived its supervisor
    /// ([`task_core::Task::survives_supervisor`]: an agent running as a batch job), and starts
    /// it; whether it did.
    fn goes_on(&self, found: &TaskRecord) -> bool {
        let survives = self
            .registry
            .executor(found.task.base.task_type)
            .is_some_and(|executor| executor.survives_supervisor(&found.task));
        let goes_on = crate::restart::start_of(&self.paths, found)
            .ok()
            .and_then(|start| self.launchers.get(&start.kind))
            .is_some_and(|launcher| survives || launcher.goes_on_after_supervisor_death());
        if !goes_on {
            return false;
        }
        match self.take_back(found.clone()) {
            Ok(taken) => {
                tracing::info!(task = %found.id(), "goes on after its supervisor died");
                self.run_taken_back(found.id(), taken.work);
                true
            }
            Err(error) => {
                tracing::warn!(task = %found.id(), %error, "cannot go on after its supervisor died");
                false
            }
        }
    }

    /// Ends every task a dead supervisor left live, but the ones taken over or taken back.
    fn end_left_live(&self) -> Result<()> {
        let listing = record::list(&self.paths)?;
        // Ends whose hook their supervisor did not live to run.
        self.mirror.state.ends.hooks.run_due(&listing.tasks);
        // A task the wiring took over is in the registry: resumed (a remote agent followed
        // again from its sidecar), or ended by its executor with the reason it could not be.
        // A task kept waiting on disk only is the queue's (queued again above).
        let taken_over = |id: &TaskId| self.registry.get(id).is_some() || self.queue.holds(id);
        let orphans = listing
            .tasks
            .into_iter()
            .filter(|r| !r.is_terminal() && !taken_over(&r.id()));
        for found in orphans {
            let id = found.id();
            let end = match record::read_end(&self.paths, &found) {
                Some(end) => {
                    tracing::warn!(task = %id, "its dead supervisor left its end in its slot");
                    end
                }
                None if self.goes_on(&found) => continue,
                None => {
                    tracing::warn!(task = %id, "left {} by a dead supervisor", found.status().as_str());
                    if let Some(executor) = self.registry.executor(found.task.base.task_type)
                        && let Err(error) = executor.reap_orphan(&found.task)
                    {
                        tracing::warn!(task = %id, %error, "cannot clean up after the orphan");
                    }
                    found.orphaned()
                }
            };
            // A record that cannot be written (a full disk) still reads as this end to every
            // reader; the next supervisor tries again.
            match record::write(&self.paths, &end) {
                Ok(()) => {
                    record::release_end(&self.paths, &id);
                    self.mirror.state.ends.hooks.ended(&end);
                }
                Err(error) => tracing::error!(task = %id, %error, "cannot record the orphan's end"),
            }
        }
        Ok(())
    }
}
