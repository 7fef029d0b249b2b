//! Killing what a dead supervisor left of a task, and nothing else.
//!
//! The numbers a supervisor recorded (in a state file another process may have written) are not
//! enough to send a signal: a pid and even a start time can be copied from any process into a
//! crafted file. So every process is checked live before it is signalled: it must belong to this
//! user, must have started no earlier than the task's shell, and must carry the task's marker
//! (the `TASKS_TASK_ID` entry the spawn put in its environment, which an unrelated process does
//! not have). Without a marker (state recorded by an older version), it must instead still be in
//! the recorded process group and session. Signals go through a pidfd opened before the final
//! check, so a pid reused between the check and the signal is never hit.

use std::io;

use rustix::process::{PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

use super::contain::{marked_processes, marker_entry};
use super::procfs::to_pid;
use super::procfs::{self, ProcStat};
use super::tree::ignore_gone;
use crate::{ProcessOwner, ShellProcess};

/// The most rounds of "find, check, kill" before giving up on a group that keeps forking.
const MAX_ROUNDS: usize = 50;

/// What identifies the processes of one task, recorded when its shell starts (see
/// [`TaskFingerprint::of_leader`]) so that, after its supervisor died, another process can kill
/// what is left of the task ([`kill_orphaned_task`]) and nothing else.
///
/// Persist every field; rebuild it with a struct literal when reading the state back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskFingerprint {
    /// The task's process group: its shell's pid.
    pub pgid: u32,
    /// When the shell started ([`start_time`](super::start_time)).
    pub leader_started: u64,
    /// The session the shell was started in (the supervisor's); `None`: not checked.
    pub session: Option<u32>,
    /// The user the task runs as.
    pub uid: u32,
    /// The task's marker, the value of `TASKS_TASK_ID` in its processes' environment (the task
    /// id); `None` for a task started without one.
    pub marker: Option<String>,
}

impl TaskFingerprint {
    /// The fingerprint of a task whose shell, `pid`, was just spawned (and not yet reaped), with
    /// the marker it was spawned with; `None` when `pid` is gone.
    pub fn of_leader(pid: u32, marker: Option<&str>) -> Option<Self> {
        let stat = procfs::read_stat(pid)?;
        Some(Self {
            pgid: pid,
            leader_started: stat.start_time,
            session: u32::try_from(stat.session).ok(),
            uid: procfs::owner(pid)?,
            marker: marker.map(str::to_owned),
        })
    }

    /// Whether the live process `pid` (with `stat`) belongs to this task.
    fn matches(&self, pid: u32, stat: &ProcStat, marker: Option<&[u8]>) -> bool {
        if stat.is_dead() || procfs::owner(pid) != Some(self.uid) {
            return false;
        }
        let when_ok = if pid == self.pgid {
            stat.start_time == self.leader_started
        } else {
            stat.start_time >= self.leader_started
        };
        let identity_ok = match marker {
            Some(entry) => procfs::environ_has(pid, entry),
            None => {
                i64::from(stat.pgrp) == i64::from(self.pgid)
                    && self
                        .session
                        .is_none_or(|session| i64::from(stat.session) == i64::from(session))
            }
        };
        when_ok && identity_ok
    }
}

/// Kills what is left of the task `fingerprint` describes after its supervisor died: every live
/// process of this user that passes the checks of the module docs (members of the group, and
/// with a marker also escapees that left it). Returns how many processes were signalled.
///
/// Nothing is signalled when `fingerprint.uid` is not this process's effective uid, nor for any
/// process that fails a check, so a crafted fingerprint naming an unrelated process group kills
/// nothing.
///
/// # Errors
/// [`io::ErrorKind::InvalidInput`] for pgid 0, or a signal that failed for a reason other than
/// the process being gone.
pub fn kill_orphaned_task(fingerprint: &TaskFingerprint) -> io::Result<usize> {
    to_pid(fingerprint.pgid)?;
    if fingerprint.uid != rustix::process::geteuid().as_raw() {
        tracing::warn!(
            ?fingerprint,
            "not killing processes recorded for another user"
        );
        return Ok(0);
    }
    let marker = fingerprint.marker.as_deref().map(marker_entry);
    let me = std::process::id();
    let mut signalled = 0;
    for _ in 0..MAX_ROUNDS {
        let mut candidates: Vec<u32> = procfs::all_pids()
            .into_iter()
            .filter(|&pid| {
                procfs::read_stat(pid)
                    .is_some_and(|stat| i64::from(stat.pgrp) == i64::from(fingerprint.pgid))
            })
            .collect();
        if let Some(entry) = &marker {
            candidates.extend(marked_processes(entry));
        }
        candidates.sort_unstable();
        candidates.dedup();
        let mut killed_now = 0;
        for pid in candidates.into_iter().filter(|&pid| pid != me) {
            if kill_if_member(fingerprint, pid, marker.as_deref())? {
                killed_now += 1;
            }
        }
        if killed_now == 0 {
            break;
        }
        signalled += killed_now;
    }
    Ok(signalled)
}

/// Opens a pidfd on `pid`, checks the process behind it belongs to the task, and SIGKILLs it
/// through the pidfd; whether it was signalled.
fn kill_if_member(
    fingerprint: &TaskFingerprint,
    pid: u32,
    marker: Option<&[u8]>,
) -> io::Result<bool> {
    let Ok(pidfd) = pidfd_open(to_pid(pid)?, PidfdFlags::empty()) else {
        return Ok(false);
    };
    // Checked after the pidfd is open: if `pid` named another process by now, its start time
    // differs from the one the pidfd's process had, or the pidfd's process is gone.
    let member = procfs::read_stat(pid).is_some_and(|stat| fingerprint.matches(pid, &stat, marker));
    if !member {
        return Ok(false);
    }
    ignore_gone(pidfd_send_signal(&pidfd, Signal::KILL))?;
    Ok(true)
}

/// Sends `SIGKILL` to what is left of the process group `pgid` that another (since dead) process
/// started, whose leader started at `leader_started`. Returns whether anything was signalled.
///
/// The weaker, marker-less form of [`kill_orphaned_task`], for state that recorded only the group:
/// each process is checked live (this user's, in the group, started no earlier than the leader,
/// the leader itself exactly when recorded), but a crafted file that copies the numbers of an
/// unrelated group of this user would pass; record a [`TaskFingerprint`] instead. With
/// `leader_started` unknown nothing is signalled.
///
/// # Errors
/// As [`kill_orphaned_task`].
pub fn kill_orphaned_group(pgid: u32, leader_started: Option<u64>) -> io::Result<bool> {
    let Some(leader_started) = leader_started else {
        to_pid(pgid)?;
        return Ok(false);
    };
    let fingerprint = TaskFingerprint {
        pgid,
        leader_started,
        session: None,
        uid: rustix::process::geteuid().as_raw(),
        marker: None,
    };
    Ok(kill_orphaned_task(&fingerprint)? > 0)
}

impl ShellProcess {
    /// What a task's state records of its first process `pid`, just spawned (and not yet
    /// reaped) with `marker` (the task id) in its environment: its group, its start time, and
    /// its session and user (present only when they could be read, and then meaning that the
    /// task's processes carry the marker).
    pub fn of_leader(pid: u32, marker: &str) -> Self {
        let print = TaskFingerprint::of_leader(pid, Some(marker));
        ShellProcess {
            pgid: pid,
            leader_started: print.as_ref().map(|p| p.leader_started),
            owner: print.and_then(|p| {
                Some(ProcessOwner {
                    session: p.session?,
                    uid: p.uid,
                })
            }),
        }
    }

    /// Kills what is left of the processes of task `marker` recorded as `self`, after the
    /// supervisor that started them died: with [`owner`](Self::owner) recorded, every process
    /// that passes the checks of [`kill_orphaned_task`] (the group's members and the escapees
    /// carrying the marker); without, the weaker [`kill_orphaned_group`]. Returns whether
    /// anything was signalled.
    ///
    /// # Errors
    /// As [`kill_orphaned_task`].
    pub fn kill_orphaned(&self, marker: &str) -> io::Result<bool> {
        match (self.leader_started, self.owner) {
            (Some(leader_started), Some(owner)) => {
                let fingerprint = TaskFingerprint {
                    pgid: self.pgid,
                    leader_started,
                    session: Some(owner.session),
                    uid: owner.uid,
                    marker: Some(marker.to_owned()),
                };
                Ok(kill_orphaned_task(&fingerprint)? > 0)
            }
            _ => kill_orphaned_group(self.pgid, self.leader_started),
        }
    }
}
