//! Benchmarks of task-shell: what running a command as a task costs over running it directly.
//!
//! - `spawn_to_completed`: `true` as a background task (spawn, supervise, reap, record
//!   `completed`, queue the notification) against `sh -c true` run directly.
//! - `write_1gib`: `head -c 1073741824 /dev/zero` as a task (its stdout is the output file)
//!   against the same command redirected to a file by the shell. Files live in a temp dir and are
//!   deleted after each iteration, outside the timed part.
//!
//! Run with `cargo bench -p benches --bench shell -- --warm-up-time 1 --measurement-time 3`.
//! Peak RSS with 1000 concurrent tasks is measured by `cargo run --release -p benches --example shell_rss`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use task_core::Registry;
use task_shell::process::CommandSpec;
use task_shell::shell::ShellRequest;
use task_shell::{ShellConfig, ShellExecutor, TaskHandle};
use tokio::runtime::Runtime;

const GIB: u64 = 1024 * 1024 * 1024;

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Runs `command` as a background task to completion; returns the handle for cleanup.
async fn run_task(executor: &ShellExecutor, command: &str) -> TaskHandle {
    let request = ShellRequest::new(CommandSpec::new(command).unwrap(), "bench").background(true);
    let mut task = executor.spawn(request).unwrap();
    let outcome = task.wait().await.unwrap();
    assert_eq!(outcome.exit_code, 0);
    task
}

/// Drops a finished task from the registry, its notification from the queue and its file.
fn forget(registry: &Registry, task: &TaskHandle) {
    registry.notifications().drain();
    registry.evict(&task.id());
    std::fs::remove_file(task.output_file()).unwrap();
}

fn spawn_to_completed(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::default());
    let executor = ShellExecutor::new(Arc::clone(&registry), dir.path(), ShellConfig::default())
        .register_with_registry();
    let mut group = c.benchmark_group("spawn_to_completed");
    group.bench_function("task_true", |b| {
        b.iter(|| {
            let task = rt.block_on(run_task(&executor, "true"));
            forget(&registry, &task);
        });
    });
    group.bench_function("direct_sh_c_true", |b| {
        b.iter(|| {
            let status = Command::new("/bin/sh")
                .args(["-c", "true"])
                .stdin(Stdio::null())
                .status()
                .unwrap();
            assert!(status.success());
        });
    });
    group.finish();
}

fn write_1gib(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::default());
    let executor = ShellExecutor::new(Arc::clone(&registry), dir.path(), ShellConfig::default())
        .register_with_registry();
    let write = format!("head -c {GIB} /dev/zero");
    let mut group = c.benchmark_group("write_1gib");
    group.sample_size(10);
    group.bench_function("task", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let task = rt.block_on(run_task(&executor, &write));
                total += start.elapsed();
                assert_eq!(std::fs::metadata(task.output_file()).unwrap().len(), GIB);
                forget(&registry, &task);
            }
            total
        });
    });
    group.bench_function("shell_redirect", |b| {
        let target = dir.path().join("direct.out");
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                redirect_to_file(&write, &target);
                total += start.elapsed();
                assert_eq!(std::fs::metadata(&target).unwrap().len(), GIB);
                std::fs::remove_file(&target).unwrap();
            }
            total
        });
    });
    group.finish();
}

/// `sh -c '{command} > {target}'`: the shell opens the file and the command writes to it.
fn redirect_to_file(command: &str, target: &Path) {
    let script = format!("{command} > '{}'", target.display());
    let status = Command::new("/bin/sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

criterion_group!(benches, spawn_to_completed, write_1gib);
criterion_main!(benches);
