//! Wakes the size watchdog as soon as the output file is written to (Linux inotify `IN_MODIFY`),
//! with the configured poll as a fallback (and the only source where inotify is unavailable).
//!
//! A poll every few seconds lets a fast writer run far past the cap (`yes` writes gigabytes a
//! second to tmpfs); a check on every wake-up after a write bounds the overshoot by what the
//! command writes between its first write past the cap and the `SIGSTOP` of its group, a
//! scheduling delay rather than a poll period.

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use tokio::io::unix::AsyncFd;
use tokio::time::Interval;

/// Size of the buffer inotify events are drained into (their content is not needed).
const DRAIN_BYTES: usize = 4096;

/// A future source that resolves when the output may have grown.
#[derive(Debug)]
pub(crate) struct Growth {
    inotify: Option<AsyncFd<OwnedFd>>,
    poll: Interval,
}

impl Growth {
    /// Watches `path` for writes; `poll` fires regardless.
    pub(crate) fn new(path: &Path, poll: Interval) -> Self {
        let inotify = watch(path)
            .inspect_err(|error| {
                tracing::debug!(path = %path.display(), %error, "no inotify: polling only");
            })
            .ok();
        Self { inotify, poll }
    }

    /// Waits until the file was written to or the poll period elapsed.
    pub(crate) async fn next(&mut self) {
        let Some(inotify) = &self.inotify else {
            self.poll.tick().await;
            return;
        };
        tokio::select! {
            ready = inotify.readable() => {
                if let Ok(mut guard) = ready {
                    drain(guard.get_inner().as_fd());
                    guard.clear_ready();
                }
            }
            _ = self.poll.tick() => {}
        }
    }
}

impl Drop for Growth {
    /// Closes the inotify instance on the blocking pool: closing one waits for the kernel's
    /// notification teardown (`synchronize_srcu`, about 10 ms here), which on a runtime worker
    /// stalled every other task and request of the supervisor each time a task ended.
    fn drop(&mut self) {
        let Some(registered) = self.inotify.take() else {
            return;
        };
        let fd = registered.into_inner();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(move || drop(fd))),
            Err(_) => drop(fd),
        }
    }
}

fn watch(path: &Path) -> std::io::Result<AsyncFd<OwnedFd>> {
    let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
    inotify::add_watch(&fd, path, WatchFlags::MODIFY)?;
    // SAFETY: `fd` is an open descriptor owned by the `AsyncFd` from here on (an `OwnedFd`
    // cannot be closed or replaced behind its back), so it stays the same open file description
    // for the whole life of the `AsyncFd`.
    let registered = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) };
    Ok(registered?)
}

/// Reads every queued event so the descriptor is not readable again until the next write.
fn drain(fd: std::os::fd::BorrowedFd<'_>) {
    let mut buf = [0u8; DRAIN_BYTES];
    while matches!(rustix::io::read(fd, &mut buf), Ok(n) if n > 0) {}
}
