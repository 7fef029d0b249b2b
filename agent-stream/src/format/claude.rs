//! Claude Code's stream-json (`-p --output-format stream-json --verbose`) and its transcripts.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

use super::{LineError, LineParser};
use crate::event::{AgentEvent, ToolUse, TurnOutcome, Usage};

/// Parses Claude Code's stream-json lines.
///
/// A stream carries the lines of sub-agents too, tagged with the `parent_tool_use_id` of the
/// `Agent` call that started them. A parser follows one agent: by default the top-level one
/// (lines without a parent); [`ClaudeParser::following`] follows a sub-agent instead.
///
/// **Output tokens come from the turn's `result`.** Claude Code writes each assistant message
/// with the usage the API reported when the message *started* (`output_tokens: 1`, seen with
/// 2.1.332), and the turn's real output, summed over its requests, only in the `result` that
/// ends the turn (its `usage`, per turn). So the parser counts the messages' output as they
/// come and, at the `result`, emits one more [`AgentEvent::Usage`] for the output the messages
/// did not report, with the latest message's input (which stays the latest): the output the
/// turn was charged is then counted exactly once.
#[derive(Debug, Clone, Default)]
pub struct ClaudeParser {
    parent: Option<String>,
    /// The usage of the turn's latest message.
    latest: Option<Usage>,
    /// Output tokens the turn's messages reported.
    turn_output: u64,
}

impl ClaudeParser {
    /// A parser of the sub-agent started by tool use `parent_tool_use_id`.
    pub fn following(parent_tool_use_id: impl Into<String>) -> Self {
        ClaudeParser {
            parent: Some(parent_tool_use_id.into()),
            ..ClaudeParser::default()
        }
    }
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    subtype: Option<Cow<'a, str>>,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    parent_tool_use_id: Option<String>,
    #[serde(default)]
    message: Option<Message>,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    errors: Vec<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Content,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

impl Default for Content {
    fn default() -> Self {
        Content::Blocks(Vec::new())
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        tool_use_id: String,
        #[serde(default)]
        is_error: Option<bool>,
        #[serde(default)]
        content: Value,
    },
    #[serde(other)]
    Other,
}

/// The API's usage block; every field may be missing.
#[derive(Deserialize, Default)]
pub(crate) struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

impl From<&WireUsage> for Usage {
    fn from(u: &WireUsage) -> Self {
        Usage {
            input_tokens: u.input_tokens,
            cache_creation_input_tokens: u.cache_creation_input_tokens,
            cache_read_input_tokens: u.cache_read_input_tokens,
            output_tokens: u.output_tokens,
        }
    }
}

impl LineParser for ClaudeParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) -> Result<(), LineError> {
        let line: Line<'_> = serde_json::from_slice(line)?;
        if line.parent_tool_use_id != self.parent {
            return Ok(());
        }
        match (line.kind.as_ref(), line.subtype.as_deref()) {
            ("system", Some("init")) => {
                if let Some(session_id) = line.session_id {
                    out.push(AgentEvent::Init {
                        session_id,
                        model: line.model,
                    });
                }
            }
            ("assistant", _) => {
                if let Some(message) = line.message {
                    if let Some(usage) = message.usage.as_ref().map(Usage::from) {
                        self.latest = Some(usage);
                        self.turn_output += usage.output_tokens;
                    }
                    assistant(message, out);
                }
            }
            ("user", _) => match line.message.map(|m| m.content) {
                Some(Content::Text(text)) => out.push(AgentEvent::UserMessage(text)),
                Some(Content::Blocks(blocks)) => user_blocks(blocks, out),
                None => {}
            },
            ("result", subtype) => {
                if let Some(unreported) = self.unreported_output(line.usage.as_ref()) {
                    out.push(AgentEvent::Usage(unreported));
                }
                out.push(AgentEvent::TurnEnded(outcome(
                    subtype.unwrap_or("success"),
                    line.is_error,
                    line.result,
                    line.errors,
                )));
            }
            _ => {}
        }
        Ok(())
    }
}

impl ClaudeParser {
    /// The output a turn's `result` says it used beyond what its messages reported, as a usage
    /// with the latest message's input; the turn's count starts again.
    fn unreported_output(&mut self, result: Option<&WireUsage>) -> Option<Usage> {
        let reported = std::mem::take(&mut self.turn_output);
        let charged = result.map(|usage| usage.output_tokens)?;
        (charged > reported).then(|| Usage {
            output_tokens: charged - reported,
            ..self.latest.unwrap_or_default()
        })
    }
}

/// Usage first, then the blocks in order: a tool use's progress already counts its message.
fn assistant(message: Message, out: &mut Vec<AgentEvent>) {
    if let Some(usage) = message.usage {
        out.push(AgentEvent::Usage(Usage::from(&usage)));
    }
    let blocks = match message.content {
        Content::Text(text) => vec![Block::Text { text }],
        Content::Blocks(blocks) => blocks,
    };
    for block in blocks {
        match block {
            Block::Text { text } => out.push(AgentEvent::Text(text)),
            Block::ToolUse { id, name, input } => {
                out.push(AgentEvent::ToolStarted(ToolUse { id, name, input }));
            }
            Block::ToolResult { .. } | Block::Other => {}
        }
    }
}

/// A user message's blocks: tool results, or the text of a user turn (as
/// `--replay-user-messages` and transcripts show it).
fn user_blocks(blocks: Vec<Block>, out: &mut Vec<AgentEvent>) {
    let mut said = Vec::new();
    for block in blocks {
        match block {
            Block::ToolResult {
                tool_use_id,
                is_error,
                content,
            } => {
                let is_error = is_error.unwrap_or(false);
                out.push(AgentEvent::ToolFinished {
                    id: tool_use_id,
                    is_error,
                    reason: is_error.then(|| result_text(&content)).flatten(),
                });
            }
            Block::Text { text } => said.push(text),
            Block::ToolUse { .. } | Block::Other => {}
        }
    }
    if !said.is_empty() {
        out.push(AgentEvent::UserMessage(said.join("\n")));
    }
}

/// A tool result's text: a string, or the text blocks of a list, joined.
fn result_text(content: &Value) -> Option<String> {
    let text = match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    (!text.trim().is_empty()).then_some(text)
}

fn outcome(
    subtype: &str,
    is_error: bool,
    result: Option<String>,
    errors: Vec<String>,
) -> TurnOutcome {
    if subtype == "success" && !is_error {
        return TurnOutcome::Success { result };
    }
    let message = result
        .filter(|r| !r.is_empty())
        .or_else(|| (!errors.is_empty()).then(|| errors.join("; ")));
    TurnOutcome::Error {
        kind: subtype.to_owned(),
        message,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn parse(parser: &mut ClaudeParser, line: &str) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        parser.parse_line(line.as_bytes(), &mut out).unwrap();
        out
    }

    #[test]
    fn init_assistant_user_and_result_lines_become_events() {
        let mut p = ClaudeParser::default();
        assert_eq!(
            parse(
                &mut p,
                r#"{"type":"system","subtype":"init","session_id":"S","model":"m","tools":[]}"#
            ),
            [AgentEvent::Init {
                session_id: "S".into(),
                model: Some("m".into())
            }]
        );
        let events = parse(
            &mut p,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/x"}}],"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":2}},"parent_tool_use_id":null}"#,
        );
        assert_eq!(events.len(), 3);
        assert_eq!(
            events[0],
            AgentEvent::Usage(Usage {
                input_tokens: 10,
                cache_read_input_tokens: 5,
                output_tokens: 2,
                ..Usage::default()
            })
        );
        assert_eq!(events[1], AgentEvent::Text("hi".into()));
        assert!(
            matches!(&events[2], AgentEvent::ToolStarted(t) if t.name == "Read" && t.input["file_path"] == "/x")
        );
        assert_eq!(
            parse(
                &mut p,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"x","is_error":true}]}}"#
            ),
            [AgentEvent::ToolFinished {
                id: "t1".into(),
                is_error: true,
                reason: Some("x".into())
            }]
        );
        assert_eq!(
            parse(
                &mut p,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":[{"type":"text","text":"Claude requested permissions to use Bash, but you haven't granted it yet."}],"is_error":true}]}}"#
            ),
            [AgentEvent::ToolFinished {
                id: "t2".into(),
                is_error: true,
                reason: Some(
                    "Claude requested permissions to use Bash, but you haven't granted it yet."
                        .into()
                )
            }]
        );
        assert_eq!(
            parse(
                &mut p,
                r#"{"type":"user","message":{"role":"user","content":"please also check the README"}}"#
            ),
            [AgentEvent::UserMessage(
                "please also check the README".into()
            )]
        );
        assert_eq!(
            parse(
                &mut p,
                r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"more"}]}}"#
            ),
            [AgentEvent::UserMessage("more".into())]
        );
        assert_eq!(
            parse(
                &mut p,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"done"}"#
            ),
            [AgentEvent::TurnEnded(TurnOutcome::Success {
                result: Some("done".into())
            })]
        );
        assert_eq!(
            parse(
                &mut p,
                r#"{"type":"result","subtype":"error_max_turns","is_error":true}"#
            ),
            [AgentEvent::TurnEnded(TurnOutcome::Error {
                kind: "error_max_turns".into(),
                message: None
            })]
        );
    }

    #[test]
    fn unknown_types_and_blocks_are_skipped_and_garbage_is_an_error() {
        let mut p = ClaudeParser::default();
        assert!(parse(&mut p, r#"{"type":"rate_limit_event","x":1}"#).is_empty());
        assert!(parse(&mut p, r#"{"type":"system","subtype":"task_progress"}"#).is_empty());
        assert!(
            parse(
                &mut p,
                r#"{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"…"}]}}"#
            )
            .is_empty()
        );
        let mut out = Vec::new();
        assert!(p.parse_line(b"{not json", &mut out).is_err());
        assert!(p.parse_line(b"[1,2]", &mut out).is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn a_parser_follows_one_agent_of_a_shared_stream() {
        let sub = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"sub"}]},"parent_tool_use_id":"toolu_2"}"#;
        assert!(parse(&mut ClaudeParser::default(), sub).is_empty());
        assert_eq!(
            parse(&mut ClaudeParser::following("toolu_2"), sub),
            [AgentEvent::Text("sub".into())]
        );
    }
}
