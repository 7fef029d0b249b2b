//! `dream` tasks (SPEC §10): a background memory-consolidation agent under the consolidation
//! lock.
//!
//! [`DreamExecutor::start`] takes the [`ConsolidationLock`] (one dream at a time, across
//! processes), registers a `d` task whose `priorMtime` is the last consolidation, and runs an
//! [`AgentRunner`] session with the prompt. The phase is `starting` until the first file edit
//! or write tool use (`Edit`, `MultiEdit`, `Write`, `NotebookEdit`), then `updating`;
//! `filesTouched` lists those files and `turns` the newest 30 turns. A dream that completes
//! keeps the lock's new mtime; one that fails or is killed rolls it back to `priorMtime`. The
//! end is for the UI only: `notified` is set in the same step as the terminal status, and no
//! notification is queued for a model.

mod follow;
mod launch;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use dashmap::DashMap;
use task_core::{
    DreamState, EndReason, KillError, Registry, Task, TaskId, TaskKind, TaskState, TaskStatus,
    TaskType,
};
use tokio::sync::{mpsc, oneshot, watch};

pub use crate::consolidation_lock::{ConsolidationLock, LockError, LockHeld};
pub use launch::DreamStart;

use crate::error::AgentError;
use crate::runner::{AgentRunner, AgentSpec};

/// Tools whose use counts as touching a file (and moves the phase to `updating`).
pub const FILE_WRITE_TOOLS: [&str; 4] = ["Edit", "MultiEdit", "Write", "NotebookEdit"];

/// A dream to start.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DreamRequest {
    /// What runs the consolidation agent.
    pub runner: Arc<dyn AgentRunner>,
    /// Its prompt.
    pub prompt: String,
    /// The lock it consolidates under.
    pub lock: ConsolidationLock,
    /// How many sessions it reviews (shown in its state).
    pub sessions_reviewing: u32,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// Extra environment.
    pub env: Vec<(OsString, OsString)>,
    /// Whether `env` is the whole environment (the caller's) rather than additions.
    pub replace_env: bool,
    /// The id it must get instead of a new one: a queued task registered again, under the id
    /// its caller holds, by the supervisor that succeeded the one it queued under
    /// (task-core's `Caller::task_id`); the files its first registration left are made again.
    pub id: Option<TaskId>,
}

impl DreamRequest {
    /// A request with the runner, prompt and lock.
    pub fn new(
        runner: Arc<dyn AgentRunner>,
        prompt: impl Into<String>,
        lock: ConsolidationLock,
    ) -> Self {
        DreamRequest {
            runner,
            prompt: prompt.into(),
            lock,
            sessions_reviewing: 0,
            cwd: None,
            env: Vec::new(),
            replace_env: false,
            id: None,
        }
    }
}

/// Runs `dream` tasks, recorded in a task-core [`Registry`].
#[derive(Debug, Clone)]
pub struct DreamExecutor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Arc<Registry>,
    output_dir: PathBuf,
    /// The live dreams' cancel channels.
    cancels: DashMap<TaskId, mpsc::Sender<oneshot::Sender<()>>>,
    /// Each dream's "its lock was settled" signal, until a kill has waited for it.
    settled: DashMap<TaskId, watch::Receiver<bool>>,
}

impl DreamExecutor {
    /// An executor writing each dream's transcript to `{output_dir}/{id}.output`.
    pub fn new(registry: Arc<Registry>, output_dir: impl Into<PathBuf>) -> Self {
        DreamExecutor {
            inner: Arc::new(Inner {
                registry,
                output_dir: output_dir.into(),
                cancels: DashMap::new(),
                settled: DashMap::new(),
            }),
        }
    }

    /// Registers it with its registry as the executor of `dream`; returns itself.
    #[must_use]
    pub fn register_with_registry(self) -> Self {
        let task: Arc<dyn Task> = Arc::new(DreamTask {
            inner: Arc::clone(&self.inner),
        });
        self.inner.registry.register_executor(TaskType::Dream, task);
        self
    }

    /// Takes the lock, registers the dream and starts its agent; returns its id. The dream is
    /// followed by a tokio task until it ends.
    ///
    /// # Errors
    /// As [`register`](Self::register) and [`PendingDream::start`].
    pub async fn start(&self, request: DreamRequest) -> Result<TaskId, AgentError> {
        self.register(request)?.start().await
    }

    /// Takes the lock and registers the dream `pending` (its id can be handed out).
    ///
    /// # Errors
    /// [`AgentError::Lock`] ([`LockError::Busy`] while another dream runs: nothing is
    /// registered); output and state errors (the lock is then rolled back).
    pub fn register(&self, request: DreamRequest) -> Result<PendingDream, AgentError> {
        // A few bounded file operations: no need for the blocking pool.
        let held = request.lock.acquire()?;
        let id = match request.id {
            Some(id) => id,
            None => TaskId::generate(TaskType::Dream)?,
        };
        let output = self.inner.output_dir.join(format!("{id}.output"));
        task_output::open::create_output_file(&output)?;
        let state = DreamState {
            sessions_reviewing: request.sessions_reviewing,
            prior_mtime: held.prior_mtime(),
            ..DreamState::default()
        };
        let task = TaskState::new(id, "dreaming", &output, TaskKind::Dream(Box::new(state)))?;
        self.inner.registry.register(task)?;
        let mut spec = AgentSpec::new(request.prompt, &output);
        spec.agent_type = "dream".into();
        spec.cwd = request.cwd;
        spec.env = request.env;
        spec.replace_env = request.replace_env;
        spec.marker = Some(id.to_string());
        Ok(PendingDream {
            inner: Arc::clone(&self.inner),
            id,
            runner: request.runner,
            spec,
            held: Some(self.inner.hold(id, held)),
        })
    }
}

/// A dream registered `pending` and holding the lock, not started yet; dropping it fails it
/// and rolls the lock back.
#[derive(Debug)]
#[must_use = "a registered dream that is never started stays pending"]
pub struct PendingDream {
    inner: Arc<Inner>,
    id: TaskId,
    runner: Arc<dyn AgentRunner>,
    spec: AgentSpec,
    /// Taken by `start`.
    held: Option<DreamLock>,
}

impl PendingDream {
    /// Its task id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// Starts its agent, marks it running and follows it to its end.
    ///
    /// # Errors
    /// Spawn errors: the dream is then `failed` and the lock rolled back.
    pub async fn start(mut self) -> Result<TaskId, AgentError> {
        let id = self.id;
        let Some(held) = self.held.take() else {
            return Err(AgentError::NoSuchAgent(id.to_string()));
        };
        let session = match self.runner.start(&self.spec).await {
            Ok(session) => session,
            Err(error) => {
                let reason = EndReason::SpawnFailed {
                    error: error.to_string(),
                };
                end(&self.inner.registry, id, TaskStatus::Failed, reason);
                held.roll_back();
                self.inner.forget(id);
                return Err(error);
            }
        };
        // The cancel channel exists before the dream can be seen running: a kill from then on
        // reaches the follower (the request waits in the channel until it runs).
        let (cancel_tx, cancel_rx) = mpsc::channel(1);
        self.inner.cancels.insert(id, cancel_tx);
        if let Err(error) = self.inner.registry.transition(&id, TaskStatus::Running) {
            // Killed while starting: the session's process group is killed, the lock rolled
            // back (a kill waiting for that wakes), then the dream is forgotten.
            drop(session);
            held.roll_back();
            self.inner.forget(id);
            return Err(error.into());
        }
        let follow = follow::Follow {
            registry: Arc::clone(&self.inner.registry),
            id,
            session,
            held,
            cancel: cancel_rx,
        };
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move {
            follow.run().await;
            inner.forget(id);
        });
        Ok(id)
    }
}

impl Drop for PendingDream {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            let reason = EndReason::SpawnFailed {
                error: "dropped before it was started".into(),
            };
            end(&self.inner.registry, self.id, TaskStatus::Failed, reason);
            held.roll_back();
            self.inner.forget(self.id);
        }
    }
}

/// Ends a dream: terminal status and `notified` in one step (UI only, never a model
/// notification).
fn end(registry: &Registry, id: TaskId, status: TaskStatus, reason: EndReason) -> bool {
    registry
        .transition_with(&id, status, |state| {
            state.base.notified = true;
            state.base.end_reason = Some(reason.clone());
        })
        .is_ok()
}

impl Inner {
    /// Drops what it keeps of a dream that is over.
    fn forget(&self, id: TaskId) {
        self.cancels.remove(&id);
        self.settled.remove(&id);
    }

    /// Wraps a dream's hold so that a kill can wait until it is settled.
    fn hold(&self, id: TaskId, held: LockHeld) -> DreamLock {
        let (settled, watcher) = watch::channel(false);
        self.settled.insert(id, watcher);
        DreamLock {
            held: Some(held),
            settled,
        }
    }
}

/// One dream's hold of the lock; settled (succeeded or rolled back) exactly once, and rolled
/// back if dropped unsettled, whoever holds it at the time (the pending dream, its start, its
/// follower).
#[derive(Debug)]
struct DreamLock {
    held: Option<LockHeld>,
    settled: watch::Sender<bool>,
}

impl DreamLock {
    fn succeed(mut self) {
        if let Some(held) = self.held.take() {
            held.succeed();
        }
    }

    fn roll_back(mut self) {
        if let Some(held) = self.held.take() {
            roll_back(held);
        }
    }
}

impl Drop for DreamLock {
    fn drop(&mut self) {
        if let Some(held) = self.held.take() {
            roll_back(held);
        }
        self.settled.send_replace(true);
    }
}

fn roll_back(held: LockHeld) {
    if let Err(error) = held.roll_back() {
        tracing::warn!(%error, "could not roll the consolidation lock back");
    }
}

/// The `dream` policies: a kill ends it `killed` (notified at once) and waits until its agent
/// is stopped and the lock rolled back.
#[derive(Debug)]
struct DreamTask {
    inner: Arc<Inner>,
}

#[async_trait]
impl Task for DreamTask {
    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        if !end(registry, *id, TaskStatus::Killed, EndReason::Killed) {
            return Ok(());
        }
        let cancel = self.inner.cancels.get(id).map(|c| c.value().clone());
        if let Some(cancel) = cancel {
            let (ack, done) = oneshot::channel();
            if cancel.send(ack).await.is_ok() {
                let _ = done.await;
            }
        }
        // Killed before it ran (its start still in flight): the start sees the kill and drops
        // the hold; return once the lock is rolled back either way.
        let settled = self.inner.settled.remove(id).map(|(_, watcher)| watcher);
        if let Some(mut settled) = settled {
            let _ = settled.wait_for(|&done| done).await;
        }
        Ok(())
    }
}
