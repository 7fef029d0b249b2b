//! Inside the supervisor: a `task_core::Registry` with the task-shell executors, and the mirror
//! that writes every task's state to its snapshot file and every notification to where readers
//! claim it.
//!
//! Snapshot writes run on one writer thread, which writes from the registry's *current* state
//! of a task (so two quick transitions can never be written out of order).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use std::time::Duration;

use task_core::{Notification, Priority, Registry, RegistryConfig, TaskEvent, TaskId, TaskState};
use task_shell::monitor::{MonitorRequest, MonitorSource};
use task_shell::process::CommandSpec;
use task_shell::shell::ShellRequest;
use task_shell::{ShellError, ShellExecutor, TaskHandle};
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
    registry: Arc<Registry>,
    executor: ShellExecutor,
    groups: ProcessGroups,
    mirror: Mirror,
    activity: Arc<Activity>,
}

/// What the supervisor's idle check looks at: the tasks not ended yet, as the event stream has
/// told so far (cheap to ask on every turn of the accept loop, unlike a scan of the registry),
/// and a wake-up for when a task ends or a client leaves.
#[derive(Debug, Default)]
struct Activity {
    live: Mutex<HashSet<TaskId>>,
    changed: Notify,
}

impl Engine {
    /// Builds the registry and executors, and starts the mirror (call inside the runtime).
    pub fn start(paths: SessionPaths, config: Config) -> Result<Self> {
        let registry = Arc::new(Registry::new(RegistryConfig::default()));
        let executor = ShellExecutor::new(
            Arc::clone(&registry),
            paths.tasks_dir(),
            config.shell.clone(),
        );
        let completions = Arc::new(Mutex::new(HashMap::new()));
        let groups = Arc::new(Mutex::new(HashMap::new()));
        let mirror = Mirror::spawn(
            paths.clone(),
            Arc::clone(&registry),
            Arc::clone(&completions),
            Arc::clone(&groups),
        )?;
        let activity = Arc::new(Activity::default());
        tokio::spawn(watch_events(
            registry.subscribe(),
            Arc::clone(&registry),
            mirror.clone(),
            Arc::clone(&activity),
        ));
        tokio::spawn(pump_notifications(
            paths.clone(),
            Arc::clone(&registry),
            mirror.clone(),
            completions,
        ));
        Ok(Self {
            paths,
            registry,
            executor,
            groups,
            mirror,
            activity,
        })
    }

    /// How many tasks are not terminal, from the events received so far: it may lag the
    /// registry by the events still queued. Constant time; [`Engine::live_tasks`] is exact.
    pub fn tracked_live_tasks(&self) -> usize {
        lock(&self.activity.live).len()
    }

    /// How many tasks are not terminal (a scan of the registry).
    pub fn live_tasks(&self) -> usize {
        self.registry
            .snapshot()
            .iter()
            .filter(|state| !state.status().is_terminal())
            .count()
    }

    /// Resolves when a task ends or a client leaves (a moment to re-check idleness).
    pub async fn changed(&self) {
        self.activity.changed.notified().await;
    }

    /// Signals [`Engine::changed`].
    pub fn wake(&self) {
        self.activity.changed.notify_one();
    }

    /// Starts a shell command; returns once its `pending` snapshot is on disk, and spawns its
    /// process after that (so the caller gets the id without waiting for the `fork` and `exec`;
    /// a spawn that fails ends the task `failed`, as the reference's asynchronous spawn errors
    /// do). A task that does not notify runs in the foreground (finished silently) and its
    /// completion latch is set before its id is returned, so no reader ever delivers it (not
    /// even as an orphan).
    pub fn start_shell(&self, start: StartShell) -> Result<TaskId> {
        let mut request = ShellRequest::new(
            command_spec(&start.command, start.cwd.as_deref())?,
            start.description,
        )
        .background(start.notify);
        request.timeout = start.timeout_ms.map(Duration::from_millis);
        request.agent_id = start.agent_id;
        request.tool_use_id = start.tool_use_id;
        let pending = self.executor.register(request).map_err(shell_error)?;
        let id = pending.id();
        if !start.notify
            && let Err(e) = notice::mark_notified(&self.paths, &id)
        {
            // It still finishes silently; only a dead supervisor's orphan could notify.
            tracing::warn!("cannot mark {id} notified: {e}");
        }
        lock(&self.groups).insert(id, None);
        self.mirror.write_now(id);
        let (groups, mirror) = (Arc::clone(&self.groups), self.mirror.clone());
        // On a worker thread, which lives as long as the runtime (the parent-death signal
        // follows the thread that forks).
        tokio::spawn(async move {
            match pending.start() {
                // `running` goes to disk at once, on this thread: until then readers still
                // see `pending` while the process may already be printing.
                Ok(handle) => {
                    record_process_group(&groups, &handle);
                    mirror.write_now(id);
                }
                Err(e) => tracing::warn!("{id} did not start: {e}"),
            }
        });
        Ok(id)
    }

    /// Starts a monitor of a command or a WebSocket; returns once its snapshot is on disk.
    pub fn start_monitor(&self, start: StartMonitor) -> Result<TaskId> {
        let source = match (start.command, start.ws) {
            (Some(command), None) => {
                MonitorSource::Command(command_spec(&command, start.cwd.as_deref())?)
            }
            (None, Some(ws)) => {
                ws.validate()?;
                MonitorSource::WebSocket(ws.into())
            }
            _ => {
                return Err(CliError::Invalid(
                    "a monitor watches a command or a WebSocket: give exactly one".into(),
                ));
            }
        };
        let mut request =
            MonitorRequest::new(source, start.description).persistent(start.persistent);
        request.timeout = start.timeout_ms.map(Duration::from_millis);
        let handle = self.executor.spawn_monitor(request).map_err(shell_error)?;
        Ok(self.started(&handle))
    }

    fn started(&self, handle: &TaskHandle) -> TaskId {
        let id = handle.id();
        record_process_group(&self.groups, handle);
        self.mirror.write_now(id);
        id
    }

    /// Kills tasks (all at once); returns once each is reaped and its snapshot written.
    pub async fn kill(&self, ids: &[TaskId]) -> Vec<KillOutcome> {
        let kills = ids.iter().map(|id| async move {
            let outcome = match self.registry.kill(id).await {
                Ok(task_core::KillOutcome::Killed) => "killed",
                Ok(_) => "already_ended",
                Err(task_core::KillError::NotFound(_)) => "unknown",
                Err(e) => {
                    tracing::warn!("kill {id}: {e}");
                    "failed"
                }
            };
            self.mirror.write(*id);
            KillOutcome {
                id: id.to_string(),
                outcome: outcome.to_owned(),
            }
        });
        let outcomes = futures_util::future::join_all(kills).await;
        self.mirror.flush().await;
        outcomes
    }

    /// Waits until every queued snapshot write is done.
    pub async fn flush(&self) {
        self.mirror.flush().await;
    }
}

/// Mirrors each changed task and tracks which are live; wakes the idle check when one ends.
async fn watch_events(
    mut events: broadcast::Receiver<TaskEvent>,
    registry: Arc<Registry>,
    mirror: Mirror,
    activity: Arc<Activity>,
) {
    loop {
        match events.recv().await {
            Ok(TaskEvent::TaskUpdated { task_id, patch }) => {
                mirror.write(task_id);
                if patch.status.is_terminal() {
                    lock(&activity.live).remove(&task_id);
                    activity.changed.notify_one();
                }
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
                tracing::warn!("missed {missed} task events: rewriting every snapshot");
                let states = registry.snapshot();
                *lock(&activity.live) = states
                    .iter()
                    .filter(|state| !state.status().is_terminal())
                    .map(|state| state.id())
                    .collect();
                for state in states {
                    mirror.write(state.id());
                }
                activity.changed.notify_one();
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

/// The process group of each task (its shell's pid; `None` for a task without a process yet,
/// or ever: a WebSocket monitor), recorded in snapshots so a reader can kill the tree of a task
/// whose supervisor died. A task is in it once its start is being handled.
type ProcessGroups = Arc<Mutex<HashMap<TaskId, Option<ProcessGroup>>>>;

/// A task's process group: its shell's pid, and when that shell started (to tell it apart from a
/// later process given the same number).
#[derive(Debug, Clone, Copy)]
struct ProcessGroup {
    pgid: i32,
    leader_started: Option<u64>,
}

/// Records a started task's process group (for its next snapshot).
fn record_process_group(groups: &ProcessGroups, handle: &TaskHandle) {
    let group = handle.pid().and_then(|pid| {
        Some(ProcessGroup {
            pgid: i32::try_from(pid).ok()?,
            leader_started: task_shell::process::start_time(pid),
        })
    });
    lock(groups).insert(handle.id(), group);
}

fn shell_error(error: ShellError) -> CliError {
    CliError::Supervisor(error.to_string())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

enum WriteRequest {
    Write(TaskId),
    Flush(oneshot::Sender<()>),
}

/// The handle of the snapshot writer thread.
///
/// One thread: every snapshot is a file created in the same directory, and file creations in
/// one directory are serialized by the kernel anyway (on ext4, several writers spent their time
/// spinning on the directory's lock: one writer used 10-25 % less supervisor CPU than four in
/// the 200-run loop of `benches/benches/cli.rs`).
#[derive(Clone)]
struct Mirror {
    sender: mpsc::Sender<WriteRequest>,
    state: Arc<Mirrored>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mirror")
    }
}

impl Mirror {
    /// Starts the writer thread.
    fn spawn(
        paths: SessionPaths,
        registry: Arc<Registry>,
        completions: Completions,
        groups: ProcessGroups,
    ) -> Result<Self> {
        let state = Arc::new(Mirrored {
            paths,
            registry,
            completions,
            groups,
            written: Mutex::new(HashMap::new()),
        });
        let (sender, receiver) = mpsc::channel();
        let writer = Arc::clone(&state);
        std::thread::Builder::new()
            .name("snapshot-writer".into())
            .spawn(move || writer.write_loop(&receiver))
            .map_err(|e| CliError::io("start", "the snapshot writer", e))?;
        Ok(Self { sender, state })
    }

    fn write(&self, id: TaskId) {
        let _ = self.sender.send(WriteRequest::Write(id));
    }

    /// Waits until every write asked for so far is done.
    async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.sender.send(WriteRequest::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }

    /// Writes the snapshot of `id` on the calling thread, now (a short blocking write, like
    /// the creation of the task's output file before it): no hand-off to the writer thread and
    /// back on the way of a start.
    fn write_now(&self, id: TaskId) {
        self.state.write(id);
    }
}

/// What the writer thread reads to build a snapshot.
struct Mirrored {
    paths: SessionPaths,
    registry: Arc<Registry>,
    completions: Completions,
    groups: ProcessGroups,
    /// The snapshot last written for each task, locked for the whole of a write: the writer
    /// thread and [`Mirror::write_now`] never write one task at once, and each writes the
    /// registry's state as it is under the lock, so an older state never replaces a newer one.
    written: Mutex<HashMap<TaskId, Snapshot>>,
}

impl Mirrored {
    /// Writes in batches: everything queued is taken at once and each task written once, from
    /// its state at that moment (a burst of transitions costs one write, not one per event).
    ///
    /// Fewer writes, because every write replaces a file, and on some filesystems (ext4
    /// without a journal) each freed inode slows every later file creation for minutes:
    /// - a live task is first written when its start is handled (the engine puts it in the
    ///   process groups and writes it, through [`Mirror::write_now`], before answering): the
    ///   events that come before, while it is being registered, would each cost a file that no
    ///   reader could ask for yet;
    /// - a snapshot equal to the one last written for its task is not written again.
    fn write_loop(&self, requests: &mpsc::Receiver<WriteRequest>) {
        while let Ok(first) = requests.recv() {
            let mut ids = Vec::new();
            let mut seen = HashSet::new();
            let mut flushed = Vec::new();
            for request in std::iter::once(first).chain(requests.try_iter()) {
                match request {
                    WriteRequest::Write(id) => {
                        if seen.insert(id) {
                            ids.push(id);
                        }
                    }
                    WriteRequest::Flush(done) => flushed.push(done),
                }
            }
            for id in ids {
                self.write(id);
            }
            for done in flushed {
                let _ = done.send(());
            }
        }
    }

    fn write(&self, id: TaskId) {
        let mut written = lock(&self.written);
        let Some(state) = self.registry.get(&id) else {
            return;
        };
        let mut snapshot = to_snapshot(&self.paths, &state);
        if state.status().is_terminal() {
            snapshot.notification = lock(&self.completions).get(&id).cloned();
        } else {
            let Some(&group) = lock(&self.groups).get(&id) else {
                return; // not started yet: its start asks for the first write
            };
            snapshot.pgid = group.map(|g| g.pgid);
            snapshot.pgid_started = group.and_then(|g| g.leader_started);
        }
        if written.get(&id) == Some(&snapshot) {
            return;
        }
        match snapshot::write(&self.paths, &snapshot) {
            Ok(()) => {
                written.insert(id, snapshot);
            }
            Err(e) => tracing::error!("cannot mirror {id}: {e}"),
        }
    }
}

fn to_snapshot(paths: &SessionPaths, state: &TaskState) -> Snapshot {
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
    snapshot
}

/// Converts a start request into a task-shell command, in the client's working directory.
fn command_spec(command: &str, cwd: Option<&std::path::Path>) -> Result<CommandSpec> {
    let spec = CommandSpec::new(command).map_err(|e| CliError::Invalid(e.to_string()))?;
    Ok(match cwd {
        Some(dir) => spec.current_dir(dir),
        None => spec,
    })
}
