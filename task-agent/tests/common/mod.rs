//! Helpers shared by the integration tests: a registry and executor in a temp dir, scripted
//! fake agents, and waiting on conditions with a deadline.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use task_agent::{AgentConfig, AgentExecutor, AgentRequest, CliFormat, CommandRunner};
use task_core::{AgentState, Registry, RegistryConfig, TaskId, TaskKind, TaskState};

/// task-agent's scripted CLI (`src/bin/fake-agent.rs`): where Cargo built it for task-agent's
/// own tests; for another crate's tests that share these helpers (task-workflow's), beside
/// their executable in the target directory, built there first if it is missing.
pub fn fake_agent() -> String {
    if let Some(path) = option_env!("CARGO_BIN_EXE_fake-agent") {
        return path.to_owned();
    }
    let exe = std::env::current_exe().expect("the test's executable");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/{profile}/deps");
    let path = profile_dir.join("fake-agent");
    if !path.exists() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let built = std::process::Command::new(cargo)
            .args(["build", "-p", "task-agent", "--bin", "fake-agent"])
            .status()
            .is_ok_and(|status| status.success());
        assert!(built, "could not build fake-agent");
    }
    path.display().to_string()
}

/// How long a test waits for anything before failing.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub registry: Arc<Registry>,
    pub executor: AgentExecutor,
    pub config: AgentConfig,
}

pub fn config() -> AgentConfig {
    let mut config = AgentConfig::default();
    config.kill_grace = Duration::from_millis(300);
    config.transcript_poll = Duration::from_millis(5);
    config
}

impl Fixture {
    pub fn new() -> Self {
        Self::with_config(config())
    }

    pub fn with_config(config: AgentConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let registry = Arc::new(Registry::new(RegistryConfig {
            panel_grace: Duration::from_millis(50),
            ..RegistryConfig::default()
        }));
        let executor = AgentExecutor::new(Arc::clone(&registry), dir.path(), config.clone())
            .register_with_registry();
        Fixture {
            dir,
            registry,
            executor,
            config,
        }
    }

    /// A path inside the temp dir.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A fake agent running `steps` (one JSON object each).
    pub fn runner(&self, steps: &[Value]) -> Arc<CommandRunner> {
        let script = self.path(&format!("script-{}.jsonl", unique()));
        let text: Vec<String> = steps.iter().map(Value::to_string).collect();
        std::fs::write(&script, text.join("\n")).unwrap();
        let command = [
            fake_agent(),
            "--script".into(),
            script.display().to_string(),
        ];
        Arc::new(CommandRunner::new(command, CliFormat::Claude, self.config.clone()).unwrap())
    }

    pub fn request(&self, steps: &[Value], description: &str) -> AgentRequest {
        AgentRequest::new(self.runner(steps), description, "do the thing")
    }

    pub fn state(&self, id: &TaskId) -> Arc<TaskState> {
        self.registry.get(id).expect("task is registered")
    }

    pub fn agent(&self, id: &TaskId) -> AgentState {
        match &self.state(id).kind {
            TaskKind::Agent(agent) => (**agent).clone(),
            other => panic!("not an agent: {other:?}"),
        }
    }

    /// Waits until `id`'s state satisfies `check`.
    pub async fn wait_state(
        &self,
        id: &TaskId,
        check: impl Fn(&TaskState) -> bool,
    ) -> Arc<TaskState> {
        wait_for(|| self.registry.get(id).filter(|s| check(s))).await
    }

    /// Runs a fake agent of `steps` to its end: its handle, final state and the notifications
    /// queued meanwhile.
    pub async fn run(
        &self,
        steps: &[Value],
        description: &str,
    ) -> (
        task_agent::AgentHandle,
        Arc<TaskState>,
        Vec<task_core::Notification>,
    ) {
        let handle = self
            .executor
            .start(self.request(steps, description))
            .await
            .unwrap();
        let state = self.wait_done(&handle.id).await;
        (handle, state, self.registry.notifications().drain())
    }

    /// Waits until `id` is terminal and notified (or killed).
    pub async fn wait_done(&self, id: &TaskId) -> Arc<TaskState> {
        self.wait_state(id, |s| s.status().is_terminal() && s.base.notified)
            .await
    }
}

/// Polls `probe` until it returns `Some`, failing the test at the deadline.
pub async fn wait_for<T>(mut probe: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "condition not met before the deadline"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until `path` exists.
pub async fn wait_file(path: &Path) {
    wait_for(|| path.exists().then_some(())).await;
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Whether process `pid` is gone (no such process, or a zombie nobody reaped yet).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}
