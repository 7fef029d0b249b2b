//! Benchmarks of task-list on both stores (the list directory and PostgreSQL): create, add an
//! edge on a 10 000-task list, `ready` on 10 000 and 100 000 tasks (and on 100 000 tasks with
//! priorities), claim throughput with 1 and 8 contending processes, by id and with
//! `claim_next`, and (files) 8 threads creating durably through clones of one handle, whose
//! writes share transactions and flushes (group commit), against 8 handles opened apart, one
//! flush each.
//!
//! Run: `cargo bench -p benches --bench list -- --warm-up-time 1 --measurement-time 3`. A
//! filter (`… -- list_claim_next`) also skips the setup of the groups it leaves out.
//! The PostgreSQL benches run when `TASKS_BENCH_PG_URL` (or `TASKS_TEST_PG_URL`, as
//! `.ci/postgres.sh start` prints it) names a server; they work in a schema of their own,
//! dropped at the end. The claim workers are this same binary, re-executed with
//! `LIST_BENCH_CLAIM_WORKER` set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput};
use task_list::{
    ClaimOptions, CreateRequest, EXPORT_FORMAT, ListExport, StoreConfig, Task, TaskId, TaskList,
    UpdateRequest,
};

const TASKS: u64 = 10_000;
const BIG: u64 = 100_000;
const CLAIM_TASKS: u64 = 500;
const WORKER_ENV: &str = "LIST_BENCH_CLAIM_WORKER";

/// Bulk benches skip fsync (`durable: false`; on PostgreSQL `synchronous_commit = off`): the
/// figures then measure the store, not the disk. `create_one_durable` shows the cost of one
/// fully durable create.
fn fast() -> StoreConfig {
    StoreConfig {
        durable: false,
        ..StoreConfig::default()
    }
}

/// Where the benched lists live.
enum Store {
    Files(tempfile::TempDir),
    Postgres {
        url: String,
        admin: Box<postgres::Client>,
        schema: String,
    },
}

impl Store {
    fn name(&self) -> &'static str {
        match self {
            Self::Files(_) => "files",
            Self::Postgres { .. } => "postgres",
        }
    }

    /// The location a claim worker gets: a directory or a URL.
    fn location(&self) -> String {
        match self {
            Self::Files(dir) => dir.path().display().to_string(),
            Self::Postgres { url, .. } => url.clone(),
        }
    }

    fn open(&self, list: &str, config: StoreConfig) -> TaskList {
        open_at(&self.location(), list, config)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if let Self::Postgres { admin, schema, .. } = self
            && let Err(e) = admin.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        {
            eprintln!("could not drop the bench schema {schema}: {e}");
        }
    }
}

fn open_at(location: &str, list: &str, config: StoreConfig) -> TaskList {
    if location.starts_with("postgres") {
        TaskList::connect(location, list, config).unwrap()
    } else {
        TaskList::open(location, list, config).unwrap()
    }
}

/// The file store, and PostgreSQL when a server is configured.
fn stores() -> Vec<Store> {
    let mut stores = vec![Store::Files(tempfile::tempdir().unwrap())];
    let url = std::env::var("TASKS_BENCH_PG_URL").or_else(|_| std::env::var("TASKS_TEST_PG_URL"));
    match url {
        Ok(base) => {
            let schema = format!("bench_{}", std::process::id());
            let mut admin = postgres::Client::connect(&base, postgres::NoTls).unwrap();
            admin
                .batch_execute(&format!("CREATE SCHEMA {schema}"))
                .unwrap();
            let sep = if base.contains('?') { '&' } else { '?' };
            let url = format!("{base}{sep}options=-csearch_path%3D{schema}");
            stores.push(Store::Postgres {
                url,
                admin: Box::new(admin),
                schema,
            });
        }
        Err(_) => eprintln!("PostgreSQL benches skipped: set TASKS_BENCH_PG_URL"),
    }
    stores
}

/// `n` tasks, each but the first waiting on a pseudo-random lower-numbered one (no cycle),
/// loaded in one import (far faster than `n` creates, on both stores).
fn list_with_tasks(store: &Store, list: &str, n: u64) -> TaskList {
    import(store, list, tasks_with_edges(n))
}

/// Tasks `1..=n`, each but the first waiting on a pseudo-random lower-numbered one.
fn tasks_with_edges(n: u64) -> Vec<Task> {
    let mut tasks = new_tasks(n);
    for (blocked, blocker) in edges(n).take(n as usize - 1) {
        tasks[blocked as usize - 1]
            .blocked_by
            .push(TaskId::new(blocker).unwrap());
        tasks[blocker as usize - 1]
            .blocks
            .push(TaskId::new(blocked).unwrap());
    }
    tasks
}

/// `n` independent tasks with priorities 0 to 4 in turn: a work queue for `claim_next`.
fn queue_with_tasks(store: &Store, list: &str, n: u64) -> TaskList {
    let mut tasks = new_tasks(n);
    prioritise(&mut tasks);
    import(store, list, tasks)
}

/// Gives `tasks` priorities 0 to 4 in turn.
fn prioritise(tasks: &mut [Task]) {
    for (task, priority) in tasks.iter_mut().zip((0..5_u64).cycle()) {
        task.metadata = Some(task_list::Metadata::from_iter([(
            task_list::PRIORITY_KEY.into(),
            priority.into(),
        )]));
    }
}

/// Tasks `1..=n`, pending, no edges.
fn new_tasks(n: u64) -> Vec<Task> {
    (1..=n)
        .map(|i| {
            Task::new(
                TaskId::new(i).unwrap(),
                format!("task {i}"),
                "benchmark task",
            )
        })
        .collect()
}

/// Loads `tasks` into the new list `list` in one import.
fn import(store: &Store, list: &str, tasks: Vec<Task>) -> TaskList {
    let export = ListExport {
        format: EXPORT_FORMAT.into(),
        list_id: list.into(),
        high_water_mark: tasks.len() as u64,
        tasks,
        audit: Vec::new(),
    };
    let handle = store.open(list, fast());
    handle.import(&export).unwrap();
    handle
}

/// Endless edges over tasks `1..=n`: each makes a task wait on a pseudo-random lower-numbered
/// one, so they never form a cycle.
fn edges(n: u64) -> impl Iterator<Item = (u64, u64)> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..).map(move |i| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let blocked = 2 + (i * 7919) % (n - 1);
        (blocked, 1 + x % (blocked - 1))
    })
}

fn add_edge(list: &TaskList, blocked: u64, blocker: u64) {
    let mut request = UpdateRequest::new(blocked);
    request.add_blocked_by = Some(vec![blocker.to_string()]);
    list.update(&request).unwrap();
}

/// Per-task create time while one list grows, and one fully durable create.
fn create(c: &mut Criterion, store: &Store) {
    let mut group = c.benchmark_group(format!("list_create/{}", store.name()));
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    let list = store.open("create", fast());
    group.bench_function("create_one_growing", |b| {
        b.iter(|| {
            list.create(&CreateRequest::new("task", "benchmark task"))
                .unwrap()
        })
    });
    eprintln!(
        "list_create: the list holds {} tasks",
        list.snapshot().unwrap().tasks.len()
    );
    let durable = store.open("durable", StoreConfig::default());
    group.bench_function("create_one_durable", |b| {
        b.iter(|| durable.create(&CreateRequest::new("t", "d")).unwrap())
    });
    group.finish();
}

/// Per-edge time of `addBlockedBy` on a 10 000-task list, edges accumulating.
fn add_edges(c: &mut Criterion, store: &Store) {
    let list = list_with_tasks(store, "edges", TASKS);
    let mut next = edges(TASKS).skip(TASKS as usize);
    let mut group = c.benchmark_group(format!("list_edges/{}", store.name()));
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    group.bench_function("add_edge_10k_tasks", |b| {
        b.iter(|| {
            let (blocked, blocker) = next.next().unwrap();
            add_edge(&list, blocked, blocker);
        })
    });
    group.finish();
}

/// `ready` on 10 000 and 100 000 tasks (one edge each), warm (a handle that has read the list)
/// and cold (a new handle).
fn ready(c: &mut Criterion, store: &Store) {
    let mut group = c.benchmark_group(format!("list_ready/{}", store.name()));
    group.sample_size(10);
    for (n, name) in [(TASKS, "10k"), (BIG, "100k")] {
        let start = Instant::now();
        let list = list_with_tasks(store, &format!("ready{n}"), n);
        eprintln!(
            "list_ready/{}: imported {n} tasks in {:.2?}",
            store.name(),
            start.elapsed()
        );
        let_the_cache_take();
        group.bench_function(format!("ready_{name}_tasks_warm"), |b| {
            b.iter(|| list.ready().unwrap())
        });
        group.bench_function(format!("ready_{name}_tasks_cold"), |b| {
            b.iter_batched(
                || store.open(&format!("ready{n}"), fast()),
                |cold| cold.ready().unwrap(),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// `ready` on 100 000 tasks with one edge each and priorities 0 to 4 in turn, warm: the ready
/// tasks ranked by priority, then position, then id (as `claim_next` takes them).
fn ready_with_priorities(c: &mut Criterion, store: &Store) {
    let mut group = c.benchmark_group(format!("list_ready_priorities/{}", store.name()));
    group.sample_size(10);
    let mut tasks = tasks_with_edges(BIG);
    prioritise(&mut tasks);
    let start = Instant::now();
    let list = import(store, "readyprio", tasks);
    eprintln!(
        "list_ready_priorities/{}: imported {BIG} tasks in {:.2?}",
        store.name(),
        start.elapsed()
    );
    let_the_cache_take();
    group.bench_function("ready_100k_tasks_warm", |b| {
        b.iter(|| list.ready().unwrap())
    });
    group.finish();
}

/// Whether the benchmark group `group` may run: no filter was given, or one selects it
/// ([`selects`]), so that a filter skips the setup of the groups it leaves out, not only their
/// measurements.
fn runs(group: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-') && a.parse::<f64>().is_err())
        .collect();
    filters.is_empty() || filters.iter().any(|f| selects(f, group))
}

/// Whether filter `f` selects `group`: it is a prefix of the group's name that does not stop
/// inside a word (`list_claim` is not `list_claim_next`), or it names one of its benchmarks.
fn selects(f: &str, group: &str) -> bool {
    match group.strip_prefix(f) {
        Some(rest) => !rest.starts_with('_'),
        None => f.starts_with(&format!("{group}/")),
    }
}

/// How a claim worker claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claiming {
    /// `claim` of every task, in an order of its own: one winner per task, the rest refusals.
    ById,
    /// `claim_next` until nothing is ready, on a list of independent tasks with priorities:
    /// every call a win, the tasks shared out.
    Next,
}

impl Claiming {
    fn name(self) -> &'static str {
        match self {
            Self::ById => "claim",
            Self::Next => "claim_next",
        }
    }
}

fn claims(c: &mut Criterion, store: &Store, claiming: Claiming) {
    let mut group = c.benchmark_group(format!("list_{}/{}", claiming.name(), store.name()));
    group.sample_size(10);
    let mut round = 0;
    for processes in [1_u64, 8] {
        // By id, every process tries every task; with `claim_next` the tasks are shared out.
        let attempts = match claiming {
            Claiming::ById => processes * CLAIM_TASKS,
            Claiming::Next => CLAIM_TASKS,
        };
        group.throughput(Throughput::Elements(attempts));
        group.bench_function(
            format!(
                "{}_{CLAIM_TASKS}_tasks_{processes}_processes",
                claiming.name()
            ),
            |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        round += 1;
                        let list = format!("{}{round}", claiming.name());
                        match claiming {
                            Claiming::ById => list_with_tasks(store, &list, CLAIM_TASKS),
                            Claiming::Next => queue_with_tasks(store, &list, CLAIM_TASKS),
                        };
                        let start = Instant::now();
                        let mut workers: Vec<_> = (0..processes)
                            .map(|w| {
                                let spec = format!("{}|{list}|w{w}|{claiming:?}", store.location());
                                Command::new(std::env::current_exe().unwrap())
                                    .env(WORKER_ENV, spec)
                                    .spawn()
                                    .unwrap()
                            })
                            .collect();
                        for worker in &mut workers {
                            assert!(worker.wait().unwrap().success());
                        }
                        total += start.elapsed();
                    }
                    total
                });
            },
        );
    }
    group.finish();
}

/// A claim worker: tries to claim every task of the list, in an order of its own (`ById`), or
/// claims the next ready task until none is (`Next`).
fn claim_worker(spec: &str) {
    let mut parts = spec.split('|');
    let (location, list, worker, claiming) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let list = open_at(location, list, fast());
    if claiming == "Next" {
        while list
            .claim_next(worker, ClaimOptions::default())
            .unwrap()
            .is_some()
        {}
        return;
    }
    let offset = worker.trim_start_matches('w').parse::<u64>().unwrap() * 61;
    for i in 0..CLAIM_TASKS {
        let id = TaskId::new(1 + (i + offset) % CLAIM_TASKS).unwrap();
        list.claim(id, worker, ClaimOptions::default()).unwrap();
    }
}

fn main() {
    if let Ok(spec) = std::env::var(WORKER_ENV) {
        claim_worker(&spec);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    for store in stores() {
        if runs("list_create") {
            create(&mut c, &store);
        }
        if runs("list_edges") {
            add_edges(&mut c, &store);
        }
        if runs("list_ready") {
            ready(&mut c, &store);
        }
        if runs("list_ready_priorities") {
            ready_with_priorities(&mut c, &store);
        }
        if runs("list_claim") {
            claims(&mut c, &store, Claiming::ById);
        }
        if runs("list_claim_next") {
            claims(&mut c, &store, Claiming::Next);
        }
        if runs("list_group_commit") {
            group_commit(&mut c, &store);
        }
    }
    c.final_summary();
}

/// Durable creates by 8 threads at once, 16 each: through clones of one handle (they share
/// transactions, and so journal flushes) and through 8 handles opened apart (one flush each).
/// Time per create. On the file store only; the list lives in `$TMPDIR`, so on a disk there
/// for the flushes to cost what they do.
fn group_commit(c: &mut Criterion, store: &Store) {
    const THREADS: u64 = 8;
    const EACH: u64 = 16;
    if store.location().starts_with("postgres") {
        return;
    }
    let mut group = c.benchmark_group("list_group_commit/files");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    group.throughput(Throughput::Elements(THREADS * EACH));
    for (name, shared) in [
        ("8_threads_one_handle", true),
        ("8_threads_8_handles", false),
    ] {
        let one = store.open(name, StoreConfig::default());
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let handles: Vec<TaskList> = (0..THREADS)
                    .map(|_| match shared {
                        true => one.clone(),
                        false => store.open(name, StoreConfig::default()),
                    })
                    .collect();
                let start = Instant::now();
                for _ in 0..iters {
                    std::thread::scope(|scope| {
                        for list in &handles {
                            scope.spawn(move || {
                                for _ in 0..EACH {
                                    list.create(&CreateRequest::new("t", "d")).unwrap();
                                }
                            });
                        }
                    });
                }
                start.elapsed()
            })
        });
    }
    group.finish();
}

/// Waits until the file store's snapshot cache takes the files just written: it keeps only
/// files unchanged for `cache_min_age` (2 s; 50 ms on a local filesystem), so a "warm"
/// figure is one of a cache that holds them. A wait on the clock, not on an event: the cache
/// decides by the files' age.
fn let_the_cache_take() {
    std::thread::sleep(Duration::from_millis(2100));
}
