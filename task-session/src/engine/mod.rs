//! Inside the supervisor: a task-core [`Registry`] with the executors the wiring registered, the
//! launchers that start tasks by kind, and the mirror that writes every task's record and every
//! notification to where readers claim them.
//!
//! Nothing here knows a task type: executors plug in through task-core's [`Task`] (kill and the
//! per-type policies) and [`Launch`] (start from a typed request) traits.
//!
//! [`Task`]: task_core::Task

mod ends;
mod events;
mod launchers;
mod orphans;
mod take_back;
mod waiting;
mod writer;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use task_core::{
    Address, EndReason, Holder, Input, InputError, KillError, KillOutcome, LaunchError, Launched,
    MessageOutcome, MessageReply, Registry, RegistryConfig, TaskId, TaskStatus,
};
use tokio::sync::Notify;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::guard as lock;
use crate::hooks::Hooks;
use crate::notice::{self};
use crate::paths::SessionPaths;
use crate::protocol::{ErrorKind, KillReport, KillResult, Start};
use crate::queue::{Admitted, Placements, Queue};
use crate::ready::Readiness;
use crate::record::{self};
use ends::EndActions;
use events::{pump_notifications, watch_events};
pub use launchers::{Host, Launchers, Messenger, Wiring};
use waiting::Turner;

use writer::Mirror;

/// Why a start was refused.
#[derive(Debug)]
pub struct StartRefused {
    /// The class of failure.
    pub kind: ErrorKind,
    /// One line for humans.
    pub message: String,
}

/// The registry and executors of one supervisor, and the mirror to disk.
#[derive(Debug)]
pub struct Engine {
    paths: SessionPaths,
    registry: Arc<Registry>,
    launchers: Arc<Launchers>,
    mirror: Mirror,
    activity: Arc<Activity>,
    queue: Arc<Queue>,
    readiness: Arc<Readiness>,
    held: Arc<Held>,
    turner: Arc<Turner>,
}

/// Kills of the tasks waiting in the queue: each ends `killed` there, without ever running.
/// The registry asks it first on every kill (task-core's [`Holder`]), so a task killed by its
/// owner's end (an agent's tasks when it stops) ends at once, not when its turn comes.
#[derive(Debug)]
struct Held {
    registry: Arc<Registry>,
    queue: Arc<Queue>,
    readiness: Arc<Readiness>,
    mirror: Mirror,
}

impl Holder for Held {
    fn held_for(&self, agent_id: TaskId) -> Vec<TaskId> {
        self.queue.kept_for(agent_id)
    }

    fn kill_held(&self, id: &TaskId) -> bool {
        let Some((work, _)) = self.queue.cancel(id) else {
            return false;
        };
        crate::queue::end_unstarted(
            &self.registry,
            id,
            TaskStatus::Killed,
            &EndReason::Killed,
            task_core::Delivery::Silent,
        );
        drop(work); // only once ended: see `end_unstarted`
        self.readiness.forget(id);
        self.mirror.write_killed(*id);
        true
    }
}

/// What the supervisor's idle check looks at: the tasks not ended yet, as the event stream has
/// told so far (cheap to ask on every turn of the accept loop, unlike a scan of the registry),
/// and a wake-up for when a task ends or a client leaves.
#[derive(Debug, Default)]
pub(super) struct Activity {
    pub(super) live: Mutex<HashSet<TaskId>>,
    pub(super) changed: Notify,
}

impl Engine {
    /// Builds the registry, runs the wiring, and starts the mirror (call inside the runtime).
    pub fn start(paths: SessionPaths, config: Config, wiring: Wiring) -> Result<Self> {
        let registry = Arc::new(Registry::new(RegistryConfig {
            panel_grace: config.panel_grace,
            ..RegistryConfig::default()
        }));
        let host = Host {
            registry: Arc::clone(&registry),
            paths: paths.clone(),
            config: config.clone(),
        };
        // Before the wiring, which may take tasks over (resume them): their first events
        // (a resumed teammate's whole turn) are what gets their records rewritten under this
        // supervisor. Events sent before anyone listens are lost.
        let events = registry.subscribe();
        let launchers = Arc::new(wiring(&host)?);
        let placements = Arc::new(Placements::default());
        let hooks = Hooks::new(paths.clone(), config.on_end.clone(), config.on_end_timeout);
        let mirror = Mirror::spawn(
            paths.clone(),
            Arc::clone(&registry),
            config.sweep_interval,
            Arc::clone(&placements),
            EndActions::new(hooks, config.strays),
        )?;
        mirror.keep_what_records_carried(&registry);
        let activity = Arc::new(Activity::default());
        let readiness = Readiness::new(paths.clone(), Arc::clone(&registry), config.poll_interval);
        let turner = Arc::new(Turner {
            paths: paths.clone(),
            registry: Arc::clone(&registry),
            launchers: Arc::clone(&launchers),
            mirror: mirror.clone(),
            readiness: Arc::clone(&readiness),
        });
        let queue = Queue::new(
            paths.clone(),
            Arc::clone(&registry),
            config.parallel,
            config.clock_offset_ms,
            turner.clone(),
            placements,
            Arc::clone(&readiness),
        )?;
        queue.spawn_timer();
        let held = Arc::new(Held {
            registry: Arc::clone(&registry),
            queue: Arc::clone(&queue),
            readiness: Arc::clone(&readiness),
            mirror: mirror.clone(),
        });
        let holder: Arc<dyn Holder> = held.clone();
        registry
            .hold_with(Arc::downgrade(&holder))
            .map_err(|e| Error::Invalid(e.to_string()))?;
        tokio::spawn(watch_events(
            events,
            Arc::clone(&registry),
            mirror.clone(),
            Arc::clone(&activity),
            Arc::clone(&queue),
        ));
        tokio::spawn(pump_notifications(
            paths.clone(),
            Arc::clone(&registry),
            mirror.clone(),
        ));
        Ok(Self {
            paths,
            registry,
            launchers,
            mirror,
            activity,
            queue,
            readiness,
            held,
            turner,
        })
    }
}

impl Engine {
    /// How many tasks are not terminal, from the events received so far (it may lag the
    /// registry), with the tasks waiting in the queue (a task kept on disk until its turn
    /// sends no event).
    pub fn tracked_live_tasks(&self) -> usize {
        lock(&self.activity.live).len() + self.queue.waiting_count()
    }

    /// How many tasks are not terminal (a scan of the registry), plus the tasks whose latest
    /// state could not be written yet: the supervisor must not leave while it holds a truth
    /// that is on no disk.
    pub fn live_tasks(&self) -> usize {
        let live = self
            .registry
            .snapshot()
            .iter()
            .filter(|state| !state.status().is_terminal())
            .count();
        live + self.queue.waiting_count() + self.mirror.unwritten()
    }

    /// How many tasks the registry holds (live, or ended and not yet evicted): not the tasks
    /// kept on disk until their turn in the queue.
    pub fn registered_tasks(&self) -> usize {
        self.registry.len()
    }

    /// Resolves when a task ends or a client leaves (a moment to re-check idleness).
    pub async fn changed(&self) {
        self.activity.changed.notified().await;
    }

    /// Signals [`Engine::changed`].
    pub fn wake(&self) {
        self.activity.changed.notify_one();
    }

    /// Starts a task with the launcher of its kind; returns once its first record is on disk,
    /// and starts its work after that (so the caller gets the id without waiting for a `fork`;
    /// a start that fails ends the task `failed`). A first record that cannot be written (a
    /// full disk) refuses the start: the work never begins and nothing of the task is kept,
    /// since no reader could ever see it (a task whose launcher started it already, a
    /// monitor, is kept and its record retried). A task whose caller waits for it in the
    /// foreground has its completion latch set before its id is returned, so no reader ever
    /// delivers it (not even as an orphan).
    ///
    /// A start whose launcher returns after `deadline_ms` (the request's deadline: its client
    /// has stopped waiting, and decides from disk whether the task was made, see
    /// [`crate::client::send`]) is refused and makes nothing a reader can see as its: work not
    /// begun is dropped with the task, unrecorded; a task its launcher started already (a
    /// monitor) is killed, and recorded without the start's key.
    pub fn start_task(
        &self,
        mut start: Start,
        deadline_ms: Option<u64>,
    ) -> Result<TaskId, StartRefused> {
        let launcher = self
            .launchers
            .get(&start.kind)
            .ok_or_else(|| StartRefused {
                kind: ErrorKind::BadRequest,
                message: format!("this supervisor starts no {:?} tasks", start.kind),
            })?;
        if let Some(id) = self.started_before(&start)? {
            tracing::info!(task = %id, "a start sent again: its task was made by the first attempt");
            return Ok(id);
        }
        let remembered = launchers::remembered(launcher, &start);
        let schedule = start.schedule.take().map(|s| *s).unwrap_or_default();
        let bad = |message: String| StartRefused {
            kind: ErrorKind::BadRequest,
            message,
        };
        crate::schedule::validate(&schedule).map_err(|e| bad(e.to_string()))?;
        self.queue
            .check_after(&schedule.after)
            .map_err(|e| StartRefused {
                kind: match e {
                    Error::UnknownTask { .. } => ErrorKind::UnknownTask,
                    _ => ErrorKind::BadRequest,
                },
                message: format!("a dependency: {e}"),
            })?;
        // Kept for a successor if the task waits (its schedule put back for the record).
        let kept = self.queue.may_wait(&schedule).then(|| Start {
            schedule: Some(Box::new(schedule.clone())),
            ..start.clone()
        });
        if let Some(kept) = &kept
            && let Some(id) = self.keep_until_turn(launcher, kept, &schedule, deadline_ms)?
        {
            return Ok(id);
        }
        let background = start.caller.background;
        let key = start.key;
        let on_end = start.on_end;
        let strays = start.strays;
        // Until its first record is written below, with what the start notes about it.
        let starting = self.mirror.starting();
        let launched = launcher
            .launch_json(start.request, start.caller)
            .map_err(refusal)?;
        let Launched { id, start: work } = launched;
        if let Some(late_by) = deadline_ms.and_then(|d| task_core::now_ms().checked_sub(d))
            && late_by > 0
        {
            return Err(self.made_too_late(id, work, late_by));
        }
        note_start(&self.mirror, id, remembered, key, on_end, strays);
        let placement = self.queue.place(&schedule);
        if let Some(check) = schedule.ready.clone() {
            self.readiness.expect(id, check);
        }
        let mut admitted = self.queue.admit(
            id,
            id.task_type(),
            background,
            placement,
            work,
            kept.as_ref(),
        );
        if let Err(error) = self.mirror.write_now(id) {
            // Not begun yet (not released by the queue meanwhile): refused. The work is
            // dropped only once the task is ended.
            let unbegun = match admitted {
                Admitted::Now(work) => work,
                Admitted::Queued => self.queue.cancel(&id).and_then(|(work, _)| work),
            };
            if unbegun.is_none() {
                // Started by its launcher already (a monitor), or by the queue: kept, its
                // record retried.
                return Ok(id);
            }
            self.queue.ended(&id);
            self.abandon(id);
            drop(unbegun);
            return Err(StartRefused {
                kind: ErrorKind::Spawn,
                message: format!("cannot record the task, so it was not started: {error}"),
            });
        }
        drop(starting);
        if !background {
            self.mirror.expect_no_notice(id);
            if let Err(e) = notice::never_notify(&self.paths, &id) {
                // It still finishes silently; only a dead supervisor's orphan could notify.
                tracing::warn!("cannot mark {id} notified: {e}");
            }
        }
        match &mut admitted {
            Admitted::Now(work) => match work.take() {
                Some(work) => begin(&self.mirror, &self.readiness, id, work),
                None => self.readiness.started(id), // its launcher started it
            },
            // Its dependencies may have ended already.
            Admitted::Queued => self.queue.pump(),
        }
        Ok(id)
    }

    /// Undoes a task launched after its start's deadline: unbegun, it is forgotten unrecorded;
    /// started by its launcher, it is killed (its record, written by the sweep, carries no
    /// start key).
    fn made_too_late(
        &self,
        id: TaskId,
        work: Option<crate::queue::Work>,
        late_by: u64,
    ) -> StartRefused {
        let what = if let Some(work) = work {
            self.abandon(id);
            drop(work);
            "not made"
        } else if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (registry, mirror) = (Arc::clone(&self.registry), self.mirror.clone());
            runtime.spawn(async move {
                match registry.kill(&id).await {
                    Ok(KillOutcome::Killed) => mirror.write_killed(id),
                    _ => mirror.write(id),
                }
            });
            "killed at once"
        } else {
            "left running (no runtime to kill it from)"
        };
        tracing::warn!(task = %id, late_by_ms = late_by, "a start launched after its deadline: {what}");
        expired(late_by, what)
    }

    /// The task an earlier attempt of `start` made, if it is a retry and one did; a key too long
    /// is refused.
    fn started_before(&self, start: &Start) -> Result<Option<TaskId>, StartRefused> {
        let Some(key) = start.key.as_deref() else {
            return Ok(None);
        };
        if key.len() > crate::protocol::MAX_START_KEY_BYTES {
            return Err(StartRefused {
                kind: ErrorKind::BadRequest,
                message: format!(
                    "a start key is at most {} bytes",
                    crate::protocol::MAX_START_KEY_BYTES
                ),
            });
        }
        if !start.retry {
            return Ok(None);
        }
        record::find_started(&self.paths, key).map_err(|error| StartRefused {
            kind: ErrorKind::Spawn,
            message: format!("cannot tell whether an earlier attempt started the task: {error}"),
        })
    }

    /// Forgets a task registered but never begun: ended, evicted, dropped from the mirror's
    /// books (nothing unwritten of it holds the supervisor) and its empty output file removed.
    fn abandon(&self, id: TaskId) {
        let ended = self
            .registry
            .transition_with(&id, TaskStatus::Failed, |state| {
                state.base.end_reason = Some(EndReason::SpawnFailed {
                    error: "its record could not be written".into(),
                });
                state.base.notified = true;
            });
        if let Err(error) = ended {
            tracing::warn!(task = %id, %error, "cannot end a task that was not started");
        } else if !self.registry.evict(&id) {
            tracing::warn!(task = %id, "cannot evict a task that was not started");
        }
        self.mirror.forget(id);
        let _ = std::fs::remove_file(self.paths.output(&id));
    }

    /// Sends a message to the task `to` (an id or a name) through the wiring's messenger;
    /// `id` as [`Messenger::send`] takes it.
    pub async fn send(&self, to: &Address, message: &str, id: Option<&str>) -> MessageReply {
        let Some(messenger) = &self.launchers.messenger else {
            return MessageReply::unknown("no task of this session takes messages");
        };
        let mut sent = messenger.send(to, message, id).await;
        if matches!(sent.outcome, MessageOutcome::Unknown { .. }) {
            match self.take_back_stopped(to).await {
                Some(Ok(mut taken)) => {
                    let work = taken.work.take();
                    let reply = messenger.send(to, message, id).await;
                    sent = take_back::resumed(&taken, reply);
                    // Started once the message is in (a teammate reads it as its first turn).
                    self.run_taken_back(taken.previous.id(), work);
                }
                Some(Err(reason)) => return MessageReply::refused(reason),
                None => {}
            }
        }
        if let Some(id) = sent.task.filter(|_| sent.delivered())
            && self.registry.get(&id).is_some()
            && let Err(error) = self.mirror.write_now(id)
        {
            tracing::warn!(task = %id, %error, "cannot record the task a message reached");
        }
        sent
    }

    /// Writes to the stdin of a live task through its executor (task-core's
    /// [`Registry::write_input`]). A task the registry no longer holds (evicted) but whose
    /// record is on disk has ended: [`InputError::Finished`].
    pub async fn write_input(&self, id: &TaskId, input: Input<'_>) -> Result<(), InputError> {
        match self.registry.write_input(id, input).await {
            // Kept on disk until its turn: its launcher registers at once what takes input
            // before it runs (see `Launch::prepare`).
            Err(InputError::NotFound(_)) if self.queue.holds(id) => Err(InputError::NotPiped(*id)),
            Err(InputError::NotFound(_)) => match record::read(&self.paths, id) {
                Ok(found) => Err(InputError::Finished {
                    id: *id,
                    status: found.status(),
                }),
                Err(_) => Err(InputError::NotFound(*id)),
            },
            written => written,
        }
    }

    /// Takes `id` out of the queue and ends it `killed` without ever running; false if the
    /// queue does not hold it.
    fn kill_queued(&self, id: &TaskId) -> bool {
        self.held.kill_held(id)
    }

    /// Kills tasks (all at once); returns once each is settled and its record written. A task
    /// waiting in the queue ends `killed` without ever running.
    pub async fn kill(&self, ids: &[TaskId]) -> Vec<KillReport> {
        let kills = ids.iter().map(|id| async move {
            if self.kill_queued(id) {
                return KillReport {
                    id: *id,
                    result: KillResult::Killed,
                };
            }
            let result = match self.registry.kill(id).await {
                Ok(KillOutcome::Killed) => KillResult::Killed,
                Ok(_) => KillResult::AlreadyEnded,
                Err(KillError::NotFound(_)) => KillResult::Unknown,
                Err(e) => {
                    tracing::warn!("kill {id}: {e}");
                    KillResult::Failed
                }
            };
            if result == KillResult::Killed {
                self.mirror.write_killed(*id);
            } else {
                self.mirror.write(*id);
            }
            KillReport { id: *id, result }
        });
        let reports = futures_util::future::join_all(kills).await;
        self.mirror.flush().await;
        reports
    }

    /// Lets go of the ended tasks `ids` now instead of after their settle grace: each whose
    /// final record is on disk is evicted, and its record never written again. Returns the
    /// ones this supervisor no longer holds (a live task, or an end not written yet, stays).
    pub async fn release(&self, ids: &[TaskId]) -> Vec<TaskId> {
        self.mirror.flush().await;
        ids.iter()
            .filter(|id| {
                self.mirror.state.settle(**id);
                self.registry.get(id).is_none() && !self.queue.holds(id)
            })
            .copied()
            .collect()
    }

    /// Waits until every queued record write is done.
    pub async fn flush(&self) {
        self.mirror.flush().await;
    }

    /// Gives the session up: its directory was deleted or replaced under this supervisor
    /// (`why` says which), so nothing it runs can be seen, waited for or killed by anyone
    /// else any more. From now on nothing is written to the session's paths (they are gone,
    /// or belong to another directory) and no task starts; then every live task is killed
    /// through its executor (a shell's whole process tree, a remote session archived), each
    /// kill logged with `why`. Returns how many tasks were killed.
    pub async fn abandon_session(&self, why: &str) -> usize {
        self.mirror.detach();
        // Queued tasks first: nothing may start from the queue meanwhile.
        let queued = self.queue.waiting();
        for id in &queued {
            if self.kill_queued(id) {
                tracing::error!(task = %id, "killed before its turn: {why}");
            }
        }
        let live: Vec<TaskId> = self
            .registry
            .snapshot()
            .iter()
            .filter(|state| !state.status().is_terminal())
            .map(|state| state.id())
            .collect();
        let kills = live.iter().map(|id| async move {
            match self.registry.kill(id).await {
                Ok(KillOutcome::Killed) => {
                    tracing::error!(task = %id, "killed: {why}");
                    true
                }
                Ok(_) => false,
                Err(error) => {
                    tracing::error!(task = %id, %error, "cannot kill it after {why}");
                    false
                }
            }
        });
        let killed = futures_util::future::join_all(kills).await;
        killed.into_iter().filter(|&k| k).count()
    }
}

/// Notes for the records of `id` what its start carries: how it was started (`remembered`),
/// its key, its end hook and what is done with the processes it leaves.
fn note_start(
    mirror: &Mirror,
    id: TaskId,
    remembered: crate::start_record::StartRecord,
    key: Option<String>,
    on_end: Option<String>,
    strays: Option<crate::strays::StrayPolicy>,
) {
    mirror.started_with(id, remembered);
    if let Some(key) = key {
        mirror.keyed(id, key);
    }
    if let Some(on_end) = on_end {
        mirror.on_end(id, on_end);
    }
    if let Some(policy) = strays {
        mirror.state.ends.set_stray_policy(id, policy);
    }
}

/// The refusal of a start whose launcher refused it.
fn refusal(error: LaunchError) -> StartRefused {
    StartRefused {
        kind: match error {
            LaunchError::Invalid(_) => ErrorKind::BadRequest,
            _ => ErrorKind::Spawn,
        },
        message: error.to_string(),
    }
}

/// The refusal of a start made `late_by` ms after its client stopped waiting; `what` says
/// what became of its task.
fn expired(late_by: u64, what: &str) -> StartRefused {
    StartRefused {
        kind: ErrorKind::Expired,
        message: format!(
            "the task was launched {late_by} ms after its client stopped waiting: {what}"
        ),
    }
}

/// Starts the work of a registered task on a worker thread, which lives as long as the runtime
/// (a parent-death signal follows the thread that forks), then records it.
/// Its readiness check, if it has one, is watched from then on.
fn begin(mirror: &Mirror, readiness: &Arc<Readiness>, id: TaskId, work: crate::queue::Work) {
    let mirror = mirror.clone();
    let readiness = Arc::clone(readiness);
    tokio::spawn(async move {
        work();
        readiness.started(id);
        // `running` goes to disk at once: until then readers still see `pending` (a failure
        // is kept and retried by the sweep).
        let _ = mirror.write_now(id);
    });
}
