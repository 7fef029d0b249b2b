//! Change notification: a directory watch (debounced) plus a fallback poll while incomplete
//! tasks exist, so callers stop polling (SPEC §12 "Watching").

use std::collections::BTreeMap;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher as _};
use serde::{Deserialize, Serialize};

use std::sync::Arc;

use crate::backend::Backend;
use crate::backend::ChangeFeed;
use crate::error::{Error, Result};
use crate::id::TaskId;
use crate::record::{Task, TaskStatus};
use crate::store::TaskList;

/// What changed between two looks at a list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Tasks that appeared.
    pub created: Vec<TaskId>,
    /// Tasks whose record changed.
    pub updated: Vec<TaskId>,
    /// Tasks that disappeared.
    pub deleted: Vec<TaskId>,
}

impl Change {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.updated.is_empty() && self.deleted.is_empty()
    }

    fn between(before: &BTreeMap<TaskId, Task>, after: &BTreeMap<TaskId, Task>) -> Self {
        let mut change = Self::default();
        for (id, task) in after {
            match before.get(id) {
                None => change.created.push(*id),
                Some(old) if old != task => change.updated.push(*id),
                Some(_) => {}
            }
        }
        change.deleted = before
            .keys()
            .filter(|id| !after.contains_key(id))
            .copied()
            .collect();
        change
    }
}

/// Watches one list. Blocking; from async code, call [`ListWatcher::next_change`] through
/// `spawn_blocking`.
#[derive(Debug)]
pub struct ListWatcher {
    list: TaskList,
    source: Source,
    current: BTreeMap<TaskId, Task>,
}

/// Where change events come from.
#[derive(Debug)]
enum Source {
    /// A directory watch.
    Files {
        events: Receiver<()>,
        // Kept alive for as long as the watcher is: dropping it stops the watch.
        _watcher: notify::RecommendedWatcher,
    },
    /// A database's change feed (`LISTEN` on PostgreSQL).
    Database(Box<dyn ChangeFeed>),
}

impl Source {
    /// Waits up to `wait` (forever with `None`) for an event: `Some(true)` one came,
    /// `Some(false)` timed out, `None` the source is gone.
    fn wait(&mut self, wait: Option<Duration>) -> Result<Option<bool>> {
        match self {
            Self::Files { events, .. } => Ok(match wait {
                Some(wait) => match events.recv_timeout(wait) {
                    Ok(()) => Some(true),
                    Err(RecvTimeoutError::Timeout) => Some(false),
                    Err(RecvTimeoutError::Disconnected) => None,
                },
                None => events.recv().ok().map(|()| true),
            }),
            Self::Database(feed) => feed.wait(wait).map(Some),
        }
    }

    /// Waits for `quiet` without an event, at most `cap` in all.
    fn debounce(&mut self, quiet: Duration, cap: Duration) {
        match self {
            Self::Files { events, .. } => {
                let end = Instant::now() + cap;
                while Instant::now() < end && events.recv_timeout(quiet).is_ok() {}
            }
            Self::Database(feed) => feed.drain(quiet, cap),
        }
    }
}

impl TaskList {
    /// Starts watching the list. The first [`ListWatcher::next_change`] reports changes made
    /// after this call.
    pub fn watch(&self) -> Result<ListWatcher> {
        let source = match &self.backend {
            Backend::Files => self.watch_dir()?,
            Backend::Database(store) => Source::Database(Arc::clone(store).watch()?),
        };
        Ok(ListWatcher {
            list: self.clone(),
            source,
            current: self.snapshot()?.tasks,
        })
    }

    fn watch_dir(&self) -> Result<Source> {
        let (tx, events) = mpsc::channel();
        let watch_error = |source| Error::Watch {
            path: self.dir().to_path_buf(),
            source,
        };
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                let touches_a_task = event.map_or(true, |e| {
                    e.paths.iter().any(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .and_then(TaskId::from_file_name)
                            .is_some()
                    })
                });
                if touches_a_task {
                    let _ = tx.send(());
                }
            })
            .map_err(watch_error)?;
        watcher
            .watch(self.dir(), RecursiveMode::NonRecursive)
            .map_err(watch_error)?;
        Ok(Source::Files {
            events,
            _watcher: watcher,
        })
    }
}

impl ListWatcher {
    /// The tasks as last seen.
    pub fn tasks(&self) -> &BTreeMap<TaskId, Task> {
        &self.current
    }

    /// Waits for the next change (at most `timeout`, or forever with `None`): after a
    /// filesystem event, waits for [`crate::WatchConfig::debounce`] of quiet, re-reads and
    /// reports the difference; while incomplete tasks exist it also re-reads every
    /// [`crate::WatchConfig::poll_every`]. `Ok(None)` on timeout.
    pub fn next_change(&mut self, timeout: Option<Duration>) -> Result<Option<Change>> {
        let config = self.list.config.watch.clone();
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            let incomplete = self
                .current
                .values()
                .any(|t| t.status != TaskStatus::Completed);
            let poll = incomplete.then_some(config.poll_every);
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            let wait = match (poll, left) {
                (Some(p), Some(l)) => Some(p.min(l)),
                (p, l) => p.or(l),
            };
            let Some(got_event) = self.source.wait(wait)? else {
                return Ok(None);
            };
            if got_event {
                // Quiet for `debounce`, but a steady stream of events cannot starve the caller.
                self.source.debounce(config.debounce, config.debounce * 20);
            }
            let latest = self.list.snapshot()?.tasks;
            let change = Change::between(&self.current, &latest);
            self.current = latest;
            if !change.is_empty() {
                return Ok(Some(change));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }
}
