//! What a task's first process does between `fork` and `exec`.

use std::io;

/// The attributes a task's first process (a shell, an agent CLI) takes on between `fork` and
/// `exec`, applied by the hook [`hook`](Self::hook) returns. Nothing is done off Linux.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChildSetup {
    /// Receive `SIGKILL` when the thread that forked it exits (`PR_SET_PDEATHSIG`): the process
    /// never outlives a crashed supervisor. Spawn from a tokio worker or another long-lived
    /// thread, never from `spawn_blocking` (its threads exit when idle).
    pub die_with_parent: bool,
    /// Be a child subreaper (`PR_SET_CHILD_SUBREAPER`, which survives `exec`): a descendant
    /// orphaned by a double fork is re-parented to it instead of init, so it stays in the
    /// task's tree while the process lives (see [`Root::Subreaper`](super::Root::Subreaper)).
    /// Only for a process that reaps any child (a shell does), or zombies pile up under it.
    pub hold_orphans: bool,
}

impl ChildSetup {
    /// The closure to hand to `pre_exec` (`std::os::unix::process::CommandExt::pre_exec` or
    /// `tokio::process::Command::pre_exec`).
    ///
    /// It is async-signal-safe, as `pre_exec` requires: it makes only raw system calls through
    /// rustix (`prctl`, `getpid`, `getppid`), which neither allocate nor take locks, and builds
    /// its errors from raw errnos, which does not allocate either. The parent's pid is read
    /// here, before the fork.
    pub fn hook(self) -> impl FnMut() -> io::Result<()> + Send + Sync + 'static {
        #[cfg(target_os = "linux")]
        {
            use rustix::process::set_parent_process_death_signal;
            use rustix::process::{Signal, getpid, getppid, set_child_subreaper};
            let parent = getpid();
            move || {
                if self.hold_orphans {
                    set_child_subreaper(Some(getpid()))?;
                }
                if self.die_with_parent {
                    set_parent_process_death_signal(Some(Signal::KILL))?;
                    // The parent may have died between fork and prctl: then no signal would come.
                    if getppid() != Some(parent) {
                        return Err(rustix::io::Errno::SRCH.into());
                    }
                }
                Ok(())
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            || Ok(())
        }
    }
}
