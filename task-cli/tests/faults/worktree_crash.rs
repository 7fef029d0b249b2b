//! Six agents started with `--worktree` while their supervisor is SIGKILLed at a random point
//! 0.1–0.4 s in, twenty times over: a supervisor that dies after `git worktree add` and before
//! its task's first record, whose client's retried start makes a new task, must not leave the
//! first worktree and branch recorded nowhere. After each run and a restart every worktree and
//! `tasks/` branch of the repository belongs to a task that exists, and once the agents have
//! ended none is left (issue #41, item 3).

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::sandbox::{Dice, Sandbox, bounded, signal};
use crate::support::git::{GIT_ENV, git};
use crate::support::{eventually, fake_agent, is_alive, poll_until};

const RUNS: usize = 20;
const AGENTS: usize = 6;

#[test]
fn agents_started_in_worktrees_while_their_supervisor_is_killed_leave_no_worktree_unrecorded() {
    let mut dice = Dice::seeded();
    let (mut unanswered, mut settled) = (0, 0);
    for run in 0..RUNS {
        let (tasks, worktrees) = one_run(run, 100 + dice.below(301));
        unanswered += tasks;
        settled += worktrees;
    }
    eprintln!(
        "{RUNS} runs of {AGENTS} agents: {unanswered} tasks no answered start names, \
         {settled} unrecorded worktrees settled by the next supervisor"
    );
}

/// One run, its supervisor killed `kill_at` ms in; returns how many agents no answered start
/// names (made by a supervisor that died before answering) and how many worktrees no task
/// recorded the next supervisor settled.
fn one_run(run: usize, kill_at: u64) -> (usize, usize) {
    let mut sandbox = Sandbox::new();
    for (key, value) in GIT_ENV {
        sandbox.set(key, value);
    }
    let repo = sandbox.scratch().join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["-c", "init.defaultBranch=main", "init", "-q"]);
    std::fs::write(repo.join("readme.txt"), "hello\n").unwrap();
    git(&repo, &["add", "readme.txt"]);
    git(&repo, &["commit", "-qm", "first"]);
    let script = sandbox.scratch().join("agent.jsonl");
    std::fs::write(&script, "{\"read_user\": true}\n{\"result\": \"looked\"}\n").unwrap();
    let fake = fake_agent();

    let answered: Vec<String> = std::thread::scope(|scope| {
        let starts: Vec<_> = (0..AGENTS)
            .map(|n| {
                let description = format!("agent {n}");
                let args = [
                    "agent",
                    "--worktree",
                    "-d",
                    &description,
                    "-p",
                    "look",
                    "--",
                    fake.to_str().unwrap(),
                    "--script",
                    script.to_str().unwrap(),
                ];
                let mut command = sandbox.command(&args);
                command.current_dir(&repo);
                scope.spawn(move || bounded(command, "tasks agent --worktree"))
            })
            .collect();
        // The kill's moment is this run's random input, not a wait for an event.
        std::thread::sleep(Duration::from_millis(kill_at));
        kill_supervisor(&sandbox);
        starts
            .into_iter()
            .filter_map(|start| {
                let ran = start.join().unwrap();
                ran.status
                    .success()
                    .then(|| ran.stdout.lines().next().unwrap_or_default().to_owned())
            })
            .collect()
    });

    // A restart: the next supervisor settles what its predecessor left before it serves.
    let restart = sandbox.ok(&["run", "--", "true"]);
    let listed = sandbox.listed();
    let tasks: BTreeSet<&str> = listed.iter().filter_map(|t| t["id"].as_str()).collect();
    // A worktree is `{session}/worktrees/{id}` on `tasks/{slug}-{id}`: its task's id ends both.
    let (worktrees, branches) = left_in(&repo);
    let unrecorded: Vec<_> = worktrees
        .iter()
        .filter(|path| !tasks.contains(path.rsplit('/').next().unwrap_or_default()))
        .chain(
            branches
                .iter()
                .filter(|branch| !tasks.contains(branch.rsplit('-').next().unwrap_or_default())),
        )
        .collect();
    assert!(
        unrecorded.is_empty(),
        "run {run}, supervisor killed {kill_at} ms in: worktrees or branches of no task: \
         {unrecorded:?}\ntasks: {tasks:?}\nsupervisor log:\n{}",
        sandbox.log()
    );

    // Every agent ends (or ended with its supervisor); an unchanged worktree goes.
    sandbox.until_all_ended();
    let left = poll_until(Duration::from_secs(20), || {
        let left = left_in(&repo);
        (left.0.is_empty() && left.1.is_empty()).then_some(())
    });
    assert!(
        left.is_some(),
        "run {run}, supervisor killed {kill_at} ms in: left after every agent ended: {:?}\n\
         supervisor log:\n{}",
        left_in(&repo),
        sandbox.log()
    );
    let stale = git(&repo, &["worktree", "prune", "--dry-run", "--verbose"]);
    assert!(stale.trim().is_empty(), "stale worktrees: {stale}");
    let named: BTreeSet<&str> = answered
        .iter()
        .map(String::as_str)
        .chain([restart.trim()])
        .collect();
    let settled = sandbox.log().matches("unrecorded worktree settled").count();
    (tasks.difference(&named).count(), settled)
}

/// The worktrees of `repo` besides its own, and its branches besides `main`.
fn left_in(repo: &Path) -> (Vec<String>, Vec<String>) {
    let listed = git(repo, &["worktree", "list", "--porcelain"]);
    let worktrees = listed
        .lines()
        .filter_map(|line| line.strip_prefix("worktree "))
        .skip(1)
        .map(str::to_owned)
        .collect();
    let branches = git(repo, &["branch", "--list", "--format=%(refname:short)"])
        .lines()
        .filter(|branch| *branch != "main")
        .map(str::to_owned)
        .collect();
    (worktrees, branches)
}

/// SIGKILLs the session's supervisor once one holds the session (a client starts it), and
/// waits until it is gone.
fn kill_supervisor(sandbox: &Sandbox) {
    let lock = sandbox.session_dir().join("supervisor.lock");
    eventually("a supervisor", || {
        task_session::lock::is_held(&lock)
            .unwrap_or(false)
            .then_some(())
    });
    let Some(pid) = task_session::lock::holder_pid(&lock).and_then(|pid| i32::try_from(pid).ok())
    else {
        return;
    };
    signal(pid, rustix::process::Signal::KILL);
    eventually("the supervisor gone", || (!is_alive(pid)).then_some(()));
}
