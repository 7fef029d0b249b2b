//! What a task records about its worktree, and what a worktree holds beyond its base.

use serde::{Deserialize, Serialize};

/// A git worktree an agent runs (or ran) in: what its task's state records, and what the
/// worktree's own record (written before `git worktree add`) holds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Worktree {
    /// The worktree's path.
    pub worktree_path: String,
    /// Its branch.
    pub worktree_branch: String,
    /// The commit it was created from (the caller's `HEAD`): the worktree has changes once its
    /// `HEAD` is elsewhere or its tree differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_commit: Option<String>,
    /// The top-level directory of the repository it was added to (where `git worktree remove`
    /// runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
}

/// Whether a worktree holds anything its base does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Changes {
    /// Its `HEAD` is no longer the base commit (commits were made, or it was moved).
    pub commits: bool,
    /// Its tree differs from its `HEAD` (modified, staged or untracked files).
    pub dirty: bool,
}

impl Changes {
    /// Whether there is anything to keep.
    pub fn any(self) -> bool {
        self.commits || self.dirty
    }

    /// `commits`, `uncommitted`, `commits, uncommitted`, or `none`.
    pub fn describe(self) -> &'static str {
        match (self.commits, self.dirty) {
            (true, true) => "commits, uncommitted",
            (true, false) => "commits",
            (false, true) => "uncommitted",
            (false, false) => "none",
        }
    }
}
