//! The real Gemini CLI (`gemini -p … --output-format stream-json`) as an MCP client of
//! `tasks mcp`, against the scripted model server speaking the Gemini API
//! (`streamGenerateContent`, server-sent events).
//!
//! The CLI is `$TASKS_TEST_GEMINI`, else `gemini` on the `PATH`; `GOOGLE_GEMINI_BASE_URL`
//! points it at the scripted server, and its settings pin the model (no routing classifier),
//! the API-key auth and a trusted MCP server.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::model_server::{Dialect, FINAL_TEXT, Response, charge};

/// The Gemini API as the Gemini CLI calls it.
pub struct GenerateContent;

impl Dialect for GenerateContent {
    fn tool_name(&self, server: &str, tool: &str) -> String {
        format!("mcp_{server}_{tool}")
    }

    fn is_turn(&self, path: &str, body: &Value, server: &str) -> bool {
        let prefix = format!("mcp_{server}_");
        path.contains(":streamGenerateContent")
            && body["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|tools| tools["functionDeclarations"].as_array())
                .flatten()
                .any(|f| f["name"].as_str().is_some_and(|n| n.starts_with(&prefix)))
    }

    fn results(&self, body: &Value) -> usize {
        body["contents"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|content| content["parts"].as_array())
            .flatten()
            .filter(|part| part.get("functionResponse").is_some())
            .count()
    }

    fn answer(&self, calls: &[(String, Value)], step: usize, body: &Value) -> Response {
        let parts: Vec<Value> = if calls.is_empty() {
            vec![json!({"text": FINAL_TEXT})]
        } else {
            calls
                .iter()
                .enumerate()
                .map(|(index, (name, args))| {
                    json!({"functionCall": {"id": format!("call_{step}_{index}"),
                                            "name": name, "args": args}})
                })
                .collect()
        };
        let (input, output) = charge(self.results(body));
        Response::sse(&[(
            None,
            json!({"candidates": [{"content": {"role": "model", "parts": parts},
                                   "index": 0, "finishReason": "STOP"}],
                   "modelVersion": "scripted-model",
                   "usageMetadata": {"promptTokenCount": input, "candidatesTokenCount": output,
                                     "totalTokenCount": input + output}}),
        )])
    }

    fn other(&self, path: &str, body: &Value) -> Response {
        if path.contains(":streamGenerateContent") {
            return self.answer(&[], 0, body);
        }
        if path.contains(":generateContent") {
            // A side request (routing, next speaker): an empty JSON answer.
            return Response::json(&json!({"candidates": [{"content": {"role": "model",
                "parts": [{"text": "{}"}]}, "finishReason": "STOP"}]}));
        }
        Response::not_found()
    }

    fn conversation<'a>(&self, body: &'a Value) -> Option<&'a Value> {
        body.get("contents")
    }
}

/// The Gemini CLI executable, or `None` (the test skips; under `CI=true` it fails).
pub fn executable() -> Option<PathBuf> {
    super::agent_cli("TASKS_TEST_GEMINI", "gemini")
}

/// A `HOME` under `dir` whose `~/.gemini/settings.json` runs `tasks mcp` with `args` and `env`
/// as the trusted MCP server `tasks`.
pub fn home(dir: &Path, tasks: &Path, args: &[&str], env: &[(&str, &Path)]) -> PathBuf {
    let home = dir.join("gemini-home");
    std::fs::create_dir_all(home.join(".gemini")).expect("gemini home");
    let env: serde_json::Map<String, Value> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(v.to_string_lossy())))
        .collect();
    let mut server_args = vec!["mcp"];
    server_args.extend_from_slice(args);
    let settings = json!({
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "security": {"folderTrust": {"enabled": false},
                     "auth": {"selectedType": "gemini-api-key"}},
        "model": {"name": "gemini-2.5-flash", "disableLoopDetection": true},
        "mcpServers": {"tasks": {"command": tasks, "args": server_args, "env": env,
                                 "trust": true}},
    });
    std::fs::write(home.join(".gemini/settings.json"), settings.to_string())
        .expect("gemini settings");
    home
}
