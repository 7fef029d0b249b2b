//! Shared helpers for the integration tests.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr
)]

use std::time::{Duration, Instant};

use task_list::{
    CreateRequest, LockConfig, StoreConfig, TaskId, TaskList, UpdateRequest, UpdateResult,
};

/// Millisecond-scale lock timings.
pub fn fast_config() -> StoreConfig {
    StoreConfig {
        lock: LockConfig {
            stale_after: Duration::from_millis(300),
            refresh_every: Duration::from_millis(50),
            retries: 60,
            min_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(20),
            ..LockConfig::default()
        },
        ..StoreConfig::default()
    }
}

pub fn open(root: &std::path::Path) -> TaskList {
    TaskList::open(root, "list", fast_config()).unwrap()
}

pub fn create(list: &TaskList, subject: &str) -> TaskId {
    list.create(&CreateRequest::new(subject, format!("about {subject}")))
        .unwrap()
        .task
        .id
}

pub fn id(n: u64) -> TaskId {
    TaskId::new(n).unwrap()
}

pub fn add_blocked_by(list: &TaskList, task: u64, blockers: &[u64]) -> UpdateResult {
    let mut request = UpdateRequest::new(task);
    request.add_blocked_by = Some(blockers.iter().map(u64::to_string).collect());
    list.update(&request).unwrap()
}

/// Polls `condition` until it holds, failing after 20 s.
pub fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The env var that turns a test binary into a stress worker: `{root}|{worker}|{ops}|{seed}|{report}`.
pub const WORKER_ENV: &str = "TASK_LIST_TEST_WORKER";

/// A successful, state-changing operation as a worker reports it: `{op} {task}`.
pub fn report_line(op: &str, task: TaskId) -> String {
    format!("{op} {task}\n")
}

/// A tiny deterministic PRNG (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n.max(1)
    }
}

/// Runs as a worker if the env var says so; returns whether it did.
pub fn run_worker_from_env() -> bool {
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return false;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [root, worker, ops, seed, report] = parts[..] else {
        panic!("bad worker spec {spec}")
    };
    // Process kills, not power loss, are what these workers survive: skip the fsyncs.
    let config = StoreConfig {
        durable: false,
        ..fast_config()
    };
    // A PostgreSQL worker rides out server restarts: it reports failed operations as `error`.
    let (list, tolerant) = if root.starts_with("postgres") {
        (TaskList::connect(root, "list", config).unwrap(), true)
    } else {
        (TaskList::open(root, "list", config).unwrap(), false)
    };
    let list = list.with_actor(task_list::Actor::new(worker));
    let mut report = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(report)
        .unwrap();
    run_worker(
        &list,
        worker,
        (ops.parse().unwrap(), seed.parse().unwrap()),
        tolerant,
        &mut report,
    );
    true
}

/// `ops` random operations (create, claim, status update, add edge, delete); every successful
/// state-changing one is reported, one line each, written before the next operation starts.
/// `tolerant`: an operation failing with [`task_list::Error::Database`] is reported as
/// `error {op}` instead of failing the worker.
pub fn run_worker(
    list: &TaskList,
    worker: &str,
    (ops, seed): (u64, u64),
    tolerant: bool,
    report: &mut impl std::io::Write,
) {
    let mut rng = Rng::new(seed);
    let mut claimed = std::collections::HashSet::new();
    let mut highest = list
        .snapshot()
        .unwrap()
        .tasks
        .keys()
        .next_back()
        .map_or(1, |id| id.get())
        .max(1);
    for _ in 0..ops {
        let pick = id(1 + rng.below(highest + 2));
        let (op, outcome) = random_op(list, worker, &mut rng, pick, &mut highest, &mut claimed);
        let line = match outcome {
            Ok(line) => line,
            Err(task_list::Error::Database { .. }) if tolerant => Some(format!("error {op}\n")),
            Err(e) => panic!("{op} failed: {e}"),
        };
        if let Some(line) = line {
            report.write_all(line.as_bytes()).unwrap();
        }
    }
}

/// One random operation: its name, and the report line if it changed something.
fn random_op(
    list: &TaskList,
    worker: &str,
    rng: &mut Rng,
    pick: TaskId,
    highest: &mut u64,
    claimed: &mut std::collections::HashSet<TaskId>,
) -> (&'static str, task_list::Result<Option<String>>) {
    use task_list::{ClaimOptions, UpdateStatus};
    match rng.below(10) {
        0..=2 => (
            "create",
            list.create(&CreateRequest::new(format!("{worker} task"), "stress"))
                .map(|created| {
                    *highest = (*highest).max(created.task.id.get());
                    Some(report_line("create", created.task.id))
                }),
        ),
        3..=4 => (
            "claim",
            list.claim(pick, worker, ClaimOptions::default())
                .map(|result| {
                    (result.success && claimed.insert(pick)).then(|| report_line("claim", pick))
                }),
        ),
        5..=6 => {
            let mut request = UpdateRequest::new(pick);
            request.status = Some(if rng.below(2) == 0 {
                UpdateStatus::InProgress
            } else {
                UpdateStatus::Completed
            });
            (
                "update",
                list.update(&request)
                    .map(|r| changed(r).then(|| report_line("update", pick))),
            )
        }
        7..=8 => {
            let mut request = UpdateRequest::new(pick);
            request.add_blocked_by = Some(vec![(1 + rng.below(*highest + 1)).to_string()]);
            (
                "update",
                list.update(&request)
                    .map(|r| changed(r).then(|| report_line("update", pick))),
            )
        }
        _ => {
            let mut request = UpdateRequest::new(pick);
            request.status = Some(UpdateStatus::Deleted);
            (
                "delete",
                list.update(&request)
                    .map(|r| r.success.then(|| report_line("delete", pick))),
            )
        }
    }
}

fn changed(result: UpdateResult) -> bool {
    result.success && !result.updated_fields.is_empty()
}

/// Starts this test binary as a worker running only `test_name`.
pub fn spawn_worker(test_name: &str, spec: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test_name, "--test-threads=1", "--quiet"])
        .env(WORKER_ENV, spec)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The invariants every list must satisfy after any number of writers, dead or alive.
pub fn assert_consistent(list: &TaskList) {
    let snapshot = list.snapshot().unwrap();
    assert!(
        snapshot.problems.is_empty(),
        "torn or malformed files: {:?}",
        snapshot.problems
    );
    for task in snapshot.tasks.values() {
        for b in &task.blocks {
            let other = snapshot
                .tasks
                .get(b)
                .unwrap_or_else(|| panic!("#{} blocks missing #{b}", task.id));
            assert!(
                other.blocked_by.contains(&task.id),
                "asymmetric edge {} → {b}",
                task.id
            );
        }
        for b in &task.blocked_by {
            let other = snapshot
                .tasks
                .get(b)
                .unwrap_or_else(|| panic!("#{} blocked by missing #{b}", task.id));
            assert!(
                other.blocks.contains(&task.id),
                "asymmetric edge {b} → {}",
                task.id
            );
        }
    }
    assert!(
        list.graph().unwrap().cycles().is_empty(),
        "cycle in the graph"
    );
}

pub mod stores;
pub use stores::Fixture;
pub mod netns;
