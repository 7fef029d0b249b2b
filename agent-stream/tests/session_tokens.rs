//! Token accounting of real Codex and Gemini CLI runs, with their own session files
//! (`tests/fixtures/codex-0.171.0/`, `gemini-0.61.0/`: each README says how they were recorded).
//! A scripted model charged three requests 1100, 1200 and 1300 input tokens and 42 output
//! tokens each (Gemini's model router one more request of 10 in, 1 out). SPEC §7's rule: the
//! latest request's input plus every request's output, 1300 + 126 = 1426 (Gemini: 1427). The
//! streams report only running totals (3600 in, 126 out); the session files itemise the
//! requests.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use agent_stream::format::{CodexParser, GeminiParser, LineParser};
use agent_stream::session_file::SessionStore;
use agent_stream::{AgentEvent, CliFormat, Usage};

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(path)
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// SPEC §7 over `events`: the latest usage's input plus every usage's output.
fn tokens(events: &[AgentEvent]) -> u64 {
    let usages: Vec<&Usage> = events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::Usage(usage) => Some(usage),
            _ => None,
        })
        .collect();
    let latest = usages.last().map_or(0, |u| {
        u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
    });
    latest + usages.iter().map(|u| u.output_tokens).sum::<u64>()
}

/// The session file of the stream's session, found in the fixture's home as a runner finds
/// it in the CLI's.
fn session_file(format: CliFormat, home: &str, stream: &[String]) -> PathBuf {
    let variable = match format {
        CliFormat::Codex => "CODEX_HOME",
        _ => "GEMINI_CLI_HOME",
    };
    let home = fixture(home);
    let env = |name: &str| (name == variable).then(|| home.clone().into_os_string());
    let store = SessionStore::for_format(format, env).unwrap();
    let mut parser = format.parser();
    let mut events = Vec::new();
    parser
        .parse_line(stream[0].as_bytes(), &mut events)
        .unwrap();
    let Some(AgentEvent::Init { session_id, .. }) = events.first() else {
        panic!("the stream starts with its session: {events:?}")
    };
    store.locate(session_id).unwrap()
}

/// Parses `stream` with each `(at, lines)` of `feeds` fed as session lines before the
/// stream's line `at` (as a reader of both files sees them: the session file as it was when
/// that line was read; `at` past the stream: after it), then finishes.
fn parse(
    parser: &mut dyn LineParser,
    stream: &[String],
    feeds: &[(usize, &[String])],
) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    let feed = |at: usize, parser: &mut dyn LineParser, events: &mut Vec<AgentEvent>| {
        for (_, lines) in feeds.iter().filter(|(when, _)| *when == at) {
            for line in *lines {
                parser.parse_session_line(line.as_bytes(), events).unwrap();
            }
        }
    };
    for (index, line) in stream.iter().enumerate() {
        feed(index, parser, &mut events);
        parser.parse_line(line.as_bytes(), &mut events).unwrap();
    }
    feed(stream.len(), parser, &mut events);
    parser.finish(&mut events);
    events
}

/// The rollout's first 24 lines are what the first run wrote; the rest, the resumed run's.
const CODEX_FIRST_RUN_LINES: usize = 24;

#[test]
fn a_codex_turn_of_three_requests_counts_the_latest_input_not_their_sum() {
    let stream = lines(&fixture("codex-0.171.0/exec.jsonl"));
    let rollout = lines(&session_file(
        CliFormat::Codex,
        "codex-0.171.0/home",
        &stream,
    ));
    let first_run = &rollout[..CODEX_FIRST_RUN_LINES];
    let report = stream.len() - 1;
    let end = stream.len();
    // The rollout read before the turn's report.
    let before = parse(&mut CodexParser::default(), &stream, &[(report, first_run)]);
    assert_eq!(tokens(&before), 1300 + 3 * 42, "{before:?}");
    // Codex writes its rollout from a task of its own: the last request's record may come
    // after the report, whose rest (beyond the records) is then that request.
    let (early, late) = first_run.split_at(19); // the first two requests' records
    let lagging = parse(
        &mut CodexParser::default(),
        &stream,
        &[(report, early), (end, late)],
    );
    assert_eq!(tokens(&lagging), 1300 + 3 * 42, "{lagging:?}");
    // Without the rollout, or with it only after the report, the stream's totals.
    let none = parse(&mut CodexParser::default(), &stream, &[]);
    assert_eq!(
        tokens(&none),
        3600 + 126,
        "the stream alone has only the totals"
    );
    let after = parse(&mut CodexParser::default(), &stream, &[(end, first_run)]);
    assert_eq!(tokens(&after), 3600 + 126, "{after:?}");
}

#[test]
fn a_resumed_codex_run_counts_only_its_own_request() {
    let first = lines(&fixture("codex-0.171.0/exec.jsonl"));
    let resumed = lines(&fixture("codex-0.171.0/exec-resume.jsonl"));
    let rollout = lines(&session_file(
        CliFormat::Codex,
        "codex-0.171.0/home",
        &first,
    ));
    // The runner's parser reads the earlier run's lines first and drops their events.
    let mut parser = CodexParser::default();
    let first_run = &rollout[..CODEX_FIRST_RUN_LINES];
    parse(&mut parser, &first, &[(first.len() - 1, first_run)]);
    // The resumed run reads the whole rollout, the first run's records again.
    let events = parse(&mut parser, &resumed, &[(resumed.len() - 1, &rollout[..])]);
    assert_eq!(tokens(&events), 1300 + 42, "{events:?}");
}

#[test]
fn a_gemini_run_counts_its_latest_request_and_the_routers_output() {
    let stream = lines(&fixture("gemini-0.61.0/stream.jsonl"));
    let chat = lines(&session_file(
        CliFormat::Gemini,
        "gemini-0.61.0/home",
        &stream,
    ));
    let result = stream.len() - 1;
    // Gemini writes its chat file before it prints the result: read by then, it counts.
    for at in [1, result] {
        let events = parse(&mut GeminiParser::default(), &stream, &[(at, &chat[..])]);
        assert_eq!(
            tokens(&events),
            1300 + 3 * 42 + 1,
            "chat read at line {at}: {events:?}"
        );
    }
    let none = parse(&mut GeminiParser::default(), &stream, &[]);
    assert_eq!(
        tokens(&none),
        3600 + 127,
        "the stream alone has only the totals"
    );
    // Read only after the result counted the totals, its records add nothing.
    let late = parse(
        &mut GeminiParser::default(),
        &stream,
        &[(stream.len(), &chat[..])],
    );
    assert_eq!(tokens(&late), 3600 + 127);
}
