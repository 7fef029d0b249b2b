//! Builders shared by the tests.

use std::time::Duration;

use task_core::{
    AgentState, KillError, Registry, RegistryConfig, ShellState, Task, TaskEvent, TaskId, TaskKind,
    TaskState, TaskStatus, TaskType,
};
use tokio::sync::broadcast;

/// A new `pending` shell task.
pub fn shell_task(description: &str) -> TaskState {
    shell_task_owned_by(description, None)
}

/// A new `pending` shell task started by `agent_id`.
pub fn shell_task_owned_by(description: &str, agent_id: Option<&str>) -> TaskState {
    let id = TaskId::generate(TaskType::LocalBash).unwrap();
    let shell = ShellState {
        command: format!("echo {description}"),
        ..ShellState::default()
    };
    TaskState::new(
        id,
        description,
        format!("/tmp/tasks/{id}.output"),
        TaskKind::Shell(shell),
    )
    .unwrap()
    .owned_by(agent_id.map(|id| TaskId::parse(id).unwrap()))
}

/// A new `pending` agent task.
pub fn agent_task(description: &str) -> TaskState {
    let id = TaskId::generate(TaskType::LocalAgent).unwrap();
    let agent = AgentState {
        agent_id: format!("agent-{id}"),
        agent_type: "general-purpose".into(),
        ..AgentState::default()
    };
    TaskState::new(
        id,
        description,
        format!("/tmp/tasks/{id}.output"),
        TaskKind::Agent(Box::new(agent)),
    )
    .unwrap()
}

/// Registers `state` and moves it to `status` along legal transitions.
pub fn registered_at(registry: &Registry, state: TaskState, status: TaskStatus) -> TaskId {
    let id = state.id();
    registry.register(state).unwrap();
    let path: &[TaskStatus] = match status {
        TaskStatus::Pending => &[],
        TaskStatus::Running => &[TaskStatus::Running],
        terminal => &[TaskStatus::Running, terminal],
    };
    for &step in path {
        registry.transition(&id, step).unwrap();
    }
    id
}

/// Millisecond timings for tests.
pub fn fast_config() -> RegistryConfig {
    RegistryConfig {
        poll_interval: Duration::from_millis(5),
        panel_grace: Duration::from_millis(0),
        ..RegistryConfig::default()
    }
}

/// An executor with the policies of an agent-like type: a grace before eviction, and its
/// UI-held fields carried across a resume. It kills nothing.
pub struct PolicyExecutor {
    /// The eviction grace of every task it ends.
    pub grace: Option<Duration>,
}

#[async_trait::async_trait]
impl Task for PolicyExecutor {
    async fn kill(&self, _: &Registry, _: &TaskId) -> Result<(), KillError> {
        Ok(())
    }

    fn eviction_grace(&self, _: &TaskState) -> Option<Duration> {
        self.grace
    }

    fn carry_forward(&self, resumed: &mut TaskState, previous: &TaskState) {
        resumed.kind.carry_ui_fields_from(&previous.kind);
    }
}

/// A registry whose `task_type` tasks get the policies of a [`PolicyExecutor`] with `grace`.
pub fn registry_with_policy(task_type: TaskType, grace: Option<Duration>) -> Registry {
    let registry = Registry::default();
    registry.register_executor(task_type, std::sync::Arc::new(PolicyExecutor { grace }));
    registry
}

/// Every event already in `events`, without waiting.
pub fn pending_events(events: &mut broadcast::Receiver<TaskEvent>) -> Vec<TaskEvent> {
    std::iter::from_fn(|| events.try_recv().ok()).collect()
}

/// Waits (with a deadline) for the first event matching `pred`.
pub async fn wait_for_event(
    events: &mut broadcast::Receiver<TaskEvent>,
    mut pred: impl FnMut(&TaskEvent) -> bool,
) -> TaskEvent {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let event = events.recv().await.unwrap();
            if pred(&event) {
                return event;
            }
        }
    })
    .await
    .expect("event within the deadline")
}
