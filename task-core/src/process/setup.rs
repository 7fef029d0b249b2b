//! What a task's first process takes on before `exec`.

/// The attributes a task's first process (a shell, an agent CLI) takes on before `exec`, applied
/// by [`Spawn`](super::Spawn) in the child (Linux `prctl`s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChildSetup {
    /// Receive `SIGKILL` when the thread that started it exits (`PR_SET_PDEATHSIG`): the process
    /// never outlives a crashed supervisor. Spawn from a tokio worker or another long-lived
    /// thread, never from `spawn_blocking` (its threads exit when idle). If the parent is
    /// already gone when the child sets this, the spawn fails (`ESRCH`).
    pub die_with_parent: bool,
    /// Be a child subreaper (`PR_SET_CHILD_SUBREAPER`, which survives `exec`): a descendant
    /// orphaned by a double fork is re-parented to it instead of init, so it stays in the
    /// task's tree while the process lives (see [`Root::Subreaper`](super::Root::Subreaper)).
    /// Only for a process that reaps any child (a shell does), or zombies pile up under it.
    pub hold_orphans: bool,
}
