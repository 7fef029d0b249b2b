//! The executor of teammates: spawn, address, message, shut down, kill; each teammate runs
//! its loop ([`member`]) over the executor's shared state.

mod member;

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use dashmap::DashMap;
use std::time::Duration;

use task_core::{
    Address, EndReason, KillError, Registry, Task, TaskId, TaskKind, TaskState, TaskStatus,
    TaskType, TeammateIdentity, TeammateState, UpdateOutcome, Worktree,
};
use task_output::mailbox::MailboxReader;
use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::context::{self, TeammateContext};
use super::message::delivered_ids;
use super::{Protocol, TEAM_LEAD, TeamConfig, TeamMessage, mailbox, post, render_turn};
use member::{Agent, MemberRun, Start};
use task_agent::AgentError;
use task_agent::WorktreeRequest;
use task_agent::budget::SessionTokens;
use task_agent::worktree::{blocking, settle_worktree};
use task_agent::{AgentRunner, AgentSpec};
use task_core::AGENT_ID_ENV;
use task_worktree::{Worktrees, cwd_in};

/// The environment variable naming a teammate (`name@team`) to its agent's processes.
pub const TEAMMATE_ENV: &str = "TASKS_TEAMMATE";

/// A teammate to spawn.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TeammateRequest {
    /// Its name in the team.
    pub name: String,
    /// The team.
    pub team: String,
    /// Its display colour.
    pub color: Option<String>,
    /// What runs it.
    pub runner: Arc<dyn AgentRunner>,
    /// Its first turn.
    pub prompt: String,
    /// Whether its plan needs the lead's approval before it acts.
    pub plan_mode: bool,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// Extra environment.
    pub env: Vec<(OsString, OsString)>,
    /// Whether `env` is the whole environment (the caller's) rather than additions.
    pub replace_env: bool,
    /// Run it in a new git worktree made from the `HEAD` of the repository `cwd` is in: removed
    /// when it ends unchanged, kept (and shown by `tasks ps`) otherwise.
    pub worktree: Option<WorktreeRequest>,
    /// The id it must get instead of a new one: a queued task registered again, under the id
    /// its caller holds, by the supervisor that succeeded the one it queued under
    /// (task-core's `Caller::task_id`); the files its first registration left are made again.
    pub id: Option<TaskId>,
    /// Its budgets ([`crate::budget`]): it is stopped, `failed`, once it has used one up.
    pub budget: Option<task_core::AgentBudget>,
}

impl TeammateRequest {
    /// `name@team` run by `runner`, starting with `prompt`.
    pub fn new(
        name: impl Into<String>,
        team: impl Into<String>,
        runner: Arc<dyn AgentRunner>,
        prompt: impl Into<String>,
    ) -> Self {
        TeammateRequest {
            name: name.into(),
            team: team.into(),
            color: None,
            runner,
            prompt: prompt.into(),
            plan_mode: false,
            cwd: None,
            env: Vec::new(),
            replace_env: false,
            worktree: None,
            id: None,
            budget: None,
        }
    }
}

/// How a teammate ended, for the [`on_end`](TeamExecutor::on_end) hooks (task-list's
/// `unassign` reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TeammateEnd {
    /// It approved a shutdown request.
    Shutdown,
    /// Killed, crashed, or its agent exited on its own.
    Terminated,
}

type IdleHook = Box<dyn Fn(TaskId, &TeammateIdentity) + Send + Sync>;
type EndHook = Box<dyn Fn(TaskId, &TeammateIdentity, TeammateEnd) + Send + Sync>;

/// Runs `in_process_teammate` tasks, recorded in a task-core [`Registry`].
#[derive(Clone)]
pub struct TeamExecutor {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for TeamExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamExecutor")
            .field("teams_root", &self.inner.teams_root)
            .field("members", &self.inner.members.len())
            .finish_non_exhaustive()
    }
}

pub(super) struct Inner {
    pub(super) registry: Arc<Registry>,
    pub(super) teams_root: PathBuf,
    output_dir: PathBuf,
    pub(super) config: TeamConfig,
    pub(super) members: DashMap<TaskId, Arc<Member>>,
    /// `name@team` → the newest teammate of that name.
    names: DashMap<String, TaskId>,
    idle_hooks: Mutex<Vec<IdleHook>>,
    end_hooks: Mutex<Vec<EndHook>>,
    /// Where teammates spawned with a worktree get theirs.
    worktrees: Arc<Worktrees>,
    /// The session's token budget, which teammates' tokens count towards.
    pub(super) session_tokens: Arc<SessionTokens>,
    /// The batch systems teammates can be placed on.
    engines: task_core::batch::Engines,
}

/// What the executor shares with one teammate's loop.
#[derive(Debug)]
pub(super) struct Member {
    pub(super) identity: TeammateIdentity,
    /// Wakes the loop: a message was posted from this process.
    pub(super) wake: Notify,
    pub(super) idle: watch::Sender<bool>,
    pub(super) cancel: mpsc::Sender<oneshot::Sender<()>>,
}

impl TeamExecutor {
    /// An executor whose teams live under `teams_root` and whose transcripts go to
    /// `{output_dir}/{id}.output`; worktrees go under `{output_dir}/worktrees` unless
    /// [`with_worktrees`](Self::with_worktrees) says otherwise.
    pub fn new(
        registry: Arc<Registry>,
        teams_root: impl Into<PathBuf>,
        output_dir: impl Into<PathBuf>,
        config: TeamConfig,
    ) -> Self {
        let output_dir: PathBuf = output_dir.into();
        TeamExecutor {
            inner: Arc::new(Inner {
                registry,
                teams_root: teams_root.into(),
                worktrees: Arc::new(Worktrees::new(output_dir.join("worktrees"))),
                output_dir,
                config,
                members: DashMap::new(),
                names: DashMap::new(),
                idle_hooks: Mutex::new(Vec::new()),
                end_hooks: Mutex::new(Vec::new()),
                session_tokens: Arc::default(),
                engines: task_core::batch::Engines::default(),
            }),
        }
    }

    /// Adds teammates' worktrees with `worktrees` (share the agents' executor's, so that one
    /// repository's `git worktree add`s run one at a time). Call it before any spawn.
    #[must_use]
    pub fn with_worktrees(self, worktrees: Arc<Worktrees>) -> Self {
        self.before_sharing("worktrees", |inner| inner.worktrees = worktrees)
    }

    /// Registers it with its registry as the executor of `in_process_teammate`.
    #[must_use]
    pub fn register_with_registry(self) -> Self {
        let task: Arc<dyn Task> = Arc::new(TeammateTask {
            inner: Arc::clone(&self.inner),
        });
        self.inner
            .registry
            .register_executor(TaskType::InProcessTeammate, task);
        self
    }

    /// Where the teams live.
    pub fn teams_root(&self) -> &std::path::Path {
        &self.inner.teams_root
    }

    /// Calls `hook` each time a teammate goes idle.
    pub fn on_idle(&self, hook: impl Fn(TaskId, &TeammateIdentity) + Send + Sync + 'static) {
        if let Ok(mut hooks) = self.inner.idle_hooks.lock() {
            hooks.push(Box::new(hook));
        }
    }

    /// Calls `hook` once when a teammate ends, however it ends.
    pub fn on_end(
        &self,
        hook: impl Fn(TaskId, &TeammateIdentity, TeammateEnd) + Send + Sync + 'static,
    ) {
        if let Ok(mut hooks) = self.inner.end_hooks.lock() {
            hooks.push(Box::new(hook));
        }
    }

    /// Spawns a teammate: [`register`](Self::register) then [`PendingTeammate::start`].
    ///
    /// # Errors
    /// As those two.
    pub async fn spawn(&self, request: TeammateRequest) -> Result<TaskId, AgentError> {
        self.register(request)?.start().await
    }

    /// Registers a teammate `pending` (its id can be handed out) and takes its mailbox as its
    /// one reader; nothing runs until [`PendingTeammate::start`].
    ///
    /// # Errors
    /// [`AgentError::InvalidTeammate`] for a bad name or team, [`AgentError::NameTaken`] while
    /// a live teammate has the name, [`AgentError::Mailbox`] when another reader holds its
    /// mailbox; output and state errors.
    pub fn register(&self, request: TeammateRequest) -> Result<PendingTeammate, AgentError> {
        self.admit(request, None)
    }

    /// Registers again, under its id, the teammate whose supervisor died while it was live,
    /// or one that ended (shut down, killed, failed) and is sent a message (`previous`, its
    /// last recorded state; `request` as it was spawned), to be started with
    /// [`PendingTeammate::start`]. A shutdown asked of a live one still bounds it; one asked
    /// of an ended one is over. Its transcript is appended to and its agent CLI's session
    /// resumed (`--resume`), its first turn being the messages of its mailbox that its
    /// transcript does not hold (each message's id is in the turn the CLI printed), or
    /// [`RESUMED_TURN`] when there are none; a teammate whose CLI never said its session
    /// starts again from its prompt. Plan mode is not resumed.
    ///
    /// # Errors
    /// As [`register`](Self::register); [`AgentError::NoSuchAgent`] when `previous` is not a
    /// teammate.
    pub fn resume(
        &self,
        previous: &TaskState,
        request: TeammateRequest,
    ) -> Result<PendingTeammate, AgentError> {
        if !matches!(previous.kind, TaskKind::Teammate(_)) {
            return Err(AgentError::NoSuchAgent(previous.base.id.to_string()));
        }
        // Its old CLI must write nothing more into the transcript the resume reads.
        if let Err(error) = reap(previous) {
            tracing::warn!(id = %previous.base.id, %error, "what its dead supervisor left may live on");
        }
        self.admit(request, Some(previous))
    }

    /// [`register`](Self::register) (`previous` is `None`) or [`resume`](Self::resume).
    fn admit(
        &self,
        mut request: TeammateRequest,
        previous: Option<&TaskState>,
    ) -> Result<PendingTeammate, AgentError> {
        let full = full_name(&request.name, &request.team)?;
        if self.inner.names.contains_key(&full) {
            return Err(AgentError::NameTaken(full));
        }
        let reader = mailbox(&self.inner.teams_root, &request.team, &request.name)?.reader()?;
        let id = match previous {
            Some(previous) => previous.base.id,
            None => match request.id {
                Some(id) => id,
                None => TaskId::generate(TaskType::InProcessTeammate)?,
            },
        };
        let (worktree, fresh) = self.worktree_of(id, &full, &mut request, previous)?;
        let admitted = self.admit_in(id, full, request, previous, reader, worktree.clone());
        if admitted.is_err()
            && fresh
            && let Some(worktree) = &worktree
        {
            self.inner.worktrees.remove_unchanged(worktree);
        }
        admitted
    }

    /// The worktree teammate `id` (`full`, its `name@team`) runs in, its `request.cwd` moved
    /// into it, and whether it was just added: the one it had when it is resumed, else a new
    /// one when the request asks for it (a resumed teammate whose worktree was never recorded
    /// gets a new one: it never runs unisolated).
    fn worktree_of(
        &self,
        id: TaskId,
        full: &str,
        request: &mut TeammateRequest,
        previous: Option<&TaskState>,
    ) -> Result<(Option<Worktree>, bool), AgentError> {
        let caller = request.cwd.clone().unwrap_or_else(|| PathBuf::from("."));
        if let Some(had) = previous.and_then(|p| p.kind.worktree()) {
            request.cwd = Some(cwd_in(had, &caller));
            return Ok((Some(had.clone()), false));
        }
        let Some(wanted) = &request.worktree else {
            return Ok((None, false));
        };
        let branch = wanted.branch.as_deref();
        let added = blocking(|| self.inner.worktrees.add(&caller, id.as_str(), full, branch))?;
        request.cwd = Some(added.cwd);
        Ok((Some(added.worktree), true))
    }

    /// Lets teammates started with a placement (or by the default one) run as batch jobs of
    /// `engines` (share the agents' executor's,
    /// [`AgentExecutor::engines`](task_agent::AgentExecutor::engines)). Call it before any
    /// spawn.
    #[must_use]
    pub fn with_engines(self, engines: task_core::batch::Engines) -> Self {
        self.before_sharing("batch engines", |inner| inner.engines = engines)
    }

    /// The batch engines teammates can be placed on, and the default placement.
    pub(crate) fn engines(&self) -> task_core::batch::Engines {
        self.inner.engines.clone()
    }

    /// Counts teammates' tokens towards `tokens`, the session's budget (share the agents'
    /// executor's, [`AgentExecutor::session_tokens`](crate::AgentExecutor::session_tokens)).
    /// Call it before any spawn.
    #[must_use]
    pub fn with_session_tokens(self, tokens: Arc<SessionTokens>) -> Self {
        self.before_sharing("session budget", |inner| inner.session_tokens = tokens)
    }

    /// Applies `set` to the executor not shared yet; else says that its `what` stays.
    fn before_sharing(mut self, what: &str, set: impl FnOnce(&mut Inner)) -> Self {
        match Arc::get_mut(&mut self.inner) {
            Some(inner) => set(inner),
            None => tracing::warn!("the team executor is shared already: its {what} stays"),
        }
        self
    }

    /// The rest of [`admit`](Self::admit), once the id is chosen and the worktree (if any)
    /// added.
    fn admit_in(
        &self,
        id: TaskId,
        full: String,
        mut request: TeammateRequest,
        previous: Option<&TaskState>,
        reader: MailboxReader,
        worktree: Option<Worktree>,
    ) -> Result<PendingTeammate, AgentError> {
        let output = self.inner.output_dir.join(format!("{id}.output"));
        let identity = TeammateIdentity {
            agent_name: request.name.clone(),
            team_name: request.team.clone(),
            color: request.color.clone(),
        };
        let mut state = TeammateState {
            identity: identity.clone(),
            agent_id: full.clone(),
            worktree: worktree.map(Box::new),
            budget: request
                .budget
                .or(self.inner.config.default_budget)
                .filter(|budget| !budget.is_unlimited()),
            ..TeammateState::default()
        };
        let opening = match previous {
            None => {
                task_output::open::create_output_file(&output)?;
                Opening::Fresh
            }
            Some(previous) => {
                if let TaskKind::Teammate(before) = &previous.kind {
                    state.messages.clone_from(&before.messages);
                    state.session_id.clone_from(&before.session_id);
                    // A run its supervisor's death interrupted goes on: the shutdown asked
                    // of it and the turns its budget counted are still its own. A run that
                    // ended is over: a message starts a new one.
                    if !previous.status().is_terminal() {
                        state.shutdown_requested_at = before.shutdown_requested_at;
                        if let (Some(budget), Some(counted)) = (&mut state.budget, before.budget) {
                            budget.turns_used = counted.turns_used;
                        }
                    }
                }
                let opening = resumed_opening(&reader, &output, state.session_id.clone())?;
                if state.session_id.is_some() {
                    request.plan_mode = false;
                }
                opening
            }
        };
        let shutdown_requested_at = state.shutdown_requested_at;
        let mut task = TaskState::new(id, &full, &output, TaskKind::Teammate(Box::new(state)))?;
        if let Some(previous) = previous {
            task.base.start_time = previous.base.start_time;
            if !previous.status().is_terminal() {
                // Its run goes on: its time budget counts from when it began running.
                task.base.started_at = previous.base.started_at;
            }
        }
        self.inner.registry.register(task)?;
        self.inner.names.insert(full.clone(), id);
        // Asked to shut down before its supervisor died: the bound still runs from the request.
        if let Some(at) = shutdown_requested_at {
            self.inner.bound_shutdown(id, at);
        }
        let mut spec = AgentSpec::new(request.prompt, &output);
        spec.agent_type = "teammate".into();
        spec.cwd = request.cwd;
        spec.env = request.env;
        spec.replace_env = request.replace_env;
        spec.env.push((AGENT_ID_ENV.into(), id.as_str().into()));
        spec.env.push((TEAMMATE_ENV.into(), full.into()));
        spec.marker = Some(id.to_string());
        Ok(PendingTeammate {
            inner: Arc::clone(&self.inner),
            context: TeammateContext {
                identity,
                task_id: id,
            },
            runner: request.runner,
            spec,
            reader: Some(reader),
            plan_mode: request.plan_mode,
            opening,
        })
    }

    /// The live teammate `target` names: `name@team`, or a bare `name` when exactly one live
    /// teammate has it, or its task id (see [`find`](Self::find)).
    pub fn resolve(&self, target: &str) -> Option<TaskId> {
        self.find(&target.parse().ok()?)
    }

    /// The live teammate `address` names: a bare name must be unique among the live ones. A
    /// teammate is live from its registration on (its agent CLI may still be starting:
    /// messages wait in its mailbox), until it ends.
    pub fn find(&self, address: &Address) -> Option<TaskId> {
        match address {
            Address::Task(id) => self.full_name_of(*id).map(|_| *id),
            Address::Teammate { .. } => self
                .inner
                .names
                .get(&address.to_string())
                .map(|e| *e.value()),
            Address::Name(target) => {
                let named: Vec<TaskId> = self
                    .inner
                    .names
                    .iter()
                    .filter(|e| {
                        e.key()
                            .split_once('@')
                            .is_some_and(|(name, _)| name == target)
                    })
                    .map(|e| *e.value())
                    .collect();
                match named.as_slice() {
                    [only] => Some(*only),
                    _ => None,
                }
            }
        }
    }

    /// The `name@team` of the live teammate `id`.
    fn full_name_of(&self, id: TaskId) -> Option<String> {
        self.inner
            .names
            .iter()
            .find(|e| *e.value() == id)
            .map(|e| e.key().clone())
    }

    /// Posts `message` to the live teammate `target` (see [`resolve`](Self::resolve)) and
    /// wakes it; delivered at its next idle moment.
    ///
    /// # Errors
    /// [`AgentError::NoSuchAgent`] (the reference's text) when no live teammate has that name;
    /// mailbox errors.
    pub fn send(&self, target: &str, message: &TeamMessage) -> Result<TaskId, AgentError> {
        let id = self
            .resolve(target)
            .ok_or_else(|| AgentError::NoSuchAgent(target.to_owned()))?;
        self.post_to(id, message)?;
        Ok(id)
    }

    /// Posts `message` to the live teammate `id` (as [`find`](Self::find) gave it) and wakes
    /// it; delivered at its next idle moment.
    ///
    /// # Errors
    /// [`AgentError::NoSuchAgent`] when it is no longer live; mailbox errors.
    pub fn post_to(&self, id: TaskId, message: &TeamMessage) -> Result<(), AgentError> {
        let no_such = || AgentError::NoSuchAgent(id.to_string());
        let full = self.full_name_of(id).ok_or_else(no_such)?;
        let (name, team) = full.split_once('@').ok_or_else(no_such)?;
        post(&self.inner.teams_root, team, name, message)?;
        if let Some(Protocol::ShutdownRequest { .. }) = message.as_protocol() {
            self.inner.shutdown_requested(id);
        }
        // Not started yet: it reads its mailbox at its first idle moment.
        if let Some(member) = self.inner.members.get(&id) {
            member.wake.notify_one();
        }
        Ok(())
    }

    /// Asks `target` to shut down (a `shutdown_request` from the lead); returns the request id.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn request_shutdown(
        &self,
        target: &str,
        reason: Option<String>,
    ) -> Result<String, AgentError> {
        let request_id = request_id("shutdown")?;
        let message = Protocol::ShutdownRequest {
            request_id: request_id.clone(),
            reason,
        };
        self.send(target, &TeamMessage::protocol(TEAM_LEAD, &message))?;
        Ok(request_id)
    }

    /// Answers `target`'s plan approval request.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    pub fn answer_plan(
        &self,
        target: &str,
        request_id: &str,
        approve: bool,
        feedback: Option<String>,
    ) -> Result<(), AgentError> {
        let message = Protocol::PlanApprovalResponse {
            request_id: request_id.to_owned(),
            approve,
            feedback,
        };
        self.send(target, &TeamMessage::protocol(TEAM_LEAD, &message))
            .map(|_| ())
    }

    /// Waits until teammate `id` is idle (returns at once if it is).
    ///
    /// # Errors
    /// [`AgentError::NoSuchAgent`] for an unknown teammate, and when it ends before it is idle.
    pub async fn until_idle(&self, id: TaskId) -> Result<(), AgentError> {
        let mut idle = self.member(id)?.idle.subscribe();
        idle.wait_for(|&idle| idle)
            .await
            .map(|_| ())
            .map_err(|_| AgentError::NoSuchAgent(id.to_string()))
    }

    fn member(&self, id: TaskId) -> Result<Arc<Member>, AgentError> {
        self.inner
            .members
            .get(&id)
            .map(|m| Arc::clone(m.value()))
            .ok_or_else(|| AgentError::NoSuchAgent(id.to_string()))
    }
}

/// A teammate registered `pending` by [`TeamExecutor::register`], not started yet; dropping it
/// ends it `failed`.
#[must_use = "a registered teammate that is never started stays pending"]
pub struct PendingTeammate {
    inner: Arc<Inner>,
    context: TeammateContext,
    runner: Arc<dyn AgentRunner>,
    spec: AgentSpec,
    /// Taken by `start`.
    reader: Option<MailboxReader>,
    plan_mode: bool,
    opening: Opening,
}

/// The first turn of a resumed teammate that has no message waiting: its session goes on, idle.
pub const RESUMED_TURN: &str = "Your session was resumed after its supervisor stopped. \
Nothing was lost; wait for messages.";

/// How a registered teammate's session begins.
#[derive(Debug)]
enum Opening {
    /// A new session, its prompt the first turn.
    Fresh,
    /// A session continued (its supervisor died): its CLI's `session_id`, its first turn, and
    /// what [`Start`] says of the messages it has had.
    Resumed {
        session_id: String,
        turn: String,
        shown: Vec<TeamMessage>,
        start: Start,
    },
    /// A teammate whose CLI never said its session: started again from its prompt, its
    /// transcript's messages never handed again.
    Restarted(Start),
}

/// The opening of a resumed teammate: the ids its transcript holds, and the first turn (its
/// mailbox's messages its transcript does not hold, committed when that turn ends).
fn resumed_opening(
    reader: &MailboxReader,
    transcript: &std::path::Path,
    session_id: Option<String>,
) -> Result<Opening, AgentError> {
    let bytes = match std::fs::read(transcript) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(error) => {
            return Err(task_output::OutputError::from_io(transcript, error).into());
        }
    };
    let mut delivered = delivered_ids(&bytes);
    let Some(session_id) = session_id else {
        return Ok(Opening::Restarted(Start {
            delivered,
            uncommitted: None,
            plan_mode: false,
        }));
    };
    let batch = reader.pending::<TeamMessage>()?;
    // Once each: a send retried after its supervisor died may be in the mailbox twice.
    let shown: Vec<TeamMessage> = batch
        .messages
        .into_iter()
        .map(|d| d.message)
        .filter(|m| m.id.as_ref().is_none_or(|id| delivered.insert(id.clone())))
        .collect();
    let turn = if shown.is_empty() {
        RESUMED_TURN.to_owned()
    } else {
        render_turn(&shown)
    };
    let start = Start {
        delivered,
        uncommitted: Some(batch.end),
        plan_mode: false,
    };
    Ok(Opening::Resumed {
        session_id,
        turn,
        shown,
        start,
    })
}

impl std::fmt::Debug for PendingTeammate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingTeammate")
            .field("id", &self.context.task_id)
            .finish_non_exhaustive()
    }
}

impl PendingTeammate {
    /// Its task id.
    pub fn id(&self) -> TaskId {
        self.context.task_id
    }

    /// Starts its session (inside its task-local context), marks it running and follows it.
    ///
    /// # Errors
    /// Spawn errors: the teammate is then `failed` (silently: the caller has the error).
    pub async fn start(mut self) -> Result<TaskId, AgentError> {
        let id = self.id();
        let Some(reader) = self.reader.take() else {
            return Err(AgentError::NoSuchAgent(id.to_string()));
        };
        let opening = std::mem::replace(&mut self.opening, Opening::Fresh);
        let taken_back = !matches!(opening, Opening::Fresh);
        let fresh = |plan_mode| Start {
            delivered: HashSet::new(),
            uncommitted: None,
            plan_mode,
        };
        let (resume, start, shown) = match opening {
            Opening::Fresh => (None, fresh(self.plan_mode), Vec::new()),
            Opening::Restarted(mut start) => {
                start.plan_mode = self.plan_mode;
                (None, start, Vec::new())
            }
            Opening::Resumed {
                session_id,
                turn,
                shown,
                start,
            } => (Some((session_id, turn)), start, shown),
        };
        let (runner, spec) = (&self.runner, &self.spec);
        let started = async move {
            if taken_back {
                // Its run on a batch system may outlive its supervisor: that job ends first.
                runner.end_earlier_runs(spec).await?;
            }
            match &resume {
                Some((session_id, turn)) => runner.resume(spec, session_id, turn).await,
                None => runner.start(spec).await,
            }
        };
        let started = context::scope(self.context.clone(), started).await;
        let session = match started {
            Ok(session) => session,
            Err(error) => {
                self.fail(error.to_string());
                return Err(error);
            }
        };
        // The member (and its cancel channel) exists before it can be seen running: a kill
        // from then on reaches its loop (the request waits in the channel until it runs).
        let (cancel, cancel_rx) = mpsc::channel(1);
        let (idle, _) = watch::channel(false);
        let member = Arc::new(Member {
            identity: self.context.identity.clone(),
            wake: Notify::new(),
            idle,
            cancel,
        });
        self.inner.members.insert(id, Arc::clone(&member));
        let process = session.process();
        let running = self
            .inner
            .registry
            .transition_with(&id, TaskStatus::Running, |state| {
                if let TaskKind::Teammate(teammate) = &mut state.kind {
                    teammate.process.clone_from(&process);
                }
            });
        if let Err(error) = running {
            // Killed while starting: its agent is stopped, its end hooks run.
            drop(session);
            self.inner
                .ended(id, &self.context.identity, TeammateEnd::Terminated);
            return Err(error.into());
        }
        let agent = Agent {
            session,
            runner: Arc::clone(&self.runner),
            spec: self.spec.clone(),
        };
        let run = MemberRun::new(
            Arc::clone(&self.inner),
            member,
            id,
            agent,
            reader,
            cancel_rx,
            start,
        );
        run.show(&shown);
        tokio::spawn(context::scope(self.context.clone(), run.run()));
        Ok(id)
    }

    fn fail(&self, error: String) {
        let id = self.id();
        end_silently(
            &self.inner.registry,
            id,
            TaskStatus::Failed,
            EndReason::SpawnFailed { error },
        );
        self.inner
            .ended(id, &self.context.identity, TeammateEnd::Terminated);
    }
}

impl Drop for PendingTeammate {
    /// Never started: it ends `failed`.
    fn drop(&mut self) {
        if self.reader.is_some() {
            self.fail("dropped before it was started".into());
        }
    }
}

impl Inner {
    pub(super) fn fire_idle(&self, id: TaskId, identity: &TeammateIdentity) {
        if let Ok(hooks) = self.idle_hooks.lock() {
            hooks.iter().for_each(|hook| hook(id, identity));
        }
    }

    /// The teammate's run is over: it leaves the addressable members, its worktree goes if it
    /// holds no changes, its hooks run.
    pub(super) fn ended(&self, id: TaskId, identity: &TeammateIdentity, how: TeammateEnd) {
        self.members.remove(&id);
        blocking(|| settle_worktree(&self.registry, &self.worktrees, &id));
        let full = format!("{}@{}", identity.agent_name, identity.team_name);
        self.names.remove_if(&full, |_, owner| *owner == id);
        if let Ok(hooks) = self.end_hooks.lock() {
            hooks.iter().for_each(|hook| hook(id, identity, how));
        }
    }

    /// Wakes the live teammate `name@team` of this process, if any (a message was posted).
    pub(super) fn wake(&self, name: &str, team: &str) {
        if let Some(id) = self
            .names
            .get(&format!("{name}@{team}"))
            .map(|e| *e.value())
            && let Some(member) = self.members.get(&id)
        {
            member.wake.notify_one();
        }
    }
}

/// Ends a teammate: terminal status and `notified` in one step (no model notification).
pub(super) fn end_silently(
    registry: &Registry,
    id: TaskId,
    status: TaskStatus,
    reason: EndReason,
) -> Option<Arc<TaskState>> {
    registry
        .transition_with(&id, status, |state| {
            state.base.notified = true;
            state.base.end_reason = Some(reason.clone());
            if let TaskKind::Teammate(teammate) = &mut state.kind {
                teammate.is_idle = false;
            }
        })
        .ok()
}

/// `name@team`, both parts checked as mailbox names without `@`.
fn full_name(name: &str, team: &str) -> Result<String, AgentError> {
    for part in [name, team] {
        if part.contains('@') || task_output::mailbox::validate_name(part).is_err() {
            return Err(AgentError::InvalidTeammate(format!("{name}@{team}")));
        }
    }
    Ok(format!("{name}@{team}"))
}

/// Ends teammate `id` `killed` for `reason` (notified at once, no model notification), stops
/// its agent, and evicts it `stopped_display` later unless it was resumed since. Nothing
/// happens to one that ended already.
async fn stop(inner: &Arc<Inner>, id: TaskId, reason: EndReason) {
    let Some(ended) = end_silently(&inner.registry, id, TaskStatus::Killed, reason) else {
        return;
    };
    let cancel = inner.members.get(&id).map(|m| m.cancel.clone());
    if let Some(cancel) = cancel {
        let (ack, done) = oneshot::channel();
        if cancel.send(ack).await.is_ok() {
            let _ = done.await;
        }
    }
    let inner = Arc::clone(inner);
    tokio::spawn(async move {
        tokio::time::sleep(inner.config.stopped_display).await;
        let end = ended.base.end_time;
        inner
            .registry
            .evict_if(&id, |state| state.base.end_time == end);
    });
}

impl Inner {
    /// The lead asked teammate `id` to shut down: the first request is recorded in its state
    /// (`team ls` and `ps` show it) and starts its bound.
    fn shutdown_requested(self: &Arc<Self>, id: TaskId) {
        let at = task_core::now_ms();
        let recorded = self.registry.update(&id, |current| match &current.kind {
            TaskKind::Teammate(mate) if mate.shutdown_requested_at.is_none() => {
                let mut next = current.clone();
                if let TaskKind::Teammate(mate) = &mut next.kind {
                    mate.shutdown_requested_at = Some(at);
                }
                Some(next)
            }
            _ => None,
        });
        if let Ok(UpdateOutcome::Written(_)) = recorded {
            self.bound_shutdown(id, at);
        }
    }

    /// Ends teammate `id` as [`EndReason::ShutdownUnanswered`] once `shutdown_timeout` has
    /// passed since `requested_at` (at once if it has already: a request made before its
    /// supervisor died), unless it ended first.
    pub(super) fn bound_shutdown(self: &Arc<Self>, id: TaskId, requested_at: u64) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(task = %id, "no tokio runtime to bound the shutdown on");
            return;
        };
        let limit = self.config.shutdown_timeout;
        let waited = Duration::from_millis(task_core::now_ms().saturating_sub(requested_at));
        let inner = Arc::clone(self);
        runtime.spawn(async move {
            tokio::time::sleep(limit.saturating_sub(waited)).await;
            let reason = EndReason::ShutdownUnanswered {
                limit_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
            };
            stop(&inner, id, reason).await;
        });
    }
}

/// A fresh request id: `{kind}-{random}`.
pub(super) fn request_id(kind: &str) -> Result<String, AgentError> {
    let id = TaskId::generate(TaskType::InProcessTeammate)?;
    Ok(format!("{kind}-{}", &id.as_str()[1..]))
}

/// The `in_process_teammate` policies.
struct TeammateTask {
    inner: Arc<Inner>,
}

#[async_trait]
impl Task for TeammateTask {
    /// Agents share the agents' default limit.
    fn admission(&self, _: task_core::TaskType) -> task_core::Admission {
        task_core::Admission::AGENTS
    }

    /// Ends it `killed` (notified at once, no model notification), stops its agent, and
    /// evicts it `stopped_display` later.
    async fn kill(&self, _: &Registry, id: &TaskId) -> Result<(), KillError> {
        stop(&self.inner, *id, EndReason::Killed).await;
        Ok(())
    }

    /// A killed teammate stays visible for `STOPPED_DISPLAY_MS`.
    fn eviction_grace(&self, ended: &TaskState) -> Option<std::time::Duration> {
        (ended.status() == TaskStatus::Killed).then_some(self.inner.config.stopped_display)
    }

    /// A live teammate outlives its supervisor: its transcript and mailbox are on disk, and
    /// the next supervisor resumes its session ([`TeamExecutor::resume`], which the host
    /// calls as it starts).
    fn survives_supervisor(&self, task: &TaskState) -> bool {
        !task.status().is_terminal()
    }

    fn carry_forward(&self, resumed: &mut TaskState, previous: &TaskState) {
        resumed.kind.carry_ui_fields_from(&previous.kind);
    }

    /// Kills what its agent CLI left (its group, and escapees carrying its marker); then its
    /// worktree, if it holds no changes, goes with its branch (one with changes stays for
    /// `tasks worktree ls`).
    fn reap_orphan(&self, orphan: &TaskState) -> Result<(), KillError> {
        let reaped = reap(orphan);
        if let Some(worktree) = orphan.kind.worktree() {
            self.inner.worktrees.remove_unchanged(worktree);
        }
        reaped
    }
}

/// Kills what the CLI of `orphan` (a teammate whose supervisor died) left, checked live.
fn reap(orphan: &TaskState) -> Result<(), KillError> {
    let TaskKind::Teammate(mate) = &orphan.kind else {
        return Ok(());
    };
    let Some(group) = &mate.process else {
        return Ok(());
    };
    group
        .kill_orphaned(orphan.id().as_ref())
        .map(drop)
        .map_err(|error| KillError::Failed {
            id: orphan.id(),
            source: Box::new(error),
        })
}
