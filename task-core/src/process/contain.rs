//! Containment: every process a task starts can be found again, even one that left the task's
//! process group and session (`setsid`) or was orphaned by a double fork.
//!
//! Three mechanisms work together:
//!
//! - **A task's shell is a child subreaper** (set between `fork` and `exec` by
//!   [`ChildSetup`](super::ChildSetup); the attribute survives `exec`). A descendant orphaned by
//!   a double fork is re-parented to the shell, not to init, so while the shell lives every
//!   escapee stays in its tree and the tree walk of [`kill_tree`](super::kill_tree) reaches it.
//!   An agent CLI is not made one (it would collect zombies it never reaps): its escapees are
//!   found by their marker ([`Root::Plain`](super::Root::Plain)).
//! - **Every process of a task carries a marker**, the environment entry
//!   `TASKS_TASK_ID={task id}` set at spawn (and inherited by everything it starts). A kill
//!   also looks for processes of this user carrying the task's marker, so an escapee found
//!   outside the tree (its shell already exited) is killed too. A process that clears its
//!   environment (`env -i`) and leaves the tree is out of reach of this part.
//! - **The supervising process is a subreaper too** ([`become_subreaper`]), so what a killed
//!   shell leaves behind is re-parented to the supervisor, which reaps exactly the processes it
//!   killed (by pid and start time): no zombie is left, whether or not init reaps.
//!
//! Cgroups v2 would contain even processes that clear their environment, but they need a
//! delegated, writable cgroup v2 hierarchy, which neither this machine (a hybrid v1/v2 layout
//! under `/sys/fs/cgroup`, root cgroup not delegated) nor an unprivileged user session
//! generally offers; the mechanisms above need no privilege.

use std::collections::HashMap;
use std::io;
use std::time::{Duration, Instant};

use rustix::process::{Pid, WaitOptions};

use super::procfs::{self, ProcStat};
use crate::TASK_MARKER_ENV;

/// How long a kill waits for the processes it signalled to die and be reaped.
const REAP_PATIENCE: Duration = Duration::from_secs(5);

/// Makes the calling process a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): orphans among
/// its descendants are re-parented to it instead of to init.
///
/// A process that supervises tasks calls this once at start, so that the killed remains of a
/// task's tree come back to it and [`kill_tree`](super::kill_tree) reaps them. It then also
/// inherits the orphans of tasks that ended on their own (daemons a command started); reap those
/// with [`reap_adopted_orphans`].
///
/// # Errors
/// The `prctl` error (none is expected on Linux ≥ 3.4); `Unsupported` on other systems.
pub fn become_subreaper() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// Reaps the zombies among this process's children that it did not start itself: descendants of
/// tasks re-parented to it (see [`become_subreaper`]) that have since exited. Returns how many
/// were reaped.
///
/// A child this process started directly (a task's shell, which a `tokio::process::Child` or
/// `std::process::Child` will reap) is in this process's session and either leads its own
/// process group (every task shell does) or shares this process's group; neither is touched.
/// Adopted orphans are in a task's process group or in a session of their own.
pub fn reap_adopted_orphans() -> usize {
    let me = std::process::id();
    let Some(mine) = procfs::read_stat(me) else {
        return 0;
    };
    // The children it adopted only (not a scan of every process: this runs every sweep).
    procfs::adopted_children()
        .into_iter()
        .map(|child| child.as_raw_nonzero().get().unsigned_abs())
        // A live task's first process is not adopted: no look at its `/proc` entry.
        .filter(|&pid| !super::child::is_spawned_here(pid))
        .filter(|&pid| {
            procfs::read_stat(pid).is_some_and(|stat| {
                stat.is_dead() && parent_is(&stat, me) && !started_here(pid, &stat, &mine)
            })
        })
        .filter(|&pid| reap(pid))
        .count()
}

/// Whether `stat` (of `pid`, a child of this process) looks like a child this process spawned.
pub(crate) fn started_here(pid: u32, stat: &ProcStat, mine: &ProcStat) -> bool {
    let leads_group = i64::from(stat.pgrp) == i64::from(pid);
    stat.session == mine.session && (leads_group || stat.pgrp == mine.pgrp)
}

/// The `KEY=value` environment entry that marks the processes of task `marker`.
pub(crate) fn marker_entry(marker: &str) -> Vec<u8> {
    format!("{TASK_MARKER_ENV}={marker}").into_bytes()
}

/// The live processes of this user whose environment carries `entry`.
pub(crate) fn marked_processes(entry: &[u8]) -> Vec<u32> {
    let me = rustix::process::geteuid().as_raw();
    procfs::all_pids()
        .into_iter()
        .filter(|&pid| {
            procfs::owner(pid) == Some(me)
                && procfs::read_stat(pid).is_some_and(|s| !s.is_dead())
                && procfs::environ_has(pid, entry)
        })
        .collect()
}

/// The processes a kill signalled, by pid, with the start time each had (so a reused pid is never
/// mistaken for one of them).
#[derive(Debug)]
pub(crate) struct Victims {
    /// The signalled tree's root: reaped by its own `Child`, never here, but a parent whose
    /// children are about to be re-parented.
    root: u32,
    started: HashMap<u32, u64>,
}

impl Victims {
    /// No victims yet, in the tree of `root`.
    pub(crate) fn new(root: u32) -> Self {
        Self {
            root,
            started: HashMap::new(),
        }
    }

    /// How many processes were recorded.
    pub(crate) fn len(&self) -> usize {
        self.started.len()
    }

    /// Records `pid` as signalled, if it still exists.
    pub(crate) fn add(&mut self, pid: u32) {
        if pid == self.root {
            return;
        }
        if let Some(stat) = procfs::read_stat(pid) {
            self.started.insert(pid, stat.start_time);
        }
    }

    /// Waits (at most [`REAP_PATIENCE`]) until every victim is gone, reaping those that became
    /// zombie children of this process. A zombie whose parent is some other live process is that
    /// process's to reap; one whose parent is itself a dying victim is waited for, since it is
    /// about to be re-parented (to this process when it is a subreaper).
    pub(crate) fn reap(mut self) {
        let me = std::process::id();
        let deadline = Instant::now() + REAP_PATIENCE;
        loop {
            let mut dying: Vec<u32> = self.started.keys().copied().collect();
            dying.push(self.root);
            self.started
                .retain(|&pid, &mut started| match procfs::read_stat(pid) {
                    Some(stat) if stat.start_time == started => {
                        if stat.is_dead() && parent_is(&stat, me) {
                            !reap(pid)
                        } else {
                            !stat.is_dead() || dying.iter().any(|&v| parent_is(&stat, v))
                        }
                    }
                    _ => false,
                });
            if self.started.is_empty() || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if !self.started.is_empty() {
            tracing::warn!(left = ?self.started.keys(), "killed processes still not gone");
        }
    }
}

fn parent_is(stat: &ProcStat, pid: u32) -> bool {
    i64::from(stat.ppid) == i64::from(pid)
}

/// Reaps the zombie child `pid`; whether it was reaped.
fn reap(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    matches!(
        rustix::process::waitpid(Some(pid), WaitOptions::NOHANG),
        Ok(Some(_))
    )
}
