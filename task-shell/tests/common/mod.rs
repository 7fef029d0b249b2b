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
    Some(Stat {
        state,
        ppid: num()?,
        pgrp: num()?,
        session: num()?,
    })
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

/// The pid written in `path`, once it is there whole.
pub fn pid_in(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
}

/// Waits until `path` holds a pid and returns it.
pub async fn read_pid_file(path: &Path) -> u32 {
    let mut pid = None;
    wait_until(&format!("pid file {}", path.display()), || {
        pid = pid_in(path);
        pid.is_some()
    })
    .await;
    pid.unwrap()
}

use std::sync::Arc;

use task_core::{Registry, TaskId, TaskKind, TaskState};
use task_shell::{ShellConfig, ShellExecutor};

/// A registry, an executor writing into a temp dir, and the temp dir.
pub struct Fixture {
    pub registry: Arc<Registry>,
    pub executor: ShellExecutor,
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new(config: ShellConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let registry = Arc::new(Registry::default());
        let executor =
            ShellExecutor::new(Arc::clone(&registry), dir.path(), config).register_with_registry();
        Fixture {
            registry,
            executor,
            dir,
        }
    }

    pub fn state(&self, id: &TaskId) -> Arc<TaskState> {
        self.registry.get(id).expect("task is registered")
    }

    pub fn exit_code(&self, id: &TaskId) -> Option<i32> {
        match &self.state(id).kind {
            TaskKind::Shell(shell) => shell.exit_code,
            other => panic!("not a shell task: {other:?}"),
        }
    }

    /// Waits until at least one notification is queued.
    pub async fn wait_for_notification(&self) {
        let waited =
            tokio::time::timeout(DEADLINE, self.registry.notifications().wait_nonempty()).await;
        assert!(waited.is_ok(), "timed out waiting for a notification");
    }
}

impl Drop for Fixture {
    /// Kills the process group of every task still recorded as possibly alive, by the group id
    /// it got, so a test that fails part-way leaves no process behind (a shell's children, such
    /// as a `sleep` it forked, are in its group but get no parent-death signal).
    fn drop(&mut self) {
        for state in self.registry.snapshot() {
            if let TaskKind::Shell(shell) = &state.kind
                && let Some(process) = shell.process
                && let Some(group) = rustix::process::Pid::from_raw(process.pgid as i32)
            {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
        }
    }
}

/// A config with millisecond watchdogs for tests.
pub fn fast_config() -> ShellConfig {
    let mut config = ShellConfig::default();
    config.stall_check_interval = Duration::from_millis(10);
    config.stall_threshold = Duration::from_millis(150);
    config.size_check_interval = Duration::from_millis(10);
    config
}
