//! Wakes the size watchdog as soon as the output file is written to (Linux inotify `IN_MODIFY`),
//! with the configured poll where inotify is unavailable (or its reader failed).
//!
//! A watched task is woken by its writes alone: a quiet one costs nothing until its stall
//! watchdog is due (`ShellRun`'s loop), where a poll every 5 s cost each live task a wake, a
//! `stat` and a timer re-armed, which at 10 000 live tasks was 2 000 wakes a second and most
//! of the supervisor's CPU while they ran (BENCHMARKS.md).
//!
//! A poll every few seconds lets a fast writer run far past the cap (`yes` writes gigabytes a
//! second to tmpfs); a check on every wake-up after a write bounds the overshoot by what the
//! command writes between its first write past the cap and the `SIGSTOP` of its group, a
//! scheduling delay rather than a poll period.
//!
//! Every task of an executor shares one inotify instance ([`Watches`]), each with a watch of
//! its own. An instance per task ran out: Linux allows a user 128 instances
//! (`fs.inotify.max_user_instances`), so the 129th live task fell back to the poll alone and,
//! worse, every other program of the user (editors, file watchers, `tail -f`) could no longer
//! create one while the tasks ran. Closing an instance also waits for the kernel's notification
//! teardown (`synchronize_srcu`, about 10 ms), which a watch's removal does not.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;
use tokio::io::unix::AsyncFd;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Interval;

/// Size of the buffer inotify events are read into (only their watch descriptors are used).
const EVENT_BUFFER_BYTES: usize = 4096;

/// The inotify instance an executor's tasks share, opened when the first task needs it (from
/// the runtime that supervises the tasks) and closed with the executor: the close's wait in
/// the kernel (about 10 ms) then falls once on whichever thread drops it last, not on every
/// task's end.
#[derive(Debug, Default)]
pub(crate) struct Watches {
    instance: Mutex<Option<Arc<Instance>>>,
}

impl Watches {
    /// The shared instance, opened now if it is not open yet (again after a failed try, or
    /// once its reader has ended: its runtime shut down, or reading failed).
    fn instance(&self) -> std::io::Result<Arc<Instance>> {
        let mut instance = self.instance.lock().unwrap_or_else(PoisonError::into_inner);
        match &*instance {
            Some(open) if open.is_reading() => Ok(Arc::clone(open)),
            _ => {
                let open = Arc::new(Instance::open()?);
                *instance = Some(Arc::clone(&open));
                Ok(open)
            }
        }
    }
}

/// One inotify instance: its descriptor, who is woken for each watch, and the task that reads
/// its events.
#[derive(Debug)]
struct Instance {
    fd: Arc<OwnedFd>,
    woken: Arc<Woken>,
    /// Whether its reader still reads its events; cleared before it wakes every task for the
    /// last time, so a task woken then sees that it must poll.
    reading: Arc<AtomicBool>,
    reader: AbortHandle,
}

/// Who is woken for each watch descriptor: the tasks whose output it watches (one, unless two
/// watches name one file, which inotify reports under one descriptor).
type Woken = Mutex<HashMap<i32, Vec<Arc<Wake>>>>;

/// How one task is woken by its watch, and whether the kernel still has that watch.
#[derive(Debug, Default)]
struct Wake {
    notify: Notify,
    /// Set when the kernel removed the watch (`IN_IGNORED`: its file is gone), before the
    /// task's last wake by it; the task then polls.
    gone: AtomicBool,
}

impl Instance {
    fn open() -> std::io::Result<Self> {
        let fd = Arc::new(inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?);
        let woken = Arc::new(Woken::default());
        // SAFETY: `fd` is an open descriptor, shared only through `Arc<OwnedFd>` (which cannot
        // be closed or replaced while a clone lives), so it stays the same open file
        // description for the whole life of the `AsyncFd`.
        let events = unsafe {
            AsyncFd::register_with_interest(Arc::clone(&fd), tokio::io::Interest::READABLE)
        }?;
        let reading = Arc::new(AtomicBool::new(true));
        let read = read_events(events, Arc::clone(&woken));
        let (woken_at_end, reading_until_end) = (Arc::clone(&woken), Arc::clone(&reading));
        let reader = tokio::spawn(async move {
            read.await;
            reading_until_end.store(false, Ordering::SeqCst);
            wake_all(&woken_at_end);
        })
        .abort_handle();
        Ok(Self {
            fd,
            woken,
            reading,
            reader,
        })
    }

    fn is_reading(&self) -> bool {
        self.reading.load(Ordering::SeqCst) && !self.reader.is_finished()
    }

    /// Watches `path` for writes, waking its task on each.
    fn watch(self: &Arc<Self>, path: &Path) -> std::io::Result<Watch> {
        let wd = inotify::add_watch(&*self.fd, path, WatchFlags::MODIFY)?;
        let wake = Arc::new(Wake::default());
        lock(&self.woken)
            .entry(wd)
            .or_default()
            .push(Arc::clone(&wake));
        Ok(Watch {
            instance: Arc::clone(self),
            wd,
            wake,
        })
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// One task's watch on its output file; removed when dropped.
#[derive(Debug)]
struct Watch {
    instance: Arc<Instance>,
    wd: i32,
    wake: Arc<Wake>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut woken = lock(&self.instance.woken);
        let Entry::Occupied(mut entry) = woken.entry(self.wd) else {
            return;
        };
        entry.get_mut().retain(|w| !Arc::ptr_eq(w, &self.wake));
        if entry.get().is_empty() {
            entry.remove();
            // Fails harmlessly if the kernel removed it already (its file was deleted).
            let _ = inotify::remove_watch(&*self.instance.fd, self.wd);
        }
    }
}

/// Reads the instance's events for as long as it is open, waking the task of each watch that
/// saw a write (every task when the kernel's event queue overflowed). Ends if the descriptor
/// fails; every task then polls.
async fn read_events(events: AsyncFd<Arc<OwnedFd>>, woken: Arc<Woken>) {
    let mut buf = [MaybeUninit::<u8>::uninit(); EVENT_BUFFER_BYTES];
    loop {
        let Ok(mut ready) = events.readable().await else {
            return;
        };
        let mut reader = inotify::Reader::new(ready.get_inner().as_fd(), &mut buf);
        loop {
            match reader.next() {
                Ok(event) if event.events().contains(ReadFlags::QUEUE_OVERFLOW) => {
                    wake_all(&woken);
                }
                Ok(event) if event.events().contains(ReadFlags::IGNORED) => {
                    for wake in lock(&woken).remove(&event.wd()).into_iter().flatten() {
                        wake.gone.store(true, Ordering::SeqCst);
                        wake.notify.notify_one();
                    }
                }
                Ok(event) => {
                    if let Some(tasks) = lock(&woken).get(&event.wd()) {
                        tasks.iter().for_each(|w| w.notify.notify_one());
                    }
                }
                Err(Errno::AGAIN) => {
                    ready.clear_ready();
                    break;
                }
                Err(Errno::INTR) => {}
                Err(error) => {
                    tracing::warn!(%error, "cannot read inotify events: output growth is polled");
                    return;
                }
            }
        }
    }
}

/// Wakes every watched task.
fn wake_all(woken: &Woken) {
    lock(woken)
        .values()
        .flatten()
        .for_each(|w| w.notify.notify_one());
}

fn lock(woken: &Woken) -> std::sync::MutexGuard<'_, HashMap<i32, Vec<Arc<Wake>>>> {
    woken.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A future source that resolves when the output may have grown.
#[derive(Debug)]
pub(crate) struct Growth {
    watch: Option<Watch>,
    /// Polled only while there is no watch.
    poll: Interval,
}

impl Growth {
    /// Watches `path` for writes through `watches`' shared instance; `poll` is the source where
    /// there is none.
    pub(crate) fn new(watches: &Watches, path: &Path, poll: Interval) -> Self {
        let watch = watches
            .instance()
            .and_then(|instance| instance.watch(path))
            .inspect_err(|error| {
                tracing::debug!(path = %path.display(), %error, "no inotify: polling only");
            })
            .ok();
        Self { watch, poll }
    }

    /// Whether writes wake it (else it polls).
    pub(crate) fn is_watched(&self) -> bool {
        self.watch.as_ref().is_some_and(|watch| {
            !watch.wake.gone.load(Ordering::SeqCst) && watch.instance.is_reading()
        })
    }

    /// Waits until the file was written to (watched) or the poll period elapsed (not).
    pub(crate) async fn next(&mut self) {
        if !self.is_watched() {
            self.watch = None;
        }
        match &self.watch {
            Some(watch) => watch.wake.notify.notified().await,
            None => {
                self.poll.tick().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    fn hour() -> Interval {
        let hour = Duration::from_secs(3600);
        tokio::time::interval_at(tokio::time::Instant::now() + hour, hour)
    }

    #[tokio::test]
    async fn growths_share_one_instance_and_each_wakes_on_a_write_to_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let watches = Watches::default();
        let paths: Vec<_> = (0..200)
            .map(|i| dir.path().join(format!("{i}.output")))
            .collect();
        let mut growths: Vec<_> = paths
            .iter()
            .map(|path| {
                std::fs::File::create(path).unwrap();
                Growth::new(&watches, path, hour())
            })
            .collect();
        let shared = watches.instance().unwrap();
        assert!(
            growths.iter().all(|g| g
                .watch
                .as_ref()
                .is_some_and(|w| Arc::ptr_eq(&w.instance, &shared))),
            "every task is watched, all through one instance"
        );
        assert_eq!(
            lock(&shared.woken).len(),
            200,
            "a watch of its own for each file"
        );
        for i in [0, 137, 199] {
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&paths[i])
                .unwrap();
            file.write_all(b"grown\n").unwrap();
            tokio::time::timeout(Duration::from_secs(30), growths[i].next())
                .await
                .unwrap_or_else(|_| panic!("the write to {i}.output woke nobody"));
        }
        drop(growths);
        assert!(
            lock(&shared.woken).is_empty(),
            "every watch is removed with its task"
        );
    }

    #[tokio::test]
    async fn a_growth_whose_watch_is_gone_still_wakes_on_its_poll() {
        let dir = tempfile::tempdir().unwrap();
        let watches = Watches::default();
        let path = dir.path().join("gone.output");
        std::fs::File::create(&path).unwrap();
        let poll = tokio::time::interval(Duration::from_millis(10));
        let mut growth = Growth::new(&watches, &path, poll);
        std::fs::remove_file(&path).unwrap();
        for _ in 0..3 {
            tokio::time::timeout(Duration::from_secs(30), growth.next())
                .await
                .unwrap();
        }
    }
}
