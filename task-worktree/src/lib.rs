#![doc = include_str!("../README.md")]
//!
//! # Which checkouts a worktree is based on
//!
//! A caller's checkout **cannot be based on** ([`WorktreeError::Unbased`]) when its `HEAD` is
//! not the state it means to hand over: a merge, rebase, cherry-pick, revert or bisect is in
//! progress (`HEAD` is a midpoint), its index has unmerged paths, or its index holds staged
//! changes (work prepared for a commit that the worktree, made from `HEAD`, would silently
//! lack). Unstaged edits and untracked files do not refuse it: they are the caller's own work
//! in progress, which a worktree from `HEAD` never claimed to carry.

mod error;
mod git;
mod intent;
mod record;
mod worktrees;

pub use error::WorktreeError;
pub use intent::Intent;
pub use record::{Changes, Worktree};
pub use worktrees::{Added, Settled, WorktreeConfig, Worktrees, branch_name, changes, cwd_in};
