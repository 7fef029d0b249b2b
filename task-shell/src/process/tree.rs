//! Killing a whole process tree: the process group and every descendant that left it.
//!
//! A descendant may leave the group (`setsid`, `setpgid`), so killing the group alone lets it
//! survive. Walking the tree and then killing is racy in the other direction: a process found
//! early may fork before it dies, and once a parent dies its children are re-parented and can no
//! longer be found. So the walk first *freezes* what it finds: every process is sent `SIGSTOP`
//! before its children are read, and walks repeat until one finds nothing new and every process
//! found has stopped. A stopped parent can neither fork nor reap, so the pids collected stay valid
//! (at worst zombies) until the final `SIGKILL`. `ESRCH` (already gone) counts as success.

use std::collections::HashSet;
use std::fs;
use std::io;
use std::sync::LazyLock;

use rustix::io::Errno;
use rustix::process::{Pid, Signal, kill_process, kill_process_group};

/// The most walks made while waiting for the tree to hold still before killing anyway.
const MAX_FREEZE_ROUNDS: usize = 200;

/// Whether this kernel exposes `/proc/<pid>/task/<tid>/children` (CONFIG_PROC_CHILDREN).
static HAS_CHILDREN_FILES: LazyLock<bool> = LazyLock::new(|| {
    let me = std::process::id();
    fs::metadata(format!("/proc/{me}/task/{me}/children")).is_ok()
});

/// Sends `SIGKILL` to the process group led by `root` and to every descendant of `root`,
/// including those that moved to another group or session.
///
/// `root` must be a child of this process that has not been reaped yet (a zombie is fine): its
/// pid then cannot be reused while this runs. Returns how many processes were signalled. The
/// caller still reaps `root` itself; the other descendants are reaped by their own parents or,
/// once those die, by init.
///
/// # Errors
/// [`io::ErrorKind::InvalidInput`] for pid 0, or the error of a signal that failed for a reason
/// other than the process being gone (for example `EPERM`).
pub fn kill_tree(root: u32) -> io::Result<usize> {
    let root = to_pid(root)?;
    ignore_gone(kill_process_group(root, Signal::STOP))?;
    let tree = freeze_descendants(root)?;
    ignore_gone(kill_process_group(root, Signal::KILL))?;
    let mut first_error = None;
    for &pid in &tree {
        if let Err(error) = ignore_gone(kill_process(pid, Signal::KILL)) {
            tracing::warn!(pid = pid.as_raw_nonzero().get(), %error, "could not kill descendant");
            first_error.get_or_insert(error);
        }
    }
    match first_error {
        Some(error) => Err(error),
        None => Ok(tree.len()),
    }
}

/// Sends `SIGKILL` to the process group `pgid` that another process (one that has since died)
/// started, unless the number `pgid` has been reused: its leader was started at `leader_started`
/// (see [`start_time`]). Returns whether the group was signalled.
///
/// The kernel never hands out a pid that is still some process's group id, so while anything of
/// the old group is alive the number names it. Once every member is gone the number can be
/// reused, by a process that may make itself a group leader; this is told apart by its start
/// time. With no process `pgid` alive, only members of the old group can remain (the leader
/// died first), so they are killed; with `leader_started` unknown, a live `pgid` is left alone.
///
/// # Errors
/// [`io::ErrorKind::InvalidInput`] for pid 0, or the error of a signal that failed for a reason
/// other than the group being gone (for example `EPERM`).
pub fn kill_orphaned_group(pgid: u32, leader_started: Option<u64>) -> io::Result<bool> {
    let group = to_pid(pgid)?;
    match (start_time(pgid), leader_started) {
        (Some(now), Some(then)) if now == then => {}
        (None, _) => {}
        (Some(_), _) => return Ok(false),
    }
    ignore_gone(kill_process_group(group, Signal::KILL))?;
    Ok(true)
}

/// When the process `pid` started, in clock ticks after boot (`/proc/<pid>/stat`); `None` when
/// there is no such process. With the pid, it names one process even across pid reuse.
pub fn start_time(pid: u32) -> Option<u64> {
    stat_after_name(pid)?
        .split_ascii_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// Stops `root` and all its descendants, returning them (root included) once the tree holds still.
fn freeze_descendants(root: Pid) -> io::Result<Vec<Pid>> {
    let mut found: Vec<Pid> = Vec::new();
    let mut seen: HashSet<Pid> = HashSet::new();
    for _ in 0..MAX_FREEZE_ROUNDS {
        let before = found.len();
        let mut queue = vec![root];
        while let Some(pid) = queue.pop() {
            if seen.insert(pid) {
                ignore_gone(kill_process(pid, Signal::STOP))?;
                found.push(pid);
            }
            queue.extend(children_of(pid));
        }
        if found.len() == before && found.iter().all(|&pid| is_stopped_or_gone(pid)) {
            break;
        }
        std::thread::yield_now();
    }
    Ok(found)
}

/// The direct children of `pid` (empty when it is gone).
fn children_of(pid: Pid) -> Vec<Pid> {
    if *HAS_CHILDREN_FILES {
        children_from_task_files(pid)
    } else {
        children_from_stat_scan(pid)
    }
}

/// Reads `/proc/<pid>/task/*/children`: cheap, proportional to the tree.
fn children_from_task_files(pid: Pid) -> Vec<Pid> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{}/task", pid.as_raw_nonzero())) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| parse_pids(&text))
        .collect()
}

/// Scans every `/proc/<n>/stat` for a matching parent pid: the fallback for kernels without
/// children files.
fn children_from_stat_scan(parent: Pid) -> Vec<Pid> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|n| {
            let stat = read_stat(n)?;
            (stat.ppid == parent.as_raw_nonzero().get())
                .then(|| to_pid(n).ok())
                .flatten()
        })
        .collect()
}

fn parse_pids(text: &str) -> Vec<Pid> {
    text.split_ascii_whitespace()
        .filter_map(|word| word.parse::<u32>().ok())
        .filter_map(|n| to_pid(n).ok())
        .collect()
}

/// The fields of `/proc/<pid>/stat` this module needs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProcStat {
    /// The one-letter state (`R`, `S`, `T`, `Z`, ...).
    pub(crate) state: char,
    /// The parent pid.
    pub(crate) ppid: i32,
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub(crate) fn read_stat(pid: u32) -> Option<ProcStat> {
    let rest = stat_after_name(pid)?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some(ProcStat { state, ppid })
}

/// `/proc/<pid>/stat` from the state (field 3) on: the command name before it is in parentheses
/// and may itself contain spaces and parentheses.
fn stat_after_name(pid: u32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let start = text.rfind(')')? + 1;
    Some(text[start..].to_owned())
}

fn is_stopped_or_gone(pid: Pid) -> bool {
    let raw = pid.as_raw_nonzero().get().unsigned_abs();
    read_stat(raw).is_none_or(|stat| matches!(stat.state, 'T' | 't' | 'Z' | 'X'))
}

fn to_pid(raw: u32) -> io::Result<Pid> {
    i32::try_from(raw)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("invalid pid {raw}")))
}

/// `ESRCH` means the target is already gone: that is what a kill wants.
fn ignore_gone(result: Result<(), Errno>) -> io::Result<()> {
    match result {
        Err(Errno::SRCH) | Ok(()) => Ok(()),
        Err(errno) => Err(errno.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_zero_is_rejected() {
        assert_eq!(
            kill_tree(0).map_err(|e| e.kind()).err(),
            Some(io::ErrorKind::InvalidInput)
        );
    }

    #[test]
    fn stat_of_self_parses() {
        let stat = read_stat(std::process::id());
        assert!(
            matches!(
                stat,
                Some(ProcStat {
                    state: 'R' | 'S',
                    ..
                })
            ),
            "{stat:?}"
        );
        assert_eq!(
            stat.map(|s| s.ppid),
            Some(std::os::unix::process::parent_id() as i32)
        );
    }

    #[test]
    fn pid_lists_parse() {
        let pids: Vec<i32> = parse_pids("12 34 \n")
            .iter()
            .map(|p| p.as_raw_nonzero().get())
            .collect();
        assert_eq!(pids, [12, 34]);
        assert!(parse_pids("").is_empty());
    }
}
