//! The client side of the supervisor socket: connect, starting the supervisor on demand, and
//! exchange one request for one answer within a bounded time.
//!
//! Starting is race-free by construction: any number of clients may each spawn a supervisor, but
//! only the one that takes `supervisor.lock` binds the socket; the others say "busy" and exit,
//! and every client keeps trying to connect until its deadline. A client spawns at most one
//! supervisor per attempt and hears from it whether it started (through a pipe, see
//! [`READY_FD_ENV`]): a supervisor that cannot start (a full disk, an unsafe directory) makes
//! the client fail at once with its reason, instead of spawning again and again.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::lock;
use crate::paths::SessionPaths;
use crate::protocol::{ErrorKind as Refusal, Op, Request, Response};
use crate::wire::READY_FD_ENV;
use task_output::open::NoFollow;

/// How a client starts the supervisor of a session: a program and its arguments. The session's
/// root and name are passed in its environment as `TASKS_ROOT` and `TASKS_SESSION`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorCommand {
    /// The program.
    pub program: Program,
    /// Its first arguments.
    pub args: Vec<OsString>,
}

/// The program of a [`SupervisorCommand`]. One named relative to the running executable is
/// found only when a supervisor is started, so a command that finds its supervisor running
/// never looks (`/proc/self/exe`, a lookup that is a measurable part of a short command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// This path.
    Path(PathBuf),
    /// The running executable itself.
    ThisExecutable,
    /// The file of this name in the running executable's directory (`tasksd` beside `tasks`).
    BesideThisExecutable(OsString),
}

impl Program {
    /// Its path, finding the running executable where it is named after it.
    ///
    /// # Errors
    /// [`Error::Io`] when the running executable cannot be found.
    pub fn path(&self) -> Result<PathBuf> {
        let this =
            || std::env::current_exe().map_err(|e| Error::io("locate", "this executable", e));
        match self {
            Program::Path(path) => Ok(path.clone()),
            Program::ThisExecutable => this(),
            Program::BesideThisExecutable(name) => Ok(this()?.with_file_name(name)),
        }
    }
}

impl From<PathBuf> for Program {
    fn from(path: PathBuf) -> Self {
        Program::Path(path)
    }
}

impl From<&str> for Program {
    fn from(path: &str) -> Self {
        Program::Path(path.into())
    }
}

/// Sends `request` and returns the answer. The request carries a deadline of now plus
/// [`Config::request_timeout`]; the client waits a little longer than that for the answer, and
/// the supervisor refuses a request it reads after the deadline, so a request this call gave
/// up on is never carried out later.
///
/// A start that gets no answer by its deadline (its supervisors all died, or stalled) is
/// decided from disk before it fails: if a record carries its key, the task was made and the
/// start answers with its id (its record says what became of it); otherwise the error says
/// the task was not made. No supervisor can make it after that look: one refuses a request it
/// reads after the deadline, and one that read it before refuses to make the task (and makes
/// nothing of it visible) if its launcher returns after the deadline
/// ([`crate::engine::Engine::start_task`]); the look comes the answer grace (1 s) after the
/// deadline, which leaves a start that passed that check the time to write its first record.
pub fn send(
    paths: &SessionPaths,
    config: &Config,
    supervisor: &SupervisorCommand,
    op: Op,
) -> Result<Response> {
    let mut outgoing = Outgoing::new(config, op);
    let mut delivered = false;
    let outcome = deliver(paths, config, supervisor, &mut outgoing, &mut delivered);
    match outgoing.settle(outcome, delivered) {
        Settled::Answer(answer) => answer,
        Settled::Undecided(undecided) => {
            if let Some(until) = undecided.wait_until() {
                std::thread::sleep(until.saturating_duration_since(Instant::now()));
            }
            undecided.decide(paths)
        }
    }
}

/// One request on its way to the supervisor, as every client (blocking, or async:
/// task-client's) sends it: its deadline, the key of a start, and whether it may be sent again.
/// Runtime-free: the client does the I/O.
#[derive(Debug)]
pub struct Outgoing {
    request: Request,
    deadline: Instant,
    key: Option<String>,
    attempts: usize,
}

impl Outgoing {
    /// `op`, of use until now plus [`Config::request_timeout`]; a start gets a key (the same on
    /// every attempt) unless it has one.
    pub fn new(config: &Config, op: Op) -> Self {
        let deadline = Instant::now() + config.request_timeout;
        let mut request = Request::new(
            task_core::now_ms()
                + u64::try_from(config.request_timeout.as_millis()).unwrap_or(u64::MAX),
            op,
        );
        if let Op::Start(start) = &mut request.op {
            start.key.get_or_insert_with(start_key);
        }
        let key = match &request.op {
            Op::Start(start) => start.key.clone(),
            _ => None,
        };
        Outgoing {
            request,
            deadline,
            key,
            attempts: 0,
        }
    }

    /// Whether it may be sent again after an attempt its supervisor closed without answering:
    /// twice at most, and a start (it carries its key) or a message (its id) until its
    /// deadline, since a supervisor may have died having carried it out, and the repeat is
    /// recognised (a start's retry gets the task its first attempt made; a message's receiver
    /// drops a repeat).
    pub fn may_send(&self) -> bool {
        self.attempts < 2 || (self.repeatable() && Instant::now() < self.deadline)
    }

    fn repeatable(&self) -> bool {
        matches!(
            &self.request.op,
            Op::Start(_) | Op::Send { id: Some(_), .. }
        )
    }

    /// How many supervisors one attempt may start, one after another, while each dies as it
    /// starts: a repeatable request never gives up on one killed as it starts (the previous
    /// attempt may have been carried out), the others try a few.
    pub fn max_starts(&self) -> usize {
        if self.repeatable() {
            usize::MAX
        } else {
            STARTS
        }
    }

    /// The next attempt's line (a start's retry says so), newline-terminated: one write, so
    /// the supervisor wakes once per request.
    ///
    /// # Errors
    /// [`Error::Supervisor`] if the request cannot be encoded.
    pub fn next_line(&mut self) -> Result<String> {
        if let (Op::Start(start), true) = (&mut self.request.op, self.attempts > 0) {
            start.retry = true;
        }
        self.attempts += 1;
        let mut line = serde_json::to_string(&self.request)
            .map_err(|e| Error::Supervisor(format!("cannot encode request: {e}")))?;
        line.push('\n');
        Ok(line)
    }

    /// How long, from now, the client waits for the answer: until the deadline and a grace.
    pub fn patience(&self) -> Duration {
        self.deadline.saturating_duration_since(Instant::now()) + ANSWER_GRACE
    }

    /// What the request's `outcome` (`delivered`: it reached a supervisor) comes to: the
    /// answer (a supervisor that does not serve this protocol version is an
    /// [`Error::Protocol`]), or, for a start left unanswered, a decision to take from disk.
    pub fn settle(self, outcome: Result<Response>, delivered: bool) -> Settled {
        let outcome = outcome.and_then(served);
        let Some(key) = self.key else {
            return Settled::Answer(outcome);
        };
        let error = match outcome {
            Err(refused @ Error::Protocol { .. }) => return Settled::Answer(Err(refused)),
            Ok(Response::Error {
                kind: Refusal::Expired,
                message,
            }) => Error::Supervisor(message),
            Ok(response) => return Settled::Answer(Ok(response)),
            Err(error) => error,
        };
        Settled::Undecided(Undecided {
            key,
            delivered,
            deadline: self.deadline,
            error,
        })
    }
}

/// What a request came to ([`Outgoing::settle`]).
#[derive(Debug)]
pub enum Settled {
    /// Its answer, or its error.
    Answer(Result<Response>),
    /// A start left unanswered: whether it made its task is read from disk.
    Undecided(Undecided),
}

/// A start left unanswered ([`Settled::Undecided`]): whether it made its task is read from
/// disk, once no supervisor can still make it.
#[derive(Debug)]
pub struct Undecided {
    key: String,
    delivered: bool,
    deadline: Instant,
    error: Error,
}

impl Undecided {
    /// Until when the client waits before it looks ([`Undecided::decide`]): past the start's
    /// deadline and the answer grace, if it ever reached a supervisor (one that did not made
    /// nothing in this call, and is looked up at once).
    pub fn wait_until(&self) -> Option<Instant> {
        self.delivered.then_some(self.deadline + ANSWER_GRACE)
    }

    /// Whether the start made its task: the answer a record carrying its key stands for, or
    /// the error saying it was not made (or that this is unknown). Reads the session's records.
    pub fn decide(self, paths: &SessionPaths) -> Result<Response> {
        let Undecided { key, error, .. } = self;
        match crate::record::find_started(paths, &key) {
            Ok(Some(id)) => {
                tracing::info!(task = %id, "no answer to a start ({error}), but its record is on disk");
                Ok(Response::Started { id })
            }
            Ok(None) => Err(Error::Supervisor(format!(
                "{}; the task was not made (no record carries its start key)",
                without_prefix(&error)
            ))),
            Err(read) => Err(Error::Supervisor(format!(
                "{}; whether the task was made is unknown: {read}",
                without_prefix(&error)
            ))),
        }
    }
}

/// `response`, unless it says the supervisor does not serve this client's protocol version.
fn served(response: Response) -> Result<Response> {
    match response {
        Response::Unsupported {
            client,
            supervisor,
            oldest,
        } => Err(Error::Protocol {
            client,
            supervisor,
            oldest,
        }),
        response => Ok(response),
    }
}

/// Reads one answer line.
///
/// # Errors
/// [`Error::Supervisor`] naming the line, if it is not an answer.
pub fn decode(answer: &str) -> Result<Response> {
    serde_json::from_str(answer)
        .map_err(|e| Error::Supervisor(format!("unreadable answer {answer:?}: {e}")))
}

/// The error of a request the supervisor closed the connection on, attempt after attempt.
pub fn closed_without_answer() -> Error {
    Error::Supervisor("the supervisor closed the connection without answering".into())
}

/// The error of a request whose answer did not come in time.
pub fn no_answer(paths: &SessionPaths, config: &Config) -> Error {
    Error::NoAnswer {
        pid: lock::holder_pid(&paths.lock()).unwrap_or(0),
        waited: task_core::human_duration(config.request_timeout),
    }
}

/// Sends `outgoing` until it is answered, setting `delivered` once it was written to a
/// supervisor.
fn deliver(
    paths: &SessionPaths,
    config: &Config,
    supervisor: &SupervisorCommand,
    outgoing: &mut Outgoing,
    delivered: &mut bool,
) -> Result<Response> {
    while outgoing.may_send() {
        let line = outgoing.next_line()?;
        let stream = connect_or_start_with(paths, config, supervisor, outgoing.max_starts())?;
        *delivered = true;
        if let Some(response) = exchange(stream, &line, paths, config, outgoing.patience())? {
            return Ok(response);
        }
        // The supervisor closed without answering (it was leaving, or died): once more, to
        // its successor.
    }
    Err(closed_without_answer())
}

/// The words of `error` for a message that is a supervisor error itself: a supervisor error's
/// own, without its `supervisor: ` (said once, by the outer error).
fn without_prefix(error: &Error) -> String {
    match error {
        Error::Supervisor(message) => message.clone(),
        other => other.to_string(),
    }
}

/// A key unique to one start of this process: its pid, the time and a count.
fn start_key() -> String {
    static STARTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = STARTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}-{nanos:x}-{count:x}", std::process::id())
}

/// Grace past the request's deadline for its answer to arrive.
const ANSWER_GRACE: Duration = Duration::from_secs(1);

fn exchange(
    mut stream: UnixStream,
    line: &str,
    paths: &SessionPaths,
    config: &Config,
    patience: Duration,
) -> Result<Option<Response>> {
    let socket = paths.socket();
    let io_err = |e| Error::io("talk to the supervisor at", &socket, e);
    stream.set_read_timeout(Some(patience)).map_err(io_err)?;
    stream.set_write_timeout(Some(patience)).map_err(io_err)?;
    match stream.write_all(line.as_bytes()) {
        Ok(()) => {}
        Err(e) if is_disconnect(e.kind()) => return Ok(None),
        Err(e) if is_timeout(e.kind()) => return Err(no_answer(paths, config)),
        Err(e) => return Err(io_err(e)),
    }
    let mut answer = String::new();
    match BufReader::new(&stream).read_line(&mut answer) {
        Ok(0) => Ok(None),
        Ok(_) => decode(&answer).map(Some),
        Err(e) if is_disconnect(e.kind()) => Ok(None),
        Err(e) if is_timeout(e.kind()) => Err(no_answer(paths, config)),
        Err(e) => Err(io_err(e)),
    }
}

/// Whether an I/O error means the supervisor closed the connection (the request may be sent
/// again, to its successor).
pub fn is_disconnect(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
    )
}

/// Whether an I/O error means the wait for the supervisor timed out.
pub fn is_timeout(kind: ErrorKind) -> bool {
    matches!(kind, ErrorKind::WouldBlock | ErrorKind::TimedOut)
}

/// Connects to the session's supervisor, starting one if none answers.
pub fn connect_or_start(
    paths: &SessionPaths,
    config: &Config,
    supervisor: &SupervisorCommand,
) -> Result<UnixStream> {
    connect_or_start_with(paths, config, supervisor, STARTS)
}

/// [`connect_or_start`], starting at most `max_starts` supervisors while each dies before it
/// is ready ([`Outgoing::max_starts`]).
pub fn connect_or_start_with(
    paths: &SessionPaths,
    config: &Config,
    supervisor: &SupervisorCommand,
    max_starts: usize,
) -> Result<UnixStream> {
    // The directories are checked before a socket in them is trusted; they are created only
    // when no supervisor answers (a running one made them).
    paths.verify()?;
    let socket = paths.socket();
    let deadline = Instant::now() + config.start_timeout;
    let mut starts = 0;
    let mut backoff =
        task_output::Backoff::new(Duration::from_millis(1), Duration::from_millis(20));
    loop {
        match paths.with_socket_path(|path| UnixStream::connect(path)) {
            Ok(stream) => return Ok(stream),
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {}
            Err(e) => return Err(Error::io("connect to", &socket, e)),
        }
        if Instant::now() >= deadline {
            return Err(Error::Supervisor(format!(
                "no supervisor answered at {} within {} ms (see {})",
                socket.display(),
                config.start_timeout.as_millis(),
                paths.log().display()
            )));
        }
        if starts < max_starts && !lock::is_held(&paths.lock())? {
            paths.create_dirs()?;
            starts += 1;
            match start_supervisor(paths, supervisor, deadline)? {
                Started::Ready => {}
                // Killed as it started: another one (or, if its lock is taken, its successor).
                Started::Died if starts < max_starts => {}
                Started::Died => {
                    return Err(Error::Supervisor(format!(
                        "the supervisor exited or stalled before it was ready (see {})",
                        paths.log().display()
                    )));
                }
            }
            continue;
        }
        std::thread::sleep(backoff.next_delay());
    }
}

/// How many supervisors a client starts, one after another, while each dies before it is
/// ready (killed as it started): a supervisor that cannot start says why instead, and is
/// started once.
const STARTS: usize = 3;

/// What became of a supervisor a client started.
enum Started {
    /// It is ready, or another one owns the session.
    Ready,
    /// It died (or stalled) before it said a word.
    Died,
}

/// Spawns a supervisor and waits (until `deadline`) for its word: `ready` and `busy` (another
/// one owns the session) are [`Started::Ready`], `error: …` is an error naming the cause,
/// silence is [`Started::Died`].
fn start_supervisor(
    paths: &SessionPaths,
    supervisor: &SupervisorCommand,
    deadline: Instant,
) -> Result<Started> {
    let (read_end, write_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Error::io("create", "a pipe to the supervisor", e.into()))?;
    let child = spawn(paths, supervisor, write_end)?;
    let word = read_word(read_end, deadline);
    reap_in_background(child);
    match word.as_deref() {
        Some("ready" | "busy") => Ok(Started::Ready),
        Some(line) => {
            // Its word is `error: {its error}`, whose text may name the supervisor already.
            let cause = line.strip_prefix("error: ").unwrap_or(line);
            let cause = cause.strip_prefix("supervisor: ").unwrap_or(cause);
            Err(Error::Supervisor(format!("could not start: {cause}")))
        }
        None => Ok(Started::Died),
    }
}

/// The first line the supervisor writes on the pipe, or `None` if it closed the pipe without
/// one (it died) or said nothing before `deadline`.
fn read_word(read_end: OwnedFd, deadline: Instant) -> Option<String> {
    let mut pipe = std::fs::File::from(read_end);
    let mut line = Vec::new();
    let mut byte = [0_u8; 1];
    loop {
        let timeout = deadline.saturating_duration_since(Instant::now());
        let fd = rustix::event::PollFd::new(&pipe, rustix::event::PollFlags::IN);
        let millis = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
        let spec = rustix::event::Timespec::try_from(Duration::from_millis(millis as u64)).ok();
        match rustix::event::poll(&mut [fd], spec.as_ref()) {
            Ok(0) => return None,
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return None,
        }
        match pipe.read(&mut byte) {
            Ok(0) => return None,
            Ok(_) if byte[0] == b'\n' => return Some(String::from_utf8_lossy(&line).into_owned()),
            Ok(_) => line.push(byte[0]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

fn reap_in_background(mut child: Child) {
    if let Ok(None) = child.try_wait() {
        std::thread::spawn(move || child.wait());
    }
}

fn spawn(paths: &SessionPaths, supervisor: &SupervisorCommand, ready: OwnedFd) -> Result<Child> {
    // The log may not be creatable (a full disk, a read-only root): the supervisor then still
    // reports through the pipe (a start that fails says why there), and logs nowhere.
    let log = |e| tracing::debug!("cannot open {}: {e}", paths.log().display());
    let stderr = match NoFollow::write().create().append().open(&paths.log()) {
        Ok(file) => Stdio::from(file),
        Err(e) => {
            log(e);
            Stdio::null()
        }
    };
    let ready_fd = ready.as_raw_fd();
    let mut command = Command::new(supervisor.program.path()?);
    command
        .args(&supervisor.args)
        .env("TASKS_ROOT", paths.root())
        .env("TASKS_SESSION", paths.name())
        .env(READY_FD_ENV, ready_fd.to_string())
        // A long-lived daemon with two workers and a writer thread: two malloc arenas keep its
        // memory from fragmenting over many threads (glibc's default is eight per core). Tasks
        // run in their callers' environments, so it reaches none of them.
        .env("MALLOC_ARENA_MAX", "2")
        // Started from inside a task, it is still nobody's task: it must not die with the
        // task whose marker this client carries.
        .env_remove(task_core::TASK_MARKER_ENV)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // SAFETY: `setsid` and `fcntl` are async-signal-safe and touch no memory of the parent.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setsid()?;
            // Keep the pipe's write end open across exec (it was created close-on-exec).
            let fd = std::os::fd::BorrowedFd::borrow_raw(ready_fd);
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
            Ok(())
        });
    }
    let child = command
        .spawn()
        .map_err(|e| Error::Supervisor(format!("could not start: {e}")))?;
    drop(ready); // the child has its copy; ours must close so its death reads as end of file
    Ok(child)
}
