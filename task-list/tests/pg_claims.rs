//! Claims on PostgreSQL from separate OS processes, on one host and on two: exactly one winner
//! per task, and the list and its audit log agree with the winners.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::netns::TwoHosts;
use common::{Fixture, Rng, create, fast_config};
use task_list::{Actor, AuditOp, ClaimOptions, TaskId, TaskList};

/// `{url}|{worker}|{attempts}|{tasks}|{seed}|{report}`: turns the test binary into a claimer.
const CLAIMER_ENV: &str = "TASK_LIST_TEST_PG_CLAIMER";
/// `{url}|setup|{tasks}`, `{url}|dump|{file}` or `{url}|probe`: turns the test binary into a helper that
/// creates the tasks, or writes what the list says (for a server only another namespace reaches).
const HELPER_ENV: &str = "TASK_LIST_TEST_PG_HELPER";

/// Makes the command that runs a program "on a host" (here, or in a network namespace).
type Host<'a> = &'a dyn Fn(&Path) -> Command;

/// What the list says after the claims.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Outcome {
    owners: BTreeMap<u64, String>,
    claims: Vec<(u64, String)>,
    clean: bool,
}

impl Outcome {
    fn of(list: &TaskList) -> Self {
        let (records, problems) = list.audit_log().unwrap();
        assert!(problems.is_empty());
        Self {
            owners: list
                .snapshot()
                .unwrap()
                .tasks
                .values()
                .filter_map(|t| Some((t.id.get(), t.owner.clone()?)))
                .collect(),
            claims: records
                .iter()
                .filter(|r| r.op == AuditOp::Claim)
                .map(|r| (r.task_id.unwrap().get(), r.actor.clone()))
                .collect(),
            clean: list.doctor(false).unwrap().is_clean(),
        }
    }
}

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
            writeln!(report, "won {task}").unwrap();
        }
        writeln!(report, "tried").unwrap();
    }
}

/// Not a test on its own: sets a list up, or dumps its [`Outcome`].
#[test]
fn helper() {
    let Ok(spec) = std::env::var(HELPER_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    if parts[1..] == ["probe"] {
        // One connection attempt, no retries: exit 0 only if the server is reachable.
        let mut config = fast_config();
        config.pg.retries = 0;
        config.pg.connect_timeout = std::time::Duration::from_secs(2);
        std::process::exit(i32::from(
            TaskList::connect(parts[0], "probe", config).is_err(),
        ));
    }
    let list = TaskList::connect(parts[0], "list", fast_config()).unwrap();
    match parts[1..] {
        ["setup", tasks] => {
            for n in 0..tasks.parse::<u64>().unwrap() {
                create(&list, &format!("t{n}"));
            }
        }
        ["dump", file] => {
            std::fs::write(file, serde_json::to_vec(&Outcome::of(&list)).unwrap()).unwrap();
        }
        _ => panic!("bad helper spec {spec}"),
    }
}

/// Starts this test binary as `test` (`claimer` or `helper`) with `env` set to `spec`, through
/// `wrap` (e.g. into a network namespace).
fn spawn(
    wrap: &dyn Fn(&Path) -> Command,
    test: &str,
    env: &str,
    spec: &str,
) -> std::process::Child {
    wrap(&std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1", "--quiet"])
        .env(env, spec)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_all(children: Vec<std::process::Child>) {
    for mut child in children {
        assert!(
            child.wait().unwrap().success(),
            "a claimer or helper failed"
        );
    }
}

/// Runs one claimer per `(name, wrap)` against `url`; returns each claimer's report file.
fn run_claimers(
    url: &str,
    claimers: &[(String, Host<'_>)],
    attempts: u64,
    tasks: u64,
    dir: &Path,
) -> Vec<(String, PathBuf)> {
    let reports: Vec<_> = claimers
        .iter()
        .map(|(name, _)| (name.clone(), dir.join(name)))
        .collect();
    let children = claimers
        .iter()
        .zip(&reports)
        .enumerate()
        .map(|(n, ((name, wrap), (_, report)))| {
            let spec = format!(
                "{url}|{name}|{attempts}|{tasks}|{}|{}",
                77 + n,
                report.display()
            );
            spawn(*wrap, "claimer", CLAIMER_ENV, &spec)
        })
        .collect();
    wait_all(children);
    reports
}

/// Every claimer made all its attempts; no task has two winners; the owners and the audit
/// log's claim records are exactly the winners. Returns the winners.
fn verify(
    reports: &[(String, PathBuf)],
    attempts: u64,
    outcome: &Outcome,
) -> BTreeMap<u64, String> {
    let mut winners: BTreeMap<u64, String> = BTreeMap::new();
    for (name, report) in reports {
        let text = std::fs::read_to_string(report).unwrap();
        assert_eq!(
            text.lines().filter(|l| *l == "tried").count() as u64,
            attempts,
            "{name}"
        );
        for task in text.lines().filter_map(|l| l.strip_prefix("won ")) {
            let task: u64 = task.parse().unwrap();
            if let Some(other) = winners.insert(task, name.clone()) {
                panic!("task {task} won by both {other} and {name}");
            }
        }
    }
    assert_eq!(outcome.owners, winners, "owners vs winners");
    assert_eq!(
        outcome.claims.len(),
        winners.len(),
        "claim records vs winners"
    );
    assert_eq!(
        outcome.claims.iter().cloned().collect::<BTreeMap<_, _>>(),
        winners,
        "claim records name the winners"
    );
    assert!(outcome.clean, "doctor finds problems");
    winners
}

#[test]
fn eight_processes_claiming_get_exactly_one_winner_per_task() {
    const ATTEMPTS: u64 = 500;
    const TASKS: u64 = 400;
    let Some(fx) = Fixture::postgres() else {
        return;
    };
    let list = fx.open();
    for n in 0..TASKS {
        create(&list, &format!("t{n}"));
    }
    let dir = tempfile::tempdir().unwrap();
    let local = |program: &Path| Command::new(program);
    let claimers: Vec<(String, Host<'_>)> =
        (0..8).map(|w| (format!("w{w}"), &local as _)).collect();
    let reports = run_claimers(&fx.location(), &claimers, ATTEMPTS, TASKS, dir.path());
    let winners = verify(&reports, ATTEMPTS, &Outcome::of(&list));
    assert!(
        winners.len() as u64 > TASKS / 2,
        "too few claims to mean anything"
    );
}

#[test]
fn claimers_on_two_hosts_get_exactly_one_winner_per_task() {
    const ATTEMPTS: u64 = 300;
    const TASKS: u64 = 200;
    let hosts = match TwoHosts::new() {
        Ok(hosts) => hosts,
        Err(why) => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the two-host test: {why}"
            );
            eprintln!("skipped: cannot make two network namespaces here: {why}");
            return;
        }
    };
    let in_a = |program: &Path| hosts.command_in(&hosts.a, program);
    let in_b = |program: &Path| hosts.command_in(&hosts.b, program);
    wait_all(vec![spawn(
        &in_a,
        "helper",
        HELPER_ENV,
        &format!("{}|setup|{TASKS}", hosts.url),
    )]);
    let claimers: Vec<(String, Host<'_>)> = (0..4)
        .flat_map(|w| {
            [
                (format!("a{w}"), &in_a as Host<'_>),
                (format!("b{w}"), &in_b as _),
            ]
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let reports = run_claimers(&hosts.url, &claimers, ATTEMPTS, TASKS, dir.path());
    // The list is read from host B, through the veth pair.
    let dump = dir.path().join("outcome.json");
    let spec = format!("{}|dump|{}", hosts.url, dump.display());
    wait_all(vec![spawn(&in_b, "helper", HELPER_ENV, &spec)]);
    let outcome: Outcome = serde_json::from_slice(&std::fs::read(&dump).unwrap()).unwrap();
    let winners = verify(&reports, ATTEMPTS, &outcome);
    assert!(
        winners.len() as u64 > TASKS / 2,
        "too few claims to mean anything"
    );
    // And host B really is another host: the test server on this namespace's loopback is not
    // reachable from it.
    if let Ok(local) = std::env::var(common::stores::PG_URL_ENV) {
        let spec = format!("{local}|dump|{}", dir.path().join("never").display());
        let mut child = spawn(&in_b, "helper", HELPER_ENV, &spec);
        assert!(
            !child.wait().unwrap().success(),
            "host B reached this host's loopback"
        );
    }
}
