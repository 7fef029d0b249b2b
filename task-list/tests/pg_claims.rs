//! Claims on PostgreSQL from separate OS processes: exactly one winner per task.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;

use common::{Fixture, Rng, create, fast_config};
use task_list::{Actor, AuditOp, ClaimOptions, TaskId, TaskList};

const PROCESSES: usize = 8;
const ATTEMPTS: u64 = 500;
const TASKS: u64 = 400;

/// `{url}|{worker}|{attempts}|{tasks}|{seed}|{report}`: turns the test binary into a claimer.
const CLAIMER_ENV: &str = "TASK_LIST_TEST_PG_CLAIMER";

/// Not a test on its own: the body of each claimer process.
#[test]
fn claimer() {
    let Ok(spec) = std::env::var(CLAIMER_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [url, worker, attempts, tasks, seed, report] = parts[..] else {
        panic!("bad claimer spec {spec}")
    };
    let list = TaskList::connect(url, "list", fast_config())
        .unwrap()
        .with_actor(Actor::new(worker));
    let mut report = std::fs::File::create(report).unwrap();
    let mut rng = Rng::new(seed.parse().unwrap());
    let tasks: u64 = tasks.parse().unwrap();
    let mut won = BTreeSet::new();
    for _ in 0..attempts.parse::<u64>().unwrap() {
        let task = TaskId::new(1 + rng.below(tasks)).unwrap();
        let result = list.claim(task, worker, ClaimOptions::default()).unwrap();
        if result.success && won.insert(task) {
            writeln!(report, "{task}").unwrap();
        }
    }
}

#[test]
fn eight_processes_claiming_get_exactly_one_winner_per_task() {
    let Some(fx) = Fixture::postgres() else {
        return;
    };
    let list = fx.open();
    for n in 0..TASKS {
        create(&list, &format!("t{n}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let reports: Vec<_> = (0..PROCESSES)
        .map(|w| dir.path().join(format!("w{w}")))
        .collect();
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|w| {
            let spec = format!(
                "{}|w{w}|{ATTEMPTS}|{TASKS}|{}|{}",
                fx.location(),
                77 + w,
                reports[w].display()
            );
            std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "claimer", "--test-threads=1", "--quiet"])
                .env(CLAIMER_ENV, spec)
                .stdout(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in &mut children {
        assert!(child.wait().unwrap().success(), "a claimer failed");
    }

    // Winners as the claimers saw them: never two for one task.
    let mut winners: BTreeMap<u64, String> = BTreeMap::new();
    for (w, report) in reports.iter().enumerate() {
        for line in std::fs::read_to_string(report).unwrap().lines() {
            let task: u64 = line.parse().unwrap();
            if let Some(other) = winners.insert(task, format!("w{w}")) {
                panic!("task {task} won by both {other} and w{w}");
            }
        }
    }
    assert!(
        winners.len() as u64 > TASKS / 2,
        "too few claims to mean anything: {}",
        winners.len()
    );
    // The list agrees: every winner owns its task, nobody owns a task nobody won.
    let owners: BTreeMap<u64, String> = list
        .snapshot()
        .unwrap()
        .tasks
        .values()
        .filter_map(|t| Some((t.id.get(), t.owner.clone()?)))
        .collect();
    assert_eq!(owners, winners);
    // The audit log agrees: one claim record per won task, by its winner.
    let (records, problems) = list.audit_log().unwrap();
    assert!(problems.is_empty());
    let claims: Vec<(u64, String)> = records
        .iter()
        .filter(|r| r.op == AuditOp::Claim)
        .map(|r| (r.task_id.unwrap().get(), r.actor.clone()))
        .collect();
    assert_eq!(claims.len(), winners.len(), "claim records vs winners");
    assert_eq!(
        claims.into_iter().collect::<BTreeMap<_, _>>(),
        winners,
        "claim records name the winners"
    );
    assert!(list.doctor(false).unwrap().is_clean());
}
