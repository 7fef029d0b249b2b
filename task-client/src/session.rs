//! The supervisor's wire over tokio: [`AsyncSession`] sends the same requests as task-session's
//! blocking [`Session`], with the same deadline, start key, retry and decision from disk (the
//! runtime-free [`Outgoing`]), and waits for the answer without holding a thread. Only the
//! connect, which may start the supervisor and wait for its word, and the reads of the records
//! run on tokio's blocking pool, shared with the blocking client.
//!
//! Refusals arrive typed, as from the blocking client: a request naming no task is
//! [`Error::NotFound`] (or [`Error::UnknownTask`], read from the records), one the supervisor
//! did not understand [`Error::Invalid`], any other [`Error::Refused`] with its
//! [`ErrorKind`](task_protocol::wire::ErrorKind), a supervisor of another protocol version
//! [`Error::Protocol`].

use task_protocol::start::StartRequest;
use task_protocol::{Address, Caller, MessageReply, TaskId};
use task_session::client::{self, Outgoing, Settled, SupervisorCommand};
use task_session::config::Config;
use task_session::paths::SessionPaths;
use task_session::protocol::{Ends, KillReport, Op, Response};
use task_session::queue::Schedule;
use task_session::record::TaskRecord;
use task_session::session::{self, Session};
use task_session::{Error, Result};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// A session's client for async front ends (the MCP server): starts, kills and messages go
/// over the supervisor's socket without blocking a thread.
#[derive(Debug, Clone)]
pub struct AsyncSession {
    session: Session,
}

impl AsyncSession {
    /// The async client of `session` (its paths, settings and supervisor command).
    pub fn new(session: Session) -> Self {
        AsyncSession { session }
    }

    /// The blocking session it speaks for (its paths, settings, file reads).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Sends `op` and returns the answer, as [`task_session::client::send`] does.
    ///
    /// # Errors
    /// As the blocking client's: no supervisor could be reached or started, no answer in time,
    /// another protocol version; a start left unanswered that made no task.
    pub async fn send(&self, op: Op) -> Result<Response> {
        let supervisor = self.session.supervisor()?.clone();
        let paths = self.session.paths().clone();
        let config = self.session.config().clone();
        let mut outgoing = Outgoing::new(&config, op);
        let mut delivered = false;
        let outcome = deliver(&paths, &config, &supervisor, &mut outgoing, &mut delivered).await;
        match outgoing.settle(outcome, delivered) {
            Settled::Answer(answer) => answer,
            Settled::Undecided(undecided) => {
                if let Some(until) = undecided.wait_until() {
                    tokio::time::sleep_until(until.into()).await;
                }
                blocking(move || undecided.decide(&paths)).await
            }
        }
    }

    /// Starts a task of `R`'s kind, as [`Session::start`] does.
    ///
    /// # Errors
    /// The supervisor's typed refusal (a start it could not make: [`Error::Refused`]), or
    /// [`AsyncSession::send`]'s.
    pub async fn start<R: StartRequest>(&self, request: R, caller: Caller) -> Result<TaskId> {
        self.start_with(request, caller, Schedule::default(), Ends::default())
            .await
    }

    /// Starts a task with a schedule and what it brings for its end, as
    /// [`Session::start_with`] does.
    ///
    /// # Errors
    /// As [`AsyncSession::start`].
    pub async fn start_with<R: StartRequest>(
        &self,
        request: R,
        caller: Caller,
        schedule: Schedule,
        ends: Ends,
    ) -> Result<TaskId> {
        let op = self.session.start_op(request, caller, schedule, ends)?;
        session::started(self.send(op).await?)
    }

    /// Kills tasks (whole process trees), as [`Session::kill`] does.
    ///
    /// # Errors
    /// An unknown id ([`Error::UnknownTask`]) before anything is killed; the supervisor's
    /// typed refusal.
    pub async fn kill(&self, ids: &[TaskId]) -> Result<Vec<KillReport>> {
        let (session, asked) = (self.session.clone(), ids.to_vec());
        let plan = blocking(move || session.kill_plan(&asked)).await?;
        let answer = match plan.op() {
            Some(op) => Some(self.send(op).await?),
            None => None,
        };
        plan.finish(answer)
    }

    /// Sends `message` to the task `to`, as [`Session::send_message`] does.
    ///
    /// # Errors
    /// The supervisor's typed refusal, or [`AsyncSession::send`]'s.
    pub async fn send_message(&self, to: &Address, message: &str) -> Result<MessageReply> {
        session::sent(self.send(session::message_op(to, message)?).await?)
    }

    /// Up to `max_bytes` of task `id`'s output from byte `offset`, as the supervisor reads it
    /// (UTF-8 that never splits a character).
    ///
    /// # Errors
    /// No such task ([`Error::NotFound`], the supervisor's typed refusal), or
    /// [`AsyncSession::send`]'s.
    pub async fn output(&self, id: TaskId, offset: u64, max_bytes: u32) -> Result<OutputSlice> {
        let op = Op::Output {
            id,
            offset,
            max_bytes,
        };
        match self.send(op).await? {
            Response::Output { text, next, ended } => Ok(OutputSlice { text, next, ended }),
            other => Err(session::unexpected(other)),
        }
    }

    /// One task, read from its record on the blocking pool, as [`Session::task`] does.
    ///
    /// # Errors
    /// [`Error::UnknownTask`]; reading the record.
    pub async fn task(&self, id: TaskId) -> Result<TaskRecord> {
        let session = self.session.clone();
        blocking(move || session.task(&id)).await
    }
}

/// A slice of a task's output ([`AsyncSession::output`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSlice {
    /// The text read (possibly empty).
    pub text: String,
    /// The offset to read from next.
    pub next: u64,
    /// Whether the task has ended (its output is then complete).
    pub ended: bool,
}

/// Sends `outgoing` until it is answered, setting `delivered` once it was written to a
/// supervisor (the blocking client's loop, with an async exchange).
async fn deliver(
    paths: &SessionPaths,
    config: &Config,
    supervisor: &SupervisorCommand,
    outgoing: &mut Outgoing,
    delivered: &mut bool,
) -> Result<Response> {
    while outgoing.may_send() {
        let line = outgoing.next_line()?;
        let starts = outgoing.max_starts();
        let (p, c, s) = (paths.clone(), config.clone(), supervisor.clone());
        let stream = blocking(move || client::connect_or_start_with(&p, &c, &s, starts)).await?;
        *delivered = true;
        if let Some(answer) = exchange(stream, &line, paths, config, outgoing).await? {
            return Ok(answer);
        }
        // The supervisor closed without answering (it was leaving, or died): once more, to
        // its successor.
    }
    Err(client::closed_without_answer())
}

/// Writes `line` and reads the answer line, within the request's patience; `None` when the
/// supervisor closed the connection first.
async fn exchange(
    stream: std::os::unix::net::UnixStream,
    line: &str,
    paths: &SessionPaths,
    config: &Config,
    outgoing: &Outgoing,
) -> Result<Option<Response>> {
    let socket = paths.socket();
    let io_err = |e| Error::io("talk to the supervisor at", &socket, e);
    stream.set_nonblocking(true).map_err(io_err)?;
    let mut stream = tokio::net::UnixStream::from_std(stream).map_err(io_err)?;
    let talk = async {
        match stream.write_all(line.as_bytes()).await {
            Ok(()) => {}
            Err(e) if client::is_disconnect(e.kind()) => return Ok(None),
            Err(e) => return Err(io_err(e)),
        }
        let mut answer = String::new();
        match BufReader::new(&mut stream).read_line(&mut answer).await {
            Ok(0) => Ok(None),
            Ok(_) => client::decode(&answer).map(Some),
            Err(e) if client::is_disconnect(e.kind()) => Ok(None),
            Err(e) => Err(io_err(e)),
        }
    };
    tokio::time::timeout(outgoing.patience(), talk)
        .await
        .unwrap_or_else(|_| Err(client::no_answer(paths, config)))
}

/// Runs blocking session work (a connect that may start the supervisor, a read of records) on
/// tokio's blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::Supervisor(format!("the client's blocking work failed: {e}")))?
}
