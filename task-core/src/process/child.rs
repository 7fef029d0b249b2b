//! The handle of a process started by [`Spawn`](super::Spawn): its pid, its pipes, and a wait
//! on its pidfd that reaps exactly this process.

use std::collections::HashSet;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Mutex, PoisonError};

use rustix::process::{Pid, WaitOptions};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// This process's end of a child's stdin pipe.
pub type ChildStdin = tokio::net::unix::pipe::Sender;
/// This process's end of a child's stdout pipe.
pub type ChildStdout = tokio::net::unix::pipe::Receiver;
/// This process's end of a child's stderr pipe.
pub type ChildStderr = tokio::net::unix::pipe::Receiver;

/// This process's ends of the child's pipes, handed to the [`Child`].
#[derive(Debug, Default)]
pub(crate) struct Ours {
    pub(crate) stdin: Option<OwnedFd>,
    pub(crate) stdout: Option<OwnedFd>,
    pub(crate) stderr: Option<OwnedFd>,
}

/// A started process, until it is reaped.
///
/// [`wait`](Self::wait) waits on the process's pidfd (readable once it has exited) and then
/// reaps it by its pid, which cannot name another process before that. Dropped before its
/// process was reaped, the handle leaves a tokio task that reaps it when it exits (as
/// `tokio::process::Child` does without `kill_on_drop`), so no zombie is left behind.
#[derive(Debug)]
pub struct Child {
    pid: u32,
    pidfd: Option<AsyncFd<OwnedFd>>,
    status: Option<ExitStatus>,
    /// The write end of its stdin, when spawned with [`Stdio::Piped`](super::Stdio::Piped).
    pub stdin: Option<ChildStdin>,
    /// The read end of its stdout, when piped.
    pub stdout: Option<ChildStdout>,
    /// The read end of its stderr, when piped.
    pub stderr: Option<ChildStderr>,
}

/// The pids of the processes [`Spawn`](super::Spawn) started in this process and no [`Child`]
/// has reaped yet. A pid here names that process (a pid is not reused before its process is
/// reaped, and only its `Child` reaps it), so a look for the processes this process *adopted*
/// skips them without reading their `/proc` entries: such a look costs the adopted processes,
/// not every live task ([`is_spawned_here`]).
static SPAWNED: Mutex<Option<HashSet<u32>>> = Mutex::new(None);

/// Notes `pid` as spawned here, until [`Child`] reaps it.
fn note_spawned(pid: u32) {
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    spawned.get_or_insert_with(HashSet::new).insert(pid);
}

/// Forgets `pid` (reaped).
fn forget_spawned(pid: u32) {
    let mut spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(set) = spawned.as_mut() {
        set.remove(&pid);
    }
}

/// Whether `pid` is a process [`Spawn`](super::Spawn) started in this process and not reaped
/// yet (so certainly not one this process adopted).
pub(crate) fn is_spawned_here(pid: u32) -> bool {
    let spawned = SPAWNED.lock().unwrap_or_else(PoisonError::into_inner);
    spawned.as_ref().is_some_and(|set| set.contains(&pid))
}

impl Child {
    /// The handle of the child `pid` whose pidfd is `pidfd`, with this process's pipe ends.
    pub(crate) fn new(pid: u32, pidfd: OwnedFd, ours: Ours) -> io::Result<Self> {
        note_spawned(pid);
        let mut child = Self {
            pid,
            pidfd: None,
            status: None,
            stdin: None,
            stdout: None,
            stderr: None,
        };
        // Filled one by one: on an error the child is dropped, and so reaped.
        // SAFETY: an `OwnedFd` names the same open descriptor until it is dropped, which the
        // `AsyncFd` owning it does last.
        let pidfd = unsafe { AsyncFd::register_with_interest(pidfd, Interest::READABLE) };
        child.pidfd = Some(pidfd.map_err(|error| error.into_parts().1)?);
        child.stdin = ours.stdin.map(ChildStdin::from_owned_fd).transpose()?;
        child.stdout = ours.stdout.map(ChildStdout::from_owned_fd).transpose()?;
        child.stderr = ours.stderr.map(ChildStderr::from_owned_fd).transpose()?;
        Ok(child)
    }

    /// The process's id (also its process group's when spawned with
    /// [`Group::Lead`](super::Group::Lead)). It names this process until it is reaped.
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// Waits for the process to exit and reaps it; later calls return the same status. Closes
    /// this side of its stdin first, as `tokio::process::Child::wait` does. Cancel-safe: a
    /// `wait` dropped before it finished loses nothing.
    ///
    /// # Errors
    /// The error of the wait (`ECHILD` if something else reaped the process).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            let Some(pidfd) = &self.pidfd else {
                return Err(io::Error::from(io::ErrorKind::NotFound));
            };
            let mut ready = pidfd.readable().await?;
            match reap(self.pid)? {
                Some(status) => self.reaped(status),
                None => ready.clear_ready(),
            }
        }
    }

    /// The process's exit status if it has exited (reaping it), `None` while it runs.
    ///
    /// # Errors
    /// The error of `waitpid`.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none()
            && let Some(status) = reap(self.pid)?
        {
            self.reaped(status);
        }
        Ok(self.status)
    }

    /// Reaps a child that is known to be exiting (one that failed before its `exec`), blocking.
    pub(crate) fn reap_blocking(&mut self) {
        let pid = i32::try_from(self.pid).ok().and_then(Pid::from_raw);
        if let Ok(Some((_, status))) = rustix::process::waitpid(pid, WaitOptions::empty()) {
            self.reaped(raw_status(status));
        }
    }

    /// Notes that the process was reaped with `status`: its pid may name another process now.
    fn reaped(&mut self, status: ExitStatus) {
        self.status = Some(status);
        self.pidfd = None;
        forget_spawned(self.pid);
    }
}

/// Reaps `pid` if it has exited.
fn reap(pid: u32) -> io::Result<Option<ExitStatus>> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let reaped = rustix::process::waitpid(Some(pid), WaitOptions::NOHANG).inspect_err(|errno| {
        if *errno == rustix::io::Errno::CHILD {
            // Reaped by someone else: the pid may name another process now.
            forget_spawned(pid.as_raw_nonzero().get().unsigned_abs());
        }
    })?;
    Ok(reaped.map(|(_, status)| raw_status(status)))
}

/// The standard library's form of a wait status.
fn raw_status(status: rustix::process::WaitStatus) -> ExitStatus {
    ExitStatus::from_raw(i32::from_ne_bytes(status.as_raw().to_ne_bytes()))
}

impl Drop for Child {
    fn drop(&mut self) {
        if self.status.is_some() || matches!(self.try_wait(), Ok(Some(_))) {
            return;
        }
        let Some(pidfd) = self.pidfd.take() else {
            forget_spawned(self.pid);
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            forget_spawned(self.pid); // left as a zombie: looked at like any other child
            tracing::debug!(
                pid = self.pid,
                "child dropped outside a runtime: not reaped"
            );
            return;
        };
        let pid = self.pid;
        runtime.spawn(async move {
            let mut orphan = Self {
                pid,
                pidfd: Some(pidfd),
                status: None,
                stdin: None,
                stdout: None,
                stderr: None,
            };
            if let Err(error) = orphan.wait().await {
                forget_spawned(pid);
                tracing::debug!(pid, %error, "could not reap a dropped child");
            }
            // Reaped, or gone: its own drop must not hand it on again.
            orphan.pidfd = None;
        });
    }
}
