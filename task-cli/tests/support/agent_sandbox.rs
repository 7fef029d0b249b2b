//! A session root in a temp dir for the suites that drive agents and teammates through the
//! `tasks` binary with task-agent's scripted `fake-agent` standing in for the agent CLI.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// A `TASKS_ROOT` of its own; every process it caused is killed when it is dropped.
pub struct Sandbox {
    pub root: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        Self {
            root: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    pub fn tasks(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_tasks"))
            .args(args)
            .env("TASKS_ROOT", self.root.path())
            .env("TASKS_IDLE_EXIT_MS", "2000")
            .env("TASKS_POLL_MS", "10")
            .env("TASKS_SWEEP_MS", "50")
            .env_remove("TASKS_SESSION")
            .env_remove("TASKS_AGENT_ID")
            .env_remove("TASKS_LIST_ID")
            .env_remove("TASKS_LIST_ROOT")
            // The agent's own `tasks run` finds the binary on its PATH.
            .env("PATH", path_with_tasks())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.tasks(args);
        assert!(
            out.status.success(),
            "tasks {args:?}: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Writes a fake-agent script of `steps` (the first of which reads the prompt, the first
    /// user turn on its stream-json input); returns its path.
    pub fn script(&self, name: &str, steps: &[Value]) -> String {
        let path = self.path(name);
        let lines: String = steps.iter().map(|s| format!("{s}\n")).collect();
        std::fs::write(&path, lines).unwrap();
        path.display().to_string()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        super::kill_processes_of(self.root.path());
    }
}

fn path_with_tasks() -> String {
    let dir = Path::new(env!("CARGO_BIN_EXE_tasks")).parent().unwrap();
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}
