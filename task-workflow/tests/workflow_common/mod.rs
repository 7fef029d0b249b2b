//! Helpers of the workflow tests: an agent executor and a workflow executor in a temp dir,
//! fake agents that answer by prompt, running a script to its end.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use task_agent::{AgentConfig, AgentExecutor, CliFormat, CommandRunner};
use task_core::{Registry, RegistryConfig, TaskEvent, TaskId, TaskState, TaskType};
use task_workflow::{
    ScriptSource, WorkflowConfig, WorkflowExecutor, WorkflowHandle, WorkflowRequest,
};

#[path = "../../../task-agent/tests/common/mod.rs"]
mod common;
#[allow(unused_imports)]
pub use common::{DEADLINE, fake_agent, process_gone, wait_file, wait_for};

/// The fixture's script, unchanged.
pub const FIXTURE_SCRIPT: &str = include_str!("../fixtures/workflow/script.js");
/// The fixture's model.
pub const FIXTURE_MODEL: &str = "claude-opus-4-8[1m]";

pub struct Wf {
    pub dir: tempfile::TempDir,
    pub registry: Arc<Registry>,
    pub agents: AgentExecutor,
    pub workflows: WorkflowExecutor,
    pub agent_config: AgentConfig,
}

impl Wf {
    pub fn new(concurrency: usize) -> Wf {
        let mut config = WorkflowConfig::default();
        config.concurrency = concurrency;
        config.default_model = Some(FIXTURE_MODEL.into());
        Wf::with_config(config)
    }

    pub fn with_config(config: WorkflowConfig) -> Wf {
        let dir = tempfile::tempdir().unwrap();
        let registry = Arc::new(Registry::new(RegistryConfig {
            panel_grace: Duration::from_secs(60),
            ..RegistryConfig::default()
        }));
        let agent_config = common::config();
        let agents = AgentExecutor::new(Arc::clone(&registry), dir.path(), agent_config.clone())
            .register_with_registry();
        let workflows =
            WorkflowExecutor::new(agents.clone(), dir.path(), config).register_with_registry();
        Wf {
            dir,
            registry,
            agents,
            workflows,
            agent_config,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A fake agent that reads its prompt, then runs the steps of the first rule whose text is
    /// in it: `rules` is `[(needle, steps)]`.
    pub fn runner(&self, rules: &[(&str, Value)]) -> Arc<CommandRunner> {
        let rules: Vec<Value> = rules
            .iter()
            .map(|(needle, steps)| json!({"if": needle, "steps": steps}))
            .collect();
        let script = self.path(&format!("agent-{}.jsonl", rules.len() + unique()));
        let text = [json!({"read_user": true}), json!({"by_prompt": rules})]
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(&script, text).unwrap();
        let command = [
            fake_agent(),
            "--script".into(),
            script.display().to_string(),
        ];
        Arc::new(CommandRunner::new(command, CliFormat::Claude, self.agent_config.clone()).unwrap())
    }

    /// The fixture's three answers (1200 input + 1 output tokens each, as the fixture's 1201).
    pub fn fixture_runner(&self) -> Arc<CommandRunner> {
        self.runner(&[
            ("scan part A", answer("A=3")),
            ("scan part B", answer("B=4")),
            ("sum A=3,B=4", answer("7")),
        ])
    }

    pub fn request(&self, runner: Arc<CommandRunner>, script: &str) -> WorkflowRequest {
        let mut request = WorkflowRequest::new(runner, ScriptSource::Inline(script.to_owned()));
        request.cwd = Some(self.dir.path().to_path_buf());
        request
    }

    /// Starts `request` and waits for its end (terminal and notified).
    pub async fn run(&self, request: WorkflowRequest) -> (WorkflowHandle, Arc<TaskState>) {
        let handle = self.workflows.start(request).unwrap();
        let state = self.wait_done(&handle.id).await;
        (handle, state)
    }

    pub async fn wait_done(&self, id: &TaskId) -> Arc<TaskState> {
        wait_for(|| {
            self.registry
                .get(id)
                .filter(|s| s.status().is_terminal() && s.base.notified)
        })
        .await
    }

    /// The ids of every agent task registered so far.
    pub fn agent_ids(&self) -> Vec<TaskId> {
        self.registry
            .snapshot()
            .iter()
            .filter(|s| s.base.task_type == TaskType::LocalAgent)
            .map(|s| s.id())
            .collect()
    }

    pub fn output(&self, handle: &WorkflowHandle) -> Value {
        serde_json::from_slice(&std::fs::read(&handle.output_file).unwrap()).unwrap()
    }

    pub fn record(&self, handle: &WorkflowHandle) -> Value {
        serde_json::from_slice(&std::fs::read(&handle.paths.record).unwrap()).unwrap()
    }

    pub fn journal(&self, handle: &WorkflowHandle) -> Vec<Value> {
        std::fs::read_to_string(&handle.paths.journal)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// Steps answering `text` with 1201 tokens.
pub fn answer(text: &str) -> Value {
    json!([
        {"text": text, "usage": {"input_tokens": 1200, "output_tokens": 1}},
        {"result": text}
    ])
}

/// The `workflow_progress` entries of the run's `task_progress` events, in order.
pub fn progress_entries(
    events: &mut tokio::sync::broadcast::Receiver<TaskEvent>,
    id: &TaskId,
) -> Vec<(serde_json::Map<String, Value>, Vec<Value>)> {
    let mut out = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let TaskEvent::TaskProgress {
            task_id, detail, ..
        } = event
            && task_id == *id
        {
            let entries = detail["workflow_progress"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            out.push((detail, entries));
        }
    }
    out
}

/// The agent entries of a record's `workflowProgress`.
pub fn agent_entries(record: &Value) -> Vec<Value> {
    record["workflowProgress"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "workflow_agent")
        .cloned()
        .collect()
}

fn unique() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(1000);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
