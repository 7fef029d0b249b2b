//! The executor of `local_agent` tasks: start, message, resume, kill, the main session.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use dashmap::DashMap;
use serde_json::json;
use task_core::{
    AgentProgress, AgentState, Delivery, EndReason, KillError, Registry, Task, TaskId, TaskKind,
    TaskState, TaskStatus, TaskType,
};
use task_output::open::create_output_file;
use task_output::transcript::link_transcript;
use tokio::sync::oneshot;

use crate::config::AgentConfig;
use crate::drive::Drive;
use crate::error::AgentError;
use crate::format::{CliFormat, DetectingParser};
use crate::notify::{RunEnd, agent_notification, stopped_notification};
use crate::progress::ProgressTracker;
use crate::record::{AgentRecord, Control};
use crate::runner::{AgentRunner, AgentSession, AgentSpec};
use crate::tail::TranscriptTail;
use crate::transcript_session::TranscriptSession;
use crate::worktree::{blocking, settle_worktree};
use task_protocol::start::WorktreeRequest;
use task_worktree::Worktrees;

pub use task_core::AGENT_ID_ENV;
/// The agent type of the backgrounded main session.
pub const MAIN_SESSION_TYPE: &str = "main-session";
/// The agent type when a request names none.
pub const DEFAULT_AGENT_TYPE: &str = "general-purpose";

/// A request to start a background agent.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AgentRequest {
    /// What runs the agent.
    pub runner: Arc<dyn AgentRunner>,
    /// Its first user turn.
    pub prompt: String,
    /// A short description (the notification's `Agent "{description}" …`).
    pub description: String,
    /// `general-purpose` unless set.
    pub agent_type: Option<String>,
    /// A model override.
    pub model: Option<String>,
    /// A name it can be addressed by (`SendMessage {to: name}`).
    pub name: Option<String>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// The tool call that started it.
    pub tool_use_id: Option<String>,
    /// Extra environment (`TASKS_SESSION`, `TASKS_ROOT` are otherwise inherited).
    pub env: Vec<(OsString, OsString)>,
    /// Whether `env` is the whole environment (the caller's) rather than additions to the
    /// supervisor's.
    pub replace_env: bool,
    /// The agent that started this one (it is killed when that agent ends).
    pub owner_agent_id: Option<TaskId>,
    /// Where its transcript goes (`{output_dir}/agents` when unset): a workflow keeps its
    /// agents' transcripts in the run's directory.
    pub transcript_dir: Option<PathBuf>,
    /// `spawnDepth` in its `meta.json` (1 for a workflow's agents).
    pub spawn_depth: Option<u32>,
    /// Whether its end is reported to its starter only (no notification for the model): a
    /// workflow's agents report to the workflow.
    pub silent: bool,
    /// A JSON Schema its final answer must follow (asked of CLIs that take one).
    pub json_schema: Option<String>,
    /// Run it in a new git worktree made from the `HEAD` of the repository `cwd` is in
    /// ([`worktree`](crate::worktree)): removed when it stops unchanged, kept otherwise.
    pub worktree: Option<WorktreeRequest>,
    /// Its budgets ([`crate::budget`]).
    pub budget: Option<task_core::AgentBudget>,
    /// The id it must get instead of a new one: a queued task registered again, under the id
    /// its caller holds, by the supervisor that succeeded the one it queued under
    /// (task-core's `Caller::task_id`); the files its first registration left are made again.
    pub id: Option<TaskId>,
}

impl AgentRequest {
    /// A request with the runner, description and prompt; everything else default.
    pub fn new(
        runner: Arc<dyn AgentRunner>,
        description: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Self {
        AgentRequest {
            runner,
            prompt: prompt.into(),
            description: description.into(),
            agent_type: None,
            model: None,
            name: None,
            cwd: None,
            tool_use_id: None,
            env: Vec::new(),
            replace_env: false,
            owner_agent_id: None,
            transcript_dir: None,
            spawn_depth: None,
            silent: false,
            json_schema: None,
            worktree: None,
            budget: None,
            id: None,
        }
    }
}

/// A started agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentHandle {
    /// Its task id (also its agent id).
    pub id: TaskId,
    /// Its output file: a symlink to the transcript.
    pub output_file: PathBuf,
    /// The transcript the CLI writes.
    pub transcript: PathBuf,
}

/// An agent registered `pending` by [`AgentExecutor::register`], not started yet.
#[derive(Debug)]
#[must_use = "a registered agent that is never started stays pending"]
pub struct PendingAgent {
    executor: AgentExecutor,
    record: Arc<AgentRecord>,
    handle: AgentHandle,
    /// Until started: dropping it fails the task.
    armed: bool,
}

impl PendingAgent {
    /// Its id.
    pub fn id(&self) -> TaskId {
        self.handle.id
    }

    /// Its files.
    pub fn handle(&self) -> &AgentHandle {
        &self.handle
    }

    /// Starts its runner, marks it running and follows it until it stops.
    ///
    /// # Errors
    /// Spawn errors: the task is then `failed` (end reason `SpawnFailed`), not notified.
    pub async fn start(mut self) -> Result<AgentHandle, AgentError> {
        self.armed = false;
        let guard = self.record.lifecycle.lock().await;
        let started = self.record.runner.start(&self.record.spec).await;
        self.executor
            .launch(&self.record, self.handle.id, started, guard, RunOf::Started)
            .await?;
        Ok(self.handle.clone())
    }
}

impl Drop for PendingAgent {
    /// Never started: it ends `failed`, silently (its starter had the chance to report).
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let _ = self.executor.inner.registry.transition_with(
            &self.handle.id,
            TaskStatus::Failed,
            |state| {
                state.base.notified = true;
                state.base.end_reason = Some(EndReason::SpawnFailed {
                    error: "dropped before it was started".into(),
                });
            },
        );
        let inner = &self.executor.inner;
        blocking(|| settle_worktree(&inner.registry, &inner.worktrees, &self.handle.id));
    }
}

/// What [`AgentExecutor::send`] did with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendOutcome {
    /// The agent is running: the message is queued (`pendingMessages`) for its next turn.
    Queued(TaskId),
    /// The agent had stopped: it was resumed under the same id with the message.
    Resumed {
        /// The agent (same id and output file as before).
        handle: AgentHandle,
        /// How its previous run had ended (`completed`, `failed`, `killed`).
        previous: TaskStatus,
    },
}

/// Runs `local_agent` tasks: agent CLIs (or any [`AgentRunner`]) followed through their
/// transcripts, recorded in a task-core [`Registry`].
///
/// Creating one registers it as the registry's executor of `local_agent`, so
/// [`Registry::kill`] reaches its agents. Each run is followed by one tokio task.
#[derive(Debug, Clone)]
pub struct AgentExecutor {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    registry: Arc<Registry>,
    output_dir: PathBuf,
    config: AgentConfig,
    agents: DashMap<TaskId, Arc<AgentRecord>>,
    names: DashMap<String, TaskId>,
    task: Arc<AgentTask>,
    worktrees: Arc<Worktrees>,
    /// The session's token budget, shared by every run.
    session_tokens: Arc<crate::budget::SessionTokens>,
    /// The batch systems agents can be placed on.
    engines: std::sync::RwLock<task_core::batch::Engines>,
}

impl AgentExecutor {
    /// An executor writing `{output_dir}/{id}.output` symlinks to transcripts in
    /// `{output_dir}/agents/` (the directory must exist). It registers nothing: hand
    /// [`task`](Self::task) to the registry, or call
    /// [`register_with_registry`](Self::register_with_registry).
    pub fn new(
        registry: Arc<Registry>,
        output_dir: impl Into<PathBuf>,
        config: AgentConfig,
    ) -> Self {
        let panel_grace = registry.config().panel_grace;
        let notice_delay = config.kill_grace * 2;
        let output_dir = output_dir.into();
        let worktrees_dir = config
            .worktrees_dir
            .clone()
            .unwrap_or_else(|| output_dir.join("worktrees"));
        let session_tokens = Arc::new(crate::budget::SessionTokens::new(
            config.session_token_budget,
        ));
        let inner = Arc::new_cyclic(|weak| Inner {
            registry,
            output_dir,
            config,
            session_tokens,
            engines: std::sync::RwLock::default(),
            worktrees: Arc::new(Worktrees::new(worktrees_dir)),
            agents: DashMap::new(),
            names: DashMap::new(),
            task: Arc::new(AgentTask {
                inner: weak.clone(),
                panel_grace,
                notice_delay,
            }),
        });
        AgentExecutor { inner }
    }

    /// The [`Task`] of `local_agent`: kill, the 30 s panel grace after an agent stops, and the
    /// messages carried forward across a resume.
    pub fn task(&self) -> Arc<dyn Task> {
        Arc::clone(&self.inner.task) as Arc<dyn Task>
    }

    /// Registers [`task`](Self::task) with its registry for `local_agent`; returns itself.
    #[must_use]
    pub fn register_with_registry(self) -> Self {
        self.inner
            .registry
            .register_executor(TaskType::LocalAgent, self.task());
        self
    }

    /// The configuration in use.
    pub fn config(&self) -> &AgentConfig {
        &self.inner.config
    }

    /// Lets agents started with a placement of `engine`'s name run as its jobs
    /// ([`crate::BatchRunner`]); returns itself.
    #[must_use]
    pub fn with_batch_engine(self, engine: Arc<dyn task_core::batch::BatchEngine>) -> Self {
        self.inner
            .engines
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .add(engine);
        self
    }

    /// Places the agents started without a placement (through [`task_core::Launch`]) by
    /// `placement` (`None`: on this machine); returns itself.
    #[must_use]
    pub fn with_default_placement(
        self,
        placement: Option<task_protocol::start::Placement>,
    ) -> Self {
        self.inner
            .engines
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .set_default(placement);
        self
    }

    /// The batch engines and the default placement (share them with the executors of other
    /// agent kinds: teammates, workflows' agents).
    pub fn engines(&self) -> task_core::batch::Engines {
        self.inner
            .engines
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The registry it records into.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.inner.registry
    }

    /// The worktrees its agents run in.
    pub fn worktrees(&self) -> &Arc<Worktrees> {
        &self.inner.worktrees
    }

    /// The session's token budget its agents count towards (share it with the teammates'
    /// executor, task-team's `TeamExecutor::with_session_tokens`).
    pub fn session_tokens(&self) -> &Arc<crate::budget::SessionTokens> {
        &self.inner.session_tokens
    }

    /// Starts an agent in the background: registers it, starts its runner, marks it running
    /// and follows it until it stops (then notifies once, priority `later`). Same as
    /// [`register`](Self::register) then [`PendingAgent::start`].
    ///
    /// Must be called inside a tokio runtime, from a worker or another long-lived thread (the
    /// CLI's parent-death signal follows the thread that forked it).
    ///
    /// # Errors
    /// As [`register`](Self::register), and spawn errors (the task is then `failed`, with no
    /// notification: the caller has the error).
    pub async fn start(&self, request: AgentRequest) -> Result<AgentHandle, AgentError> {
        self.register(request)?.start().await
    }

    /// Registers an agent `pending` (its transcript, output symlink and `meta.json` created)
    /// without starting its CLI, so its id can be handed out first. Messages sent meanwhile
    /// are queued for its first turn's end; a kill meanwhile ends it before it starts.
    ///
    /// # Errors
    /// [`AgentError::NameTaken`] when a running agent has the name; output and state errors.
    pub fn register(&self, request: AgentRequest) -> Result<PendingAgent, AgentError> {
        if let Some(name) = &request.name
            && self.live_name(name)
        {
            return Err(AgentError::NameTaken(name.clone()));
        }
        let id = match request.id {
            Some(id) => {
                self.clear_unstarted(id, request.transcript_dir.as_deref());
                id
            }
            None => TaskId::generate(TaskType::LocalAgent)?,
        };
        let (cwd, worktree) = match &request.worktree {
            None => (request.cwd.clone(), None),
            Some(wanted) => {
                let from = request.cwd.as_deref().unwrap_or(Path::new("."));
                let added = blocking(|| {
                    self.inner.worktrees.add(
                        from,
                        id.as_str(),
                        &request.description,
                        wanted.branch.as_deref(),
                    )
                })?;
                (Some(added.cwd), Some(added.worktree))
            }
        };
        let registered = self.register_as(id, request, cwd, worktree.clone());
        if registered.is_err()
            && let Some(worktree) = &worktree
        {
            self.inner.worktrees.remove_unchanged(worktree);
        }
        registered
    }

    /// The rest of [`register`](Self::register), once the id is chosen and the worktree (if
    /// any) added.
    fn register_as(
        &self,
        id: TaskId,
        request: AgentRequest,
        cwd: Option<PathBuf>,
        worktree: Option<task_core::Worktree>,
    ) -> Result<PendingAgent, AgentError> {
        let handle = self.files(id, None, request.transcript_dir.as_deref())?;
        let agent_type = request
            .agent_type
            .clone()
            .unwrap_or_else(|| DEFAULT_AGENT_TYPE.into());
        write_meta(&handle.transcript, &agent_type, &request)?;
        let spec = spec_of(id, &request, &agent_type, cwd, handle.transcript.clone());
        let state = AgentState {
            agent_id: id.as_str().to_owned(),
            name: request.name.clone(),
            prompt: request.prompt.clone(),
            agent_type,
            model: request.model.clone(),
            is_backgrounded: true,
            worktree: worktree.map(Box::new),
            budget: request
                .budget
                .or(self.inner.config.default_budget)
                .filter(|budget| !budget.is_unlimited()),
            batch: unsubmitted_job(request.runner.as_ref(), &handle.transcript),
            ..AgentState::default()
        };
        let mut task = TaskState::new(
            id,
            &request.description,
            &handle.output_file,
            TaskKind::Agent(Box::new(state)),
        )?
        .owned_by(request.owner_agent_id);
        task.base.tool_use_id = request.tool_use_id.clone();
        self.inner.registry.register(task)?;
        let mut record = AgentRecord::new(Arc::clone(&request.runner), spec, true);
        record.silent = request.silent;
        let record = Arc::new(record);
        self.inner.agents.insert(id, Arc::clone(&record));
        if let Some(name) = request.name {
            self.inner.names.insert(name, id);
        }
        Ok(PendingAgent {
            executor: self.clone(),
            record,
            handle,
            armed: true,
        })
    }

    /// Takes back the stopped agent `previous` that this executor no longer holds (evicted, or
    /// run by an earlier supervisor: its state as its record has it), so that
    /// [`send`](Self::send) resumes it under its id. `request` is how it was started (its
    /// runner, directory, environment, name); its conversation goes on from the session its
    /// CLI reported (`AgentState::session_id`), in the transcript its output file links to.
    ///
    /// # Errors
    /// [`AgentError::NotAnAgent`] for another task type or a live one,
    /// [`AgentError::NoSession`] when its CLI never reported a session (nothing to resume),
    /// [`AgentError::NameTaken`] when a live agent has its name.
    pub fn adopt(&self, previous: &TaskState, request: AgentRequest) -> Result<(), AgentError> {
        let id = previous.id();
        let TaskKind::Agent(agent) = &previous.kind else {
            return Err(AgentError::NotAnAgent(id));
        };
        if !previous.status().is_terminal() {
            return Err(AgentError::NotAnAgent(id));
        }
        if !request.runner.resumes() {
            return Err(AgentError::ResumeUnsupported(request.runner.name()));
        }
        let session_id = agent.session_id.clone().ok_or(AgentError::NoSession(id))?;
        if let Some(name) = &request.name
            && self.live_name(name)
        {
            return Err(AgentError::NameTaken(name.clone()));
        }
        let record = self.record_of(previous, agent, &request);
        record.set_session_id(session_id);
        record.set_adopted(previous.clone());
        self.hold(id, Arc::new(record), request.name);
        Ok(())
    }

    /// The record of agent `previous` (its state `agent`) taken back from its last recorded
    /// state: run by `request`'s runner in the transcript its output file links to, in its
    /// kept worktree if it had one.
    fn record_of(
        &self,
        previous: &TaskState,
        agent: &AgentState,
        request: &AgentRequest,
    ) -> AgentRecord {
        let id = previous.id();
        let transcript = std::fs::read_link(&previous.base.output_file)
            .unwrap_or_else(|_| self.transcript_path(id, None));
        // A kept worktree is where its work is.
        let cwd = match &agent.worktree {
            Some(worktree) => Some(worktree.worktree_path.clone().into()),
            None => request.cwd.clone(),
        };
        let spec = spec_of(id, request, &agent.agent_type, cwd, transcript);
        let mut record = AgentRecord::new(Arc::clone(&request.runner), spec, true);
        record.silent = request.silent;
        record
    }

    /// Holds `record` as agent `id`'s, addressable by `name` if it has one.
    fn hold(&self, id: TaskId, record: Arc<AgentRecord>, name: Option<String>) {
        self.inner.agents.insert(id, record);
        if let Some(name) = name {
            self.inner.names.insert(name, id);
        }
    }

    /// Follows again the run of `previous` (its last recorded state), which a dead supervisor
    /// left live as a batch job ([`AgentState::batch`]; a job whose id it did not live to
    /// record is found by its name): registered as recorded, its job followed and its
    /// transcript read from where the job's output begins (its progress and tokens counted
    /// again from there), its end recorded and notified once. Nothing is submitted. The
    /// returned start follows it; `request` is how it was started (its runner must be one that
    /// places it on that batch system). A job that cannot be followed ends the agent `failed`
    /// saying why, notified.
    ///
    /// # Errors
    /// [`AgentError::NotAnAgent`] for another task type, or an agent that is not live as a
    /// batch job; registration errors.
    pub fn follow_again(
        &self,
        previous: &TaskState,
        request: AgentRequest,
    ) -> Result<
        impl std::future::Future<Output = Result<(), AgentError>> + Send + 'static,
        AgentError,
    > {
        let id = previous.id();
        let TaskKind::Agent(agent) = &previous.kind else {
            return Err(AgentError::NotAnAgent(id));
        };
        let job = match &agent.batch {
            Some(job) if !previous.status().is_terminal() => (**job).clone(),
            _ => return Err(AgentError::NotAnAgent(id)),
        };
        let record = self.record_of(previous, agent, &request);
        if let Some(session_id) = &agent.session_id {
            record.set_session_id(session_id.clone());
        }
        let record = Arc::new(record);
        self.inner.registry.register(previous.clone())?;
        self.hold(id, Arc::clone(&record), request.name);
        let executor = self.clone();
        Ok(async move {
            let guard = record.lifecycle.lock().await;
            let followed = record.runner.follow(&record.spec, &job).await;
            executor
                .launch(&record, id, followed, guard, RunOf::TakenOver)
                .await
        })
    }

    /// Sends `message` to the agent `target` (its id or name): queued if it is running,
    /// delivered as its next user turn; a stopped agent is resumed with it (same id, running
    /// again, and it notifies again when it stops).
    ///
    /// # Errors
    /// [`AgentError::NoSuchAgent`] (its text is the reference's), [`AgentError::InputClosed`]
    /// for the main session, resume errors.
    pub async fn send(
        &self,
        target: &str,
        message: &str,
        tool_use_id: Option<String>,
    ) -> Result<SendOutcome, AgentError> {
        let id = self.resolve(target)?;
        let record = self.record(&id)?;
        if !record.accepts_messages {
            return Err(AgentError::InputClosed(id));
        }
        let guard = record.lifecycle.lock().await;
        let current = self
            .inner
            .registry
            .get(&id)
            .or_else(|| record.take_adopted().map(Arc::new));
        if current.as_ref().is_some_and(|s| !s.status().is_terminal()) {
            if !record.runner.accepts_messages() {
                return Err(AgentError::InputClosed(id));
            }
            self.queue(&id, message)?;
            if let Some(control) = record.control() {
                let _ = control.try_send(Control::Deliver);
            }
            return Ok(SendOutcome::Queued(id));
        }
        if !record.runner.resumes() {
            return Err(AgentError::ResumeUnsupported(record.runner.name()));
        }
        let session_id = record.session_id().ok_or(AgentError::NoSession(id))?;
        let previous = self.register_resumed(&record, id, current.as_deref(), tool_use_id)?;
        let resumed = record
            .runner
            .resume(&record.spec, &session_id, message)
            .await;
        self.launch(&record, id, resumed, guard, RunOf::Started)
            .await?;
        Ok(SendOutcome::Resumed {
            handle: self.handle(id),
            previous,
        })
    }

    /// Backgrounds the main session: registers an `s` task over `transcript` (an existing,
    /// growing file written by someone else), tracked like an agent until its `result` line.
    /// `format`: the transcript's format, or `None` to detect it from its first lines.
    ///
    /// # Errors
    /// Output errors (the transcript must exist; nothing may be at the output path).
    pub async fn register_main_session(
        &self,
        transcript: &Path,
        description: &str,
        format: Option<CliFormat>,
    ) -> Result<AgentHandle, AgentError> {
        let id = TaskId::main_session()?;
        let handle = self.files(id, Some(transcript), None)?;
        let state = AgentState {
            agent_id: id.as_str().to_owned(),
            agent_type: MAIN_SESSION_TYPE.into(),
            is_backgrounded: true,
            ..AgentState::default()
        };
        let task = TaskState::new(
            id,
            description,
            &handle.output_file,
            TaskKind::Agent(Box::new(state)),
        )?;
        self.inner.registry.register(task)?;
        let spec = AgentSpec::new("", transcript);
        let runner: Arc<dyn AgentRunner> = Arc::new(NoRunner);
        let record = Arc::new(AgentRecord::new(runner, spec, false));
        self.inner.agents.insert(id, Arc::clone(&record));
        let tail = self.tail(transcript, 0, format);
        let session: Box<dyn AgentSession> = Box::new(TranscriptSession::new(
            tail,
            self.inner.config.transcript_poll,
        ));
        let guard = record.lifecycle.lock().await;
        self.launch(&record, id, Ok(session), guard, RunOf::Started)
            .await?;
        Ok(handle)
    }

    /// Resolves an id or a name to a known agent.
    ///
    /// # Errors
    /// [`AgentError::NoSuchAgent`].
    pub fn resolve(&self, target: &str) -> Result<TaskId, AgentError> {
        if let Ok(id) = TaskId::parse(target)
            && self.inner.agents.contains_key(&id)
        {
            return Ok(id);
        }
        self.inner
            .names
            .get(target)
            .map(|entry| *entry.value())
            .ok_or_else(|| AgentError::NoSuchAgent(target.to_owned()))
    }

    /// Marks the run running and starts following it; a failed start fails the task silently.
    /// Runs the session `started` of agent `id` (or records why it did not start).
    async fn launch(
        &self,
        record: &Arc<AgentRecord>,
        id: TaskId,
        started: Result<Box<dyn AgentSession>, AgentError>,
        mut run_counter: tokio::sync::MutexGuard<'_, u64>,
        run: RunOf,
    ) -> Result<(), AgentError> {
        let registry = &self.inner.registry;
        let taken_over = run == RunOf::TakenOver;
        let session = match started {
            Ok(session) => session,
            Err(error) => {
                // A start that fails is told to its caller; a run taken over has no caller
                // left, so its end is notified.
                let message = match taken_over {
                    true => format!("its batch job cannot be followed again: {error}"),
                    false => error.to_string(),
                };
                let failed = registry.transition_with(&id, TaskStatus::Failed, |state| {
                    state.base.notified = !taken_over;
                    state.base.end_reason = Some(EndReason::SpawnFailed {
                        error: message.clone(),
                    });
                    if let TaskKind::Agent(agent) = &mut state.kind {
                        agent.error = Some(message.clone());
                    }
                });
                if let (true, Ok(state)) = (taken_over, &failed) {
                    let end = RunEnd::Failed {
                        error: message.clone(),
                        reason: EndReason::SpawnFailed { error: message },
                    };
                    let usage = task_core::AgentUsage::default();
                    let notice = agent_notification(state, &end, usage, record.runner.resumes());
                    registry.notify_once(&id, notice, record.delivery());
                }
                blocking(|| settle_worktree(registry, &self.inner.worktrees, &id));
                return Err(error);
            }
        };
        let (process, batch) = (session.process(), session.batch().map(Box::new));
        let running = |state: &mut TaskState| {
            if let TaskKind::Agent(agent) = &mut state.kind {
                agent.process.clone_from(&process);
                agent.batch.clone_from(&batch);
            }
        };
        let already_running = registry
            .get(&id)
            .is_some_and(|state| state.status() == TaskStatus::Running);
        if already_running {
            // Registered running, as its dead supervisor left it: its run goes on.
            registry.update(&id, |current| {
                let mut next = current.clone();
                running(&mut next);
                Some(next)
            })?;
        } else {
            registry.transition_with(&id, TaskStatus::Running, running)?;
        }
        *run_counter += 1;
        let run = *run_counter;
        let drive = Drive {
            registry: Arc::clone(registry),
            config: self.inner.config.clone(),
            record: Arc::clone(record),
            id,
            run,
            session,
            control: record.open_control(run),
            tracker: ProgressTracker::default(),
            started: Instant::now(),
            in_flight: Vec::new(),
            errors: Default::default(),
            worktrees: Arc::clone(&self.inner.worktrees),
            budget: crate::budget::RunBudget::new(
                budget_of(registry, &id),
                Arc::clone(&self.inner.session_tokens),
                Instant::now(),
            ),
        };
        tokio::spawn(drive.run());
        Ok(())
    }

    /// Re-registers a stopped agent under its id: `pending`, not notified, a fresh run's
    /// progress keeping the summary; the registry carries the UI-held fields forward. Returns
    /// how the previous run ended.
    fn register_resumed(
        &self,
        record: &AgentRecord,
        id: TaskId,
        previous: Option<&TaskState>,
        tool_use_id: Option<String>,
    ) -> Result<TaskStatus, AgentError> {
        let previous = previous.ok_or(AgentError::NoSuchAgent(id.to_string()))?;
        let TaskKind::Agent(agent) = &previous.kind else {
            return Err(AgentError::NotAnAgent(id));
        };
        let agent = AgentState {
            progress: AgentProgress {
                summary: agent.progress.summary.clone(),
                ..AgentProgress::default()
            },
            result: None,
            error: None,
            // A new run has its budgets again.
            budget: agent.budget.map(|budget| task_core::AgentBudget {
                turns_used: 0,
                ..budget
            }),
            // Its last run's job is over; this run's is not submitted yet.
            batch: unsubmitted_job(record.runner.as_ref(), &record.spec.transcript),
            ..(**agent).clone()
        };
        let mut task = TaskState::new(
            id,
            &previous.base.description,
            &previous.base.output_file,
            TaskKind::Agent(Box::new(agent)),
        )?
        .owned_by(previous.base.agent_id);
        task.base.tool_use_id = tool_use_id.or_else(|| previous.base.tool_use_id.clone());
        // Its age counts from its first start, also when it is taken back from its record.
        task.base.start_time = previous.base.start_time;
        self.inner.registry.register(task)?;
        Ok(previous.status())
    }

    fn queue(&self, id: &TaskId, message: &str) -> Result<(), AgentError> {
        let mut refused = false;
        self.inner.registry.update(id, |current| {
            let mut next = current.clone();
            match &mut next.kind {
                TaskKind::Agent(agent) if !current.status().is_terminal() => {
                    agent.pending_messages.push(message.to_owned());
                    Some(next)
                }
                _ => {
                    refused = true;
                    None
                }
            }
        })?;
        if refused {
            Err(AgentError::InputClosed(*id))
        } else {
            Ok(())
        }
    }

    fn live_name(&self, name: &str) -> bool {
        let Some(id) = self.inner.names.get(name).map(|e| *e.value()) else {
            return false;
        };
        self.inner
            .registry
            .get(&id)
            .is_some_and(|s| !s.status().is_terminal())
    }

    fn record(&self, id: &TaskId) -> Result<Arc<AgentRecord>, AgentError> {
        self.inner
            .agents
            .get(id)
            .map(|entry| Arc::clone(entry.value()))
            .ok_or(AgentError::NotAnAgent(*id))
    }

    fn handle(&self, id: TaskId) -> AgentHandle {
        let output_file = self.inner.output_dir.join(format!("{id}.output"));
        let transcript = self
            .inner
            .agents
            .get(&id)
            .map(|r| r.spec.transcript.clone())
            .unwrap_or_else(|| self.transcript_path(id, None));
        AgentHandle {
            id,
            output_file,
            transcript,
        }
    }

    /// Where agent `id`'s transcript goes: in `dir` when set, else `{output_dir}/agents`.
    fn transcript_path(&self, id: TaskId, dir: Option<&Path>) -> PathBuf {
        dir.map_or_else(|| self.inner.output_dir.join("agents"), Path::to_path_buf)
            .join(format!("agent-{id}.jsonl"))
    }

    /// Removes what the first registration of agent `id` left, registered again under its id
    /// after it waited and never ran: its output link, its empty transcript and its
    /// `meta.json`. A transcript with anything in it is kept (the agent ran), and registering
    /// again then fails on it.
    fn clear_unstarted(&self, id: TaskId, dir: Option<&Path>) {
        let transcript = self.transcript_path(id, dir);
        if std::fs::metadata(&transcript).is_ok_and(|meta| meta.len() != 0) {
            return;
        }
        let output = self.inner.output_dir.join(format!("{id}.output"));
        let meta = transcript.with_extension("meta.json");
        remove_left(id, [output.as_path(), &meta, &transcript]);
    }

    /// Creates the transcript (unless given; in `dir` when set) and the output symlink to it.
    fn files(
        &self,
        id: TaskId,
        existing: Option<&Path>,
        dir: Option<&Path>,
    ) -> Result<AgentHandle, AgentError> {
        let transcript = match existing {
            Some(path) => {
                std::fs::metadata(path).map_err(|e| task_output::OutputError::from_io(path, e))?;
                path.to_path_buf()
            }
            None => {
                let path = self.transcript_path(id, dir);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| task_output::OutputError::from_io(dir, e))?;
                }
                create_output_file(&path)?;
                path
            }
        };
        let output_file = self.inner.output_dir.join(format!("{id}.output"));
        link_transcript(&output_file, &transcript)?;
        Ok(AgentHandle {
            id,
            output_file,
            transcript,
        })
    }

    fn tail(&self, path: &Path, offset: u64, format: Option<CliFormat>) -> TranscriptTail {
        let config = &self.inner.config;
        let parser = match format {
            Some(format) => format.parser(),
            None => Box::new(DetectingParser::default()),
        };
        TranscriptTail::new(
            path,
            offset,
            parser,
            config.max_read_bytes,
            config.max_line_bytes,
        )
    }
}

/// Removes the files a task registered before it ever ran left (`id` names it in the log);
/// one that is not there is no failure.
pub fn remove_left<'a>(id: TaskId, paths: impl IntoIterator<Item = &'a Path>) {
    for path in paths {
        if let Err(error) = std::fs::remove_file(path)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(task = %id, path = %path.display(), %error, "cannot remove it");
        }
    }
}

/// The sidecar `agent-{id}.meta.json` beside the transcript, as the reference writes it.
fn write_meta(
    transcript: &Path,
    agent_type: &str,
    request: &AgentRequest,
) -> Result<(), AgentError> {
    let mut meta = json!({"agentType": agent_type, "description": request.description});
    if let Some(name) = &request.name {
        meta["name"] = json!(name);
    }
    if let Some(tool_use_id) = &request.tool_use_id {
        meta["toolUseId"] = json!(tool_use_id);
    }
    if let Some(depth) = request.spawn_depth {
        meta["spawnDepth"] = json!(depth);
    }
    let path = transcript.with_extension("meta.json");
    let mut file = create_output_file(&path)?;
    std::io::Write::write_all(&mut file, meta.to_string().as_bytes())
        .map_err(|e| task_output::OutputError::from_io(&path, e))?;
    Ok(())
}

/// The `local_agent` policies for the registry. A kill sets status `killed` with no
/// notification for the model (an SDK `task_notification` with status `stopped` only), then
/// interrupts the agent, `SIGKILL`s everything it started after the grace (its process group
/// and the escapees carrying its marker), and kills the tasks the agent owns.
#[derive(Debug)]
struct AgentTask {
    inner: std::sync::Weak<Inner>,
    panel_grace: Duration,
    /// Its notice follows its CLI's exit: up to the kill grace for the CLI to exit, then the
    /// kill, which waits the grace again at most.
    notice_delay: Duration,
}

#[async_trait]
impl Task for AgentTask {
    /// Agents share the agents' default limit.
    fn admission(&self, _: task_core::TaskType) -> task_core::Admission {
        task_core::Admission::AGENTS
    }

    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        let marked = registry.transition_with(id, TaskStatus::Killed, |state| {
            state.base.end_reason = Some(EndReason::Killed);
            if let TaskKind::Agent(agent) = &mut state.kind {
                agent.process = None;
            }
        });
        let Ok(state) = marked else {
            // It ended on its own meanwhile.
            return Ok(());
        };
        registry.notify_once(id, stopped_notification(&state), Delivery::Silent);
        let control = self
            .inner
            .upgrade()
            .and_then(|inner| inner.agents.get(id).map(|r| Arc::clone(r.value())))
            .and_then(|record| record.control());
        if let Some(control) = control {
            let (ack, done) = oneshot::channel();
            if control.send(Control::Cancel(ack)).await.is_ok() {
                let _ = done.await;
            }
        }
        registry.kill_tasks_for_agent(*id).await;
        Ok(())
    }

    /// A stopped agent stays in the panel for `PANEL_GRACE` (SPEC §2).
    fn eviction_grace(&self, _ended: &TaskState) -> Option<Duration> {
        Some(self.panel_grace)
    }

    fn notice_delay(&self, _ended: &TaskState) -> Duration {
        self.notice_delay
    }

    /// A resumed agent keeps its displayed messages and its queued ones.
    fn carry_forward(&self, resumed: &mut TaskState, previous: &TaskState) {
        resumed.kind.carry_ui_fields_from(&previous.kind);
    }

    /// An agent whose supervisor died: its CLI died with it (parent-death signal), and what is
    /// left of its processes is killed, each checked live first
    /// ([`ShellProcess::kill_orphaned`](task_core::ShellProcess::kill_orphaned)): its group's
    /// members and the escapees carrying its marker, never a process that took a reused number.
    ///
    /// Then its worktree, if it ran in one that holds no changes, is removed with its branch
    /// (one with changes stays for `tasks worktree ls`).
    /// An agent whose run is a batch job outlives its supervisor: the job runs on, and the
    /// next supervisor follows it again ([`AgentExecutor::follow_again`]).
    fn survives_supervisor(&self, task: &TaskState) -> bool {
        matches!(&task.kind, TaskKind::Agent(agent) if agent.batch.is_some())
    }

    fn reap_orphan(&self, orphan: &TaskState) -> Result<(), KillError> {
        let TaskKind::Agent(agent) = &orphan.kind else {
            return Ok(());
        };
        let killed = match &agent.process {
            Some(group) => group
                .kill_orphaned(orphan.id().as_ref())
                .map(drop)
                .map_err(|error| KillError::Failed {
                    id: orphan.id(),
                    source: Box::new(error),
                }),
            None => Ok(()),
        };
        if let (Some(worktree), Some(inner)) = (&agent.worktree, self.inner.upgrade()) {
            inner.worktrees.remove_unchanged(worktree);
        }
        killed
    }
}

/// The batch job a run of `runner` is to be, before it is submitted (`None` for a runner
/// that runs agents on this machine): on its batch system, its output beginning where
/// `transcript` ends now.
fn unsubmitted_job(
    runner: &dyn AgentRunner,
    transcript: &Path,
) -> Option<Box<task_core::BatchJob>> {
    let mut job = task_core::BatchJob::new(runner.batch_engine()?);
    job.output_from = std::fs::metadata(transcript).ok().map(|m| m.len());
    Some(Box::new(job))
}

/// Whose run [`AgentExecutor::launch`] runs: a start or a resume, whose failure its caller is
/// told, or a run a dead supervisor left, whose failure nobody else hears of (notified).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunOf {
    Started,
    TakenOver,
}

/// The main session's "runner": it has no process, so it cannot start or resume anything.
#[derive(Debug)]
struct NoRunner;

#[async_trait]
impl AgentRunner for NoRunner {
    fn name(&self) -> &'static str {
        MAIN_SESSION_TYPE
    }

    async fn start(&self, _spec: &AgentSpec) -> Result<Box<dyn AgentSession>, AgentError> {
        Err(AgentError::ResumeUnsupported(MAIN_SESSION_TYPE))
    }

    async fn resume(
        &self,
        _spec: &AgentSpec,
        _session: &str,
        _message: &str,
    ) -> Result<Box<dyn AgentSession>, AgentError> {
        Err(AgentError::ResumeUnsupported(MAIN_SESSION_TYPE))
    }
}

/// How agent `id` of `request` runs: in `cwd`, writing `transcript`, marked with its id.
fn spec_of(
    id: TaskId,
    request: &AgentRequest,
    agent_type: &str,
    cwd: Option<PathBuf>,
    transcript: PathBuf,
) -> AgentSpec {
    let mut env = request.env.clone();
    env.push((AGENT_ID_ENV.into(), id.as_str().into()));
    AgentSpec {
        prompt: request.prompt.clone(),
        model: request.model.clone(),
        agent_type: agent_type.to_owned(),
        cwd,
        env,
        marker: Some(id.to_string()),
        replace_env: request.replace_env,
        transcript,
        json_schema: request.json_schema.clone(),
    }
}

/// The budgets recorded in the state of agent `id`.
fn budget_of(registry: &Registry, id: &TaskId) -> Option<task_core::AgentBudget> {
    match &registry.get(id)?.kind {
        TaskKind::Agent(agent) => agent.budget,
        _ => None,
    }
}
