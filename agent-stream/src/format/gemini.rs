//! Gemini CLI's `--output-format stream-json` events (SPEC §15; checked against recordings of
//! the real CLI, `tests/fixtures/gemini-cli/`).

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Deserialize;
use serde_json::Value;

use super::totals::{Ledger, Totals};
use super::{LineError, LineParser};
use crate::event::{AgentEvent, ToolUse, TurnOutcome};

/// The name of Gemini CLI's shell tool.
const SHELL_TOOL: &str = "run_shell_command";

/// Parses Gemini CLI stream-json lines: `init`, `message`, `tool_use`, `tool_result`, `error`,
/// `result`.
///
/// - Assistant text arrives as fragments (`"delta": true`; one sentence may be split over
///   several lines): the fragments of one message are joined and the message is one
///   [`AgentEvent::Text`], emitted when something else follows it (a tool use, the result, …,
///   or the end of the stream: [`LineParser::finish`]). The turn's result is its **last**
///   message, not every text of the turn.
/// - A tool's `status` is `error` only when the tool itself failed; a shell command that exits
///   non-zero is reported `success`. When the command printed nothing, Gemini's text for it
///   says so (`Command exited with code: N`, `Command terminated by signal: …`, `Command
///   failed: …`; with `--debug`, `Exit Code: N` after `Output: …`), and that is a failed tool
///   use. A failing command that printed output looks exactly like a successful one in the
///   stream (its exit code is nowhere in it): it cannot be told apart.
/// - `result.stats` holds the **run's totals** (every model request of the process, the model
///   router's included), and `stats.models` the same per model: each model's totals are turned
///   into its usage since the previous report of the same process, one [`AgentEvent::Usage`]
///   per model, the one with the most input last (so it is the "latest message" of SPEC §7's
///   rule); each `init` (a new process) starts from zero. Whichever model made the latest
///   request, its input is at most that largest figure, so the count never falls short of the
///   rule; it is exact when that model made one request in the run (the router's requests are
///   always apart). Several requests of one model are one figure, the sum of their inputs:
///   the stream has nothing finer. Without `models`, the run's totals are one usage.
/// - Gemini's chat file (`~/.gemini/tmp/{project}/chats/session-…-{id}.jsonl`,
///   [`crate::session_file`]) has every request of the main model with its own usage (a
///   `gemini` message's `tokens`): fed those lines ([`LineParser::parse_session_line`]), the
///   parser counts each request as one message (SPEC §7), and the `result` adds only what
///   they did not cover (the model router's requests, which the chat file does not record:
///   their output counts, their input is not the latest).
/// - An `error` event is an [`AgentEvent::Error`].
#[derive(Debug, Clone, Default)]
pub struct GeminiParser {
    /// The fragments of the assistant message being received.
    fragments: String,
    /// The last whole assistant message since the last user message.
    last_message: Option<String>,
    /// The tools started and not finished yet, by id: their names.
    open_tools: HashMap<String, String>,
    /// The previous `result.stats` totals of this process, by model (`""`: the run's totals,
    /// when the report has no `models`), when its chat file is not read.
    totals: HashMap<String, Totals>,
    /// What was counted of this process's running totals, from its reports and its chat file.
    ledger: Ledger,
    /// The chat file's messages counted (a message is written again as it is updated).
    recorded: HashSet<String>,
    /// The sum of their usage: the running totals after the latest one.
    recorded_input: u64,
    recorded_output: u64,
}

/// A line of Gemini's chat file: a `gemini` message with its usage is one model request.
#[derive(Deserialize)]
struct ChatLine {
    #[serde(default)]
    id: Option<String>,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    tokens: Option<ChatTokens>,
}

/// A message's `tokens`: `input` is the prompt (its cached part included), `output` the
/// candidates (as `result.stats` counts them).
#[derive(Deserialize)]
struct ChatTokens {
    #[serde(default)]
    input: u64,
    #[serde(default)]
    output: u64,
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
    delta: bool,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    tool_id: Option<String>,
    #[serde(default)]
    parameters: Value,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Option<Value>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default)]
    stats: Option<Stats>,
}

/// `result.stats`: `input_tokens` already holds the `cached` ones.
#[derive(Deserialize)]
struct Stats {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    /// The same totals per model (the model router's apart), by name: the events they make
    /// come in one order whoever reads the line (a `HashMap` iterates in a random order).
    #[serde(default)]
    models: BTreeMap<String, ModelStats>,
}

/// One model's totals in `result.stats.models`.
#[derive(Deserialize)]
struct ModelStats {
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
                self.end_message(out);
                self.totals.clear();
                self.ledger.reset();
                self.recorded.clear();
                (self.recorded_input, self.recorded_output) = (0, 0);
                if let Some(session_id) = line.session_id {
                    out.push(AgentEvent::Init {
                        session_id,
                        model: line.model,
                    });
                }
            }
            "message" => self.message(line.role.as_deref(), line.content, line.delta, out),
            "tool_use" => {
                self.end_message(out);
                if let (Some(id), Some(name)) = (line.tool_id, line.tool_name) {
                    self.open_tools.insert(id.clone(), name.clone());
                    out.push(AgentEvent::ToolStarted(ToolUse {
                        id,
                        name,
                        input: line.parameters,
                    }));
                }
            }
            "tool_result" => {
                self.end_message(out);
                if let Some(id) = line.tool_id.clone() {
                    let name = self.open_tools.remove(&id);
                    let is_error = line.status.as_deref() != Some("success")
                        || (name.as_deref() == Some(SHELL_TOOL)
                            && line
                                .output
                                .as_ref()
                                .and_then(Value::as_str)
                                .is_some_and(shell_failed));
                    let reason = is_error.then(|| failure_reason(&line)).flatten();
                    out.push(AgentEvent::ToolFinished {
                        id,
                        is_error,
                        reason,
                    });
                }
            }
            "error" => {
                self.end_message(out);
                let message = line
                    .message
                    .as_ref()
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| error_parts(line.error.as_ref()).1)
                    .unwrap_or_else(|| "unknown error".into());
                out.push(AgentEvent::Error { message });
            }
            "result" => self.result(line, out),
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        self.end_message(out);
    }

    /// A line of this session's chat file: each `gemini` message with `tokens` is one request.
    fn parse_session_line(
        &mut self,
        line: &[u8],
        out: &mut Vec<AgentEvent>,
    ) -> Result<(), LineError> {
        let line: ChatLine = serde_json::from_slice(line)?;
        let (Some(id), Some("gemini"), Some(tokens)) = (line.id, line.kind.as_deref(), line.tokens)
        else {
            return Ok(());
        };
        if !self.recorded.insert(id) {
            return Ok(());
        }
        self.recorded_input = self.recorded_input.saturating_add(tokens.input);
        self.recorded_output = self.recorded_output.saturating_add(tokens.output);
        out.extend(
            self.ledger
                .record(tokens.input, self.recorded_input, self.recorded_output)
                .map(AgentEvent::Usage),
        );
        Ok(())
    }
}

impl GeminiParser {
    fn message(
        &mut self,
        role: Option<&str>,
        content: Option<String>,
        delta: bool,
        out: &mut Vec<AgentEvent>,
    ) {
        match (role, content) {
            (Some("assistant"), Some(text)) if delta => self.fragments.push_str(&text),
            (Some("assistant"), Some(text)) => {
                self.end_message(out);
                self.last_message = Some(text.clone());
                out.push(AgentEvent::Text(text));
            }
            (Some("user"), text) => {
                self.end_message(out);
                self.last_message = None;
                out.extend(text.map(AgentEvent::UserMessage));
            }
            _ => {}
        }
    }

    /// The usage since the previous report, one [`AgentEvent::Usage`] per model, the one with
    /// the most input last (models with as much input in the order of their names).
    /// With the chat file read, the run's totals are reconciled with its records instead.
    fn usage(&mut self, stats: Stats, out: &mut Vec<AgentEvent>) {
        if self.ledger.has_records() {
            let rest = self.ledger.report(stats.input_tokens, stats.output_tokens);
            out.extend(rest.map(AgentEvent::Usage));
            return;
        }
        // Counted here, per model: the ledger only learns the totals, so that a record read
        // later is not counted again.
        let _ = self.ledger.report(stats.input_tokens, stats.output_tokens);
        let reports: Vec<(String, u64, u64)> = if stats.models.is_empty() {
            vec![(String::new(), stats.input_tokens, stats.output_tokens)]
        } else {
            stats
                .models
                .into_iter()
                .map(|(model, m)| (model, m.input_tokens, m.output_tokens))
                .collect()
        };
        let mut usages: Vec<_> = reports
            .into_iter()
            .filter_map(|(model, input, output)| {
                self.totals.entry(model).or_default().since(input, output)
            })
            .collect();
        usages.sort_by_key(|usage| usage.input_tokens);
        out.extend(usages.into_iter().map(AgentEvent::Usage));
    }

    /// The fragments received so far are one whole message.
    fn end_message(&mut self, out: &mut Vec<AgentEvent>) {
        if self.fragments.is_empty() {
            return;
        }
        let text = std::mem::take(&mut self.fragments);
        self.last_message = Some(text.clone());
        out.push(AgentEvent::Text(text));
    }

    fn result(&mut self, line: Line, out: &mut Vec<AgentEvent>) {
        self.end_message(out);
        if let Some(stats) = line.stats {
            self.usage(stats, out);
        }
        let last = self.last_message.take();
        let outcome = if line.status.as_deref() == Some("success") {
            TurnOutcome::Success { result: last }
        } else {
            let (kind, message) = error_parts(line.error.as_ref());
            TurnOutcome::Error {
                kind: kind.unwrap_or_else(|| "error".into()),
                message,
            }
        };
        out.push(AgentEvent::TurnEnded(outcome));
    }
}

/// Whether the output Gemini shows for a shell command says it failed. Gemini shows the
/// command's output when there is any, else one of these lines (its shell tool's
/// `returnDisplay`); with `--debug` it shows the text the model gets, `Output: …` then
/// `Exit Code: N` among other lines.
fn shell_failed(output: &str) -> bool {
    let text = output.trim_start();
    let nonzero = |code: &str| code.trim().parse::<i64>().is_ok_and(|c| c != 0);
    if let Some(code) = text.strip_prefix("Command exited with code: ") {
        return nonzero(code);
    }
    if text.starts_with("Command terminated by signal: ") || text.starts_with("Command failed: ") {
        return true;
    }
    text.starts_with("Output: ")
        && text
            .lines()
            .filter_map(|line| line.strip_prefix("Exit Code: "))
            .any(nonzero)
}

/// Why a tool failed: its error's message, else its output.
fn failure_reason(line: &Line) -> Option<String> {
    let (_, message) = error_parts(line.error.as_ref());
    message.or_else(|| {
        let output = line.output.as_ref()?;
        Some(
            output
                .as_str()
                .map_or_else(|| output.to_string(), str::to_owned),
        )
    })
}

/// The `type` and `message` of an error object.
fn error_parts(error: Option<&Value>) -> (Option<String>, Option<String>) {
    let field = |key: &str| {
        error
            .and_then(|e| e.get(key))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    (field("type"), field("message"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::shell_failed;
    use crate::event::AgentEvent;
    use crate::format::CliFormat;

    #[test]
    fn models_with_as_much_input_report_their_usage_in_the_order_of_their_names() {
        let line = br#"{"type":"result","status":"success","stats":{"models":{
            "m-b":{"input_tokens":10,"output_tokens":2},
            "m-a":{"input_tokens":10,"output_tokens":1},
            "m-c":{"input_tokens":10,"output_tokens":3},
            "big":{"input_tokens":99,"output_tokens":4}}}}"#;
        for _ in 0..8 {
            let mut events = Vec::new();
            let mut parser = CliFormat::Gemini.parser();
            parser.parse_line(line, &mut events).unwrap();
            let outputs: Vec<u64> = events
                .iter()
                .filter_map(|event| match event {
                    AgentEvent::Usage(usage) => Some(usage.output_tokens),
                    _ => None,
                })
                .collect();
            assert_eq!(outputs, [1, 2, 3, 4], "{events:?}");
        }
    }

    #[test]
    fn a_shell_failure_is_read_from_what_gemini_shows_when_there_is_no_output() {
        assert!(shell_failed("Command exited with code: 3"));
        assert!(!shell_failed("Command exited with code: 0"));
        assert!(shell_failed("Command terminated by signal: SIGTERM"));
        assert!(shell_failed("Command failed: spawn /bin/bash ENOENT"));
        assert!(shell_failed(
            "Output: failing on purpose\nExit Code: 3\nProcess Group PGID: 12"
        ));
        assert!(!shell_failed("Output: fine\nProcess Group PGID: 12"));
        assert!(!shell_failed("failing on purpose"));
        assert!(
            !shell_failed("the log said\nExit Code: 3"),
            "only Gemini's own form"
        );
    }
}
