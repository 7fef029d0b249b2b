//! OpenAI Codex's `codex exec --json` events (SPEC §15; openai/codex `exec_events.rs`).

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use task_core::MessageUsage;

use super::{LineError, LineParser};
use crate::event::{AgentEvent, ToolUse, TurnOutcome};

/// Parses `codex exec --json` lines: `thread.started`, `turn.completed|failed`, `item.*`.
///
/// Codex reports a tool as an item (`command_execution`, `mcp_tool_call`, `file_change`,
/// `web_search`); the turn's result is its last `agent_message`, since `turn.completed` carries
/// only usage.
#[derive(Debug, Clone, Default)]
pub struct CodexParser {
    /// Tool items seen starting and not yet completed.
    open_items: HashSet<String>,
    /// The text of the turn's latest agent message.
    last_message: Option<String>,
}

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    item: Option<Map<String, Value>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

/// The item types that are tool uses, and the tool name each reports.
fn tool_name(item_type: &str) -> Option<&'static str> {
    match item_type {
        "command_execution" => Some("Bash"),
        "mcp_tool_call" => Some("mcp_tool_call"),
        "file_change" => Some("Edit"),
        "web_search" => Some("WebSearch"),
        _ => None,
    }
}

impl LineParser for CodexParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) -> Result<(), LineError> {
        let line: Line = serde_json::from_slice(line)?;
        match line.kind.as_str() {
            "thread.started" => {
                if let Some(session_id) = line.thread_id {
                    out.push(AgentEvent::Init {
                        session_id,
                        model: None,
                    });
                }
            }
            "turn.started" => self.last_message = None,
            "turn.completed" => {
                if let Some(usage) = line.usage {
                    // `cached_input_tokens` is part of `input_tokens` in OpenAI's accounting.
                    out.push(AgentEvent::Usage(MessageUsage {
                        input_tokens: usage.input_tokens,
                        output_tokens: usage.output_tokens,
                        ..MessageUsage::default()
                    }));
                }
                out.push(AgentEvent::TurnEnded(TurnOutcome::Success {
                    result: self.last_message.take(),
                }));
            }
            "turn.failed" => out.push(AgentEvent::TurnEnded(TurnOutcome::Error {
                kind: "turn.failed".into(),
                message: line.error.as_ref().and_then(error_message),
            })),
            "item.started" => {
                if let Some(item) = line.item {
                    self.item_started(&item, out);
                }
            }
            "item.completed" => {
                if let Some(item) = line.item {
                    self.item_completed(&item, out);
                }
            }
            _ => {}
        }
        Ok(())
    }
}

impl CodexParser {
    fn item_started(&mut self, item: &Map<String, Value>, out: &mut Vec<AgentEvent>) {
        let (Some(id), Some(name)) = (str_field(item, "id"), item_tool(item)) else {
            return;
        };
        if self.open_items.insert(id.to_owned()) {
            out.push(AgentEvent::ToolStarted(tool_use(id, name, item)));
        }
    }

    fn item_completed(&mut self, item: &Map<String, Value>, out: &mut Vec<AgentEvent>) {
        if str_field(item, "type") == Some("agent_message") {
            if let Some(text) = str_field(item, "text") {
                self.last_message = Some(text.to_owned());
                out.push(AgentEvent::Text(text.to_owned()));
            }
            return;
        }
        let (Some(id), Some(name)) = (str_field(item, "id"), item_tool(item)) else {
            return;
        };
        // Items such as `file_change` may arrive completed without a start.
        if !self.open_items.remove(id) {
            out.push(AgentEvent::ToolStarted(tool_use(id, name, item)));
        }
        let failed_exit = item
            .get("exit_code")
            .and_then(Value::as_i64)
            .is_some_and(|c| c != 0);
        let failed_status = str_field(item, "status") == Some("failed");
        out.push(AgentEvent::ToolFinished {
            id: id.to_owned(),
            is_error: failed_exit || failed_status,
        });
    }
}

fn item_tool(item: &Map<String, Value>) -> Option<&'static str> {
    str_field(item, "type").and_then(tool_name)
}

fn str_field<'a>(item: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    item.get(key).and_then(Value::as_str)
}

/// The tool's input in the names the activity texts use (`command`, `file_path`, `query`).
fn tool_use(id: &str, name: &str, item: &Map<String, Value>) -> ToolUse {
    let input = match name {
        "Bash" => json!({ "command": item.get("command").cloned().unwrap_or(Value::Null) }),
        "Edit" => {
            let path = item
                .get("changes")
                .and_then(Value::as_array)
                .and_then(|changes| changes.first())
                .and_then(|change| change.get("path"))
                .cloned()
                .unwrap_or(Value::Null);
            json!({ "file_path": path })
        }
        _ => Value::Object(item.clone()),
    };
    ToolUse {
        id: id.to_owned(),
        name: name.to_owned(),
        input,
    }
}

fn error_message(error: &Value) -> Option<String> {
    match error {
        Value::String(s) => Some(s.clone()),
        Value::Object(map) => map
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned),
        _ => None,
    }
}
