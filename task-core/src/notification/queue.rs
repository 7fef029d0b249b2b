//! The queue of notifications waiting to be delivered, by priority.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use super::Notification;

/// When a notification should reach the model (SPEC §3).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Interrupt and send at once.
    Now,
    /// Between a tool result and the next model call (monitor events, stall warnings).
    Next,
    /// At the end of the turn (shell completions; the default).
    #[default]
    Later,
}

impl Priority {
    const ALL: [Priority; 3] = [Priority::Now, Priority::Next, Priority::Later];

    const fn index(self) -> usize {
        self.rank() as usize
    }

    /// The delivery order as a number: 0 for `now`, 1 for `next`, 2 for `later` (the order of
    /// [`Ord`] too), for names and keys that must sort like the priorities.
    pub const fn rank(self) -> u8 {
        match self {
            Priority::Now => 0,
            Priority::Next => 1,
            Priority::Later => 2,
        }
    }
}

/// Notifications waiting for delivery: drained `now` first, then `next`, then `later`, FIFO
/// within a priority. Shared by every thread of the process.
#[derive(Debug, Default)]
pub struct NotificationQueue {
    lanes: Mutex<[VecDeque<Notification>; 3]>,
    enqueued: Notify,
}

impl NotificationQueue {
    /// An empty queue.
    pub fn new() -> Self {
        NotificationQueue::default()
    }

    /// Adds `notification` at the back of its priority's lane.
    pub fn enqueue(&self, notification: Notification, priority: Priority) {
        self.with_lanes(|lanes| lanes[priority.index()].push_back(notification));
        self.enqueued.notify_waiters();
    }

    /// Adds `notification` at the back of its priority's lane if `claim` returns true, and
    /// returns what `claim` returned. The queue stays locked across both, so whoever sees the
    /// effect of the claim (a task's `notified` latch) and then drains finds the notification.
    pub fn enqueue_if_claimed(
        &self,
        notification: Notification,
        priority: Priority,
        claim: impl FnOnce() -> bool,
    ) -> bool {
        let claimed = self.with_lanes(|lanes| {
            let claimed = claim();
            if claimed {
                lanes[priority.index()].push_back(notification);
            }
            claimed
        });
        if claimed {
            self.enqueued.notify_waiters();
        }
        claimed
    }

    /// Removes and returns everything queued, in delivery order, each with its priority.
    pub fn drain_with_priority(&self) -> Vec<(Priority, Notification)> {
        self.with_lanes(|lanes| {
            let mut drained = Vec::new();
            for priority in Priority::ALL {
                let lane = lanes[priority.index()].drain(..);
                drained.extend(lane.map(|notification| (priority, notification)));
            }
            drained
        })
    }

    /// Removes and returns everything queued, in delivery order.
    pub fn drain(&self) -> Vec<Notification> {
        self.with_lanes(|lanes| {
            Priority::ALL
                .into_iter()
                .flat_map(|p| std::mem::take(&mut lanes[p.index()]))
                .collect()
        })
    }

    /// Removes and returns the queued notifications of `priority` and higher (`Next` drains
    /// `now` and `next`, leaving `later` for the end of the turn), in delivery order.
    pub fn drain_up_to(&self, priority: Priority) -> Vec<Notification> {
        self.with_lanes(|lanes| {
            Priority::ALL
                .into_iter()
                .filter(|p| *p <= priority)
                .flat_map(|p| std::mem::take(&mut lanes[p.index()]))
                .collect()
        })
    }

    /// Discards every queued notification for which `predicate` holds; returns how many.
    pub fn drop_matching(&self, mut predicate: impl FnMut(&Notification) -> bool) -> usize {
        self.with_lanes(|lanes| {
            lanes
                .iter_mut()
                .map(|lane| {
                    let before = lane.len();
                    lane.retain(|n| !predicate(n));
                    before - lane.len()
                })
                .sum()
        })
    }

    /// How many notifications are queued.
    pub fn len(&self) -> usize {
        self.with_lanes(|lanes| lanes.iter().map(VecDeque::len).sum())
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits until the queue holds at least one notification.
    pub async fn wait_nonempty(&self) {
        loop {
            let enqueued = self.enqueued.notified();
            if !self.is_empty() {
                return;
            }
            enqueued.await;
        }
    }

    fn with_lanes<R>(&self, f: impl FnOnce(&mut [VecDeque<Notification>; 3]) -> R) -> R {
        // No code of ours that can panic runs under this lock (a claim is a latch), so a
        // poisoned lock holds whole lanes.
        f(&mut self.lanes.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::TaskId;

    fn note(summary: &str) -> Notification {
        Notification::new(TaskId::parse("b00000000").unwrap(), "/o", summary)
    }

    fn summaries(list: Vec<Notification>) -> Vec<String> {
        list.into_iter().map(|n| n.summary).collect()
    }

    #[test]
    fn drains_by_priority_then_fifo() {
        let queue = NotificationQueue::new();
        queue.enqueue(note("later-1"), Priority::Later);
        queue.enqueue(note("next-1"), Priority::Next);
        queue.enqueue(note("now-1"), Priority::Now);
        queue.enqueue(note("later-2"), Priority::Later);
        queue.enqueue(note("next-2"), Priority::Next);
        assert_eq!(queue.len(), 5);
        assert_eq!(
            summaries(queue.drain()),
            ["now-1", "next-1", "next-2", "later-1", "later-2"]
        );
        assert!(queue.is_empty());
    }

    #[test]
    fn drain_up_to_leaves_lower_priorities() {
        let queue = NotificationQueue::new();
        queue.enqueue(note("later"), Priority::Later);
        queue.enqueue(note("next"), Priority::Next);
        assert_eq!(summaries(queue.drain_up_to(Priority::Next)), ["next"]);
        assert_eq!(summaries(queue.drain()), ["later"]);
    }

    #[test]
    fn drop_matching_removes_only_matches_and_keeps_order() {
        let queue = NotificationQueue::new();
        let agent = |id: &str| crate::TaskId::parse(id).unwrap();
        for (i, id) in ["aagent001", "aagent002", "aagent001", "aagent002"]
            .into_iter()
            .enumerate()
        {
            let mut n = note(&format!("a{}-{i}", &id[8..]));
            n.agent_id = Some(agent(id));
            queue.enqueue(n, Priority::Later);
        }
        let dropped = queue.drop_matching(|n| n.agent_id == Some(agent("aagent001")));
        assert_eq!(dropped, 2);
        assert_eq!(summaries(queue.drain()), ["a2-1", "a2-3"]);
    }

    #[tokio::test]
    async fn wait_nonempty_wakes_on_enqueue() {
        let queue = std::sync::Arc::new(NotificationQueue::new());
        let waiter = tokio::spawn({
            let queue = queue.clone();
            async move { queue.wait_nonempty().await }
        });
        queue.enqueue(note("x"), Priority::Later);
        tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
            .await
            .unwrap()
            .unwrap();
    }
}
