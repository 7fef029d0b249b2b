//! The worktrees of a session (`{session}/worktrees`) against its task records: which worktree
//! records a task holds, and the settling of the others when a supervisor starts (a supervisor
//! killed between `git worktree add` and its task's first record leaves one no task holds).

use std::collections::HashSet;
use std::path::PathBuf;

use task_session::paths::SessionPaths;
use task_session::record::Listing;
use task_worktree::{Intent, Worktrees};

/// Which worktree records the session's tasks hold.
#[derive(Debug)]
pub(crate) struct Holders {
    /// The worktree paths readable task records name.
    named: HashSet<String>,
    /// The ids of the readable task records.
    readable: HashSet<String>,
    tasks_dir: PathBuf,
}

impl Holders {
    /// From the session's records.
    pub(crate) fn of(paths: &SessionPaths, listing: &Listing) -> Self {
        Holders {
            named: listing
                .tasks
                .iter()
                .filter_map(|record| record.task.kind.worktree())
                .map(|worktree| worktree.worktree_path.clone())
                .collect(),
            readable: listing
                .tasks
                .iter()
                .map(|record| record.id().to_string())
                .collect(),
            tasks_dir: paths.tasks_dir(),
        }
    }

    /// Whether a task holds the worktree of `intent`: a record names it, or the record of its
    /// task exists and cannot be read (it may: the worktree is left alone).
    pub(crate) fn hold(&self, intent: &Intent) -> bool {
        self.named.contains(&intent.worktree.worktree_path)
            || (!self.readable.contains(&intent.name)
                && self
                    .tasks_dir
                    .join(format!("{}.json", intent.name))
                    .is_file())
    }
}

/// Settles the worktrees no task holds (task-worktree's `Worktrees::settle_unrecorded`: the
/// unchanged ones of ours go, the others stay for `tasks worktree ls`). The wiring calls it
/// when a supervisor starts, before it serves: no start of its own is under way.
pub fn settle_unrecorded(paths: &SessionPaths, worktrees: &Worktrees) {
    let listing = match task_session::record::list(paths) {
        Ok(listing) => listing,
        Err(error) => {
            tracing::warn!(%error, "worktrees not settled: the records cannot be listed");
            return;
        }
    };
    let holders = Holders::of(paths, &listing);
    worktrees.settle_unrecorded(|intent| holders.hold(intent));
}
