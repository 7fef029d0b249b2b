//! `tasks status` as a shell prompt runs it: the whole process, from spawn to exit, against
//! `/bin/true` (the cost of any process). Three sessions: idle (nothing to read), three live
//! tasks, and three live tasks among 1000 finished ones (an old session nobody pruned).
//!
//! Run with `cargo bench -p benches --bench status`. It builds the shipped binary first
//! (`cargo build-tasks`), kills every process it started, and prints medians (`TASKS_BENCH_QUICK=1`
//! takes fewer samples).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use benches::{build_tasks_binary, median, processes_of};

fn main() {
    if std::env::args().any(|a| a == "--list") {
        println!("status: bench");
        return;
    }
    let tasks = build_tasks_binary();
    let quick = std::env::var_os("TASKS_BENCH_QUICK").is_some();
    let samples = if quick { 30 } else { 300 };
    let root = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let status = command(&tasks, root.path(), args)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "tasks {args:?}");
    };
    let baseline = time(samples, || Command::new("true").status().unwrap());
    let idle = time(samples, || status(&tasks, root.path()));
    for _ in 0..3 {
        run(&["run", "--", "sleep 600"]);
    }
    let live = time(samples, || status(&tasks, root.path()));
    for _ in 0..1000 {
        run(&["run", "--", "true"]);
    }
    run(&["notifications"]);
    let crowded = time(samples, || status(&tasks, root.path()));
    let label = String::from_utf8(
        command(&tasks, root.path(), &["status"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(label, "3 shells\n");
    println!("status: /bin/true            median {:>8.2?}", baseline);
    println!("status: idle session         median {:>8.2?}", idle);
    println!("status: 3 live tasks         median {:>8.2?}", live);
    println!("status: 3 live + 1000 ended  median {:>8.2?}", crowded);
    let pids = processes_of(root.path());
    for pid in pids {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
}

fn command(tasks: &Path, root: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(tasks);
    command
        .args(args)
        .env("TASKS_ROOT", root)
        .env("TASKS_IDLE_EXIT_MS", "600000")
        .env_remove("TASKS_SESSION")
        .stdin(Stdio::null());
    command
}

fn status(tasks: &Path, root: &Path) -> std::process::ExitStatus {
    command(tasks, root, &["status"])
        .stdout(Stdio::null())
        .status()
        .unwrap()
}

fn time<T>(samples: usize, mut run: impl FnMut() -> T) -> Duration {
    let mut times: Vec<Duration> = (0..samples)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();
    median(&mut times)
}
