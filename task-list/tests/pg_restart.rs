//! A PostgreSQL server restart under load and under a watcher.
//!
//! The tests here restart the shared test server, so they take a lock between themselves and
//! live in their own test binary (cargo runs test binaries one at a time).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use common::stores::restart_server;
use common::{Fixture, assert_consistent, create, spawn_worker, wait_until};
use task_list::{AuditOp, StoreConfig, WatchConfig};

/// One restart at a time.
static SERVER: Mutex<()> = Mutex::new(());

const WORKERS: usize = 4;
const OPS_PER_WORKER: u64 = 400;

/// Not a test on its own: the body of each worker process.
#[test]
fn restart_worker() {
    common::run_worker_from_env();
}

#[test]
fn mixed_workload_across_a_server_restart_commits_each_operation_once() {
    let _serial = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(fx) = Fixture::postgres() else {
        return;
    };
    let list = fx.open();
    for n in 0..20 {
        create(&list, &format!("seed {n}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let reports: Vec<_> = (0..WORKERS)
        .map(|w| dir.path().join(format!("w{w}")))
        .collect();
    let mut children: Vec<_> = (0..WORKERS)
        .map(|w| {
            let spec = format!(
                "{}|w{w}|{OPS_PER_WORKER}|{}|{}",
                fx.location(),
                500 + w,
                reports[w].display()
            );
            spawn_worker("restart_worker", &spec)
        })
        .collect();
    let records = || list.audit_log().unwrap().0.len();
    wait_until("the workload to get going", || records() > 100);
    if !restart_server() {
        return;
    }
    let after_restart = records();
    let running = children
        .iter_mut()
        .map(|c| c.try_wait().unwrap().is_none())
        .filter(|&alive| alive)
        .count();
    assert!(running > 0, "every worker had finished before the restart");
    for child in &mut children {
        assert!(child.wait().unwrap().success(), "a worker failed");
    }
    assert!(
        records() > after_restart,
        "nothing was written after the restart"
    );

    // What the workers say they did, against what the audit log says happened.
    let mut reported: BTreeMap<(String, u64), usize> = BTreeMap::new();
    let mut errors = 0;
    for report in &reports {
        for line in std::fs::read_to_string(report).unwrap().lines() {
            match line.split_once(' ').unwrap() {
                ("error", _) => errors += 1,
                (op, task) => {
                    *reported
                        .entry((op.into(), task.parse().unwrap()))
                        .or_default() += 1
                }
            }
        }
    }
    let mut logged: BTreeMap<(String, u64), usize> = BTreeMap::new();
    let (audit, problems) = list.audit_log().unwrap();
    assert!(problems.is_empty());
    for record in audit.iter().skip(20) {
        let op = match record.op {
            AuditOp::Create => "create",
            AuditOp::Claim => "claim",
            AuditOp::Update => "update",
            AuditOp::Delete => "delete",
            other => panic!("unexpected {other:?}"),
        };
        *logged
            .entry((op.into(), record.task_id.unwrap().get()))
            .or_default() += 1;
    }
    let keys: std::collections::BTreeSet<_> = logged.keys().chain(reported.keys()).collect();
    let differ: Vec<_> = keys
        .into_iter()
        .filter(|k| logged.get(*k) != reported.get(*k))
        .map(|k| (k, logged.get(k), reported.get(k)))
        .collect();
    assert!(
        differ.is_empty(),
        "(op, task): (logged, reported) differ ({errors} operations failed): {differ:?}"
    );
    assert!(list.doctor(false).unwrap().is_clean());
    assert_consistent(&list);
}

#[test]
fn watch_catches_up_after_a_server_restart() {
    let _serial = SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let Some(fx) = Fixture::postgres() else {
        return;
    };
    // No fallback poll: only the reconnect's re-read can see what happened while it was away.
    let config = StoreConfig {
        watch: WatchConfig {
            debounce: Duration::from_millis(20),
            poll_every: Duration::from_secs(3600),
        },
        ..common::fast_config()
    };
    let list = fx.open_with("list", config);
    create(&list, "a");
    let mut watcher = list.watch().unwrap();
    if !restart_server() {
        return;
    }
    // Notified while the watcher's connection is dead: nobody receives that notification.
    create(&fx.open(), "b");
    let change = watcher
        .next_change(Some(Duration::from_secs(30)))
        .unwrap()
        .expect("the change made while disconnected");
    assert_eq!(change.created, vec![common::id(2)]);
    // And it listens again.
    create(&fx.open(), "c");
    let change = watcher
        .next_change(Some(Duration::from_secs(30)))
        .unwrap()
        .expect("a change after the reconnect");
    assert_eq!(change.created, vec![common::id(3)]);
}
