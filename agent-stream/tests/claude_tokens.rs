//! Token accounting of a real Claude Code stream: `tests/fixtures/claude-2.1.332-two-turns.jsonl`
//! is what Claude Code 2.1.332 printed (`-p --input-format stream-json --output-format
//! stream-json --verbose`) for two turns against a scripted model that charged 10 input and 37
//! output tokens per request: the first turn made two requests (a tool call, then text), the
//! second one. Its assistant lines say `output_tokens: 1`; its results say 74, then 37.
#![allow(clippy::unwrap_used)]

use agent_stream::format::{ClaudeParser, LineParser};
use agent_stream::{AgentEvent, Usage};

const RECORDING: &str = include_str!("fixtures/claude-2.1.332-two-turns.jsonl");

fn usages() -> Vec<Usage> {
    let mut parser = ClaudeParser::default();
    let mut events = Vec::new();
    for line in RECORDING.lines() {
        parser.parse_line(line.as_bytes(), &mut events).unwrap();
    }
    events
        .into_iter()
        .filter_map(|event| match event {
            AgentEvent::Usage(usage) => Some(usage),
            _ => None,
        })
        .collect()
}

#[test]
fn output_tokens_are_what_each_turn_was_charged_not_the_early_figures() {
    let usages = usages();
    let output: u64 = usages.iter().map(|u| u.output_tokens).sum();
    assert_eq!(
        output,
        3 * 37,
        "three requests of 37 output tokens each: {usages:?}"
    );
}

#[test]
fn the_latest_input_stays_the_latest_messages() {
    let latest = usages().last().copied().unwrap();
    assert_eq!(
        latest.input_tokens + latest.cache_creation_input_tokens + latest.cache_read_input_tokens,
        10
    );
    // SPEC §7: the latest input plus every output.
    let output: u64 = usages().iter().map(|u| u.output_tokens).sum();
    assert_eq!(10 + output, 121);
}
