//! Benchmarks of task-list: create 10 000 tasks, add 10 000 edges, `ready` over 10 000 tasks,
//! and claim throughput with 1 and 8 contending processes.
//!
//! Run: `cargo bench -p benches --bench list -- --warm-up-time 1 --measurement-time 3`.
//! The claim workers are this same binary, re-executed with `LIST_BENCH_CLAIM_WORKER` set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, SamplingMode, Throughput};
use task_list::{ClaimOptions, CreateRequest, StoreConfig, TaskId, TaskList, UpdateRequest};

const TASKS: u64 = 10_000;
const CLAIM_TASKS: u64 = 500;
const WORKER_ENV: &str = "LIST_BENCH_CLAIM_WORKER";

/// Bulk benches skip fsync (`durable: false`): the figures then measure this crate, not the
/// disk. `create_one_durable` shows the cost of one fully durable create.
fn fast() -> StoreConfig {
    StoreConfig {
        durable: false,
        ..StoreConfig::default()
    }
}

fn list_with_tasks(root: &Path, n: u64) -> TaskList {
    let list = TaskList::open(root, "bench", fast()).unwrap();
    for i in 0..n {
        list.create(&CreateRequest::new(format!("task {i}"), "benchmark task"))
            .unwrap();
    }
    list
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

/// Per-task create time while one list grows from empty to (about) 10 000 tasks: criterion's
/// warm-up and samples together create that many, each iteration one task.
fn create(c: &mut Criterion) {
    let mut group = c.benchmark_group("list_create");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    let root = tempfile::tempdir().unwrap();
    let list = TaskList::open(root.path(), "bench", fast()).unwrap();
    group.bench_function("create_one_growing_to_10k", |b| {
        b.iter(|| {
            list.create(&CreateRequest::new("task", "benchmark task"))
                .unwrap()
        })
    });
    eprintln!(
        "list_create: the list holds {} tasks",
        list.snapshot().unwrap().tasks.len()
    );
    let durable = TaskList::open(root.path(), "durable", StoreConfig::default()).unwrap();
    group.bench_function("create_one_durable", |b| {
        b.iter(|| durable.create(&CreateRequest::new("t", "d")).unwrap())
    });
    group.finish();
}

/// Per-edge time of `addBlockedBy` on a 10 000-task list, edges accumulating (about 10 000
/// over warm-up and samples).
fn add_edges(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let list = list_with_tasks(root.path(), TASKS);
    let mut next = edges(TASKS);
    let mut group = c.benchmark_group("list_edges");
    group.sample_size(10).sampling_mode(SamplingMode::Flat);
    group.bench_function("add_edge_10k_tasks", |b| {
        b.iter(|| {
            let (blocked, blocker) = next.next().unwrap();
            add_edge(&list, blocked, blocker);
        })
    });
    let edges = list.graph().unwrap().edges().len();
    eprintln!("list_edges: the list holds {edges} edges");
    group.finish();
}

/// Also reports, once, the wall time of creating 10 000 tasks and adding 10 000 edges.
fn ready(c: &mut Criterion) {
    let root = tempfile::tempdir().unwrap();
    let start = Instant::now();
    let list = list_with_tasks(root.path(), TASKS);
    eprintln!(
        "list_ready setup: created {TASKS} tasks in {:.2?}",
        start.elapsed()
    );
    let start = Instant::now();
    for (blocked, blocker) in edges(TASKS).take(TASKS as usize) {
        add_edge(&list, blocked, blocker);
    }
    eprintln!(
        "list_ready setup: added {TASKS} edges in {:.2?}",
        start.elapsed()
    );
    let mut group = c.benchmark_group("list_ready");
    group.sample_size(20);
    // Warm: the handle has parsed every file before and only `stat`s them (once settled;
    // see `StoreConfig::cache_min_age`). Cold: a new handle, so every file is read and parsed.
    group.bench_function("ready_10k_tasks_warm", |b| b.iter(|| list.ready().unwrap()));
    group.bench_function("ready_10k_tasks_cold", |b| {
        b.iter_batched(
            || TaskList::open(root.path(), "bench", fast()).unwrap(),
            |cold| cold.ready().unwrap(),
            BatchSize::PerIteration,
        )
    });
    let snapshot = list.snapshot().unwrap();
    group.bench_function("ready_report_only_10k", |b| {
        b.iter_batched(
            || snapshot.clone(),
            task_list::ready_report,
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

fn claims(c: &mut Criterion) {
    let mut group = c.benchmark_group("list_claim");
    group.sample_size(10);
    for processes in [1_u64, 8] {
        group.throughput(Throughput::Elements(processes * CLAIM_TASKS));
        group.bench_function(
            format!("claim_{CLAIM_TASKS}_tasks_{processes}_processes"),
            |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let root = tempfile::tempdir().unwrap();
                        list_with_tasks(root.path(), CLAIM_TASKS);
                        let start = Instant::now();
                        let mut workers: Vec<_> = (0..processes)
                            .map(|w| {
                                Command::new(std::env::current_exe().unwrap())
                                    .env(WORKER_ENV, format!("{}|w{w}", root.path().display()))
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

/// A claim worker: tries to claim every task of the list, in an order of its own.
fn claim_worker(spec: &str) {
    let (root, worker) = spec.split_once('|').unwrap();
    let list = TaskList::open(root, "bench", fast()).unwrap();
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
    create(&mut c);
    add_edges(&mut c);
    ready(&mut c);
    claims(&mut c);
    c.final_summary();
}
