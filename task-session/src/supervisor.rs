//! The session supervisor: one daemon per session, started on demand by the first client that
//! needs it, supervising every task of the session in one tokio runtime.
//!
//! Life cycle: take the session's two locks, `{root}/.{session}.supervisor.lock` then
//! `supervisor.lock` (or say "busy" and exit: another supervisor owns the session), end the
//! tasks a dead predecessor left live, bind `supervisor.sock`, tell the client that started it
//! that it is ready (or why it cannot start), serve one JSON request per connection from
//! processes of the same user, and exit after [`Config::idle_exit`] with no live task, no
//! client and nothing left to write. The socket is removed before the locks are released, so
//! a client never connects to a supervisor that is leaving without a successor being able to
//! start.
//!
//! A deleted session directory: the lock in the root survives `rm -rf` of the session
//! directory, so while the supervisor of the deleted directory lives, no second supervisor
//! starts (a starter waits for it to leave). That supervisor checks on every sweep that the
//! directory at its path is still the one it started in (device and inode); once it is gone
//! or replaced, it writes nothing more to the session's paths, kills every live task (nobody
//! could see, wait for or kill them any more: their records went with the directory), logs
//! why, and exits.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::config::Config;
use crate::engine::{Engine, Wiring};
use crate::error::{Error, Result};
use crate::lock::SupervisorLock;
use crate::notice::Leased;
use crate::paths::SessionPaths;
use crate::protocol::{ErrorKind, Op, Request, Response};
use crate::session::Session;

pub use crate::wire::{MAX_REQUEST_BYTES, READY_FD_ENV};

/// How long a starting supervisor keeps trying to take the lock (a reader probing it holds it
/// for an instant; a supervisor that is exiting holds it until its socket is gone).
const LOCK_PATIENCE: Duration = Duration::from_millis(500);

/// Runs the supervisor of the session at `paths`, with the task types `wiring` registers,
/// until it is idle; returns at once if another supervisor owns the session.
pub fn run(paths: SessionPaths, wiring: Wiring) -> Result<()> {
    let mut ready = ReadyPipe::from_env();
    let result = supervise(&paths, wiring, &mut ready);
    if let Err(error) = &result {
        ready.say(&format!("error: {error}"));
    }
    result
}

/// [`run`] for the session a client named when it started this process: `TASKS_ROOT` and
/// `TASKS_SESSION` (`default` when unset), as [`crate::client`] sets them in the environment
/// of the supervisor it starts.
///
/// # Errors
/// [`Error::NoRoot`] without `TASKS_ROOT`; a bad session name; [`run`]'s.
pub fn run_from_env(wiring: Wiring) -> Result<()> {
    let root = std::env::var_os("TASKS_ROOT").ok_or(Error::NoRoot)?;
    let session = std::env::var("TASKS_SESSION").unwrap_or_else(|_| "default".into());
    run(SessionPaths::new(root, &session)?, wiring)
}

fn supervise(paths: &SessionPaths, wiring: Wiring, ready: &mut ReadyPipe) -> Result<()> {
    paths.create_dirs()?;
    let config = Config::load(&paths.config())?;
    // The client that started this process waits `start_timeout` for its word: a predecessor
    // that does not leave within most of that is reported while the client still listens.
    let Some(locks) = acquire(paths, config.start_timeout * 3 / 4)? else {
        tracing::info!("another supervisor owns {}", paths.dir().display());
        ready.say("busy");
        return Ok(());
    };
    let home = paths
        .dir_identity()
        .map_err(|e| Error::io("look at", paths.dir(), e))?
        .ok_or_else(|| Error::io("look at", paths.dir(), std::io::ErrorKind::NotFound.into()))?;
    if let Err(e) = rotate_log(paths) {
        tracing::warn!("cannot rotate {}: {e}", paths.log().display());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::io("start", "the async runtime", e))?;
    let served = runtime.block_on(async {
        let engine = Arc::new(Engine::start(paths.clone(), config.clone(), wiring)?);
        engine.end_orphans()?;
        let retention = (!config.retention.is_off())
            .then(|| tokio::spawn(crate::prune::apply_retention(paths.clone(), config.clone())));
        let listener = bind(paths)?;
        ready.say("ready");
        let served = Served {
            engine,
            reads: Arc::new(Session::with_config(paths.clone(), config.clone())),
        };
        let exit = serve(paths, listener, &served, &config, home).await;
        let engine = served.engine;
        if let Exit::Evicted(why) = &exit {
            if let Some(retention) = retention {
                retention.abort(); // it would remove files of the directory's successor
            }
            evicted(paths, &engine, why).await;
        }
        Ok::<_, Error>(exit)
    });
    if !matches!(served, Ok(Exit::Evicted(_))) {
        // Not when evicted: the path now belongs to the directory's successor, if any.
        let _ = std::fs::remove_file(paths.socket());
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(locks);
    served.map(drop)
}

/// The two locks a supervisor holds for its whole life; the root's is released last.
struct Locks {
    // Fields drop in order: the session directory's lock first.
    _dir: SupervisorLock,
    _root: SupervisorLock,
}

/// Takes the root's lock, then the directory's, and writes this process's pid in both.
/// `None` ("busy") when a live supervisor of this directory holds its lock. When the root's
/// lock is held but the directory's is free, the holder is the supervisor of a directory
/// deleted or replaced at this path, about to notice and leave: this waits for it up to
/// `patience`, then fails with [`Error::PredecessorStillThere`].
fn acquire(paths: &SessionPaths, patience: Duration) -> Result<Option<Locks>> {
    let started = std::time::Instant::now();
    loop {
        // The root's lock is released again if the directory's cannot be taken.
        if let Some(mut root) = SupervisorLock::try_acquire(&paths.root_lock())?
            && let Some(mut dir) = SupervisorLock::try_acquire(&paths.lock())?
        {
            let pid = std::process::id();
            dir.write_pid(pid)
                .map_err(|e| Error::io("write", paths.lock(), e))?;
            root.write_pid(pid)
                .map_err(|e| Error::io("write", paths.root_lock(), e))?;
            return Ok(Some(Locks {
                _dir: dir,
                _root: root,
            }));
        }
        let waited = started.elapsed();
        // A reader probing the directory's lock holds it for an instant; a supervisor of this
        // directory that is exiting holds it until its socket is gone.
        if waited >= LOCK_PATIENCE && crate::lock::is_held(&paths.lock())? {
            return Ok(None);
        }
        if waited >= patience.max(LOCK_PATIENCE) {
            return Err(Error::PredecessorStillThere {
                pid: crate::lock::holder_pid(&paths.root_lock()).unwrap_or(0),
                dir: paths.dir().to_owned(),
            });
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Why [`serve`] returned.
#[derive(Debug)]
enum Exit {
    /// Idle for [`Config::idle_exit`].
    Idle,
    /// The session directory was deleted or replaced: why, in words.
    Evicted(String),
}

/// Whether the directory at the session's path is still `home`, the one this supervisor
/// started in; `Some(why)` if it was deleted or replaced. An error looking (a permission
/// taken away) is logged and not taken for a deletion.
fn lost_home(paths: &SessionPaths, home: crate::paths::DirIdentity) -> Option<String> {
    let dir = paths.dir().display();
    match paths.dir_identity() {
        Ok(Some(now)) if now == home => None,
        Ok(Some(now)) => Some(format!(
            "its session directory {dir} was replaced ({home} is gone, {now} is there now)"
        )),
        Ok(None) => Some(format!("its session directory {dir} was deleted")),
        Err(error) => {
            tracing::warn!("cannot look at {dir}: {error}");
            None
        }
    }
}

/// What a supervisor does once its directory is gone: kills its tasks, and says so in its
/// log and in the log of the directory that replaced it, if one is there.
async fn evicted(paths: &SessionPaths, engine: &Engine, why: &str) {
    tracing::error!("{why}: killing every live task and exiting");
    let killed = engine.abandon_session(why).await;
    let line = format!(
        "the supervisor (pid {}) of the session directory that was here before: {why}; it killed its {killed} live task(s) and exits",
        std::process::id()
    );
    tracing::error!("{line}");
    // Never creates the directory: only a log in a directory that exists and is ours.
    if paths.dir_identity().is_ok_and(|found| found.is_some()) && paths.verify().is_ok() {
        let appended = task_output::open::open_append_creating(&paths.log())
            .map_err(std::io::Error::from)
            .and_then(|mut log| writeln!(log, "{line}"));
        if let Err(error) = appended {
            tracing::debug!("cannot tell the new directory's log: {error}");
        }
    }
}

fn bind(paths: &SessionPaths) -> Result<UnixListener> {
    let socket = paths.socket();
    let _ = std::fs::remove_file(&socket);
    paths
        .with_socket_path(|path| UnixListener::bind(path))
        .map_err(|e| Error::io("bind", &socket, e))
}

/// The descriptor a client passed to hear whether this supervisor started (see
/// [`READY_FD_ENV`]); written once, then closed.
struct ReadyPipe(Option<std::fs::File>);

impl ReadyPipe {
    fn from_env() -> Self {
        let fd = std::env::var(READY_FD_ENV)
            .ok()
            .and_then(|fd| fd.parse::<i32>().ok())
            .filter(|&fd| fd > 2 && rustix::io::fcntl_getfd(unsafe_borrow(fd)).is_ok());
        // SAFETY: the descriptor was checked to be open above, and the client that started
        // this process passed it for this purpose alone; nothing else in the process uses it.
        Self(fd.map(|fd| std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) })))
    }

    fn say(&mut self, line: &str) {
        if let Some(mut pipe) = self.0.take() {
            let _ = writeln!(pipe, "{line}");
        }
    }
}

fn unsafe_borrow(fd: i32) -> std::os::fd::BorrowedFd<'static> {
    // SAFETY: only used for an `fcntl(F_GETFD)` probe, which is harmless on any number.
    unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }
}

/// Past this size when a supervisor starts, `supervisor.log` is rotated.
pub const LOG_ROTATE_BYTES: u64 = 1024 * 1024;

/// Keeps the log bounded: when this supervisor's stderr is `supervisor.log` and that is past
/// [`LOG_ROTATE_BYTES`], it becomes `supervisor.log.1` (replacing the one before) and the
/// supervisor goes on in a fresh file. Only the lock holder rotates, so no two processes race.
fn rotate_log(paths: &SessionPaths) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let log = paths.log();
    let on_disk = match std::fs::symlink_metadata(&log) {
        Ok(meta) if meta.is_file() && meta.len() > LOG_ROTATE_BYTES => meta,
        _ => return Ok(()),
    };
    let stderr = rustix::fs::fstat(rustix::stdio::stderr())?;
    if (stderr.st_dev, stderr.st_ino) != (on_disk.dev(), on_disk.ino()) {
        return Ok(()); // started by hand, not logging to the file
    }
    std::fs::rename(&log, paths.previous_log())?;
    let fresh = task_output::open::open_append_creating(&log)?;
    rustix::stdio::dup2_stdout(&fresh)?;
    rustix::stdio::dup2_stderr(&fresh)?;
    Ok(())
}

/// What a supervisor serves requests from: its engine, and the session's files for the reads
/// it answers ([`Op::Output`], [`Op::TakeNotifications`]).
#[derive(Clone)]
struct Served {
    engine: Arc<Engine>,
    reads: Arc<Session>,
}

async fn serve(
    paths: &SessionPaths,
    listener: UnixListener,
    served: &Served,
    config: &Config,
    home: crate::paths::DirIdentity,
) -> Exit {
    let idle_exit = config.idle_exit;
    let engine = &served.engine;
    let clients = Arc::new(AtomicUsize::new(0));
    let me = rustix::process::geteuid().as_raw();
    tracing::info!(
        pid = std::process::id(),
        "supervising {}",
        paths.dir().display()
    );
    let mut sweep = tokio::time::interval(config.sweep_interval);
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The idle period runs from the last connection or change, not from the last sweep.
    let mut quiet_since = tokio::time::Instant::now();
    loop {
        // The cheap count decides whether to start the idle timer; the exact one whether to exit.
        let idle = engine.tracked_live_tasks() == 0 && clients.load(Ordering::SeqCst) == 0;
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    quiet_since = tokio::time::Instant::now();
                    if !same_user(&stream, me) {
                        continue; // dropped: only this user's processes are served
                    }
                    clients.fetch_add(1, Ordering::SeqCst);
                    let (served, clients) = (served.clone(), Arc::clone(&clients));
                    tokio::spawn(async move {
                        let engine = Arc::clone(&served.engine);
                        if let Err(e) = handle(stream, &served).await {
                            tracing::warn!("client: {e}");
                        }
                        clients.fetch_sub(1, Ordering::SeqCst);
                        engine.wake();
                    });
                }
                Err(e) => tracing::warn!("accept: {e}"),
            },
            () = tokio::time::sleep_until(quiet_since + idle_exit), if idle => {
                if engine.live_tasks() == 0 && clients.load(Ordering::SeqCst) == 0 {
                    break;
                }
                quiet_since = tokio::time::Instant::now();
            }
            () = engine.changed() => quiet_since = tokio::time::Instant::now(),
            _ = sweep.tick() => {
                if let Some(why) = lost_home(paths, home) {
                    return Exit::Evicted(why);
                }
            }
        }
    }
    tracing::info!("idle for {} ms: exiting", idle_exit.as_millis());
    engine.flush().await;
    Exit::Idle
}

/// Whether the peer of `stream` runs as user `me` (`SO_PEERCRED`).
fn same_user(stream: &UnixStream, me: u32) -> bool {
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == me => true,
        Ok(cred) => {
            tracing::warn!(uid = cred.uid(), "refused a connection from another user");
            false
        }
        Err(e) => {
            tracing::warn!("refused a connection whose peer is unknown: {e}");
            false
        }
    }
}

async fn handle(stream: UnixStream, served: &Served) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = Vec::new();
    BufReader::new(read.take(MAX_REQUEST_BYTES as u64 + 1))
        .read_until(b'\n', &mut line)
        .await?;
    let answer = if line.len() > MAX_REQUEST_BYTES {
        Answer::Plain(refuse(
            ErrorKind::BadRequest,
            format!("request larger than {MAX_REQUEST_BYTES} bytes"),
        ))
    } else {
        match serde_json::from_slice::<Request>(&line) {
            Ok(request) => dispatch(request, served).await,
            Err(e) => Answer::Plain(unreadable(&line, &e)),
        }
    };
    let (response, mut leased) = match answer {
        Answer::Plain(response) => (response, None),
        Answer::Leased(response, leased) => (response, Some(leased)),
    };
    let mut bytes = serde_json::to_vec(&response).map_err(std::io::Error::other)?;
    bytes.push(b'\n');
    write.write_all(&bytes).await?;
    write.flush().await?;
    if let Some(leased) = leased.take() {
        // Written to the client: delivered. Had the write failed, the drop gives them back.
        leased.mark_delivered();
    }
    Ok(())
}

/// A supervisor's answer, and the notifications it carries that become delivered once it is
/// written ([`Op::TakeNotifications`]).
enum Answer {
    Plain(Response),
    Leased(Response, Leased),
}

/// The answer to a line that is not a request this supervisor reads: [`Response::Unsupported`]
/// when it claims a version not served (a newer client's new operation), else a bad request.
fn unreadable(line: &[u8], error: &serde_json::Error) -> Response {
    let client = task_protocol::wire::claimed_version(line);
    if task_protocol::wire::serves(client) {
        refuse(ErrorKind::BadRequest, format!("bad request: {error}"))
    } else {
        unsupported(client)
    }
}

fn unsupported(client: u32) -> Response {
    Response::Unsupported {
        client,
        supervisor: task_protocol::wire::PROTOCOL_VERSION,
        oldest: task_protocol::wire::OLDEST_SERVED_VERSION,
    }
}

fn refuse(kind: ErrorKind, message: String) -> Response {
    Response::Error { kind, message }
}

async fn dispatch(request: Request, served: &Served) -> Answer {
    if !task_protocol::wire::serves(request.version) {
        return Answer::Plain(unsupported(request.version));
    }
    let late_by = task_core::now_ms().saturating_sub(request.deadline_ms);
    if late_by > 0 {
        tracing::warn!(
            late_by_ms = late_by,
            "dropped a request read after its deadline"
        );
        return Answer::Plain(refuse(
            ErrorKind::Expired,
            format!(
                "the request arrived {late_by} ms after its client stopped waiting: not carried out"
            ),
        ));
    }
    let engine = &served.engine;
    let response = match request.op {
        Op::Start(start) => match engine.start_task(start, Some(request.deadline_ms)) {
            Ok(id) => Response::Started { id },
            Err(refused) => refuse(refused.kind, refused.message),
        },
        Op::Kill { ids } => Response::Killed {
            reports: engine.kill(&ids).await,
        },
        Op::Send { to, message, id } => {
            let reply = engine.send(&to, &message, id.as_deref()).await;
            engine.flush().await;
            Response::Sent { reply }
        }
        Op::Input { id, data, close } => {
            let patience =
                Duration::from_millis(request.deadline_ms.saturating_sub(task_core::now_ms()));
            crate::input::serve(engine, &id, &data, close, patience).await
        }
        Op::Group { group, parallel } => match engine.set_group_limit(&group, parallel) {
            Ok(()) => Response::GroupSet { group, parallel },
            Err(error) => refuse(ErrorKind::BadRequest, error.to_string()),
        },
        Op::GroupPause { group, paused } => match engine.pause_group(&group, paused) {
            Ok(()) => Response::GroupPaused { group, paused },
            Err(error) => refuse(ErrorKind::BadRequest, error.to_string()),
        },
        Op::Ping => Response::Pong {
            pid: std::process::id(),
            registered: engine.registered_tasks(),
        },
        Op::Release { ids } => Response::Released {
            ids: engine.release(&ids).await,
        },
        Op::Hello => Response::Hello {
            version: task_protocol::wire::PROTOCOL_VERSION,
            oldest: task_protocol::wire::OLDEST_SERVED_VERSION,
            pid: std::process::id(),
        },
        Op::Output {
            id,
            offset,
            max_bytes,
        } => crate::reads::output(&served.reads, id, offset, max_bytes).await,
        Op::TakeNotifications => {
            return match crate::reads::take_notifications(&served.reads).await {
                Ok((response, leased)) => Answer::Leased(response, leased),
                Err(error) => Answer::Plain(refuse(ErrorKind::Internal, error.to_string())),
            };
        }
        _ => refuse(
            ErrorKind::BadRequest,
            "an operation this supervisor does not serve".into(),
        ),
    };
    Answer::Plain(response)
}
