//! The real Claude Code CLI as an MCP client of `tasks mcp`, against the scripted model
//! server speaking the Anthropic Messages API (streamed).
//!
//! The CLI is `$TASKS_TEST_CLAUDE` (`.ci/agent-clis.sh` installs the pinned version and prints
//! it), else `claude` on the `PATH`. It runs as root here, which it allows in a sandbox
//! (`IS_SANDBOX=1`), with its MCP tools offered up front (`ENABLE_TOOL_SEARCH=false`) and a
//! `HOME` of the test's own.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::model_server::{Dialect, FINAL_TEXT, Response};

/// The Anthropic Messages API as Claude Code calls it (`POST /v1/messages?beta=true`, streamed).
pub struct Anthropic;

impl Dialect for Anthropic {
    fn tool_name(&self, server: &str, tool: &str) -> String {
        format!("mcp__{server}__{tool}")
    }

    fn is_turn(&self, path: &str, body: &Value, server: &str) -> bool {
        let prefix = format!("mcp__{server}__");
        path.starts_with("/v1/messages")
            && !path.contains("count_tokens")
            && tools(body).any(|name| name.starts_with(&prefix))
    }

    fn results(&self, body: &Value) -> usize {
        blocks(body)
            .filter(|block| block["type"] == "tool_result")
            .count()
    }

    fn answer(&self, calls: &[(String, Value)], step: usize, body: &Value) -> Response {
        let model = body["model"].as_str().unwrap_or("claude");
        let mut events = vec![(
            Some("message_start"),
            json!({"type": "message_start", "message": {
                "id": format!("msg_{step}"), "type": "message", "role": "assistant",
                "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        )];
        let blocks: Vec<(Value, Value)> = if calls.is_empty() {
            vec![(
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": FINAL_TEXT}),
            )]
        } else {
            calls
                .iter()
                .enumerate()
                .map(|(index, (name, input))| {
                    (
                        json!({"type": "tool_use", "id": format!("toolu_{step}_{index}"),
                               "name": name, "input": {}}),
                        json!({"type": "input_json_delta", "partial_json": input.to_string()}),
                    )
                })
                .collect()
        };
        for (index, (start, delta)) in blocks.into_iter().enumerate() {
            events.push((
                Some("content_block_start"),
                json!({"type": "content_block_start", "index": index, "content_block": start}),
            ));
            events.push((
                Some("content_block_delta"),
                json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
            events.push((
                Some("content_block_stop"),
                json!({"type": "content_block_stop", "index": index}),
            ));
        }
        let stop = if calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        events.push((
            Some("message_delta"),
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                   "usage": {"output_tokens": 5}}),
        ));
        events.push((Some("message_stop"), json!({"type": "message_stop"})));
        Response::sse(&events)
    }

    fn other(&self, path: &str, body: &Value) -> Response {
        if path.contains("count_tokens") {
            return Response::json(&json!({"input_tokens": 10}));
        }
        if path.starts_with("/v1/messages") {
            // A side request (a title, a summary): a short text, streamed if asked.
            return if body["stream"] == true {
                self.answer(&[], 0, body)
            } else {
                Response::json(
                    &json!({"id": "msg_side", "type": "message", "role": "assistant",
                    "model": body["model"], "content": [{"type": "text", "text": FINAL_TEXT}],
                    "stop_reason": "end_turn", "stop_sequence": null,
                    "usage": {"input_tokens": 10, "output_tokens": 5}}),
                )
            };
        }
        Response::not_found()
    }

    fn conversation<'a>(&self, body: &'a Value) -> Option<&'a Value> {
        body.get("messages")
    }
}

fn tools(body: &Value) -> impl Iterator<Item = &str> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str())
}

fn blocks(body: &Value) -> impl Iterator<Item = &Value> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|message| message["content"].as_array())
        .flatten()
}

/// The Claude Code executable, or `None` (the test skips; under `CI=true` it fails).
pub fn executable() -> Option<PathBuf> {
    super::agent_cli("TASKS_TEST_CLAUDE", "claude")
}

/// A home for Claude Code under `dir`: onboarding done, `cwd` trusted, the API key accepted,
/// and, for channels, the client's channel rollout flag as its feature cache would hold it
/// once fetched (`tengu_harbor`: the CLI reads it from `~/.claude.json`; with no network
/// here nothing else would set it).
pub fn home(dir: &Path, cwd: &Path, api_key: &str) -> PathBuf {
    let home = dir.join("claude-home");
    std::fs::create_dir_all(&home).expect("claude home");
    let key_suffix: String = api_key
        .chars()
        .rev()
        .take(20)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let config = json!({
        "hasCompletedOnboarding": true,
        "theme": "dark",
        "numStartups": 5,
        "bypassPermissionsModeAccepted": true,
        "customApiKeyResponses": {"approved": [key_suffix], "rejected": []},
        "projects": {cwd.to_string_lossy(): {
            "hasTrustDialogAccepted": true, "hasCompletedProjectOnboarding": true}},
        "cachedGrowthBookFeatures": {"tengu_harbor": true},
        "cachedGrowthBookFeaturesAt": now_ms(),
    });
    std::fs::write(home.join(".claude.json"), config.to_string()).expect("claude config");
    home
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The `--mcp-config` file naming `tasks mcp` (with `args`) as the server `tasks`.
pub fn mcp_config(dir: &Path, tasks: &Path, args: &[&str], env: &[(&str, &Path)]) -> PathBuf {
    let env: serde_json::Map<String, Value> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::from(v.to_string_lossy())))
        .collect();
    let mut server_args = vec!["mcp"];
    server_args.extend_from_slice(args);
    let config = json!({"mcpServers": {"tasks": {
        "command": tasks, "args": server_args, "env": env}}});
    let path = dir.join("mcp.json");
    std::fs::write(&path, config.to_string()).expect("mcp config");
    path
}

/// The environment Claude Code runs in: its home, the scripted model, no tool search, no
/// updates. With `channels`, its feature flags stay on (`DISABLE_TELEMETRY` or
/// `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC` turn them off, and channels with them); without,
/// telemetry is off too.
pub fn environment(
    home: &Path,
    model_url: &str,
    api_key: &str,
    channels: bool,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("HOME", home.to_string_lossy().into_owned()),
        ("ANTHROPIC_BASE_URL", model_url.to_owned()),
        ("ANTHROPIC_API_KEY", api_key.to_owned()),
        ("IS_SANDBOX", "1".to_owned()),
        ("ENABLE_TOOL_SEARCH", "false".to_owned()),
        ("DISABLE_AUTOUPDATER", "1".to_owned()),
        ("DISABLE_ERROR_REPORTING", "1".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    if !channels {
        env.push(("DISABLE_TELEMETRY".to_owned(), "1".to_owned()));
    }
    env
}
