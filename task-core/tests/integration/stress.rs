//! The latch under real contention: completion, kill and a poller race on every task.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use task_core::{Delivery, Notification, Priority, Registry, TaskId, TaskStatus};

use crate::common::shell_task;

const TASKS: usize = 100_000;
/// Completers and killers per lane; with the pollers that makes 8 threads.
const LANES: usize = 3;
const POLLERS: usize = 2;

/// Who settled a task's one notification.
const BY_NOTIFIER: u8 = 1;
const BY_KILLER: u8 = 2;

struct Race {
    registry: Registry,
    ids: Vec<TaskId>,
    /// Per task: how many callers won the latch (must end at exactly 1).
    wins: Vec<AtomicU8>,
    /// Per task: which kind of caller won.
    winner: Vec<AtomicU8>,
    start: Barrier,
}

impl Race {
    fn win(&self, index: usize, by: u8) {
        self.wins[index].fetch_add(1, Ordering::Relaxed);
        self.winner[index].store(by, Ordering::Relaxed);
    }

    /// A notifier: what the completion handler (or the poll loop) does: build the
    /// notification from the fresh state and pass it through the latch.
    fn notify(&self, index: usize) {
        let id = &self.ids[index];
        let state = self.registry.get(id).unwrap();
        let Some(status) = state.status().terminal() else {
            return;
        };
        let notification = Notification::for_task(&state, Some(status), "done");
        if self
            .registry
            .notify_once(id, notification, Delivery::Queue(Priority::Later))
        {
            self.win(index, BY_NOTIFIER);
        }
    }

    fn complete(&self, index: usize) {
        let _ = self
            .registry
            .transition(&self.ids[index], TaskStatus::Completed);
        self.notify(index);
    }

    /// A kill: `running→killed` and the latch in one atomic step, as a shell executor does.
    fn kill(&self, index: usize) {
        let killed = self
            .registry
            .transition_with(&self.ids[index], TaskStatus::Killed, |s| {
                s.base.notified = true;
            });
        if killed.is_ok() {
            self.win(index, BY_KILLER);
        }
    }
}

#[test]
fn completion_kill_and_poll_race_yields_exactly_one_notification_per_task() {
    let registry = Registry::default();
    let ids: Vec<TaskId> = (0..TASKS)
        .map(|_| {
            let task = shell_task("race");
            let id = task.id();
            registry.register(task).unwrap();
            registry.transition(&id, TaskStatus::Running).unwrap();
            id
        })
        .collect();
    let race = Arc::new(Race {
        registry,
        ids,
        wins: (0..TASKS).map(|_| AtomicU8::new(0)).collect(),
        winner: (0..TASKS).map(|_| AtomicU8::new(0)).collect(),
        start: Barrier::new(2 * LANES + POLLERS),
    });

    let mut threads = Vec::new();
    for lane in 0..LANES {
        for role in [Race::complete as fn(&Race, usize), Race::kill] {
            let race = Arc::clone(&race);
            threads.push(thread::spawn(move || {
                race.start.wait();
                for index in (lane..TASKS).step_by(LANES) {
                    role(&race, index);
                }
            }));
        }
    }
    for poller in 0..POLLERS {
        let race = Arc::clone(&race);
        threads.push(thread::spawn(move || {
            race.start.wait();
            for index in (poller..TASKS).step_by(POLLERS) {
                race.notify(index);
            }
        }));
    }
    assert!(threads.len() >= 8);
    threads.into_iter().for_each(|t| t.join().unwrap());

    let queued = race.registry.notifications().drain();
    let mut queued_per_task = vec![0u32; TASKS];
    let position: std::collections::HashMap<TaskId, usize> = race
        .ids
        .iter()
        .enumerate()
        .map(|(i, id)| (*id, i))
        .collect();
    for n in &queued {
        queued_per_task[position[&n.task_id]] += 1;
    }
    for (index, id) in race.ids.iter().enumerate() {
        let state = race.registry.get(id).unwrap();
        assert!(state.status().is_terminal());
        assert!(state.base.notified, "task {index} lost its notification");
        assert_eq!(race.wins[index].load(Ordering::Relaxed), 1, "task {index}");
        let expected_queued = match race.winner[index].load(Ordering::Relaxed) {
            BY_NOTIFIER => 1,
            _ => 0,
        };
        assert_eq!(queued_per_task[index], expected_queued, "task {index}");
        if state.status() == TaskStatus::Completed {
            assert_eq!(expected_queued, 1, "a completion must be notified");
        }
    }
}

/// Whoever sees a task's latch set and then drains the queue finds its notification: the
/// notification is queued before the latch can be seen (a test waiting for `notified` and then
/// draining once failed on a loaded machine when the latch came first).
#[test]
fn a_task_seen_notified_has_its_notification_in_the_queue_already() {
    const TASKS: usize = 20_000;
    let registry = Arc::new(Registry::default());
    let ids: Arc<Vec<TaskId>> = Arc::new(
        (0..TASKS)
            .map(|_| {
                let task = shell_task("seen");
                let id = task.id();
                registry.register(task).unwrap();
                registry.transition(&id, TaskStatus::Running).unwrap();
                id
            })
            .collect(),
    );
    let start = Arc::new(Barrier::new(2));
    let notifier = {
        let (registry, ids, start) = (Arc::clone(&registry), Arc::clone(&ids), Arc::clone(&start));
        thread::spawn(move || {
            start.wait();
            for id in ids.iter() {
                let state = registry.transition(id, TaskStatus::Completed).unwrap();
                let notification =
                    Notification::for_task(&state, state.status().terminal(), "done");
                assert!(registry.notify_once(id, notification, Delivery::Queue(Priority::Next)));
            }
        })
    };
    start.wait();
    let mut drained = std::collections::HashSet::new();
    for (index, id) in ids.iter().enumerate() {
        let notified = || registry.get(id).unwrap().base.notified;
        while !notified() {
            // Read again after seeing the notifier finished: it may have just set this latch.
            assert!(
                !notifier.is_finished() || notified(),
                "task {index} was never notified"
            );
            std::hint::spin_loop();
        }
        drained.extend(registry.notifications().drain().iter().map(|n| n.task_id));
        assert!(
            drained.contains(id),
            "task {index} was seen notified before it was queued"
        );
    }
    notifier.join().unwrap();
    assert_eq!(drained.len(), TASKS);
}
