//! One task's cell in the registry: the compare-and-set at the heart of `update`.
//!
//! A slot holds the current state behind an `Arc` and a version number. An update reads a
//! snapshot (a short lock), runs the caller's function on it with no lock held, then commits
//! only if the version is still the one it read (a second short lock); otherwise it retries on
//! the fresh state. So no caller code ever runs under a lock, and no write is ever based on a
//! stale state. The lock is a type parameter so the model-checking tests can run this very
//! code under shuttle's scheduler.

use std::sync::{Arc, Mutex, PoisonError};

use crate::TaskState;

/// The mutual exclusion a slot needs: run a closure with exclusive access.
pub(crate) trait Lock<T>: Send + Sync {
    /// Wraps `value`.
    fn new(value: T) -> Self;
    /// Runs `f` with exclusive access to the value.
    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R;
}

/// The production lock: `std::sync::Mutex`. No caller code runs under it, so poisoning
/// cannot leave a half-written state and is ignored.
#[derive(Debug)]
pub(crate) struct StdLock<T>(Mutex<T>);

impl<T: Send> Lock<T> for StdLock<T> {
    fn new(value: T) -> Self {
        StdLock(Mutex::new(value))
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// What a slot protects.
#[derive(Debug)]
pub(crate) struct Cell {
    state: Arc<TaskState>,
    version: u64,
    /// Set when the task leaves the registry; a retired slot takes no more writes.
    retired: bool,
}

/// The result of [`Slot::update`].
#[derive(Debug)]
pub(crate) enum SlotUpdate {
    /// The function returned a new state and it was stored: here it is.
    Written(Arc<TaskState>),
    /// The function returned nothing: nothing was written.
    Unchanged,
    /// The task left the registry.
    Retired,
}

/// One task's cell.
#[derive(Debug)]
pub(crate) struct Slot<L = StdLock<Cell>> {
    cell: L,
}

impl<L: Lock<Cell>> Slot<L> {
    pub(crate) fn new(state: TaskState) -> Self {
        Slot {
            cell: L::new(Cell {
                state: Arc::new(state),
                version: 0,
                retired: false,
            }),
        }
    }

    /// The current state, or `None` once retired.
    pub(crate) fn load(&self) -> Option<Arc<TaskState>> {
        self.cell
            .with(|cell| (!cell.retired).then(|| Arc::clone(&cell.state)))
    }

    /// Compare-and-set update: `f` sees the current state and returns a new one, nothing, or
    /// an error; it may run more than once if another writer got in between, always on the
    /// freshest state. `on_commit(previous, current)` runs once, under the lock, when the new
    /// state is stored, so what it reports (events) is ordered like the writes themselves.
    pub(crate) fn update<E>(
        &self,
        mut f: impl FnMut(&TaskState) -> Result<Option<TaskState>, E>,
        on_commit: impl FnOnce(&TaskState, &TaskState),
    ) -> Result<SlotUpdate, E> {
        let mut on_commit = Some(on_commit);
        loop {
            let Some((snapshot, version)) = self
                .cell
                .with(|cell| (!cell.retired).then(|| (Arc::clone(&cell.state), cell.version)))
            else {
                return Ok(SlotUpdate::Retired);
            };
            let Some(next) = f(&snapshot)? else {
                return Ok(SlotUpdate::Unchanged);
            };
            let next = Arc::new(next);
            let committed = self.cell.with(|cell| {
                if cell.retired {
                    Some(false)
                } else if cell.version == version {
                    cell.state = Arc::clone(&next);
                    cell.version += 1;
                    if let Some(report) = on_commit.take() {
                        report(&snapshot, &next);
                    }
                    Some(true)
                } else {
                    None
                }
            });
            match committed {
                Some(true) => {
                    return Ok(SlotUpdate::Written(next));
                }
                Some(false) => return Ok(SlotUpdate::Retired),
                None => continue,
            }
        }
    }

    /// Replaces the state outright with `f(current)` under the lock (used by a resume, which
    /// holds the registry's entry so nothing else can retire the slot meanwhile).
    pub(crate) fn replace(&self, f: impl FnOnce(&TaskState) -> TaskState) -> Arc<TaskState> {
        self.cell.with(|cell| {
            cell.state = Arc::new(f(&cell.state));
            cell.version += 1;
            cell.retired = false;
            Arc::clone(&cell.state)
        })
    }

    /// Retires the slot if `may_retire(current)` holds; true if it did.
    pub(crate) fn retire_if(&self, may_retire: impl FnOnce(&TaskState) -> bool) -> bool {
        self.cell.with(|cell| {
            if !cell.retired && may_retire(&cell.state) {
                cell.retired = true;
                true
            } else {
                false
            }
        })
    }
}

#[cfg(test)]
mod model_tests {
    //! Model-checked tests (shuttle, exhaustive DFS over all interleavings of these small
    //! programs) of the latch and of the compare-and-set, on the real `Slot` code.
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;

    use shuttle::sync::Mutex;
    use shuttle::thread;

    use super::*;
    use crate::{ShellState, TaskId, TaskKind, TaskStatus};

    struct ShuttleLock<T>(Mutex<T>);

    impl<T: Send> Lock<T> for ShuttleLock<T> {
        fn new(value: T) -> Self {
            ShuttleLock(Mutex::new(value))
        }
        fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
            f(&mut self.0.lock().unwrap())
        }
    }

    type ModelSlot = Slot<ShuttleLock<Cell>>;

    fn pending_task() -> TaskState {
        let id = TaskId::parse("b00000001").unwrap();
        TaskState::new(id, "t", "/tmp/t", TaskKind::Shell(ShellState::default())).unwrap()
    }

    fn running_task() -> TaskState {
        let mut state = pending_task();
        state.base.status = TaskStatus::Running;
        state
    }

    /// Applies `change` to the state where `applies` holds; reports commits to `on_commit`.
    /// True if this call wrote.
    fn write_if(
        slot: &ModelSlot,
        applies: impl Fn(&TaskState) -> bool,
        change: impl Fn(&mut TaskState),
        on_commit: impl FnOnce(&TaskState, &TaskState),
    ) -> bool {
        let outcome = slot.update(
            |s| {
                Ok::<_, ()>(applies(s).then(|| {
                    let mut next = s.clone();
                    change(&mut next);
                    next
                }))
            },
            on_commit,
        );
        matches!(outcome, Ok(SlotUpdate::Written(_)))
    }

    fn mark_notified(slot: &ModelSlot) -> bool {
        write_if(
            slot,
            |s| !s.base.notified,
            |s| s.base.notified = true,
            |_, _| {},
        )
    }

    fn transition_reporting(
        slot: &ModelSlot,
        to: TaskStatus,
        on_commit: impl FnOnce(&TaskState, &TaskState),
    ) -> bool {
        let allowed = |s: &TaskState| s.base.status.can_transition_to(to);
        write_if(slot, allowed, |s| s.base.status = to, on_commit)
    }

    fn transition(slot: &ModelSlot, to: TaskStatus) -> bool {
        transition_reporting(slot, to, |_, _| {})
    }

    /// Runs `body` under every interleaving (shuttle's exhaustive depth-first search).
    fn check_all(body: impl Fn() + Send + Sync + 'static) {
        shuttle::check_dfs(body, None);
    }

    /// Runs `body` under 2_000 schedules of the PCT algorithm (bugs needing up to 3
    /// preemptions are found with high probability): for programs too big to enumerate.
    fn check_sampled(body: impl Fn() + Send + Sync + 'static) {
        shuttle::check_pct(body, 2_000, 3);
    }

    fn spawn_all<T: Send + 'static>(
        jobs: impl IntoIterator<Item = Box<dyn FnOnce() -> T + Send>>,
    ) -> Vec<T> {
        let handles: Vec<_> = jobs.into_iter().map(thread::spawn).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn model_latch_has_exactly_one_winner() {
        check_all(|| {
            let slot = Arc::new(ModelSlot::new(running_task()));
            let won = spawn_all((0..2).map(|_| {
                let slot = Arc::clone(&slot);
                Box::new(move || mark_notified(&slot)) as Box<dyn FnOnce() -> bool + Send>
            }));
            assert_eq!(won.iter().filter(|&&w| w).count(), 1);
            assert!(slot.load().unwrap().base.notified);
        });
    }

    #[test]
    fn model_update_never_loses_a_write() {
        check_all(|| {
            let slot = Arc::new(ModelSlot::new(running_task()));
            spawn_all((0..2).map(|_| {
                let slot = Arc::clone(&slot);
                Box::new(move || {
                    slot.update(
                        |s| {
                            let mut next = s.clone();
                            next.base.output_offset += 1;
                            Ok::<_, ()>(Some(next))
                        },
                        |_, _| {},
                    )
                    .unwrap();
                }) as Box<dyn FnOnce() + Send>
            }));
            assert_eq!(slot.load().unwrap().base.output_offset, 2);
        });
    }

    #[test]
    fn model_offset_write_never_overwrites_a_kill() {
        check_all(|| {
            let slot = Arc::new(ModelSlot::new(running_task()));
            let reader = {
                let slot = Arc::clone(&slot);
                thread::spawn(move || {
                    slot.update(
                        |fresh| {
                            let mut next = fresh.clone();
                            next.base.output_offset = 10;
                            Ok::<_, ()>(Some(next))
                        },
                        |_, _| {},
                    )
                    .unwrap();
                })
            };
            assert!(transition(&slot, TaskStatus::Killed));
            reader.join().unwrap();
            let state = slot.load().unwrap();
            assert_eq!(state.status(), TaskStatus::Killed);
            assert_eq!(state.base.output_offset, 10);
        });
    }

    #[test]
    fn model_no_write_lands_after_retirement() {
        check_all(|| {
            let slot = Arc::new(ModelSlot::new(running_task()));
            let writer = {
                let slot = Arc::clone(&slot);
                thread::spawn(move || mark_notified(&slot))
            };
            let retired = slot.retire_if(|s| s.base.notified);
            let wrote = writer.join().unwrap();
            // Retirement needs the latch set, so it can only win after the write landed.
            assert!(!retired || wrote);
            if retired {
                assert!(slot.load().is_none());
                assert!(!mark_notified(&slot));
            }
        });
    }

    #[test]
    fn model_commit_reports_are_ordered_like_the_writes() {
        check_sampled(|| {
            let slot = Arc::new(ModelSlot::new(pending_task()));
            let log = Arc::new(Mutex::new(Vec::new()));
            let write = |slot: &ModelSlot, log: &Mutex<Vec<TaskStatus>>, to: TaskStatus| {
                transition_reporting(slot, to, |_, current| {
                    log.lock().unwrap().push(current.status())
                })
            };
            let starter = {
                let (slot, log) = (Arc::clone(&slot), Arc::clone(&log));
                thread::spawn(move || assert!(write(&slot, &log, TaskStatus::Running)))
            };
            // Completes the task as soon as it runs, racing the starter's report.
            while !write(&slot, &log, TaskStatus::Completed) {
                thread::yield_now();
            }
            starter.join().unwrap();
            assert_eq!(
                *log.lock().unwrap(),
                [TaskStatus::Running, TaskStatus::Completed]
            );
        });
    }

    #[test]
    fn model_completion_races_kill_one_terminal_status_one_notification() {
        check_sampled(|| {
            let slot = Arc::new(ModelSlot::new(running_task()));
            let results = spawn_all([TaskStatus::Completed, TaskStatus::Killed].map(|to| {
                let slot = Arc::clone(&slot);
                Box::new(move || (transition(&slot, to), mark_notified(&slot)))
                    as Box<dyn FnOnce() -> (bool, bool) + Send>
            }));
            assert_eq!(results.iter().filter(|r| r.0).count(), 1, "one transition");
            assert_eq!(
                results.iter().filter(|r| r.1).count(),
                1,
                "one notification"
            );
            assert!(slot.load().unwrap().status().is_terminal());
        });
    }

    #[test]
    fn model_latch_among_four_racers() {
        check_sampled(|| {
            let slot = Arc::new(ModelSlot::new(running_task()));
            let won = spawn_all((0..4).map(|_| {
                let slot = Arc::clone(&slot);
                Box::new(move || mark_notified(&slot)) as Box<dyn FnOnce() -> bool + Send>
            }));
            assert_eq!(won.iter().filter(|&&w| w).count(), 1);
        });
    }
}
