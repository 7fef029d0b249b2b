//! Eight separate OS processes hammer one list; nothing is lost, duplicated or torn.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::{assert_consistent, open, spawn_worker};
use task_list::AuditOp;

const WORKERS: usize = 8;
const OPS_PER_WORKER: u64 = 300;

/// Not a test on its own: the body of each worker process.
#[test]
fn stress_worker() {
    common::run_worker_from_env();
}

#[test]
fn eight_writer_processes_lose_nothing() {
    let root = tempfile::tempdir().unwrap();
    let list = open(root.path());
    let reports: Vec<_> = (0..WORKERS)
        .map(|w| root.path().join(format!("report-{w}")))
        .collect();
    let mut children: Vec<_> = (0..WORKERS)
        .map(|w| {
            let spec = format!(
                "{}|w{w}|{OPS_PER_WORKER}|{}|{}",
                root.path().display(),
                1000 + w,
                reports[w].display()
            );
            spawn_worker("stress_worker", &spec)
        })
        .collect();
    for child in &mut children {
        assert!(child.wait().unwrap().success(), "a worker failed");
    }

    // What the workers say they did.
    let mut done: Vec<(String, String, u64)> = Vec::new();
    for (w, report) in reports.iter().enumerate() {
        for line in std::fs::read_to_string(report).unwrap_or_default().lines() {
            let (op, task) = line.split_once(' ').unwrap();
            done.push((op.to_string(), format!("w{w}"), task.parse().unwrap()));
        }
    }
    let created: Vec<u64> = done
        .iter()
        .filter(|d| d.0 == "create")
        .map(|d| d.2)
        .collect();
    let unique: BTreeSet<u64> = created.iter().copied().collect();
    assert_eq!(unique.len(), created.len(), "an id was issued twice");
    assert!(
        created.len() > WORKERS * 50,
        "too few creates to mean anything: {}",
        created.len()
    );

    // Every claimed task has exactly one winner, and the file names it.
    let mut winners: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
    for (op, worker, task) in &done {
        if op == "claim" {
            winners.entry(*task).or_default().insert(worker);
        }
    }
    let snapshot = list.snapshot().unwrap();
    for (task, who) in &winners {
        assert_eq!(who.len(), 1, "task {task} claimed by {who:?}");
        if let Some(t) = snapshot.tasks.get(&common::id(*task)) {
            assert_eq!(t.owner.as_deref(), who.first().copied(), "task {task}");
        }
    }
    for task in snapshot.tasks.values() {
        if let Some(owner) = &task.owner {
            assert!(
                winners
                    .get(&task.id.get())
                    .is_some_and(|w| w.contains(owner.as_str())),
                "{task:?}"
            );
        }
    }

    assert_consistent(&list);
    let doctor = list.doctor(false).unwrap();
    assert!(doctor.is_clean(), "{:?}", doctor.problems);

    // One audit record per successful operation, with the right actor.
    let (records, problems) = list.audit_log().unwrap();
    assert!(problems.is_empty());
    let mut logged: Vec<(String, String, u64)> = records
        .iter()
        .map(|r| {
            let op = match r.op {
                AuditOp::Create => "create",
                AuditOp::Claim => "claim",
                AuditOp::Update => "update",
                AuditOp::Delete => "delete",
                other => panic!("unexpected audit op {other:?}"),
            };
            (op.to_string(), r.actor.clone(), r.task_id.unwrap().get())
        })
        .collect();
    logged.sort();
    done.sort();
    assert_eq!(logged.len(), done.len());
    assert_eq!(logged, done);
}
