//! Agents in their own git worktree (`tasks agent --worktree`, the `Agent` tool's
//! `isolation: "worktree"`): task-worktree's [`Worktrees`] makes and removes them; what needs
//! the registry or the runtime is here.

use task_core::{Registry, TaskId};
use task_worktree::Worktrees;

/// The agent or teammate `id` stopped with no notification for the model (killed, never
/// started, or a teammate however it ended): its worktree, if it has one and it holds no
/// changes, is removed with its branch and forgotten by its state. Blocking.
pub fn settle_worktree(registry: &Registry, worktrees: &Worktrees, id: &TaskId) {
    let Some(state) = registry.get(id) else {
        return;
    };
    let Some(worktree) = state.kind.worktree() else {
        return;
    };
    if !worktrees.remove_unchanged(worktree) {
        return;
    }
    let _ = registry.update(id, |current| {
        let mut next = current.clone();
        next.kind.set_worktree(None).then_some(next)
    });
}

/// Runs blocking git work from async code: in place on a multi-threaded runtime (the other
/// workers go on), directly elsewhere.
pub fn blocking<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}
