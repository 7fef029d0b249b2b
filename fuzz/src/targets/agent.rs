//! task-agent: the event streams agent CLIs print (Claude stream-json, Codex, Gemini), the
//! transcript reader that frames them into lines, and the conversation view rendered from them.

use std::fmt::Debug;

use agent_stream::AgentEvent;
use agent_stream::conversation::{self, Entry};
use agent_stream::format::{
    ClaudeParser, CliFormat, CodexParser, DetectingParser, GeminiParser, LineParser,
};
use task_agent::{ProgressTracker, TranscriptTail};
use task_client::conversation as transcript_file;

use crate::scratch;

/// How much state a parser may keep per byte of input it was given, plus a constant: a parser
/// holds what the stream said (a message's fragments, open tool ids), never more than a few
/// copies of it, whatever the lines.
const STATE_PER_INPUT_BYTE: usize = 16;
const STATE_SLACK: usize = 4096;

/// Every line of `data` fed to each parser (and to a Claude parser following the sub-agent
/// the data names, if any): no panic, a bad line adds no event, the state a parser keeps is
/// bounded by what it was given, and every event is applied to a progress tracker and rendered
/// as the executor and `tasks output` render it; the data is also read as a transcript shown as
/// a conversation ([`conversation`]).
pub fn stream(data: &[u8]) {
    conversation(data);
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    run(ClaudeParser::default(), &lines, data.len());
    if let Some(parent) = parent_tool_use_id(data) {
        run(ClaudeParser::following(parent), &lines, data.len());
    }
    run(CodexParser::default(), &lines, data.len());
    run(GeminiParser::default(), &lines, data.len());
    run(DetectingParser::default(), &lines, data.len());
}

fn run<P: LineParser + Debug>(mut parser: P, lines: &[&[u8]], input_len: usize) {
    let mut events = Vec::new();
    for line in lines {
        let before = events.len();
        if let Err(error) = parser.parse_line(line, &mut events) {
            assert_eq!(
                events.len(),
                before,
                "a line that does not parse adds no event"
            );
            let _ = error.to_string();
        }
    }
    parser.finish(&mut events);
    let state = format!("{parser:?}").len();
    let bound = STATE_PER_INPUT_BYTE * input_len + STATE_SLACK;
    assert!(
        state <= bound,
        "the parser keeps {state} bytes of state after {input_len} bytes of input"
    );
    track(&events);
}

/// The executor's use of events: progress, its `task_progress` detail, the final text.
fn track(events: &[AgentEvent]) {
    let mut tracker = ProgressTracker::default();
    for event in events {
        let _ = tracker.apply(event);
        match event {
            AgentEvent::ToolStarted(tool) => {
                let _ = agent_stream::activity::description(&tool.name, &tool.input);
                let _ = task_agent::activity::activity(tool);
            }
            AgentEvent::TurnEnded(outcome) => {
                let _ = outcome.error_text();
                tracker.start_turn();
            }
            _ => {}
        }
    }
    let _ = tracker.event_detail("fuzz", "general-purpose", 1);
    let _ = (
        tracker.result_text(),
        tracker.last_tool_name(),
        tracker.outcome(),
    );
    let progress = tracker.merged_into(&task_core::AgentProgress::default());
    let _ = task_client::cli::render::describe(&agent_state(progress), None);
}

/// An agent task whose progress is `progress` (for the `tasks ps` description of it).
fn agent_state(progress: task_core::AgentProgress) -> task_core::TaskState {
    let id = task_core::TaskId::parse("a12345678").unwrap();
    let agent = task_core::AgentState {
        progress,
        ..task_core::AgentState::default()
    };
    task_core::TaskState::new(
        id,
        "fuzz",
        "/dev/null",
        task_core::TaskKind::Agent(Box::new(agent)),
    )
    .unwrap()
}

/// `data` as a transcript file shown as a conversation (`tasks output`, `top`, `--for-model`):
/// the tail of a file smaller than the read window is every entry of it; the last `n` entries
/// as text are the text of the last `n` entries; every entry renders as whole lines, and a
/// tool's failure or an error as exactly one.
fn conversation(data: &[u8]) {
    let all = conversation::entries(data);
    let path = scratch::dir().join("conversation.output");
    scratch::write(&path, data);
    let (tail, cut) = transcript_file::tail_entries(&path).expect("the transcript reads");
    assert!(!cut, "a fuzz input is smaller than the read window");
    assert_eq!(tail, all, "the tail of a small transcript is all of it");
    for n in [0, 1, 3] {
        let last = transcript_file::last_entries_text(&path, n).expect("the transcript reads");
        assert_eq!(
            last,
            conversation::text(&all[all.len().saturating_sub(n)..])
        );
    }
    for entry in &all {
        let shown = entry.to_string();
        assert!(shown.is_empty() || shown.ends_with('\n'), "{shown:?}");
        if matches!(entry, Entry::ToolFailed(_) | Entry::Error(_)) {
            assert_eq!(shown.lines().count(), 1, "{shown:?}");
        }
    }
    let _ = transcript_file::for_model(&path).expect("the transcript reads");
}

/// The first `parent_tool_use_id` string in `data`, for a parser that follows that sub-agent.
fn parent_tool_use_id(data: &[u8]) -> Option<String> {
    const KEY: &[u8] = b"\"parent_tool_use_id\":\"";
    let start = data.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let len = data[start..].iter().position(|&b| b == b'"')?;
    std::str::from_utf8(&data[start..start + len])
        .ok()
        .map(str::to_owned)
}

fn parser(choice: u8) -> Box<dyn LineParser> {
    match choice % 4 {
        0 => CliFormat::Claude.parser(),
        1 => CliFormat::Codex.parser(),
        2 => CliFormat::Gemini.parser(),
        _ => Box::new(DetectingParser::default()),
    }
}

/// A transcript file read by [`TranscriptTail`] in reads of 1 to 64 bytes with a line limit
/// of 1 to 4081 bytes (the first two bytes of the input; the third picks the format): the
/// events and the count of skipped lines are exactly those of the same lines fed whole to a
/// parser, whatever the read size, and the tail ends at the end of the file.
pub fn tail(data: &[u8]) {
    let [read, line, format, body @ ..] = data else {
        return;
    };
    let max_read = 1 + usize::from(*read) % 64;
    let max_line = 1 + usize::from(*line) * 16;
    let path = scratch::dir().join("transcript.jsonl");
    scratch::write(&path, body);

    let mut tail = TranscriptTail::new(&path, 0, parser(*format), max_read, max_line);
    let mut reads = 0;
    while tail.read_new().expect("the transcript reads") > 0 {
        reads += 1;
        assert!(reads <= body.len(), "a read that never ends");
    }
    assert_eq!(
        tail.offset(),
        body.len() as u64,
        "the tail read the whole file"
    );
    tail.finish();
    let events: Vec<AgentEvent> = std::iter::from_fn(|| tail.pop()).collect();

    let mut expected = Vec::new();
    let mut malformed = 0u64;
    let mut reference = parser(*format);
    let mut lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop(); // what follows the last newline is no line
    }
    for line in lines {
        if line.len() > max_line {
            malformed += 1;
            continue;
        }
        let line = trim(line);
        if !line.is_empty() && reference.parse_line(line, &mut expected).is_err() {
            malformed += 1;
        }
    }
    reference.finish(&mut expected);
    assert_eq!(events, expected, "the tail's events are the lines' events");
    assert_eq!(
        tail.malformed_lines(),
        malformed,
        "skipped lines are counted"
    );
}

/// A line as the tail hands it to its parser: one `\r` and leading whitespace removed.
fn trim(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    &line[start..]
}
