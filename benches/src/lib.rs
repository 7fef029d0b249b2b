//! Shared helpers for the benchmarks of the task system.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::Command;

/// Builds `tasks` as shipped (the `build-tasks` alias of `.cargo/config.toml`: release,
/// static-pie) into the running bench's target directory; returns its path.
pub fn build_tasks_binary() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo).arg("build-tasks").status().unwrap();
    assert!(status.success(), "cannot build the tasks binary");
    // A bench runs from {target}/release/deps/NAME-…; the binary is {target}/release/tasks.
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("tasks")
}

/// The resident set size of process `pid`, in KiB (0 if it cannot be read).
pub fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
