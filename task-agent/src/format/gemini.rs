//! Gemini CLI's `--output-format stream-json` events (SPEC §15).

use serde::Deserialize;
use serde_json::Value;
use task_core::MessageUsage;

use super::{LineError, LineParser};
use crate::event::{AgentEvent, ToolUse, TurnOutcome};

/// Parses Gemini CLI stream-json lines: `init`, `message`, `tool_use`, `tool_result`, `result`.
///
/// Assistant messages may arrive as deltas; the turn's result is their concatenation since
/// the last user message. Usage comes once, in the `result`'s `stats`.
#[derive(Debug, Clone, Default)]
pub struct GeminiParser {
    reply: String,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_id: Option<String>,
    #[serde(default)]
    parameters: Value,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    stats: Option<Stats>,
}

#[derive(Deserialize)]
struct Stats {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

impl LineParser for GeminiParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) -> Result<(), LineError> {
        let line: Line = serde_json::from_slice(line)?;
        match line.kind.as_str() {
            "init" => {
                if let Some(session_id) = line.session_id {
                    out.push(AgentEvent::Init {
                        session_id,
                        model: line.model,
                    });
                }
            }
            "message" => self.message(line.role.as_deref(), line.content, out),
            "tool_use" => {
                if let (Some(id), Some(name)) = (line.tool_id, line.tool_name) {
                    out.push(AgentEvent::ToolStarted(ToolUse {
                        id,
                        name,
                        input: line.parameters,
                    }));
                }
            }
            "tool_result" => {
                if let Some(id) = line.tool_id {
                    let is_error = line.status.as_deref() != Some("success");
                    out.push(AgentEvent::ToolFinished { id, is_error });
                }
            }
            "result" => self.result(line, out),
            _ => {}
        }
        Ok(())
    }
}

impl GeminiParser {
    fn message(&mut self, role: Option<&str>, content: Option<String>, out: &mut Vec<AgentEvent>) {
        match (role, content) {
            (Some("assistant"), Some(text)) => {
                self.reply.push_str(&text);
                out.push(AgentEvent::Text(text));
            }
            (Some("user"), _) => self.reply.clear(),
            _ => {}
        }
    }

    fn result(&mut self, line: Line, out: &mut Vec<AgentEvent>) {
        if let Some(stats) = line.stats {
            out.push(AgentEvent::Usage(MessageUsage {
                input_tokens: stats.input_tokens,
                output_tokens: stats.output_tokens,
                ..MessageUsage::default()
            }));
        }
        let reply = std::mem::take(&mut self.reply);
        let outcome = if line.status.as_deref() == Some("success") {
            TurnOutcome::Success {
                result: (!reply.is_empty()).then_some(reply),
            }
        } else {
            let (kind, message) = error_parts(line.error.as_ref());
            TurnOutcome::Error { kind, message }
        };
        out.push(AgentEvent::TurnEnded(outcome));
    }
}

fn error_parts(error: Option<&Value>) -> (String, Option<String>) {
    let field = |key: &str| {
        error
            .and_then(|e| e.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    (
        field("type").unwrap_or_else(|| "error".into()),
        field("message"),
    )
}
