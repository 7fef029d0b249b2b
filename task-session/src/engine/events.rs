//! Delivery: the registry's events and notifications, mirrored to disk.

use std::sync::Arc;

use task_core::{Registry, TaskEvent};
use tokio::sync::broadcast;

use super::Activity;
use super::writer::Mirror;
use crate::guard as lock;
use crate::notice::{self, Notice};
use crate::paths::SessionPaths;
use crate::queue::Queue;

/// Mirrors each changed task and tracks which are live; wakes the idle check when one ends,
/// and gives its slot in the queue back.
pub(super) async fn watch_events(
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
            Ok(TaskEvent::TaskProgress { task_id, .. }) => mirror.write(task_id),
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
pub(super) async fn pump_notifications(
    paths: SessionPaths,
    registry: Arc<Registry>,
    mirror: Mirror,
) {
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
