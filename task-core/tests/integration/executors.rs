//! `kill` dispatched through the `Task` trait, and orphan cleanup.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use task_core::{
    Delivery, KillError, KillOutcome, Notification, Priority, Registry, Task, TaskId, TaskKind,
    TaskStatus, TaskType,
};

use crate::common::{registered_at, shell_task, shell_task_owned_by};

/// An executor that records the kills it is asked for and settles them like a shell executor
/// does: `killed`, exit code 137, notified at kill time.
#[derive(Default)]
struct ShellLikeExecutor {
    killed: Mutex<Vec<TaskId>>,
}

#[async_trait]
impl Task for ShellLikeExecutor {
    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        self.killed.lock().unwrap().push(*id);
        registry
            .transition_with(id, TaskStatus::Killed, |state| {
                state.base.notified = true;
                if let TaskKind::Shell(shell) = &mut state.kind {
                    shell.exit_code = Some(137);
                }
            })
            .map_err(|e| KillError::Failed {
                id: *id,
                source: Box::new(e),
            })?;
        Ok(())
    }
}

struct FailingExecutor;

#[async_trait]
impl Task for FailingExecutor {
    async fn kill(&self, _: &Registry, id: &TaskId) -> Result<(), KillError> {
        Err(KillError::Failed {
            id: *id,
            source: "permission denied".into(),
        })
    }
}

fn registry_with_shell_executor() -> (Registry, Arc<ShellLikeExecutor>) {
    let registry = Registry::default();
    let executor = Arc::new(ShellLikeExecutor::default());
    registry.register_executor(TaskType::LocalBash, executor.clone());
    (registry, executor)
}

#[tokio::test]
async fn kill_dispatches_to_the_executor_of_the_type() {
    let (registry, executor) = registry_with_shell_executor();
    let id = registered_at(&registry, shell_task("t"), TaskStatus::Running);
    assert_eq!(registry.kill(&id).await.unwrap(), KillOutcome::Killed);
    assert_eq!(*executor.killed.lock().unwrap(), [id]);
    let state = registry.get(&id).unwrap();
    assert_eq!(state.status(), TaskStatus::Killed);
    assert!(state.base.notified);
    assert!(matches!(&state.kind, TaskKind::Shell(s) if s.exit_code == Some(137)));
}

#[tokio::test]
async fn killing_a_finished_task_is_a_no_op() {
    let (registry, executor) = registry_with_shell_executor();
    let id = registered_at(&registry, shell_task("t"), TaskStatus::Completed);
    assert_eq!(
        registry.kill(&id).await.unwrap(),
        KillOutcome::AlreadyFinished(TaskStatus::Completed)
    );
    assert!(executor.killed.lock().unwrap().is_empty());
    assert_eq!(registry.get(&id).unwrap().status(), TaskStatus::Completed);
}

#[tokio::test]
async fn kill_reports_unknown_ids_missing_executors_and_executor_errors() {
    let registry = Registry::default();
    let unknown = TaskId::generate(TaskType::LocalBash).unwrap();
    assert!(matches!(registry.kill(&unknown).await, Err(KillError::NotFound(id)) if id == unknown));

    let id = registered_at(&registry, shell_task("t"), TaskStatus::Running);
    assert!(matches!(
        registry.kill(&id).await,
        Err(KillError::NoExecutor(TaskType::LocalBash))
    ));

    registry.register_executor(TaskType::LocalBash, Arc::new(FailingExecutor));
    let error = registry.kill(&id).await.unwrap_err();
    assert!(error.to_string().contains("permission denied"), "{error}");
    assert_eq!(registry.get(&id).unwrap().status(), TaskStatus::Running);
}

/// Two agents' ids.
const AGENT_1: &str = "aagent001";
const AGENT_2: &str = "aagent002";

#[tokio::test]
async fn orphan_cleanup_kills_exactly_the_agents_unfinished_tasks_and_drops_its_queue() {
    let (registry, executor) = registry_with_shell_executor();
    let mine_running = registered_at(
        &registry,
        shell_task_owned_by("a", Some(AGENT_1)),
        TaskStatus::Running,
    );
    let mine_pending = registered_at(
        &registry,
        shell_task_owned_by("b", Some(AGENT_1)),
        TaskStatus::Pending,
    );
    let mine_done = registered_at(
        &registry,
        shell_task_owned_by("c", Some(AGENT_1)),
        TaskStatus::Completed,
    );
    let other = registered_at(
        &registry,
        shell_task_owned_by("d", Some(AGENT_2)),
        TaskStatus::Running,
    );
    let main = registered_at(&registry, shell_task("e"), TaskStatus::Running);

    for (id, summary) in [(mine_done, "mine"), (other, "other")] {
        let state = registry.get(&id).unwrap();
        registry.notifications().enqueue(
            Notification::for_task(&state, None, summary),
            Priority::Next,
        );
    }

    let mut results = registry
        .kill_tasks_for_agent(TaskId::parse(AGENT_1).unwrap())
        .await;
    results.sort_by_key(|(id, _)| *id);
    let mut expected = vec![mine_running, mine_pending];
    expected.sort();
    assert_eq!(
        results.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        expected
    );
    assert!(
        results
            .iter()
            .all(|(_, r)| matches!(r, Ok(KillOutcome::Killed)))
    );

    for id in [mine_running, mine_pending] {
        assert_eq!(registry.get(&id).unwrap().status(), TaskStatus::Killed);
    }
    for id in [other, main] {
        assert_eq!(registry.get(&id).unwrap().status(), TaskStatus::Running);
    }
    assert_eq!(
        registry.get(&mine_done).unwrap().status(),
        TaskStatus::Completed
    );
    assert_eq!(executor.killed.lock().unwrap().len(), 2);
    let left: Vec<_> = registry
        .notifications()
        .drain()
        .into_iter()
        .map(|n| n.summary)
        .collect();
    assert_eq!(left, ["other"]);
    // The killed shells were settled silently: nothing else was queued.
    assert!(!registry.notify_once(
        &mine_running,
        Notification::for_task(&registry.get(&mine_running).unwrap(), None, "late"),
        Delivery::Queue(Priority::Later)
    ));
}

/// An executor that finds the task already finished (it completed on its own between the
/// registry's check and the kill) and leaves it alone.
struct TooLateExecutor;

#[async_trait]
impl Task for TooLateExecutor {
    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        // The process exited 0 just before the signal could be sent.
        registry.transition(id, TaskStatus::Completed).unwrap();
        Ok(())
    }
}

#[tokio::test]
async fn a_task_that_ends_during_its_kill_is_reported_already_finished() {
    let registry = Registry::default();
    registry.register_executor(TaskType::LocalBash, Arc::new(TooLateExecutor));
    let id = registered_at(&registry, shell_task("t"), TaskStatus::Running);
    assert_eq!(
        registry.kill(&id).await.unwrap(),
        KillOutcome::AlreadyFinished(TaskStatus::Completed)
    );
}
