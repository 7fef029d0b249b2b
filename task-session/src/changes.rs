//! Waking a reader as soon as a task's record changes, instead of after a poll period.
//!
//! The supervisor replaces a task's record by renaming a whole file onto `{id}.json` in the
//! session's tasks directory ([`crate::record`]); its final record is what makes the task's end
//! deliverable. A [`RecordChanges`] is an inotify watch on that directory (`IN_MOVED_TO` and
//! `IN_CLOSE_WRITE`, names ending in `.json`), so a reader that waits on it (`tasks
//! notifications --follow`) looks again within a wake-up of the rename rather than up to a
//! whole poll period later (100 ms by default; BENCHMARKS.md, notification latency). The poll
//! period stays the longest wait, so a change inotify misses (its queue overflowed, another
//! host wrote the directory over NFS) is still found.
//!
//! One inotify instance per waiting reader (a user may hold 128): readers are few, and one
//! that cannot have an instance waits the poll period as before.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::io::Errno;

use crate::paths::SessionPaths;

/// Bytes of inotify events read at a time (each event is 16 bytes and its name).
const EVENT_BUFFER_BYTES: usize = 8192;

/// An inotify watch on a session's tasks directory.
#[derive(Debug)]
pub struct RecordChanges {
    fd: OwnedFd,
}

impl RecordChanges {
    /// Watches the tasks directory of `paths`.
    ///
    /// # Errors
    /// The error of `inotify_init1` (too many instances) or `inotify_add_watch` (no such
    /// directory yet: a session where no task was ever started).
    pub fn watch(paths: &SessionPaths) -> std::io::Result<Self> {
        let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
        inotify::add_watch(
            &fd,
            paths.tasks_dir(),
            WatchFlags::MOVED_TO | WatchFlags::CLOSE_WRITE | WatchFlags::ONLYDIR,
        )?;
        Ok(Self { fd })
    }

    /// Waits until a record was written since the last call (returning at once if one was),
    /// or `patience` passes. Returns whether a record changed.
    ///
    /// # Errors
    /// The error of `poll` or of reading the events.
    pub fn wait(&self, patience: Duration) -> std::io::Result<bool> {
        let deadline = Instant::now() + patience;
        loop {
            if self.drain()? {
                return Ok(true);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let timeout = Timespec::try_from(left).unwrap_or(Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            });
            let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
            match rustix::event::poll(&mut fds, Some(&timeout)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Reads every queued event; whether one was about a record.
    fn drain(&self) -> std::io::Result<bool> {
        let mut buf = [MaybeUninit::<u8>::uninit(); EVENT_BUFFER_BYTES];
        let mut reader = inotify::Reader::new(self.fd.as_fd(), &mut buf);
        let mut changed = false;
        loop {
            match reader.next() {
                Ok(event) => {
                    // An overflowed queue lost events: something may have changed.
                    changed |= event.events().contains(inotify::ReadFlags::QUEUE_OVERFLOW)
                        || event
                            .file_name()
                            .is_some_and(|name| name.to_bytes().ends_with(b".json"));
                }
                Err(Errno::AGAIN) => return Ok(changed),
                Err(Errno::INTR) => {}
                Err(error) => return Err(error.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Long enough never to pass on a working watch: a wake that came only from it fails.
    const NEVER: Duration = Duration::from_secs(600);

    #[test]
    fn a_record_renamed_into_place_wakes_the_waiter_and_other_files_do_not() {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        std::fs::create_dir_all(paths.tasks_dir()).unwrap();
        let changes = RecordChanges::watch(&paths).unwrap();
        assert!(
            !changes.wait(Duration::ZERO).unwrap(),
            "nothing happened yet"
        );

        // A latch or an output file is not a record.
        std::fs::write(paths.tasks_dir().join("b12345678.1.notified"), b"").unwrap();
        assert!(!changes.wait(Duration::ZERO).unwrap());

        let temp = paths.tasks_dir().join(".b12345678.json.tmp");
        std::fs::write(&temp, b"{}").unwrap();
        changes.wait(Duration::ZERO).unwrap(); // its own write, under a temp name ending in .tmp
        std::fs::rename(&temp, paths.tasks_dir().join("b12345678.json")).unwrap();
        assert!(changes.wait(NEVER).unwrap(), "the rename woke the waiter");
        assert!(
            !changes.wait(Duration::ZERO).unwrap(),
            "each change wakes once"
        );
    }

    #[test]
    fn a_session_with_no_tasks_directory_has_no_watch() {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        assert!(RecordChanges::watch(&paths).is_err());
    }
}
