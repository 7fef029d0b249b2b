//! The session layer: everything a front end (the CLI, the MCP server) does with the tasks of a
//! session, as blocking functions over the session directory and the supervisor socket.
//!
//! Reads work from the files alone. Every read first *reconciles*: a task whose snapshot says
//! it is live while no supervisor holds the session lock lost its supervisor; it is marked
//! `failed` (its process group killed) and its completion becomes deliverable, so nothing is
//! ever left `running` forever.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use task_core::{TaskId, TaskStatus};
use task_output::OutputError;
use task_output::read::{self, Delta, TextDelta};

use crate::client;
use crate::config::Config;
use crate::error::{CliError, Result};
use crate::lock::SupervisorLock;
use crate::notice::{self, Notice};
use crate::paths::SessionPaths;
use crate::protocol::{ErrorKind, KillOutcome, Request, Response, StartMonitor, StartShell};
use crate::snapshot::{self, Listing, Snapshot, now_ms};

/// One session: its paths and settings.
#[derive(Debug, Clone)]
pub struct Session {
    paths: SessionPaths,
    config: Config,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitOutcome {
    /// Every task is terminal; their snapshots, in the order asked.
    Ended(Vec<Snapshot>),
    /// The timeout expired first; the snapshots as they were then.
    TimedOut(Vec<Snapshot>),
}

impl Session {
    /// Opens a session: loads `config.json` and the environment overrides.
    pub fn open(paths: SessionPaths) -> Result<Self> {
        let config = Config::load(&paths.config())?;
        Ok(Self { paths, config })
    }

    /// A session with explicit settings.
    pub fn with_config(paths: SessionPaths, config: Config) -> Self {
        Self { paths, config }
    }

    /// The session's paths.
    pub fn paths(&self) -> &SessionPaths {
        &self.paths
    }

    /// The session's settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Parses an id given from outside; the error is [`CliError::MalformedId`].
    pub fn parse_id(input: &str) -> Result<TaskId> {
        TaskId::parse(input).map_err(|_| CliError::MalformedId {
            input: input.to_owned(),
        })
    }

    /// Starts a background shell command; returns its id once its snapshot exists.
    pub fn start_shell(&self, request: StartShell) -> Result<TaskId> {
        self.started(client::send(
            &self.paths,
            &self.config,
            &Request::Run(request),
        )?)
    }

    /// Starts a monitor; returns its id once its snapshot exists.
    pub fn start_monitor(&self, request: StartMonitor) -> Result<TaskId> {
        self.started(client::send(
            &self.paths,
            &self.config,
            &Request::Monitor(request),
        )?)
    }

    fn started(&self, response: Response) -> Result<TaskId> {
        match response {
            Response::Started { id } => Self::parse_id(&id),
            other => Err(unexpected(other)),
        }
    }

    /// Kills tasks (whole process trees). Unknown ids fail before anything is killed; a task that
    /// already ended is reported as such.
    pub fn kill(&self, ids: &[TaskId]) -> Result<Vec<KillOutcome>> {
        let tasks = self.tasks_by_id(ids)?;
        let live: Vec<&TaskId> = tasks
            .iter()
            .filter(|t| !t.status.is_terminal())
            .map(|t| &t.id)
            .collect();
        let mut outcomes: Vec<KillOutcome> = ids
            .iter()
            .map(|id| KillOutcome {
                id: id.to_string(),
                outcome: "already_ended".into(),
            })
            .collect();
        if live.is_empty() {
            return Ok(outcomes);
        }
        let request = Request::Kill {
            ids: live.iter().map(|id| id.to_string()).collect(),
        };
        match client::send(&self.paths, &self.config, &request)? {
            Response::Killed { outcomes: killed } => {
                for result in killed {
                    if let Some(slot) = outcomes.iter_mut().find(|o| o.id == result.id) {
                        *slot = result;
                    }
                }
                Ok(outcomes)
            }
            other => Err(unexpected(other)),
        }
    }

    /// Every task of the session (reconciled), plus the snapshot files that could not be read.
    pub fn tasks(&self) -> Result<Listing> {
        let mut listing = snapshot::list(&self.paths)?;
        self.reconcile(&mut listing.tasks)?;
        Ok(listing)
    }

    /// One task (reconciled).
    pub fn task(&self, id: &TaskId) -> Result<Snapshot> {
        let mut tasks = [snapshot::read(&self.paths, id)?];
        self.reconcile(&mut tasks)?;
        let [task] = tasks;
        Ok(task)
    }

    /// The tasks `ids`, in that order, reconciled together (one look at the session lock for
    /// all of them, not one per task).
    pub fn tasks_by_id(&self, ids: &[TaskId]) -> Result<Vec<Snapshot>> {
        let mut tasks = ids
            .iter()
            .map(|id| snapshot::read(&self.paths, id))
            .collect::<Result<Vec<_>>>()?;
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
        let task = self.task(id)?;
        match read(&self.output_path(&task)) {
            Err(OutputError::NotFound { .. }) if offset == 0 => Ok(T::empty()),
            other => other.map_err(output_error),
        }
    }

    /// The last `lines` lines of output.
    pub fn tail(&self, id: &TaskId, lines: usize) -> Result<Vec<String>> {
        let task = self.task(id)?;
        missing_is_empty(read::last_lines(&self.output_path(&task), lines))
    }

    /// The output as a model sees it (SPEC §4): the tail, UTF-8 safe, truncated to the limit of
    /// `TASK_MAX_OUTPUT_LENGTH` with the `[Truncated. Full output: …]` header.
    pub fn output_for_model(&self, id: &TaskId) -> Result<String> {
        let task = self.task(id)?;
        let path = self.output_path(&task);
        let text = missing_is_empty(read::read_tail(&path, read::DEFAULT_MAX_READ_BYTES))?;
        let limit = task_output::format::max_output_length_from_env();
        Ok(task_output::format::format_for_model(&text, &path, limit))
    }

    /// The output path of a task: built from its validated id, never taken from file content.
    pub fn output_path(&self, task: &Snapshot) -> PathBuf {
        self.paths.output(&task.id)
    }

    /// Waits until every task in `ids` is terminal or `timeout` passes, calling `tick` between
    /// looks (a spinner).
    pub fn wait(
        &self,
        ids: &[TaskId],
        timeout: Option<Duration>,
        mut tick: impl FnMut(&[Snapshot]),
    ) -> Result<WaitOutcome> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let tasks = self.tasks_by_id(ids)?;
            if tasks.iter().all(|t| t.status.is_terminal()) {
                return Ok(WaitOutcome::Ended(tasks));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(WaitOutcome::TimedOut(tasks));
            }
            tick(&tasks);
            std::thread::sleep(self.config.poll_interval);
        }
    }

    /// Claims every deliverable notification (exactly once across processes), in priority order.
    pub fn drain_notifications(&self) -> Result<Vec<Notice>> {
        let listing = self.tasks()?;
        notice::drain(&self.paths, &listing.tasks)
    }

    /// Claims the completion notification of one terminal task, if nobody has.
    pub fn claim_completion(&self, task: &Snapshot) -> Result<Option<Notice>> {
        let claimed = notice::claim_completion(&self.paths, task)?;
        notice::record(&self.paths, claimed.as_slice())?;
        Ok(claimed)
    }

    /// Marks live-looking tasks failed when no supervisor holds the session lock.
    fn reconcile(&self, tasks: &mut [Snapshot]) -> Result<()> {
        if tasks.iter().all(|t| t.status.is_terminal()) {
            return Ok(());
        }
        let Some(_lock) = SupervisorLock::try_acquire(&self.paths.lock())? else {
            return Ok(());
        };
        for task in tasks.iter_mut().filter(|t| !t.status.is_terminal()) {
            *task = fail_orphan(&self.paths, &task.id)?;
        }
        Ok(())
    }
}

/// Under the session lock: re-reads the snapshot of `id` and, if it still says live, kills its
/// process group and records it as failed with a deliverable notification.
pub(crate) fn fail_orphan(paths: &SessionPaths, id: &TaskId) -> Result<Snapshot> {
    let mut task = snapshot::read(paths, id)?;
    if task.status.is_terminal() {
        return Ok(task);
    }
    if let Some(pgid) = task.pgid.and_then(|pgid| u32::try_from(pgid).ok())
        && let Err(e) = task_shell::process::kill_orphaned_group(pgid, task.pgid_started)
    {
        tracing::warn!("cannot kill what is left of {id} (process group {pgid}): {e}");
    }
    task.error = Some(format!(
        "its supervisor (pid {}) exited while the task was {}",
        task.supervisor_pid,
        task.status.as_str()
    ));
    task.status = TaskStatus::Failed;
    task.end_time = Some(now_ms());
    task.pgid = None;
    task.pgid_started = None;
    task.notification = Some(notice::completion(&task, notice::orphaned(&task)));
    snapshot::write(paths, &task)?;
    Ok(task)
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

fn output_error(error: OutputError) -> CliError {
    match error {
        OutputError::OffsetPastEnd { .. } => CliError::Invalid(error.to_string()),
        OutputError::Io { path, source } => CliError::io("read", path, source),
        other => {
            let path = other.path().to_owned();
            CliError::io("read", path, std::io::Error::other(other.to_string()))
        }
    }
}

fn unexpected(response: Response) -> CliError {
    match response {
        Response::Error {
            kind: ErrorKind::MalformedId,
            message,
        } => CliError::MalformedId { input: message },
        Response::Error { message, .. } => CliError::Supervisor(message),
        other => CliError::Supervisor(format!("unexpected answer {other:?}")),
    }
}
