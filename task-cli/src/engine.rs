//! Inside the supervisor: a `task_core::Registry` with the task-shell executors, and the mirror
//! that writes every task's state to its snapshot file and every notification to where readers
//! claim it.
//!
//! One dedicated writer thread does all snapshot writes, in order, always from the registry's
//! *current* state of a task (so two quick transitions can never be written out of order).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use task_core::{Notification, Priority, Registry, RegistryConfig, TaskEvent, TaskId, TaskState};
use tokio::sync::{Notify, broadcast, oneshot};

use crate::config::Config;
use crate::error::{CliError, Result};
use crate::notice::{self, Notice};
use crate::paths::SessionPaths;
use crate::protocol::{KillOutcome, StartMonitor, StartShell};
use crate::snapshot::{self, Snapshot};

/// The registry and executors of one supervisor, and the mirror to disk.
#[derive(Debug)]
pub struct Engine {
    paths: SessionPaths,
    config: Config,
    registry: Arc<Registry>,
    executors: Executors,
    mirror: Mirror,
    changed: Arc<Notify>,
}

impl Engine {
    /// Builds the registry and executors, and starts the mirror (call inside the runtime).
    pub fn start(paths: SessionPaths, config: Config) -> Result<Self> {
        let registry = Arc::new(Registry::new(RegistryConfig::default()));
        let executors = Executors::new(Arc::clone(&registry), &config);
        let completions = Arc::new(Mutex::new(HashMap::new()));
        let mirror = Mirror::spawn(
            paths.clone(),
            Arc::clone(&registry),
            Arc::clone(&completions),
        )?;
        let changed = Arc::new(Notify::new());
        tokio::spawn(watch_events(
            registry.subscribe(),
            Arc::clone(&registry),
            mirror.clone(),
            Arc::clone(&changed),
        ));
        tokio::spawn(pump_notifications(
            paths.clone(),
            Arc::clone(&registry),
            mirror.clone(),
            completions,
        ));
        Ok(Self {
            paths,
            config,
            registry,
            executors,
            mirror,
            changed,
        })
    }

    /// How many tasks are not terminal.
    pub fn live_tasks(&self) -> usize {
        self.registry
            .snapshot()
            .iter()
            .filter(|state| !state.status().is_terminal())
            .count()
    }

    /// Resolves when a task ends or a client leaves (a moment to re-check idleness).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    /// Signals [`Engine::changed`].
    pub fn wake(&self) {
        self.changed.notify_one();
    }

    /// Starts a shell command; returns once its snapshot is on disk.
    pub async fn start_shell(&self, start: StartShell) -> Result<TaskId> {
        let id = TaskId::generate(task_core::TaskType::LocalBash)
            .map_err(|e| CliError::Supervisor(e.to_string()))?;
        let output = self.paths.output(&id);
        self.executors
            .spawn_shell(id, output, start, &self.config)
            .await?;
        self.mirror.write_now(id).await;
        Ok(id)
    }

    /// Starts a monitor; returns once its snapshot is on disk.
    pub async fn start_monitor(&self, start: StartMonitor) -> Result<TaskId> {
        let id = TaskId::generate(task_core::TaskType::MonitorMcp)
            .map_err(|e| CliError::Supervisor(e.to_string()))?;
        let output = self.paths.output(&id);
        self.executors
            .spawn_monitor(id, output, start, &self.config)
            .await?;
        self.mirror.write_now(id).await;
        Ok(id)
    }

    /// Kills tasks; returns once each is reaped and its snapshot written.
    pub async fn kill(&self, ids: &[TaskId]) -> Vec<KillOutcome> {
        let mut outcomes = Vec::with_capacity(ids.len());
        for id in ids {
            let outcome = match self.registry.kill(id).await {
                Ok(task_core::KillOutcome::Killed) => "killed",
                Ok(_) => "already_ended",
                Err(task_core::KillError::NotFound(_)) => "unknown",
                Err(e) => {
                    tracing::warn!("kill {id}: {e}");
                    "failed"
                }
            };
            self.mirror.write_now(*id).await;
            outcomes.push(KillOutcome {
                id: id.to_string(),
                outcome: outcome.to_owned(),
            });
        }
        outcomes
    }

    /// Waits until every queued snapshot write is done.
    pub async fn flush(&self) {
        self.mirror.flush().await;
    }
}

/// Mirrors each changed task; wakes the idle check when one ends.
async fn watch_events(
    mut events: broadcast::Receiver<TaskEvent>,
    registry: Arc<Registry>,
    mirror: Mirror,
    changed: Arc<Notify>,
) {
    loop {
        match events.recv().await {
            Ok(TaskEvent::TaskUpdated { task_id, patch }) => {
                mirror.write(task_id);
                if patch.status.is_terminal() {
                    changed.notify_one();
                }
            }
            Ok(TaskEvent::TaskStarted { task_id, .. }) => mirror.write(task_id),
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(missed)) => {
                tracing::warn!("missed {missed} task events: rewriting every snapshot");
                for state in registry.snapshot() {
                    mirror.write(state.id());
                }
                changed.notify_one();
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Moves the registry's notifications to disk: a completion into its task's snapshot (claimed
/// through `.notified`), anything else into `events/pending/` (claimed by rename).
async fn pump_notifications(
    paths: SessionPaths,
    registry: Arc<Registry>,
    mirror: Mirror,
    completions: Completions,
) {
    let queue = registry.notifications();
    loop {
        queue.wait_nonempty().await;
        for (priority, notification) in drain_with_priority(&registry) {
            let at_ms = task_core::now_ms();
            let id = notification.task_id;
            let notice = Notice {
                priority,
                at_ms,
                notification,
            };
            if notice.notification.status.is_some() {
                lock(&completions).insert(id, notice);
                mirror.write(id);
            } else if let Err(e) = notice::publish_event(&paths, &notice) {
                tracing::error!("cannot publish an event of {id}: {e}");
            }
        }
    }
}

/// Drains the queue, most urgent first, remembering each notification's priority.
fn drain_with_priority(registry: &Registry) -> Vec<(Priority, Notification)> {
    let queue = registry.notifications();
    [Priority::Now, Priority::Next, Priority::Later]
        .into_iter()
        .flat_map(|priority| {
            queue
                .drain_up_to(priority)
                .into_iter()
                .map(move |n| (priority, n))
        })
        .collect()
}

type Completions = Arc<Mutex<HashMap<TaskId, Notice>>>;

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

enum WriteRequest {
    Write(TaskId),
    Flush(oneshot::Sender<()>),
}

/// The handle of the writer thread.
#[derive(Clone)]
struct Mirror {
    sender: mpsc::Sender<WriteRequest>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mirror")
    }
}

impl Mirror {
    fn spawn(
        paths: SessionPaths,
        registry: Arc<Registry>,
        completions: Completions,
    ) -> Result<Self> {
        let (sender, receiver) = mpsc::channel();
        std::thread::Builder::new()
            .name("snapshot-writer".into())
            .spawn(move || write_loop(&paths, &registry, &completions, &receiver))
            .map_err(|e| CliError::io("start", "the snapshot writer", e))?;
        Ok(Self { sender })
    }

    fn write(&self, id: TaskId) {
        let _ = self.sender.send(WriteRequest::Write(id));
    }

    async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.sender.send(WriteRequest::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }

    async fn write_now(&self, id: TaskId) {
        self.write(id);
        self.flush().await;
    }
}

fn write_loop(
    paths: &SessionPaths,
    registry: &Registry,
    completions: &Mutex<HashMap<TaskId, Notice>>,
    requests: &mpsc::Receiver<WriteRequest>,
) {
    while let Ok(request) = requests.recv() {
        match request {
            WriteRequest::Write(id) => {
                let Some(state) = registry.get(&id) else {
                    continue;
                };
                let notice = lock(completions).get(&id).cloned();
                let snapshot = to_snapshot(paths, &state, notice);
                if let Err(e) = snapshot::write(paths, &snapshot) {
                    tracing::error!("cannot mirror {id}: {e}");
                }
            }
            WriteRequest::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}

fn to_snapshot(paths: &SessionPaths, state: &TaskState, notice: Option<Notice>) -> Snapshot {
    let base = &state.base;
    let shell = match &state.kind {
        task_core::TaskKind::Shell(shell) => Some(shell),
        _ => None,
    };
    let mut snapshot = Snapshot::new(
        base.id,
        base.description.clone(),
        shell.map(|s| s.command.clone()).unwrap_or_default(),
        paths.output(&base.id),
    );
    snapshot.status = base.status;
    snapshot.start_time = base.start_time;
    snapshot.end_time = base.end_time;
    snapshot.exit_code = shell.and_then(|s| s.exit_code);
    snapshot.notification = notice.filter(|_| base.status.is_terminal());
    snapshot
}

/// The task-shell executors of this supervisor.
#[derive(Debug)]
struct Executors {
    registry: Arc<Registry>,
}

impl Executors {
    fn new(registry: Arc<Registry>, _config: &Config) -> Self {
        Self { registry }
    }

    async fn spawn_shell(
        &self,
        _id: TaskId,
        _output: std::path::PathBuf,
        _start: StartShell,
        _config: &Config,
    ) -> Result<()> {
        let _ = &self.registry;
        Err(CliError::Supervisor(
            "the shell executor is not wired yet".into(),
        ))
    }

    async fn spawn_monitor(
        &self,
        _id: TaskId,
        _output: std::path::PathBuf,
        _start: StartMonitor,
        _config: &Config,
    ) -> Result<()> {
        Err(CliError::Supervisor(
            "the monitor executor is not wired yet".into(),
        ))
    }
}
