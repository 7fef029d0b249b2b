//! The executor: starts shell and monitor tasks, moves them to the background, kills them.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use task_core::process::{Child, Stdio};
use task_core::{
    BatchJob, Delivery, Input, InputError, KillError, KillOutcome, Priority, Registry, ShellKind,
    ShellProcess, ShellState, Task, TaskId, TaskKind, TaskState, TaskType,
};
use task_output::OutputError;
use task_output::open::{create_output_file, open_append_creating, open_output_append};
use task_protocol::start::Placement;

use crate::batch::run::BatchRun;
use crate::batch::{BatchEngine, BatchSpec, Engines};
use crate::book::{Book, mark_killed};
use crate::config::ShellConfig;
use crate::control::{Control, Controls, outcome_channel};
use crate::error::ShellError;
use crate::growth::Watches;
use crate::handle::TaskHandle;
use crate::monitor::run::{LiveSource, MonitorRun};
use crate::monitor::{MonitorRequest, MonitorSource};
use crate::process::CommandSpec;
use crate::shell::ShellRequest;
use crate::shell::run::ShellRun;
use crate::stdin::{Inputs, Reservation};

/// Runs `local_bash` and `monitor_mcp` tasks over real processes and sockets, recording their
/// lifecycle in a task-core [`Registry`].
///
/// Creating one registers nothing: the host registers [`ShellExecutor::task`] with the
/// registry for the types in [`ShellExecutor::TASK_TYPES`] (see [`ShellExecutor::register_with_registry`]),
/// so that [`Registry::kill`] and [`Registry::kill_tasks_for_agent`] reach its processes. Each
/// task is supervised by one tokio task (no thread per task).
#[derive(Debug, Clone)]
pub struct ShellExecutor {
    book: Book,
    config: Arc<ShellConfig>,
    output_dir: PathBuf,
    controls: Arc<Controls>,
    inputs: Arc<Inputs>,
    task: Arc<Killer>,
    /// The inotify instance its shells' size watchdogs share.
    watches: Arc<Watches>,
    /// The batch systems shells can be placed on.
    engines: Arc<Engines>,
}

impl ShellExecutor {
    /// An executor writing output files to `{output_dir}/{id}.output` (the directory must exist).
    pub fn new(
        registry: Arc<Registry>,
        output_dir: impl Into<PathBuf>,
        config: ShellConfig,
    ) -> Self {
        let controls = Arc::new(Controls::default());
        let inputs = Arc::new(Inputs::default());
        let task = Arc::new(Killer {
            controls: Arc::clone(&controls),
            inputs: Arc::clone(&inputs),
        });
        Self {
            book: Book::new(registry),
            config: Arc::new(config),
            output_dir: output_dir.into(),
            controls,
            inputs,
            task,
            watches: Arc::default(),
            engines: Arc::default(),
        }
    }

    /// Lets shells be placed on `engine` ([`Placement`]s of its name); call before cloning.
    #[must_use]
    pub fn with_batch_engine(mut self, engine: Arc<dyn BatchEngine>) -> Self {
        Arc::make_mut(&mut self.engines).add(engine);
        self
    }

    /// Places the shells started without a placement (through [`task_core::Launch`], with
    /// stdin `/dev/null`: a batch job has no pipe) by `placement` (`None`: on this machine);
    /// call before cloning.
    #[must_use]
    pub fn with_default_placement(mut self, placement: Option<Placement>) -> Self {
        Arc::make_mut(&mut self.engines).set_default(placement);
        self
    }

    /// The batch system a shell started with `requested` and `stdin` runs on: there, else the
    /// default placement when its stdin is `/dev/null`; `None` (here) for `local`.
    pub(crate) fn placement(
        &self,
        requested: Option<Placement>,
        stdin: task_protocol::start::StdinMode,
    ) -> Option<Placement> {
        match stdin {
            task_protocol::start::StdinMode::Null => self.engines.placement(requested),
            task_protocol::start::StdinMode::Piped => {
                requested.filter(|placement| *placement != Placement::Local)
            }
        }
    }

    /// The task types this executor runs.
    pub const TASK_TYPES: [TaskType; 2] = [TaskType::LocalBash, TaskType::MonitorMcp];

    /// Its [`Task`] implementation: kills, and the policies of shells and monitors.
    pub fn task(&self) -> Arc<dyn Task> {
        Arc::clone(&self.task) as Arc<dyn Task>
    }

    /// Registers [`ShellExecutor::task`] with its registry for both of its types; returns it.
    #[must_use]
    pub fn register_with_registry(self) -> Self {
        for task_type in Self::TASK_TYPES {
            self.registry().register_executor(task_type, self.task());
        }
        self
    }

    /// The registry this executor records into.
    pub fn registry(&self) -> &Arc<Registry> {
        self.book.registry()
    }

    /// The configuration in use.
    pub fn config(&self) -> &ShellConfig {
        &self.config
    }

    /// Starts a shell command (SPEC §5): registers it `pending`, spawns it, marks it `running`
    /// and supervises it until it ends. Same as [`register`](Self::register) then
    /// [`PendingShell::start`].
    ///
    /// Must be called inside a tokio runtime, from a worker thread or another long-lived thread
    /// (not from `spawn_blocking`; see [`CommandSpec::spawn`](crate::process::CommandSpec::spawn)).
    ///
    /// # Errors
    /// [`ShellError::MissingWorkingDir`] before anything is registered; [`ShellError::Output`]
    /// when the output file cannot be created; [`ShellError::Spawn`] when the shell cannot
    /// start (the task is then `failed` with exit code 1).
    pub fn spawn(&self, request: ShellRequest) -> Result<TaskHandle, ShellError> {
        self.pending(request, false)?.start()
    }

    /// Registers a shell command `pending` and creates its output file, without starting its
    /// process: the id can be handed out (and the task listed or killed) before the spawn is
    /// paid for. Start it with [`PendingShell::start`]; dropping it unstarted ends it `failed`.
    ///
    /// Since its id may be out in the world by then, a background task that fails to start (or
    /// is dropped unstarted) is notified like any other end (priority `later`); a foreground
    /// one is not (its caller has the error). [`spawn`](Self::spawn) never notifies a spawn
    /// error: it returns it.
    ///
    /// # Errors
    /// [`ShellError::MissingWorkingDir`] before anything is registered; [`ShellError::Output`]
    /// when the output file cannot be created.
    pub fn register(&self, request: ShellRequest) -> Result<PendingShell, ShellError> {
        self.pending(request, true)
    }

    /// Registers a shell command placed on a batch system `pending` (its output file created,
    /// its [`BatchJob`] recorded without a job yet), without submitting it: start it with
    /// [`PendingBatch::start`], which submits the job (unless one of the task's name exists
    /// already) and follows it. The command runs in the request's working directory and
    /// environment, its output the task's output file, so that directory must be shared with
    /// the batch system's nodes.
    ///
    /// # Errors
    /// [`ShellError::NoBatchEngine`] when no engine of the placement's name was given
    /// ([`ShellExecutor::with_batch_engine`]); [`ShellError::BatchStdin`] for a piped stdin;
    /// as [`register`](Self::register) otherwise.
    pub fn register_batch(
        &self,
        request: ShellRequest,
        placement: Placement,
    ) -> Result<PendingBatch, ShellError> {
        let engine =
            self.engines
                .get(placement.engine())
                .ok_or_else(|| ShellError::NoBatchEngine {
                    engine: placement.engine().to_owned(),
                })?;
        let ShellRequest {
            spec,
            description,
            tool_use_id,
            agent_id,
            background,
            timeout,
            id,
        } = request;
        spec.validate()?;
        if spec.stdin_mode() == crate::process::StdinMode::Piped {
            return Err(ShellError::BatchStdin);
        }
        let workdir = match spec.working_dir() {
            Some(dir) => dir.to_owned(),
            None => std::env::current_dir().map_err(|_| ShellError::MissingWorkingDir {
                path: PathBuf::from("."),
            })?,
        };
        let shell = ShellState {
            command: spec.command().to_owned(),
            is_backgrounded: background,
            kind: ShellKind::Shell,
            exit_code: None,
            process: None,
            batch: Some(Box::new(BatchJob::new(engine.name()))),
        };
        let failure = if background {
            Delivery::Queue(Priority::Later)
        } else {
            Delivery::Silent
        };
        let prepared = self
            .prepare(self.pending_state(
                id.filter(|id| id.task_type() == TaskType::LocalBash),
                TaskType::LocalBash,
                description,
                tool_use_id,
                agent_id,
                shell,
            )?)?
            .failing_with(failure);
        let env = spec
            .environment_pairs()
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        let mut batch = BatchSpec::new(
            prepared.id.to_string(),
            spec.command(),
            workdir,
            prepared.output.clone(),
            env,
            placement,
        );
        batch.time_limit = timeout;
        Ok(PendingBatch {
            executor: self.clone(),
            engine,
            spec: batch,
            prepared,
        })
    }

    /// Follows again a shell task placed on a batch system that a dead supervisor left live
    /// (`recorded`: its last recorded state): registered as recorded, its job found by its
    /// recorded id, else by its name (the task's id: the predecessor may have died between
    /// the submission and its record), and its end recorded once. It is never submitted
    /// again (its environment is not on disk): a task whose job cannot be found ends `failed`
    /// after the longest a submission may take, unless its exit file says how it ended.
    ///
    /// # Errors
    /// [`ShellError::NotBatch`] for a task that is not a live batch shell;
    /// [`ShellError::NoBatchEngine`] when its engine is not configured here (the caller then
    /// ends it); a registration error.
    pub fn adopt_batch(&self, recorded: TaskState) -> Result<TaskId, ShellError> {
        let id = recorded.id();
        let batch = match &recorded.kind {
            TaskKind::Shell(ShellState {
                batch: Some(batch), ..
            }) if !recorded.status().is_terminal() => batch.clone(),
            _ => return Err(ShellError::NotBatch(id)),
        };
        let engine = self
            .engines
            .get(&batch.engine)
            .ok_or_else(|| ShellError::NoBatchEngine {
                engine: batch.engine.clone(),
            })?;
        let output = recorded.base.output_file.clone();
        let control = self.controls.open(id);
        if let Err(error) = self.book.register(recorded) {
            self.controls.close(&id);
            return Err(error);
        }
        let (outcome, _watcher) = outcome_channel();
        let run = BatchRun {
            id,
            engine,
            spec: None,
            job_id: batch.job_id.clone(),
            output,
            control,
            outcome,
        };
        tracing::info!(task = %id, job = ?batch.job_id, "batch job followed again after its supervisor died");
        tokio::spawn(run.drive(self.book.clone(), Arc::clone(&self.controls)));
        Ok(id)
    }

    /// Ends `recorded`, a batch shell a dead supervisor left live that cannot be followed here,
    /// `failed` with `why` (registered first).
    pub fn end_unfollowable(&self, recorded: TaskState, why: &str) {
        let id = recorded.id();
        if self.registry().get(&id).is_none()
            && let Err(error) = self.book.register(recorded)
        {
            tracing::warn!(task = %id, %error, "cannot record why its batch job is not followed");
            return;
        }
        self.book.finish_shell(
            &id,
            task_core::EndReason::SpawnFailed {
                error: format!("its batch job cannot be followed again: {why}"),
            },
        );
    }

    /// [`register`](Self::register); `announce_failure`: notify a background task's failure
    /// to start.
    fn pending(
        &self,
        request: ShellRequest,
        announce_failure: bool,
    ) -> Result<PendingShell, ShellError> {
        let ShellRequest {
            spec,
            description,
            tool_use_id,
            agent_id,
            background,
            timeout,
            id,
        } = request;
        spec.validate()?;
        let shell = local_shell(&spec, background);
        let failure = if announce_failure && background {
            Delivery::Queue(Priority::Later)
        } else {
            Delivery::Silent
        };
        let prepared = self.prepare(self.pending_state(
            id.filter(|id| id.task_type() == TaskType::LocalBash),
            TaskType::LocalBash,
            description,
            tool_use_id,
            agent_id,
            shell,
        )?)?;
        let prepared = prepared.failing_with(failure);
        Ok(PendingShell {
            executor: self.clone(),
            spec,
            background,
            timeout,
            prepared,
        })
    }

    /// Starts a monitor (SPEC §6): a command whose stdout lines are events, or a WebSocket whose
    /// frames are. Monitors always run in the background; every event is queued with priority
    /// `next`.
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn). A WebSocket that cannot be reached is not an error here: the
    /// monitor then ends `failed` and notifies.
    pub fn spawn_monitor(&self, request: MonitorRequest) -> Result<TaskHandle, ShellError> {
        let MonitorRequest {
            source,
            description,
            tool_use_id,
            agent_id,
            timeout,
            persistent,
        } = request;
        if let MonitorSource::Command(spec) = &source {
            spec.validate()?;
        }
        let shell = ShellState {
            command: source.to_string(),
            is_backgrounded: true,
            kind: ShellKind::Monitor,
            exit_code: None,
            process: None,
            batch: None,
        };
        let mut prepared = self.prepare(self.pending_state(
            None,
            TaskType::MonitorMcp,
            description,
            tool_use_id,
            agent_id,
            shell,
        )?)?;
        let output_file = open_output_append(&prepared.output)?;
        let (live, pid) = match source {
            MonitorSource::Command(spec) => {
                let output = prepared.output.clone();
                let spec = spec.task_marker(prepared.id.to_string());
                let mut child = prepared
                    .start(|| spec.spawn(Stdio::Piped, Stdio::Fd(child_output(&output)?)))?;
                let pid = child.id();
                let stdout = child
                    .stdout
                    .take()
                    .ok_or(ShellError::RunGone(prepared.id))?;
                (LiveSource::Process { child, pid, stdout }, Some(pid))
            }
            MonitorSource::WebSocket(target) => {
                prepared.mark_running(None);
                (LiveSource::Socket(target), None)
            }
        };
        let (id, output, control) = prepared.hand_over();
        let (outcome, watcher) = outcome_channel();
        let run = MonitorRun {
            id,
            source: live,
            output: output.clone(),
            output_file,
            timeout: self.config.monitor_timeout(timeout, persistent),
            max_line_bytes: self.config.monitor_max_line_bytes,
            control,
            outcome,
        };
        tokio::spawn(run.drive(self.book.clone(), Arc::clone(&self.controls)));
        Ok(TaskHandle {
            id,
            output,
            pid,
            stdin: None,
            outcome: watcher,
        })
    }

    /// Moves a foreground shell task to the background: the flag flips and its completion will
    /// be notified; nothing is restarted.
    ///
    /// # Errors
    /// [`ShellError::UnknownTask`], or [`ShellError::AlreadyFinished`] when it has ended.
    pub async fn background(&self, id: &TaskId) -> Result<(), ShellError> {
        self.book.set_backgrounded(id)?;
        self.controls.send(id, Control::Background).await;
        Ok(())
    }

    /// Kills a task's whole process tree (SPEC §5): status `killed`, exit code 137, no
    /// notification. Same as [`Registry::kill`] with errors of this crate.
    ///
    /// # Errors
    /// [`ShellError::UnknownTask`]; [`ShellError::AlreadyFinished`] when the task had ended
    /// (nothing is done).
    pub async fn kill(&self, id: &TaskId) -> Result<(), ShellError> {
        match self.registry().kill(id).await {
            Ok(KillOutcome::Killed) => Ok(()),
            Ok(KillOutcome::AlreadyFinished(status)) => {
                Err(ShellError::AlreadyFinished { id: *id, status })
            }
            Err(KillError::NotFound(id)) => Err(ShellError::UnknownTask(id)),
            Err(error) => match self.book.status(id) {
                Ok(status) if status.is_terminal() => {
                    Err(ShellError::AlreadyFinished { id: *id, status })
                }
                _ => Err(ShellError::Kill(error)),
            },
            Ok(_) => Err(ShellError::Kill(KillError::NotFound(*id))),
        }
    }

    /// Reserves the stdin pipe of a shell being started with a pipe (see [`PendingShell::start`]).
    pub(crate) fn reserve_stdin(&self, id: TaskId) -> Reservation {
        self.inputs.reserve(id)
    }

    /// The `pending` state [`register`](Self::register) would record for `request`, checked
    /// (an empty command, a missing working directory) but registered nowhere and its output
    /// file not created: for a host that keeps a task waiting for its turn without registering
    /// it, and registers it at its turn under this id ([`ShellRequest::id`]). The request's own
    /// [`ShellRequest::id`] is used when it is a shell's.
    ///
    /// # Errors
    /// As [`register`](Self::register) before anything is registered.
    pub fn describe(&self, request: &ShellRequest) -> Result<TaskState, ShellError> {
        request.spec.validate()?;
        self.pending_state(
            request
                .id
                .filter(|id| id.task_type() == TaskType::LocalBash),
            TaskType::LocalBash,
            request.description.clone(),
            request.tool_use_id.clone(),
            request.agent_id,
            local_shell(&request.spec, request.background),
        )
    }

    /// The `pending` state of a task of `task_type` under `id` if given (else a new id), its
    /// output file in this executor's directory.
    fn pending_state(
        &self,
        id: Option<TaskId>,
        task_type: TaskType,
        description: String,
        tool_use_id: Option<String>,
        agent_id: Option<TaskId>,
        shell: ShellState,
    ) -> Result<TaskState, ShellError> {
        let id = match id {
            Some(id) => id,
            None => TaskId::generate(task_type)?,
        };
        let output = output_path(&self.output_dir, &id);
        let mut state = TaskState::new(id, description, &output, TaskKind::Shell(shell))
            .map_err(|error| ShellError::Registry(error.into()))?
            .owned_by(agent_id);
        state.base.tool_use_id = tool_use_id;
        Ok(state)
    }

    /// Creates the output file of `state` (a [`pending_state`](Self::pending_state)), opens the
    /// control channel of its run and registers the task.
    fn prepare(&self, state: TaskState) -> Result<Prepared, ShellError> {
        let (id, output) = (state.id(), state.base.output_file.clone());
        drop(create_output_file(&output)?);
        // The control channel exists before the task is visible, so a kill that arrives while
        // the process is being started waits for its run instead of being lost.
        let control = self.controls.open(id);
        if let Err(error) = self.book.register(state) {
            self.controls.close(&id);
            return Err(error);
        }
        Ok(Prepared {
            id,
            output,
            control,
            guard: PendingGuard {
                id,
                book: self.book.clone(),
                controls: Arc::clone(&self.controls),
                armed: true,
                failure: Delivery::Silent,
                error: None,
            },
        })
    }
}

/// The state of a shell command run on this machine, not started yet.
fn local_shell(spec: &CommandSpec, background: bool) -> ShellState {
    ShellState {
        command: spec.command().to_owned(),
        is_backgrounded: background,
        kind: ShellKind::Shell,
        exit_code: None,
        process: None,
        batch: None,
    }
}

/// A shell task registered `pending` whose process is not started yet; see
/// [`ShellExecutor::register`].
#[derive(Debug)]
#[must_use = "a pending task that is never started ends failed"]
pub struct PendingShell {
    executor: ShellExecutor,
    spec: CommandSpec,
    background: bool,
    timeout: Option<Duration>,
    prepared: Prepared,
}

impl PendingShell {
    /// The task's id (already in the registry, `pending`).
    pub fn id(&self) -> TaskId {
        self.prepared.id
    }

    /// Spawns the process, marks the task `running` and supervises it until it ends.
    ///
    /// Call it from a tokio worker thread or another long-lived thread (see
    /// [`CommandSpec::spawn`]).
    ///
    /// # Errors
    /// [`ShellError::Output`] when the output file cannot be opened for the child;
    /// [`ShellError::Spawn`] when the shell cannot start. Either way the task is then `failed`
    /// with exit code 1.
    pub fn start(self) -> Result<TaskHandle, ShellError> {
        let Self {
            executor,
            spec,
            background,
            timeout,
            mut prepared,
        } = self;
        let output = prepared.output.clone();
        let spec = spec.task_marker(prepared.id.to_string());
        let mut child = prepared.start(|| {
            let stdout = child_output(&output)?;
            let stderr = stdout
                .try_clone()
                .map_err(|error| OutputError::from_io(&output, error))?;
            spec.spawn(Stdio::Fd(stdout), Stdio::Fd(stderr))
        })?;
        let pid = child.id();
        let stdin = child.stdin.take();
        let (id, output, control) = prepared.hand_over();
        let (outcome, watcher) = outcome_channel();
        let run = ShellRun {
            id,
            child,
            pid,
            output: output.clone(),
            timeout,
            backgrounded: background,
            control,
            outcome,
        };
        tokio::spawn(run.drive(
            executor.book.clone(),
            Arc::clone(&executor.config),
            Arc::clone(&executor.controls),
            Arc::clone(&executor.watches),
        ));
        Ok(TaskHandle {
            id,
            output,
            pid: Some(pid),
            stdin,
            outcome: watcher,
        })
    }
}

/// A shell task placed on a batch system, registered `pending`, whose job is not submitted
/// yet; see [`ShellExecutor::register_batch`].
#[derive(Debug)]
#[must_use = "a pending task that is never started ends failed"]
pub struct PendingBatch {
    executor: ShellExecutor,
    engine: Arc<dyn BatchEngine>,
    spec: BatchSpec,
    prepared: Prepared,
}

impl PendingBatch {
    /// The task's id (already in the registry, `pending`).
    pub fn id(&self) -> TaskId {
        self.prepared.id
    }

    /// Submits the job (after looking for one of the task's name, which is followed instead)
    /// and follows it until it ends, on the current tokio runtime. The task stays `pending`
    /// while the job waits.
    pub fn start(self) -> TaskHandle {
        let Self {
            executor,
            engine,
            spec,
            prepared,
        } = self;
        let (id, output, control) = prepared.hand_over();
        let (outcome, watcher) = outcome_channel();
        let run = BatchRun {
            id,
            engine,
            spec: Some(spec),
            job_id: None,
            output: output.clone(),
            control,
            outcome,
        };
        tokio::spawn(run.drive(executor.book.clone(), Arc::clone(&executor.controls)));
        TaskHandle {
            id,
            output,
            pid: None,
            stdin: None,
            outcome: watcher,
        }
    }
}

/// The task's output file as its process writes it (`O_WRONLY|O_CREAT|O_APPEND|O_NOFOLLOW`): its
/// stdout and stderr share this one open file description, so they interleave in order.
fn child_output(output: &Path) -> Result<OwnedFd, ShellError> {
    Ok(open_append_creating(output)?.into())
}

/// A registered `pending` task whose process is not started yet.
#[derive(Debug)]
struct Prepared {
    id: TaskId,
    output: PathBuf,
    control: crate::control::ControlReceiver,
    guard: PendingGuard,
}

impl Prepared {
    /// Starts the process and marks the task `running`. On error the task ends `failed`
    /// (exit 1) when `self` is dropped.
    fn start(
        &mut self,
        spawn: impl FnOnce() -> Result<Child, ShellError>,
    ) -> Result<Child, ShellError> {
        let child = spawn().inspect_err(|error| self.guard.error = Some(error.to_string()))?;
        let marker = self.id.to_string();
        self.mark_running(Some(ShellProcess::of_leader(child.id(), &marker)));
        Ok(child)
    }

    /// How the task's failure to start is notified (silent unless set).
    fn failing_with(mut self, failure: Delivery) -> Self {
        self.guard.failure = failure;
        self
    }

    /// Records that the task's source is live, in the process group `process` if it has one.
    fn mark_running(&self, process: Option<ShellProcess>) {
        self.guard.book.mark_running(&self.id, process);
    }

    /// Gives the id, output path and control channel to the task's run, which from now
    /// on records how the task ends.
    fn hand_over(self) -> (TaskId, PathBuf, crate::control::ControlReceiver) {
        let Self {
            id,
            output,
            control,
            mut guard,
        } = self;
        guard.armed = false;
        (id, output, control)
    }
}

/// Ends a prepared task `failed` (exit 1) and closes its control channel if it is dropped before
/// its run takes over, so no error on the way leaves a task `pending` forever.
#[derive(Debug)]
struct PendingGuard {
    id: TaskId,
    book: Book,
    controls: Arc<Controls>,
    armed: bool,
    failure: Delivery,
    /// Why the start failed, if it got as far as trying.
    error: Option<String>,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        if self.armed {
            let error = self
                .error
                .take()
                .unwrap_or_else(|| "the task was never started".to_owned());
            self.book.mark_spawn_failed(&self.id, self.failure, error);
            self.controls.close(&self.id);
        }
    }
}

/// `{dir}/{id}.output`; the id is a validated [`TaskId`], so no traversal is possible.
fn output_path(dir: &Path, id: &TaskId) -> PathBuf {
    dir.join(format!("{id}.output"))
}

/// The [`Task`] implementation the registry calls to kill shells and monitors, and to write
/// to a shell's stdin pipe.
#[derive(Debug)]
struct Killer {
    controls: Arc<Controls>,
    inputs: Arc<Inputs>,
}

#[async_trait]
impl Task for Killer {
    /// Shell commands share the shells' default limit; monitors are in no class.
    fn admission(&self, task_type: task_core::TaskType) -> task_core::Admission {
        match task_type {
            task_core::TaskType::LocalBash => task_core::Admission::SHELLS,
            _ => task_core::Admission::UNCLASSED,
        }
    }

    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        if self.controls.kill(id).await {
            return Ok(());
        }
        // No live run: the task ended after the registry's check (the trait's contract:
        // nothing to do, and the state tells), or it was never supervised by this process.
        // Record the kill if it is still unfinished.
        match registry.get(id).map(|state| state.status()) {
            Some(status) if status.is_terminal() => Ok(()),
            Some(_) => {
                mark_killed(registry, id);
                Ok(())
            }
            None => Err(KillError::NotFound(*id)),
        }
    }

    /// Writes to the stdin pipe of a shell started with [`StdinMode::Piped`](crate::process::StdinMode);
    /// monitors take no input.
    async fn write_input(
        &self,
        registry: &Registry,
        id: &TaskId,
        input: Input<'_>,
    ) -> Result<(), InputError> {
        match registry.get(id).map(|state| state.base.task_type) {
            Some(TaskType::LocalBash) => self.inputs.write(id, input).await,
            Some(task_type) => Err(InputError::NotAccepted { id: *id, task_type }),
            None => Err(InputError::NotFound(*id)),
        }
    }

    /// Kills what is left of the task's processes, each checked live against the fingerprint
    /// recorded at its start (see [`kill_orphaned_task`](crate::process::kill_orphaned_task));
    /// state recorded without one falls back to the group check of
    /// [`kill_orphaned_group`](crate::process::kill_orphaned_group).
    /// A shell placed on a batch system outlives its supervisor: its job runs on, and the
    /// next supervisor follows it again ([`ShellExecutor::adopt_batch`]).
    fn survives_supervisor(&self, task: &TaskState) -> bool {
        is_batch(task)
    }

    fn reap_orphan(&self, orphan: &TaskState) -> Result<(), KillError> {
        let TaskKind::Shell(ShellState {
            process: Some(process),
            ..
        }) = &orphan.kind
        else {
            return Ok(());
        };
        process
            .kill_orphaned(orphan.id().as_ref())
            .map(drop)
            .map_err(|error| KillError::Failed {
                id: orphan.id(),
                source: Box::new(error),
            })
    }
}

/// Whether `task` is a shell placed on a batch system.
pub(crate) fn is_batch(task: &TaskState) -> bool {
    matches!(
        &task.kind,
        TaskKind::Shell(ShellState { batch: Some(_), .. })
    )
}
