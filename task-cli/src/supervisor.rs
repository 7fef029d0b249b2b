//! The session supervisor: one daemon per session, started on demand by the first client that
//! needs it, supervising every task of the session in one tokio runtime.
//!
//! Life cycle: take `supervisor.lock` (or exit: another supervisor owns the session), mark any
//! task a dead predecessor left live as failed, bind `supervisor.sock`, serve one JSON request
//! per connection, and exit after [`Config::idle_exit`] with no live task and no client. The
//! socket is removed before the lock is released, so a client never connects to a supervisor
//! that is leaving without a successor being able to start.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

use crate::config::Config;
use crate::engine::Engine;
use crate::error::{CliError, Result};
use crate::lock::SupervisorLock;
use crate::paths::SessionPaths;
use crate::protocol::{ErrorKind, Request, Response};
use crate::session::fail_orphan;
use crate::snapshot;

/// How long a starting supervisor keeps trying to take the lock (a reader probing it holds it
/// for an instant; a supervisor that is exiting holds it until its socket is gone).
const LOCK_PATIENCE: Duration = Duration::from_millis(500);

/// The longest request line accepted.
const MAX_REQUEST_BYTES: u64 = 1024 * 1024;

/// Runs the supervisor of the session at `paths` until it is idle; returns at once if another
/// supervisor owns the session.
pub fn run(paths: SessionPaths) -> Result<()> {
    paths.create_dirs()?;
    let Some(mut lock) = acquire(&paths)? else {
        tracing::info!("another supervisor owns {}", paths.dir().display());
        return Ok(());
    };
    lock.write_pid(std::process::id())
        .map_err(|e| CliError::io("write", paths.lock(), e))?;
    if let Err(e) = rotate_log(&paths) {
        tracing::warn!("cannot rotate {}: {e}", paths.log().display());
    }
    let config = Config::load(&paths.config())?;
    fail_orphans(&paths)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::io("start", "the async runtime", e))?;
    let served = runtime.block_on(serve(&paths, config));
    let _ = std::fs::remove_file(paths.socket());
    runtime.shutdown_timeout(Duration::from_secs(1));
    drop(lock);
    served
}

fn acquire(paths: &SessionPaths) -> Result<Option<SupervisorLock>> {
    let deadline = std::time::Instant::now() + LOCK_PATIENCE;
    loop {
        if let Some(lock) = SupervisorLock::try_acquire(&paths.lock())? {
            return Ok(Some(lock));
        }
        if std::time::Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Past this size when a supervisor starts, `supervisor.log` is rotated.
pub const LOG_ROTATE_BYTES: u64 = 1024 * 1024;

/// Keeps the log bounded: when this supervisor's stderr is `supervisor.log` and that is past
/// [`LOG_ROTATE_BYTES`], it becomes `supervisor.log.1` (replacing the one before) and the
/// supervisor goes on in a fresh file. Only the lock holder rotates, so no two processes race.
fn rotate_log(paths: &SessionPaths) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let log = paths.log();
    let on_disk = match std::fs::metadata(&log) {
        Ok(meta) if meta.len() > LOG_ROTATE_BYTES => meta,
        _ => return Ok(()),
    };
    let stderr = rustix::fs::fstat(rustix::stdio::stderr())?;
    if (stderr.st_dev, stderr.st_ino) != (on_disk.dev(), on_disk.ino()) {
        return Ok(()); // started by hand, not logging to the file
    }
    std::fs::rename(&log, paths.previous_log())?;
    let fresh = crate::paths::private_file()
        .create(true)
        .append(true)
        .open(&log)?;
    rustix::stdio::dup2_stdout(&fresh)?;
    rustix::stdio::dup2_stderr(&fresh)?;
    Ok(())
}

/// Every task still live on disk belongs to a supervisor that died: mark it failed.
fn fail_orphans(paths: &SessionPaths) -> Result<()> {
    let listing = snapshot::list(paths)?;
    for task in listing.tasks.iter().filter(|t| !t.status.is_terminal()) {
        tracing::warn!(
            "{} was left {} by a dead supervisor",
            task.id,
            task.status.as_str()
        );
        fail_orphan(paths, &task.id)?;
    }
    Ok(())
}

async fn serve(paths: &SessionPaths, config: Config) -> Result<()> {
    let socket = paths.socket();
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket).map_err(|e| CliError::io("bind", &socket, e))?;
    let idle_exit = config.idle_exit;
    let engine = Arc::new(Engine::start(paths.clone(), config)?);
    let clients = Arc::new(AtomicUsize::new(0));
    tracing::info!(
        pid = std::process::id(),
        "supervising {}",
        paths.dir().display()
    );
    loop {
        // The cheap count decides whether to start the idle timer; the exact one whether to exit.
        let idle = engine.tracked_live_tasks() == 0 && clients.load(Ordering::SeqCst) == 0;
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    clients.fetch_add(1, Ordering::SeqCst);
                    let (engine, clients) = (Arc::clone(&engine), Arc::clone(&clients));
                    tokio::spawn(async move {
                        if let Err(e) = handle(stream, &engine).await {
                            tracing::warn!("client: {e}");
                        }
                        clients.fetch_sub(1, Ordering::SeqCst);
                        engine.wake();
                    });
                }
                Err(e) => tracing::warn!("accept: {e}"),
            },
            () = tokio::time::sleep(idle_exit), if idle => {
                if engine.live_tasks() == 0 && clients.load(Ordering::SeqCst) == 0 {
                    break;
                }
            }
            () = engine.changed() => {}
        }
    }
    tracing::info!("idle for {} ms: exiting", idle_exit.as_millis());
    engine.flush().await;
    Ok(())
}

async fn handle(stream: UnixStream, engine: &Engine) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    BufReader::new(read.take(MAX_REQUEST_BYTES))
        .read_line(&mut line)
        .await?;
    let response = match serde_json::from_str::<Request>(&line) {
        Ok(request) => dispatch(request, engine).await,
        Err(e) => Response::Error {
            kind: ErrorKind::BadRequest,
            message: format!("bad request: {e}"),
        },
    };
    let mut answer = serde_json::to_vec(&response).map_err(std::io::Error::other)?;
    answer.push(b'\n');
    write.write_all(&answer).await
}

async fn dispatch(request: Request, engine: &Engine) -> Response {
    let started = |result: Result<task_core::TaskId>| match result {
        Ok(id) => Response::Started { id: id.to_string() },
        Err(e) => Response::Error {
            kind: ErrorKind::Spawn,
            message: e.to_string(),
        },
    };
    match request {
        Request::Run(start) => started(engine.start_shell(start)),
        Request::Monitor(start) => started(engine.start_monitor(start)),
        Request::Kill { ids } => match ids
            .iter()
            .map(|id| task_core::TaskId::parse(id).map_err(|_| id.clone()))
            .collect::<Result<Vec<_>, String>>()
        {
            Ok(ids) => Response::Killed {
                outcomes: engine.kill(&ids).await,
            },
            Err(bad) => Response::Error {
                kind: ErrorKind::MalformedId,
                message: bad,
            },
        },
        Request::Ping => Response::Pong {
            pid: std::process::id(),
        },
    }
}
