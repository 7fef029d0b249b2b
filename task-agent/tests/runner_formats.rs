//! Codex and Gemini agents end to end: the executor runs the scripted `fake-agent` with the
//! command line the runner gives each CLI, the fake printing the real CLIs' recorded lines
//! (`tests/fixtures/codex-cli/`, `gemini-cli/`) or Codex's endless reconnect errors. Real
//! processes, real transcripts; every wait is on registry events, with a deadline.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{DEADLINE, Fixture, fake_agent, process_gone};
use serde_json::{Value, json};
use task_agent::format::user_turn_line;
use task_agent::{AgentRequest, CliFormat, CommandRunner, SendOutcome};
use task_core::{EndReason, TaskEvent, TaskId, TaskKind, TaskState, TaskStatus};
use tokio::sync::broadcast::error::RecvError;

const CODEX_RUN: &str = include_str!("fixtures/codex-cli/codex-exec.jsonl");
const CODEX_RESUMED: &str = include_str!("fixtures/codex-cli/codex-exec-then-resume.jsonl");
const GEMINI_RUN: &str = include_str!("fixtures/gemini-cli/gemini-stream.jsonl");

/// Script steps printing `lines` verbatim.
fn raw(lines: &[&str]) -> Vec<Value> {
    lines.iter().map(|line| json!({ "raw": line })).collect()
}

/// A runner of the fake agent with `steps`, spoken to as `format` (`exec` first for Codex, as
/// a real Codex command is given).
fn runner(fx: &Fixture, format: CliFormat, steps: &[Value]) -> Arc<CommandRunner> {
    let script = fx.path(&format!("{format}-{}.jsonl", steps.len()));
    let text: Vec<String> = steps.iter().map(Value::to_string).collect();
    std::fs::write(&script, text.join("\n")).unwrap();
    let mut command = vec![fake_agent()];
    if format == CliFormat::Codex {
        command.push("exec".into());
    }
    command.extend(["--script".into(), script.display().to_string()]);
    Arc::new(CommandRunner::new(command, format, fx.config.clone()).unwrap())
}

/// Waits, on registry events, until `id`'s state satisfies `check`.
async fn until(
    fx: &Fixture,
    id: &TaskId,
    what: &str,
    check: impl Fn(&TaskState) -> bool,
) -> Arc<TaskState> {
    let mut events = fx.registry.subscribe();
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(state) = fx.registry.get(id).filter(|s| check(s)) {
            return state;
        }
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) => panic!("{what}: not before the deadline"),
            Ok(Err(RecvError::Closed)) => panic!("{what}: the registry closed"),
            Ok(_) => {}
        }
    }
}

/// Waits until `id` has stopped and its end was notified.
async fn stopped(fx: &Fixture, id: &TaskId) -> Arc<TaskState> {
    until(fx, id, "the agent's end", |s| {
        s.status().is_terminal() && s.base.notified
    })
    .await
}

/// Waits for the first `task_progress` of `id` that carries an `error`; returns that error.
async fn surfaced_error(
    events: &mut tokio::sync::broadcast::Receiver<TaskEvent>,
    id: &TaskId,
) -> String {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) => panic!("no error surfaced before the deadline"),
            Ok(Err(RecvError::Closed)) => panic!("the registry closed"),
            Ok(Err(RecvError::Lagged(_))) => {}
            Ok(Ok(TaskEvent::TaskProgress {
                task_id, detail, ..
            })) if task_id == *id => {
                if let Some(error) = detail.get("error").and_then(Value::as_str) {
                    assert_eq!(detail["description"], error);
                    return error.to_owned();
                }
            }
            Ok(Ok(_)) => {}
        }
    }
}

fn agent(state: &TaskState) -> &task_core::AgentState {
    match &state.kind {
        TaskKind::Agent(agent) => agent,
        other => panic!("not an agent: {other:?}"),
    }
}

fn assistant_messages(state: &TaskState) -> Vec<String> {
    agent(state)
        .messages
        .iter()
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_codex_agent_on_the_recorded_stream_completes_with_its_final_message() {
    let fx = Fixture::new();
    let lines: Vec<&str> = CODEX_RUN.lines().collect();
    let runner = runner(&fx, CliFormat::Codex, &raw(&lines));
    let handle = fx
        .executor
        .start(AgentRequest::new(
            runner,
            "codex rig",
            "say hello, then fail once",
        ))
        .await
        .unwrap();
    let state = stopped(&fx, &handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let final_message = "Codex rig finished: hello printed, the second command exited 3.";
    assert_eq!(agent(&state).result.as_deref(), Some(final_message));
    assert_eq!(
        assistant_messages(&state),
        ["Looking at the workspace first.", final_message]
    );
    let progress = &agent(&state).progress;
    assert_eq!(progress.tool_use_count, 2);
    // One turn.completed over three requests: see recordings.rs for how the figure is made.
    assert_eq!(progress.token_count, 3726);
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 1);
    let text = notes[0].render();
    assert!(
        text.contains(&format!("<result>{final_message}</result>")),
        "{text}"
    );
    assert!(
        text.contains("<subagent_tokens>3726</subagent_tokens><tool_uses>2</tool_uses>"),
        "{text}"
    );
}

#[tokio::test]
async fn a_resumed_codex_agent_counts_only_what_its_resumed_run_used() {
    let fx = Fixture::new();
    let lines: Vec<&str> = CODEX_RESUMED.lines().collect();
    // The recording: the first run's 6 lines, then what `codex exec resume` printed.
    let (first, resumed) = lines.split_at(6);
    let steps = [json!({"by_prompt": [
        {"if": "check the second thing", "steps": raw(resumed)},
        {"if": "", "steps": raw(first)},
    ]})];
    let runner = runner(&fx, CliFormat::Codex, &steps);
    let handle = fx
        .executor
        .start(AgentRequest::new(
            runner,
            "codex resume",
            "do the first thing",
        ))
        .await
        .unwrap();
    let state = stopped(&fx, &handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(agent(&state).result.as_deref(), Some("first turn done"));
    // Its one report: two requests (1100 + 1200 in, 84 out).
    assert_eq!(agent(&state).progress.token_count, 2300 + 84);

    let outcome = fx
        .executor
        .send(handle.id.as_str(), "check the second thing", None)
        .await
        .unwrap();
    assert!(
        matches!(
            outcome,
            SendOutcome::Resumed {
                previous: TaskStatus::Completed,
                ..
            }
        ),
        "{outcome:?}"
    );
    let state = stopped(&fx, &handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(agent(&state).result.as_deref(), Some("second turn done"));
    // The resumed run's turn.completed holds the thread's totals (3600 in, 126 out); the
    // parser read the earlier run's lines first, so the run counts its own request only:
    // 1300 in, 42 out. (A resumed run starts its count afresh, as the reference's does; one
    // reader of the whole transcript gets 1300 + 126 = 1426: recordings.rs.) Without the
    // earlier totals it would be 3600 + 126.
    assert_eq!(agent(&state).progress.token_count, 1300 + 42);
    let transcript = std::fs::read_to_string(&handle.transcript).unwrap();
    // Codex does not print the user's turns; the runner records each before its run.
    let (turns, cli): (Vec<&str>, Vec<&str>) = transcript
        .split_inclusive('\n')
        .partition(|line| line.starts_with(r#"{"type":"tasks.user""#));
    assert_eq!(cli.concat(), CODEX_RESUMED, "both runs, in one transcript");
    assert_eq!(
        turns,
        [
            format!("{}\n", user_turn_line("do the first thing")),
            format!("{}\n", user_turn_line("check the second thing")),
        ]
    );
    let second_turn = transcript.find("check the second thing").unwrap();
    assert!(transcript[..second_turn].ends_with("\n{\"type\":\"tasks.user\",\"text\":\""));
    assert!(transcript[second_turn..].contains("second turn done"));
}

/// A recording of agent-stream's (`agent-stream/tests/fixtures/`, whose READMEs say what the
/// model charged per request): its lines, the first `take` when given.
fn recorded(path: &str, take: Option<usize>) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../agent-stream/tests/fixtures")
        .join(path);
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .take(take.unwrap_or(usize::MAX))
        .map(str::to_owned)
        .collect()
}

/// Writes `lines` as the file `path` under `dir`.
fn write_lines(dir: &std::path::Path, path: &str, lines: &[String]) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

/// Runs the fake agent printing `stream` as a `format` CLI whose home (`variable`) is
/// `home`; the tokens its task counted.
async fn tokens_counted(
    format: CliFormat,
    stream: &[String],
    variable: &str,
    home: &std::path::Path,
) -> u64 {
    let fx = Fixture::new();
    let lines: Vec<&str> = stream.iter().map(String::as_str).collect();
    let runner = runner(&fx, format, &raw(&lines));
    let mut request = AgentRequest::new(runner, "tokens", "count the tokens");
    request.env.push((variable.into(), home.into()));
    let handle = fx.executor.start(request).await.unwrap();
    let state = stopped(&fx, &handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    agent(&state).progress.token_count
}

#[tokio::test]
async fn a_codex_agent_counts_each_request_from_its_rollout_file() {
    const THREAD: &str = "01a22153-52d1-7e32-9812-08b5730e410e";
    let rollout = format!("sessions/2026/11/28/rollout-2026-11-28T08-43-58-{THREAD}.jsonl");
    let stream = recorded("codex-0.171.0/exec.jsonl", None);
    let home = tempfile::tempdir().unwrap();
    // The rollout as the first run left it (its first 24 lines).
    let first_run = recorded(&format!("codex-0.171.0/home/{rollout}"), Some(24));
    write_lines(home.path(), &rollout, &first_run);
    let counted = tokens_counted(CliFormat::Codex, &stream, "CODEX_HOME", home.path()).await;
    assert_eq!(
        counted,
        1300 + 3 * 42,
        "the latest request's input, every request's output"
    );
    // Without the rollout, the stream's totals (the three inputs summed).
    let empty = tempfile::tempdir().unwrap();
    let counted = tokens_counted(CliFormat::Codex, &stream, "CODEX_HOME", empty.path()).await;
    assert_eq!(counted, 3600 + 126);
}

#[tokio::test]
async fn a_gemini_agent_counts_each_request_from_its_chat_file() {
    let chat = ".gemini/tmp/gwork/chats/session-2026-11-28T08-46-7129bfa0.jsonl";
    let stream = recorded("gemini-0.61.0/stream.jsonl", None);
    let home = tempfile::tempdir().unwrap();
    write_lines(
        home.path(),
        chat,
        &recorded(&format!("gemini-0.61.0/home/{chat}"), None),
    );
    let counted = tokens_counted(CliFormat::Gemini, &stream, "GEMINI_CLI_HOME", home.path()).await;
    assert_eq!(counted, 1300 + 3 * 42 + 1, "and the model router's output");
}

#[tokio::test]
async fn a_gemini_agent_on_the_recorded_stream_keeps_whole_messages_and_the_final_result() {
    let fx = Fixture::new();
    let lines: Vec<&str> = GEMINI_RUN.lines().collect();
    let runner = runner(&fx, CliFormat::Gemini, &raw(&lines));
    let handle = fx
        .executor
        .start(AgentRequest::new(
            runner,
            "gemini rig",
            "say hello, then fail once",
        ))
        .await
        .unwrap();
    let state = stopped(&fx, &handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    let final_message = "Gemini rig finished: hello printed, the second command exited 3.";
    assert_eq!(
        assistant_messages(&state),
        ["Looking at the workspace first.", final_message],
        "fragments joined into messages"
    );
    assert_eq!(agent(&state).result.as_deref(), Some(final_message));
    assert_eq!(agent(&state).progress.tool_use_count, 2);
    // The main model's three requests (3600 in) are one figure; the router's are apart.
    assert_eq!(agent(&state).progress.token_count, 3600 + 127);
}

#[tokio::test]
async fn a_codex_agent_stuck_reconnecting_fails_with_the_clis_words_and_is_stopped() {
    let mut config = common::config();
    config.error_loop_limit = Duration::from_millis(200);
    let fx = Fixture::with_config(config);
    let go = fx.path("go");
    let steps = [
        json!({"raw": CODEX_RUN.lines().next().unwrap()}),
        json!({"raw": r#"{"type":"turn.started"}"#}),
        json!({"wait_file": go}),
        json!({"reconnect_loop": {"every_ms": 20}}),
    ];
    let runner = runner(&fx, CliFormat::Codex, &steps);
    let mut events = fx.registry.subscribe();
    let handle = fx
        .executor
        .start(AgentRequest::new(runner, "offline codex", "do it"))
        .await
        .unwrap();
    // Running, waiting for the signal: its process group is in the state.
    let running = until(&fx, &handle.id, "the agent running", |s| {
        s.status() == TaskStatus::Running
    })
    .await;
    let group = agent(&running).process.expect("a running CLI's group").pgid;
    std::fs::write(&go, b"").unwrap();

    let first = surfaced_error(&mut events, &handle.id).await;
    assert!(
        first.starts_with("Reconnecting... 1/5 (stream disconnected"),
        "{first}"
    );

    // The fake never stops by itself: only the limit ends the run.
    let state = stopped(&fx, &handle.id).await;
    assert_eq!(state.status(), TaskStatus::Failed);
    let Some(EndReason::Errored { message }) = &state.base.end_reason else {
        panic!("{:?}", state.base.end_reason);
    };
    assert!(message.starts_with("Reconnecting... "), "{message}");
    assert!(
        message.contains("(stream disconnected before completion: error sending request"),
        "the CLI's own words: {message}"
    );
    assert!(
        message.ends_with("(the agent reported only errors for 200ms; stopped)"),
        "{message}"
    );
    assert_eq!(agent(&state).error.as_deref(), Some(message.as_str()));
    assert!(agent(&state).process.is_none());
    let notes = fx.registry.notifications().drain();
    assert_eq!(notes.len(), 1);
    assert_eq!(
        notes[0].summary,
        format!("Agent \"offline codex\" failed: {message}")
    );
    assert!(process_gone(group), "the CLI was stopped");
}

#[tokio::test]
async fn one_error_then_progress_is_shown_then_cleared_and_does_not_fail_the_run() {
    // A limit far shorter than the run: one error alone never fails it.
    let mut config = common::config();
    config.error_loop_limit = Duration::from_millis(1);
    let fx = Fixture::with_config(config);
    let go = fx.path("go");
    let lines: Vec<&str> = CODEX_RUN.lines().collect();
    let mut steps = raw(&lines[..2]);
    steps.push(json!({"raw": r#"{"type":"error","message":"Reconnecting... 1/5 (stream disconnected before completion)"}"#}));
    steps.push(json!({"wait_file": go}));
    steps.extend(raw(&lines[2..]));
    let runner = runner(&fx, CliFormat::Codex, &steps);
    let mut events = fx.registry.subscribe();
    let handle = fx
        .executor
        .start(AgentRequest::new(runner, "flaky codex", "do it"))
        .await
        .unwrap();
    let error = surfaced_error(&mut events, &handle.id).await;
    assert_eq!(
        error,
        "Reconnecting... 1/5 (stream disconnected before completion)"
    );
    // The CLI waits for the signal: the error is what its state shows meanwhile.
    let state = fx.state(&handle.id);
    assert_eq!(state.status(), TaskStatus::Running);
    assert_eq!(agent(&state).error.as_deref(), Some(error.as_str()));

    std::fs::write(&go, b"").unwrap();
    let state = stopped(&fx, &handle.id).await;
    assert_eq!(state.status(), TaskStatus::Completed);
    assert_eq!(agent(&state).error, None, "cleared once the CLI went on");
    assert_eq!(
        agent(&state).result.as_deref(),
        Some("Codex rig finished: hello printed, the second command exited 3.")
    );
}

#[tokio::test]
async fn a_codex_cli_that_exits_after_an_error_fails_with_that_error() {
    let fx = Fixture::new();
    let steps = [
        json!({"raw": CODEX_RUN.lines().next().unwrap()}),
        json!({"raw": r#"{"type":"error","message":"unexpected status 401 Unauthorized"}"#}),
        json!({"exit": 1}),
    ];
    let runner = runner(&fx, CliFormat::Codex, &steps);
    let handle = fx
        .executor
        .start(AgentRequest::new(runner, "unauthorized codex", "do it"))
        .await
        .unwrap();
    let state = stopped(&fx, &handle.id).await;
    assert_eq!(state.status(), TaskStatus::Failed);
    assert_eq!(state.base.end_reason, Some(EndReason::Exited { code: 1 }));
    assert_eq!(
        agent(&state).error.as_deref(),
        Some("agent exited with code 1 without a result: unexpected status 401 Unauthorized")
    );
}
