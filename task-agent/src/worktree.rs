//! Agents in their own git worktree (`tasks agent --worktree`, the `Agent` tool's
//! `isolation: "worktree"`).
//!
//! A worktree is added from the caller's **current `HEAD`** (never the default branch) on a
//! new branch `tasks/{description-slug}-{id}` (or one the caller names; an existing branch is
//! never reused) under the executor's worktrees directory, `{dir}/{id}`. When the agent stops,
//! one with no changes (its `HEAD` still the base commit, its tree clean, untracked files
//! included) is removed with its branch (here too, for the executors of agents and teammates);
//! one with changes is kept and named in the agent's notification. Every failure is the start's
//! failure: an agent never runs unisolated when isolation was asked for.
//!
//! A caller's checkout **cannot be based on** (the start is refused, [`WorktreeError::Unbased`])
//! when its `HEAD` is not the state it means to hand over: a merge, rebase, cherry-pick, revert
//! or bisect is in progress (`HEAD` is a midpoint), its index has unmerged paths, or its index
//! holds staged changes (work prepared for a commit that the worktree, made from `HEAD`, would
//! silently lack). Unstaged edits and untracked files do not refuse the start: they are the
//! caller's own work in progress, which a worktree from `HEAD` never claimed to carry.
//!
//! It runs the `git` command-line tool, with arguments as argv (never through a shell): git is
//! what users of worktrees have, and it brings no new dependency to the build.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use task_core::{Registry, TaskId, Worktree};

/// The longest description slug in a branch name.
const SLUG_CHARS: usize = 40;

pub use task_protocol::start::WorktreeRequest;

/// Why a worktree could not be made, inspected or removed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorktreeError {
    /// The caller's directory is not inside a git repository.
    #[error("cannot run the agent in a worktree: {dir} is not in a git repository ({reason})")]
    NotARepository {
        /// The caller's directory.
        dir: PathBuf,
        /// What git said.
        reason: String,
    },
    /// The repository has no commit to base a worktree on.
    #[error("cannot run the agent in a worktree: the repository at {repository} has no commit yet")]
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
    /// `git` could not be run at all.
    #[error("cannot run git: {0}")]
    Spawn(#[source] std::io::Error),
    /// The worktree of the task's id exists already and holds changes: it is not taken back.
    #[error("cannot run the agent in a worktree: {path} exists already and holds changes")]
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
    /// The caller's checkout is in a state a worktree cannot be based on (see the module).
    #[error(
        "cannot run the agent in a worktree: the checkout at {dir} cannot be based on: {reason}; commit, stash or finish it first"
    )]
    Unbased {
        /// The caller's worktree (its top level).
        dir: PathBuf,
        /// What is in the way.
        reason: String,
    },
    /// A worktree that has changes was not removed (pass `force`).
    #[error("worktree {path} has changes (branch {branch}); not removed without force")]
    HasChanges {
        /// The worktree.
        path: String,
        /// Its branch.
        branch: String,
    },
}

/// A worktree just added for an agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    /// What the agent's state records.
    pub worktree: Worktree,
    /// Where the agent runs: the caller's subdirectory of the repository, inside the worktree
    /// (its top level when that directory is not in the commit).
    pub cwd: PathBuf,
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
}

/// Makes and removes the worktrees of one executor, under one directory. `git worktree add`
/// and `remove` run one at a time per repository, so that agents started together never race
/// on the repository's administrative files.
#[derive(Debug)]
pub struct Worktrees {
    dir: PathBuf,
    locks: Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>,
}

impl Worktrees {
    /// Worktrees under `dir` (created on first use).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Worktrees {
            dir: dir.into(),
            locks: Mutex::new(HashMap::new()),
        }
    }

    /// The directory the worktrees are added under.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Adds `{dir}/{id}` from the `HEAD` of the repository `cwd` is in, on a new branch
    /// (`request.branch`, else `tasks/{slug of description}-{id}`). Blocking: it runs git.
    ///
    /// A task registered again under its id (it waited in the queue of a supervisor that died,
    /// and never ran) finds the worktree its first registration added: that one is taken back
    /// as it is, on its branch and base, rather than based on today's `HEAD`.
    ///
    /// # Errors
    /// [`WorktreeError::NotARepository`], [`WorktreeError::NoCommit`], git's own refusal (an
    /// existing branch or path) as [`WorktreeError::Git`], and [`WorktreeError::Occupied`]
    /// when `{dir}/{id}` exists with changes.
    pub fn add(
        &self,
        cwd: &Path,
        id: TaskId,
        description: &str,
        request: &WorktreeRequest,
    ) -> Result<Added, WorktreeError> {
        let found = git(
            cwd,
            [
                "rev-parse",
                "--path-format=absolute",
                "--show-toplevel",
                "--git-common-dir",
                "--absolute-git-dir",
                "--show-prefix",
            ],
        )
        .map_err(|error| match error {
            WorktreeError::Git { reason, .. } => WorktreeError::NotARepository {
                dir: cwd.to_path_buf(),
                reason,
            },
            other => other,
        })?;
        let mut lines = found.lines();
        let (Some(top), Some(common), Some(git_dir)) = (lines.next(), lines.next(), lines.next())
        else {
            return Err(WorktreeError::NotARepository {
                dir: cwd.to_path_buf(),
                reason: format!("git rev-parse said {found:?}"),
            });
        };
        let prefix = lines.next().unwrap_or_default();
        let top = PathBuf::from(top);
        let path = self.dir.join(id.as_str());
        if path.is_dir() {
            let worktree = taken_back(&path, &top)?;
            let cwd = inside(&path, Path::new(prefix.trim_end_matches('/')));
            return Ok(Added { worktree, cwd });
        }
        let base =
            git(&top, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).map_err(|_| {
                WorktreeError::NoCommit {
                    repository: top.clone(),
                }
            })?;
        let base = base.trim().to_owned();
        refuse_unbased(&top, Path::new(git_dir))?;
        let branch = request
            .branch
            .clone()
            .unwrap_or_else(|| branch_name(description, id));
        std::fs::create_dir_all(&self.dir).map_err(|source| WorktreeError::Directory {
            path: self.dir.clone(),
            source,
        })?;
        {
            let lock = self.lock(Path::new(common));
            let _one_at_a_time = lock.lock().unwrap_or_else(PoisonError::into_inner);
            git(
                &top,
                [
                    OsStr::new("worktree"),
                    OsStr::new("add"),
                    OsStr::new("--quiet"),
                    OsStr::new("-b"),
                    OsStr::new(&branch),
                    OsStr::new("--"),
                    path.as_os_str(),
                    OsStr::new(&base),
                ],
            )?;
        }
        tracing::debug!(%id, path = %path.display(), %branch, %base, "worktree added");
        let cwd = inside(&path, Path::new(prefix.trim_end_matches('/')));
        Ok(Added {
            worktree: Worktree {
                worktree_path: path.display().to_string(),
                worktree_branch: branch,
                base_commit: Some(base),
                repository: Some(top.display().to_string()),
            },
            cwd,
        })
    }

    /// Removes `worktree` and its branch unless it has changes (then returns them and keeps
    /// it). With `force`, removes it whatever it holds. Blocking: it runs git.
    ///
    /// # Errors
    /// Git's failures; a worktree whose directory is gone is pruned, not an error.
    pub fn remove_unless_changed(
        &self,
        worktree: &Worktree,
        force: bool,
    ) -> Result<Option<Changes>, WorktreeError> {
        let path = Path::new(&worktree.worktree_path);
        let repository = worktree
            .repository
            .as_deref()
            .map_or_else(|| path.to_path_buf(), PathBuf::from);
        if !force && path.is_dir() {
            let changes = changes(worktree)?;
            if changes.any() {
                return Ok(Some(changes));
            }
        }
        let common = git(
            &repository,
            ["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )?;
        let lock = self.lock(Path::new(common.trim()));
        let _one_at_a_time = lock.lock().unwrap_or_else(PoisonError::into_inner);
        if path.is_dir() {
            let mut args = vec![OsStr::new("worktree"), OsStr::new("remove")];
            if force {
                args.push(OsStr::new("--force"));
            }
            args.extend([OsStr::new("--"), path.as_os_str()]);
            git(&repository, args)?;
        } else {
            git(&repository, ["worktree", "prune"])?;
        }
        let reference = format!("refs/heads/{}", worktree.worktree_branch);
        let mut args = vec!["update-ref", "-d", reference.as_str()];
        // Without force, the branch goes only while it is still the base (checked by git
        // atomically): a commit made meanwhile keeps it.
        if let (false, Some(base)) = (force, worktree.base_commit.as_deref()) {
            args.push(base);
        }
        git(&repository, args)?;
        tracing::debug!(path = %path.display(), branch = %worktree.worktree_branch, "worktree removed");
        Ok(None)
    }

    fn lock(&self, common_dir: &Path) -> Arc<Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(locks.entry(common_dir.to_path_buf()).or_default())
    }
}

/// `prefix` (a path relative to a repository's top level) inside the worktree at `path`, or
/// the worktree's top level when the worktree has no such directory.
/// The worktree at `path` (of the repository at `top`) as it is, its `HEAD` taken for its
/// base: it must hold no uncommitted change (it was added for a task that never ran).
fn taken_back(path: &Path, top: &Path) -> Result<Worktree, WorktreeError> {
    let branch = git(path, ["symbolic-ref", "--short", "HEAD"])?;
    let base = git(path, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])?;
    let worktree = Worktree {
        worktree_path: path.display().to_string(),
        worktree_branch: branch.trim().to_owned(),
        base_commit: Some(base.trim().to_owned()),
        repository: Some(top.display().to_string()),
    };
    if changes(&worktree)?.any() {
        return Err(WorktreeError::Occupied {
            path: path.to_path_buf(),
        });
    }
    tracing::debug!(path = %path.display(), "worktree taken back");
    Ok(worktree)
}

fn inside(path: &Path, prefix: &Path) -> PathBuf {
    let inside = path.join(prefix);
    if inside.is_dir() {
        inside
    } else {
        path.to_path_buf()
    }
}

/// Where an agent whose caller is in `caller_cwd` runs in `worktree` again (a teammate resumed
/// by the next supervisor): the same subdirectory of the worktree as the caller's of the
/// repository, else the worktree's top level.
pub fn cwd_in(worktree: &Worktree, caller_cwd: &Path) -> PathBuf {
    let path = Path::new(&worktree.worktree_path);
    let prefix = worktree
        .repository
        .as_deref()
        .and_then(|top| caller_cwd.strip_prefix(top).ok())
        .unwrap_or(Path::new(""));
    inside(path, prefix)
}

/// Refuses a checkout (top level `top`, git directory `git_dir`) that a worktree cannot be based
/// on: an operation in progress, unmerged paths, staged changes (see the module).
fn refuse_unbased(top: &Path, git_dir: &Path) -> Result<(), WorktreeError> {
    let unbased = |reason: String| WorktreeError::Unbased {
        dir: top.to_path_buf(),
        reason,
    };
    const IN_PROGRESS: [(&str, &str); 6] = [
        ("MERGE_HEAD", "a merge"),
        ("rebase-merge", "a rebase"),
        ("rebase-apply", "a rebase or git am"),
        ("CHERRY_PICK_HEAD", "a cherry-pick"),
        ("REVERT_HEAD", "a revert"),
        ("BISECT_LOG", "a bisect"),
    ];
    if let Some((_, what)) = IN_PROGRESS
        .iter()
        .find(|(marker, _)| git_dir.join(marker).exists())
    {
        return Err(unbased(format!("{what} is in progress")));
    }
    let unmerged = git(top, ["diff", "--name-only", "--diff-filter=U"])?;
    if let Some(path) = unmerged.lines().next() {
        return Err(unbased(format!("the index has unmerged paths ({path}…)")));
    }
    let staged = git(top, ["diff", "--cached", "--name-only", "HEAD", "--"])?;
    let staged: Vec<&str> = staged.lines().collect();
    if let Some(first) = staged.first() {
        return Err(unbased(format!(
            "the index has staged changes the worktree would not contain ({} path{}: {first}{})",
            staged.len(),
            if staged.len() == 1 { "" } else { "s" },
            if staged.len() > 1 { ", …" } else { "" }
        )));
    }
    Ok(())
}

/// What `worktree` holds beyond its base. Blocking: it runs git.
///
/// # Errors
/// Git's failures (a worktree whose directory is gone among them).
pub fn changes(worktree: &Worktree) -> Result<Changes, WorktreeError> {
    let path = Path::new(&worktree.worktree_path);
    let head = git(path, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])?;
    let commits = worktree
        .base_commit
        .as_deref()
        .is_none_or(|base| base != head.trim());
    let status = git(path, ["status", "--porcelain", "--untracked-files=all"])?;
    Ok(Changes {
        commits,
        dirty: !status.trim().is_empty(),
    })
}

/// `tasks/{slug}-{id}`: the description in lower-case letters, digits and dashes (at most
/// 40 characters; `agent` when nothing is left of it), then the task id.
pub fn branch_name(description: &str, id: TaskId) -> String {
    let mut slug = String::new();
    for c in description.chars() {
        if slug.len() >= SLUG_CHARS {
            break;
        }
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.is_empty() && !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let slug = slug.trim_end_matches('-');
    let slug = if slug.is_empty() { "agent" } else { slug };
    format!("tasks/{slug}-{id}")
}

/// Runs `git ARGS` in `dir` (its variables that would point it elsewhere removed) and returns
/// its stdout; a non-zero exit is [`WorktreeError::Git`] with its stderr.
fn git<I, S>(dir: &Path, args: I) -> Result<String, WorktreeError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let output: Output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(&args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_COMMON_DIR")
        .stdin(Stdio::null())
        .output()
        .map_err(WorktreeError::Spawn)?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).into_owned());
    }
    let command = args
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let said = String::from_utf8_lossy(&output.stderr);
    let reason = match said.trim() {
        "" => format!("exit status {}", output.status),
        said => said.lines().collect::<Vec<_>>().join(" / "),
    };
    Err(WorktreeError::Git { command, reason })
}

/// Removes `worktree` and its branch if it has no changes; a failure is logged (the worktree
/// then stays, listed by `tasks worktree ls`). Returns whether it is gone. Blocking.
pub fn remove_unchanged(worktrees: &Worktrees, worktree: &Worktree) -> bool {
    match worktrees.remove_unless_changed(worktree, false) {
        Ok(None) => true,
        Ok(Some(_)) => false,
        Err(error) => {
            tracing::warn!(path = %worktree.worktree_path, %error, "worktree not removed");
            false
        }
    }
}

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
    if !remove_unchanged(worktrees, worktree) {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn branch_names_are_readable_slugs_with_the_id() {
        let id = TaskId::parse("a12345678").unwrap();
        assert_eq!(
            branch_name("Fix the parser: edge cases!", id),
            "tasks/fix-the-parser-edge-cases-a12345678"
        );
        assert_eq!(branch_name("  ", id), "tasks/agent-a12345678");
        assert_eq!(branch_name("ünïcode ☃", id), "tasks/n-code-a12345678");
        let long = branch_name(&"x".repeat(100), id);
        assert_eq!(long, format!("tasks/{}-a12345678", "x".repeat(40)));
    }
}
