//! Worktrees of real repositories made in temp dirs (git's identity and configuration set for
//! the commands the tests run themselves): added from `HEAD` on a branch of their own and
//! recorded, removed when unchanged, kept with changes; the records of worktrees whose task was
//! never recorded settled as a crash would leave them; a git that hangs killed at its timeout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use task_worktree::{Settled, WorktreeConfig, WorktreeError, Worktrees};

const GIT_ENV: [(&str, &str); 6] = [
    ("GIT_AUTHOR_NAME", "Test"),
    ("GIT_AUTHOR_EMAIL", "test@example.com"),
    ("GIT_COMMITTER_NAME", "Test"),
    ("GIT_COMMITTER_EMAIL", "test@example.com"),
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
];

/// `git ARGS` in `dir`; its stdout, the test failing if it fails.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .envs(GIT_ENV)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// A temp dir holding `repo`, a repository with one commit on `main`.
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir(&repo).unwrap();
        git(&repo, &["-c", "init.defaultBranch=main", "init", "-q"]);
        std::fs::write(repo.join("readme.txt"), "hello\n").unwrap();
        git(&repo, &["add", "readme.txt"]);
        git(&repo, &["commit", "-qm", "first"]);
        Scratch { dir }
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn worktrees(&self) -> Worktrees {
        self.worktrees_with(WorktreeConfig::default())
    }

    fn worktrees_with(&self, config: WorktreeConfig) -> Worktrees {
        Worktrees::with_config(self.dir.path().join("worktrees"), config)
    }

    /// The branches under `tasks/` and the worktrees besides the main one.
    fn left(&self) -> (String, usize) {
        let branches = git(
            &self.repo(),
            &["branch", "--list", "--format=%(refname:short)"],
        );
        let branches: Vec<_> = branches.lines().filter(|b| *b != "main").collect();
        let listed = git(&self.repo(), &["worktree", "list", "--porcelain"]);
        let worktrees = listed.matches("\nworktree ").count();
        (branches.join(" "), worktrees)
    }

    fn records(&self) -> Vec<String> {
        let dir = self.dir.path().join("worktrees");
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.ends_with(".json"))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

#[test]
fn a_worktree_is_recorded_from_head_removed_when_unchanged_and_kept_with_changes() {
    let scratch = Scratch::new();
    let worktrees = scratch.worktrees();
    let head = git(&scratch.repo(), &["rev-parse", "HEAD"]);
    let one = worktrees
        .add(&scratch.repo(), "a1", "Look only", None)
        .unwrap();
    let two = worktrees
        .add(&scratch.repo(), "a2", "Write", Some("mine"))
        .unwrap();
    assert_eq!(one.worktree.worktree_branch, "tasks/look-only-a1");
    assert_eq!(one.worktree.base_commit.as_deref(), Some(head.trim()));
    assert_eq!(scratch.records(), ["a1.json", "a2.json"]);
    let recorded = worktrees.intents().unwrap();
    assert_eq!(recorded[1].name, "a2");
    assert_eq!(recorded[1].worktree, two.worktree);

    std::fs::write(two.cwd.join("new.txt"), "work\n").unwrap();
    assert_eq!(
        worktrees
            .remove_unless_changed(&one.worktree, false)
            .unwrap(),
        None
    );
    let kept = worktrees
        .remove_unless_changed(&two.worktree, false)
        .unwrap();
    assert!(kept.is_some_and(|c| c.dirty && !c.commits), "{kept:?}");
    assert_eq!(scratch.left(), ("mine".to_owned(), 1));
    assert_eq!(
        scratch.records(),
        ["a2.json"],
        "the kept one keeps its record"
    );
    assert_eq!(
        worktrees
            .remove_unless_changed(&two.worktree, true)
            .unwrap(),
        None
    );
    assert_eq!(scratch.left(), (String::new(), 0));
    assert!(scratch.records().is_empty());
}

#[test]
fn unrecorded_worktrees_go_when_ours_and_unchanged_and_stay_otherwise() {
    let scratch = Scratch::new();
    let worktrees = scratch.worktrees();
    // As a process that died before its tasks were recorded leaves them: added, and named by
    // nothing but their records.
    let clean = worktrees.add(&scratch.repo(), "c1", "clean", None).unwrap();
    let dirty = worktrees.add(&scratch.repo(), "c2", "dirty", None).unwrap();
    let committed = worktrees
        .add(&scratch.repo(), "c3", "committed", None)
        .unwrap();
    let half = worktrees.add(&scratch.repo(), "c4", "half", None).unwrap();
    let held = worktrees.add(&scratch.repo(), "c5", "held", None).unwrap();
    std::fs::write(dirty.cwd.join("new.txt"), "work\n").unwrap();
    git(
        &committed.cwd,
        &["commit", "-q", "--allow-empty", "-m", "work"],
    );
    // Its worktree made, its branch left (a death between the two removals, or an add that
    // got no further than the branch).
    git(
        &scratch.repo(),
        &["worktree", "remove", half.worktree.worktree_path.as_str()],
    );

    let settled = worktrees.settle_unrecorded(|intent| intent.name == "c5");
    let outcome = |name: &str| {
        settled
            .iter()
            .find(|(intent, _)| intent.name == name)
            .map(|(_, outcome)| outcome.clone())
    };
    assert_eq!(outcome("c1"), Some(Settled::Removed));
    assert_eq!(outcome("c4"), Some(Settled::Removed));
    assert!(
        matches!(outcome("c2"), Some(Settled::Kept { reason }) if reason.contains("uncommitted"))
    );
    assert!(matches!(outcome("c3"), Some(Settled::Kept { reason }) if reason.contains("commits")));
    assert_eq!(outcome("c5"), None, "a recorded one is not touched");
    assert!(!Path::new(&clean.worktree.worktree_path).exists());
    assert!(Path::new(&held.worktree.worktree_path).is_dir());
    let (branches, count) = scratch.left();
    assert_eq!(branches, "tasks/committed-c3 tasks/dirty-c2 tasks/held-c5");
    assert_eq!(count, 3);
    assert_eq!(scratch.records(), ["c2.json", "c3.json", "c5.json"]);
}

#[test]
fn a_failed_add_leaves_no_record_and_never_takes_a_branch_that_was_there() {
    let scratch = Scratch::new();
    let worktrees = scratch.worktrees();
    git(&scratch.repo(), &["branch", "theirs"]);
    let refused = worktrees
        .add(&scratch.repo(), "b1", "x", Some("theirs"))
        .unwrap_err();
    assert!(
        matches!(&refused, WorktreeError::Git { reason, .. } if reason.contains("already exists")),
        "{refused}"
    );
    assert_eq!(scratch.left(), ("theirs".to_owned(), 0));
    assert!(scratch.records().is_empty());
    let plain = tempfile::tempdir().unwrap();
    let outside = worktrees.add(plain.path(), "b2", "x", None).unwrap_err();
    assert!(
        matches!(outside, WorktreeError::NotARepository { .. }),
        "{outside}"
    );
    let bad = worktrees
        .add(&scratch.repo(), "../b3", "x", None)
        .unwrap_err();
    assert!(matches!(bad, WorktreeError::BadName(_)), "{bad}");
}

#[test]
fn a_record_held_by_another_process_is_waited_for_then_left() {
    let scratch = Scratch::new();
    let patient = WorktreeConfig {
        record_patience: Duration::from_millis(200),
        ..WorktreeConfig::default()
    };
    let worktrees = scratch.worktrees_with(patient);
    let added = worktrees.add(&scratch.repo(), "h1", "held", None).unwrap();
    let record = scratch.dir.path().join("worktrees/h1.json");
    let holder = Holder::lock(&record);
    let settled = worktrees.settle_unrecorded(|_| false);
    assert!(
        matches!(&settled[..], [(_, Settled::Kept { reason })] if reason.contains("held by another process")),
        "{settled:?}"
    );
    assert!(Path::new(&added.worktree.worktree_path).is_dir());
    drop(holder);
    let settled = worktrees.settle_unrecorded(|_| false);
    assert!(
        matches!(&settled[..], [(_, Settled::Removed)]),
        "{settled:?}"
    );
    assert_eq!(scratch.left(), (String::new(), 0));
}

#[test]
fn a_git_that_hangs_is_killed_with_its_hooks_at_the_timeout_and_nothing_is_left() {
    let scratch = Scratch::new();
    let hooks = scratch.dir.path().join("hooks");
    std::fs::create_dir(&hooks).unwrap();
    let pid_file = scratch.dir.path().join("hook.pid");
    let hook = hooks.join("post-checkout");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 600\n",
            pid_file.display()
        ),
    )
    .unwrap();
    Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    git(
        &scratch.repo(),
        &["config", "core.hooksPath", hooks.to_str().unwrap()],
    );
    let quick = WorktreeConfig {
        git_timeout: Duration::from_millis(500),
        ..WorktreeConfig::default()
    };
    let worktrees = scratch.worktrees_with(quick);
    let error = worktrees
        .add(&scratch.repo(), "t1", "hangs", None)
        .unwrap_err();
    assert!(matches!(error, WorktreeError::Timeout { .. }), "{error}");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    until("the hook killed", || !alive(pid));
    // The half-made worktree was ours and unchanged: it went with its branch and record.
    assert_eq!(scratch.left(), (String::new(), 0));
    assert!(scratch.records().is_empty());
}

/// Another process holding a record's lock: `flock FILE cat`, until dropped (its stdin kept
/// open, so that `cat` does not end).
struct Holder {
    child: Child,
    _stdin: std::process::ChildStdin,
}

impl Holder {
    fn lock(record: &Path) -> Self {
        let mut child = Command::new("flock")
            .arg(record)
            .arg("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // `cat` runs once the lock is taken: it echoes a line back.
        use std::io::{BufRead, Write};
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"locked\n").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "locked\n");
        Holder {
            child,
            _stdin: stdin,
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !matches!(state.and_then(|s| s.chars().next()), Some('Z' | 'X') | None)
    })
}

/// Polls `done` until it holds, failing the test after 20 s.
fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
