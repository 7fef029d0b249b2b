//! Helpers shared by the integration tests: /proc inspection and waiting with a deadline.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

/// How long any wait in the tests may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// Fields of `/proc/<pid>/stat`.
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub session: u32,
}

pub fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let mut num = || fields.next()?.parse::<u32>().ok();
    Some(Stat { state: state, ppid: num()?, pgrp: num()?, session: num()? })
}

/// Alive means present and not a zombie.
pub fn is_alive(pid: u32) -> bool {
    stat(pid).is_some_and(|s| s.state != 'Z' && s.state != 'X')
}

/// Zombies whose parent is this test process.
pub fn our_zombies() -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| stat(pid).is_some_and(|s| s.ppid == me && s.state == 'Z'))
        .collect()
}

/// Polls `condition` until it holds, failing the test after [`DEADLINE`].
pub async fn wait_until(what: &str, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while !condition() {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until `path` holds a pid and returns it.
pub async fn read_pid_file(path: &Path) -> u32 {
    let mut pid = None;
    wait_until(&format!("pid file {}", path.display()), || {
        pid = std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok());
        pid.is_some()
    })
    .await;
    pid.unwrap()
}
