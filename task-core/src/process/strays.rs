//! The processes a task left running when it ended (its *strays*): daemons it started with
//! `setsid` or a double fork, which outlive its shell. They carry the task's marker
//! ([`TASK_MARKER_ENV`](crate::TASK_MARKER_ENV)), so they are found by it when the task ends
//! ([`strays_of`], in the supervising process; [`strays_of_any`] anywhere), described from `/proc` while they live ([`Stray::usage`]), and killed on
//! request only while they are still the process that was found ([`Stray::kill`]: same start
//! time, still carrying the marker, checked through a pidfd so a reused pid is never hit).

use std::io;
use std::time::Duration;

use rustix::process::{PidfdFlags, Signal, pidfd_open, pidfd_send_signal};
use serde::{Deserialize, Serialize};

use std::collections::{HashMap, HashSet};

use super::child::is_spawned_here;
use super::contain::{marker_entry, started_here};
use super::procfs;
use super::procfs::{children_of, to_pid};
use super::tree::ignore_gone;

/// The longest command line kept for a stray, in bytes.
pub const STRAY_COMMAND_BYTES: usize = 200;

/// Clock ticks a second in `/proc`'s times (`USER_HZ`: 100 on every Linux architecture the
/// kernel exports to user space).
const TICKS_PER_SECOND: u64 = 100;

/// A process a task left running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stray {
    /// Its pid.
    pub pid: u32,
    /// When it started, in clock ticks after boot (with the pid, it names one process).
    pub started: u64,
    /// Its command line (at most [`STRAY_COMMAND_BYTES`]).
    pub command: String,
}

/// What a live stray uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StrayUsage {
    /// How long it has run.
    pub age: Duration,
    /// The CPU time it spent (user and system).
    pub cpu: Duration,
    /// Its resident memory, in bytes.
    pub rss_bytes: u64,
}

/// The live processes carrying the marker of each task of `markers` among those this process
/// adopted, in pid order, by marker (a task that left none has no entry). Call it in the process
/// that supervised the tasks, a subreaper ([`become_subreaper`](super::become_subreaper)), once
/// each task's first process is reaped: whatever a task left running was re-parented to it when
/// its parent died (or descends from such a process), so only those processes are looked at,
/// not every process of the machine: a look costs the supervisor's children and the adopted
/// ones, however many processes the machine runs. A look reads `/proc` for the adopted
/// processes and for the children [`Spawn`](super::Spawn) did not start, not for every live
/// task's first process; one look serves every task of `markers` (a burst of ends costs one
/// look, each adopted process's environment read once).
pub fn strays_of(markers: &[&str]) -> HashMap<String, Vec<Stray>> {
    if markers.is_empty() {
        return HashMap::new();
    }
    strays_among(adopted(), markers)
}

/// The live processes among `pids` carrying the marker of a task of `markers`, in pid order, by
/// marker.
fn strays_among(pids: Vec<u32>, markers: &[&str]) -> HashMap<String, Vec<Stray>> {
    let wanted: HashSet<&[u8]> = markers.iter().map(|marker| marker.as_bytes()).collect();
    let prefix = marker_entry("");
    let mut found: HashMap<String, Vec<Stray>> = HashMap::new();
    for pid in pids {
        let Some(environ) = procfs::environ(pid) else {
            continue;
        };
        // Each marker it carries (a process may carry more than one entry of the variable).
        let mut carried: Vec<&[u8]> = environ
            .split(|&b| b == 0)
            .filter_map(|item| item.strip_prefix(prefix.as_slice()))
            .filter(|marker| wanted.contains(marker))
            .collect();
        carried.sort_unstable();
        carried.dedup();
        if carried.is_empty() {
            continue;
        }
        let Some(stray) = describe(pid) else {
            continue;
        };
        for marker in carried {
            found
                .entry(String::from_utf8_lossy(marker).into_owned())
                .or_default()
                .push(stray.clone());
        }
    }
    for strays in found.values_mut() {
        strays.sort_by_key(|stray| stray.pid);
    }
    found
}

/// The descendants of this process that it did not start itself (a live task's first process
/// leads a group of its own in this process's session, as does an end hook), with their whole
/// subtrees.
fn adopted() -> Vec<u32> {
    let me = std::process::id();
    let Some(mine) = procfs::read_stat(me) else {
        return Vec::new();
    };
    let raw = |pid: rustix::process::Pid| pid.as_raw_nonzero().get().unsigned_abs();
    let mut queue: Vec<_> = procfs::adopted_children()
        .into_iter()
        .filter(|&pid| {
            // A task's first process is known without a look at `/proc` (the bulk of the
            // children: one per live task); only the others are looked at.
            !is_spawned_here(raw(pid))
                && procfs::read_stat(raw(pid))
                    .is_some_and(|stat| !started_here(raw(pid), &stat, &mine))
        })
        .collect();
    let mut seen = HashSet::new();
    let mut found = Vec::new();
    while let Some(pid) = queue.pop() {
        if seen.insert(pid) {
            found.push(raw(pid));
            queue.extend(children_of(pid));
        }
    }
    found
}

/// The live processes of this user carrying the marker of any task for which `wanted` is true,
/// other than this process, each with its marker, in pid order: one look at `/proc` for many
/// tasks.
pub fn strays_of_any(wanted: impl Fn(&str) -> bool) -> Vec<(String, Stray)> {
    let me = std::process::id();
    let uid = rustix::process::geteuid().as_raw();
    procfs::all_pids()
        .into_iter()
        .filter(|&pid| pid != me && procfs::owner(pid) == Some(uid))
        .filter_map(|pid| {
            let marker = procfs::environ_value(pid, crate::TASK_MARKER_ENV)?;
            if !wanted(&marker) {
                return None;
            }
            let stray = describe(pid)?;
            Some((marker, stray))
        })
        .collect()
}

/// `pid` as a stray, if it lives.
fn describe(pid: u32) -> Option<Stray> {
    let stat = procfs::read_stat(pid).filter(|stat| !stat.is_dead())?;
    Some(Stray {
        pid,
        started: stat.start_time,
        command: procfs::command_line(pid, STRAY_COMMAND_BYTES)?,
    })
}

/// Kills every live process of this user carrying the marker of a task of `markers` (found
/// again and again until none is left, so a child forked by one just before it was killed is
/// killed too); returns those killed, by marker. One look a round serves every task.
pub fn kill_strays_of(markers: &[&str]) -> HashMap<String, Vec<Stray>> {
    /// The most rounds of "find, kill" before giving up on processes that keep forking.
    const MAX_ROUNDS: usize = 50;
    let mut killed: HashMap<String, Vec<Stray>> = HashMap::new();
    for _ in 0..MAX_ROUNDS {
        let mut more = false;
        for (marker, found) in strays_of(markers) {
            let killed = killed.entry(marker.clone()).or_default();
            for stray in found {
                match stray.kill(&marker) {
                    // Signalled in an earlier round and not dead yet (its command line may
                    // have changed since: an `exec`).
                    Ok(true) if killed.iter().any(|k| k.is_same_process(&stray)) => {}
                    Ok(true) => {
                        killed.push(stray);
                        more = true;
                    }
                    Ok(false) => {}
                    Err(error) => tracing::warn!(pid = stray.pid, %error, "cannot kill a stray"),
                }
            }
        }
        if !more {
            break;
        }
    }
    killed.retain(|_, killed| !killed.is_empty());
    killed
}

impl Stray {
    /// Whether `other` names the same process (pid and start time).
    fn is_same_process(&self, other: &Stray) -> bool {
        self.pid == other.pid && self.started == other.started
    }

    /// Whether it still runs (the same process: same pid and start time, not a zombie).
    pub fn is_alive(&self) -> bool {
        procfs::read_stat(self.pid)
            .is_some_and(|stat| stat.start_time == self.started && !stat.is_dead())
    }

    /// What it uses now; `None` once it is gone (or its pid names another process).
    pub fn usage(&self) -> Option<StrayUsage> {
        let stat = procfs::read_stat(self.pid)?;
        if stat.start_time != self.started || stat.is_dead() {
            return None;
        }
        let ticks = |t: u64| Duration::from_millis(t.saturating_mul(1000) / TICKS_PER_SECOND);
        let uptime = procfs::uptime().map_or(Duration::ZERO, Duration::from_secs_f64);
        Some(StrayUsage {
            age: uptime.saturating_sub(ticks(stat.start_time)),
            cpu: ticks(stat.cpu_ticks),
            rss_bytes: procfs::rss_bytes(self.pid).unwrap_or(0),
        })
    }

    /// Sends it `SIGKILL` if it is still the process found for task `marker`: this user's,
    /// started when recorded, carrying the marker (checked after a pidfd on it is open, and
    /// signalled through that pidfd). Returns whether it was signalled; a stray already gone
    /// is not.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for pid 0, or a signal that failed for a reason other
    /// than the process being gone.
    pub fn kill(&self, marker: &str) -> io::Result<bool> {
        let Ok(pidfd) = pidfd_open(to_pid(self.pid)?, PidfdFlags::empty()) else {
            return Ok(false);
        };
        let me = rustix::process::geteuid().as_raw();
        let same = self.is_alive()
            && procfs::owner(self.pid) == Some(me)
            && procfs::environ_has(self.pid, &marker_entry(marker));
        if !same {
            return Ok(false);
        }
        ignore_gone(pidfd_send_signal(&pidfd, Signal::KILL))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    #[test]
    fn a_marked_process_is_found_described_and_killed_once() {
        let marker = format!("strays-test-{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(crate::TASK_MARKER_ENV, &marker)
            .spawn()
            .expect("sleep starts");
        // `spawn` returns once the child's exec has released this process's memory (vfork),
        // which is before the new program's environment is in place: wait for it, bounded.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !procfs::environ_has(child.id(), &marker_entry(&marker)) {
            assert!(
                std::time::Instant::now() < deadline,
                "no environment in time"
            );
            std::thread::yield_now();
        }
        let found = strays_among(
            vec![child.id(), std::process::id()],
            &[marker.as_str(), "another-task"],
        );
        assert_eq!(found.len(), 1, "only the marker carried: {found:?}");
        let found = &found[&marker];
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(strays_of_any(|m| m == marker).len(), 1);
        let stray = &found[0];
        assert_eq!(stray.pid, child.id());
        assert_eq!(stray.command, "sleep 30");
        let usage = stray.usage().expect("it runs");
        assert!(usage.rss_bytes > 0, "{usage:?}");
        // Another start time is another process: never killed.
        let other = Stray {
            started: stray.started + 1,
            ..stray.clone()
        };
        assert!(!other.kill(&marker).expect("no error"));
        assert!(!stray.kill("another-task").expect("no error"));
        assert!(stray.kill(&marker).expect("killed"));
        child.wait().expect("reaped");
        assert!(!stray.is_alive());
        assert!(stray.usage().is_none());
        assert!(!stray.kill(&marker).expect("no error"));
    }
}
