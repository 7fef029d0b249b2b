//! Shared helpers for the benchmarks of the task system.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Builds `tasks` as shipped (the `build-tasks` alias of `.cargo/config.toml`: release,
/// static-pie) into the calling bench's target directory; returns its path. With
/// `TASKS_BENCH_BIN` set, that binary is measured instead (to compare two builds).
///
/// # Panics
///
/// If the build fails (a bench has nothing to measure then).
#[allow(clippy::expect_used)]
pub fn build_tasks_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("TASKS_BENCH_BIN") {
        return PathBuf::from(bin);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // `tasks` execs `tasksd`, found beside it, for the supervisor: both are built.
    for alias in ["build-tasksd", "build-tasks"] {
        let status = Command::new(&cargo)
            .arg(alias)
            .status()
            .expect("cannot run cargo");
        assert!(
            status.success(),
            "cannot build the tasks executables ({alias})"
        );
    }
    // A bench runs from {target}/release/deps/NAME-…; the binary is {target}/release/tasks.
    let exe = std::env::current_exe().expect("no current exe");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("bench outside a target dir")
        .join("tasks")
}

/// The median of `samples` (sorted in place); zero for none.
pub fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples.get(samples.len() / 2).copied().unwrap_or_default()
}

/// The resident set size of process `pid`, in KiB (0 if it cannot be read).
pub fn rss_kib(pid: i32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A field of `/proc/PID/status` given in kB (`VmRSS:`, `VmHWM:`), in KiB (0 if it cannot be
/// read).
pub fn status_kib(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// CPU time (user and system) process `pid` has used (`/proc/<pid>/stat`, 10 ms ticks).
pub fn cpu_time(pid: i32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_ascii_whitespace().collect())
        .unwrap_or_default();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

/// Every process whose environment names `root` as its `TASKS_ROOT` (a supervisor and the
/// tasks it ran), so a bench can kill what it caused by pid.
pub fn processes_of(root: &Path) -> Vec<i32> {
    let marker = format!("TASKS_ROOT={}", root.display());
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == marker.as_bytes()))
        })
        .collect()
}
