//! The executor of `remote_agent` tasks: start a session, follow it ([`poll`], the poll loop
//! of each live task, which ends it through the executor), end it exactly once.

mod poll;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use dashmap::DashMap;
use task_core::{
    Delivery, EndReason, KillError, Priority, Registry, RemoteState, RemoteSubtype, Task, TaskId,
    TaskKind, TaskState, TaskStatus, TaskType, now_ms,
};
use task_output::open::create_output_file;
use tokio::sync::Notify;

use crate::api::{CreateSession, IdempotencyKey, UserEvent};
use crate::backoff::Backoff;
use crate::checker::CompletionChecker;
use crate::config::RemoteConfig;
use crate::error::{ApiError, RemoteError};
use crate::eventlog::EventLog;
use crate::notify::{self, RemoteEnd};
use crate::sidecar::{Sidecar, Sidecars};
use crate::{HttpSessions, RemoteSessions};
use poll::Follow;

/// A remote agent to start.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RemoteRequest {
    /// The server's base URL.
    pub server: String,
    /// The file holding its bearer token.
    pub token_file: PathBuf,
    /// The subtype.
    pub subtype: RemoteSubtype,
    /// A one-line description (`Remote agent "{description}" …`).
    pub description: String,
    /// The first user turn.
    pub prompt: String,
    /// Subtype data for its completion checker.
    pub metadata: Option<serde_json::Value>,
    /// The tool call that started it.
    pub tool_use_id: Option<String>,
    /// The agent that owns it.
    pub owner_agent_id: Option<TaskId>,
    /// The id it must get instead of a new one: a queued task registered again, under the id
    /// its caller holds, by the supervisor that succeeded the one it queued under
    /// (task-core's `Caller::task_id`); the files its first registration left are made again.
    pub id: Option<TaskId>,
}

impl RemoteRequest {
    /// A `remote-agent` request; everything else default.
    pub fn new(
        server: impl Into<String>,
        token_file: impl Into<PathBuf>,
        description: impl Into<String>,
        prompt: impl Into<String>,
    ) -> Self {
        RemoteRequest {
            server: server.into(),
            token_file: token_file.into(),
            subtype: RemoteSubtype::RemoteAgent,
            description: description.into(),
            prompt: prompt.into(),
            metadata: None,
            tool_use_id: None,
            owner_agent_id: None,
            id: None,
        }
    }
}

/// A remote task registered `pending` by [`RemoteExecutor::register`]; [`start`](Self::start)
/// creates its session.
#[derive(Debug)]
#[must_use = "a registered remote task that is never started stays pending"]
pub struct PendingRemote {
    executor: RemoteExecutor,
    id: TaskId,
    request: RemoteRequest,
    client: Arc<dyn RemoteSessions>,
    /// Until started: dropping it fails the task.
    armed: bool,
}

impl Drop for PendingRemote {
    /// Never started: it ends `failed`, silently (its starter had the chance to report).
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let _ =
            self.executor
                .inner
                .registry
                .transition_with(&self.id, TaskStatus::Failed, |state| {
                    state.base.notified = true;
                    state.base.end_reason = Some(EndReason::SpawnFailed {
                        error: "dropped before it was started".into(),
                    });
                });
    }
}

impl PendingRemote {
    /// Its id.
    pub fn id(&self) -> TaskId {
        self.id
    }

    /// Creates the session (retrying transient faults within the outage limit, every attempt
    /// with the same idempotency key, so a retry never makes a second session), writes the
    /// sidecar, marks the task running and follows it. A failure ends the task `failed` with a
    /// notification.
    pub async fn start(mut self) {
        self.armed = false;
        let executor = self.executor.clone();
        let inner = &executor.inner;
        let create = CreateSession {
            events: vec![UserEvent::text(&self.request.prompt)],
            title: Some(self.request.description.clone()),
            model: None,
        };
        // One key for every attempt: a retry after an answer was lost (a timeout, a reset)
        // gets the session the first attempt made instead of a second one.
        let key = IdempotencyKey::random();
        let mut backoff = Backoff::new(inner.config.backoff_base, inner.config.backoff_cap);
        let session = loop {
            match self.client.create(&create, &key).await {
                Ok(session) => break session,
                Err(error)
                    if error.is_transient() && backoff.outage() < inner.config.outage_limit =>
                {
                    tracing::debug!(task = %self.id, %error, "retrying the session's creation");
                    tokio::time::sleep(backoff.fail()).await;
                }
                Err(error) => {
                    executor.end(&self.id, RemoteEnd::Failed(start_failure(&error)));
                    return;
                }
            }
        };
        let spawned = Sidecar {
            task_id: self.id,
            remote_task_type: self.request.subtype,
            session_id: session.id.clone(),
            title: session.title.clone(),
            command: self.request.prompt.clone(),
            spawned_at: now_ms(),
            tool_use_id: self.request.tool_use_id.clone(),
            is_long_running: None,
            remote_task_metadata: self.request.metadata.clone(),
            description: self.request.description.clone(),
            server: self.request.server.clone(),
            token_file: self.request.token_file.clone(),
            agent_id: self.request.owner_agent_id,
        };
        if let Err(error) = inner.sidecars.write(&spawned) {
            let _ = self.client.archive(&session.id).await;
            executor.end(&self.id, RemoteEnd::Failed(error.to_string()));
            return;
        }
        // Tracked before it is seen running, so a kill from then on finds the session to archive.
        let run = executor.track(self.id, session.id.clone(), Arc::clone(&self.client));
        let running = inner
            .registry
            .transition_with(&self.id, TaskStatus::Running, |state| {
                if let TaskKind::Remote(remote) = &mut state.kind {
                    remote.session_id.clone_from(&session.id);
                    remote.title.clone_from(&session.title);
                    remote.spawned_at = spawned.spawned_at;
                }
            });
        if running.is_err() {
            // Killed while the session was being created: the kill could not archive it.
            inner.runs.remove(&self.id);
            let _ = self.client.archive(&session.id).await;
            let _ = inner.sidecars.delete(&self.id);
            return;
        }
        executor.follow(self.id, run, None);
    }
}

/// The words of a start that failed.
fn start_failure(error: &ApiError) -> String {
    format!("could not create the session: {error}")
}

/// Runs `remote_agent` tasks: sessions on a sessions server, polled until they end.
///
/// Output files are `{output_dir}/{id}.output` (the event log, one event a line); sidecars go to
/// `{session_dir}/remote-agents/`.
#[derive(Debug, Clone)]
pub struct RemoteExecutor {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) registry: Arc<Registry>,
    output_dir: PathBuf,
    pub(crate) sidecars: Sidecars,
    pub(crate) config: RemoteConfig,
    pub(crate) checkers: DashMap<RemoteSubtype, Arc<dyn CompletionChecker>>,
    runs: DashMap<TaskId, Arc<Run>>,
    /// One client (one connection pool) per server and token, shared by its tasks.
    clients: DashMap<(String, Secret), Arc<dyn RemoteSessions>>,
    task: Arc<RemoteTask>,
}

/// What a live task's poll loop and its kill share.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) client: Arc<dyn RemoteSessions>,
    pub(crate) session_id: String,
    pub(crate) stop: Notify,
}

impl RemoteExecutor {
    /// An executor writing output files in `output_dir` and sidecars under `session_dir`.
    pub fn new(
        registry: Arc<Registry>,
        output_dir: impl Into<PathBuf>,
        session_dir: &Path,
        config: RemoteConfig,
    ) -> Self {
        let inner = Arc::new_cyclic(|weak| Inner {
            registry,
            output_dir: output_dir.into(),
            sidecars: Sidecars::new(session_dir),
            config,
            checkers: DashMap::new(),
            runs: DashMap::new(),
            clients: DashMap::new(),
            task: Arc::new(RemoteTask {
                inner: weak.clone(),
            }),
        });
        RemoteExecutor { inner }
    }

    /// The [`Task`] of `remote_agent` (kill archives the session).
    pub fn task(&self) -> Arc<dyn Task> {
        Arc::clone(&self.inner.task) as Arc<dyn Task>
    }

    /// Registers [`task`](Self::task) with its registry for `remote_agent`; returns itself.
    #[must_use]
    pub fn register_with_registry(self) -> Self {
        self.inner
            .registry
            .register_executor(TaskType::RemoteAgent, self.task());
        self
    }

    /// Registers the completion checker of `subtype` (replacing any).
    #[must_use]
    pub fn with_checker(self, subtype: RemoteSubtype, checker: Arc<dyn CompletionChecker>) -> Self {
        self.inner.checkers.insert(subtype, checker);
        self
    }

    /// The configuration in use.
    pub fn config(&self) -> &RemoteConfig {
        &self.inner.config
    }

    /// The sidecars of its session.
    pub fn sidecars(&self) -> &Sidecars {
        &self.inner.sidecars
    }

    /// Starts a remote agent: [`register`](Self::register), then creates its session in the
    /// background. Returns its id at once.
    ///
    /// # Errors
    /// As [`register`](Self::register).
    pub fn start(&self, request: RemoteRequest) -> Result<TaskId, RemoteError> {
        let pending = self.register(request)?;
        let id = pending.id();
        tokio::spawn(pending.start());
        Ok(id)
    }

    /// Registers a remote agent `pending` (its output file created) after reading its token.
    ///
    /// # Errors
    /// The token file cannot be read, the server address is unusable, output or state errors.
    pub fn register(&self, request: RemoteRequest) -> Result<PendingRemote, RemoteError> {
        let client = self.client(&request.server, &request.token_file)?;
        let id = match request.id {
            Some(id) => id,
            None => TaskId::generate(TaskType::RemoteAgent)?,
        };
        let output = self.output_path(&id);
        create_output_file(&output)?;
        let state = RemoteState {
            remote_task_type: request.subtype,
            command: request.prompt.clone(),
            spawned_at: now_ms(),
            remote_task_metadata: request.metadata.clone(),
            ..RemoteState::default()
        };
        let mut task = TaskState::new(
            id,
            &request.description,
            &output,
            TaskKind::Remote(Box::new(state)),
        )?
        .owned_by(request.owner_agent_id);
        task.base.tool_use_id = request.tool_use_id.clone();
        self.inner.registry.register(task)?;
        Ok(PendingRemote {
            executor: self.clone(),
            id,
            request,
            client,
            armed: true,
        })
    }

    /// Follows again every unfinished task whose sidecar is in this session (after a restart):
    /// each resumes from the last event in its output file. `finished` says which tasks ended
    /// already (their sidecar is deleted, never resumed). Returns the ids resumed.
    ///
    /// A task that cannot be followed again (its token file is gone, its output file cannot
    /// be read) ends here, `failed` with that reason and one notification, rather than being
    /// left for the supervisor to end as an orphan: the reason it ended is that it could not
    /// be resumed, not that its supervisor died.
    pub fn resume_all(&self, finished: impl Fn(&TaskId) -> bool) -> Vec<TaskId> {
        let mut resumed = Vec::new();
        for found in self.inner.sidecars.list() {
            match found {
                Ok(sidecar) if finished(&sidecar.task_id) => {
                    let _ = self.inner.sidecars.delete(&sidecar.task_id);
                }
                Ok(sidecar) => match self.resume(&sidecar) {
                    Ok(id) => resumed.push(id),
                    Err(error) => {
                        tracing::warn!(task = %sidecar.task_id, %error, "cannot resume");
                        self.end_unresumable(&sidecar, &error);
                    }
                },
                Err(error) => tracing::warn!(%error, "skipping a sidecar"),
            }
        }
        resumed
    }

    /// Ends the task of `sidecar`, which could not be followed again, `failed` with `error`
    /// as its reason (registered from its sidecar first, if the resume did not get that far).
    fn end_unresumable(&self, sidecar: &Sidecar, error: &RemoteError) {
        let id = sidecar.task_id;
        if self.inner.registry.get(&id).is_none() {
            let registered = Self::state_of(sidecar, &self.output_path(&id), None)
                .map_err(RemoteError::from)
                .and_then(|task| Ok(self.inner.registry.register(task)?));
            if let Err(error) = registered {
                tracing::warn!(task = %id, %error, "cannot record why it was not resumed");
                return;
            }
        }
        let reason = format!("it could not be followed again after its supervisor died: {error}");
        self.end(&id, RemoteEnd::Failed(reason));
    }

    /// The state of the task of `sidecar`, `pending`, its cursor at `cursor`.
    fn state_of(
        sidecar: &Sidecar,
        output: &Path,
        cursor: Option<String>,
    ) -> Result<TaskState, task_core::StateError> {
        let state = RemoteState {
            remote_task_type: sidecar.remote_task_type,
            session_id: sidecar.session_id.clone(),
            title: sidecar.title.clone(),
            command: sidecar.command.clone(),
            spawned_at: sidecar.spawned_at,
            is_long_running: sidecar.is_long_running,
            remote_task_metadata: sidecar.remote_task_metadata.clone(),
            last_event_id: cursor,
            ..RemoteState::default()
        };
        let mut task = TaskState::new(
            sidecar.task_id,
            &sidecar.description,
            output,
            TaskKind::Remote(Box::new(state)),
        )?
        .owned_by(sidecar.agent_id);
        task.base.tool_use_id.clone_from(&sidecar.tool_use_id);
        task.base.start_time = sidecar.spawned_at;
        // Its session has run since then: a supervisor that follows it again keeps its run time.
        task.base.started_at = Some(sidecar.spawned_at);
        Ok(task)
    }

    /// Follows again the task of `sidecar`, `running`, from the last event in its output file.
    ///
    /// # Errors
    /// Its token cannot be read, its output file is missing, state errors.
    pub fn resume(&self, sidecar: &Sidecar) -> Result<TaskId, RemoteError> {
        let client = self.client(&sidecar.server, &sidecar.token_file)?;
        let id = sidecar.task_id;
        let output = self.output_path(&id);
        let last = EventLog::new(&output).recover_last()?;
        let cursor = last
            .as_ref()
            .and_then(|event| crate::api::event_id(event).map(str::to_owned));
        let task = Self::state_of(sidecar, &output, cursor)?;
        self.inner.registry.register(task)?;
        let run = self.track(id, sidecar.session_id.clone(), client);
        if let Err(error) = self.inner.registry.transition(&id, TaskStatus::Running) {
            self.inner.runs.remove(&id);
            return Err(error.into());
        }
        self.follow(id, run, last);
        Ok(id)
    }

    /// Sends `text` to the remote agent `id` as a user turn.
    ///
    /// # Errors
    /// [`RemoteError::NoSuchTask`], [`RemoteError::Ended`], API errors.
    pub async fn send(&self, id: &TaskId, text: &str) -> Result<(), RemoteError> {
        let run = self
            .inner
            .runs
            .get(id)
            .map(|r| Arc::clone(r.value()))
            .ok_or_else(|| RemoteError::NoSuchTask(id.to_string()))?;
        if self
            .inner
            .registry
            .get(id)
            .is_none_or(|s| s.status().is_terminal())
        {
            return Err(RemoteError::Ended(*id));
        }
        run.client.send(&run.session_id, text).await?;
        Ok(())
    }

    /// Whether task `id` is a remote agent this executor follows now.
    pub fn follows(&self, id: &TaskId) -> bool {
        self.inner.runs.contains_key(id)
    }

    fn client(
        &self,
        server: &str,
        token_file: &Path,
    ) -> Result<Arc<dyn RemoteSessions>, RemoteError> {
        let token = crate::read_token_file(token_file)?;
        let key = (server.to_owned(), Secret(token));
        if let Some(client) = self.inner.clients.get(&key) {
            return Ok(Arc::clone(client.value()));
        }
        let client: Arc<dyn RemoteSessions> = Arc::new(HttpSessions::new(
            server,
            key.1.0.clone(),
            self.inner.config.request_timeout,
        )?);
        self.inner.clients.insert(key, Arc::clone(&client));
        Ok(client)
    }

    fn output_path(&self, id: &TaskId) -> PathBuf {
        self.inner.output_dir.join(format!("{id}.output"))
    }

    /// Records the session of task `id`, so a kill can archive it.
    fn track(&self, id: TaskId, session_id: String, client: Arc<dyn RemoteSessions>) -> Arc<Run> {
        let run = Arc::new(Run {
            client,
            session_id,
            stop: Notify::new(),
        });
        self.inner.runs.insert(id, Arc::clone(&run));
        run
    }

    /// Starts the poll loop of a running task.
    fn follow(
        &self,
        id: TaskId,
        run: Arc<Run>,
        last_event: Option<serde_json::Map<String, serde_json::Value>>,
    ) {
        let follow = Follow::new(self.clone(), id, run, last_event);
        tokio::spawn(follow.run());
    }

    /// Ends task `id` by itself (`completed` or `failed`), notifies once (priority `later`),
    /// deletes its sidecar and forgets its run. A task that ended meanwhile is left alone.
    pub(crate) fn end(&self, id: &TaskId, end: RemoteEnd) {
        let inner = &self.inner;
        let (status, reason) = match &end {
            RemoteEnd::Completed(_) | RemoteEnd::Checked(_) => {
                (TaskStatus::Completed, EndReason::Succeeded)
            }
            RemoteEnd::Failed(message) => (
                TaskStatus::Failed,
                EndReason::Errored {
                    message: message.clone(),
                },
            ),
            RemoteEnd::TimedOut(limit) => (TaskStatus::Failed, EndReason::timed_out(*limit)),
        };
        let from = inner.registry.get(id).map(|s| s.status());
        let status = match (from, status) {
            // Never started: pending may only fail.
            (Some(TaskStatus::Pending), _) => TaskStatus::Failed,
            (_, status) => status,
        };
        let ended = inner.registry.transition_with(id, status, |state| {
            state.base.end_reason = Some(reason.clone());
        });
        // Before the notification: whoever sees it finds nothing left of the run to resume.
        if let Err(error) = inner.sidecars.delete(id) {
            tracing::warn!(task = %id, %error, "cannot delete the sidecar");
        }
        if let Ok(ended) = ended {
            inner.registry.notify_once(
                id,
                notify::ended(&ended, &end),
                Delivery::Queue(Priority::Later),
            );
        }
        inner.runs.remove(id);
    }
}

/// A token, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// The `remote_agent` policies: a kill archives the session (status `killed`, no model
/// notification) and deletes the sidecar.
#[derive(Debug)]
struct RemoteTask {
    inner: std::sync::Weak<Inner>,
}

#[async_trait]
impl Task for RemoteTask {
    /// Agents share the agents' default limit.
    fn admission(&self, _: task_core::TaskType) -> task_core::Admission {
        task_core::Admission::AGENTS
    }

    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        let Ok(state) = registry.transition_with(id, TaskStatus::Killed, |state| {
            state.base.end_reason = Some(EndReason::Killed);
        }) else {
            return Ok(());
        };
        registry.notify_once(id, notify::stopped(&state), Delivery::Silent);
        let Some(inner) = self.inner.upgrade() else {
            return Ok(());
        };
        let run = inner.runs.remove(id).map(|(_, run)| run);
        let archived = match &run {
            Some(run) => {
                run.stop.notify_one();
                archive_with_retries(run, &inner.config).await
            }
            None => Ok(()),
        };
        if let Err(error) = inner.sidecars.delete(id) {
            tracing::warn!(task = %id, %error, "cannot delete the sidecar");
        }
        archived.map_err(|source| KillError::Failed {
            id: *id,
            source: Box::new(source),
        })
    }

    /// The session's resources are on the server; nothing local to reap. Its sidecar stays, so
    /// the next supervisor of the session resumes it.
    fn reap_orphan(&self, _orphan: &TaskState) -> Result<(), KillError> {
        Ok(())
    }

    /// Always, while it is live: its session runs on the server, whatever becomes of this
    /// process, and the next supervisor follows it again from its sidecar and cursor
    /// ([`RemoteExecutor::resume_all`]). One still `pending` has no sidecar until its session
    /// is created; the next supervisor then ends it, its supervisor having died before the
    /// session was known (the true reason, and its one end).
    fn survives_supervisor(&self, task: &TaskState) -> bool {
        !task.status().is_terminal()
    }
}

/// Archives the session, retrying transient faults a few times (a kill must not hang on a dead
/// server for the whole outage limit).
async fn archive_with_retries(run: &Run, config: &RemoteConfig) -> Result<(), ApiError> {
    let mut backoff = Backoff::new(config.backoff_base, config.backoff_cap);
    let limit = config.request_timeout.max(Duration::from_millis(1)) * 2;
    loop {
        match run.client.archive(&run.session_id).await {
            Ok(()) | Err(ApiError::NotFound(_)) => return Ok(()),
            Err(error) if error.is_transient() && backoff.outage() < limit => {
                tokio::time::sleep(backoff.fail()).await;
            }
            Err(error) => return Err(error),
        }
    }
}
