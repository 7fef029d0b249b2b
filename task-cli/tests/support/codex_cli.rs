//! The real Codex CLI (`codex exec --json`) as an MCP client of `tasks mcp`, against the
//! scripted model server speaking the OpenAI Responses API (streamed).
//!
//! The CLI is `$TASKS_TEST_CODEX`, else `codex` on the `PATH`. Its model is an unknown slug
//! (`scripted-model`): with a known one Codex hides MCP tools behind a tool search.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::model_server::{Dialect, FINAL_TEXT, Response, charge};

/// The Responses API as Codex calls it (`POST /v1/responses`).
pub struct Responses;

impl Dialect for Responses {
    fn tool_name(&self, _server: &str, tool: &str) -> String {
        tool.to_owned()
    }

    fn is_turn(&self, path: &str, body: &Value, server: &str) -> bool {
        let namespace = format!("mcp__{server}");
        path.ends_with("/responses")
            && body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|tool| tool["name"] == namespace.as_str())
    }

    fn results(&self, body: &Value) -> usize {
        body["input"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|item| item["type"] == "function_call_output")
            .count()
    }

    fn answer(&self, calls: &[(String, Value)], step: usize, body: &Value) -> Response {
        let id = format!("resp_{step}");
        let mut events = vec![(
            Some("response.created"),
            json!({"type": "response.created", "response": {"id": id}}),
        )];
        if calls.is_empty() {
            events.push((
                Some("response.output_item.done"),
                json!({"type": "response.output_item.done", "output_index": 0, "item": {
                    "type": "message", "role": "assistant", "id": format!("msg_{step}"),
                    "content": [{"type": "output_text", "text": FINAL_TEXT, "annotations": []}]}}),
            ));
        }
        for (index, (name, input)) in calls.iter().enumerate() {
            events.push((
                Some("response.output_item.done"),
                json!({"type": "response.output_item.done", "output_index": index, "item": {
                    "type": "function_call", "id": format!("fc_{step}_{index}"),
                    "call_id": format!("call_{step}_{index}"), "name": name,
                    "arguments": input.to_string(), "namespace": "mcp__tasks"}}),
            ));
        }
        let (input, output) = charge(self.results(body));
        events.push((
            Some("response.completed"),
            json!({"type": "response.completed", "response": {"id": id, "usage": {
                "input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": input + output}}}),
        ));
        Response::sse(&events)
    }

    fn other(&self, path: &str, body: &Value) -> Response {
        if path.ends_with("/responses") {
            return self.answer(&[], 0, body);
        }
        Response::not_found()
    }

    fn conversation<'a>(&self, body: &'a Value) -> Option<&'a Value> {
        body.get("input")
    }
}

/// The Codex executable, or `None` (the test skips; under `CI=true` it fails).
pub fn executable() -> Option<PathBuf> {
    super::agent_cli("TASKS_TEST_CODEX", "codex")
}

/// A `CODEX_HOME` under `dir` whose model is the scripted server at `model_url` and whose MCP
/// server `tasks` is `tasks mcp` with `args` and `env`.
pub fn home(
    dir: &Path,
    model_url: &str,
    tasks: &Path,
    args: &[&str],
    env: &[(&str, &Path)],
) -> PathBuf {
    let home = dir.join("codex-home");
    std::fs::create_dir_all(&home).expect("codex home");
    let quoted = |s: &str| Value::from(s).to_string();
    let mut server_args = vec![quoted("mcp")];
    server_args.extend(args.iter().map(|a| quoted(a)));
    let env: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k} = {}", quoted(&v.to_string_lossy())))
        .collect();
    let config = format!(
        "model = \"scripted-model\"\nmodel_provider = \"scripted\"\napproval_policy = \"never\"\n\
         sandbox_mode = \"danger-full-access\"\n\n\
         [model_providers.scripted]\nname = \"scripted\"\nbase_url = {}\nwire_api = \"responses\"\n\
         request_max_retries = 0\nstream_max_retries = 0\n\n\
         [mcp_servers.tasks]\ncommand = {}\nargs = [{}]\nenv = {{ {} }}\n",
        quoted(&format!("{model_url}/v1")),
        quoted(&tasks.to_string_lossy()),
        server_args.join(", "),
        env.join(", "),
    );
    std::fs::write(home.join("config.toml"), config).expect("codex config");
    home
}
