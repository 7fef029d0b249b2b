//! End to end with the scripted fake agent CLI: real processes, real files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use serde_json::json;
use task_agent::{AgentError, SendOutcome};
use task_core::{EndReason, TaskEvent, TaskStatus};

fn result(text: &str) -> serde_json::Value {
    json!({"result": text})
}

#[tokio::test]
async fn a_successful_agent_completes_and_notifies_once_with_result_and_usage() {
    let fx = Fixture::new();
    let env_file = fx.path("agent-id");
    let mut events = fx.registry.subscribe();
    let steps = [
        json!({"read_user": true}),
        json!({"spawn": format!("printf %s \"$TASKS_AGENT_ID\" > {}", env_file.display())}),
        json!({"tool": "Bash", "input": {"command": "ls | wc -l", "description": "count"}, "usage": {"input_tokens": 1200, "output_tokens": 1}}),
        json!({"tool": "Read", "input": {"file_path": "/etc/hostname"}, "usage": {"input_tokens": 1200, "output_tokens": 1}}),
        json!({"text": "There are 0 files.", "usage": {"input_tokens": 1200, "output_tokens": 1}}),
        result("There are 0 files."),
    ];
    let (handle, state, notes) = fx.run(&steps, "count files").await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(state.base.end_reason, Some(EndReason::Succeeded));
    assert!(
        state.base.evict_after.is_some(),
        "a stopped agent gets the panel grace"
    );
    assert_eq!(notes.len(), 1);
    let text = notes[0].render();
    assert!(
        text.contains("<summary>Agent \"count files\" finished</summary>"),
        "{text}"
    );
    assert!(
        text.contains("<result>There are 0 files.</result>"),
        "{text}"
    );
    assert!(
        text.contains("<subagent_tokens>1203</subagent_tokens><tool_uses>2</tool_uses>"),
        "{text}"
    );
    assert!(
        text.contains("<note>A task-notification fires each time"),
        "{text}"
    );

    let agent = fx.agent(&handle.id);
    assert_eq!(agent.progress.tool_use_count, 2);
    assert_eq!(agent.result.as_deref(), Some("There are 0 files."));

    // The output file is a symlink to the transcript, which holds what the CLI printed.
    let link = std::fs::read_link(&handle.output_file).unwrap();
    assert_eq!(link, handle.transcript);
    let transcript = std::fs::read_to_string(&handle.output_file).unwrap();
    assert!(
        transcript
            .lines()
            .last()
            .unwrap()
            .contains("\"type\":\"result\"")
    );
    let agent_id = wait_for(|| {
        std::fs::read_to_string(&env_file)
            .ok()
            .filter(|s| !s.is_empty())
    })
    .await;
    assert_eq!(agent_id, handle.id.as_str());

    let mut descriptions = Vec::new();
    while let Ok(event) = events.try_recv() {
        if let TaskEvent::TaskProgress {
            task_id, detail, ..
        } = event
            && task_id == handle.id
        {
            descriptions.push(detail["description"].as_str().unwrap().to_owned());
            assert_eq!(detail["subagent_type"], "general-purpose");
        }
    }
    assert_eq!(descriptions, ["Running count", "Reading /etc/hostname"]);
}

#[tokio::test]
async fn an_error_result_fails_the_task_with_its_message() {
    let fx = Fixture::new();
    let steps = [
        json!({"read_user": true}),
        json!({"result_error": "error_max_turns", "message": "Reached maximum number of turns (3)"}),
    ];
    let (_, state, notes) = fx.run(&steps, "long job").await;
    assert_eq!(state.status(), TaskStatus::Failed);
    assert!(
        matches!(&state.base.end_reason, Some(EndReason::Errored { message }) if message.starts_with("Reached"))
    );
    assert_eq!(notes.len(), 1);
    assert_eq!(
        notes[0].summary,
        "Agent \"long job\" failed: Reached maximum number of turns (3)"
    );
}

#[tokio::test]
async fn an_error_result_without_message_fails_with_its_subtype() {
    let fx = Fixture::new();
    let steps = [
        json!({"read_user": true}),
        json!({"result_error": "error_during_execution"}),
    ];
    let (handle, _, _) = fx.run(&steps, "x").await;
    assert_eq!(
        fx.agent(&handle.id).error.as_deref(),
        Some("error_during_execution")
    );
}

#[tokio::test]
async fn a_crash_without_result_fails_with_the_exit_status_and_last_stderr_lines() {
    let fx = Fixture::new();
    let steps = [
        json!({"read_user": true}),
        json!({"tool": "Bash", "input": {"command": "true"}}),
        json!({"stderr": "fatal: out of cheese"}),
        json!({"exit": 3}),
    ];
    let (handle, state, notes) = fx.run(&steps, "crasher").await;
    assert_eq!(state.status(), TaskStatus::Failed);
    assert_eq!(state.base.end_reason, Some(EndReason::Exited { code: 3 }));
    let error = fx.agent(&handle.id).error.unwrap();
    assert!(error.contains("code 3"), "{error}");
    assert!(error.contains("fatal: out of cheese"), "{error}");
    assert_eq!(notes.len(), 1);
    assert!(
        notes[0]
            .summary
            .starts_with("Agent \"crasher\" failed: agent exited with code 3")
    );
}

/// A tool's daemon that inherited the CLI's stderr keeps the pipe open: the end reads what
/// the CLI wrote and goes on at once (the kill grace is an hour here, and the wait a deadline).
#[tokio::test]
async fn a_cli_whose_daemon_holds_its_stderr_ends_at_once_with_its_last_stderr_lines() {
    let mut config = config();
    config.kill_grace = Duration::from_secs(3600);
    let fx = Fixture::with_config(config);
    let pid_file = fx.path("daemon.pid");
    let steps = [
        json!({"read_user": true}),
        json!({"spawn": "exec sleep 300", "pid_file": pid_file}),
        json!({"stderr": "fatal: the last words"}),
        json!({"exit": 3}),
    ];
    let (handle, state, _) = fx.run(&steps, "leaves a daemon").await;
    let daemon: i32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    let alive = !process_gone(daemon.unsigned_abs());
    let daemon = rustix::process::Pid::from_raw(daemon).unwrap();
    let _ = rustix::process::kill_process(daemon, rustix::process::Signal::KILL);
    assert!(alive, "the daemon held stderr when the task ended");
    assert_eq!(state.base.end_reason, Some(EndReason::Exited { code: 3 }));
    let error = fx.agent(&handle.id).error.unwrap();
    assert!(error.contains("fatal: the last words"), "{error}");
}

#[tokio::test]
async fn a_cli_that_cannot_start_is_an_error_and_a_failed_task() {
    let fx = Fixture::new();
    let runner = task_agent::CommandRunner::new(
        [fx.path("no-such-cli").display().to_string()],
        task_agent::CliFormat::Claude,
        config(),
    )
    .unwrap();
    let request = task_agent::AgentRequest::new(std::sync::Arc::new(runner), "d", "p");
    let error = fx.executor.start(request).await.unwrap_err();
    assert!(matches!(error, AgentError::Spawn { .. }), "{error}");
    assert!(
        fx.registry.notifications().is_empty(),
        "the caller has the error"
    );
}

#[tokio::test]
async fn malformed_and_unknown_lines_are_kept_and_skipped() {
    let fx = Fixture::new();
    let steps = [
        json!({"read_user": true}),
        json!({"raw": "{not json at all"}),
        json!({"raw": "{\"type\":\"brand_new_event\",\"payload\":[1,2,3]}"}),
        json!({"raw": "plain text from a confused CLI"}),
        json!({"tool": "Read", "input": {"file_path": "/etc/hostname"}}),
        result("fine"),
    ];
    let (handle, state, _) = fx.run(&steps, "noisy").await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(fx.agent(&handle.id).progress.tool_use_count, 1);
    let transcript = std::fs::read_to_string(&handle.transcript).unwrap();
    assert!(transcript.contains("{not json at all\n"));
    assert!(transcript.contains("plain text from a confused CLI\n"));
}

#[tokio::test]
async fn kill_mid_turn_ends_the_process_tree_with_no_notification() {
    let fx = Fixture::new();
    let (pid_file, ready) = (fx.path("child.pid"), fx.path("ready"));
    let steps = [
        json!({"read_user": true}),
        json!({"spawn": "sleep 300", "pid_file": pid_file}),
        json!({"tool": "Bash", "input": {"command": "sleep 300", "description": "nap"}}),
        json!({"touch": ready}),
        json!({"wait_file": fx.path("never")}),
        result("unreachable"),
    ];
    let mut events = fx.registry.subscribe();
    let handle = fx
        .executor
        .start(fx.request(&steps, "sleeper"))
        .await
        .unwrap();
    wait_file(&ready).await;
    let child: u32 = std::fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    assert!(!process_gone(child));

    let outcome = fx.registry.kill(&handle.id).await.unwrap();
    assert_eq!(outcome, task_core::KillOutcome::Killed);
    assert_eq!(fx.state(&handle.id).status(), TaskStatus::Killed);
    assert_eq!(
        fx.state(&handle.id).base.end_reason,
        Some(EndReason::Killed)
    );
    wait_for(|| process_gone(child).then_some(())).await;
    assert!(
        fx.registry.notifications().is_empty(),
        "a kill sends the model nothing"
    );
    let mut stopped = 0;
    while let Ok(event) = events.try_recv() {
        if let TaskEvent::TaskNotification {
            task_id, status, ..
        } = event
        {
            assert_eq!(task_id, handle.id);
            assert_eq!(status, Some(task_core::SdkStatus::Stopped));
            stopped += 1;
        }
    }
    assert_eq!(stopped, 1);
}

#[tokio::test]
async fn a_message_while_busy_is_queued_and_delivered_as_the_next_turn() {
    let fx = Fixture::new();
    let (started, go) = (fx.path("started"), fx.path("go"));
    let steps = [
        json!({"read_user": true}),
        json!({"touch": started}),
        json!({"wait_file": go}),
        json!({"text": "first"}),
        result("first"),
    ];
    let handle = fx.executor.start(fx.request(&steps, "busy")).await.unwrap();
    wait_file(&started).await;
    let outcome = fx
        .executor
        .send(handle.id.as_str(), "second", None)
        .await
        .unwrap();
    assert_eq!(outcome, SendOutcome::Queued(handle.id));
    assert_eq!(fx.agent(&handle.id).pending_messages, ["second"]);
    std::fs::write(&go, b"").unwrap();

    let state = fx.wait_done(&handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let agent = fx.agent(&handle.id);
    assert!(agent.pending_messages.is_empty());
    assert_eq!(agent.result.as_deref(), Some("echo: second"));
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 1, "one stop, one notification");
    assert!(notes[0].render().contains("<result>echo: second</result>"));
}

#[tokio::test]
async fn a_message_to_a_stopped_agent_resumes_it_under_the_same_id_and_it_notifies_again() {
    let fx = Fixture::new();
    let steps = [
        json!({"read_user": true}),
        json!({"text": "ok"}),
        result("ok"),
    ];
    let mut request = fx.request(&steps, "research files");
    request.name = Some("researcher".into());
    request.tool_use_id = Some("toolu_000002".into());
    let handle = fx.executor.start(request).await.unwrap();
    fx.wait_done(&handle.id).await;
    let first = fx.registry.notifications().drain();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].tool_use_id.as_deref(), Some("toolu_000002"));

    let outcome = fx
        .executor
        .send(
            "researcher",
            "please also check the README",
            Some("toolu_000011".into()),
        )
        .await
        .unwrap();
    let to: task_core::Address = "researcher".parse().unwrap();
    let text = task_agent::send_reply(&Ok(outcome.clone()))
        .model_result(&to)
        .to_string();
    let SendOutcome::Resumed {
        handle: resumed,
        previous,
    } = outcome
    else {
        panic!("expected a resume, got {outcome:?}")
    };
    assert_eq!(previous, TaskStatus::Completed);
    assert_eq!(
        text,
        format!(
            r#"{{"success":true,"message":"Agent \"researcher\" was stopped (completed); resumed it in the background with your message. You'll be notified when it finishes. Output: {}","resumedAgentId":"{}"}}"#,
            handle.output_file.display(),
            handle.id
        )
    );
    assert_eq!(resumed.id, handle.id);
    assert_eq!(resumed.output_file, handle.output_file);

    let state = fx.wait_done(&handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let second = fx.registry.notifications().drain();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].task_id, handle.id);
    assert_eq!(second[0].tool_use_id.as_deref(), Some("toolu_000011"));
    assert!(
        second[0]
            .render()
            .contains("<result>echo: please also check the README</result>")
    );
    // Both runs wrote to the same transcript.
    let transcript = std::fs::read_to_string(&handle.transcript).unwrap();
    assert_eq!(transcript.matches("\"type\":\"result\"").count(), 2);
}

#[tokio::test]
async fn an_unknown_name_gets_the_reference_refusal() {
    let fx = Fixture::new();
    let error = fx
        .executor
        .send("team-lead", "found 3 files", None)
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "No agent named 'team-lead' is currently addressable. Spawn a new one or use the agent ID."
    );
}

#[tokio::test]
async fn a_running_agent_name_cannot_be_taken_twice() {
    let fx = Fixture::new();
    let steps = [
        json!({"read_user": true}),
        json!({"wait_file": fx.path("go")}),
        result("ok"),
    ];
    let mut first = fx.request(&steps, "a");
    first.name = Some("worker".into());
    let handle = fx.executor.start(first).await.unwrap();
    let mut second = fx.request(&steps, "b");
    second.name = Some("worker".into());
    assert!(matches!(
        fx.executor.start(second).await,
        Err(AgentError::NameTaken(_))
    ));
    fx.registry.kill(&handle.id).await.unwrap();
}

#[tokio::test]
async fn a_message_the_cli_never_answered_stays_pending_and_a_resume_delivers_it() {
    let fx = Fixture::new();
    let (started, go) = (fx.path("started"), fx.path("go"));
    let steps = [
        json!({"read_user": true}),
        json!({"touch": started}),
        json!({"wait_file": go}),
        result("first"),
        json!({"exit": 0}),
    ];
    let handle = fx
        .executor
        .start(fx.request(&steps, "quitter"))
        .await
        .unwrap();
    wait_file(&started).await;
    fx.executor
        .send(handle.id.as_str(), "second", None)
        .await
        .unwrap();
    std::fs::write(&go, b"").unwrap();
    fx.wait_done(&handle.id).await;
    assert_eq!(
        fx.agent(&handle.id).pending_messages,
        ["second"],
        "nothing is lost"
    );
    assert_eq!(fx.registry.notifications().drain().len(), 1);

    let outcome = fx
        .executor
        .send(handle.id.as_str(), "third", None)
        .await
        .unwrap();
    assert!(matches!(outcome, SendOutcome::Resumed { .. }));
    let state = fx.wait_done(&handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let agent = fx.agent(&handle.id);
    assert!(agent.pending_messages.is_empty());
    assert_eq!(
        agent.result.as_deref(),
        Some("echo: second"),
        "the resumed run answered both"
    );
    assert_eq!(fx.registry.notifications().drain().len(), 1);
}
