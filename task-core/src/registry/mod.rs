//! The registry: every live task, its lifecycle rules, the notified latch and eviction, and
//! ([`executor`]) the trait of the executors it dispatches kills and input to, which acts on
//! the registry in turn.

pub(crate) mod executor;

use std::fmt;
use std::sync::{Arc, OnceLock, Weak};

use dashmap::DashMap;
use dashmap::mapref::entry::Entry;
use futures_util::future::join_all;
use serde_json::{Map, Value};
use tokio::sync::broadcast;

use crate::config::millis;
use crate::event::{TaskEvent, TaskPatch};
use crate::input::{Input, InputError};
use crate::notification::{Notification, NotificationQueue, Priority};
use crate::slot::{Slot, SlotUpdate};
use crate::state::now_ms;
use crate::{RegistryConfig, StateError, TaskId, TaskState, TaskStatus, TaskType};
use executor::{KillError, KillOutcome, Task};

/// Why the registry refused a change. Nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// No task has this id (never registered, or evicted).
    #[error("no task with id {0}")]
    NotFound(TaskId),
    /// The lifecycle does not allow this status change (SPEC §2).
    #[error("task {id}: illegal transition {from} → {to}")]
    IllegalTransition {
        /// The task.
        id: TaskId,
        /// Its status.
        from: TaskStatus,
        /// The status asked for.
        to: TaskStatus,
    },
    /// An update tried to change a task's id or type.
    #[error("task {0}: an update cannot change a task's id or type")]
    IdentityChanged(TaskId),
    /// An update tried to clear the notified latch, which only ever goes from false to true.
    #[error("task {0}: the notified latch cannot be cleared")]
    LatchCleared(TaskId),
    /// The state is inconsistent (type and id or data disagree).
    #[error(transparent)]
    InvalidState(#[from] StateError),
    /// [`Registry::hold_with`] was called twice.
    #[error("the registry has a holder already")]
    HolderSet,
}

/// What [`Registry::register`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registration {
    /// A new task: `task_started` was emitted.
    Started,
    /// The id was already registered: its UI-held fields were carried forward and no
    /// `task_started` was emitted.
    Resumed,
}

/// What [`Registry::update`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum UpdateOutcome {
    /// The new state was stored; here it is.
    Written(Arc<TaskState>),
    /// The updater returned nothing: nothing was written and no subscriber was woken.
    Unchanged,
}

/// How a task's one notification is delivered by [`Registry::notify_once`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Queued for the model with this priority.
    Queue(Priority),
    /// Not shown to the model (a kill the caller asked for, a dream): only the latch is set
    /// and the `task_notification` event emitted.
    Silent,
}

/// What holds back the start of registered tasks (a host's queue): a kill of a task it holds
/// ends the task there, without ever running, instead of through its executor, whose kill of a
/// task not started yet would wait for a start that may be far off. Set with
/// [`Registry::hold_with`].
///
/// A holder may keep a task unregistered until its turn (the registry then does not know it):
/// a kill of an id the registry does not hold asks the holder too, and an agent's end kills
/// the tasks the holder keeps for it ([`Holder::held_for`]).
pub trait Holder: Send + Sync {
    /// Ends `id` `killed` if this holds its start (its work is then never run); whether it did.
    fn kill_held(&self, id: &TaskId) -> bool;

    /// The tasks owned by `agent_id` that this holds unregistered (an owner's end kills them
    /// with the tasks the registry holds). The default: none.
    fn held_for(&self, agent_id: TaskId) -> Vec<TaskId> {
        let _ = agent_id;
        Vec::new()
    }
}

/// Every live task of a process. Share it as `Arc<Registry>`; every method takes `&self`.
///
/// Each task sits in its own slot; [`update`](Registry::update) is a compare-and-set on that
/// slot, so no caller code runs under a lock and no write is based on a stale state.
pub struct Registry {
    tasks: DashMap<TaskId, Arc<Slot>>,
    executors: DashMap<TaskType, Arc<dyn Task>>,
    notifications: NotificationQueue,
    events: broadcast::Sender<TaskEvent>,
    config: RegistryConfig,
    holder: OnceLock<Weak<dyn Holder>>,
}

impl fmt::Debug for Registry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("tasks", &self.tasks.len())
            .field(
                "executors",
                &self.executors.iter().map(|e| *e.key()).collect::<Vec<_>>(),
            )
            .field("notifications", &self.notifications.len())
            .field("config", &self.config)
            .finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry::new(RegistryConfig::default())
    }
}

impl Registry {
    /// An empty registry.
    pub fn new(config: RegistryConfig) -> Self {
        let (events, _) = broadcast::channel(config.event_capacity.max(1));
        Registry {
            tasks: DashMap::new(),
            executors: DashMap::new(),
            notifications: NotificationQueue::new(),
            events,
            config,
            holder: OnceLock::new(),
        }
    }

    /// Sets what holds back the start of tasks ([`Holder`]), once: every kill (a caller's, an
    /// owner's end) asks it first. Held weakly: the holder may own the registry.
    ///
    /// # Errors
    /// [`RegistryError::HolderSet`] when a holder was set already.
    pub fn hold_with(&self, holder: Weak<dyn Holder>) -> Result<(), RegistryError> {
        self.holder
            .set(holder)
            .map_err(|_| RegistryError::HolderSet)
    }

    /// The registry's timing.
    pub fn config(&self) -> &RegistryConfig {
        &self.config
    }

    /// Inserts a task. If its id is already registered (a resume), `retain` and `startTime`
    /// are carried forward from the old state, and whatever else the executor of its type
    /// keeps ([`Task::carry_forward`]: an agent's messages), and no `task_started` is emitted;
    /// otherwise `task_started` is emitted.
    pub fn register(&self, state: TaskState) -> Result<Registration, RegistryError> {
        state.validate()?;
        let started = TaskEvent::TaskStarted {
            task_id: state.id(),
            tool_use_id: state.base.tool_use_id.clone(),
            description: state.base.description.clone(),
            task_type: state.base.task_type,
        };
        let registration = match self.tasks.entry(state.id()) {
            Entry::Occupied(entry) => {
                let executor = self.executor(state.base.task_type);
                entry.get().replace(|previous| {
                    let mut resumed = state.resumed_over(previous);
                    if let Some(executor) = &executor {
                        executor.carry_forward(&mut resumed, previous);
                    }
                    resumed
                });
                Registration::Resumed
            }
            Entry::Vacant(entry) => {
                entry.insert(Arc::new(Slot::new(state)));
                Registration::Started
            }
        };
        if registration == Registration::Started {
            self.emit(started);
        }
        Ok(registration)
    }

    /// The task's current state.
    pub fn get(&self, id: &TaskId) -> Option<Arc<TaskState>> {
        self.slot(id)?.load()
    }

    /// The current state of every task, in no particular order.
    pub fn snapshot(&self) -> Vec<Arc<TaskState>> {
        let slots: Vec<_> = self.tasks.iter().map(|e| Arc::clone(e.value())).collect();
        slots.iter().filter_map(|slot| slot.load()).collect()
    }

    /// How many tasks are registered.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether no task is registered.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// Updates a task: `updater` gets the current state and returns a new one, or `None` for
    /// "unchanged" (nothing written, no event).
    ///
    /// This is a compare-and-set: `updater` runs without any lock held and, if another writer
    /// got in first, runs again on the fresh state, so it must be a pure function of its
    /// argument. The lifecycle is enforced on the result: a status change must be allowed
    /// (SPEC §2), id and type cannot change, the notified latch cannot be cleared. On entering
    /// `running` `started_at` is set if the updater left it empty; on entering
    /// a terminal status `end_time` is set if the updater left it empty, and the eviction grace
    /// of the type's executor applies ([`Task::eviction_grace`]). A change of status or end time
    /// emits `task_updated`.
    pub fn update(
        &self,
        id: &TaskId,
        mut updater: impl FnMut(&TaskState) -> Option<TaskState>,
    ) -> Result<UpdateOutcome, RegistryError> {
        let slot = self.slot(id).ok_or(RegistryError::NotFound(*id))?;
        let outcome = slot.update(
            |current| match updater(current) {
                None => Ok(None),
                Some(next) => self.checked(current, next).map(Some),
            },
            |previous, current| self.emit_status_change(previous, current),
        )?;
        match outcome {
            SlotUpdate::Written(current) => Ok(UpdateOutcome::Written(current)),
            SlotUpdate::Unchanged => Ok(UpdateOutcome::Unchanged),
            SlotUpdate::Retired => Err(RegistryError::NotFound(*id)),
        }
    }

    /// Moves a task to status `to`; an illegal transition is an error and changes nothing.
    pub fn transition(&self, id: &TaskId, to: TaskStatus) -> Result<Arc<TaskState>, RegistryError> {
        self.transition_with(id, to, |_| {})
    }

    /// Moves a task to status `to` and applies `edit` in the same atomic step (an exit code,
    /// a result, `notified = true` for a kill). `edit` may run more than once.
    pub fn transition_with(
        &self,
        id: &TaskId,
        to: TaskStatus,
        mut edit: impl FnMut(&mut TaskState),
    ) -> Result<Arc<TaskState>, RegistryError> {
        let mut refused = None;
        let outcome = self.update(id, |current| {
            let from = current.status();
            if !from.can_transition_to(to) {
                refused = Some(RegistryError::IllegalTransition { id: *id, from, to });
                return None;
            }
            let mut next = current.clone();
            next.base.status = to;
            edit(&mut next);
            Some(next)
        })?;
        match (outcome, refused) {
            (UpdateOutcome::Written(state), _) => Ok(state),
            (UpdateOutcome::Unchanged, refused) => {
                Err(refused.unwrap_or(RegistryError::NotFound(*id)))
            }
        }
    }

    /// The one-way latch: sets `notified` and returns true for exactly one caller ever per
    /// task; every other caller (and an unknown id) gets false.
    pub fn mark_notified(&self, id: &TaskId) -> bool {
        let outcome = self.update(id, |current| {
            (!current.base.notified).then(|| {
                let mut next = current.clone();
                next.base.notified = true;
                next
            })
        });
        matches!(outcome, Ok(UpdateOutcome::Written(_)))
    }

    /// Sends a task's one notification: if this caller wins the latch, queues `notification`
    /// (unless `delivery` is silent), emits `task_notification` and returns true; otherwise
    /// does nothing and returns false.
    ///
    /// A queued notification is in the queue before anyone can see the latch set: whoever
    /// reads the task as notified and then drains the queue finds it (or it was drained).
    pub fn notify_once(&self, id: &TaskId, notification: Notification, delivery: Delivery) -> bool {
        let event = TaskEvent::TaskNotification {
            task_id: *id,
            tool_use_id: notification.tool_use_id.clone(),
            status: notification.status.map(Into::into),
            output_file: notification.output_file.to_string_lossy().into_owned(),
            summary: notification.summary.clone(),
            queued: matches!(delivery, Delivery::Queue(_)),
        };
        let won = match delivery {
            Delivery::Queue(priority) => {
                self.notifications
                    .enqueue_if_claimed(notification, priority, || self.mark_notified(id))
            }
            Delivery::Silent => self.mark_notified(id),
        };
        if won {
            self.emit(event);
        }
        won
    }

    /// Keeps a task (someone is looking at it) or lets it go: letting a finished task go gives
    /// it `panel_grace` before eviction.
    pub fn set_retained(&self, id: &TaskId, retain: bool) -> Result<(), RegistryError> {
        let grace_end = now_ms().saturating_add(millis(self.config.panel_grace));
        self.update(id, |current| {
            let mut next = current.clone();
            next.base.retain = retain;
            next.base.evict_after =
                (!retain && current.status().is_terminal()).then_some(grace_end);
            (next != *current).then_some(next)
        })?;
        Ok(())
    }

    /// Emits a `task_progress` event for a task with executor-specific `detail`.
    pub fn emit_progress(&self, id: &TaskId, detail: Map<String, Value>) {
        let tool_use_id = self.get(id).and_then(|s| s.base.tool_use_id.clone());
        self.emit(TaskEvent::TaskProgress {
            task_id: *id,
            tool_use_id,
            detail,
        });
    }

    /// Evicts a task now if it may leave (terminal, notified, not retained, past
    /// `evict_after`); returns whether it did. Its output file is left alone.
    pub fn evict(&self, id: &TaskId) -> bool {
        self.evict_at(id, now_ms(), |_| true)
    }

    /// Evicts a task as [`evict`](Registry::evict) does, but only if its state also passes
    /// `still` (is still the end a record on disk holds, say): a task resumed under its id
    /// since, or ended again, stays. One atomic step, so no resume can slip in between.
    pub fn evict_if(&self, id: &TaskId, still: impl FnOnce(&TaskState) -> bool) -> bool {
        self.evict_at(id, now_ms(), still)
    }

    /// Evicts every task that may leave; returns their ids.
    pub fn evict_expired(&self) -> Vec<TaskId> {
        let now = now_ms();
        let candidates: Vec<TaskId> = self
            .snapshot()
            .into_iter()
            .filter(|state| state.may_evict(now))
            .map(|state| state.id())
            .collect();
        candidates
            .into_iter()
            .filter(|id| self.evict_at(id, now, |_| true))
            .collect()
    }

    /// Makes `executor` the one [`kill`](Registry::kill) and the per-type policies
    /// ([`Task::eviction_grace`], [`Task::carry_forward`]) use for tasks of `task_type`.
    pub fn register_executor(&self, task_type: TaskType, executor: Arc<dyn Task>) {
        self.executors.insert(task_type, executor);
    }

    /// The executor registered for `task_type`, if any.
    pub fn executor(&self, task_type: TaskType) -> Option<Arc<dyn Task>> {
        self.executors
            .get(&task_type)
            .map(|entry| Arc::clone(entry.value()))
    }

    /// Kills a task through the executor registered for its type. A task that already ended
    /// is left alone ([`KillOutcome::AlreadyFinished`]), also when it ended while the executor
    /// was killing it (the executor then returns `Ok(())` and the state tells).
    ///
    /// A task this registry does not hold may be held unregistered by the [`Holder`], which
    /// then ends it.
    pub async fn kill(&self, id: &TaskId) -> Result<KillOutcome, KillError> {
        let holder = self.holder.get().and_then(Weak::upgrade);
        let Some(state) = self.get(id) else {
            return match holder {
                Some(holder) if holder.kill_held(id) => Ok(KillOutcome::Killed),
                _ => Err(KillError::NotFound(*id)),
            };
        };
        if state.status().is_terminal() {
            return Ok(KillOutcome::AlreadyFinished(state.status()));
        }
        if let Some(holder) = holder
            && holder.kill_held(id)
        {
            return Ok(KillOutcome::Killed);
        }
        let task_type = state.base.task_type;
        let executor = self
            .executor(task_type)
            .ok_or(KillError::NoExecutor(task_type))?;
        executor.kill(self, id).await?;
        // The task may have ended on its own between the check above and the executor's
        // kill: the state, not the executor's return, says which.
        Ok(match self.get(id).map(|s| s.status()) {
            Some(status) if status.is_terminal() && status != TaskStatus::Killed => {
                KillOutcome::AlreadyFinished(status)
            }
            _ => KillOutcome::Killed,
        })
    }

    /// Writes to the standard input of a live task through the executor registered for its
    /// type. A task that ended, also while the executor was writing, is
    /// [`InputError::Finished`].
    pub async fn write_input(&self, id: &TaskId, input: Input<'_>) -> Result<(), InputError> {
        let state = self.get(id).ok_or(InputError::NotFound(*id))?;
        let finished = |status: TaskStatus| InputError::Finished { id: *id, status };
        if state.status().is_terminal() {
            return Err(finished(state.status()));
        }
        let task_type = state.base.task_type;
        let executor = self
            .executor(task_type)
            .ok_or(InputError::NoExecutor(task_type))?;
        executor
            .write_input(self, id, input)
            .await
            .map_err(|error| match self.get(id).map(|s| s.status()) {
                Some(status)
                    if status.is_terminal() && !matches!(error, InputError::Stalled { .. }) =>
                {
                    finished(status)
                }
                _ => error,
            })
    }

    /// The unfinished tasks owned by `agent_id`: those this registry holds, and those the
    /// [`Holder`] keeps unregistered until their turn.
    pub fn live_tasks_of(&self, agent_id: TaskId) -> Vec<TaskId> {
        let mut owned: Vec<TaskId> = self
            .snapshot()
            .into_iter()
            .filter(|s| !s.status().is_terminal() && s.owner_agent_id() == Some(agent_id))
            .map(|s| s.id())
            .collect();
        if let Some(holder) = self.holder.get().and_then(Weak::upgrade) {
            owned.extend(holder.held_for(agent_id));
        }
        owned
    }

    /// Orphan cleanup (SPEC §5): kills every unfinished task whose owner is `agent_id` (those
    /// the [`Holder`] keeps unregistered too), then drops that agent's queued notifications. Returns each kill's result.
    pub async fn kill_tasks_for_agent(
        &self,
        agent_id: TaskId,
    ) -> Vec<(TaskId, Result<KillOutcome, KillError>)> {
        let owned = self.live_tasks_of(agent_id);
        let results = join_all(
            owned
                .into_iter()
                .map(|id| async move { (id, self.kill(&id).await) }),
        )
        .await;
        let dropped = self
            .notifications
            .drop_matching(|n| n.agent_id == Some(agent_id));
        tracing::debug!(%agent_id, killed = results.len(), dropped, "orphan cleanup");
        results
    }

    /// The queue of notifications waiting for the model.
    pub fn notifications(&self) -> &NotificationQueue {
        &self.notifications
    }

    /// A receiver of every event emitted from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<TaskEvent> {
        self.events.subscribe()
    }

    pub(crate) fn emit(&self, event: TaskEvent) {
        // No subscriber is not an error: events are for whoever listens.
        let _ = self.events.send(event);
    }

    fn slot(&self, id: &TaskId) -> Option<Arc<Slot>> {
        self.tasks.get(id).map(|entry| Arc::clone(entry.value()))
    }

    fn evict_at(&self, id: &TaskId, now: u64, also: impl FnOnce(&TaskState) -> bool) -> bool {
        let removed = self
            .tasks
            .remove_if(id, |_, slot| {
                slot.retire_if(|state| state.may_evict(now) && also(state))
            })
            .is_some();
        if removed {
            self.emit(TaskEvent::TaskEvicted { task_id: *id });
        }
        removed
    }

    /// Enforces the lifecycle on an updater's result and applies the terminal rules.
    fn checked(
        &self,
        current: &TaskState,
        mut next: TaskState,
    ) -> Result<TaskState, RegistryError> {
        let id = current.id();
        if next.base.id != id || next.base.task_type != current.base.task_type {
            return Err(RegistryError::IdentityChanged(id));
        }
        next.validate()?;
        if current.base.notified && !next.base.notified {
            return Err(RegistryError::LatchCleared(id));
        }
        let (from, to) = (current.status(), next.status());
        if from != to {
            if !from.can_transition_to(to) {
                return Err(RegistryError::IllegalTransition { id, from, to });
            }
            if to == TaskStatus::Running {
                // Its run begins now (a state that says when it began, such as a remote
                // session followed again, keeps that).
                next.base.started_at.get_or_insert_with(now_ms);
            }
            if to.is_terminal() {
                self.settle_terminal(&mut next);
            }
        }
        Ok(next)
    }

    /// End time and eviction grace of a task entering a terminal status.
    fn settle_terminal(&self, next: &mut TaskState) {
        let now = now_ms();
        next.base.end_time.get_or_insert(now);
        if next.base.retain || next.base.evict_after.is_some() {
            return;
        }
        let grace = self
            .executor(next.base.task_type)
            .and_then(|executor| executor.eviction_grace(next));
        next.base.evict_after = grace.map(|g| now.saturating_add(millis(g)));
    }

    fn emit_status_change(&self, previous: &TaskState, current: &TaskState) {
        let (before, after) = (&previous.base, &current.base);
        if before.status != after.status || before.end_time != after.end_time {
            self.emit(TaskEvent::TaskUpdated {
                task_id: after.id,
                patch: TaskPatch {
                    status: after.status,
                    end_time: after.end_time,
                },
            });
        }
    }
}
