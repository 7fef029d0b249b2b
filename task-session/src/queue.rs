//! Groups, the queue and run dependencies: which registered task may start, and when.
//!
//! Every task belongs to a group (`default` unless its start names one). A group runs at most
//! its parallelism limit of tasks at once: the limit set with `tasks group set G --parallel N`
//! (kept in `{session}/groups.json`, 0 for unlimited), else the default of the task's class
//! from the session's configuration (agents 20, shells and everything else unlimited), counted
//! per class. A task over its group's limit stays `pending` and waits its turn: highest
//! priority first, then first come first served. A paused group (`tasks group pause G`, kept
//! in `groups.json` too) starts none of its waiting tasks until it is resumed; the tasks it
//! runs go on. A task may also wait for other tasks
//! (`--after`: it starts once each of them completed, and ends `failed` without running,
//! [`EndReason::DependencyFailed`], as soon as one of them failed or was killed) and for a time
//! (`--delay`, `--at`), after which it queues like any other. A dependency that is a job of
//! the batch system the waiting task is placed on too (two `--on slurm` shells) is handed over
//! to that system as soon as it has a job: the waiting task queues for its group's turn, and
//! its job is submitted to wait for the other's ([`task_core::BatchJob::after`]).
//!
//! A task that waits has its start, environment included, written to `{id}.queued.json` (a
//! private file, like every file of the session) and its place in its record ([`Placement`]).
//! Most waiting tasks are kept that way only: their launcher described them without
//! registering anything ([`task_core::Launch::prepare`]), their record says `pending` and
//! queued, and the queue holds a few words of each (id, class, owner, place); at its turn the
//! engine launches the task under its id from the kept start ([`Turns::launch_kept`]), so a
//! waiting task holds no executor state, registry entry or record book. A task whose launcher
//! must register it at once (a shell with a stdin pipe, an agent) is registered `pending` and
//! the queue holds the work that starts it until its turn. Either way the kept start is removed
//! before the task runs, so a supervisor that dies leaves every waiting task to its successor,
//! which queues each again under its id in the same order, and none twice.
//!
//! Times come from the supervisor's clock plus `clock_offset_ms` of the configuration (0 but in
//! tests, which move the clock forward without waiting). A timer sleeps until the earliest
//! scheduled start; nothing polls.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use task_core::{
    Admission, BatchDependency, Delivery, EndReason, Notification, Priority, Registry, TaskId,
    TaskStatus, TaskType, summary,
};
use tokio::sync::Notify;

use crate::error::{Error, Result};
use crate::guard as lock;
use crate::paths::SessionPaths;
use crate::protocol::Start;
use crate::ready::Readiness;
use crate::record;

pub use crate::placement::{DEFAULT_GROUP, MAX_GROUP_BYTES, Placement, validate_group};
pub use crate::schedule::Schedule;

/// The order in which `records`' waiting tasks will start, per group: each waiting task's
/// 1-based position among the waiting tasks of its group (what `ps` shows).
pub fn positions<'a>(
    records: impl IntoIterator<Item = &'a record::TaskRecord>,
) -> HashMap<TaskId, usize> {
    let mut by_group: HashMap<&str, Vec<(&Placement, TaskId)>> = HashMap::new();
    for record in records {
        if let Some(placement) = record.queue.as_ref()
            && record.waits_in_queue()
        {
            by_group
                .entry(placement.group.as_str())
                .or_default()
                .push((placement, record.id()));
        }
    }
    let mut positions = HashMap::new();
    for (_, mut waiting) in by_group {
        waiting.sort_by_key(|(placement, _)| placement.key());
        for (index, (_, id)) in waiting.into_iter().enumerate() {
            positions.insert(id, index + 1);
        }
    }
    positions
}

/// The class a task is admitted in ([`Admission::class`]): its executor's word for it.
type Class = &'static str;

/// The default parallelism of a group with no limit of its own, per class of task, as a
/// session's settings set it (`parallel_{class}`; 0: unlimited); a class the settings do not
/// name has its executor's default ([`Admission::default_parallel`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClassLimits(BTreeMap<String, u32>);

impl ClassLimits {
    /// Sets the limit of `class` (0: unlimited).
    pub fn set(&mut self, class: &str, limit: u32) {
        self.0.insert(class.to_owned(), limit);
    }

    /// The limit of tasks admitted as `admission`.
    pub fn of(&self, admission: Admission) -> u32 {
        self.0
            .get(admission.class)
            .copied()
            .unwrap_or(admission.default_parallel)
    }
}

/// The explicit group limits of `{session}/groups.json`, and which groups are paused.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupLimits {
    /// Each group's limit (0: unlimited).
    pub groups: BTreeMap<String, u32>,
    /// The paused groups: none of their waiting tasks starts until they are resumed. Absent
    /// from files written before groups could be paused.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub paused: BTreeSet<String>,
}

impl GroupLimits {
    /// Reads the session's limits (none if the file is absent).
    ///
    /// # Errors
    /// The file cannot be read or is not a limits document.
    pub fn read(paths: &SessionPaths) -> Result<Self> {
        let path = paths.groups();
        match task_output::open::read_untrusted(&path, crate::paths::MAX_STATE_FILE_BYTES) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| Error::CorruptState {
                path,
                reason: e.to_string(),
            }),
            Err(task_output::OutputError::NotFound { .. }) => Ok(Self::default()),
            Err(e) => Err(Error::io("read", &path, e.into())),
        }
    }

    fn write(&self, paths: &SessionPaths) -> Result<()> {
        let body = serde_json::to_vec_pretty(self).map_err(|e| Error::Invalid(e.to_string()))?;
        record::replace(paths, &paths.groups(), &body)
    }
}

/// What the queue asks of the engine when a task leaves it.
pub(crate) trait Turns: Send + Sync {
    /// Starts the work of a registered task released by the queue (the engine then records it
    /// `running`).
    fn start(&self, id: TaskId, work: Work);

    /// Launches at its turn a task kept on disk only (its start in `{id}.queued.json`, which
    /// this removes before the task runs; its placement in the queue's [`Placements`] by now)
    /// and starts it, or ends it `failed` when it cannot be launched any more. False when it
    /// could do neither (its record unreadable): nothing of it is registered, so its slot is
    /// the caller's to free.
    fn launch_kept(&self, id: TaskId, background: bool) -> bool;

    /// Registers, from its record, a task kept on disk only, for the caller to end it without
    /// running; whether it could (else it is left as its record says, for a successor).
    fn register_kept(&self, id: TaskId, background: bool) -> bool;
}

/// The work that starts a registered task.
pub(crate) type Work = Box<dyn FnOnce() + Send>;

/// A task the queue holds.
struct Waiter {
    id: TaskId,
    admission: Admission,
    background: bool,
    /// The work that starts a registered task; `None` for a task kept on disk only, launched
    /// at its turn.
    work: Option<Work>,
    /// The agent that owns a task kept on disk only (the registry knows the others' owners).
    owner: Option<TaskId>,
}

/// Where a held task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spot {
    /// In its group's ready queue: it starts on its turn.
    Ready,
    /// Waiting for its dependencies or its time.
    Held,
}

/// What [`Queue::admit`] decided.
pub(crate) enum Admitted {
    /// Start it now.
    Now(Option<Work>),
    /// It waits; the queue starts it.
    Queued,
}

/// The queue of one supervisor.
pub(crate) struct Queue {
    paths: SessionPaths,
    registry: Arc<Registry>,
    defaults: ClassLimits,
    /// Whether some registered type of task has a default limit: a start may have to wait.
    limited_by_default: bool,
    clock_offset_ms: u64,
    turns: Arc<dyn Turns>,
    placements: Arc<Placements>,
    /// The readiness checks of the tasks not started yet: one that ends without ever running
    /// has its check dropped.
    readiness: Arc<Readiness>,
    state: Mutex<State>,
    /// Wakes the timer: a new scheduled task, or one that left.
    timer: Notify,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Queue")
    }
}

/// Every task's [`Placement`], read by the record writer.
#[derive(Debug, Default)]
pub(crate) struct Placements(Mutex<HashMap<TaskId, Placement>>);

impl Placements {
    /// The placement of `id`, if it has one.
    pub(crate) fn get(&self, id: &TaskId) -> Option<Placement> {
        lock(&self.0).get(id).cloned()
    }

    /// Drops `id`'s (evicted).
    pub(crate) fn forget(&self, id: &TaskId) {
        lock(&self.0).remove(id);
    }

    fn set(&self, id: TaskId, placement: Placement) {
        lock(&self.0).insert(id, placement);
    }

    fn stop_waiting(&self, id: &TaskId) {
        if let Some(placement) = lock(&self.0).get_mut(id) {
            placement.waiting = false;
        }
    }
}

#[derive(Default)]
struct State {
    limits: GroupLimits,
    next_seq: u64,
    /// Tasks started through the queue and not ended, with their group and class.
    running: HashMap<TaskId, (String, Class)>,
    counts: HashMap<(String, Class), usize>,
    /// How many tasks of each group run, every class together.
    group_counts: HashMap<String, usize>,
    /// Each group's tasks waiting only for their turn.
    ready: HashMap<String, BTreeMap<(Reverse<i32>, u64), Waiter>>,
    /// Tasks waiting for dependencies or a time.
    held: HashMap<TaskId, Waiter>,
    /// Where each waiting task is, and its placement.
    spots: HashMap<TaskId, (Spot, Placement)>,
    /// The waiting tasks kept on disk only that an agent owns, by agent.
    kept_owned: HashMap<TaskId, HashSet<TaskId>>,
    /// Set while a restarted supervisor queues its predecessor's tasks: nothing starts yet.
    paused: bool,
}

/// A dependency's state.
enum Dependency {
    Done,
    Waiting,
    Failed,
    /// A job of the batch system the dependent is placed on: that system waits for it.
    HandedOver(BatchDependency),
}

impl Queue {
    /// A queue with the session's limits (`groups.json`) and class defaults, starting released
    /// tasks through `turns`. Call [`Queue::spawn_timer`] inside the runtime.
    pub(crate) fn new(
        paths: SessionPaths,
        registry: Arc<Registry>,
        defaults: ClassLimits,
        clock_offset_ms: u64,
        turns: Arc<dyn Turns>,
        placements: Arc<Placements>,
        readiness: Arc<Readiness>,
    ) -> Result<Arc<Self>> {
        let limits = GroupLimits::read(&paths)?;
        // Whether a task of some type registered may wait for room by default.
        let limited_by_default = TaskType::ALL.iter().any(|&task_type| {
            registry
                .executor(task_type)
                .is_some_and(|executor| defaults.of(executor.admission(task_type)) != 0)
        });
        Ok(Arc::new(Self {
            paths,
            registry,
            defaults,
            limited_by_default,
            clock_offset_ms,
            turns,
            placements,
            readiness,
            state: Mutex::new(State {
                limits,
                ..State::default()
            }),
            timer: Notify::new(),
        }))
    }

    /// The supervisor's clock for schedules (ms epoch).
    fn now_ms(&self) -> u64 {
        task_core::now_ms().saturating_add(self.clock_offset_ms)
    }

    /// Whether a start with `schedule` might wait, whatever its type (so a copy of the start
    /// must be kept for a successor in case it does).
    pub(crate) fn may_wait(&self, schedule: &Schedule) -> bool {
        if !schedule.after.is_empty() || schedule.delay_ms.is_some() || schedule.at_ms.is_some() {
            return true;
        }
        let group = schedule.group.as_deref().unwrap_or(DEFAULT_GROUP);
        let state = lock(&self.state);
        if state.limits.paused.contains(group) {
            return true;
        }
        match state.limits.groups.get(group) {
            Some(&limit) => limit != 0,
            None => self.limited_by_default,
        }
    }

    /// Checks the dependencies a start names: each must be a task of the session.
    ///
    /// # Errors
    /// [`Error::UnknownTask`] for the first that is not.
    pub(crate) fn check_after(&self, after: &[TaskId]) -> Result<()> {
        for id in after {
            if self.registry.get(id).is_none() {
                record::read(&self.paths, id)?;
            }
        }
        Ok(())
    }

    /// The placement a new task with `schedule` gets (its arrival numbered now).
    pub(crate) fn place(&self, schedule: &Schedule) -> Placement {
        let now = self.now_ms();
        let not_before = match (schedule.at_ms, schedule.delay_ms) {
            (None, None) => None,
            (at, delay) => Some(
                at.unwrap_or(0)
                    .max(delay.map_or(0, |d| now.saturating_add(d))),
            ),
        };
        let mut state = lock(&self.state);
        let seq = state.next_seq;
        state.next_seq += 1;
        Placement {
            group: schedule
                .group
                .clone()
                .unwrap_or_else(|| DEFAULT_GROUP.into()),
            priority: schedule.priority,
            seq,
            after: schedule.after.clone(),
            not_before_ms: not_before,
            waiting: false,
        }
    }

    /// How a task of `task_type` is admitted: its executor's class.
    fn admission(&self, task_type: TaskType) -> Admission {
        self.registry
            .executor(task_type)
            .map_or(Admission::UNCLASSED, |executor| {
                executor.admission(task_type)
            })
    }

    /// Whether a task at `placement`, admitted as `admission`, may start now.
    fn is_free(&self, state: &State, placement: &Placement, admission: Admission) -> bool {
        !state.paused
            && !state.limits.paused.contains(&placement.group)
            && placement.after.is_empty()
            && placement.not_before_ms.is_none_or(|t| t <= self.now_ms())
            && self.has_room(state, &placement.group, admission)
    }

    /// Whether a task of `task_type` at `placement` would wait if admitted now.
    pub(crate) fn would_wait(&self, task_type: TaskType, placement: &Placement) -> bool {
        let admission = self.admission(task_type);
        !self.is_free(&lock(&self.state), placement, admission)
    }

    /// Takes a registered task with its `placement`: starts it now if nothing holds it back
    /// ([`Admitted::Now`], the caller runs the work), else keeps its work (and `start`, when
    /// given, in `{id}.queued.json` for a successor) and starts it on its turn.
    pub(crate) fn admit(
        &self,
        id: TaskId,
        task_type: TaskType,
        background: bool,
        mut placement: Placement,
        work: Option<Work>,
        start: Option<&Start>,
    ) -> Admitted {
        let admission = self.admission(task_type);
        let mut state = lock(&self.state);
        if work.is_none() || self.is_free(&state, &placement, admission) {
            // A task its launcher started already (a monitor) takes a slot; it never waits.
            if !placement.is_plain() {
                self.placements.set(id, placement.clone());
            }
            self.occupy(&mut state, id, placement.group, admission.class);
            return Admitted::Now(work);
        }
        placement.waiting = true;
        if let Some(start) = start
            && let Err(error) = keep_start(&self.paths, id, start, &placement, None)
        {
            tracing::warn!(task = %id, %error, "cannot keep its queued start: a successor cannot run it");
        }
        self.placements.set(id, placement.clone());
        let waiter = Waiter {
            id,
            admission,
            background,
            work,
            owner: None,
        };
        self.hold(&mut state, waiter, placement);
        Admitted::Queued
    }

    /// Takes a task kept on disk only (registered nowhere; its record written `pending` at
    /// `placement`, waiting, and its start kept with [`keep_start`]): true if it waits (the
    /// queue launches it at its turn through [`Turns::launch_kept`]); false if nothing holds it
    /// back, its slot then taken for the caller to launch it now.
    pub(crate) fn admit_kept(
        &self,
        id: TaskId,
        background: bool,
        owner: Option<TaskId>,
        placement: Placement,
    ) -> bool {
        let admission = self.admission(id.task_type());
        let mut state = lock(&self.state);
        if self.is_free(&state, &placement, admission) {
            self.placements.set(
                id,
                Placement {
                    waiting: false,
                    ..placement.clone()
                },
            );
            self.occupy(&mut state, id, placement.group, admission.class);
            return false;
        }
        if let Some(agent) = owner {
            state.kept_owned.entry(agent).or_default().insert(id);
        }
        let waiter = Waiter {
            id,
            admission,
            background,
            work: None,
            owner,
        };
        self.hold(&mut state, waiter, placement);
        true
    }

    /// Puts `waiter` in its group's queue, or with the held tasks when it waits for
    /// dependencies or a time.
    fn hold(&self, state: &mut State, waiter: Waiter, placement: Placement) {
        let id = waiter.id;
        let spot = if placement.after.is_empty() && placement.not_before_ms.is_none() {
            state
                .ready
                .entry(placement.group.clone())
                .or_default()
                .insert(placement.key(), waiter);
            Spot::Ready
        } else {
            state.held.insert(id, waiter);
            self.timer.notify_one();
            Spot::Held
        };
        state.spots.insert(id, (spot, placement));
    }

    /// Whether `group` has room for one more task admitted as `admission`.
    fn has_room(&self, state: &State, group: &str, admission: Admission) -> bool {
        match state.limits.groups.get(group) {
            Some(0) => true,
            Some(&limit) => state.group_counts.get(group).copied().unwrap_or(0) < limit as usize,
            None => match self.defaults.of(admission) {
                0 => true,
                limit => {
                    let key = (group.to_owned(), admission.class);
                    state.counts.get(&key).copied().unwrap_or(0) < limit as usize
                }
            },
        }
    }

    fn occupy(&self, state: &mut State, id: TaskId, group: String, class: Class) {
        *state.counts.entry((group.clone(), class)).or_default() += 1;
        *state.group_counts.entry(group.clone()).or_default() += 1;
        state.running.insert(id, (group, class));
    }

    /// Takes a waiting task out of the queue (to kill it): its work, which was never run, and
    /// whether its end is notified. `None` if the queue does not hold it (it started already),
    /// or held it kept on disk only and could not register it to end it.
    pub(crate) fn cancel(&self, id: &TaskId) -> Option<(Option<Work>, bool)> {
        let (waiter, placement) = {
            let mut state = lock(&self.state);
            take(&mut state, id)?
        };
        let registered = self.leave(&waiter, placement);
        forget_start(&self.paths, id);
        registered.then_some((waiter.work, waiter.background))
    }

    /// Notes that `waiter` left the queue without running (its placement no longer waiting),
    /// registering it first when it was kept on disk only; whether it is registered.
    fn leave(&self, waiter: &Waiter, placement: Placement) -> bool {
        if waiter.work.is_some() {
            self.placements.stop_waiting(&waiter.id);
            return true;
        }
        self.placements.set(
            waiter.id,
            Placement {
                waiting: false,
                ..placement
            },
        );
        let registered = self.turns.register_kept(waiter.id, waiter.background);
        if !registered {
            self.placements.forget(&waiter.id);
        }
        registered
    }

    /// Every task waiting in the queue (to kill them all).
    pub(crate) fn waiting(&self) -> Vec<TaskId> {
        lock(&self.state).spots.keys().copied().collect()
    }

    /// How many tasks wait in the queue.
    pub(crate) fn waiting_count(&self) -> usize {
        lock(&self.state).spots.len()
    }

    /// Whether `id` waits in the queue.
    pub(crate) fn holds(&self, id: &TaskId) -> bool {
        lock(&self.state).spots.contains_key(id)
    }

    /// The tasks owned by `agent_id` that wait kept on disk only (registered nowhere).
    pub(crate) fn kept_for(&self, agent_id: TaskId) -> Vec<TaskId> {
        lock(&self.state)
            .kept_owned
            .get(&agent_id)
            .map_or_else(Vec::new, |owned| owned.iter().copied().collect())
    }

    /// A task ended: its slot is free, and the tasks that wait for it may go (or fail).
    pub(crate) fn ended(&self, id: &TaskId) {
        let mut state = lock(&self.state);
        if let Some((group, class)) = state.running.remove(id) {
            if let Some(count) = state.group_counts.get_mut(&group) {
                *count = count.saturating_sub(1);
            }
            if let Some(count) = state.counts.get_mut(&(group, class)) {
                *count = count.saturating_sub(1);
            }
        }
        // Ended while waiting (killed by its owner's end): nothing of it is left to start.
        let gone = take(&mut state, id).map(|(waiter, _)| waiter);
        drop(state);
        if gone.is_some() {
            forget_start(&self.paths, id);
            self.readiness.forget(id);
        }
        self.pump();
    }

    /// Sets `group`'s limit (0: unlimited), keeps it in `groups.json` and starts what now fits.
    ///
    /// # Errors
    /// A bad group name; `groups.json` cannot be written (the limit is not changed).
    pub(crate) fn set_limit(&self, group: &str, parallel: u32) -> Result<()> {
        self.change_limits(group, |limits| {
            limits.groups.insert(group.to_owned(), parallel);
        })
    }

    /// Pauses `group` (none of its waiting tasks starts; its running tasks go on) or resumes
    /// it, keeps that in `groups.json` and starts what now fits.
    ///
    /// # Errors
    /// A bad group name; `groups.json` cannot be written (nothing is changed).
    pub(crate) fn set_paused(&self, group: &str, paused: bool) -> Result<()> {
        self.change_limits(group, |limits| {
            if paused {
                limits.paused.insert(group.to_owned());
            } else {
                limits.paused.remove(group);
            }
        })
    }

    /// Applies `change` to the limits of `group`'s session, written to `groups.json` before
    /// they take effect, then starts what now fits.
    fn change_limits(&self, group: &str, change: impl FnOnce(&mut GroupLimits)) -> Result<()> {
        validate_group(group)?;
        {
            let mut state = lock(&self.state);
            let mut limits = state.limits.clone();
            change(&mut limits);
            limits.write(&self.paths)?;
            state.limits = limits;
        }
        self.pump();
        Ok(())
    }

    /// Holds every start until [`Queue::resume`] (a restarted supervisor queuing its
    /// predecessor's tasks, so none starts before an earlier one is queued).
    pub(crate) fn pause(&self) {
        lock(&self.state).paused = true;
    }

    /// Ends [`Queue::pause`] and starts what fits.
    pub(crate) fn resume(&self) {
        lock(&self.state).paused = false;
        self.pump();
    }

    /// Continues the arrival numbering of a predecessor: later tasks come after `seq`.
    pub(crate) fn continue_after(&self, seq: u64) {
        let mut state = lock(&self.state);
        state.next_seq = state.next_seq.max(seq + 1);
    }

    /// Moves held tasks whose dependencies completed and whose time came to their group's
    /// queue, ends those whose dependency failed, then starts every task that fits, in order.
    pub(crate) fn pump(&self) {
        let mut failed = Vec::new();
        let mut released = Vec::new();
        {
            let mut state = lock(&self.state);
            if state.paused {
                return;
            }
            let now = self.now_ms();
            let held: Vec<TaskId> = state.held.keys().copied().collect();
            for id in held {
                let Some((_, placement)) = state.spots.get(&id) else {
                    continue;
                };
                let mut verdict = Dependency::Done;
                let mut handed_over = Vec::new();
                let engine = self
                    .registry
                    .get(&id)
                    .and_then(|s| s.batch().map(|b| b.engine.clone()));
                for dep in &placement.after {
                    match self.dependency(dep, engine.as_deref()) {
                        Dependency::Done => {}
                        Dependency::HandedOver(job) => handed_over.push(job),
                        Dependency::Waiting => verdict = Dependency::Waiting,
                        Dependency::Failed => {
                            verdict = Dependency::Failed;
                            failed.push((id, *dep));
                            break;
                        }
                    }
                }
                let due = placement.not_before_ms.is_none_or(|t| t <= now);
                match verdict {
                    Dependency::Done if due => {
                        if !handed_over.is_empty() {
                            hand_over(&self.registry, &id, handed_over);
                        }
                        let placement = placement.clone();
                        if let Some(waiter) = state.held.remove(&id) {
                            state.spots.insert(id, (Spot::Ready, placement.clone()));
                            state
                                .ready
                                .entry(placement.group.clone())
                                .or_default()
                                .insert(placement.key(), waiter);
                        }
                    }
                    _ => {}
                }
            }
            for (id, dependency) in failed {
                if let Some((waiter, placement)) = take(&mut state, &id) {
                    released.push(Release::DependencyFailed {
                        waiter,
                        placement,
                        dependency,
                    });
                }
            }
            let groups: Vec<String> = state.ready.keys().cloned().collect();
            for group in groups {
                self.release_ready(&mut state, &group, &mut released);
            }
        }
        for release in released {
            match release {
                Release::Start(id, work) => {
                    forget_start(&self.paths, &id);
                    self.placements.stop_waiting(&id);
                    self.turns.start(id, work);
                }
                Release::Launch {
                    id,
                    background,
                    placement,
                } => {
                    if let Some(placement) = placement {
                        self.placements.set(
                            id,
                            Placement {
                                waiting: false,
                                ..placement
                            },
                        );
                    }
                    if !self.turns.launch_kept(id, background) {
                        self.placements.forget(&id);
                        self.ended(&id);
                    }
                }
                Release::DependencyFailed {
                    waiter,
                    placement,
                    dependency,
                } => {
                    let id = waiter.id;
                    let registered = self.leave(&waiter, placement);
                    forget_start(&self.paths, &id);
                    self.readiness.forget(&id);
                    if !registered {
                        continue;
                    }
                    let delivery = if waiter.background {
                        Delivery::Queue(Priority::Later)
                    } else {
                        Delivery::Silent
                    };
                    end_unstarted(
                        &self.registry,
                        &id,
                        TaskStatus::Failed,
                        &EndReason::DependencyFailed { id: dependency },
                        delivery,
                    );
                    // Dropped only once ended: a launcher may end a task whose work is dropped
                    // unrun (a shell's "never started").
                    drop(waiter.work);
                }
            }
        }
    }

    /// Starts the tasks of `group`'s queue that fit, in order.
    fn release_ready(&self, state: &mut State, group: &str, released: &mut Vec<Release>) {
        if state.limits.paused.contains(group) {
            return;
        }
        let explicit = state.limits.groups.contains_key(group);
        loop {
            // With an explicit limit every class shares it: a full group starts nothing.
            if explicit && !self.has_room(state, group, Admission::UNCLASSED) {
                return;
            }
            let Some(queue) = state.ready.get(group) else {
                return;
            };
            // The head, or with class defaults the first task whose class has room.
            let next = queue
                .iter()
                .find(|(_, waiter)| self.has_room(state, group, waiter.admission))
                .map(|(key, _)| *key);
            let Some(key) = next else {
                return;
            };
            let Some(mut waiter) = state.ready.get_mut(group).and_then(|q| q.remove(&key)) else {
                return;
            };
            if state.ready.get(group).is_some_and(BTreeMap::is_empty) {
                state.ready.remove(group);
            }
            disown(state, &waiter);
            let placement = state
                .spots
                .remove(&waiter.id)
                .map(|(_, placement)| placement);
            self.occupy(state, waiter.id, group.to_owned(), waiter.admission.class);
            released.push(match waiter.work.take() {
                Some(work) => Release::Start(waiter.id, work),
                None => Release::Launch {
                    id: waiter.id,
                    background: waiter.background,
                    placement,
                },
            });
        }
    }

    /// Whether `id` completed, may still, or failed (or is unknown: pruned since); or, for a
    /// dependent placed on batch system `engine`, whether `id` is a live job there to hand over.
    fn dependency(&self, id: &TaskId, engine: Option<&str>) -> Dependency {
        let status = match self.registry.get(id) {
            Some(state) => {
                if let (Some(engine), Some(batch)) = (engine, state.batch())
                    && batch.engine == engine
                    && let Some(job_id) = &batch.job_id
                    && !state.status().is_terminal()
                {
                    return Dependency::HandedOver(BatchDependency {
                        task: *id,
                        job_id: job_id.clone(),
                    });
                }
                state.status()
            }
            None => match record::read(&self.paths, id) {
                Ok(record) => record.status(),
                Err(_) => return Dependency::Failed,
            },
        };
        match status {
            TaskStatus::Completed => Dependency::Done,
            TaskStatus::Failed | TaskStatus::Killed => Dependency::Failed,
            _ => Dependency::Waiting,
        }
    }

    /// `id` changed (its batch job became known): the tasks held for it may go now.
    pub(crate) fn progressed(&self, id: &TaskId) {
        let waited_for = {
            let state = lock(&self.state);
            state.held.keys().any(|held| {
                state
                    .spots
                    .get(held)
                    .is_some_and(|(_, placement)| placement.after.contains(id))
            })
        };
        if waited_for {
            self.pump();
        }
    }

    /// The earliest time a held task waits for.
    fn next_due(&self) -> Option<u64> {
        let state = lock(&self.state);
        state
            .held
            .keys()
            .filter_map(|id| state.spots.get(id)?.1.not_before_ms)
            .min()
    }

    /// Runs the timer: sleeps until the earliest scheduled start (or a change), then lets what
    /// is due go.
    pub(crate) fn spawn_timer(self: &Arc<Self>) {
        let queue = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let wake = queue.timer.notified();
                match queue.next_due() {
                    Some(due) => {
                        let wait = Duration::from_millis(due.saturating_sub(queue.now_ms()));
                        tokio::select! {
                            () = tokio::time::sleep(wait) => queue.pump(),
                            () = wake => {}
                        }
                    }
                    None => wake.await,
                }
            }
        });
    }
}

/// What the pump does once it let go of the lock.
enum Release {
    /// Start a registered task.
    Start(TaskId, Work),
    /// Launch a task kept on disk only (at its placement, for its records).
    Launch {
        id: TaskId,
        background: bool,
        placement: Option<Placement>,
    },
    /// End a task whose dependency failed.
    DependencyFailed {
        waiter: Waiter,
        placement: Placement,
        dependency: TaskId,
    },
}

/// Gives the batch system the dependencies of `id` it waits for itself.
fn hand_over(registry: &Registry, id: &TaskId, jobs: Vec<BatchDependency>) {
    let updated = registry.update(id, |state| {
        let mut next = state.clone();
        next.batch_mut()?.after = jobs.clone();
        Some(next)
    });
    if let Err(error) = updated {
        tracing::debug!(task = %id, %error, "it ended before its dependencies were handed over");
    }
}

/// Takes `id` out of the queue, wherever it waits, with its placement.
fn take(state: &mut State, id: &TaskId) -> Option<(Waiter, Placement)> {
    let (spot, placement) = state.spots.remove(id)?;
    let waiter = match spot {
        Spot::Held => state.held.remove(id),
        Spot::Ready => {
            let queue = state.ready.get_mut(&placement.group)?;
            let waiter = queue.remove(&placement.key());
            if queue.is_empty() {
                state.ready.remove(&placement.group);
            }
            waiter
        }
    }?;
    disown(state, &waiter);
    Some((waiter, placement))
}

/// Drops `waiter`, which left the queue, from its owner's kept tasks.
fn disown(state: &mut State, waiter: &Waiter) {
    if let Some(agent) = waiter.owner
        && let Some(owned) = state.kept_owned.get_mut(&agent)
    {
        owned.remove(&waiter.id);
        if owned.is_empty() {
            state.kept_owned.remove(&agent);
        }
    }
}

/// Ends a task that never ran: `to` with `reason`, its one notification sent with `delivery`.
pub(crate) fn end_unstarted(
    registry: &Registry,
    id: &TaskId,
    to: TaskStatus,
    reason: &EndReason,
    delivery: Delivery,
) {
    match registry.transition_with(id, to, |state| state.record_end(reason)) {
        Ok(state) => {
            let text =
                summary::never_started(state.base.task_type, &state.base.description, reason);
            let note = Notification::for_task(&state, to.terminal(), text);
            registry.notify_once(id, note, delivery);
        }
        Err(error) => tracing::debug!(task = %id, %error, "it ended before the queue ended it"),
    }
}

/// What `{id}.queued.json` holds: the start, and the task's place.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Kept {
    /// The start as the client sent it.
    pub start: Start,
    /// Its place in the queue.
    pub placement: Placement,
    /// When the task was made (its `startTime`), for a task kept on disk only: it keeps it
    /// when it is registered at its turn. Absent from files of registered tasks and from
    /// files written before tasks were kept on disk only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_ms: Option<u64>,
}

/// Writes the start of a waiting task, for its turn (a task kept on disk only) and for a
/// successor.
///
/// # Errors
/// The file cannot be written.
pub(crate) fn keep_start(
    paths: &SessionPaths,
    id: TaskId,
    start: &Start,
    placement: &Placement,
    created_ms: Option<u64>,
) -> Result<()> {
    let kept = Kept {
        start: start.clone(),
        placement: placement.clone(),
        created_ms,
    };
    let body = serde_json::to_vec(&kept).map_err(|e| Error::Invalid(e.to_string()))?;
    record::replace(paths, &paths.queued_start(&id), &body)
}

/// Removes a task's kept start: it runs (or ended) now, so no successor may start it again.
fn forget_start(paths: &SessionPaths, id: &TaskId) {
    match std::fs::remove_file(paths.queued_start(id)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => tracing::warn!(task = %id, %error, "cannot remove its queued start"),
    }
}

/// The kept start of `id`, if a predecessor left one.
pub(crate) fn kept_start(paths: &SessionPaths, id: &TaskId) -> Option<Kept> {
    let path = paths.queued_start(id);
    let bytes =
        task_output::open::read_untrusted(&path, crate::wire::MAX_REQUEST_BYTES as u64).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(kept) => Some(kept),
        Err(error) => {
            tracing::warn!(task = %id, %error, "its queued start is unreadable");
            None
        }
    }
}

/// Removes the kept start of a task a successor could not queue again.
pub(crate) fn drop_kept(paths: &SessionPaths, id: &TaskId) {
    forget_start(paths, id);
}

/// Parses `--at`: RFC 3339 (`2026-05-01T14:30:00Z`, any offset) or `HH:MM` (local time, today,
/// or tomorrow if that has passed at `now_ms`); ms since the epoch.
///
/// # Errors
/// Neither form, or a time out of range.
pub fn parse_at(text: &str, now_ms: u64) -> std::result::Result<u64, String> {
    use chrono::{Local, NaiveTime, TimeZone};
    let text = text.trim();
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(text) {
        return u64::try_from(at.timestamp_millis())
            .map_err(|_| format!("{text:?} is before 1970"));
    }
    let time = NaiveTime::parse_from_str(text, "%H:%M")
        .map_err(|_| format!("{text:?}: expected HH:MM or an RFC 3339 time"))?;
    let now = i64::try_from(now_ms).map_err(|_| "the clock is out of range".to_owned())?;
    let now = Local
        .timestamp_millis_opt(now)
        .single()
        .ok_or_else(|| "the clock is out of range".to_owned())?;
    let today = now.date_naive().and_time(time);
    let mut at = Local
        .from_local_datetime(&today)
        .earliest()
        .ok_or_else(|| format!("{text:?} does not exist today (a clock change)"))?;
    if at <= now {
        at += chrono::Duration::days(1);
    }
    u64::try_from(at.timestamp_millis()).map_err(|_| format!("{text:?} is out of range"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn at_takes_rfc3339_or_a_local_hh_mm_in_the_next_day() {
        assert_eq!(parse_at("1970-01-01T00:00:01Z", 0).unwrap(), 1_000);
        assert_eq!(parse_at("1970-01-01T01:00:01+01:00", 0).unwrap(), 1_000);
        let now = 1_800_000_000_000;
        let at = parse_at("12:00", now).unwrap();
        assert!(at > now && at <= now + 24 * 3_600_000, "{at}");
        assert!(parse_at("25:00", now).is_err());
        assert!(parse_at("soon", now).is_err());
    }
}
