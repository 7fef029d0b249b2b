//! OpenAI Codex's `codex exec --json` events (SPEC §15; openai/codex `exec_events.rs`; checked
//! against recordings of the real CLI, `tests/fixtures/codex-cli/`).

use std::collections::HashSet;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::totals::Ledger;
use super::{LineError, LineParser};
use crate::event::{AgentEvent, ToolUse, TurnOutcome};

/// Parses `codex exec --json` lines: `thread.started`, `turn.completed|failed`, `item.*`,
/// `error`.
///
/// - Codex reports a tool as an item (`command_execution`, `mcp_tool_call`, `file_change`,
///   `web_search`); a command that exits non-zero (`exit_code`, `status: failed`) is a failed
///   tool use. Shell commands arrive wrapped (`/bin/bash -lc "…"`): the activity shows the
///   command inside.
/// - The turn's result is its last `agent_message`, since `turn.completed` carries only usage.
/// - `turn.completed.usage` is the **thread's running total** over every model request (after
///   `codex exec resume`, the resumed run's totals include the earlier run's). Codex prints
///   nothing finer, but its rollout file (`$CODEX_HOME/sessions/…/rollout-…-{thread}.jsonl`,
///   [`crate::session_file`]) has one `token_count` event per request with that request's
///   usage (`last_token_usage`) and the running total: fed those lines
///   ([`LineParser::parse_session_line`]), the parser counts each request as one message
///   (SPEC §7: the latest request's input, every request's output), and a report adds only
///   what they did not cover (a last request whose record Codex has not written yet: its
///   rollout is written from a task of its own). Without them each report is turned into the usage since the
///   previous report of the same thread ([`AgentEvent::Usage`]): a turn of several requests
///   is then one message whose input is the sum of their inputs.
/// - A top-level `error` line (`Reconnecting… n/m (…)`, a refused request) is an
///   [`AgentEvent::Error`]; `turn.failed` ends the turn with an error.
#[derive(Debug, Clone, Default)]
pub struct CodexParser {
    /// Tool items seen starting and not yet completed.
    open_items: HashSet<String>,
    /// The text of the turn's latest agent message.
    last_message: Option<String>,
    /// The thread the usage totals belong to.
    thread_id: Option<String>,
    /// What was counted of that thread's running totals, from its reports and its rollout.
    ledger: Ledger,
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
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    text: Option<String>,
}

/// A line of Codex's rollout file: only `event_msg` lines whose payload is a `token_count`
/// with its `info` are read.
#[derive(Deserialize)]
struct RolloutLine {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    payload: Option<RolloutPayload>,
}

#[derive(Deserialize)]
struct RolloutPayload {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    info: Option<TokenInfo>,
}

/// A `token_count` event's figures: the request's own and the thread's running total.
#[derive(Deserialize)]
struct TokenInfo {
    total_token_usage: Usage,
    last_token_usage: Usage,
}

/// `turn.completed.usage`. `input_tokens` already holds `cached_input_tokens` (OpenAI's
/// accounting) and `output_tokens` the reasoning tokens (`reasoning_output_tokens` is a part of
/// it), so neither breakdown is added again.
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
                    // A resumed thread goes on counting; another thread starts from zero.
                    if self.thread_id.as_deref() != Some(session_id.as_str()) {
                        self.ledger.reset();
                        self.thread_id = Some(session_id.clone());
                    }
                    out.push(AgentEvent::Init {
                        session_id,
                        model: None,
                    });
                }
            }
            "turn.started" => self.last_message = None,
            "turn.completed" => {
                if let Some(usage) = line.usage
                    && let Some(since) = self.ledger.report(usage.input_tokens, usage.output_tokens)
                {
                    out.push(AgentEvent::Usage(since));
                }
                out.push(AgentEvent::TurnEnded(TurnOutcome::Success {
                    result: self.last_message.take(),
                }));
            }
            "error" => out.push(AgentEvent::Error {
                message: line
                    .message
                    .as_ref()
                    .and_then(error_message)
                    .unwrap_or_else(|| "unknown error".into()),
            }),
            "turn.failed" => out.push(AgentEvent::TurnEnded(TurnOutcome::Error {
                kind: "turn.failed".into(),
                message: line.error.as_ref().and_then(error_message),
            })),
            super::USER_TURN_TYPE => {
                self.last_message = None;
                out.extend(line.text.map(AgentEvent::UserMessage));
            }
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

    /// A line of the thread's rollout file: each `token_count` is one request's usage.
    fn parse_session_line(
        &mut self,
        line: &[u8],
        out: &mut Vec<AgentEvent>,
    ) -> Result<(), LineError> {
        let line: RolloutLine = serde_json::from_slice(line)?;
        let Some(RolloutPayload {
            kind,
            info: Some(info),
        }) = line.payload
        else {
            return Ok(());
        };
        if line.kind != "event_msg" || kind.as_deref() != Some("token_count") {
            return Ok(());
        }
        let total = info.total_token_usage;
        out.extend(
            self.ledger
                .record(
                    info.last_token_usage.input_tokens,
                    total.input_tokens,
                    total.output_tokens,
                )
                .map(AgentEvent::Usage),
        );
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
        let is_error = failed_exit || failed_status;
        out.push(AgentEvent::ToolFinished {
            id: id.to_owned(),
            is_error,
            reason: is_error.then(|| failure_reason(item)).flatten(),
        });
    }
}

/// Why a failed item failed: its exit code and output for a command, else its `error`.
fn failure_reason(item: &Map<String, Value>) -> Option<String> {
    let output = str_field(item, "aggregated_output").map(str::trim_end);
    match item.get("exit_code").and_then(Value::as_i64) {
        Some(code) => Some(match output.filter(|o| !o.is_empty()) {
            Some(output) => format!("exit code {code}: {output}"),
            None => format!("exit code {code}"),
        }),
        None => item
            .get("error")
            .and_then(error_message)
            .or(output.map(str::to_owned)),
    }
}

fn item_tool(item: &Map<String, Value>) -> Option<&'static str> {
    str_field(item, "type").and_then(tool_name)
}

fn str_field<'a>(item: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    item.get(key).and_then(Value::as_str)
}

/// The tool's input in the names the activity texts use (`command`, `file_path`, `query`).
/// A command Codex wrapped in a shell (`/bin/bash -lc "…"`) is given as the command inside,
/// the whole line as `shell_command`.
fn tool_use(id: &str, name: &str, item: &Map<String, Value>) -> ToolUse {
    let input = match name {
        "Bash" => match item.get("command") {
            Some(Value::String(line)) => match unwrap_shell(line) {
                Some(inner) => json!({ "command": inner, "shell_command": line }),
                None => json!({ "command": line }),
            },
            other => json!({ "command": other.cloned().unwrap_or(Value::Null) }),
        },
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

/// The command inside `SHELL -lc ARG` / `SHELL -c ARG` (SHELL `bash`, `sh`, `zsh` or `dash`,
/// by name or path), with one level of quoting of ARG removed; `None` when `line` is not of
/// that form or ARG is more than one plain quoted string or word.
fn unwrap_shell(line: &str) -> Option<String> {
    let (shell, rest) = line.split_once(' ')?;
    let name = shell.rsplit('/').next()?;
    if !matches!(name, "bash" | "sh" | "zsh" | "dash") {
        return None;
    }
    let arg = rest
        .strip_prefix("-lc ")
        .or_else(|| rest.strip_prefix("-c "))?
        .trim();
    if let Some(inner) = arg.strip_prefix('\'').and_then(|a| a.strip_suffix('\'')) {
        return (!inner.contains('\'')).then(|| inner.to_owned());
    }
    if let Some(inner) = arg.strip_prefix('"').and_then(|a| a.strip_suffix('"')) {
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(next @ ('"' | '\\' | '$' | '`')) => out.push(next),
                    Some(next) => {
                        out.push('\\');
                        out.push(next);
                    }
                    None => return None,
                },
                '"' => return None,
                c => out.push(c),
            }
        }
        return Some(out);
    }
    // Unquoted, it is one word (more words would be the shell's `$0`, `$1`, …).
    let plain = !arg.is_empty() && !arg.contains(['\'', '"', '\\', ' ', '\t', '\n']);
    plain.then(|| arg.to_owned())
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

#[cfg(test)]
mod tests {
    use super::unwrap_shell;

    #[test]
    fn shell_wrapped_commands_are_unwrapped_once() {
        let unwrap = |s: &str| unwrap_shell(s);
        assert_eq!(
            unwrap(r#"/bin/bash -lc "echo hi; printf 'files: '; ls | wc -l""#).as_deref(),
            Some("echo hi; printf 'files: '; ls | wc -l")
        );
        assert_eq!(
            unwrap("/bin/bash -lc 'echo failing >&2; exit 3'").as_deref(),
            Some("echo failing >&2; exit 3")
        );
        assert_eq!(unwrap("bash -lc ls").as_deref(), Some("ls"));
        assert_eq!(
            unwrap(r#"sh -c "say \"hi\" \$HOME""#).as_deref(),
            Some(r#"say "hi" $HOME"#)
        );
        assert_eq!(
            unwrap(r"bash -lc 'a'\''b'"),
            None,
            "more than one quoted string"
        );
        assert_eq!(unwrap("python -c 'print(1)'"), None);
        assert_eq!(unwrap("ls -la"), None);
    }
}
