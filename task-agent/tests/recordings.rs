//! Golden tests on recordings of the real CLIs (`tests/fixtures/codex-cli/`, `gemini-cli/`:
//! Codex 0.169.0 and Gemini CLI 0.61.0 against scripted model servers). Each fixture's README
//! lists what the model server sent per request; the token figures are checked against the
//! reference's rule (SPEC §7: the latest request's input + every request's output) computed
//! from that table.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use task_agent::{AgentEvent, CliFormat, ProgressTracker, TranscriptTail, TurnOutcome};

const CODEX_README: &str = include_str!("fixtures/codex-cli/README.md");
const CODEX_RUN: &str = include_str!("fixtures/codex-cli/codex-exec.jsonl");
const CODEX_RESUMED: &str = include_str!("fixtures/codex-cli/codex-exec-then-resume.jsonl");
const CODEX_FAILED: &str = include_str!("fixtures/codex-cli/codex-exec-failed.jsonl");
const GEMINI_README: &str = include_str!("fixtures/gemini-cli/README.md");
const GEMINI_RUN: &str = include_str!("fixtures/gemini-cli/gemini-stream.jsonl");
const GEMINI_FAILED: &str = include_str!("fixtures/gemini-cli/gemini-stream-failed.jsonl");

/// The events of `stream` parsed in `format` by one parser (as one reader of the transcript
/// sees it), and the progress they give.
fn parse(format: CliFormat, stream: &str) -> (Vec<AgentEvent>, ProgressTracker) {
    let mut parser = format.parser();
    let mut events = Vec::new();
    for line in stream.lines() {
        parser.parse_line(line.as_bytes(), &mut events).unwrap();
    }
    parser.finish(&mut events);
    let mut tracker = ProgressTracker::default();
    for event in &events {
        tracker.apply(event);
    }
    (events, tracker)
}

/// The (input, output) of each model request, in order, from a README's table.
fn requests(readme: &str) -> Vec<(u64, u64)> {
    readme
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            match cells.as_slice() {
                ["", _, input, output, ""] => Some((input.parse().ok()?, output.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

/// The reference's rule over those requests: the latest one's input plus every output.
fn per_request_rule(requests: &[(u64, u64)]) -> u64 {
    let latest_input = requests.last().unwrap().0;
    latest_input + requests.iter().map(|r| r.1).sum::<u64>()
}

fn texts(events: &[AgentEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Text(text) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn usages(events: &[AgentEvent]) -> Vec<(u64, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Usage(u) => Some((u.input_tokens, u.output_tokens)),
            _ => None,
        })
        .collect()
}

fn finished(events: &[AgentEvent]) -> Vec<(&str, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolFinished { id, is_error, .. } => Some((id.as_str(), *is_error)),
            _ => None,
        })
        .collect()
}

fn activities(tracker: &ProgressTracker) -> Vec<String> {
    tracker
        .progress()
        .recent_activities
        .iter()
        .map(|a| a.activity_description.clone().unwrap_or_default())
        .collect()
}

fn errors(events: &[AgentEvent]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Error { message } => Some(message.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_readmes_give_the_reference_figures_codex_1426_and_gemini_1427() {
    assert_eq!(requests(CODEX_README), [(1100, 42), (1200, 42), (1300, 42)]);
    assert_eq!(per_request_rule(&requests(CODEX_README)), 1426);
    assert_eq!(
        requests(GEMINI_README),
        [(10, 1), (1100, 42), (1200, 42), (1300, 42)],
        "the model router's request first"
    );
    assert_eq!(per_request_rule(&requests(GEMINI_README)), 1427);
}

#[test]
fn codex_tokens_across_exec_resume_equal_the_per_request_rule() {
    let (events, tracker) = parse(CliFormat::Codex, CODEX_RESUMED);
    // The second turn.completed repeats the whole thread's totals (3600 in, 126 out): only
    // the difference, the resumed run's one request, is counted.
    assert_eq!(usages(&events), [(2300, 84), (1300, 42)]);
    assert_eq!(
        tracker.progress().token_count,
        per_request_rule(&requests(CODEX_README))
    );
    assert_eq!(tracker.progress().token_count, 1426);
    let inits: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Init { session_id, .. } => Some(session_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(inits, ["01a20db3-dc52-70a0-8004-61061445fe9e"; 2]);
    let results: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TurnEnded(TurnOutcome::Success { result }) => result.as_deref(),
            _ => None,
        })
        .collect();
    assert_eq!(results, ["first turn done", "second turn done"]);
}

#[test]
fn a_codex_turn_of_several_requests_is_one_report_whose_inputs_are_summed() {
    let (events, tracker) = parse(CliFormat::Codex, CODEX_RUN);
    // One turn of three model requests: Codex reports only the turn's totals, so the latest
    // input the figure can use is the three requests' inputs together. What is exact: every
    // output (126). What is over: the inputs of the requests before the last (1100 + 1200).
    assert_eq!(usages(&events), [(3600, 126)]);
    let requests = requests(CODEX_README);
    let earlier_inputs: u64 = requests[..requests.len() - 1].iter().map(|r| r.0).sum();
    assert_eq!(tracker.progress().cumulative_output_tokens, 126);
    assert_eq!(
        tracker.progress().token_count,
        per_request_rule(&requests) + earlier_inputs
    );
    assert_eq!(tracker.progress().token_count, 3726);
}

#[test]
fn a_codex_run_shows_its_messages_commands_failed_command_and_final_result() {
    let (events, tracker) = parse(CliFormat::Codex, CODEX_RUN);
    assert!(matches!(
        &events[0],
        AgentEvent::Init { session_id, .. } if session_id == "01a20db3-2458-72d0-9c7c-bcc3fcd523a8"
    ));
    assert_eq!(
        texts(&events),
        [
            "Looking at the workspace first.",
            "Codex rig finished: hello printed, the second command exited 3."
        ]
    );
    assert_eq!(tracker.progress().tool_use_count, 2);
    assert_eq!(
        activities(&tracker),
        [
            "Running echo hello from the codex rig; printf 'files: '; ls | wc -l",
            "Running echo failing on purpose >&2; exit 3"
        ]
    );
    // The command that exited 3 is a failed tool use.
    assert_eq!(finished(&events), [("item_1", false), ("item_2", true)]);
    assert_eq!(
        tracker.outcome(),
        Some(&TurnOutcome::Success {
            result: Some("Codex rig finished: hello printed, the second command exited 3.".into())
        })
    );
}

#[test]
fn a_failed_codex_run_surfaces_its_error_then_fails_the_turn_with_it() {
    let (events, tracker) = parse(CliFormat::Codex, CODEX_FAILED);
    let refused = r#"{"error": {"message": "scripted: the model refused this request", "type": "invalid_request_error", "code": null}}"#;
    assert_eq!(errors(&events), [refused]);
    let error_at = events
        .iter()
        .position(|e| matches!(e, AgentEvent::Error { .. }))
        .unwrap();
    assert_eq!(
        events[error_at + 1],
        AgentEvent::TurnEnded(TurnOutcome::Error {
            kind: "turn.failed".into(),
            message: Some(refused.into())
        })
    );
    assert_eq!(finished(&events), [("item_0", false)]);
    assert!(usages(&events).is_empty(), "a failed turn reports no usage");
    assert_eq!(
        tracker.outcome().unwrap().error_text().as_deref(),
        Some(refused)
    );
}

#[test]
fn gemini_fragments_are_joined_into_messages_and_the_result_is_the_final_one() {
    let (events, tracker) = parse(CliFormat::Gemini, GEMINI_RUN);
    assert_eq!(
        events[0],
        AgentEvent::Init {
            session_id: "edb9e828-5ea4-4663-a4b1-cd279b295092".into(),
            model: Some("auto".into())
        }
    );
    assert_eq!(
        texts(&events),
        [
            "Looking at the workspace first.",
            "Gemini rig finished: hello printed, the second command exited 3."
        ]
    );
    // The first message comes before the first tool use, as in the stream.
    let first_tool = events
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolStarted(_)))
        .unwrap();
    assert_eq!(
        events[first_tool - 1],
        AgentEvent::Text("Looking at the workspace first.".into())
    );
    assert_eq!(
        tracker.outcome(),
        Some(&TurnOutcome::Success {
            result: Some("Gemini rig finished: hello printed, the second command exited 3.".into())
        })
    );
    assert_eq!(
        activities(&tracker),
        ["Running say hello", "Running fail on purpose"]
    );
}

#[test]
fn gemini_run_totals_are_one_report_per_model_whose_inputs_are_summed() {
    let (events, tracker) = parse(CliFormat::Gemini, GEMINI_RUN);
    // result.stats is the run's totals over its four requests, and stats.models the same per
    // model: the router's one request (10 in, 1 out) apart, then the main model's three
    // (their inputs summed), the larger last. Exact: every output (127), and the router's
    // input is not counted. Over: the inputs of the main model's requests before the last
    // (1100 + 1200); Gemini prints nothing per request.
    assert_eq!(usages(&events), [(10, 1), (3600, 126)]);
    let requests = requests(GEMINI_README);
    let earlier_main_inputs: u64 = requests[1..requests.len() - 1].iter().map(|r| r.0).sum();
    assert_eq!(tracker.progress().cumulative_output_tokens, 127);
    assert_eq!(
        tracker.progress().token_count,
        per_request_rule(&requests) + earlier_main_inputs
    );
    assert_eq!(tracker.progress().token_count, 3727);
}

#[test]
fn a_gemini_run_of_one_main_request_counts_exactly_the_per_request_rule() {
    // The recording's stats as a run whose main model made one request after the router's
    // (10/1, then 1300/42): the rule gives 1300 + 43 and so does the count (before models
    // were read apart, the router's 10 were added to the latest input).
    let stream = GEMINI_RUN.replace(
        r#""stats":{"total_tokens":3737,"input_tokens":3610,"output_tokens":127,"cached":0,"input":3610,"#,
        r#""stats":{"total_tokens":1353,"input_tokens":1310,"output_tokens":43,"cached":0,"input":1310,"#,
    ).replace(
        r#""gemini-3.8-flash":{"total_tokens":3726,"input_tokens":3600,"output_tokens":126,"cached":0,"input":3600}"#,
        r#""gemini-3.8-flash":{"total_tokens":1342,"input_tokens":1300,"output_tokens":42,"cached":0,"input":1300}"#,
    );
    assert_ne!(stream, GEMINI_RUN);
    let (events, tracker) = parse(CliFormat::Gemini, &stream);
    assert_eq!(usages(&events), [(10, 1), (1300, 42)]);
    assert_eq!(
        tracker.progress().token_count,
        per_request_rule(&[(10, 1), (1300, 42)])
    );
    assert_eq!(tracker.progress().token_count, 1343);
}

#[test]
fn gemini_totals_of_two_results_of_one_process_count_the_difference() {
    // One process, two reports (the second repeating the first's totals plus one request).
    let mut stream = GEMINI_RUN.to_owned();
    stream.push_str(
        r#"{"type":"message","role":"user","content":"again"}
{"type":"message","role":"assistant","content":"done again","delta":true}
{"type":"result","status":"success","stats":{"input_tokens":5010,"output_tokens":169,"models":{"gemini-3.5-flash-lite":{"input_tokens":10,"output_tokens":1},"gemini-3.8-flash":{"input_tokens":5000,"output_tokens":168}}}}
"#,
    );
    let (events, tracker) = parse(CliFormat::Gemini, &stream);
    assert_eq!(usages(&events), [(10, 1), (3600, 126), (1400, 42)]);
    assert_eq!(tracker.progress().token_count, 1400 + 127 + 42);
    assert_eq!(tracker.result_text().as_deref(), Some("done again"));
    // A new process (init) counts from zero again.
    let twice = format!("{GEMINI_RUN}{GEMINI_RUN}");
    let (events, _) = parse(CliFormat::Gemini, &twice);
    assert_eq!(
        usages(&events),
        [(10, 1), (3600, 126), (10, 1), (3600, 126)]
    );
    // A report without models counts the run's totals as one usage.
    let (events, _) = parse(
        CliFormat::Gemini,
        r#"{"type":"result","status":"success","stats":{"input_tokens":3610,"output_tokens":127}}"#,
    );
    assert_eq!(usages(&events), [(3610, 127)]);
}

#[test]
fn a_failing_gemini_command_is_surfaced_when_the_stream_says_so() {
    // In the recording the failed command printed "failing on purpose" and Gemini reports
    // it "success" with that output only: its exit code is nowhere in the stream, so it
    // cannot be told from a success.
    let (events, _) = parse(CliFormat::Gemini, GEMINI_RUN);
    let recorded = finished(&events);
    assert_eq!(recorded.len(), 2);
    assert!(recorded.iter().all(|(_, failed)| !failed), "{recorded:?}");

    // The same command printing nothing: Gemini's shell tool then shows its exit code
    // (`Command exited with code: 3`, still with status "success"), and it is a failure.
    let silent = GEMINI_RUN.replace(
        r#""status":"success","output":"failing on purpose""#,
        r#""status":"success","output":"Command exited with code: 3""#,
    );
    assert_ne!(silent, GEMINI_RUN);
    let (events, _) = parse(CliFormat::Gemini, &silent);
    assert_eq!(
        finished(&events),
        [
            (
                "run_shell_command__run_shell_command_1795526201517_0",
                false
            ),
            ("run_shell_command__run_shell_command_1795526201686_0", true)
        ]
    );
    // A tool Gemini reports failed (`status: error`) is one whatever its output.
    let errored = GEMINI_RUN.replace(
        r#""status":"success","output":"failing on purpose""#,
        r#""status":"error","error":{"type":"shell_execute_error","message":"spawn failed"}"#,
    );
    let (events, _) = parse(CliFormat::Gemini, &errored);
    assert!(finished(&events)[1].1);
}

#[test]
fn a_failed_gemini_run_fails_with_the_api_error() {
    let (events, tracker) = parse(CliFormat::Gemini, GEMINI_FAILED);
    assert_eq!(
        finished(&events),
        [(
            "run_shell_command__run_shell_command_1795526125856_0",
            false
        )]
    );
    assert_eq!(
        tracker.outcome(),
        Some(&TurnOutcome::Error {
            kind: "unknown".into(),
            message: Some(
                r#"[API Error: {"error":{"code":400,"message":"scripted: the model refused this request","status":"INVALID_ARGUMENT"}}]"#
                    .into()
            )
        })
    );
    // The router's request and the main model's one that was answered, apart.
    assert_eq!(usages(&events), [(10, 1), (1100, 42)]);
}

#[test]
fn a_gemini_error_event_is_surfaced() {
    let stream = r#"{"type":"init","session_id":"s","model":"m"}
{"type":"message","role":"assistant","content":"Trying","delta":true}
{"type":"error","severity":"warning","message":"Loop detected, stopping"}"#;
    let (events, _) = parse(CliFormat::Gemini, stream);
    assert_eq!(texts(&events), ["Trying"]);
    assert_eq!(errors(&events), ["Loop detected, stopping"]);
}

#[test]
fn a_gemini_stream_cut_mid_message_gives_the_message_when_the_transcript_ends() {
    // The CLI died after the final message's fragments, before its result line: the
    // transcript tail, finished, still gives the whole message.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.jsonl");
    let cut: Vec<&str> = GEMINI_RUN.lines().take(10).collect();
    let mut file = std::fs::File::create(&path).unwrap();
    writeln!(file, "{}", cut.join("\n")).unwrap();
    let mut tail = TranscriptTail::new(&path, 0, CliFormat::Gemini.parser(), 1 << 16, 1 << 20);
    while tail.read_new().unwrap() > 0 {}
    let mut before_finish = Vec::new();
    while let Some(event) = tail.pop() {
        before_finish.push(event);
    }
    assert_eq!(texts(&before_finish), ["Looking at the workspace first."]);
    tail.finish();
    assert_eq!(
        tail.pop(),
        Some(AgentEvent::Text(
            "Gemini rig finished: hello printed, the second command exited 3.".into()
        ))
    );
    assert_eq!(tail.pop(), None);
}

#[test]
fn every_recording_detects_its_format_from_its_first_line() {
    for (format, stream) in [
        (CliFormat::Codex, CODEX_RUN),
        (CliFormat::Codex, CODEX_RESUMED),
        (CliFormat::Codex, CODEX_FAILED),
        (CliFormat::Gemini, GEMINI_RUN),
        (CliFormat::Gemini, GEMINI_FAILED),
    ] {
        let first = stream.lines().next().unwrap();
        assert_eq!(CliFormat::detect(first.as_bytes()), Some(format));
    }
}

#[test]
fn a_repeated_codex_report_adds_nothing_and_another_thread_counts_from_zero() {
    let line = CODEX_RUN.lines().last().unwrap();
    let twice = format!("{CODEX_RUN}{line}\n");
    let (events, tracker) = parse(CliFormat::Codex, &twice);
    assert_eq!(usages(&events), [(3600, 126)]);
    assert_eq!(tracker.progress().token_count, 3726);
    // The first run of the resumed recording, then the other recording's thread.
    let first_run: Vec<&str> = CODEX_RESUMED.lines().take(6).collect();
    let two_threads = format!("{}\n{CODEX_RUN}", first_run.join("\n"));
    let (events, _) = parse(CliFormat::Codex, &two_threads);
    assert_eq!(usages(&events), [(2300, 84), (3600, 126)]);
}
