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
use std::io;

use rustix::io::Errno;
use rustix::process::{Pid, Signal, kill_process, kill_process_group};

use super::child::is_spawned_here;
use super::contain::{Victims, marked_processes, marker_entry};
use super::procfs::{adopted_children, children_of, environ_has, read_stat, to_pid};

/// The most walks made while waiting for the tree to hold still before killing anyway.
const MAX_FREEZE_ROUNDS: usize = 200;

/// What the root of a task's tree is, which tells [`kill_tree`] where the task's orphans went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Root {
    /// A child subreaper (a task's shell, spawned with [`ChildSetup::hold_orphans`]): while it
    /// lives, every descendant orphaned by a double fork is re-parented to it, so the tree walk
    /// finds every escapee and the scan for the marker is needed only once it has exited.
    ///
    /// [`ChildSetup::hold_orphans`]: super::ChildSetup::hold_orphans
    Subreaper,
    /// An ordinary process (an agent CLI): an orphaned descendant goes to the nearest subreaper
    /// or init, out of the tree, so the processes carrying the marker are always looked for.
    Plain,
}

/// Sends `SIGKILL` to the process group led by `root`, to every descendant of `root` (including
/// those that moved to another group or session), and, given the task's `marker` (see
/// [`TASK_MARKER_ENV`](crate::TASK_MARKER_ENV)), to every process of this user carrying it that
/// left the tree, such as a double-forked escapee: looked for when `root` is [`Root::Plain`],
/// or when it has already exited (while a [`Root::Subreaper`] lives, the tree walk finds them
/// without scanning every process). In a subreaper ([`become_subreaper`](super::become_subreaper),
/// as a supervisor is) only the children it adopted are looked at for the marker, since
/// whatever left a tree below it was re-parented to it (the walk then takes their subtrees),
/// not every live task's first process; elsewhere every
/// process of this user is. Then reaps the signalled processes that come back to this
/// process as zombies (all of them when it is a subreaper, see
/// [`become_subreaper`](super::become_subreaper)), waiting a few seconds at most.
///
/// `root` should be a child of this process that has not been reaped yet (a zombie is fine):
/// its pid then cannot be reused while this runs. A root already reaped is still looked for by
/// its group (which keeps its number while any member lives) and its marker. Returns how many
/// processes were signalled besides `root`. The caller still reaps `root` itself.
///
/// # Errors
/// [`io::ErrorKind::InvalidInput`] for pid 0, or the error of a signal that failed for a reason
/// other than the process being gone (for example `EPERM`).
pub fn kill_tree(root: u32, marker: Option<&str>, kind: Root) -> io::Result<usize> {
    let root_pid = to_pid(root)?;
    ignore_gone(kill_process_group(root_pid, Signal::STOP))?;
    let mut roots = vec![root_pid];
    // While a subreaper root lives, the tree walk finds every escapee; once it has exited, or
    // when it never held its orphans, they went elsewhere and only the marker finds them.
    let root_exited = read_stat(root).is_none_or(|stat| stat.is_dead());
    if let Some(marker) = marker.filter(|_| root_exited || kind == Root::Plain) {
        let me = std::process::id();
        let marked = marked_escapees(&marker_entry(marker));
        roots.extend(
            marked
                .into_iter()
                .filter(|&pid| pid != me)
                .filter_map(|pid| to_pid(pid).ok()),
        );
    }
    let tree = freeze(&roots)?;
    let mut victims = Victims::new(root);
    for &pid in &tree {
        victims.add(pid.as_raw_nonzero().get().unsigned_abs());
    }
    ignore_gone(kill_process_group(root_pid, Signal::KILL))?;
    let mut first_error = None;
    for &pid in &tree {
        if let Err(error) = ignore_gone(kill_process(pid, Signal::KILL)) {
            tracing::warn!(pid = pid.as_raw_nonzero().get(), %error, "could not kill descendant");
            first_error.get_or_insert(error);
        }
    }
    let signalled = victims.len();
    victims.reap();
    match first_error {
        Some(error) => Err(error),
        None => Ok(signalled),
    }
}

/// The live processes of this user carrying `entry` that can have left a task's tree. In a
/// subreaper, the children it adopted: a process orphaned anywhere below it was re-parented to
/// it (to its main thread, [`adopted_children`]), so a look costs those, not every process of
/// the machine (seconds with thousands of them) nor every live task's first process (a
/// supervisor's own children, one a live task: reading them all made each kill cost the
/// square of the live tasks). Elsewhere an orphan went to init or to another subreaper: every
/// process is looked at.
fn marked_escapees(entry: &[u8]) -> Vec<u32> {
    if !is_subreaper() {
        return marked_processes(entry);
    }
    adopted_children()
        .into_iter()
        .map(|pid| pid.as_raw_nonzero().get().unsigned_abs())
        .filter(|&pid| {
            !is_spawned_here(pid)
                && read_stat(pid).is_some_and(|stat| !stat.is_dead())
                && environ_has(pid, entry)
        })
        .collect()
}

/// Whether this process is a child subreaper.
fn is_subreaper() -> bool {
    #[cfg(target_os = "linux")]
    {
        rustix::process::child_subreaper().is_ok_and(|reaper| reaper.is_some())
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

/// [`kill_tree`] of `child` (pid `pid`, tagged with `marker`, the task id) on the blocking pool,
/// then reaps `child` and returns how it ended.
///
/// The tree walk reads `/proc` and signals, bounded by the size of the tree; on the blocking
/// pool a large tree cannot stall the runtime. `child` is not polled meanwhile, so its pid
/// cannot be reused before the walk is done: hold the `Child` (do not let another task wait on
/// it) until this returns.
///
/// # Errors
/// The error of reaping `child`; a tree kill that is incomplete is logged, not returned (the
/// child is reaped either way).
pub async fn kill_and_reap(
    child: &mut super::Child,
    pid: u32,
    marker: Option<&str>,
    kind: Root,
) -> io::Result<std::process::ExitStatus> {
    let marker = marker.map(str::to_owned);
    match tokio::task::spawn_blocking(move || kill_tree(pid, marker.as_deref(), kind)).await {
        Ok(Ok(count)) => tracing::debug!(pid, count, "killed process tree"),
        Ok(Err(error)) => tracing::warn!(pid, %error, "process tree kill incomplete"),
        Err(error) => tracing::warn!(pid, %error, "process tree kill did not run"),
    }
    child.wait().await.inspect_err(|error| {
        tracing::warn!(pid, %error, "could not reap killed child");
    })
}

/// When the process `pid` started, in clock ticks after boot (`/proc/<pid>/stat`); `None` when
/// there is no such process. With the pid, it names one process even across pid reuse.
pub fn start_time(pid: u32) -> Option<u64> {
    read_stat(pid).map(|stat| stat.start_time)
}

/// Stops every process in the trees of `roots`, returning them (roots included) once the trees
/// hold still.
fn freeze(roots: &[Pid]) -> io::Result<Vec<Pid>> {
    let mut found: Vec<Pid> = Vec::new();
    let mut seen: HashSet<Pid> = HashSet::new();
    for _ in 0..MAX_FREEZE_ROUNDS {
        let before = found.len();
        let mut queue = roots.to_vec();
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

fn is_stopped_or_gone(pid: Pid) -> bool {
    let raw = pid.as_raw_nonzero().get().unsigned_abs();
    read_stat(raw).is_none_or(|stat| matches!(stat.state, 'T' | 't' | 'Z' | 'X'))
}

/// `ESRCH` means the target is already gone: that is what a kill wants.
pub(crate) fn ignore_gone(result: Result<(), Errno>) -> io::Result<()> {
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
            kill_tree(0, None, Root::Plain).map_err(|e| e.kind()).err(),
            Some(io::ErrorKind::InvalidInput)
        );
    }
}
