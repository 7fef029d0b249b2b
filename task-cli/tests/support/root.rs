//! The sandbox every suite that runs the `tasks` binary builds on: a `TASKS_ROOT` in a temp
//! dir, the binary run in it with short supervisor timings, a closed stdin and the suite's own
//! settings; every process carrying the root is killed by pid when it is dropped.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// One test's state root and how the `tasks` binary is run in it.
pub struct TasksRoot {
    dir: tempfile::TempDir,
    bin: OsString,
    /// Set (`Some`) or removed (`None`), in order: a later setting wins.
    envs: Vec<(OsString, Option<OsString>)>,
}

impl TasksRoot {
    /// A new root; the supervisor polls every 10 ms, sweeps every 50 ms and exits 3 s after
    /// it is idle; no session, agent, list or colour setting is inherited.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            bin: env!("CARGO_BIN_EXE_tasks").into(),
            envs: Vec::new(),
        }
        .env("TASKS_IDLE_EXIT_MS", "3000")
        .env("TASKS_POLL_MS", "10")
        .env("TASKS_SWEEP_MS", "50")
        .env_remove("TASKS_SESSION")
        .env_remove("TASKS_AGENT_ID")
        .env_remove("TASKS_LIST_ID")
        .env_remove("TASKS_LIST_ROOT")
        .env_remove("NO_COLOR")
    }

    /// Runs `bin` instead of the binary Cargo built for the tests.
    pub fn bin(mut self, bin: impl Into<OsString>) -> Self {
        self.bin = bin.into();
        self
    }

    /// Sets `key` for every command run here.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        let value = value.as_ref().to_owned();
        self.envs.push((key.as_ref().to_owned(), Some(value)));
        self
    }

    /// Removes `key` from the environment of every command run here.
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.envs.push((key.as_ref().to_owned(), None));
        self
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `name` under the root.
    pub fn path(&self, name: &str) -> PathBuf {
        self.root().join(name)
    }

    /// Gives `command` this root's environment and a closed stdin.
    pub fn environment(&self, command: &mut Command) {
        command.env("TASKS_ROOT", self.root()).stdin(Stdio::null());
        for (key, value) in &self.envs {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
    }

    /// `tasks ARGS` in this root.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(&self.bin);
        command.args(args);
        self.environment(&mut command);
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "tasks {args:?} failed: {:?}\nstderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// The `tasks ps --all --json` row of task `id` (`null` when it is not listed).
    pub fn listed(&self, id: &str) -> Value {
        let all: Value = serde_json::from_str(&self.ok(&["ps", "--all", "--json"])).unwrap();
        all.as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// `tasks ARGS --json`, parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut full = args.to_vec();
        full.push("--json");
        serde_json::from_str(&self.ok(&full)).unwrap()
    }
}

impl Drop for TasksRoot {
    fn drop(&mut self) {
        super::kill_processes_of(self.root());
    }
}
