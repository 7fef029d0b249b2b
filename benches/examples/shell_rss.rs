//! Peak RSS of one process supervising 1000 concurrent `sleep` tasks.
//!
//! Starts 1000 background `sleep 300` tasks in one tokio runtime, waits until all are running,
//! reads this process's peak resident set (`VmHWM` in `/proc/self/status`), then kills every
//! task by id and waits until each is reaped. Run with
//! `cargo run --release -p benches --example shell_rss` (target: at most 64 MiB).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::Arc;

use task_core::{Registry, TaskStatus};
use task_shell::process::CommandSpec;
use task_shell::shell::ShellRequest;
use task_shell::{ShellConfig, ShellExecutor};

const TASKS: usize = 1000;

/// A `kB` field of `/proc/self/status`.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let registry = Arc::new(Registry::default());
    let executor = ShellExecutor::new(Arc::clone(&registry), dir.path(), ShellConfig::default())
        .register_with_registry();
    let before = status_kib("VmRSS:");
    let mut tasks = Vec::with_capacity(TASKS);
    for _ in 0..TASKS {
        let request =
            ShellRequest::new(CommandSpec::new("sleep 300").unwrap(), "sleeper").background(true);
        tasks.push(executor.spawn(request).unwrap());
    }
    let running = registry
        .snapshot()
        .iter()
        .filter(|s| s.status() == TaskStatus::Running)
        .count();
    assert_eq!(running, TASKS);
    let peak = status_kib("VmHWM:");

    for task in &tasks {
        executor.kill(&task.id()).await.unwrap();
    }
    for task in &mut tasks {
        assert_eq!(task.wait().await.unwrap().status, TaskStatus::Killed);
    }
    println!("tasks: {TASKS} concurrent `sleep 300`");
    println!("VmRSS before spawning: {:.1} MiB", before as f64 / 1024.0);
    println!(
        "VmHWM with {TASKS} running: {:.1} MiB",
        peak as f64 / 1024.0
    );
    println!(
        "VmHWM at exit: {:.1} MiB",
        status_kib("VmHWM:") as f64 / 1024.0
    );
}
