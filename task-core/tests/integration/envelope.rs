//! Rendering compared byte for byte with what the reference harness sent its model.

use std::path::Path;

use task_core::summary::{self, AgentEnd, ShellEnd};
use task_core::{
    AGENT_RESUME_NOTE, AgentExtras, AgentUsage, Notification, ShellState, TaskId, TaskKind,
    TaskState, TerminalStatus, Worktree,
};

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

fn task(id: &str, description: &str, tool_use_id: &str, output: &str, kind: TaskKind) -> TaskState {
    TaskState::new(TaskId::parse(id).unwrap(), description, output, kind)
        .unwrap()
        .with_tool_use_id(tool_use_id)
}

fn shell(id: &str, description: &str, tool_use_id: &str, session: &str) -> TaskState {
    let output = format!("/tmp/claude-1000/-home-user-project/{session}/tasks/{id}.output");
    task(
        id,
        description,
        tool_use_id,
        &output,
        TaskKind::Shell(ShellState::default()),
    )
}

#[test]
fn shell_failure_matches_reference() {
    let task = shell(
        "bsubuniyr",
        "bg test",
        "toolu_000008",
        "84e67349-7bb8-433a-95e7-0f463f7d2b25",
    );
    let summary = summary::shell("bg test", ShellEnd::Failed(3));
    let notification = Notification::for_task(&task, Some(TerminalStatus::Failed), summary);
    assert_eq!(notification.render_for_model(), fixture("shell-failed.txt"));
}

#[test]
fn shell_completion_matches_reference() {
    let task = shell(
        "b6c7y9oyd",
        "ask",
        "toolu_000002",
        "0bde7f63-703c-4f5c-b3c2-f9167a9f4c26",
    );
    let summary = summary::shell("ask", ShellEnd::Completed(0));
    let notification = Notification::for_task(&task, Some(TerminalStatus::Completed), summary);
    assert_eq!(
        notification.render_for_model(),
        fixture("shell-completed.txt")
    );
}

#[test]
fn stall_warning_matches_reference() {
    let task = shell(
        "bhyzbhquh",
        "prompt waiter",
        "toolu_000002",
        "8cfce01b-dc08-4bcb-b41c-b2dfc504e077",
    );
    // The command printed `printf 'Do you want to overwrite the file? '` with no newline.
    let notification = Notification::stall(&task, "starting\nDo you want to overwrite the file? ");
    assert_eq!(notification.status, None);
    assert_eq!(notification.render_for_model(), fixture("stall.txt"));
}

#[test]
fn agent_completion_matches_reference() {
    // The reference's agent ids have 17 characters; ours keep the 9-character form (SPEC §7).
    let expected = fixture("agent-finished.txt").replace("ac26648f68d64e8ec", "ac26648f6");
    let output = "/tmp/claude-1000/-home-user-project/64cd5e4d-92ba-4a6b-9357-8142b1dbb56b/tasks/ac26648f6.output";
    let task = task(
        "ac26648f6",
        "count files",
        "toolu_000002",
        output,
        TaskKind::Agent(Box::default()),
    );
    let summary = summary::agent("count files", AgentEnd::Finished);
    let notification = Notification {
        agent: Some(AgentExtras {
            note: Some(AGENT_RESUME_NOTE.into()),
            result: Some("There are 0 files. SUB-RESULT-TEXT".into()),
            usage: Some(AgentUsage {
                subagent_tokens: 1203,
                tool_uses: 2,
                duration_ms: 185,
                agent_count: None,
            }),
            worktree: None,
        }),
        ..Notification::for_task(&task, Some(TerminalStatus::Completed), summary)
    };
    assert_eq!(notification.render_for_model(), expected);
}

#[test]
fn agent_worktree_renders_after_usage() {
    let task = task(
        "a00000000",
        "wt",
        "toolu_1",
        "/o",
        TaskKind::Agent(Box::default()),
    );
    let notification = Notification {
        agent: Some(AgentExtras {
            worktree: Some(Worktree {
                worktree_path: "/repo/.wt/x".into(),
                worktree_branch: "agent/x".into(),
                ..Worktree::default()
            }),
            ..AgentExtras::default()
        }),
        ..Notification::for_task(&task, Some(TerminalStatus::Failed), "s")
    };
    assert_eq!(
        notification.render(),
        "<task-notification>\n<task-id>a00000000</task-id>\n<tool-use-id>toolu_1</tool-use-id>\n\
         <output-file>/o</output-file>\n<status>failed</status>\n<summary>s</summary>\n\
         <worktree><worktreePath>/repo/.wt/x</worktreePath><worktreeBranch>agent/x</worktreeBranch></worktree>\n\
         </task-notification>"
    );
}

#[test]
fn remote_agents_show_their_type_and_optional_lines_are_omitted() {
    let remote = TaskState::new(
        TaskId::parse("r00000000").unwrap(),
        "review",
        "/o",
        TaskKind::Remote(Box::default()),
    )
    .unwrap();
    let notification = Notification::for_task(&remote, Some(TerminalStatus::Completed), "done");
    assert_eq!(
        notification.render(),
        "<task-notification>\n<task-id>r00000000</task-id>\n<task-type>remote_agent</task-type>\n\
         <output-file>/o</output-file>\n<status>completed</status>\n<summary>done</summary>\n\
         </task-notification>"
    );
}

#[test]
fn monitor_event_renders_after_summary_without_status() {
    let monitor = TaskState::new(
        TaskId::parse("m00000000").unwrap(),
        "ticks",
        "/o",
        TaskKind::Shell(ShellState {
            kind: task_core::ShellKind::Monitor,
            ..ShellState::default()
        }),
    )
    .unwrap();
    let notification = Notification {
        event: Some("tick <1>".into()),
        ..Notification::for_task(&monitor, None, "Monitor \"ticks\" event")
    };
    assert_eq!(
        notification.render(),
        "<task-notification>\n<task-id>m00000000</task-id>\n<output-file>/o</output-file>\n\
         <summary>Monitor \"ticks\" event</summary>\n<event>tick &lt;1&gt;</event>\n\
         </task-notification>"
    );
}
