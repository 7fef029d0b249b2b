//! Inside the supervisor: a task-core [`Registry`] with the executors the wiring registered, the
//! launchers that start tasks by kind, and the mirror that writes every task's record and every
//! notification to where readers claim them.
//!
//! Nothing here knows a task type: executors plug in through task-core's [`Task`] (kill and the
//! per-type policies) and [`Launch`] (start from a typed request) traits.
//!
//! [`Task`]: task_core::Task

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use task_core::{
    Address, Caller, EndReason, Holder, Input, InputError, KillError, KillOutcome, Launch,
    LaunchError, Launched, MessageReply, Registry, RegistryConfig, TaskEvent, TaskId, TaskState,
    TaskStatus,
};
use tokio::sync::{Notify, broadcast, oneshot};

use task_protocol::start::StartRequest;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::guard as lock;
use crate::hooks::Hooks;
use crate::notice::{self, Notice};
use crate::paths::SessionPaths;
use crate::protocol::{ErrorKind, KillReport, KillResult, Start};
use crate::queue::{Admitted, Placements, Queue};
use crate::ready::Readiness;
use crate::record::{self, TaskRecord};
use crate::strays::{self, StrayPolicy};

/// What the wiring of a supervisor gets: the registry to register executors with, where task
/// files go, and the session's settings.
#[derive(Debug)]
pub struct Host {
    /// The registry every executor records into.
    pub registry: Arc<Registry>,
    /// The session's paths (output files go to [`SessionPaths::tasks_dir`]).
    pub paths: SessionPaths,
    /// The session's settings.
    pub config: Config,
}

/// The launchers of a supervisor, by [`StartRequest::KIND`], and who takes messages.
#[derive(Default)]
pub struct Launchers {
    by_kind: HashMap<&'static str, Box<dyn LaunchAny>>,
    messenger: Option<Arc<dyn Messenger>>,
}

/// Delivers messages to the tasks that take them (agents, teammates, remote agents).
#[async_trait::async_trait]
pub trait Messenger: Send + Sync {
    /// Sends `message` to `to`; says what became of it. `id` is the message's id, chosen by
    /// its sender and the same on every attempt of one send (a client whose supervisor died
    /// before answering sends it again to the next): a messenger that keeps messages drops a
    /// repeat by it.
    async fn send(&self, to: &Address, message: &str, id: Option<&str>) -> MessageReply;
}

impl std::fmt::Debug for Launchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.by_kind.keys()).finish()
    }
}

impl Launchers {
    /// No launcher yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `launcher` for requests of its kind (a second one of the same kind replaces it).
    #[must_use]
    pub fn with<L: Launch>(mut self, launcher: L) -> Self {
        self.by_kind
            .insert(<L::Request as StartRequest>::KIND, Box::new(launcher));
        self
    }

    /// Routes messages ([`Engine::send`]) to `messenger`.
    #[must_use]
    pub fn with_messenger(mut self, messenger: impl Messenger + 'static) -> Self {
        self.messenger = Some(Arc::new(messenger));
        self
    }

    fn get(&self, kind: &str) -> Option<&dyn LaunchAny> {
        self.by_kind.get(kind).map(AsRef::as_ref)
    }
}

/// A [`Launch`] whose request is still JSON.
trait LaunchAny: Send + Sync {
    fn launch_json(
        &self,
        request: serde_json::Value,
        caller: Caller,
    ) -> Result<Launched, LaunchError>;
}

impl<L: Launch> LaunchAny for L {
    fn launch_json(
        &self,
        request: serde_json::Value,
        caller: Caller,
    ) -> Result<Launched, LaunchError> {
        let request = serde_json::from_value::<L::Request>(request).map_err(|e| {
            LaunchError::Invalid(format!(
                "bad {} request: {e}",
                <L::Request as StartRequest>::KIND
            ))
        })?;
        self.launch(request, caller)
    }
}

/// Registers the executors of every task type a supervisor runs and returns their launchers.
pub type Wiring = fn(&Host) -> Result<Launchers>;

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
    launchers: Launchers,
    mirror: Mirror,
    activity: Arc<Activity>,
    queue: Arc<Queue>,
    readiness: Arc<Readiness>,
    held: Arc<Held>,
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
struct Activity {
    live: Mutex<HashSet<TaskId>>,
    changed: Notify,
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
        let launchers = wiring(&host)?;
        let placements = Arc::new(Placements::default());
        let hooks = Hooks::new(paths.clone(), config.on_end.clone(), config.on_end_timeout);
        let mirror = Mirror::spawn(
            paths.clone(),
            Arc::clone(&registry),
            config.sweep_interval,
            Arc::clone(&placements),
            EndActions {
                hooks,
                strays: config.strays,
            },
        )?;
        mirror.keep_what_records_carried(&registry);
        let activity = Arc::new(Activity::default());
        let readiness = Readiness::new(paths.clone(), Arc::clone(&registry), config.poll_interval);
        let starter = {
            let (mirror, readiness) = (mirror.clone(), Arc::clone(&readiness));
            Arc::new(move |id, work| begin(&mirror, &readiness, id, work))
        };
        let queue = Queue::new(
            paths.clone(),
            Arc::clone(&registry),
            config.parallel,
            config.clock_offset_ms,
            starter,
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
        })
    }

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
            let requeued = self.launch_queued(id, start, kept.placement);
            if let Err(error) = requeued {
                tracing::warn!(task = %id, %error, "cannot queue it again");
                crate::queue::drop_kept(&self.paths, &id);
            }
        }
        Ok(())
    }

    /// Registers a task a predecessor left queued under its id and queues it at `placement`.
    fn launch_queued(
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

    /// Ends every task a dead supervisor left live, but the ones taken over.
    fn end_left_live(&self) -> Result<()> {
        let listing = record::list(&self.paths)?;
        // Ends whose hook their supervisor did not live to run.
        self.mirror.state.ends.hooks.run_due(&listing.tasks);
        // A task the wiring took over is in the registry: resumed (a remote agent followed
        // again from its sidecar), or ended by its executor with the reason it could not be.
        let taken_over = |id: &TaskId| self.registry.get(id).is_some();
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

    /// How many tasks are not terminal, from the events received so far: it may lag the
    /// registry by the events still queued. Constant time; [`Engine::live_tasks`] is exact.
    pub fn tracked_live_tasks(&self) -> usize {
        lock(&self.activity.live).len()
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
        live + self.mirror.unwritten()
    }

    /// How many tasks the registry holds (live, or ended and not yet evicted).
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
        let background = start.caller.background;
        let key = start.key;
        let on_end = start.on_end;
        let strays = start.strays;
        // Until its first record is written below, with what the start notes about it.
        let starting = self.mirror.starting();
        let launched = launcher
            .launch_json(start.request, start.caller)
            .map_err(|error| StartRefused {
                kind: match error {
                    LaunchError::Invalid(_) => ErrorKind::BadRequest,
                    _ => ErrorKind::Spawn,
                },
                message: error.to_string(),
            })?;
        let Launched { id, start: work } = launched;
        if let Some(late_by) = deadline_ms.and_then(|d| task_core::now_ms().checked_sub(d))
            && late_by > 0
        {
            return Err(self.made_too_late(id, work, late_by));
        }
        if let Some(key) = key {
            self.mirror.keyed(id, key);
        }
        if let Some(on_end) = on_end {
            self.mirror.on_end(id, on_end);
        }
        if let Some(policy) = strays {
            lock(&self.mirror.state.books)
                .stray_policy
                .insert(id, policy);
        }
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
        StartRefused {
            kind: ErrorKind::Expired,
            message: format!(
                "the task was launched {late_by} ms after its client stopped waiting: {what}"
            ),
        }
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
        let sent = messenger.send(to, message, id).await;
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
                self.registry.get(id).is_none()
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

/// Mirrors each changed task and tracks which are live; wakes the idle check when one ends,
/// and gives its slot in the queue back.
async fn watch_events(
    mut events: broadcast::Receiver<TaskEvent>,
    registry: Arc<Registry>,
    mirror: Mirror,
    activity: Arc<Activity>,
    queue: Arc<Queue>,
) {
    loop {
        match events.recv().await {
            Ok(TaskEvent::TaskUpdated { task_id, patch }) => {
                mirror.write(task_id);
                if patch.status.is_terminal() {
                    queue.ended(&task_id);
                    lock(&activity.live).remove(&task_id);
                    activity.changed.notify_one();
                }
            }
            // A teammate going idle or back to work, an agent's tool use: `ps` shows them.
            // Its batch job known: tasks waiting for it on the same batch system may go.
            Ok(TaskEvent::TaskProgress { task_id, .. }) => {
                mirror.write(task_id);
                queue.progressed(&task_id);
            }
            // Settled silently (a workflow's agent, a stopped one): no notice follows, so its
            // end is written now instead of a sweep later.
            Ok(TaskEvent::TaskNotification {
                task_id,
                queued: false,
                ..
            }) => {
                let end = registry.get(&task_id).and_then(|state| state.base.end_time);
                mirror.write_silent(task_id, end);
            }
            Ok(TaskEvent::TaskStarted { task_id, .. }) => {
                // Only while live: an id left in the set would keep the supervisor from idling.
                if registry
                    .get(&task_id)
                    .is_some_and(|state| !state.status().is_terminal())
                {
                    lock(&activity.live).insert(task_id);
                }
                mirror.write(task_id);
            }
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!("missed {missed} task events: rewriting every record");
                let states = registry.snapshot();
                *lock(&activity.live) = states
                    .iter()
                    .filter(|state| !state.status().is_terminal())
                    .map(|state| state.id())
                    .collect();
                for state in states {
                    if state.status().is_terminal() {
                        queue.ended(&state.id());
                    }
                    mirror.write(state.id());
                }
                activity.changed.notify_one();
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Moves the registry's notifications to disk: a completion into its task's record (claimed
/// through `.notified`), anything else into `events/pending/` (claimed by rename).
async fn pump_notifications(paths: SessionPaths, registry: Arc<Registry>, mirror: Mirror) {
    let queue = registry.notifications();
    loop {
        queue.wait_nonempty().await;
        for (priority, notification) in queue.drain_with_priority() {
            let id = notification.task_id;
            let notice = Notice {
                priority,
                at_ms: task_core::now_ms(),
                notification,
                key: None,
            };
            if notice.notification.status.is_some() {
                mirror.complete(id, notice);
            } else if mirror.is_detached() {
                tracing::debug!(task = %id, "an event dropped: the session directory is gone");
            } else if let Err(e) = notice::publish_event(&paths, &notice) {
                tracing::error!("cannot publish an event of {id}: {e}");
            }
        }
    }
}

enum WriteRequest {
    Write(TaskId, Occasion),
    Flush(oneshot::Sender<()>),
}

/// The handle of the record writer thread.
///
/// One thread: every record is a file created in the same directory, and file creations in
/// one directory are serialized by the kernel anyway (on ext4, several writers spent their time
/// spinning on the directory's lock: one writer used 10-25 % less supervisor CPU than four in
/// the 200-run loop of `benches/benches/cli.rs`).
#[derive(Clone)]
struct Mirror {
    sender: mpsc::Sender<WriteRequest>,
    state: Arc<Mirrored>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mirror")
    }
}

impl Mirror {
    /// Starts the writer thread, which also sweeps every `sweep_interval`.
    fn spawn(
        paths: SessionPaths,
        registry: Arc<Registry>,
        sweep_interval: Duration,
        placements: Arc<Placements>,
        ends: EndActions,
    ) -> Result<Self> {
        let state = Arc::new(Mirrored {
            paths,
            registry,
            sweep_interval,
            placements,
            ends,
            books: Mutex::default(),
            detached: AtomicBool::new(false),
            starting: AtomicUsize::new(0),
        });
        let (sender, receiver) = mpsc::channel();
        let writer = Arc::clone(&state);
        std::thread::Builder::new()
            .name("record-writer".into())
            .spawn(move || writer.write_loop(&receiver))
            .map_err(|e| Error::io("start", "the record writer", e))?;
        Ok(Self { sender, state })
    }

    fn write(&self, id: TaskId) {
        let _ = self.sender.send(WriteRequest::Write(id, Occasion::Change));
    }

    /// Writes the end of `id` that ended at `end` and was settled silently: no notice is
    /// waited for.
    fn write_silent(&self, id: TaskId, end: Option<u64>) {
        let _ = self
            .sender
            .send(WriteRequest::Write(id, Occasion::Silent { end }));
    }

    /// Attaches the completion notice of an ended task to its record.
    fn complete(&self, id: TaskId, notice: Notice) {
        lock(&self.state.books).completions.insert(id, notice);
        self.write(id);
    }

    /// Waits until every write asked for so far is done.
    async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.sender.send(WriteRequest::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }

    /// Writes the record of `id` on the calling thread, now (a short blocking write, like the
    /// creation of the task's output file before it): no hand-off to the writer thread on the
    /// way of a start. The first record of a task is always written this way. A failed write
    /// is also kept for the sweep to retry.
    fn write_now(&self, id: TaskId) -> Result<()> {
        self.state.write(id, Occasion::Start)
    }

    /// Marks a start in flight until the guard is dropped: meanwhile the writer thread puts
    /// off the first record of any task it has not written yet (the sweep writes it), since
    /// that may be the task the start is making, which a launcher can start (a monitor)
    /// before the start notes its key and hook. A first record without its key would let a
    /// start sent again after this supervisor's death make a second task.
    fn starting(&self) -> StartInFlight {
        self.state.starting.fetch_add(1, Ordering::SeqCst);
        StartInFlight(Arc::clone(&self.state))
    }

    /// Notes the key of the start that made `id`, for its records.
    fn keyed(&self, id: TaskId, key: String) {
        lock(&self.state.books).start_keys.insert(id, key);
    }

    /// Keeps, for every task the wiring took over from a dead predecessor (a remote agent, a
    /// batch job followed again), what its record carried beyond its state: the key of the
    /// start that made it (so a retry of that start finds it instead of making another) and
    /// its end hook. Before any of its records is rewritten by this supervisor.
    fn keep_what_records_carried(&self, registry: &Registry) {
        for state in registry.snapshot() {
            let id = state.id();
            let Ok(record) = record::read(&self.state.paths, &id) else {
                continue;
            };
            if let Some(key) = record.start_key {
                self.keyed(id, key);
            }
            if let Some(command) = record.on_end {
                self.on_end(id, command);
            }
        }
    }

    /// Notes the task's own end hook, for its records.
    fn on_end(&self, id: TaskId, command: String) {
        lock(&self.state.books).on_end.insert(id, command);
    }

    /// Writes the record of a task a kill on request just ended, now: no completion notice is
    /// due for it, so nothing waits for one. A failure is kept for the sweep to retry.
    fn write_killed(&self, id: TaskId) {
        let _ = self.state.write(id, Occasion::Killed);
    }

    /// Notes that no reader delivers the completion of `id` (its caller waits for it in the
    /// foreground): its end is written without waiting for a notice.
    fn expect_no_notice(&self, id: TaskId) {
        lock(&self.state.books).silent.insert(id);
    }

    /// Drops everything the books hold about `id` (a task that was never begun).
    fn forget(&self, id: TaskId) {
        lock(&self.state.books).forget(&id);
        self.state.placements.forget(&id);
    }

    /// Stops every write to the session's paths, for good (the directory is gone).
    fn detach(&self) {
        self.state.detached.store(true, Ordering::SeqCst);
    }

    /// Whether [`Mirror::detach`] was called.
    fn is_detached(&self) -> bool {
        self.state.detached.load(Ordering::SeqCst)
    }

    /// How many tasks have a state no write has put on disk yet (writes that failed, ends
    /// waiting for their completion notice).
    fn unwritten(&self) -> usize {
        let books = lock(&self.state.books);
        books.unwritten.len() + books.awaiting_notice.len()
    }
}

impl Books {
    /// Drops everything about `id` (evicted, or never begun).
    fn forget(&mut self, id: &TaskId) {
        self.written.remove(id);
        self.completions.remove(id);
        self.unwritten.remove(id);
        self.deferred.remove(id);
        self.start_keys.remove(id);
        self.on_end.remove(id);
        self.stray_policy.remove(id);
        self.strays.remove(id);
        self.kept.remove(id);
        self.awaiting_notice.remove(id);
        self.silent.remove(id);
    }
}

/// Why a record is written, which decides whether it may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Occasion {
    /// A change the writer thread or the sweep picked up.
    Change,
    /// A task's start: its first record is written even while `pending`.
    Start,
    /// A kill on request ended it: no completion notice is due, so nothing waits for one.
    Killed,
    /// Its notification was settled silently after the end at `end`: no notice is due for
    /// that end.
    Silent { end: Option<u64> },
}

/// What the writer thread works from.
struct Mirrored {
    paths: SessionPaths,
    registry: Arc<Registry>,
    sweep_interval: Duration,
    /// Each task's place in the queue, written into its records.
    placements: Arc<Placements>,
    /// What is done at every end written: its hook, the look for what it left running.
    ends: EndActions,
    /// Locked for the whole of a write: the writer thread and [`Mirror::write_now`] never
    /// write one task at once, and each writes the registry's state as it is under the lock,
    /// so an older state never replaces a newer one.
    books: Mutex<Books>,
    /// Set once the session directory is gone: nothing is written any more.
    detached: AtomicBool,
    /// Starts between their launch and their first record ([`Mirror::starting`]).
    starting: AtomicUsize,
}

/// The writer's bookkeeping; every entry leaves when its task is evicted, so nothing here
/// grows with the number of finished tasks.
#[derive(Default)]
struct Books {
    /// What was last written for each task.
    written: HashMap<TaskId, Written>,
    /// The completion notice of each ended task, until it is evicted.
    completions: HashMap<TaskId, Notice>,
    /// Tasks whose latest state could not be written (a full disk): retried every sweep.
    unwritten: HashSet<TaskId>,
    /// Tasks whose first record was put off while a start was in flight: written by the sweep.
    deferred: HashSet<TaskId>,
    /// The ends put into end slots for want of space, until their records take them.
    kept: HashMap<TaskId, TaskRecord>,
    /// Ended tasks whose end is not written yet because their completion notice may still
    /// be on its way from the notification pump, with when to write them without it.
    awaiting_notice: HashMap<TaskId, Instant>,
    /// Tasks whose completion no reader delivers (run in the foreground).
    silent: HashSet<TaskId>,
    /// Ended tasks written to disk, with when to try to evict them.
    settling: VecDeque<(TaskId, Instant)>,
    /// The key of the start that made each task, written into each of its records.
    start_keys: HashMap<TaskId, String>,
    /// The end hook each task brought, written into each of its records.
    on_end: HashMap<TaskId, String>,
    /// The stray policy each task brought.
    stray_policy: HashMap<TaskId, StrayPolicy>,
    /// What each ended task left running, found at the end that ended at this time.
    strays: HashMap<TaskId, (Option<u64>, strays::Found)>,
}

/// What the record writer does at a task's end besides writing it.
struct EndActions {
    /// Runs the end hook of every end written.
    hooks: Hooks,
    /// The stray policy of tasks that brought none (`report` is `kill` for the types that
    /// kill their strays, [`task_core::TaskKind::kills_strays`]).
    strays: StrayPolicy,
}

impl EndActions {
    /// What `state`, which ended, left running: looked for once per end (under its policy),
    /// and not after a kill or a supervisor's death (whose reaping took every process of the
    /// task).
    fn strays(&self, books: &mut Books, state: &TaskState) -> strays::Found {
        let id = state.id();
        let ended = state.base.end_time;
        if let Some((at, found)) = books.strays.get(&id)
            && *at == ended
        {
            return found.clone();
        }
        let reaped = matches!(
            state.base.end_reason,
            Some(EndReason::Killed | EndReason::SupervisorDied { .. })
        );
        let policy = books
            .stray_policy
            .get(&id)
            .copied()
            .unwrap_or(match self.strays {
                StrayPolicy::Report if state.kind.kills_strays() => StrayPolicy::Kill,
                session => session,
            });
        let found = if reaped {
            strays::Found::default()
        } else {
            strays::Found::at_end(&id, policy)
        };
        books.strays.insert(id, (ended, found.clone()));
        found
    }
}

/// What was last written for a task: its state, shared with the registry for as long as the
/// task does not change (a live task costs no second copy of its state: 10 000 running tasks
/// are 10 000 states, not 20 000), and the rest of its record that can change.
struct Written {
    state: Arc<TaskState>,
    notification: Option<Notice>,
    survives_supervisor: bool,
}

impl Written {
    fn of(state: Arc<TaskState>, record: &TaskRecord) -> Self {
        Written {
            state,
            notification: record.notification.clone(),
            survives_supervisor: record.survives_supervisor,
        }
    }

    /// Whether `record` holds nothing new (its start key and supervisor never change).
    fn matches(&self, record: &TaskRecord) -> bool {
        self.survives_supervisor == record.survives_supervisor
            && self.notification == record.notification
            && *self.state == record.task
    }
}

/// A start in flight ([`Mirror::starting`]), until dropped.
struct StartInFlight(Arc<Mirrored>);

impl Drop for StartInFlight {
    fn drop(&mut self) {
        self.0.starting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Mirrored {
    /// Writes in batches (everything queued is taken at once and each task written once, from
    /// its state at that moment: a burst of transitions costs one write), and sweeps between
    /// batches: retries failed writes, evicts ended tasks whose final record is on disk.
    fn write_loop(&self, requests: &mpsc::Receiver<WriteRequest>) {
        loop {
            let first = match requests.recv_timeout(self.sweep_interval) {
                Ok(first) => Some(first),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            // Each task once, in the order first asked; a silent settlement outweighs a change.
            let mut writes: Vec<(TaskId, Occasion)> = Vec::new();
            let mut index: HashMap<TaskId, usize> = HashMap::new();
            let mut flushed = Vec::new();
            for request in first.into_iter().chain(requests.try_iter()) {
                match request {
                    WriteRequest::Write(id, occasion) => match index.get(&id) {
                        Some(&at) if occasion != Occasion::Change => writes[at].1 = occasion,
                        Some(_) => {}
                        None => {
                            index.insert(id, writes.len());
                            writes.push((id, occasion));
                        }
                    },
                    WriteRequest::Flush(done) => flushed.push(done),
                }
            }
            for (id, occasion) in writes {
                // A failure is logged, kept and retried by the sweep.
                let _ = self.write(id, occasion);
            }
            for done in flushed {
                let _ = done.send(());
            }
            self.sweep();
        }
    }

    /// Writes the record of `id` from the registry's current state. A task not written yet is
    /// written while `pending` only at its start: the events of its registration would each
    /// cost a file no reader can ask for yet. An end is written with its completion notice:
    /// the executor ends a task and then sends the notice, which reaches [`Mirror::complete`]
    /// through the notification pump, so an end without one waits for it up to a sweep
    /// interval (an end with no notice due is written then, or at once when known: a kill on
    /// request, a task run in the foreground). Were the
    /// end written first, a supervisor dying before the notice would lose it for good. A
    /// write that fails is logged and kept for the sweep to retry, and its error returned.
    fn write(&self, id: TaskId, occasion: Occasion) -> Result<()> {
        if self.detached.load(Ordering::SeqCst) {
            // A start is refused (no reader could ever see it); anything else is dropped.
            return match occasion {
                Occasion::Start => Err(Error::Supervisor(
                    "the session directory was deleted or replaced".into(),
                )),
                _ => Ok(()),
            };
        }
        let mut books = lock(&self.books);
        let Some(state) = self.registry.get(&id) else {
            return Ok(());
        };
        let known = books.written.contains_key(&id);
        if !known && occasion != Occasion::Start && state.status() == TaskStatus::Pending {
            return Ok(());
        }
        let changed = matches!(occasion, Occasion::Change | Occasion::Silent { .. });
        if !known && changed && self.starting.load(Ordering::SeqCst) > 0 {
            books.deferred.insert(id);
            return Ok(());
        }
        books.deferred.remove(&id);
        let mut record = TaskRecord::new((*state).clone());
        record.start_key = books.start_keys.get(&id).cloned();
        record.queue = self.placements.get(&id);
        record.on_end = self.ends.hooks.command_for(books.on_end.get(&id));
        record.survives_supervisor = !state.status().is_terminal()
            && self
                .registry
                .executor(state.base.task_type)
                .is_some_and(|executor| executor.survives_supervisor(&state));
        // A task waiting in the queue is queued again by the next supervisor (its start is
        // kept), so no reader ends it as an orphan: a reader starts that supervisor instead.
        let waiting = state.status() == TaskStatus::Pending
            && record
                .queue
                .as_ref()
                .is_some_and(|placement| placement.waiting);
        record.survives_supervisor |= waiting;
        if state.status().is_terminal() {
            // A notice of an earlier end (an agent resumed since) is not this end's.
            let notice = books
                .completions
                .get(&id)
                .filter(|notice| state.base.end_time.is_none_or(|end| notice.at_ms >= end))
                .cloned();
            let no_notice_due = match occasion {
                Occasion::Killed => true,
                Occasion::Silent { end } => end == state.base.end_time,
                Occasion::Change | Occasion::Start => false,
            } || books.silent.contains(&id);
            if notice.is_none() && !no_notice_due {
                let now = Instant::now();
                // As long as its executor may take to send it (an agent: once its CLI exited).
                let delay = self
                    .registry
                    .executor(state.base.task_type)
                    .map_or(Duration::ZERO, |executor| executor.notice_delay(&state));
                let due = *books
                    .awaiting_notice
                    .entry(id)
                    .or_insert(now + self.sweep_interval.max(delay));
                if now < due {
                    return Ok(()); // written by `complete`, or by the sweep once due
                }
            }
            // Looked for only now: an agent is ended before its CLI has exited, and sends its
            // notice once it has, so what the CLI's tools left is the supervisor's by then.
            let left = self.ends.strays(&mut books, &state);
            record.strays = left.running();
            record.notification = notice.map(|mut notice| {
                if let Some(note) = left.note() {
                    let summary = &mut notice.notification.summary;
                    *summary = format!("{summary}; {note}");
                }
                notice
            });
        }
        books.awaiting_notice.remove(&id);
        if books.written.get(&id).is_some_and(|w| w.matches(&record)) {
            return Ok(());
        }
        let terminal = record.is_terminal();
        match record::write(&self.paths, &record) {
            Ok(()) => {
                if !known && !terminal {
                    self.reserve_end(id);
                }
                if terminal {
                    // After the end and its notice are on disk: a hook never holds them up.
                    self.ends.hooks.ended(&record);
                }
                books.written.insert(id, Written::of(state, &record));
                if books.unwritten.remove(&id) {
                    tracing::info!(task = %id, "its record is on disk again");
                }
                if terminal {
                    record::release_end(&self.paths, &id);
                    books.kept.remove(&id);
                    let at = Instant::now() + self.sweep_interval;
                    books.settling.push_back((id, at));
                }
                Ok(())
            }
            Err(error) => {
                if terminal && books.kept.get(&id) != Some(&record) {
                    self.keep_end(&record);
                    books.kept.insert(id, record);
                }
                if books.unwritten.insert(id) {
                    tracing::error!(task = %id, %error, "cannot write its record: kept in memory and retried");
                }
                Err(error)
            }
        }
    }

    /// Reserves the space of a new task's end. Without it the task still runs; its end then
    /// relies on this process alone when the disk is full.
    fn reserve_end(&self, id: TaskId) {
        if let Err(error) = record::reserve_end(&self.paths, &id) {
            tracing::warn!(task = %id, %error, "no space is reserved for its end");
        }
    }

    /// Puts an end its record could not take into the task's end slot, so it survives this
    /// process.
    fn keep_end(&self, record: &TaskRecord) {
        match record::write_end(&self.paths, record) {
            Ok(()) => tracing::warn!(task = %record.id(), "its end is kept in its end slot"),
            Err(error) => {
                tracing::error!(task = %record.id(), %error, "cannot keep its end in its end slot");
            }
        }
    }

    /// Retries failed writes, writes the ends whose notice wait is over, brings the records of
    /// live agents up to date, and evicts ended tasks whose final record has been on disk for
    /// a sweep interval.
    fn sweep(&self) {
        let retry: Vec<TaskId> = {
            let books = lock(&self.books);
            let waited = books.awaiting_notice.keys();
            // Agents change without an event (tokens and text between tool uses): their
            // records are compared with their states, and rewritten if they differ.
            let quiet = books
                .written
                .iter()
                .filter(|(_, w)| !w.state.status().is_terminal() && w.state.kind.changes_quietly())
                .map(|(id, _)| id);
            books
                .unwritten
                .iter()
                .chain(&books.deferred)
                .chain(waited)
                .chain(quiet)
                .copied()
                .collect()
        };
        for id in retry {
            let _ = self.write(id, Occasion::Change); // not yet: kept for the next sweep
        }
        let now = Instant::now();
        let due: Vec<TaskId> = {
            let mut books = lock(&self.books);
            let mut due = Vec::new();
            while let Some(&(id, at)) = books.settling.front() {
                if at > now {
                    break;
                }
                books.settling.pop_front();
                due.push(id);
            }
            due
        };
        for id in due {
            self.settle(id);
        }
    }

    /// Evicts `id` if the record on disk holds the end the registry has and the registry lets
    /// it go; tries again later if its grace has not passed. A task resumed under its id since
    /// the end that queued this (a teammate sent a message) is not evicted here, even once it
    /// has ended again: that end may still wait for its notice, and evicting it first would
    /// leave its record `running` for good. The write of that end queues it again.
    fn settle(&self, id: TaskId) {
        let _ = self.write(id, Occasion::Change); // a no-op unless something changed since
        let mut books = lock(&self.books);
        if books.unwritten.contains(&id) {
            return; // retried by the sweep; settles once written
        }
        let final_on_disk = |current: &TaskState| {
            books
                .written
                .get(&id)
                .map(|written| Arc::clone(&written.state))
                .filter(|written| written.status().is_terminal() && **written == *current)
        };
        let gone = match self.registry.get(&id) {
            None => true,
            Some(current) => match final_on_disk(&current) {
                // Live again, or an end not written yet: the write of that end settles it.
                None => return,
                Some(written) => {
                    self.registry.evict_if(&id, |state| *state == *written)
                        || self.registry.get(&id).is_none()
                }
            },
        };
        if gone {
            books.forget(&id);
            self.placements.forget(&id);
        } else {
            books
                .settling
                .push_back((id, Instant::now() + self.sweep_interval));
        }
    }
}
