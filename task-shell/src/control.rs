//! What every supervised task shares: the control channel a kill or a backgrounding travels on,
//! the table of live controls, and killing a child's whole tree and reaping it.

use std::time::Duration;

use dashmap::DashMap;
use task_core::process::Child;
use task_core::{TaskId, TaskStatus};
use tokio::sync::{mpsc, oneshot};

use crate::process::Root;

/// How many control messages may wait for a task's run (kills and backgroundings are rare).
const CONTROL_CAPACITY: usize = 4;

/// How a shell or monitor task ended, as its caller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// `completed`, `failed` or `killed`.
    pub status: TaskStatus,
    /// The exit code: the process's own, 137 when killed, 143 when timed out; for a WebSocket
    /// monitor 0 when the peer closed the socket and 1 when the connection failed.
    pub exit_code: i32,
    /// The text appended to the output when its run ended the task (timeout, size cap,
    /// connection error), as the command's stderr would carry it.
    pub message: Option<String>,
    /// Why it ended (also recorded in the task's state).
    pub reason: task_core::EndReason,
}

/// A request to a running task's run (the tokio task that drives it).
#[derive(Debug)]
pub(crate) enum Control {
    /// Kill the task now; the reply is sent once its process is reaped.
    Kill {
        /// Answered when the kill is done.
        done: oneshot::Sender<()>,
    },
    /// The task moved to the background: start the watchdogs.
    Background,
}

/// The control ends of every live run, by task id.
#[derive(Debug, Default)]
pub(crate) struct Controls {
    controls: DashMap<TaskId, mpsc::Sender<Control>>,
}

impl Controls {
    /// Registers the run of `id` and returns the receiving end it listens on.
    pub(crate) fn open(&self, id: TaskId) -> mpsc::Receiver<Control> {
        let (sender, receiver) = mpsc::channel(CONTROL_CAPACITY);
        self.controls.insert(id, sender);
        receiver
    }

    /// Forgets the run of `id` (it has finished).
    pub(crate) fn close(&self, id: &TaskId) {
        self.controls.remove(id);
    }

    /// Sends `control` to the run of `id`; `false` when there is none any more.
    pub(crate) async fn send(&self, id: &TaskId, control: Control) -> bool {
        let Some(sender) = self.controls.get(id).map(|entry| entry.value().clone()) else {
            return false;
        };
        sender.send(control).await.is_ok()
    }

    /// Asks the run of `id` to kill its task and waits until it has; `false` when the
    /// task had already finished (its run was gone or ended before reading the request).
    pub(crate) async fn kill(&self, id: &TaskId) -> bool {
        let (done, finished) = oneshot::channel();
        self.send(id, Control::Kill { done }).await && finished.await.is_ok()
    }
}

/// SIGKILLs the tree of `child` (pid `pid`, tagged with `marker`: the task id) and reaps `child`
/// (task-core's [`kill_and_reap`](task_core::process::kill_and_reap); a shell is a subreaper).
pub(crate) async fn kill_and_reap(child: &mut Child, pid: u32, marker: &TaskId) {
    let _ =
        task_core::process::kill_and_reap(child, pid, Some(marker.as_ref()), Root::Subreaper).await;
}

/// Sends `SIGSTOP` to the process group `pgid` right away (from the async task: one system
/// call), so its members stop writing before the slower tree kill runs.
pub(crate) fn freeze_group(pgid: u32) {
    let group = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    if let Some(group) = group
        && let Err(error) =
            rustix::process::kill_process_group(group, rustix::process::Signal::STOP)
    {
        tracing::debug!(pgid, %error, "could not stop the group");
    }
}

/// A future that completes after `limit`, or never when there is none.
pub(crate) async fn deadline(limit: Option<Duration>) {
    match limit {
        Some(limit) => tokio::time::sleep(limit).await,
        None => std::future::pending().await,
    }
}
