//! The client side of the supervisor socket: connect, starting the supervisor on demand.
//!
//! Starting is race-free by construction: any number of clients may each spawn a supervisor, but
//! only the one that takes `supervisor.lock` binds the socket; the others exit at once, and every
//! client keeps trying to connect (spawning again only while the lock is free) until its deadline.

use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::Config;
use crate::error::{CliError, Result};
use crate::lock;
use crate::paths::{SessionPaths, private_file};
use crate::protocol::{Request, Response};

/// How long a client waits for the supervisor's answer to one request.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// Sends `request` to the session's supervisor (starting it if needed) and returns its answer.
///
/// A connection closed before any answer (a supervisor that was exiting for idleness as the
/// client connected) is retried once on a fresh supervisor.
pub fn send(paths: &SessionPaths, config: &Config, request: &Request) -> Result<Response> {
    let mut line = serde_json::to_string(request)
        .map_err(|e| CliError::Supervisor(format!("cannot encode request: {e}")))?;
    line.push('\n'); // one write: the supervisor wakes once per request
    match exchange(connect_or_start(paths, config)?, &line, paths)? {
        Some(response) => Ok(response),
        None => exchange(connect_or_start(paths, config)?, &line, paths)?.ok_or_else(|| {
            CliError::Supervisor("the supervisor closed the connection without answering".into())
        }),
    }
}

fn exchange(mut stream: UnixStream, line: &str, paths: &SessionPaths) -> Result<Option<Response>> {
    let socket = paths.socket();
    let io_err = |e| CliError::io("talk to the supervisor at", &socket, e);
    stream
        .set_read_timeout(Some(RESPONSE_TIMEOUT))
        .map_err(io_err)?;
    match stream.write_all(line.as_bytes()) {
        Ok(()) => {}
        Err(e) if is_disconnect(e.kind()) => return Ok(None),
        Err(e) => return Err(io_err(e)),
    }
    let mut answer = String::new();
    match BufReader::new(&stream).read_line(&mut answer) {
        Ok(0) => Ok(None),
        Ok(_) => serde_json::from_str(&answer)
            .map(Some)
            .map_err(|e| CliError::Supervisor(format!("unreadable answer {answer:?}: {e}"))),
        Err(e) if is_disconnect(e.kind()) => Ok(None),
        Err(e) => Err(io_err(e)),
    }
}

fn is_disconnect(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::BrokenPipe | ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
    )
}

/// Connects to the session's supervisor, starting one if none is running.
pub fn connect_or_start(paths: &SessionPaths, config: &Config) -> Result<UnixStream> {
    paths.create_dirs()?;
    let socket = paths.socket();
    let deadline = Instant::now() + config.start_timeout;
    let mut spawned: Option<Child> = None;
    let mut backoff = Duration::from_millis(1);
    loop {
        match UnixStream::connect(&socket) {
            Ok(stream) => {
                reap(&mut spawned);
                return Ok(stream);
            }
            Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::ConnectionRefused) => {}
            Err(e) => return Err(CliError::io("connect to", &socket, e)),
        }
        if Instant::now() >= deadline {
            reap(&mut spawned);
            return Err(CliError::Supervisor(format!(
                "no supervisor answered at {} within {} ms (see {})",
                socket.display(),
                config.start_timeout.as_millis(),
                paths.log().display()
            )));
        }
        if !spawn_in_flight(&mut spawned) && !lock::is_held(&paths.lock())? {
            spawned = Some(spawn_supervisor(paths)?);
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(Duration::from_millis(20));
    }
}

/// Whether a supervisor this client spawned is still starting (not exited).
fn spawn_in_flight(spawned: &mut Option<Child>) -> bool {
    match spawned {
        Some(child) => matches!(child.try_wait(), Ok(None)),
        None => false,
    }
}

/// Makes sure a spawned supervisor never lingers as a zombie of a long-lived client (`tasks mcp`):
/// one that already exited is reaped now, a live one by a thread that waits for it.
fn reap(spawned: &mut Option<Child>) {
    if let Some(mut child) = spawned.take()
        && let Ok(None) = child.try_wait()
    {
        std::thread::spawn(move || child.wait());
    }
}

/// Starts `tasks __supervise` for this session: its own session (`setsid`, so closing the
/// terminal does not reach it), stdin from `/dev/null`, stdout and stderr appended to the log.
fn spawn_supervisor(paths: &SessionPaths) -> Result<Child> {
    let exe = std::env::current_exe().map_err(|e| CliError::io("locate", "the tasks binary", e))?;
    let log_path = paths.log();
    let log = private_file()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| CliError::io("open", &log_path, e))?;
    let log_err = log
        .try_clone()
        .map_err(|e| CliError::io("open", &log_path, e))?;
    let mut command = Command::new(exe);
    command
        .arg("__supervise")
        .arg("--root")
        .arg(paths.root())
        .arg("--session")
        .arg(paths.name())
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent.
    unsafe {
        command.pre_exec(|| rustix::process::setsid().map(drop).map_err(Into::into));
    }
    command
        .spawn()
        .map_err(|e| CliError::Supervisor(format!("cannot start the supervisor: {e}")))
}
