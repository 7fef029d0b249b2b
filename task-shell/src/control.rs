//! What every supervised task shares: the control channel a kill or a backgrounding travels on,
//! the table of live controls, and killing a child's whole tree and reaping it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use dashmap::DashMap;
use task_core::process::Child;
use task_core::{TaskId, TaskStatus};
use tokio::sync::{Notify, oneshot};

use crate::process::Root;

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

/// Makes the one outcome of a run: the end the run posts and the end its handle waits on.
pub(crate) fn outcome_channel() -> (OutcomePost, OutcomeWait) {
    let cell = Arc::new(OutcomeCell::default());
    (OutcomePost(Arc::clone(&cell)), OutcomeWait(cell))
}

/// A run's outcome and its wake-up: some 150 bytes a live task, where a `watch` channel, made
/// for many readers, cost 425.
#[derive(Debug, Default)]
struct OutcomeCell {
    outcome: Mutex<Posted>,
    posted: Notify,
}

#[derive(Debug, Default)]
enum Posted {
    #[default]
    Waiting,
    Ended(Outcome),
    /// The run went without posting one (its runtime shut down).
    Gone,
}

/// The end of a run's outcome that the run posts to, once.
#[derive(Debug)]
pub(crate) struct OutcomePost(Arc<OutcomeCell>);

impl OutcomePost {
    /// Posts the run's outcome, waking its handle's wait.
    pub(crate) fn post(self, outcome: Outcome) {
        self.settle(Posted::Ended(outcome));
    }

    fn settle(&self, end: Posted) {
        if let Ok(mut posted) = self.0.outcome.lock()
            && matches!(*posted, Posted::Waiting)
        {
            *posted = end;
        }
        self.0.posted.notify_one();
    }
}

impl Drop for OutcomePost {
    /// A run dropped before it posted (its runtime shut down): the wait learns it is gone.
    fn drop(&mut self) {
        self.settle(Posted::Gone);
    }
}

/// The end of a run's outcome that its handle waits on.
#[derive(Debug)]
pub(crate) struct OutcomeWait(Arc<OutcomeCell>);

impl OutcomeWait {
    /// The run's outcome once posted; `None` if the run went without posting one.
    pub(crate) async fn wait(&mut self) -> Option<Outcome> {
        loop {
            match &*self.0.outcome.lock().ok()? {
                Posted::Waiting => {}
                Posted::Ended(outcome) => return Some(outcome.clone()),
                Posted::Gone => return None,
            }
            // A post before this wait left a permit: none is lost.
            self.0.posted.notified().await;
        }
    }
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
    controls: DashMap<TaskId, Arc<Inbox>>,
}

/// What was asked of one run and not read yet, and its wake-up: a hundred bytes a live task,
/// where a channel cost a kilobyte (tokio's `mpsc` allocates a block of 32 slots).
#[derive(Debug, Default)]
struct Inbox {
    asked: Mutex<Asked>,
    wake: Notify,
}

#[derive(Debug, Default)]
struct Asked {
    /// The kills asked for, each answered once the task is reaped.
    kills: Vec<oneshot::Sender<()>>,
    background: bool,
    /// The run is over: nothing more is taken (a kill asked now is answered "finished").
    closed: bool,
}

impl Inbox {
    /// Leaves `control` for the run; `false` (and `control` dropped) once the run is over.
    fn put(&self, control: Control) -> bool {
        let Ok(mut asked) = self.asked.lock() else {
            return false;
        };
        if asked.closed {
            return false;
        }
        match control {
            Control::Kill { done } => asked.kills.push(done),
            Control::Background => asked.background = true,
        }
        drop(asked);
        self.wake.notify_one();
        true
    }

    /// The next control left for the run (kills first), if any.
    fn take(&self) -> Option<Control> {
        let mut asked = self.asked.lock().ok()?;
        if let Some(done) = asked.kills.pop() {
            return Some(Control::Kill { done });
        }
        std::mem::take(&mut asked.background).then_some(Control::Background)
    }
}

/// The end of a run's controls that the run reads.
#[derive(Debug)]
pub(crate) struct ControlReceiver(Arc<Inbox>);

impl ControlReceiver {
    /// The next control asked of the run, waiting for one; never `None` while the run holds
    /// this end (the `Option` lets `select!` arms match on it as on a channel).
    pub(crate) async fn recv(&mut self) -> Option<Control> {
        loop {
            if let Some(control) = self.0.take() {
                return Some(control);
            }
            // A wake-up sent before this wait is kept as a permit: none is lost.
            self.0.wake.notified().await;
        }
    }
}

impl Drop for ControlReceiver {
    /// The run is over: the kills it did not read are answered "finished" (their senders
    /// dropped), and none is taken any more.
    fn drop(&mut self) {
        if let Ok(mut asked) = self.0.asked.lock() {
            asked.closed = true;
            asked.kills.clear();
        }
    }
}

impl Controls {
    /// Registers the run of `id` and returns the receiving end it listens on.
    pub(crate) fn open(&self, id: TaskId) -> ControlReceiver {
        let inbox = Arc::new(Inbox::default());
        self.controls.insert(id, Arc::clone(&inbox));
        ControlReceiver(inbox)
    }

    /// Forgets the run of `id` (it has finished).
    pub(crate) fn close(&self, id: &TaskId) {
        self.controls.remove(id);
    }

    /// Sends `control` to the run of `id`; `false` when there is none any more.
    pub(crate) async fn send(&self, id: &TaskId, control: Control) -> bool {
        let Some(inbox) = self.controls.get(id).map(|entry| Arc::clone(entry.value())) else {
            return false;
        };
        inbox.put(control)
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

/// A future that completes after `limit`, or never when there is none. Its timer is boxed:
/// a run waits on this future for its whole life, and most runs have no limit, so they keep
/// a pointer's width instead of a timer's (some 130 bytes a live task).
pub(crate) async fn deadline(limit: Option<Duration>) {
    match limit {
        Some(limit) => Box::pin(tokio::time::sleep(limit)).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn id() -> TaskId {
        TaskId::generate(task_core::TaskType::LocalBash).unwrap()
    }

    #[tokio::test]
    async fn a_kill_and_a_backgrounding_both_reach_the_run_kill_first() {
        let controls = Controls::default();
        let id = id();
        let mut run = controls.open(id);
        assert!(controls.send(&id, Control::Background).await);
        let (done, answered) = oneshot::channel();
        assert!(controls.send(&id, Control::Kill { done }).await);
        let Some(Control::Kill { done }) = run.recv().await else {
            panic!("the kill first");
        };
        assert!(matches!(run.recv().await, Some(Control::Background)));
        done.send(()).unwrap();
        answered.await.unwrap();
    }

    #[tokio::test]
    async fn a_run_waiting_for_a_control_is_woken_by_it() {
        let controls = std::sync::Arc::new(Controls::default());
        let id = id();
        let mut run = controls.open(id);
        let waiting =
            tokio::spawn(async move { run.recv().await.map(|c| matches!(c, Control::Background)) });
        tokio::task::yield_now().await;
        assert!(controls.send(&id, Control::Background).await);
        let woken = tokio::time::timeout(Duration::from_secs(30), waiting).await;
        assert_eq!(woken.expect("woken").unwrap(), Some(true));
    }

    #[tokio::test]
    async fn a_kill_the_run_never_reads_is_answered_finished() {
        let controls = Controls::default();
        let id = id();
        let run = controls.open(id);
        let killing = controls.kill(&id);
        tokio::pin!(killing);
        // Asked while the run is alive, unread when it ends.
        assert!(futures_poll_once(killing.as_mut()).await.is_none());
        drop(run);
        assert!(!killing.await);
        controls.close(&id);
        assert!(!controls.kill(&id).await, "no run any more");
    }

    fn exited(code: i32) -> Outcome {
        Outcome {
            status: TaskStatus::Completed,
            exit_code: code,
            message: None,
            reason: task_core::EndReason::Exited { code },
        }
    }

    #[tokio::test]
    async fn a_posted_outcome_reaches_a_wait_begun_before_or_after_it() {
        let (post, mut before) = outcome_channel();
        let waiting = tokio::spawn(async move { before.wait().await });
        tokio::task::yield_now().await;
        post.post(exited(3));
        let woken = tokio::time::timeout(Duration::from_secs(30), waiting).await;
        assert_eq!(woken.expect("woken").unwrap(), Some(exited(3)));

        let (post, mut after) = outcome_channel();
        post.post(exited(0));
        assert_eq!(after.wait().await, Some(exited(0)));
        assert_eq!(after.wait().await, Some(exited(0)), "read again");
    }

    #[tokio::test]
    async fn a_run_gone_without_an_outcome_ends_the_wait_with_none() {
        let (post, mut wait) = outcome_channel();
        drop(post);
        assert_eq!(wait.wait().await, None);
    }

    /// Polls `future` once; its output if it was ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(mut future: F) -> Option<F::Output> {
        std::future::poll_fn(|cx| {
            std::task::Poll::Ready(match std::pin::Pin::new(&mut future).poll(cx) {
                std::task::Poll::Ready(out) => Some(out),
                std::task::Poll::Pending => None,
            })
        })
        .await
    }
}
