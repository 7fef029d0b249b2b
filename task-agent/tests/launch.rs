//! The `Launch` side: an agent started from a request that crossed a process boundary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;
use task_agent::AgentStart;
use task_core::{Caller, EndReason, Launch, LaunchError, TaskId, TaskStatus};

fn start_request(fx: &Fixture, steps: &[serde_json::Value]) -> AgentStart {
    let script = fx.path("launch-script.jsonl");
    let text: Vec<String> = steps.iter().map(ToString::to_string).collect();
    std::fs::write(&script, text.join("\n")).unwrap();
    serde_json::from_value(json!({
        "command": [fake_agent(), "--script", script],
        "description": "launched",
        "prompt": "go",
        "name": "scout",
    }))
    .unwrap()
}

fn caller(fx: &Fixture) -> Caller {
    Caller {
        cwd: fx.dir.path().to_path_buf(),
        env: vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap()),
            ("MARKER".into(), "from-caller".into()),
        ],
        agent_id: Some(TaskId::parse("aowner001").unwrap()),
        tool_use_id: Some("toolu_9".into()),
        background: true,
        task_id: None,
    }
}

#[tokio::test]
async fn a_launched_agent_runs_in_the_callers_directory_and_environment_owned_by_its_agent() {
    let fx = Fixture::new();
    let seen = fx.path("seen");
    let steps = [
        json!({"read_user": true}),
        json!({"spawn": format!("printf '%s|%s|%s' \"$MARKER\" \"${{HOME:-unset}}\" \"$PWD\" > {}", seen.display())}),
        json!({"result": "ok"}),
    ];
    let launched = fx
        .executor
        .launch(start_request(&fx, &steps), caller(&fx))
        .unwrap();
    let id = launched.id;
    assert_eq!(fx.state(&id).status(), TaskStatus::Pending);
    (launched.start.unwrap())();
    let state = fx.wait_done(&id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(
        state.base.agent_id.map(|id| id.to_string()).as_deref(),
        Some("aowner001")
    );
    assert_eq!(state.base.tool_use_id.as_deref(), Some("toolu_9"));
    assert_eq!(fx.executor.resolve("scout").unwrap(), id);
    wait_file(&seen).await;
    let seen = wait_for(|| {
        std::fs::read_to_string(&seen)
            .ok()
            .filter(|s| s.contains('|'))
    })
    .await;
    let cwd = fx.dir.path().canonicalize().unwrap();
    assert_eq!(seen, format!("from-caller|unset|{}", cwd.display()));
}

#[tokio::test]
async fn a_bad_launch_request_is_invalid_and_registers_nothing() {
    let fx = Fixture::new();
    let mut request = start_request(&fx, &[]);
    request.command.clear();
    let error = fx.executor.launch(request, caller(&fx)).unwrap_err();
    assert!(matches!(error, LaunchError::Invalid(_)), "{error}");
    let mut elsewhere = caller(&fx);
    elsewhere.cwd = fx.path("missing");
    let error = fx
        .executor
        .launch(start_request(&fx, &[]), elsewhere)
        .unwrap_err();
    assert!(matches!(error, LaunchError::Invalid(_)), "{error}");
    assert!(fx.registry.is_empty());
}

#[tokio::test]
async fn an_agent_registered_but_never_started_ends_failed_silently() {
    let fx = Fixture::new();
    let launched = fx
        .executor
        .launch(start_request(&fx, &[]), caller(&fx))
        .unwrap();
    let id = launched.id;
    drop(launched);
    let state = fx.state(&id);
    assert_eq!(state.status(), TaskStatus::Failed);
    assert!(matches!(
        state.base.end_reason,
        Some(EndReason::SpawnFailed { .. })
    ));
    assert!(fx.registry.notifications().is_empty());
}
