//! `tasks rm` and `tasks prune`: only finished, delivered tasks go; a completion that races a
//! prune is kept for its reader; `--keep-last` keeps the newest.

use std::process::Stdio;

use crate::sandbox::Sandbox;
use crate::support::eventually;

fn ended(sandbox: &Sandbox, id: &str) -> bool {
    sandbox
        .statuses()
        .iter()
        .any(|(i, s)| i == id && s == "completed")
}

fn listed(sandbox: &Sandbox) -> Vec<String> {
    sandbox.statuses().into_iter().map(|(id, _)| id).collect()
}

/// Starts a finished, delivered task; returns its id once it can be removed.
fn finished_task(sandbox: &Sandbox, text: &str) -> String {
    let id = sandbox.start(&format!("echo {text}"));
    eventually("the task to end", || ended(sandbox, &id).then_some(()));
    sandbox.ok(&["notifications"]);
    id
}

#[test]
fn rm_refuses_live_and_undelivered_tasks_and_removes_delivered_ones() {
    let sandbox = Sandbox::new();
    let live = sandbox.start("sleep 1000");
    let refused = sandbox.run(&["rm", &live]);
    assert_eq!(refused.status.code(), Some(70));
    let why = String::from_utf8(refused.stderr).unwrap();
    assert!(why.contains("still live"), "{why}");

    let undelivered = sandbox.start("echo unread");
    eventually("the task to end", || {
        ended(&sandbox, &undelivered).then_some(())
    });
    let refused = sandbox.run(&["rm", &undelivered]);
    let why = String::from_utf8(refused.stderr).unwrap();
    assert!(why.contains("not been delivered"), "{why}");
    assert!(listed(&sandbox).contains(&undelivered));

    let delivered = sandbox.ok(&["notifications"]);
    assert!(delivered.contains(&undelivered), "{delivered}");
    let output = sandbox
        .root()
        .join(format!("default/tasks/{undelivered}.output"));
    assert!(output.exists());
    eventually("the task to be removable", || {
        sandbox
            .run(&["rm", &undelivered])
            .status
            .success()
            .then_some(())
    });
    assert!(!listed(&sandbox).contains(&undelivered));
    assert!(!output.exists(), "its output is removed with it");
    assert!(
        listed(&sandbox).contains(&live),
        "the live task is untouched"
    );
    assert_eq!(sandbox.run(&["rm", "../etc"]).status.code(), Some(65));
}

#[test]
fn rm_right_after_the_wait_that_delivered_removes_the_task() {
    // Sweeps 2 s apart: the record settles 4 s after the end, long after `wait` returns.
    let sandbox = Sandbox::new().env("TASKS_SWEEP_MS", "2000");
    let id = sandbox.start("echo done");
    let waited = sandbox.ok(&["wait", &id]);
    assert!(waited.contains(&id), "{waited}");
    let removed = sandbox.run(&["rm", &id]);
    assert!(
        removed.status.success(),
        "rm after wait: {}",
        String::from_utf8_lossy(&removed.stderr)
    );
    assert!(!listed(&sandbox).contains(&id));
}

#[test]
fn prune_never_removes_a_task_whose_completion_races_it() {
    let sandbox = Sandbox::new();
    let gate = sandbox.root().join("gate");
    let script = format!(
        "while [ ! -e {} ]; do sleep 0.001; done; echo done",
        gate.display()
    );
    let racers: Vec<String> = (0..6).map(|_| sandbox.start(&script)).collect();
    // Prunes run back to back while the tasks complete.
    let pruner_id = {
        let mut command = sandbox.command(&[
            "run",
            "--",
            &format!(
                "while [ ! -e {0}.stop ]; do {1} prune >/dev/null || exit 9; done",
                gate.display(),
                env!("CARGO_BIN_EXE_tasks")
            ),
        ]);
        command.stdout(Stdio::piped());
        let started = command.output().unwrap();
        assert!(started.status.success());
        String::from_utf8(started.stdout).unwrap().trim().to_owned()
    };
    std::fs::write(&gate, "").unwrap();
    eventually("every racer to end", || {
        racers.iter().all(|id| ended(&sandbox, id)).then_some(())
    });
    std::fs::write(gate.with_extension("stop"), "").unwrap();
    assert_eq!(
        sandbox.run(&["wait", &pruner_id]).status.code(),
        Some(0),
        "every prune of the loop succeeded"
    );
    let still = listed(&sandbox);
    for id in &racers {
        assert!(
            still.contains(id),
            "{id} was pruned before its completion was delivered"
        );
    }
    let delivered = sandbox.ok(&["notifications"]);
    for id in &racers {
        assert!(
            delivered.contains(id),
            "{id}'s completion is delivered: {delivered}"
        );
    }
    eventually("the racers to be pruned once delivered", || {
        sandbox.ok(&["prune"]);
        let left = listed(&sandbox);
        racers.iter().all(|id| !left.contains(id)).then_some(())
    });
}

#[test]
fn prune_keep_last_keeps_the_newest_finished_tasks() {
    let sandbox = Sandbox::new();
    let ids: Vec<String> = (0..4)
        .map(|n| finished_task(&sandbox, &format!("task{n}")))
        .collect();
    eventually("all four to be removable", || {
        let report = sandbox.json(&["prune", "--keep-last", "2"]);
        let gone: Vec<&str> = report
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        let left = listed(&sandbox);
        (left.len() == 2).then_some((gone.len(), left))
    });
    let left = listed(&sandbox);
    assert_eq!(left.len(), 2);
    assert!(left.contains(&ids[2]) && left.contains(&ids[3]), "{left:?}");
    assert_eq!(
        sandbox.ok(&["prune", "--older-than", "1h"]),
        "removed 0 tasks (0B of output)\n"
    );
    let bad = sandbox.run(&["prune", "--max-size", "lots"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn the_supervisor_retention_keeps_the_newest_finished_tasks_and_never_a_live_one() {
    let sandbox = Sandbox::new();
    let run = |command: &str| {
        let output = sandbox
            .command(&["run", "--", command])
            .env("TASKS_RETENTION_KEEP_LAST", "2")
            .env("TASKS_RETENTION_INTERVAL_MS", "50")
            .output()
            .unwrap();
        assert!(output.status.success());
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    };
    let live = run("sleep 1000");
    // One after another, so the newest ends are those of the last two (retention ranks by end
    // time; tasks started together may end in any order).
    let finished: Vec<String> = (0..5)
        .map(|n| {
            let id = run(&format!("echo {n}"));
            sandbox.ok(&["wait", "--no-deliver", &id]);
            id
        })
        .collect();
    // Undelivered completions are kept, however many.
    assert_eq!(listed(&sandbox).len(), 6);
    sandbox.ok(&["notifications"]);
    let left = eventually("retention to prune down to the newest two", || {
        let left = listed(&sandbox);
        (left.len() == 3).then_some(left)
    });
    assert!(left.contains(&live), "the live task stays: {left:?}");
    assert!(
        left.contains(&finished[3]) && left.contains(&finished[4]),
        "{left:?}"
    );
}
