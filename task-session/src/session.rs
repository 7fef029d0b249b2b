//! The session layer: everything a front end (the CLI, the MCP server) does with the tasks of a
//! session, as blocking functions over the session directory and the supervisor socket.
//!
//! Reads work from the files alone and write nothing (they work on a full disk). Every read
//! first *reconciles*: a task whose record says it is live while no supervisor holds the
//! session lock lost its supervisor; it reads as `failed` ([`EndReason::SupervisorDied`]) with
//! its completion deliverable, so nothing is ever left `running` forever. The next supervisor
//! records that end and cleans up what the task left.
//!
//! Except a task that outlives its supervisor (its record says
//! [`survives_supervisor`](TaskRecord::survives_supervisor): a remote agent, whose session runs
//! on its server): no reader ever ends it. The read that finds it live under a dead supervisor
//! starts the supervisor instead (the one write a read may cause), which resumes it, or ends
//! it with the true reason, before it answers; the read then shows what that supervisor
//! decided. If no supervisor can be started (a full disk), the task reads as live with
//! [`supervisor_down`](TaskRecord::supervisor_down) set, and the next read tries again (at
//! most once per [`Config::start_timeout`]). So whichever command comes next (`ps`, `wait`,
//! `output --follow`, a notification reader), the task has one end, the true one.
//!
//! [`EndReason::SupervisorDied`]: task_core::EndReason::SupervisorDied

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use task_core::{Address, Caller, MessageReply, TaskId};
use task_output::OutputError;
use task_output::read::{self, Delta, TextDelta};
use task_protocol::start::StartRequest;

use crate::changes::Changed;
use crate::client::{self, SupervisorCommand};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::lease::Holder;
use crate::lock;
use crate::notice::{self, Leased, Notice};
use crate::paths::SessionPaths;
use crate::protocol::{KillReport, KillResult, Op, Response, Start};
use crate::record::{self, Listing, TaskRecord};

/// One session: its paths and settings, and how to start its supervisor.
#[derive(Debug, Clone)]
pub struct Session {
    paths: SessionPaths,
    config: Config,
    supervisor: Option<SupervisorCommand>,
    /// When a read last started the supervisor to resume the tasks that outlive it.
    revived: Arc<Mutex<Option<Instant>>>,
}

/// How a wait for a task's readiness ended ([`Session::wait_ready`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ReadyOutcome {
    /// It passed its readiness check.
    Ready,
    /// It ended first; its record.
    Ended(Box<TaskRecord>),
    /// The timeout expired first.
    TimedOut,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitOutcome {
    /// Every task is terminal; their records, in the order asked.
    Ended(Vec<TaskRecord>),
    /// The timeout expired first; the records as they were then.
    TimedOut(Vec<TaskRecord>),
}

impl Session {
    /// Opens a session: refuses state directories that are not private, loads `config.json`
    /// and the environment overrides.
    pub fn open(paths: SessionPaths) -> Result<Self> {
        paths.verify()?;
        let config = Config::load(&paths.config())?;
        Ok(Self::with_config(paths, config))
    }

    /// A session with explicit settings.
    pub fn with_config(paths: SessionPaths, config: Config) -> Self {
        Self {
            paths,
            config,
            supervisor: None,
            revived: Arc::default(),
        }
    }

    /// Starts this session's supervisor with `command` (the front end's own: `tasksd
    /// __supervise` for `tasks`, a host's binary for a host with task types of its own). A
    /// session without one sends nothing: [`Error::Supervisor`].
    #[must_use]
    pub fn with_supervisor(mut self, command: SupervisorCommand) -> Self {
        self.supervisor = Some(command);
        self
    }

    /// The session's paths.
    pub fn paths(&self) -> &SessionPaths {
        &self.paths
    }

    /// The session's settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Parses an id given from outside; the error is [`Error::MalformedId`].
    pub fn parse_id(input: &str) -> Result<TaskId> {
        TaskId::parse(input).map_err(|_| Error::MalformedId {
            input: input.to_owned(),
        })
    }

    /// The task `input` names in this session: its id, its name (an agent's `--name`, a
    /// teammate's `name` or `name@team`), or a unique prefix of its id of at least
    /// [`crate::resolve::MIN_PREFIX`] characters ([`crate::resolve`]). An id is taken as it is
    /// (a command then says whether the task exists); anything else is looked up among the
    /// session's records, and only an id read from one is returned.
    ///
    /// # Errors
    /// [`Error::MalformedReference`], [`Error::AmbiguousReference`] (naming the candidates),
    /// [`Error::UnknownTask`]; reading the records.
    pub fn resolve(&self, input: &str) -> Result<TaskId> {
        if let Ok(id) = TaskId::parse(input) {
            return Ok(id);
        }
        crate::resolve::parse(input)?;
        let records = crate::record::list(&self.paths)?.tasks;
        crate::resolve::resolve(input, &records, self.paths.name())
    }

    /// The tasks of `input`s, each resolved as [`Session::resolve`] does, in order.
    ///
    /// # Errors
    /// The first input that does not resolve.
    pub fn resolve_all<S: AsRef<str>>(&self, inputs: &[S]) -> Result<Vec<TaskId>> {
        inputs
            .iter()
            .map(|input| self.resolve(input.as_ref()))
            .collect()
    }

    /// Every task of `group` on the session's records, oldest first.
    ///
    /// # Errors
    /// A bad group name; reading the records.
    pub fn group_tasks(&self, group: &str) -> Result<Vec<TaskRecord>> {
        crate::queue::validate_group(group)?;
        let mut tasks = self.tasks()?.tasks;
        tasks.retain(|record| record.group() == group);
        Ok(tasks)
    }

    /// The calling process as the caller of a task: its working directory (which must exist:
    /// [`Error::MissingCwd`] otherwise) and its whole environment, in the background, owned
    /// by the agent whose task id is in `TASKS_AGENT_ID` if any (an agent's CLI, and every
    /// `tasks` process or MCP server it launches, carry it: their tasks die with the agent; a
    /// value that is no task id owns nothing, with a warning). Front ends may name another
    /// owner and add the tool use.
    pub fn caller() -> Result<Caller> {
        let mut caller = Caller::current().map_err(Error::MissingCwd)?;
        caller.agent_id = std::env::var(task_core::AGENT_ID_ENV)
            .ok()
            .filter(|id| !id.is_empty())
            .and_then(|id| match TaskId::parse(&id) {
                Ok(id) => Some(id),
                Err(error) => {
                    tracing::warn!(%error, "{} names no task: the task has no owner", task_core::AGENT_ID_ENV);
                    None
                }
            });
        Ok(caller)
    }

    /// Starts a task of `L`'s kind through the supervisor, in the session's configured group
    /// ([`Config::group`]) if any; returns its id once its record exists.
    pub fn start<R: StartRequest>(&self, request: R, caller: Caller) -> Result<TaskId> {
        self.start_with(
            request,
            caller,
            crate::queue::Schedule::default(),
            crate::protocol::Ends::default(),
        )
    }

    /// [`Session::start`] with a group, priority, dependencies or start time
    /// ([`crate::queue`]; a schedule that names no group takes the configured one) and what the
    /// task brings for its end: its own end hook (a command run by `sh -c` once the task ends,
    /// instead of the session's [`Config::on_end`]) and what to do with the processes it leaves
    /// running (instead of [`Config::strays`]).
    pub fn start_with<R: StartRequest>(
        &self,
        request: R,
        caller: Caller,
        schedule: crate::queue::Schedule,
        ends: crate::protocol::Ends,
    ) -> Result<TaskId> {
        let op = self.start_op(request, caller, schedule, ends)?;
        started(self.send(op)?)
    }

    /// The request [`Session::start_with`] sends (for a client of its own, as task-client's
    /// async one): the typed start encoded under its kind, in the configured group if the
    /// schedule names none.
    ///
    /// # Errors
    /// [`Error::Invalid`] if the request cannot be encoded.
    pub fn start_op<R: StartRequest>(
        &self,
        request: R,
        caller: Caller,
        mut schedule: crate::queue::Schedule,
        ends: crate::protocol::Ends,
    ) -> Result<Op> {
        let request = serde_json::to_value(request)
            .map_err(|e| Error::Invalid(format!("cannot encode a {} request: {e}", R::KIND)))?;
        if schedule.group.is_none() {
            schedule.group.clone_from(&self.config.group);
        }
        let start = Start {
            kind: R::KIND.to_owned(),
            caller,
            request,
            key: None,
            retry: false,
            schedule: (!schedule.is_default()).then(|| Box::new(schedule)),
            on_end: ends.on_end,
            strays: ends.strays,
        };
        Ok(Op::Start(start))
    }

    /// Sets the parallelism limit of `group` (0: unlimited), kept across supervisors; the
    /// supervisor starts what now fits at once.
    pub fn set_group_limit(&self, group: &str, parallel: u32) -> Result<()> {
        crate::queue::validate_group(group)?;
        let op = Op::Group {
            group: group.to_owned(),
            parallel,
        };
        match self.send(op)? {
            Response::GroupSet { .. } => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Pauses `group` (`paused`: it starts none of its queued tasks, its running tasks go on)
    /// or resumes it (the supervisor then starts what fits at once); kept across supervisors.
    ///
    /// # Errors
    /// A bad group name; the supervisor could not be reached or could not keep the change.
    pub fn pause_group(&self, group: &str, paused: bool) -> Result<()> {
        crate::queue::validate_group(group)?;
        let op = Op::GroupPause {
            group: group.to_owned(),
            paused,
        };
        match self.send(op)? {
            Response::GroupPaused { .. } => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Sends `start` as it is; returns the new task's id once its record exists (which keeps
    /// how it was started: the supervisor writes it).
    fn start_raw(&self, start: Start) -> Result<TaskId> {
        started(self.send(Op::Start(start))?)
    }

    /// Starts the task `id` again (same kind, request, working directory and owner; this
    /// process's environment) under a new id.
    pub fn restart(&self, id: &TaskId) -> Result<TaskId> {
        let record = crate::restart::recall(&self.paths, id)?;
        self.start_raw(record.again()?)
    }

    pub(crate) fn send(&self, op: Op) -> Result<Response> {
        client::send(&self.paths, &self.config, self.supervisor()?, op)
    }

    /// How this session starts its supervisor.
    ///
    /// # Errors
    /// [`Error::Supervisor`] if it was given none ([`Session::with_supervisor`]).
    pub fn supervisor(&self) -> Result<&SupervisorCommand> {
        self.supervisor.as_ref().ok_or_else(|| {
            Error::Supervisor(
                "no program to supervise this session was given (Session::with_supervisor)".into(),
            )
        })
    }

    /// Sends `message` to the task `to`: queued for a running agent's next turn, a stopped one
    /// resumed with it, posted to a teammate's mailbox, sent on to a remote agent.
    pub fn send_message(&self, to: &Address, message: &str) -> Result<MessageReply> {
        sent(self.send(message_op(to, message)?)?)
    }

    /// Asks the supervisor (starting it if needed) for its pid and how many tasks it holds in
    /// memory.
    pub fn ping(&self) -> Result<(u32, usize)> {
        match self.send(Op::Ping)? {
            Response::Pong { pid, registered } => Ok((pid, registered)),
            other => Err(unexpected(other)),
        }
    }

    /// Asks the running supervisor to let go of the ended tasks `ids` now (see
    /// [`Op::Release`]); returns the ones it no longer holds. Call it only while a supervisor
    /// runs: with none, nothing holds them (and this would start one).
    pub fn release(&self, ids: &[TaskId]) -> Result<Vec<TaskId>> {
        match self.send(Op::Release { ids: ids.to_vec() })? {
            Response::Released { ids } => Ok(ids),
            other => Err(unexpected(other)),
        }
    }

    /// Kills tasks (whole process trees). Unknown ids fail before anything is killed; a task that
    /// already ended is reported as such.
    pub fn kill(&self, ids: &[TaskId]) -> Result<Vec<KillReport>> {
        let plan = self.kill_plan(ids)?;
        let answer = plan.op().map(|op| self.send(op)).transpose()?;
        plan.finish(answer)
    }

    /// What [`Session::kill`] asks of the supervisor for `ids`, from their records (for a
    /// client of its own, as task-client's async one): the live ones are killed, the others
    /// reported as already ended.
    ///
    /// # Errors
    /// An unknown id ([`Error::UnknownTask`]), before anything is killed; reading the records.
    pub fn kill_plan(&self, ids: &[TaskId]) -> Result<KillPlan> {
        let tasks = self.tasks_by_id(ids)?;
        let live: Vec<TaskId> = tasks
            .iter()
            .filter(|t| !t.is_terminal())
            .map(TaskRecord::id)
            .collect();
        let reports: Vec<KillReport> = ids
            .iter()
            .map(|&id| KillReport {
                id,
                result: KillResult::AlreadyEnded,
            })
            .collect();
        Ok(KillPlan { live, reports })
    }

    /// Every task of the session (orphans read as such), plus the record files that could not
    /// be read. Writes nothing, unless a task that outlives its supervisor needs it started
    /// (see the module documentation).
    pub fn tasks(&self) -> Result<Listing> {
        let mut listing = record::list(&self.paths)?;
        if self.revive_for(&listing.tasks)? {
            listing = record::list(&self.paths)?;
        }
        self.reconcile(&mut listing.tasks)?;
        Ok(listing)
    }

    /// One task (an orphan read as such). Writes nothing, as [`Session::tasks`].
    pub fn task(&self, id: &TaskId) -> Result<TaskRecord> {
        let mut tasks = self.tasks_by_id(std::slice::from_ref(id))?;
        tasks
            .pop()
            .ok_or_else(|| Error::Invalid(format!("no record read for {id}")))
    }

    /// The tasks `ids`, in that order, reconciled together (one look at the session lock for
    /// all of them, not one per task). Writes nothing, as [`Session::tasks`].
    pub fn tasks_by_id(&self, ids: &[TaskId]) -> Result<Vec<TaskRecord>> {
        let read = || {
            ids.iter()
                .map(|id| record::read(&self.paths, id))
                .collect::<Result<Vec<_>>>()
        };
        let mut tasks = read()?;
        if self.revive_for(&tasks)? {
            tasks = read()?;
        }
        self.reconcile(&mut tasks)?;
        Ok(tasks)
    }

    /// Up to `max_bytes` of output from byte `offset`, and the offset to read from next.
    pub fn read_delta(&self, id: &TaskId, offset: u64, max_bytes: usize) -> Result<Delta> {
        self.read_from(id, offset, |path| read::read_delta(path, offset, max_bytes))
    }

    /// Like [`Session::read_delta`], decoded as UTF-8 without ever splitting a code point.
    pub fn read_text_delta(&self, id: &TaskId, offset: u64, max_bytes: usize) -> Result<TextDelta> {
        self.read_from(id, offset, |path| {
            read::read_text_delta(path, offset, max_bytes)
        })
    }

    /// Runs `read` on the output file of `id`; a file not created yet reads as empty from 0.
    fn read_from<T: Empty>(
        &self,
        id: &TaskId,
        offset: u64,
        read: impl FnOnce(&std::path::Path) -> Result<T, OutputError>,
    ) -> Result<T> {
        match read(&self.existing_output(id)?) {
            Err(OutputError::NotFound { .. }) if offset == 0 => Ok(T::empty()),
            other => other.map_err(output_error),
        }
    }

    /// The last `lines` lines of output.
    pub fn tail(&self, id: &TaskId, lines: usize) -> Result<Vec<String>> {
        self.tail_of(&record::read(&self.paths, id)?, lines)
    }

    /// [`Session::tail`] of `task`, whose record the caller has just read (so it exists).
    pub fn tail_of(&self, task: &TaskRecord, lines: usize) -> Result<Vec<String>> {
        missing_is_empty(read::last_lines(&self.output_path(&task.id()), lines))
    }

    /// The last 8 MiB of output (with the omission marker when cut), as text.
    pub fn output_tail(&self, id: &TaskId) -> Result<String> {
        missing_is_empty(read::read_tail(
            &self.existing_output(id)?,
            read::DEFAULT_MAX_READ_BYTES,
        ))
    }

    /// The output path of a task that exists: an unknown or unreadable task is an error (its
    /// output is never read as empty).
    fn existing_output(&self, id: &TaskId) -> Result<PathBuf> {
        record::read(&self.paths, id)?;
        Ok(self.output_path(id))
    }

    /// The output as a model sees it (SPEC §4): the tail, UTF-8 safe, truncated to the limit of
    /// `TASK_MAX_OUTPUT_LENGTH` with the `[Truncated. Full output: …]` header.
    pub fn output_for_model(&self, id: &TaskId) -> Result<String> {
        let path = self.output_path(id);
        let text = self.output_tail(id)?;
        let limit = task_output::format::max_output_length_from_env();
        Ok(task_output::format::format_for_model(&text, &path, limit))
    }

    /// The output path of a task: built from its validated id, never taken from file content.
    pub fn output_path(&self, id: &TaskId) -> PathBuf {
        self.paths.output(id)
    }

    /// Waits until every task in `ids` is terminal or `timeout` passes, calling `tick` between
    /// looks (a spinner).
    pub fn wait(
        &self,
        ids: &[TaskId],
        timeout: Option<Duration>,
        mut tick: impl FnMut(&[TaskRecord]),
    ) -> Result<WaitOutcome> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let tasks = self.tasks_by_id(ids)?;
            if tasks.iter().all(TaskRecord::is_terminal) {
                return Ok(WaitOutcome::Ended(tasks));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(WaitOutcome::TimedOut(tasks));
            }
            tick(&tasks);
            std::thread::sleep(self.config.poll_interval);
        }
    }

    /// Waits until `id` passed its readiness check ([`crate::ready`]), it ended, or `timeout`
    /// passed, looking every poll interval.
    pub fn wait_ready(&self, id: &TaskId, timeout: Option<Duration>) -> Result<ReadyOutcome> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if crate::ready::is_ready(&self.paths, id) {
                return Ok(ReadyOutcome::Ready);
            }
            let task = self.tasks_by_id(std::slice::from_ref(id))?;
            if let Some(task) = task.into_iter().find(TaskRecord::is_terminal) {
                // Ready just before it ended.
                if crate::ready::is_ready(&self.paths, id) {
                    return Ok(ReadyOutcome::Ready);
                }
                return Ok(ReadyOutcome::Ended(Box::new(task)));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(ReadyOutcome::TimedOut);
            }
            std::thread::sleep(self.config.poll_interval);
        }
    }

    /// Claims every deliverable notification under this process's lease, in delivery order:
    /// write them out, then [`Leased::commit`] them. Exactly one reader at a time holds each;
    /// one whose reader dies before the commit is deliverable again (see [`crate::lease`]).
    pub fn lease_notifications(&self) -> Result<Leased> {
        self.lease_of(&self.tasks()?.tasks, true)
    }

    /// Claims, under one lease of this process, the due completions of the ended tasks among
    /// `tasks` and, with `events`, every pending event: [`Session::lease_notifications`] for
    /// the records a reader has just read.
    pub fn lease_of(&self, tasks: &[TaskRecord], events: bool) -> Result<Leased> {
        let holder = self.holder();
        let mut leased = if events {
            notice::claim_events(&self.paths, &holder)?
        } else {
            Leased::new(&self.paths)
        };
        for task in tasks {
            leased.extend(self.lease_completion_as(task, &holder)?);
        }
        Ok(leased)
    }

    /// What a watch on the records woke a reader for ([`Changed`]): the records it names, read
    /// as [`Session::tasks_by_id`] reads them, and the notifications they make deliverable
    /// claimed under one lease ([`Session::lease_of`]: the completions among them, and every
    /// pending event if `events/pending/` changed). A burst of ends costs one claim, one write
    /// out and one commit, not one each.
    pub fn lease_changed(&self, changed: &Changed) -> Result<(Vec<TaskRecord>, Leased)> {
        let tasks = self.tasks_by_id(&changed.records)?;
        let leased = self.lease_of(&tasks, changed.events)?;
        Ok((tasks, leased))
    }

    /// Claims every deliverable notification, hands them to `write_out` (which prints them,
    /// flushed, or sends them) and marks them delivered once it returns `Ok`; if it fails they
    /// stay deliverable and its error is returned. Returns what was delivered.
    pub fn deliver_notifications(
        &self,
        write_out: impl FnOnce(&[&Notice]) -> std::io::Result<()>,
    ) -> Result<Vec<Notice>> {
        self.lease_notifications()?.deliver(write_out)
    }

    /// Claims every deliverable notification and marks it delivered at once, for a caller
    /// that keeps them in memory only (a test; a process that cannot lose them before it
    /// uses them). A front end that writes them out uses [`Session::deliver_notifications`].
    pub fn drain_notifications(&self) -> Result<Vec<Notice>> {
        self.lease_notifications()?.commit()
    }

    /// [`Session::deliver_notifications`] for the completion of one ended task (if it has one
    /// and no live reader holds it).
    pub fn deliver_completion(
        &self,
        task: &TaskRecord,
        write_out: impl FnOnce(&[&Notice]) -> std::io::Result<()>,
    ) -> Result<Option<Notice>> {
        let leased = self.lease_of(std::slice::from_ref(task), false)?;
        Ok(leased.deliver(write_out)?.pop())
    }

    fn lease_completion_as(&self, task: &TaskRecord, holder: &Holder) -> Result<Leased> {
        let mut leased = Leased::new(&self.paths);
        if let Some(due) = task.notification.as_ref().filter(|_| task.is_terminal())
            && let Some(claim) = notice::claim_completion(&self.paths, &task.id(), due, holder)?
        {
            leased.push(claim);
        }
        Ok(leased)
    }

    /// This process as the holder of the notifications it claims.
    fn holder(&self) -> Holder {
        Holder::this_process(self.config.delivery_lease)
    }

    /// Reads live-looking records of a session whose supervisor is gone as orphans (task-core's
    /// orphan transition, in memory): the next supervisor to start records it and cleans up
    /// after them. A task that outlives its supervisor is never ended here: it reads as live,
    /// its supervisor down. Nothing is written and nothing is signalled from here.
    fn reconcile(&self, tasks: &mut [TaskRecord]) -> Result<()> {
        if tasks.iter().all(TaskRecord::is_terminal) || lock::is_held(&self.paths.lock())? {
            return Ok(());
        }
        for task in tasks.iter_mut().filter(|t| !t.is_terminal()) {
            if let Some(end) = record::read_end(&self.paths, task) {
                *task = end;
            } else if task.survives_supervisor {
                task.supervisor_down = true;
            } else {
                *task = task.clone().orphaned();
            }
        }
        Ok(())
    }

    /// Starts the supervisor if one of `tasks` is live, outlives its supervisor, and no
    /// supervisor holds the session: the new one resumes it (or ends it with the true reason)
    /// before it answers. Returns whether it started one (then the records are to be read
    /// again). Tried at most once per [`Config::start_timeout`] by this session; a failure is
    /// logged, and the task reads as live with its supervisor down.
    fn revive_for(&self, tasks: &[TaskRecord]) -> Result<bool> {
        let resumable = tasks
            .iter()
            .filter(|t| !t.is_terminal() && t.survives_supervisor)
            .count();
        if resumable == 0 || lock::is_held(&self.paths.lock())? {
            return Ok(false);
        }
        {
            let mut last = crate::guard(&self.revived);
            if last.is_some_and(|at| at.elapsed() < self.config.start_timeout) {
                return Ok(false);
            }
            *last = Some(Instant::now());
        }
        match self.ping() {
            Ok((pid, _)) => {
                tracing::info!(
                    pid,
                    resumable,
                    "started the supervisor again for the tasks that outlive it"
                );
                Ok(true)
            }
            Err(error) => {
                tracing::warn!(
                    resumable,
                    "cannot start the supervisor that would resume the tasks that outlive it: {error}"
                );
                Ok(false)
            }
        }
    }
}

/// What a read of a missing output file from offset 0 returns.
trait Empty {
    fn empty() -> Self;
}

impl Empty for Delta {
    fn empty() -> Self {
        Delta {
            bytes: Default::default(),
            new_offset: 0,
        }
    }
}

impl Empty for TextDelta {
    fn empty() -> Self {
        TextDelta {
            text: String::new(),
            new_offset: 0,
        }
    }
}

fn missing_is_empty<T: Default>(result: Result<T, OutputError>) -> Result<T> {
    match result {
        Err(OutputError::NotFound { .. }) => Ok(T::default()),
        other => other.map_err(output_error),
    }
}

fn output_error(error: OutputError) -> Error {
    match error {
        OutputError::OffsetPastEnd { .. } => Error::Invalid(error.to_string()),
        OutputError::Io { path, source } => Error::io("read", path, source),
        other => {
            let path = other.path().to_owned();
            Error::io("read", path, std::io::Error::other(other.to_string()))
        }
    }
}

/// A kill as [`Session::kill_plan`] planned it: the live tasks to kill, and a report for each
/// task asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillPlan {
    live: Vec<TaskId>,
    reports: Vec<KillReport>,
}

impl KillPlan {
    /// The request to send, if any task is live.
    pub fn op(&self) -> Option<Op> {
        (!self.live.is_empty()).then(|| Op::Kill {
            ids: self.live.clone(),
        })
    }

    /// The reports, in the order asked, once the supervisor answered [`KillPlan::op`] (no
    /// answer: nothing was live).
    ///
    /// # Errors
    /// The supervisor's typed refusal, or an answer that is not a kill's.
    pub fn finish(self, answer: Option<Response>) -> Result<Vec<KillReport>> {
        let mut reports = self.reports;
        match answer {
            None => Ok(reports),
            Some(Response::Killed { reports: killed }) => {
                for report in killed {
                    if let Some(slot) = reports.iter_mut().find(|r| r.id == report.id) {
                        *slot = report;
                    }
                }
                Ok(reports)
            }
            Some(other) => Err(unexpected(other)),
        }
    }
}

/// The request that sends `message` to `to`, with an id of its own (the same on every attempt,
/// so its receiver drops a repeat).
///
/// # Errors
/// [`Error::Supervisor`] if no id can be drawn.
pub fn message_op(to: &Address, message: &str) -> Result<Op> {
    Ok(Op::Send {
        to: to.clone(),
        message: message.to_owned(),
        id: Some(TaskId::message_id().map_err(|e| Error::Supervisor(e.to_string()))?),
    })
}

/// The id a start's answer gives.
///
/// # Errors
/// The supervisor's typed refusal ([`Error::refused`]), or an answer that is not a start's.
pub fn started(answer: Response) -> Result<TaskId> {
    match answer {
        Response::Started { id } => Ok(id),
        other => Err(unexpected(other)),
    }
}

/// What became of a message, as its answer says.
///
/// # Errors
/// The supervisor's typed refusal ([`Error::refused`]), or an answer that is not a send's.
pub fn sent(answer: Response) -> Result<MessageReply> {
    match answer {
        Response::Sent { reply } => Ok(reply),
        other => Err(unexpected(other)),
    }
}

/// The error an answer that is not the one asked for stands for: a refusal, typed
/// ([`Error::refused`]), or an answer to something else.
pub fn unexpected(response: Response) -> Error {
    match response {
        Response::Error { kind, message } => Error::refused(kind, message),
        other => Error::Supervisor(format!("unexpected answer {other:?}")),
    }
}
