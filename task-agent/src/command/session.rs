//! One run of an agent CLI: spawned in its own process group, followed through its transcript.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use rustix::process::Signal;
use task_core::process::{
    ChildSetup, ChildStdin, Group, Root, Spawn, Stdio, TASK_MARKER_ENV, kill_and_reap,
    kill_orphaned_group, start_time,
};
use tokio::io::AsyncWriteExt;
use tokio::sync::{oneshot, watch};

use super::args::{LaunchPlan, user_turn};
use super::process::{KeptStderr, StderrReader, StderrTail, signal_group};
use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::event::AgentEvent;
use crate::format::LineParser;
use crate::runner::{AgentSession, AgentSpec, SessionEnd, SessionEvent};
use crate::tail::{TranscriptTail, poll_backoff};

/// A running agent CLI.
///
/// Its stdout is the transcript file itself (opened `O_APPEND|O_NOFOLLOW`; no byte passes
/// through this process); events come from delta reads of that file. Its stderr is read for
/// the last lines only, bounded in lines and bytes. With the spec's marker set, the CLI and
/// everything it starts carry it (`TASKS_TASK_ID`), and a cancel kills every process carrying
/// it as well as the CLI's group and tree. Dropping a session that has not ended kills its
/// tree the same way, without the interrupt.
#[derive(Debug)]
pub struct CommandSession {
    follow: Follow,
    stdin: Option<ChildStdin>,
    pgid: u32,
    exit: watch::Receiver<Option<i32>>,
    stderr: StderrTail,
    stderr_reader: Option<StderrReader>,
    kill_grace: Duration,
    ended: Option<SessionEnd>,
    process: task_core::ShellProcess,
    marker: Option<String>,
    /// Asks the child's owner to kill its tree; answered once it has (dropped unanswered when
    /// the CLI was reaped first).
    kill: Option<oneshot::Sender<oneshot::Sender<()>>>,
}

/// Appends the user turn `text` to `transcript` ([`crate::format::user_turn_line`]), before the
/// CLI that will append to it starts.
pub(super) fn record_turn(transcript: &Path, text: &str) -> Result<(), AgentError> {
    let mut line = crate::format::user_turn_line(text);
    line.push('\n');
    task_output::open::open_output_append(transcript)?
        .write_all(line.as_bytes())
        .map_err(|e| task_output::OutputError::from_io(transcript, e).into())
}

impl CommandSession {
    /// Spawns the CLI. `replay`: the parser first reads the transcript as it is (an earlier
    /// run's lines), without reporting it, so that it knows the session's history. `store`:
    /// where the CLI keeps its session files, read beside the transcript for the usage of each
    /// request ([`TranscriptTail::with_session_store`]).
    pub(crate) async fn spawn(
        program: &OsStr,
        plan: LaunchPlan,
        parser: Box<dyn LineParser>,
        replay: bool,
        store: Option<agent_stream::session_file::SessionStore>,
        spec: &AgentSpec,
        config: &AgentConfig,
    ) -> Result<Self, AgentError> {
        if let Some(dir) = spec.cwd.as_ref().filter(|d| !d.is_dir()) {
            return Err(AgentError::MissingWorkingDir { path: dir.clone() });
        }
        let stdout = task_output::open::open_append_creating(&spec.transcript)?;
        // Before the spawn, so that nothing the new run writes is replayed.
        let follow = Follow::from_end_of(spec, parser, replay, config)?.with_session_store(store);
        if let Some(turn) = &plan.unshown_turn {
            record_turn(&spec.transcript, turn)?;
        }
        let mut command = Spawn::new(program);
        if spec.replace_env {
            command = command.env_clear();
        }
        command = command
            .args(&plan.args)
            .envs(spec.env.iter().cloned())
            .stdin(if plan.first_turn.is_some() {
                Stdio::Piped
            } else {
                Stdio::Null
            })
            .stdout(Stdio::Fd(stdout.into()))
            .stderr(Stdio::Piped)
            .group(Group::Lead)
            // Not a subreaper: an agent CLI reaps only the children it started, so orphans
            // given to it would stay zombies; a kill finds them by the marker instead.
            .setup(ChildSetup {
                die_with_parent: true,
                hold_orphans: false,
            });
        if let Some(dir) = &spec.cwd {
            command = command.current_dir(dir);
        }
        if let Some(marker) = &spec.marker {
            command = command.env(TASK_MARKER_ENV, marker);
        }
        let mut child = command.spawn().map_err(|source| AgentError::Spawn {
            program: program.to_string_lossy().into_owned(),
            source,
        })?;
        let pgid = child.id();
        let process = match &spec.marker {
            Some(marker) => task_core::ShellProcess::of_leader(pgid, marker),
            None => task_core::ShellProcess {
                pgid,
                leader_started: start_time(pgid),
                owner: None,
            },
        };
        let stderr = StderrTail::new(config.stderr_lines, config.stderr_bytes);
        let kept = KeptStderr::beside(&spec.transcript);
        let stderr_reader = child.stderr.take().map(|err| stderr.follow(err, kept));
        let stdin = child.stdin.take();
        let (exit_tx, exit) = watch::channel(None);
        let (kill, kill_asked) = oneshot::channel::<oneshot::Sender<()>>();
        let marker = spec.marker.clone();
        // The one owner of the child: it reaps it, and kills its tree when asked while it is
        // not yet reaped (so its pid cannot name another process meanwhile).
        tokio::spawn(async move {
            let (status, killed) = tokio::select! {
                biased;
                Ok(killed) = kill_asked => {
                    let status =
                        kill_and_reap(&mut child, pgid, marker.as_deref(), Root::Plain).await;
                    (status, Some(killed))
                }
                status = child.wait() => (status, None),
            };
            let _ = exit_tx.send(Some(status.map_or(-1, exit_code)));
            if let Some(killed) = killed {
                let _ = killed.send(());
            }
        });
        let mut session = CommandSession {
            follow: follow.with_exit(exit.clone()),
            stdin,
            pgid,
            exit,
            stderr,
            stderr_reader,
            kill_grace: config.kill_grace,
            ended: None,
            process,
            marker: spec.marker.clone(),
            kill: Some(kill),
        };
        if let Some(first) = plan.first_turn {
            // A CLI that dies at once closes its stdin: that shows as its exit, not here.
            if let Err(error) = session.write_line(&first).await {
                tracing::debug!(%error, "agent CLI closed stdin before its first turn");
            }
        }
        Ok(session)
    }

    /// The process group id (the CLI's pid).
    pub fn pgid(&self) -> u32 {
        self.pgid
    }

    /// Transcript lines skipped as malformed so far.
    pub fn malformed_lines(&self) -> u64 {
        self.follow.tail.malformed_lines()
    }

    async fn write_line(&mut self, line: &str) -> Result<(), AgentError> {
        let stdin = self.stdin.as_mut().ok_or(AgentError::NoInput)?;
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        stdin.write_all(&bytes).await.map_err(AgentError::Stdin)?;
        stdin.flush().await.map_err(AgentError::Stdin)
    }

    fn exited(&self) -> Option<i32> {
        *self.exit.borrow()
    }

    async fn wait_exit(&mut self, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.exit.wait_for(Option::is_some))
            .await
            .is_ok()
    }

    async fn end(&mut self, code: i32) -> SessionEnd {
        if let Some(reader) = self.stderr_reader.take() {
            // Not to its end: a descendant may have inherited stderr and hold it open.
            reader.drain(self.kill_grace).await;
        }
        SessionEnd {
            exit_code: Some(code),
            stderr_tail: self.stderr.lines(),
            stderr_first: self.stderr.first_cut(),
        }
    }
}

#[async_trait]
impl AgentSession for CommandSession {
    async fn next_event(&mut self) -> SessionEvent {
        if let Some(end) = &self.ended {
            return SessionEvent::Ended(end.clone());
        }
        match self.follow.next().await {
            Ok(event) => SessionEvent::Agent(event),
            Err(code) => {
                let end = self.end(code).await;
                self.ended = Some(end.clone());
                SessionEvent::Ended(end)
            }
        }
    }

    async fn send(&mut self, message: &str) -> Result<(), AgentError> {
        self.write_line(&user_turn(message)).await
    }

    async fn close_input(&mut self) {
        self.stdin = None;
    }

    fn process(&self) -> Option<task_core::ShellProcess> {
        Some(self.process)
    }

    async fn cancel(&mut self) {
        self.stdin = None;
        if self.exited().is_none() {
            signal_group(self.pgid, Signal::INT);
            let grace = self.kill_grace;
            self.wait_exit(grace).await;
        }
        // Whether or not the CLI heeded the interrupt, what it started may not have: a
        // descendant in a session of its own never even received it.
        let (killed, tree_killed) = oneshot::channel();
        let sent = self
            .kill
            .take()
            .is_some_and(|kill| kill.send(killed).is_ok());
        if !(sent && tree_killed.await.is_ok()) {
            // The CLI was reaped before the kill: its number may name another process now, so
            // what it left is found by the marker and checked live, as a dead supervisor's is.
            kill_leftovers(self.process, self.marker.clone()).await;
        }
        // SIGKILL cannot be ignored: the waiter reports the exit.
        let _ = self.exit.wait_for(Option::is_some).await;
    }
}

impl Drop for CommandSession {
    fn drop(&mut self) {
        if let Some(kill) = self.kill.take()
            && self.exited().is_none()
        {
            let (killed, _) = oneshot::channel();
            let _ = kill.send(killed);
        }
    }
}

/// `SIGKILL`s what is left of the processes of a CLI (recorded as `process`) that has exited and
/// been reaped: with a marker, every process carrying it (a `setsid` escapee); each is checked
/// live before the signal ([`ShellProcess::kill_orphaned`](task_core::ShellProcess::kill_orphaned)).
/// The scan reads `/proc`, so it runs on the blocking pool.
async fn kill_leftovers(process: task_core::ShellProcess, marker: Option<String>) {
    let pgid = process.pgid;
    let killed = tokio::task::spawn_blocking(move || match marker {
        Some(marker) => process.kill_orphaned(&marker),
        None => kill_orphaned_group(process.pgid, process.leader_started),
    })
    .await;
    match killed {
        Ok(Ok(any)) => tracing::debug!(pgid, any, "killed what an exited agent CLI left"),
        Ok(Err(error)) => tracing::warn!(pgid, %error, "agent leftovers kill incomplete"),
        Err(error) => tracing::warn!(pgid, %error, "agent leftovers kill did not run"),
    }
}

/// A run followed through its transcript: its events from delta reads, until it has exited
/// (its exit code on `exit`) and every line it wrote was read.
#[derive(Debug)]
pub(super) struct Follow {
    tail: TranscriptTail,
    poll: task_output::Backoff,
    exit: watch::Receiver<Option<i32>>,
    /// The exit code, once the run exited and its last line was taken.
    finished: Option<i32>,
}

impl Follow {
    /// Follows the run about to append to `spec.transcript`, from the transcript's end now
    /// (its parser having read what comes before when `replay`); its exit is reported with
    /// [`Follow::with_exit`].
    pub(super) fn from_end_of(
        spec: &AgentSpec,
        parser: Box<dyn LineParser>,
        replay: bool,
        config: &AgentConfig,
    ) -> Result<Self, AgentError> {
        let start_offset = std::fs::metadata(&spec.transcript)
            .map(|m| m.len())
            .map_err(|e| task_output::OutputError::from_io(&spec.transcript, e))?;
        Ok(Self::from_offset(
            spec,
            parser,
            replay,
            start_offset,
            config,
        ))
    }

    /// Follows the run whose lines begin at `start_offset` of `spec.transcript` (a run taken
    /// over: what it wrote already is read again); as [`Follow::from_end_of`] otherwise.
    pub(super) fn from_offset(
        spec: &AgentSpec,
        parser: Box<dyn LineParser>,
        replay: bool,
        start_offset: u64,
        config: &AgentConfig,
    ) -> Self {
        let (_, exit) = watch::channel(Some(0));
        Self {
            tail: new_tail(spec, parser, replay, start_offset, config),
            poll: poll_backoff(config.transcript_poll),
            exit,
            finished: None,
        }
    }

    /// Also reads the CLI's session file in `store` ([`TranscriptTail::with_session_store`]).
    pub(super) fn with_session_store(
        mut self,
        store: Option<agent_stream::session_file::SessionStore>,
    ) -> Self {
        self.tail = self.tail.with_session_store(store);
        self
    }

    /// The run's exit is reported on `exit` (`Some(code)` once it exited).
    pub(super) fn with_exit(mut self, exit: watch::Receiver<Option<i32>>) -> Self {
        self.exit = exit;
        self
    }

    /// The next event; `Err(code)` once the run exited and all it wrote was taken.
    pub(super) async fn next(&mut self) -> Result<AgentEvent, i32> {
        loop {
            if let Some(event) = self.tail.pop() {
                return Ok(event);
            }
            if let Some(code) = self.finished {
                return Err(code);
            }
            // Read the exit state first: if the run had exited, this read sees all it wrote.
            let exited = *self.exit.borrow();
            match self.tail.read_new() {
                Ok(0) => {}
                Ok(_) => {
                    self.poll.reset();
                    continue;
                }
                Err(error) => tracing::warn!(%error, "agent transcript read failed"),
            }
            if let Some(code) = exited {
                self.tail.finish();
                self.finished = Some(code);
                continue;
            }
            tokio::select! {
                () = tokio::time::sleep(self.poll.next_delay()) => {}
                _ = self.exit.changed() => {}
            }
        }
    }
}

/// The tail of the transcript from `start_offset`, its parser having read what comes before
/// when `replay`.
fn new_tail(
    spec: &AgentSpec,
    parser: Box<dyn LineParser>,
    replay: bool,
    start_offset: u64,
    config: &AgentConfig,
) -> TranscriptTail {
    let tail = |offset, parser| {
        TranscriptTail::new(
            &spec.transcript,
            offset,
            parser,
            config.max_read_bytes,
            config.max_line_bytes,
        )
    };
    if !replay {
        return tail(start_offset, parser);
    }
    let mut replayed = tail(0, parser);
    if let Err(error) = replayed.replay() {
        tracing::warn!(%error, "agent transcript not replayed: its earlier usage may count again");
    }
    // Whatever was read, the run is followed from where it starts.
    replayed.restart_at(start_offset);
    replayed
}

/// The exit code: its own, or 128 + the signal that ended it.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}
