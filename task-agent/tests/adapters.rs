//! The Codex and Gemini adapters on event lines written from their documented formats
//! (openai/codex `exec_events.rs`; Gemini CLI's headless-mode reference).

#![allow(clippy::unwrap_used)]

use task_agent::{AgentEvent, CliFormat, ProgressTracker, TurnOutcome};

fn run(format: CliFormat, stream: &str) -> (Vec<AgentEvent>, ProgressTracker) {
    let mut parser = format.parser();
    let mut events = Vec::new();
    for line in stream.lines() {
        parser.parse_line(line.as_bytes(), &mut events).unwrap();
    }
    let mut tracker = ProgressTracker::default();
    for event in &events {
        tracker.apply(event);
    }
    (events, tracker)
}

fn activities(tracker: &ProgressTracker) -> Vec<String> {
    tracker
        .progress()
        .recent_activities
        .iter()
        .map(|a| a.activity_description.clone().unwrap_or_default())
        .collect()
}

#[test]
fn codex_exec_json_gives_session_tools_usage_and_the_last_message_as_result() {
    let (events, tracker) = run(CliFormat::Codex, include_str!("fixtures/codex-exec.jsonl"));
    assert!(
        matches!(&events[0], AgentEvent::Init { session_id, .. } if session_id.starts_with("0199a213"))
    );
    assert_eq!(tracker.progress().tool_use_count, 3);
    // Codex wraps commands in a shell; the activity shows the command inside.
    assert_eq!(
        activities(&tracker),
        ["Running ls", "Running cat missing", "Editing src/lib.rs"]
    );
    let finished: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolFinished { id, is_error, .. } => Some((id.as_str(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        finished,
        [("item_1", false), ("item_2", true), ("item_3", false)]
    );
    // Cached input is part of input_tokens in OpenAI's accounting: not added again.
    assert_eq!(tracker.progress().token_count, 24763 + 122);
    assert_eq!(
        tracker.outcome(),
        Some(&TurnOutcome::Success {
            result: Some("Two entries: Cargo.toml and src.".into())
        })
    );
}

#[test]
fn a_failed_codex_turn_is_an_error_with_its_message() {
    let (_, tracker) = run(
        CliFormat::Codex,
        include_str!("fixtures/codex-failed.jsonl"),
    );
    assert_eq!(
        tracker.outcome(),
        Some(&TurnOutcome::Error {
            kind: "turn.failed".into(),
            message: Some("stream disconnected before completion".into())
        })
    );
}

#[test]
fn gemini_stream_json_gives_session_tools_usage_and_the_joined_reply() {
    let (events, tracker) = run(
        CliFormat::Gemini,
        include_str!("fixtures/gemini-stream.jsonl"),
    );
    assert_eq!(
        events[0],
        AgentEvent::Init {
            session_id: "abc123".into(),
            model: Some("gemini-2.0-flash-exp".into())
        }
    );
    assert_eq!(tracker.progress().tool_use_count, 2);
    assert_eq!(
        activities(&tracker),
        ["Running list files", "Reading README.md"]
    );
    assert!(events.contains(&AgentEvent::ToolFinished {
        id: "read_file-2".into(),
        is_error: true,
        reason: Some("no such file".into())
    }));
    assert_eq!(tracker.progress().token_count, 250);
    assert_eq!(
        tracker.result_text().as_deref(),
        Some("Here are the files: README.md")
    );
}

#[test]
fn a_failed_gemini_result_carries_its_error() {
    let stream = r#"{"type":"init","session_id":"s","model":"m"}
{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"turn limit"},"stats":{"input_tokens":1,"output_tokens":1}}"#;
    let (_, tracker) = run(CliFormat::Gemini, stream);
    assert_eq!(
        tracker.outcome(),
        Some(&TurnOutcome::Error {
            kind: "FatalTurnLimitedError".into(),
            message: Some("turn limit".into())
        })
    );
}

#[test]
fn every_format_detects_itself_from_its_first_line() {
    for (format, stream) in [
        (CliFormat::Codex, include_str!("fixtures/codex-exec.jsonl")),
        (
            CliFormat::Gemini,
            include_str!("fixtures/gemini-stream.jsonl"),
        ),
        (
            CliFormat::Claude,
            include_str!("fixtures/run-background-agent.jsonl"),
        ),
    ] {
        let first = stream.lines().next().unwrap();
        assert_eq!(CliFormat::detect(first.as_bytes()), Some(format));
    }
}
