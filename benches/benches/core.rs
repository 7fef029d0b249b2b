//! Benchmarks of task-core: the registry's compare-and-set `update` and the `mark_notified`
//! latch under contention from 1, 2 and 8 threads.
//!
//! Each iteration is one operation per thread, all threads at once: the reported time is the
//! wall time for every thread to do one operation, and the throughput is operations per
//! second over all threads. Run with
//! `cargo bench -p benches --bench core -- --warm-up-time 1 --measurement-time 3`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use task_core::{Registry, ShellState, TaskId, TaskKind, TaskState, TaskStatus, TaskType};

const THREADS: [usize; 3] = [1, 2, 8];

fn running_task(registry: &Registry) -> TaskId {
    let id = TaskId::generate(TaskType::LocalBash).unwrap();
    let shell = ShellState {
        command: "cargo build --release".into(),
        ..ShellState::default()
    };
    let task = TaskState::new(
        id,
        "build",
        format!("/tmp/tasks/{id}.output"),
        TaskKind::Shell(shell),
    )
    .unwrap();
    registry.register(task).unwrap();
    registry.transition(&id, TaskStatus::Running).unwrap();
    id
}

/// Runs `op(thread, i)` for `i in 0..iters` on `threads` threads started together; returns
/// the wall time from the common start to the last thread's end.
fn race(threads: usize, iters: u64, op: impl Fn(usize, u64) + Send + Sync + 'static) -> Duration {
    let op = Arc::new(op);
    let start = Arc::new(Barrier::new(threads + 1));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (op, start) = (Arc::clone(&op), Arc::clone(&start));
            thread::spawn(move || {
                start.wait();
                for i in 0..iters {
                    op(t, i);
                }
            })
        })
        .collect();
    start.wait();
    let began = Instant::now();
    handles.into_iter().for_each(|h| h.join().unwrap());
    began.elapsed()
}

/// Which task each thread updates.
#[derive(Clone, Copy)]
enum Target {
    /// All threads on the same task: the worst case for the compare-and-set.
    OneHotTask,
    /// Each thread on its own task: contention only on the map's shards.
    OwnTask,
}

/// Threads advancing task offsets with `update`.
fn update_under_contention(c: &mut Criterion, group_name: &str, target: Target) {
    let mut group = c.benchmark_group(group_name);
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(BenchmarkId::from_parameter(threads), |b| {
            b.iter_custom(|iters| {
                let registry = Arc::new(Registry::default());
                let tasks = match target {
                    Target::OneHotTask => 1,
                    Target::OwnTask => threads,
                };
                let ids: Vec<TaskId> = (0..tasks).map(|_| running_task(&registry)).collect();
                race(threads, iters, move |t, _| {
                    registry
                        .update(&ids[t % ids.len()], |s| {
                            let mut next = s.clone();
                            next.base.output_offset += 1;
                            Some(next)
                        })
                        .unwrap();
                })
            });
        });
    }
    group.finish();
}

fn update_one_hot_task(c: &mut Criterion) {
    update_under_contention(c, "core/update_same_task", Target::OneHotTask);
}

fn update_own_task(c: &mut Criterion) {
    update_under_contention(c, "core/update_own_task", Target::OwnTask);
}

/// All threads race for the latch of the same task, task after task: one wins each.
fn mark_notified_race(c: &mut Criterion) {
    let mut group = c.benchmark_group("core/mark_notified_race");
    for threads in THREADS {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_function(BenchmarkId::from_parameter(threads), |b| {
            b.iter_custom(|iters| {
                let registry = Arc::new(Registry::default());
                let ids: Vec<TaskId> = (0..iters).map(|_| running_task(&registry)).collect();
                for id in &ids {
                    registry.transition(id, TaskStatus::Completed).unwrap();
                }
                race(threads, iters, move |_, i| {
                    std::hint::black_box(registry.mark_notified(&ids[i as usize]));
                })
            });
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    update_one_hot_task,
    update_own_task,
    mark_notified_race
);
criterion_main!(benches);
