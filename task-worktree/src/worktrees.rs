//! [`Worktrees`]: adding, inspecting and removing the worktrees of one directory, and settling
//! the ones no task records after a crash.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::git::Git;
use crate::intent::{self, Held, Intent, valid_name};
use crate::{Changes, Worktree, WorktreeError};

/// The longest description slug in a branch name.
const SLUG_CHARS: usize = 40;

/// The durations of worktree work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorktreeConfig {
    /// How long one git command may run before it is killed with its process group (a hook
    /// that hangs, a lock a stuck process holds): 60 s.
    pub git_timeout: Duration,
    /// How long to wait for a worktree's record that another process holds (a git of a
    /// supervisor that died, still running) before giving up on it for now: 5 s.
    pub record_patience: Duration,
}

impl Default for WorktreeConfig {
    fn default() -> Self {
        WorktreeConfig {
            git_timeout: Duration::from_secs(60),
            record_patience: Duration::from_secs(5),
        }
    }
}

/// A worktree just added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Added {
    /// What its task records.
    pub worktree: Worktree,
    /// Where to work: the caller's subdirectory of the repository, inside the worktree (its
    /// top level when that directory is not in the commit).
    pub cwd: PathBuf,
}

/// What became of a worktree no task records ([`Worktrees::settle_unrecorded`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Settled {
    /// It and its branch were removed, and so was its record.
    Removed,
    /// Nothing of it was made (or what was is gone): its record was removed.
    Forgotten,
    /// It is kept, with its record, for a person to look at (`tasks worktree ls`).
    Kept {
        /// Why: its changes, a branch that is not ours, what failed.
        reason: String,
    },
}

/// Makes and removes the worktrees of one executor, under one directory: the worktree `name`
/// is `{dir}/{name}`, its record `{dir}/{name}.json`. `git worktree add` and `remove` run one
/// at a time per repository, so that worktrees added together never race on the repository's
/// administrative files.
#[derive(Debug)]
pub struct Worktrees {
    dir: PathBuf,
    git: Git,
    record_patience: Duration,
    locks: Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>,
}

impl Worktrees {
    /// Worktrees under `dir` (created on first use), with the default [`WorktreeConfig`].
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self::with_config(dir, WorktreeConfig::default())
    }

    /// Worktrees under `dir` (created on first use).
    pub fn with_config(dir: impl Into<PathBuf>, config: WorktreeConfig) -> Self {
        Worktrees {
            dir: dir.into(),
            git: Git {
                timeout: config.git_timeout,
            },
            record_patience: config.record_patience,
            locks: Mutex::new(HashMap::new()),
        }
    }

    /// The directory the worktrees are added under.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Adds `{dir}/{name}` from the `HEAD` of the repository `cwd` is in, on a new branch
    /// (`branch`, else `tasks/{slug of description}-{name}`), its record written first.
    /// Blocking: it runs git.
    ///
    /// A name added again (a task that waited in the queue of a supervisor that died, and
    /// never ran, registered again under its id) finds the worktree its first time added:
    /// that one is taken back as it is, on its branch and base, rather than based on today's
    /// `HEAD`.
    ///
    /// # Errors
    /// [`WorktreeError::BadName`], [`WorktreeError::NotARepository`],
    /// [`WorktreeError::NoCommit`], [`WorktreeError::Unbased`], git's own refusal (an
    /// existing branch or path) as [`WorktreeError::Git`], [`WorktreeError::Occupied`] when
    /// `{dir}/{name}` exists with changes, [`WorktreeError::Record`] when its record cannot be
    /// written (then nothing is added).
    pub fn add(
        &self,
        cwd: &Path,
        name: &str,
        description: &str,
        branch: Option<&str>,
    ) -> Result<Added, WorktreeError> {
        if !valid_name(name) {
            return Err(WorktreeError::BadName(name.to_owned()));
        }
        let found = self
            .git
            .run(
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
        let prefix = Path::new(lines.next().unwrap_or_default().trim_end_matches('/'));
        let top = PathBuf::from(top);
        let path = self.dir.join(name);
        if path.is_dir() {
            let worktree = self.taken_back(&path, &top, name)?;
            return Ok(Added {
                worktree,
                cwd: inside(&path, prefix),
            });
        }
        let base = self
            .git
            .run(&top, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            .map_err(|_| WorktreeError::NoCommit {
                repository: top.clone(),
            })?;
        let base = base.trim().to_owned();
        self.refuse_unbased(&top, Path::new(git_dir))?;
        let branch = branch.map_or_else(|| branch_name(description, name), str::to_owned);
        std::fs::create_dir_all(&self.dir).map_err(|source| WorktreeError::Directory {
            path: self.dir.clone(),
            source,
        })?;
        let worktree = Worktree {
            worktree_path: path.display().to_string(),
            worktree_branch: branch,
            base_commit: Some(base),
            repository: Some(top.display().to_string()),
        };
        // Recorded before it exists: whoever finds the record and no task naming the worktree
        // (this process died before its task was recorded) settles it.
        let held = Held::create(&self.dir, name, &worktree)?;
        let added = {
            let lock = self.lock(Path::new(common));
            let _one_at_a_time = lock.lock().unwrap_or_else(PoisonError::into_inner);
            self.git.run_with(
                &top,
                [
                    OsStr::new("worktree"),
                    OsStr::new("add"),
                    OsStr::new("--quiet"),
                    OsStr::new("-b"),
                    OsStr::new(&worktree.worktree_branch),
                    OsStr::new("--"),
                    path.as_os_str(),
                    OsStr::new(worktree.base_commit.as_deref().unwrap_or_default()),
                ],
                held.stdin(),
            )
        };
        if let Err(error) = added {
            let settled = self.settle(held, name, &worktree);
            tracing::debug!(%name, ?settled, "worktree not added");
            return Err(error);
        }
        tracing::debug!(%name, path = %path.display(), branch = %worktree.worktree_branch, "worktree added");
        Ok(Added {
            worktree,
            cwd: inside(&path, prefix),
        })
    }

    /// Removes `worktree` and its branch unless it has changes (then returns them and keeps
    /// it), and its record with them. With `force`, removes it whatever it holds. Blocking: it
    /// runs git.
    ///
    /// # Errors
    /// Git's failures, [`WorktreeError::Busy`] while another process works on it; a worktree
    /// whose directory is gone is pruned, not an error.
    pub fn remove_unless_changed(
        &self,
        worktree: &Worktree,
        force: bool,
    ) -> Result<Option<Changes>, WorktreeError> {
        let held = match self.name_of(worktree) {
            Some(name) => Held::open(&intent::path_of(&self.dir, name), self.record_patience)?,
            None => None,
        };
        let kept = self.remove_held(worktree, force, held.as_ref())?;
        if let (None, Some(held)) = (kept, held) {
            held.remove()?;
        }
        Ok(kept)
    }

    /// Removes `worktree` and its branch if it has no changes; a failure is logged (the
    /// worktree then stays, with its record). Returns whether it is gone. Blocking.
    pub fn remove_unchanged(&self, worktree: &Worktree) -> bool {
        match self.remove_unless_changed(worktree, false) {
            Ok(None) => true,
            Ok(Some(_)) => false,
            Err(error) => {
                tracing::warn!(path = %worktree.worktree_path, %error, "worktree not removed");
                false
            }
        }
    }

    /// Every worktree record under the directory, as it is now (a record that cannot be read
    /// is logged and left out).
    ///
    /// # Errors
    /// The directory cannot be read.
    pub fn intents(&self) -> Result<Vec<Intent>, WorktreeError> {
        let mut found = Vec::new();
        for name in intent::names(&self.dir)? {
            match intent::read(&self.dir, &name) {
                Ok(Some(intent)) => found.push(intent),
                Ok(None) => {}
                Err(error) => tracing::warn!(%name, %error, "worktree record unreadable"),
            }
        }
        Ok(found)
    }

    /// Settles every worktree whose record no task holds (`recorded` says which are held):
    /// the process that added it died before its task was recorded, or after its task let go
    /// of it and before it was removed. One that is ours and unchanged (at `{dir}/{name}` on
    /// its branch, `HEAD` at its base, nothing uncommitted; or never made, its branch ours by
    /// name and at its base) goes with its branch and record; anything else is kept with its
    /// record and said why. Call it where no other process of this directory adds or removes
    /// worktrees (a supervisor, before it serves). Blocking: it runs git.
    pub fn settle_unrecorded(&self, recorded: impl Fn(&Intent) -> bool) -> Vec<(Intent, Settled)> {
        let intents = match self.intents() {
            Ok(intents) => intents,
            Err(error) => {
                tracing::warn!(%error, "worktree records not settled");
                return Vec::new();
            }
        };
        let mut settled = Vec::new();
        for found in intents.into_iter().filter(|intent| !recorded(intent)) {
            let path = intent::path_of(&self.dir, &found.name);
            let outcome = match Held::open(&path, self.record_patience) {
                Ok(None) => continue,
                Ok(Some(held)) => match held.read() {
                    Ok(worktree) => self.settle(held, &found.name, &worktree),
                    Err(error) => Settled::Kept {
                        reason: error.to_string(),
                    },
                },
                Err(error) => Settled::Kept {
                    reason: error.to_string(),
                },
            };
            match &outcome {
                Settled::Kept { reason } => {
                    tracing::warn!(name = %found.name, path = %found.worktree.worktree_path, %reason, "unrecorded worktree kept");
                }
                done => {
                    tracing::info!(name = %found.name, path = %found.worktree.worktree_path, ?done, "unrecorded worktree settled");
                }
            }
            settled.push((found, outcome));
        }
        settled
    }

    /// Removes what of `worktree` (the record `held`, of `name`) is ours and unchanged, and
    /// then its record; keeps the rest (see [`settle_unrecorded`](Self::settle_unrecorded)).
    fn settle(&self, held: Held, name: &str, worktree: &Worktree) -> Settled {
        let kept = |reason: String| Settled::Kept { reason };
        let path = Path::new(&worktree.worktree_path);
        let branch = &worktree.worktree_branch;
        let outcome = if path.is_dir() {
            match self
                .git
                .run(path, ["symbolic-ref", "--short", "-q", "HEAD"])
            {
                Ok(on) if on.trim() == branch => {}
                Ok(on) => {
                    return kept(format!(
                        "it is on {:?}, not on its branch {branch}",
                        on.trim()
                    ));
                }
                Err(error) => return kept(error.to_string()),
            }
            match self.remove_held(worktree, false, Some(&held)) {
                Ok(None) => Settled::Removed,
                Ok(Some(changes)) => {
                    return kept(format!("it has changes ({})", changes.describe()));
                }
                Err(error) => return kept(error.to_string()),
            }
        } else {
            // `git worktree add` never made it (or it went): its branch goes only if it is ours
            // (git refuses a branch that exists, so one named otherwise was not made here) and
            // still at its base.
            let repository = worktree.repository.as_deref().map(Path::new);
            match repository.filter(|r| r.is_dir()) {
                None => Settled::Forgotten,
                Some(repository) => {
                    if let Err(error) =
                        self.git
                            .run_with(repository, ["worktree", "prune"], held.stdin())
                    {
                        tracing::warn!(%error, "stale worktrees not pruned");
                    }
                    match self.branch_head(repository, branch, Some(&held)) {
                        Some(head) if ours_by_name(branch, name) => {
                            if Some(head.as_str()) != worktree.base_commit.as_deref() {
                                return kept(format!("its branch {branch} has commits"));
                            }
                            if let Err(error) =
                                self.delete_branch(repository, worktree, false, Some(&held))
                            {
                                return kept(error.to_string());
                            }
                            Settled::Removed
                        }
                        _ => Settled::Forgotten,
                    }
                }
            }
        };
        match held.remove() {
            Ok(()) => outcome,
            Err(error) => kept(error.to_string()),
        }
    }

    /// The commit branch `branch` of `repository` points at, if it exists.
    fn branch_head(&self, repository: &Path, branch: &str, held: Option<&Held>) -> Option<String> {
        let reference = format!("refs/heads/{branch}");
        let args = ["rev-parse", "--verify", "--quiet", reference.as_str()];
        self.git
            .run_with(repository, args, stdin_of(held))
            .ok()
            .map(|head| head.trim().to_owned())
    }

    /// Deletes the branch of `worktree`; without `force`, only while it is still the base
    /// (checked by git atomically: a commit made meanwhile keeps it).
    fn delete_branch(
        &self,
        repository: &Path,
        worktree: &Worktree,
        force: bool,
        held: Option<&Held>,
    ) -> Result<(), WorktreeError> {
        let reference = format!("refs/heads/{}", worktree.worktree_branch);
        let mut args = vec!["update-ref", "-d", reference.as_str()];
        if let (false, Some(base)) = (force, worktree.base_commit.as_deref()) {
            args.push(base);
        }
        self.git
            .run_with(repository, args, stdin_of(held))
            .map(drop)
    }

    /// [`remove_unless_changed`](Self::remove_unless_changed), its record `held` (if it has
    /// one) locked by the caller and left to it.
    fn remove_held(
        &self,
        worktree: &Worktree,
        force: bool,
        held: Option<&Held>,
    ) -> Result<Option<Changes>, WorktreeError> {
        let stdin = || stdin_of(held);
        let path = Path::new(&worktree.worktree_path);
        let repository = worktree
            .repository
            .as_deref()
            .map_or_else(|| path.to_path_buf(), PathBuf::from);
        if !force && path.is_dir() {
            let changes = self.changes_of(worktree)?;
            if changes.any() {
                return Ok(Some(changes));
            }
        }
        let common = self.git.run(
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
            self.git.run_with(&repository, args, stdin())?;
        } else {
            self.git
                .run_with(&repository, ["worktree", "prune"], stdin())?;
        }
        if self
            .branch_head(&repository, &worktree.worktree_branch, held)
            .is_some()
        {
            self.delete_branch(&repository, worktree, force, held)?;
        }
        tracing::debug!(path = %path.display(), branch = %worktree.worktree_branch, "worktree removed");
        Ok(None)
    }

    /// The worktree at `path` (of the repository at `top`) as it is, its `HEAD` taken for its
    /// base: it must hold no uncommitted change (it was added for a task that never ran). Its
    /// record is written if it has none.
    fn taken_back(&self, path: &Path, top: &Path, name: &str) -> Result<Worktree, WorktreeError> {
        let branch = self.git.run(path, ["symbolic-ref", "--short", "HEAD"])?;
        let base = self
            .git
            .run(path, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])?;
        let worktree = Worktree {
            worktree_path: path.display().to_string(),
            worktree_branch: branch.trim().to_owned(),
            base_commit: Some(base.trim().to_owned()),
            repository: Some(top.display().to_string()),
        };
        if self.changes_of(&worktree)?.any() {
            return Err(WorktreeError::Occupied {
                path: path.to_path_buf(),
            });
        }
        let record = intent::path_of(&self.dir, name);
        if Held::open(&record, self.record_patience)?.is_none() {
            Held::create(&self.dir, name, &worktree)?;
        }
        tracing::debug!(path = %path.display(), "worktree taken back");
        Ok(worktree)
    }

    /// Refuses a checkout (top level `top`, git directory `git_dir`) that a worktree cannot be
    /// based on: an operation in progress, unmerged paths, staged changes (see the crate).
    fn refuse_unbased(&self, top: &Path, git_dir: &Path) -> Result<(), WorktreeError> {
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
        let unmerged = self
            .git
            .run(top, ["diff", "--name-only", "--diff-filter=U"])?;
        if let Some(path) = unmerged.lines().next() {
            return Err(unbased(format!("the index has unmerged paths ({path}…)")));
        }
        let staged = self
            .git
            .run(top, ["diff", "--cached", "--name-only", "HEAD", "--"])?;
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

    /// What `worktree` holds beyond its base.
    fn changes_of(&self, worktree: &Worktree) -> Result<Changes, WorktreeError> {
        changes_with(self.git, worktree)
    }

    /// The name of `worktree` if it is one of this directory's (`{dir}/{name}`).
    fn name_of<'a>(&self, worktree: &'a Worktree) -> Option<&'a str> {
        let path = Path::new(&worktree.worktree_path);
        let name = path.strip_prefix(&self.dir).ok()?.to_str()?;
        valid_name(name).then_some(name)
    }

    fn lock(&self, common_dir: &Path) -> Arc<Mutex<()>> {
        let mut locks = self.locks.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(locks.entry(common_dir.to_path_buf()).or_default())
    }
}

/// What `worktree` holds beyond its base, git run with the default
/// [`WorktreeConfig::git_timeout`]. Blocking: it runs git.
///
/// # Errors
/// Git's failures (a worktree whose directory is gone among them).
pub fn changes(worktree: &Worktree) -> Result<Changes, WorktreeError> {
    let git = Git {
        timeout: WorktreeConfig::default().git_timeout,
    };
    changes_with(git, worktree)
}

fn changes_with(git: Git, worktree: &Worktree) -> Result<Changes, WorktreeError> {
    let path = Path::new(&worktree.worktree_path);
    let head = git.run(path, ["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])?;
    let commits = worktree
        .base_commit
        .as_deref()
        .is_none_or(|base| base != head.trim());
    let status = git.run(path, ["status", "--porcelain", "--untracked-files=all"])?;
    Ok(Changes {
        commits,
        dirty: !status.trim().is_empty(),
    })
}

/// A git command's stdin: the record `held`, if there is one (see [`Held::stdin`]).
fn stdin_of(held: Option<&Held>) -> Stdio {
    held.map_or_else(Stdio::null, Held::stdin)
}

/// `prefix` (a path relative to a repository's top level) inside the worktree at `path`, or
/// the worktree's top level when the worktree has no such directory.
fn inside(path: &Path, prefix: &Path) -> PathBuf {
    let inside = path.join(prefix);
    if inside.is_dir() {
        inside
    } else {
        path.to_path_buf()
    }
}

/// Where a caller in `caller_cwd` works in `worktree` again (a teammate resumed by the next
/// supervisor): the same subdirectory of the worktree as the caller's of the repository, else
/// the worktree's top level.
pub fn cwd_in(worktree: &Worktree, caller_cwd: &Path) -> PathBuf {
    let path = Path::new(&worktree.worktree_path);
    let prefix = worktree
        .repository
        .as_deref()
        .and_then(|top| caller_cwd.strip_prefix(top).ok())
        .unwrap_or(Path::new(""));
    inside(path, prefix)
}

/// `tasks/{slug}-{name}`: the description in lower-case letters, digits and dashes (at most
/// 40 characters; `agent` when nothing is left of it), then the name (a task id).
pub fn branch_name(description: &str, name: &str) -> String {
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
    format!("tasks/{slug}-{name}")
}

/// Whether `branch` is named as [`branch_name`] names the branches of `name`.
fn ours_by_name(branch: &str, name: &str) -> bool {
    branch.starts_with("tasks/") && branch.ends_with(&format!("-{name}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn branch_names_are_readable_slugs_with_the_name() {
        let id = "a12345678";
        assert_eq!(
            branch_name("Fix the parser: edge cases!", id),
            "tasks/fix-the-parser-edge-cases-a12345678"
        );
        assert_eq!(branch_name("  ", id), "tasks/agent-a12345678");
        assert_eq!(branch_name("ünïcode ☃", id), "tasks/n-code-a12345678");
        let long = branch_name(&"x".repeat(100), id);
        assert_eq!(long, format!("tasks/{}-a12345678", "x".repeat(40)));
        assert!(ours_by_name(&branch_name("anything", id), id));
        assert!(!ours_by_name("mine", id));
        assert!(!ours_by_name("tasks/x-a1234567", id));
    }

    #[test]
    fn only_plain_names_name_worktrees() {
        for bad in ["", ".", "..", "a/b", "a b", &"x".repeat(65), "é"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
        assert!(valid_name("a12345678") && valid_name("task_1-b"));
    }
}
