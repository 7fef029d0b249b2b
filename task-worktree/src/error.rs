//! Why a worktree could not be made, inspected or removed.

use std::path::PathBuf;
use std::time::Duration;

/// Why a worktree could not be made, inspected or removed. The texts say what happened to the
/// worktree; a caller that made it for something (an agent) says what for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorktreeError {
    /// The caller's directory is not inside a git repository.
    #[error("{dir} is not in a git repository ({reason})")]
    NotARepository {
        /// The caller's directory.
        dir: PathBuf,
        /// What git said.
        reason: String,
    },
    /// The repository has no commit to base a worktree on.
    #[error("the repository at {repository} has no commit yet")]
    NoCommit {
        /// The repository's top-level directory.
        repository: PathBuf,
    },
    /// A git command failed.
    #[error("git {command} failed: {reason}")]
    Git {
        /// The command (its arguments after `git`).
        command: String,
        /// What git said.
        reason: String,
    },
    /// A git command did not end within its timeout; it was killed with its process group.
    #[error("git {command} did not end within {after:?}: killed")]
    Timeout {
        /// The command (its arguments after `git`).
        command: String,
        /// The timeout ([`WorktreeConfig::git_timeout`](crate::WorktreeConfig::git_timeout)).
        after: Duration,
    },
    /// `git` could not be run at all.
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    /// The name a worktree was asked under cannot name a directory of its own.
    #[error("{0:?} cannot name a worktree (letters, digits, '-' and '_', at most 64)")]
    BadName(String),
    /// The worktree of that name exists already and holds changes: it is not taken back.
    #[error("{path} exists already and holds changes")]
    Occupied {
        /// The worktree's directory.
        path: PathBuf,
    },
    /// The worktrees directory could not be created.
    #[error("cannot create the worktrees directory {path}: {source}")]
    Directory {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The worktree's record (written before it is added, removed after it is) could not be
    /// written, read or removed.
    #[error("cannot keep the worktree's record {path}: {source}")]
    Record {
        /// The record's file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Another process works on the worktree (its record is locked) longer than
    /// [`WorktreeConfig::record_patience`](crate::WorktreeConfig::record_patience).
    #[error("the worktree's record {path} is held by another process")]
    Busy {
        /// The record's file.
        path: PathBuf,
    },
    /// The caller's checkout is in a state a worktree cannot be based on (see the crate).
    #[error("the checkout at {dir} cannot be based on: {reason}; commit, stash or finish it first")]
    Unbased {
        /// The caller's worktree (its top level).
        dir: PathBuf,
        /// What is in the way.
        reason: String,
    },
}
