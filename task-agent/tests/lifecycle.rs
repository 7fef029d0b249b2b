//! The agent's own tasks, many agents at once, the main session, and a long transcript.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::*;
use serde_json::json;
use task_agent::{CliFormat, MAIN_SESSION_TYPE};
use task_core::{
    KillError, Notification, Priority, Registry, ShellState, Task, TaskEvent, TaskId, TaskKind,
    TaskState, TaskStatus, TaskType,
};

/// A `local_bash` task that is a real `sleep` process, standing in for a shell the agent
/// started through `tasks mcp` (task-agent does not depend on task-shell).
#[derive(Default)]
struct Sleeps {
    children: Mutex<HashMap<TaskId, Child>>,
}

#[async_trait]
impl Task for Sleeps {
    async fn kill(&self, registry: &Registry, id: &TaskId) -> Result<(), KillError> {
        if let Some(mut child) = self.children.lock().unwrap().remove(id) {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        let _ = registry.transition(id, TaskStatus::Killed);
        Ok(())
    }
}

impl Sleeps {
    /// Starts `sleep 300` as a running shell task owned by `agent`; returns its id and pid.
    fn start(&self, registry: &Registry, agent: &TaskId) -> (TaskId, u32) {
        let id = TaskId::generate(TaskType::LocalBash).unwrap();
        let shell = ShellState {
            command: "sleep 300".into(),
            ..ShellState::default()
        };
        let state = TaskState::new(id, "sub work", "/dev/null", TaskKind::Shell(shell))
            .unwrap()
            .owned_by(Some(*agent));
        registry.register(state).unwrap();
        let child = Command::new("sleep").arg("300").spawn().unwrap();
        let pid = child.id();
        self.children.lock().unwrap().insert(id, child);
        registry.transition(&id, TaskStatus::Running).unwrap();
        (id, pid)
    }

    /// Ends the sleep as if it had exited by itself.
    fn complete(&self, registry: &Registry, id: &TaskId) {
        if let Some(mut child) = self.children.lock().unwrap().remove(id) {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        registry.transition(id, TaskStatus::Completed).unwrap();
    }
}

fn with_sleeps(fx: &Fixture) -> Arc<Sleeps> {
    let sleeps = Arc::new(Sleeps::default());
    fx.registry
        .register_executor(TaskType::LocalBash, Arc::clone(&sleeps) as Arc<dyn Task>);
    sleeps
}

#[tokio::test]
async fn when_an_agent_is_killed_its_own_tasks_die_and_their_queued_notifications_go() {
    let fx = Fixture::new();
    let sleeps = with_sleeps(&fx);
    let steps = [
        json!({"read_user": true}),
        json!({"wait_file": fx.path("never")}),
    ];
    let agent = fx
        .executor
        .start(fx.request(&steps, "parent"))
        .await
        .unwrap();
    let (shell, pid) = sleeps.start(&fx.registry, &agent.id);
    let mut for_agent = Notification::new(shell, "/dev/null", "for the agent");
    for_agent.agent_id = Some(agent.id);
    fx.registry
        .notifications()
        .enqueue(for_agent, Priority::Later);

    fx.registry.kill(&agent.id).await.unwrap();
    assert_eq!(fx.state(&shell).status(), TaskStatus::Killed);
    assert!(process_gone(pid));
    assert!(
        fx.registry.notifications().is_empty(),
        "the dead agent's notifications are dropped"
    );
}

#[tokio::test]
async fn when_an_agent_completes_it_waits_for_its_own_tasks_and_notifies_after_them() {
    let fx = Fixture::new();
    let sleeps = with_sleeps(&fx);
    let started = fx.path("started");
    let steps = [
        json!({"read_user": true}),
        json!({"wait_file": started}),
        json!({"text": "launched a background shell"}),
        json!({"result": "done"}),
    ];
    let mut events = fx.registry.subscribe();
    let agent = fx
        .executor
        .start(fx.request(&steps, "parent"))
        .await
        .unwrap();
    let (shell, _) = sleeps.start(&fx.registry, &agent.id);
    std::fs::write(&started, b"").unwrap();

    // The turn is over, but its shell still runs: the agent says it waits, and stays running.
    wait_for(|| {
        loop {
            match events.try_recv() {
                Ok(TaskEvent::TaskProgress {
                    task_id, detail, ..
                }) if task_id == agent.id && detail.contains_key("waiting_tasks") => {
                    assert_eq!(detail["description"], "Waiting for 1 background task");
                    return Some(());
                }
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    })
    .await;
    assert_eq!(fx.state(&agent.id).status(), TaskStatus::Running);
    assert!(fx.registry.notifications().is_empty());

    sleeps.complete(&fx.registry, &shell);
    let state = fx.wait_done(&agent.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 1);
    assert!(notes[0].render().contains("<result>done</result>"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_agents_finishing_together_are_each_notified_exactly_once() {
    let fx = Fixture::new();
    let go = fx.path("go");
    let steps = [
        json!({"read_user": true}),
        json!({"wait_file": go}),
        json!({"tool": "Bash", "input": {"command": "true", "description": "nothing"}}),
        json!({"result": "finished"}),
    ];
    let runner = fx.runner(&steps);
    let mut ids = Vec::new();
    for i in 0..50 {
        let request = task_agent::AgentRequest::new(runner.clone(), format!("agent {i}"), "go");
        ids.push(fx.executor.start(request).await.unwrap().id);
    }
    std::fs::write(&go, b"").unwrap();
    for id in &ids {
        assert_eq!(fx.wait_done(id).await.status(), TaskStatus::Completed);
    }
    // An agent's notice is queued just after its end is recorded: collect them as they come.
    let queue = fx.registry.notifications();
    let mut notified: Vec<TaskId> = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    while notified.len() < ids.len() {
        let arrived = tokio::time::timeout_at(deadline, queue.wait_nonempty()).await;
        assert!(arrived.is_ok(), "only {} of 50 notified", notified.len());
        notified.extend(queue.drain().iter().map(|n| n.task_id));
    }
    assert!(
        queue.drain().is_empty(),
        "a notification more than one per agent"
    );
    notified.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    ids.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    assert_eq!(notified, ids, "every agent once, none twice");
}

fn assistant_tool(i: u64) -> String {
    json!({"type": "assistant", "message": {"content": [{"type": "tool_use", "id": format!("t{i}"),
        "name": "Read", "input": {"file_path": format!("/f{i}")}}],
        "usage": {"input_tokens": 1000 + i, "output_tokens": 1}}, "parent_tool_use_id": null})
    .to_string()
}

fn text_line(text: &str) -> String {
    json!({"type": "assistant", "message": {"content": [{"type": "text", "text": text}],
        "usage": {"input_tokens": 5, "output_tokens": 1}}})
    .to_string()
}

#[tokio::test]
async fn the_main_session_is_tracked_over_its_growing_transcript_until_its_result() {
    let fx = Fixture::new();
    let path = fx.path("session.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(
        file,
        "{}",
        json!({"type": "system", "subtype": "init", "session_id": "main-1"})
    )
    .unwrap();
    writeln!(file, "{}", assistant_tool(1)).unwrap();
    let handle = fx
        .executor
        .register_main_session(&path, "main session", None)
        .await
        .unwrap();
    assert!(handle.id.is_main_session());
    assert_eq!(std::fs::read_link(&handle.output_file).unwrap(), path);
    assert_eq!(fx.agent(&handle.id).agent_type, MAIN_SESSION_TYPE);
    fx.wait_state(&handle.id, |_| {
        fx.agent(&handle.id).progress.tool_use_count == 1
    })
    .await;
    assert_eq!(fx.state(&handle.id).status(), TaskStatus::Running);

    writeln!(file, "{}", assistant_tool(2)).unwrap();
    writeln!(file, "{}", text_line("all done")).unwrap();
    write!(
        file,
        "{}",
        json!({"type": "result", "subtype": "success", "result": "all done"})
    )
    .unwrap();
    writeln!(file).unwrap();
    let state = fx.wait_done(&handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(fx.agent(&handle.id).progress.tool_use_count, 2);
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 1);
    assert!(notes[0].render().contains("<result>all done</result>"));
    assert!(
        fx.executor
            .send(handle.id.as_str(), "hi", None)
            .await
            .is_err(),
        "the main session takes no messages"
    );
    // Its output reads as a conversation, as every agent-like task's does.
    let transcript = std::fs::read(&handle.output_file).unwrap();
    let entries = agent_stream::conversation::entries(&transcript);
    let last_three = agent_stream::conversation::text(&entries[entries.len() - 3..]);
    assert!(last_three.starts_with("  → "), "{last_three}");
    assert!(
        last_three.ends_with("all done\n✓ all done\n"),
        "{last_three}"
    );
}

#[tokio::test]
async fn a_ten_thousand_turn_transcript_is_followed_with_bounded_state() {
    let mut config = config();
    config.max_read_bytes = 64 * 1024;
    let fx = Fixture::with_config(config.clone());
    let path = fx.path("long.jsonl");
    let mut file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    for i in 0..10_000u64 {
        writeln!(file, "{}", assistant_tool(i)).unwrap();
        writeln!(file, "{}", text_line(&format!("turn {i}"))).unwrap();
    }
    writeln!(
        file,
        "{}",
        json!({"type": "result", "subtype": "success", "result": "ten thousand"})
    )
    .unwrap();
    drop(file);
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(
        size > 2 * 1024 * 1024,
        "the transcript is several MB ({size})"
    );

    let handle = fx
        .executor
        .register_main_session(&path, "long", Some(CliFormat::Claude))
        .await
        .unwrap();
    let state = fx.wait_done(&handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let agent = fx.agent(&handle.id);
    assert_eq!(agent.progress.tool_use_count, 10_000);
    assert_eq!(agent.progress.latest_input_tokens, 5);
    assert_eq!(agent.progress.cumulative_output_tokens, 20_000);
    assert_eq!(
        agent.messages.len(),
        config.display_messages,
        "displayed messages are capped"
    );
    assert_eq!(agent.messages.last().unwrap()["content"], "turn 9999");
    assert_eq!(agent.progress.recent_activities.len(), 5);
    assert_eq!(agent.result.as_deref(), Some("ten thousand"));
}

#[tokio::test]
async fn an_orphaned_agents_process_group_is_reaped_from_its_recorded_state() {
    let fx = Fixture::new();
    let (pid_file, ready) = (fx.path("child.pid"), fx.path("ready"));
    let steps = [
        json!({"read_user": true}),
        json!({"spawn": "sleep 300", "pid_file": pid_file}),
        json!({"touch": ready}),
        json!({"wait_file": fx.path("never")}),
    ];
    let agent = fx
        .executor
        .start(fx.request(&steps, "orphan"))
        .await
        .unwrap();
    wait_file(&ready).await;
    let child: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    let recorded = fx.state(&agent.id);
    let group = fx
        .agent(&agent.id)
        .process
        .expect("a running CLI's group is recorded");
    assert!(group.leader_started.is_some());

    // What a later supervisor does with the last state it found on disk.
    fx.executor.task().reap_orphan(&recorded).unwrap();
    wait_for(|| (process_gone(child) && process_gone(group.pgid)).then_some(())).await;
    let state = fx.wait_done(&agent.id).await;
    assert_eq!(
        state.status(),
        TaskStatus::Failed,
        "its CLI died without a result"
    );
    assert!(
        fx.agent(&agent.id).process.is_none(),
        "an ended agent records no group"
    );
}

#[tokio::test]
async fn a_reused_group_number_is_left_alone() {
    use std::os::unix::process::CommandExt;
    let fx = Fixture::new();
    let mut stranger = Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = stranger.id();
    let agent = task_core::AgentState {
        process: Some(task_core::ShellProcess {
            pgid: pid,
            leader_started: Some(1),
            owner: None,
        }),
        ..task_core::AgentState::default()
    };
    let id = TaskId::generate(TaskType::LocalAgent).unwrap();
    let orphan = TaskState::new(id, "old", "/dev/null", TaskKind::Agent(Box::new(agent))).unwrap();
    fx.executor.task().reap_orphan(&orphan).unwrap();
    assert!(!process_gone(pid), "another process now leads that group");
    stranger.kill().unwrap();
    stranger.wait().unwrap();
}
