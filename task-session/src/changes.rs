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
//! The same instance watches `events/pending/` (`IN_MOVED_TO`: an event is published, or given
//! back by a reader that died, by a rename into it), so an event that ends no task (a stall
//! warning, a monitor's line) wakes the reader too ([`Changed::events`]).
//!
//! One inotify instance per waiting reader (a user may hold 128): readers are few, and one
//! that cannot have an instance waits the poll period as before. A reader inside a tokio
//! runtime (`tasks mcp`'s deliverer) waits with [`AsyncRecordChanges::wait`], without a thread
//! of its own.

use std::collections::HashSet;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::io::Errno;
use task_core::TaskId;

use crate::paths::SessionPaths;

/// Bytes of inotify events read at a time (each event is 16 bytes and its name).
const EVENT_BUFFER_BYTES: usize = 8192;

/// An inotify watch on a session's tasks directory and its pending events.
#[derive(Debug)]
pub struct RecordChanges {
    fd: OwnedFd,
    /// The watch descriptor of `events/pending/`, when it could be watched.
    events: Option<i32>,
}

impl RecordChanges {
    /// Watches the tasks directory of `paths`, and its `events/pending/` where there is one
    /// (a session made by an older supervisor may have none: its events are then found by the
    /// poll).
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
        let events = inotify::add_watch(
            &fd,
            paths.pending_events(),
            WatchFlags::MOVED_TO | WatchFlags::ONLYDIR,
        )
        .ok();
        Ok(Self { fd, events })
    }

    /// Waits until a record was written since the last call (returning at once if one was),
    /// or `patience` passes. Returns what changed.
    ///
    /// # Errors
    /// The error of `poll` or of reading the events.
    pub fn wait(&self, patience: Duration) -> std::io::Result<Changed> {
        let deadline = Instant::now() + patience;
        let mut changed = Changed::default();
        loop {
            drain(self.fd.as_fd(), self.events, &mut changed)?;
            let left = deadline.saturating_duration_since(Instant::now());
            if changed.any() || left.is_zero() {
                return Ok(changed);
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

    /// The same watch, waited on inside a tokio runtime (call it there).
    ///
    /// # Errors
    /// The error of registering the watch with the runtime.
    pub fn into_async(self) -> std::io::Result<AsyncRecordChanges> {
        // SAFETY: the `OwnedFd` names the same open inotify instance until it is dropped, which
        // the `AsyncFd` owning it does last.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(self.fd, tokio::io::Interest::READABLE)
        };
        let fd = fd.map_err(|error| error.into_parts().1)?;
        Ok(AsyncRecordChanges {
            fd,
            events: self.events,
        })
    }
}

/// A [`RecordChanges`] waited on inside a tokio runtime, without a thread of its own.
#[derive(Debug)]
pub struct AsyncRecordChanges {
    fd: tokio::io::unix::AsyncFd<OwnedFd>,
    /// The watch descriptor of `events/pending/`, when it could be watched.
    events: Option<i32>,
}

impl AsyncRecordChanges {
    /// Waits until a record was written since the last call (returning at once if one was),
    /// or `patience` passes: [`RecordChanges::wait`] without blocking a thread. Returns what
    /// changed.
    ///
    /// # Errors
    /// The error of waiting on the watch or of reading the events.
    pub async fn wait(&self, patience: Duration) -> std::io::Result<Changed> {
        let deadline = tokio::time::Instant::now() + patience;
        let mut changed = Changed::default();
        loop {
            drain(self.fd.get_ref().as_fd(), self.events, &mut changed)?;
            if changed.any() {
                return Ok(changed);
            }
            match tokio::time::timeout_at(deadline, self.fd.readable()).await {
                Err(_) => return Ok(changed), // patience ran out
                Ok(ready) => ready?.clear_ready(),
            }
        }
    }
}

/// Reads every event queued on the inotify instance `fd` into `changed`; `events` is the watch
/// of `events/pending/`.
fn drain(fd: BorrowedFd<'_>, events: Option<i32>, changed: &mut Changed) -> std::io::Result<()> {
    let mut buf = [MaybeUninit::<u8>::uninit(); EVENT_BUFFER_BYTES];
    let mut reader = inotify::Reader::new(fd, &mut buf);
    // A burst names a thousand records: each is kept once, without a look through the list.
    let mut seen: HashSet<TaskId> = changed.records.iter().copied().collect();
    loop {
        match reader.next() {
            Ok(event) => {
                // An overflowed queue lost events: anything may have changed.
                if event.events().contains(inotify::ReadFlags::QUEUE_OVERFLOW) {
                    changed.lost = true;
                }
                if events == Some(event.wd()) {
                    changed.events |= event.file_name().is_some();
                    continue;
                }
                let record = event
                    .file_name()
                    .and_then(|name| name.to_str().ok())
                    .and_then(|name| name.strip_suffix(".json"))
                    .and_then(|id| id.parse::<TaskId>().ok());
                if let Some(id) = record
                    && seen.insert(id)
                {
                    changed.records.push(id);
                }
            }
            Err(Errno::AGAIN) => return Ok(()),
            Err(Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
}

/// What a [`RecordChanges::wait`] saw.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changed {
    /// The tasks whose record was written, in the order first seen.
    pub records: Vec<TaskId>,
    /// An event was put into `events/pending/` (published, or given back).
    pub events: bool,
    /// Events were lost (the kernel's queue overflowed): look at every record.
    pub lost: bool,
}

impl Changed {
    /// Whether anything changed.
    pub fn any(&self) -> bool {
        self.lost || self.events || !self.records.is_empty()
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
        let nothing = Changed::default();
        assert_eq!(changes.wait(Duration::ZERO).unwrap(), nothing);

        // A latch, an output file or a temp file is not a record.
        let id = TaskId::generate(task_core::TaskType::LocalBash).unwrap();
        std::fs::write(paths.tasks_dir().join(format!("{id}.1.notified")), b"").unwrap();
        let temp = paths.tasks_dir().join(format!(".{id}.json.tmp"));
        std::fs::write(&temp, b"{}").unwrap();
        assert_eq!(changes.wait(Duration::ZERO).unwrap(), nothing);

        std::fs::rename(&temp, paths.snapshot(&id)).unwrap();
        let changed = changes.wait(NEVER).unwrap();
        assert_eq!(changed.records, [id], "the rename woke the waiter");
        assert_eq!(
            changes.wait(Duration::ZERO).unwrap(),
            nothing,
            "each change wakes once"
        );
    }

    #[test]
    fn an_event_renamed_into_pending_wakes_the_waiter_without_naming_a_record() {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        paths.create_dirs().unwrap();
        let changes = RecordChanges::watch(&paths).unwrap();
        // Written aside (as the supervisor stages one), then renamed in.
        let staged = paths.dir().join("events").join(".1-event.json");
        std::fs::write(&staged, b"{}").unwrap();
        assert_eq!(changes.wait(Duration::ZERO).unwrap(), Changed::default());
        std::fs::rename(&staged, paths.pending_events().join("1-event.json")).unwrap();
        let changed = changes.wait(NEVER).unwrap();
        assert!(changed.events, "{changed:?}");
        assert!(changed.records.is_empty(), "{changed:?}");
        // Claimed by a reader (renamed out): no wake.
        std::fs::rename(
            paths.pending_events().join("1-event.json"),
            paths.leased_events().join("1-event.json"),
        )
        .unwrap();
        assert_eq!(changes.wait(Duration::ZERO).unwrap(), Changed::default());
    }

    #[tokio::test]
    async fn the_async_wait_wakes_on_a_record_and_waits_out_its_patience_otherwise() {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        std::fs::create_dir_all(paths.tasks_dir()).unwrap();
        let changes = RecordChanges::watch(&paths).unwrap().into_async().unwrap();
        assert_eq!(
            changes.wait(Duration::from_millis(1)).await.unwrap(),
            Changed::default()
        );
        let id = TaskId::generate(task_core::TaskType::LocalBash).unwrap();
        let temp = paths.tasks_dir().join(format!(".{id}.json.tmp"));
        std::fs::write(&temp, b"{}").unwrap();
        let (target, renamed) = (paths.snapshot(&id), temp.clone());
        let writer = tokio::task::spawn_blocking(move || std::fs::rename(renamed, target));
        let changed = changes.wait(NEVER).await.unwrap();
        writer.await.unwrap().unwrap();
        assert_eq!(changed.records, [id], "the rename woke the waiter");
    }

    #[test]
    fn a_session_with_no_tasks_directory_has_no_watch() {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        assert!(RecordChanges::watch(&paths).is_err());
    }
}
