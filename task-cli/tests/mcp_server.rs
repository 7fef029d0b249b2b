//! `tasks mcp` driven over stdio by a real MCP client (rmcp), and by hand for malformed input.
//!
//! Every test starts the built binary with a fresh `TASKS_ROOT`; the [`Server`] guard kills
//! the server, the session's supervisor and every task process group by pid when it drops.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(deprecated)] // resources/subscribe and logging are the session protocol's methods

mod support;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::SinkExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, LoggingMessageNotificationParam,
    ReadResourceRequestParams, ResourceUpdatedNotificationParam, SubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use task_session::paths::SessionPaths;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL;

use support::DEADLINE;
use support::gate::Gate;

/// What the server pushed.
#[derive(Debug, Default)]
struct Pushed {
    logs: Mutex<Vec<Value>>,
    updated: Mutex<Vec<String>>,
}

#[derive(Debug, Clone, Default)]
struct Recorder(Arc<Pushed>);

impl ClientHandler for Recorder {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.logs.lock().unwrap().push(params.data);
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.0.updated.lock().unwrap().push(params.uri);
    }
}

/// A running `tasks mcp` with its own state root.
struct Server {
    client: Option<RunningService<RoleClient, Recorder>>,
    pushed: Arc<Pushed>,
    pid: Option<u32>,
    root: tempfile::TempDir,
}

fn tasks_command(root: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tasks"));
    command
        .args(args)
        .env("TASKS_ROOT", root)
        .env("TASKS_IDLE_EXIT_MS", "1000")
        .env("TASKS_POLL_MS", "20")
        .env("BASH_MAX_OUTPUT_LENGTH", "1000")
        .env_remove("TASKS_SESSION")
        .env_remove("TASKS_LIST_ID")
        .env_remove("TASKS_LIST_ROOT")
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("TASK_MAX_OUTPUT_LENGTH");
    command
}

impl Server {
    async fn start() -> Self {
        Self::start_with_env(&[]).await
    }

    /// A server whose environment also has `env`.
    async fn start_with_env(env: &[(&str, &str)]) -> Self {
        let root = tempfile::tempdir().unwrap();
        Self::launch(root, &["mcp", "--watch-ms", "50"], env).await
    }

    /// `tasks ARGS` on `root`, with `env`, as a connected server.
    async fn launch(root: tempfile::TempDir, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut command = tasks_command(root.path(), args);
        command.envs(env.iter().copied());
        let transport = TokioChildProcess::new(command).unwrap();
        let pid = transport.id();
        let recorder = Recorder::default();
        let pushed = Arc::clone(&recorder.0);
        let client = recorder.serve(transport).await.unwrap();
        Self {
            client: Some(client),
            pushed,
            pid,
            root,
        }
    }

    fn client(&self) -> &RunningService<RoleClient, Recorder> {
        self.client.as_ref().unwrap()
    }

    async fn call(&self, tool: &'static str, arguments: Value) -> CallToolResult {
        let Value::Object(arguments) = arguments else {
            panic!("arguments must be an object");
        };
        let params = CallToolRequestParams::new(tool).with_arguments(arguments);
        self.client().call_tool(params).await.unwrap()
    }

    /// Starts a background command and returns its id.
    async fn background(&self, command: &str, description: &str) -> String {
        let result = self
            .call(
                "Bash",
                json!({"command": command, "description": description, "run_in_background": true}),
            )
            .await;
        assert_ne!(result.is_error, Some(true), "{result:?}");
        let id = structured(&result)["backgroundTaskId"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(
            first_text(&result).starts_with(&format!(
                "Command running in background with ID: {id}. Output is being written to: "
            )),
            "{result:?}"
        );
        id
    }

    /// Calls `TaskOutput` without blocking until `done` holds for its result.
    async fn output_until(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        support::eventually_async("the task's output", async || {
            let result = self
                .call("TaskOutput", json!({"task_id": id, "block": false}))
                .await;
            Some(structured(&result).clone()).filter(|shape| done(shape))
        })
        .await
    }

    /// Runs the `tasks` CLI on the same root and returns its JSON output.
    async fn cli_json(&self, args: &[&str]) -> Value {
        let output = tasks_command(self.root.path(), args)
            .arg("--json")
            .output()
            .await
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice(&output.stdout).unwrap()
    }

    /// What was pushed about task `id`, in the order the client's handlers ran (rmcp runs each
    /// notification handler in its own task, so not necessarily the order of sending).
    fn pushes_about(&self, id: &str) -> Vec<Value> {
        let logs = self.pushed.logs.lock().unwrap();
        logs.iter().filter(|l| l["taskId"] == id).cloned().collect()
    }

    /// Runs `tasks notifications --json` on the same root; the ids of what it delivered.
    async fn cli_notifications(&self) -> Vec<String> {
        let output = tasks_command(self.root.path(), &["notifications", "--json"])
            .output()
            .await
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        delivered_ids(&output.stdout)
    }

    fn session(&self) -> SessionPaths {
        SessionPaths::new(self.root.path(), "default").unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.client.take());
        if let Some(pid) = self.pid {
            kill(pid as i32);
        }
        kill_session(&self.session());
    }
}

/// Kills the session's supervisor and every task's process group, by pid.
fn kill_session(paths: &SessionPaths) {
    if let Ok(listing) = task_session::record::list(paths) {
        for record in listing.tasks {
            let process = match &record.task.kind {
                task_core::TaskKind::Shell(shell) => shell.process,
                _ => None,
            };
            let pgid = process.and_then(|p| i32::try_from(p.pgid).ok());
            if let Some(pgid) = pgid.and_then(rustix::process::Pid::from_raw) {
                let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
            }
        }
    }
    if let Ok(text) = std::fs::read_to_string(paths.lock())
        && let Ok(pid) = text.trim().parse()
    {
        kill(pid);
    }
}

fn kill(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

fn texts(result: &CallToolResult) -> Vec<String> {
    result
        .content
        .iter()
        .filter_map(|block| block.as_text().map(|t| t.text.clone()))
        .collect()
}

fn first_text(result: &CallToolResult) -> String {
    texts(result).into_iter().next().unwrap_or_default()
}

fn structured(result: &CallToolResult) -> &Value {
    result
        .structured_content
        .as_ref()
        .expect("structured content")
}

/// The envelopes about `id` appended to a result.
fn envelopes_about(result: &CallToolResult, id: &str) -> Vec<String> {
    texts(result)
        .into_iter()
        .filter(|t| {
            t.contains("<task-notification>") && t.contains(&format!("<task-id>{id}</task-id>"))
        })
        .collect()
}

fn is_gone(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // A zombie no longer runs; its parent (init) reaps it.
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[tokio::test]
async fn lists_the_reference_tools_with_schemas_from_rust_types() {
    let server = Server::start().await;
    let tools = server.client().list_all_tools().await.unwrap();
    let names: HashSet<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let expected = [
        "Bash",
        "TaskOutput",
        "TaskStop",
        "Monitor",
        "TaskCreate",
        "TaskGet",
        "TaskUpdate",
        "TaskList",
        "TaskClaim",
        "SendMessage",
    ];
    // No Agent tool: no agent command is configured (tests/agents.rs has one).
    assert_eq!(names, expected.into_iter().collect());
    let schema = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        Value::Object((*tool.input_schema).clone())
    };

    let bash = schema("Bash");
    assert_eq!(bash["required"], json!(["command"]));
    assert_eq!(bash["additionalProperties"], json!(false));
    assert_eq!(
        bash["properties"]["command"]["description"],
        "The command to execute"
    );
    assert_eq!(bash["properties"]["timeout"]["maximum"], 600_000);
    assert!(bash["properties"]["run_in_background"].is_object());
    let output_schema = tools
        .iter()
        .find(|t| t.name == "Bash")
        .unwrap()
        .output_schema
        .clone()
        .unwrap();
    for field in ["stdout", "stderr", "interrupted", "backgroundTaskId"] {
        assert!(output_schema["properties"].get(field).is_some(), "{field}");
    }

    let output = schema("TaskOutput");
    assert_eq!(output["required"], json!(["task_id"]));
    assert_eq!(output["properties"]["block"]["default"], true);
    assert_eq!(output["properties"]["timeout"]["default"], 30_000);
    assert_eq!(
        output["properties"]["task_id"]["description"],
        "The task ID to get output from"
    );

    let stop = schema("TaskStop");
    assert_eq!(
        stop["properties"]["shell_id"]["description"],
        "Deprecated: use task_id instead"
    );
    assert_eq!(stop["properties"]["shell_id"]["deprecated"], true);

    let update = schema("TaskUpdate");
    assert_eq!(update["required"], json!(["taskId"]));
    assert_eq!(
        update["properties"]["addBlockedBy"]["description"],
        "Task IDs that block this task"
    );
    assert!(
        update["properties"]["status"]
            .to_string()
            .contains("deleted")
    );
    assert_eq!(
        schema("TaskCreate")["required"],
        json!(["subject", "description"])
    );
    assert_eq!(
        schema("TaskGet")["properties"]["taskId"]["description"],
        "The ID of the task to retrieve"
    );
    assert!(schema("Monitor")["properties"]["ws"].is_object());

    // The reference's four list tools keep its input fields, their descriptions and what is
    // required; TaskClaim is added beside them.
    // (The four tools' input schemas, as the reference harness lists them.)
    let reference: Vec<Value> =
        serde_json::from_str(include_str!("fixtures/reference-task-tool-schemas.json")).unwrap();
    for name in ["TaskCreate", "TaskGet", "TaskUpdate", "TaskList"] {
        let theirs = &reference.iter().find(|t| t["name"] == name).unwrap()["input_schema"];
        let ours = schema(name);
        let fields = |schema: &Value| -> Vec<(String, Value)> {
            let properties = schema["properties"]
                .as_object()
                .cloned()
                .unwrap_or_default();
            properties
                .into_iter()
                .map(|(k, v)| (k, v["description"].clone()))
                .collect()
        };
        assert_eq!(fields(&ours), fields(theirs), "{name}");
        let required = |schema: &Value| schema.get("required").cloned().unwrap_or(json!([]));
        assert_eq!(required(&ours), required(theirs), "{name}");
    }
    let claim = schema("TaskClaim");
    assert_eq!(
        claim.get("required").cloned().unwrap_or(json!([])),
        json!([])
    );
    assert!(claim["properties"]["removeBlockedBy"].is_object());
}

#[tokio::test]
async fn task_claim_removes_a_dependency_that_task_update_cannot() {
    let server = Server::start().await;
    for subject in ["schema", "api"] {
        server
            .call("TaskCreate", json!({"subject": subject, "description": ""}))
            .await;
    }
    let added = server
        .call("TaskUpdate", json!({"taskId": "2", "addBlockedBy": ["1"]}))
        .await;
    assert_eq!(structured(&added)["success"], true);
    let blocked = server
        .call("TaskClaim", json!({"owner": "ann", "taskId": "2"}))
        .await;
    assert_eq!(structured(&blocked)["reason"], "blocked");
    // TaskUpdate keeps the reference's schema: no way to remove an edge there.
    let refused = server
        .call(
            "TaskUpdate",
            json!({"taskId": "2", "removeBlockedBy": ["1"]}),
        )
        .await;
    assert_eq!(refused.is_error, Some(true));
    let removed = server
        .call(
            "TaskClaim",
            json!({"taskId": "2", "removeBlockedBy": ["1"]}),
        )
        .await;
    assert_eq!(first_text(&removed), "Updated task #2 blockedBy");
    assert_eq!(
        structured(&removed)["updatedFields"],
        json!(["blockedBy"]),
        "{removed:?}"
    );
    let got = server.call("TaskGet", json!({"taskId": "1"})).await;
    assert_eq!(structured(&got)["task"]["blocks"], json!([]), "both ends");
    let claimed = server
        .call("TaskClaim", json!({"owner": "ann", "next": true}))
        .await;
    assert_eq!(first_text(&claimed), "Claimed task #1 for ann: schema");
    let claimed = server
        .call("TaskClaim", json!({"owner": "bob", "next": true}))
        .await;
    assert_eq!(
        first_text(&claimed),
        "Claimed task #2 for bob: api",
        "unblocked at once"
    );
    let mixed = server
        .call(
            "TaskClaim",
            json!({"owner": "cy", "taskId": "2", "removeBlocks": ["1"]}),
        )
        .await;
    assert_eq!(mixed.is_error, Some(true), "removing edges never claims");
}

#[tokio::test]
async fn task_get_shows_parent_and_children_and_task_claim_moves_a_task_before_or_after_another() {
    let server = Server::start().await;
    let create = |subject: &'static str, metadata: Value| {
        let server = &server;
        async move {
            let created = server
                .call(
                    "TaskCreate",
                    json!({"subject": subject, "description": "d", "metadata": metadata}),
                )
                .await;
            assert_eq!(
                structured(&created)["task"]["subject"],
                subject,
                "{created:?}"
            );
        }
    };
    create("epic", json!({})).await;
    create("first", json!({"parent": "1"})).await;
    create("second", json!({"parent": "1"})).await;
    create("lone", json!({})).await;

    let epic = server.call("TaskGet", json!({"taskId": "1"})).await;
    assert_eq!(
        first_text(&epic),
        "Task #1: epic\nStatus: pending\nDescription: d\nChildren: #2, #3"
    );
    assert_eq!(structured(&epic)["task"]["children"], json!(["2", "3"]));
    assert!(structured(&epic)["task"].get("parent").is_none());
    let child = server.call("TaskGet", json!({"taskId": "3"})).await;
    assert_eq!(
        first_text(&child),
        "Task #3: second\nStatus: pending\nDescription: d\nParent: #1"
    );
    assert_eq!(structured(&child)["task"]["parent"], json!("1"));
    // A task with neither: the reference's answer, unchanged.
    let lone = server.call("TaskGet", json!({"taskId": "4"})).await;
    assert_eq!(
        first_text(&lone),
        "Task #4: lone\nStatus: pending\nDescription: d"
    );
    let keys: Vec<&String> = structured(&lone)["task"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert!(
        !keys.iter().any(|k| *k == "parent" || *k == "children"),
        "{keys:?}"
    );

    // Queue order by id is 1, 2, 3, 4 (1 waits for its children): #3 moved before #2 is next.
    let moved = server
        .call("TaskClaim", json!({"taskId": "3", "before": "#2"}))
        .await;
    assert_ne!(moved.is_error, Some(true), "{moved:?}");
    assert_eq!(structured(&moved)["success"], true, "{moved:?}");
    assert!(
        first_text(&moved).starts_with("Updated task #3"),
        "{moved:?}"
    );
    let claimed = server
        .call("TaskClaim", json!({"owner": "ann", "next": true}))
        .await;
    assert_eq!(first_text(&claimed), "Claimed task #3 for ann: second");
    // #2 moved after #4: #4 is next, then #2.
    let moved = server
        .call("TaskClaim", json!({"taskId": "2", "after": "4"}))
        .await;
    assert_eq!(structured(&moved)["success"], true, "{moved:?}");
    let claimed = server
        .call("TaskClaim", json!({"owner": "bob", "next": true}))
        .await;
    assert_eq!(first_text(&claimed), "Claimed task #4 for bob: lone");
    let claimed = server
        .call("TaskClaim", json!({"owner": "cy", "next": true}))
        .await;
    assert_eq!(first_text(&claimed), "Claimed task #2 for cy: first");

    let both = server
        .call(
            "TaskClaim",
            json!({"taskId": "2", "before": "1", "after": "4"}),
        )
        .await;
    assert_eq!(both.is_error, Some(true), "before or after, not both");
    let claim_and_move = server
        .call(
            "TaskClaim",
            json!({"owner": "cy", "taskId": "2", "before": "1"}),
        )
        .await;
    assert_eq!(claim_and_move.is_error, Some(true), "moving never claims");
    let unknown_anchor = server
        .call("TaskClaim", json!({"taskId": "2", "before": "99"}))
        .await;
    let refused = unknown_anchor.is_error == Some(true)
        || unknown_anchor
            .structured_content
            .as_ref()
            .is_some_and(|shape| shape["success"] == false);
    assert!(refused, "no task #99 to move next to: {unknown_anchor:?}");
}

#[tokio::test]
async fn task_claim_takes_the_best_ready_task_and_says_when_none_is() {
    let server = Server::start().await;
    for (subject, metadata) in [
        ("low", json!({"priority": 4})),
        ("urgent", json!({"priority": 0})),
    ] {
        server
            .call(
                "TaskCreate",
                json!({"subject": subject, "description": "", "metadata": metadata}),
            )
            .await;
    }
    let first = server
        .call("TaskClaim", json!({"owner": "ann", "next": true}))
        .await;
    assert_eq!(first_text(&first), "Claimed task #2 for ann: urgent");
    assert_eq!(structured(&first)["task"]["owner"], "ann");
    let busy = server
        .call(
            "TaskClaim",
            json!({"owner": "ann", "next": true, "checkBusy": true}),
        )
        .await;
    assert_eq!(structured(&busy)["reason"], "agent_busy");
    let by_id = server
        .call("TaskClaim", json!({"owner": "bob", "taskId": "1"}))
        .await;
    assert_eq!(first_text(&by_id), "Claimed task #1 for bob");
    let none = server
        .call("TaskClaim", json!({"owner": "cy", "next": true}))
        .await;
    assert_eq!(first_text(&none), "No task is ready.");
    assert_eq!(structured(&none), &json!({"success": false}));
    assert_ne!(none.is_error, Some(true), "nothing ready is not an error");
    let both = server
        .call(
            "TaskClaim",
            json!({"owner": "cy", "next": true, "taskId": "1"}),
        )
        .await;
    assert_eq!(both.is_error, Some(true));
}

#[tokio::test]
async fn foreground_bash_returns_output_exit_code_timeout_and_the_cut_end() {
    let server = Server::start().await;
    let result = server
        .call(
            "Bash",
            json!({"command": "echo hello; echo oops >&2; exit 3", "description": "fg"}),
        )
        .await;
    assert_eq!(first_text(&result), "hello\noops\nExit code 3");
    assert_eq!(structured(&result)["exitCode"], 3);
    assert_eq!(structured(&result)["interrupted"], false);

    let long = server.call("Bash", json!({"command": "seq 1 5000"})).await;
    let text = first_text(&long);
    assert!(text.starts_with("[Truncated. Full output: "), "{text}");
    assert!(text.ends_with("4999\n5000"), "{text}");
    assert!(text.chars().count() <= 1000);

    let slow = server
        .call("Bash", json!({"command": "sleep 30", "timeout": 200}))
        .await;
    assert_eq!(structured(&slow)["interrupted"], true, "{slow:?}");
    assert_eq!(structured(&slow)["stderr"], "Command timed out after 200ms");

    // Foreground runs are tasks of the session (visible to `tasks ps`), but never notify.
    let listed = server.cli_json(&["ps", "--all"]).await;
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    let after = server.call("TaskList", json!({})).await;
    assert_eq!(texts(&after), ["No tasks found"]);
}

#[tokio::test]
async fn background_bash_is_read_with_task_output_blocking_and_not() {
    let server = Server::start().await;
    let gate = server.root.path().join("go");
    let command = format!(
        "echo start; while [ ! -e '{}' ]; do sleep 0.02; done; echo end",
        gate.display()
    );
    let id = server.background(&command, "gated").await;

    // Its snapshot may still say `pending` for an instant after the shell has printed (the
    // supervisor hands out the id first and records `running` just after the spawn).
    let running = server
        .output_until(&id, |s| {
            s["task"]["output"].as_str().unwrap().contains("start")
                && s["task"]["status"] == "running"
        })
        .await;
    assert_eq!(running["retrieval_status"], "not_ready");

    let waited = server
        .call(
            "TaskOutput",
            json!({"task_id": id, "block": true, "timeout": 50}),
        )
        .await;
    assert_eq!(structured(&waited)["retrieval_status"], "timeout");
    assert!(first_text(&waited).starts_with("<retrieval_status>timeout</retrieval_status>"));

    // Another terminal sees the task the agent started.
    let ps = server.cli_json(&["ps"]).await;
    assert_eq!(ps[0]["id"], id.as_str());

    std::fs::write(&gate, "").unwrap();
    let done = server
        .call(
            "TaskOutput",
            json!({"task_id": id, "block": true, "timeout": 30_000}),
        )
        .await;
    let shape = structured(&done);
    assert_eq!(shape["retrieval_status"], "success");
    assert_eq!(shape["task"]["status"], "completed");
    assert_eq!(shape["task"]["exitCode"], 0);
    assert_eq!(shape["task"]["output"], "start\nend\n");
    assert!(first_text(&done).contains("<output>\nstart\nend\n</output>"));
}

#[tokio::test]
async fn task_stop_kills_the_whole_tree_and_the_task_is_gone() {
    let server = Server::start().await;
    let id = server
        .background("sleep 300 & echo child $!; echo shell $$; wait", "sleepers")
        .await;
    let shape = server
        .output_until(&id, |s| {
            s["task"]["output"].as_str().unwrap().contains("shell")
        })
        .await;
    let output = shape["task"]["output"].as_str().unwrap().to_owned();
    let pids: Vec<&str> = output
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(pids.len(), 2, "{output}");
    assert!(pids.iter().all(|pid| !is_gone(pid)));

    let stopped = server.call("TaskStop", json!({"task_id": id})).await;
    let command = "sleep 300 & echo child $!; echo shell $$; wait";
    let expected = json!({
        "message": format!("Successfully stopped task: {id} ({command})"),
        "task_id": id, "task_type": "local_bash", "command": command,
    });
    assert_eq!(first_text(&stopped), expected.to_string());
    assert_eq!(structured(&stopped), &expected);

    support::eventually_async("every process of the tree gone", async || {
        pids.iter().all(|pid| is_gone(pid)).then_some(())
    })
    .await;
    let after = server
        .call("TaskOutput", json!({"task_id": id, "block": false}))
        .await;
    assert_eq!(structured(&after)["task"]["status"], "killed");
    let again = server.call("TaskStop", json!({"shell_id": id})).await;
    assert_eq!(again.is_error, Some(true));
    assert_eq!(
        first_text(&again),
        format!("Task {id} is not running (status: killed)")
    );
}

#[tokio::test]
async fn a_completion_is_pushed_once_and_delivered_once() {
    let server = Server::start().await;
    let gate = server.root.path().join("go");
    let command = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; exit 3",
        gate.display()
    );
    let id = server.background(&command, "bg test").await;
    std::fs::write(&gate, "").unwrap();

    let push = support::eventually_async("a push about the task", async || {
        server.pushes_about(&id).into_iter().next()
    })
    .await;
    assert_eq!(push["type"], "task-notification");
    assert_eq!(push["status"], "failed");
    assert_eq!(push["delivered"], false);
    assert_eq!(
        push["summary"],
        "Background command \"bg test\" failed with exit code 3"
    );

    let first = server.call("TaskList", json!({})).await;
    let envelopes = envelopes_about(&first, &id);
    assert_eq!(envelopes.len(), 1, "{first:?}");
    let envelope = &envelopes[0];
    assert!(envelope.starts_with("[SYSTEM NOTIFICATION - NOT USER INPUT]\n"));
    assert!(envelope.contains("<status>failed</status>\n<summary>Background command \"bg test\" failed with exit code 3</summary>\n</task-notification>"));
    assert_eq!(texts(&first)[0], "No tasks found");

    let second = server.call("TaskList", json!({})).await;
    assert!(envelopes_about(&second, &id).is_empty(), "{second:?}");
    // The claim is the cross-process one: `tasks notifications` has nothing left either.
    assert!(!server.cli_notifications().await.contains(&id));
    assert_eq!(server.pushes_about(&id).len(), 1);
}

#[tokio::test]
async fn a_monitor_event_is_pushed_at_once_by_a_watcher_that_never_looks_at_the_whole_session() {
    // The session's directories exist before the server: its watcher watches them from its
    // first look on, and makes no other whole look for ten minutes.
    let root = tempfile::tempdir().unwrap();
    SessionPaths::new(root.path(), "default")
        .unwrap()
        .create_dirs()
        .unwrap();
    let server = Server::launch(root, &["mcp", "--watch-ms", "600000"], &[]).await;
    // Announced once the watcher's first look is behind it (by that look, or by its watch).
    let first = server.background("true", "first").await;
    support::eventually_async("the first end pushed", async || {
        server.pushes_about(&first).into_iter().next()
    })
    .await;
    let mut gate = Gate::new(server.root.path());
    let command = format!("{}; echo tick; exec sleep 300", gate.wait());
    let started = server
        .call(
            "Monitor",
            json!({"description": "ticks", "timeout_ms": 60_000, "persistent": false, "command": command}),
        )
        .await;
    let id = structured(&started)["taskId"].as_str().unwrap().to_owned();
    gate.open(1);
    // No record changes with an event: only the watch on `events/pending/` finds it.
    let event = support::eventually_async("the event pushed", async || {
        let pushes = server.pushes_about(&id);
        pushes.into_iter().find(|push| push["event"].is_string())
    })
    .await;
    assert_eq!(event["event"], "tick", "{event}");
    assert_eq!(
        event["delivered"], false,
        "announced, delivered in a result"
    );
    let result = server.call("TaskList", json!({})).await;
    let ticks: Vec<String> = envelopes_about(&result, &id)
        .into_iter()
        .filter(|envelope| envelope.contains("<event>tick</event>"))
        .collect();
    assert_eq!(ticks.len(), 1, "{result:?}");
}

#[tokio::test]
async fn outputs_are_resources_with_update_notifications() {
    let server = Server::start().await;
    let gate = server.root.path().join("more");
    let command = format!(
        "echo one; while [ ! -e '{}' ]; do sleep 0.02; done; echo two",
        gate.display()
    );
    let id = server.background(&command, "grows").await;
    let uri = format!("tasks://{id}/output");
    server
        .client()
        .subscribe(SubscribeRequestParams::new(uri.clone()))
        .await
        .unwrap();
    let listed = server.client().list_all_resources().await.unwrap();
    assert!(listed.iter().any(|r| r.uri == uri), "{listed:?}");

    std::fs::write(&gate, "").unwrap();
    support::eventually_async("the whole output and an update", async || {
        let read = server
            .client()
            .read_resource(ReadResourceRequestParams::new(uri.clone()))
            .await
            .unwrap();
        let text = serde_json::to_value(&read.contents[0]).unwrap()["text"].clone();
        let updates = server
            .pushed
            .updated
            .lock()
            .unwrap()
            .iter()
            .filter(|u| **u == uri)
            .count();
        (text == "one\ntwo\n" && updates >= 1).then_some(())
    })
    .await;
    let missing = server
        .client()
        .read_resource(ReadResourceRequestParams::new("tasks://b00000000/output"))
        .await;
    assert!(missing.is_err());
}

#[tokio::test]
async fn a_task_list_round_with_blocked_by() {
    let server = Server::start().await;
    let created = server
        .call(
            "TaskCreate",
            json!({"subject": "Set up schema", "description": "first"}),
        )
        .await;
    assert_eq!(
        first_text(&created),
        "Task #1 created successfully: Set up schema"
    );
    assert_eq!(
        structured(&created),
        &json!({"task": {"id": "1", "subject": "Set up schema"}})
    );
    let second = server
        .call(
            "TaskCreate",
            json!({"subject": "Write API", "description": "second", "activeForm": "Writing API"}),
        )
        .await;
    assert_eq!(
        first_text(&second),
        "Task #2 created successfully: Write API"
    );

    let updated = server
        .call("TaskUpdate", json!({"taskId": "2", "addBlockedBy": ["1"]}))
        .await;
    assert_eq!(first_text(&updated), "Updated task #2 blockedBy");
    assert_eq!(structured(&updated)["success"], true);
    assert_eq!(structured(&updated)["updatedFields"], json!(["blockedBy"]));

    let listed = server.call("TaskList", json!({})).await;
    assert_eq!(
        first_text(&listed),
        "#1 [pending] Set up schema\n#2 [pending] Write API [blocked by #1]"
    );
    assert_eq!(structured(&listed)["tasks"][1]["blockedBy"], json!(["1"]));

    let got = server.call("TaskGet", json!({"taskId": "2"})).await;
    assert_eq!(
        first_text(&got),
        "Task #2: Write API\nStatus: pending\nDescription: second\nBlocked by: #1"
    );
    assert_eq!(structured(&got)["task"]["blockedBy"], json!(["1"]));
    let blocker = server.call("TaskGet", json!({"taskId": "1"})).await;
    assert_eq!(structured(&blocker)["task"]["blocks"], json!(["2"]));

    let done = server
        .call(
            "TaskUpdate",
            json!({"taskId": "1", "status": "completed", "owner": "alice"}),
        )
        .await;
    assert_eq!(
        structured(&done)["statusChange"],
        json!({"from": "pending", "to": "completed"})
    );
    let listed = server.call("TaskList", json!({})).await;
    assert_eq!(
        first_text(&listed),
        "#1 [completed] Set up schema (alice)\n#2 [pending] Write API"
    );

    let missing = server.call("TaskGet", json!({"taskId": "9"})).await;
    assert_eq!(first_text(&missing), "Task not found");
    assert_eq!(structured(&missing), &json!({"task": null}));

    // The CLI works on the same list.
    let from_cli = server.cli_json(&["list", "get", "2"]).await;
    assert!(from_cli.to_string().contains("Write API"), "{from_cli}");
}

/// A hand-driven connection: write lines, read the answer to one id (skipping notifications).
struct Raw {
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// Messages read while waiting for an answer, in order: a notification the server sent
    /// before the answer is still there for [`Raw::next_message`].
    passed: std::collections::VecDeque<Value>,
    child: tokio::process::Child,
    root: PathBuf,
}

impl Raw {
    async fn send(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn answer(&mut self, id: u64) -> Value {
        if let Some(at) = self.passed.iter().position(|m| m["id"] == id) {
            return self.passed.remove(at).unwrap();
        }
        let read = async {
            loop {
                let message = self.read_message().await;
                if message["id"] == id {
                    return message;
                }
                self.passed.push_back(message);
            }
        };
        tokio::time::timeout(DEADLINE, read)
            .await
            .expect("no answer")
    }

    /// The next line the server writes, as JSON (waiting as long as it takes).
    async fn read_message(&mut self) -> Value {
        let line = self
            .lines
            .next_line()
            .await
            .unwrap()
            .expect("server closed stdout");
        serde_json::from_str(&line).expect("stdout carries JSON-RPC only")
    }

    async fn call(&mut self, id: u64, tool: &str, arguments: Value) -> Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        self.send(&request.to_string()).await;
        self.answer(id).await
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            kill(pid as i32);
        }
        kill_session(&SessionPaths::new(&self.root, "default").unwrap());
    }
}

/// A raw-protocol server, not yet spoken to.
fn raw_spawn(root: &Path) -> Raw {
    let mut child = tasks_command(root, &["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    Raw {
        stdin: child.stdin.take().unwrap(),
        lines: BufReader::new(child.stdout.take().unwrap()).lines(),
        passed: std::collections::VecDeque::new(),
        child,
        root: root.to_owned(),
    }
}

/// A raw-protocol server, initialized.
async fn raw_server(root: &Path) -> Raw {
    raw_server_for(root, "raw").await
}

/// A raw-protocol server, initialized by a client that calls itself `client`.
async fn raw_server_for(root: &Path, client: &str) -> Raw {
    let mut raw = raw_spawn(root);
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": client, "version": "1"}}})
        .to_string(),
    )
    .await;
    assert_eq!(raw.answer(1).await["result"]["serverInfo"]["name"], "tasks");
    raw.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;
    raw
}

impl Raw {
    /// The next message the server wrote that no answer took, as JSON.
    async fn next_message(&mut self) -> Value {
        if let Some(message) = self.passed.pop_front() {
            return message;
        }
        tokio::time::timeout(DEADLINE, self.read_message())
            .await
            .expect("no answer")
    }
}

#[tokio::test]
async fn garbage_unknown_tools_and_bad_ids_get_errors_and_serving_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let mut raw = raw_server(root.path()).await;

    raw.send("this is not JSON {").await;
    raw.send(
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"Nope","arguments":{}}}"#,
    )
    .await;
    let unknown = raw.answer(2).await;
    assert_eq!(unknown["error"]["code"], -32602);
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("unknown tool \"Nope\"; this server has: Bash")
    );

    let malformed = raw
        .call(3, "TaskOutput", json!({"task_id": "../../etc/passwd"}))
        .await;
    assert_eq!(malformed["error"]["code"], -32602);
    assert!(
        malformed["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("malformed task id")
    );

    let unknown_id = raw
        .call(4, "TaskStop", json!({"task_id": "b00000000"}))
        .await;
    assert_eq!(unknown_id["result"]["isError"], true);
    assert_eq!(
        unknown_id["result"]["content"][0]["text"],
        "No task found with ID: b00000000"
    );

    let bad_list_id = raw.call(5, "TaskGet", json!({"taskId": "one"})).await;
    assert!(
        bad_list_id["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid task id \"one\"")
    );

    let missing_field = raw
        .call(6, "Bash", json!({"description": "no command"}))
        .await;
    assert_eq!(missing_field["result"]["isError"], true);
    assert!(
        missing_field["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("missing field `command`")
    );

    let out_of_range = raw
        .call(7, "Bash", json!({"command": "true", "timeout": 600_001}))
        .await;
    assert!(
        out_of_range["error"]["message"]
            .as_str()
            .unwrap()
            .contains("timeout must be between 1 and 600000")
    );

    let not_a_socket = raw
        .call(
            9,
            "Monitor",
            json!({"description": "d", "ws": {"url": "http://127.0.0.1:9/"}}),
        )
        .await;
    assert_eq!(not_a_socket["error"]["code"], -32602);
    assert!(
        not_a_socket["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("not a WebSocket URL")
    );

    let ok = raw
        .call(8, "Bash", json!({"command": "echo still serving"}))
        .await;
    assert_eq!(ok["result"]["content"][0]["text"], "still serving");
}

#[tokio::test]
async fn oversized_and_malformed_lines_get_errors_with_their_ids_and_serving_goes_on() {
    let root = tempfile::tempdir().unwrap();
    let mut raw = raw_server(root.path()).await;

    // 20 MB, over the 16 MiB limit, with the id after the huge params.
    let filler = "x".repeat(20_000_000);
    let huge = format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"Bash","arguments":{{"command":"echo {filler}"}}}},"id":41}}"#
    );
    raw.send(&huge).await;
    let answer = raw.answer(41).await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds the limit of 16777216 bytes"),
        "{answer}"
    );

    // Over the limit and not JSON at all: a parse error, no id to give.
    raw.send(&"z".repeat(17_000_000)).await;
    let answer = raw.next_message().await;
    assert_eq!(answer["id"], Value::Null, "{answer}");
    assert_eq!(answer["error"]["code"], -32700, "{answer}");

    // A method that is not a string: the error names the request.
    raw.send(r#"{"jsonrpc":"2.0","id":42,"method":{"not":"a string"}}"#)
        .await;
    let answer = raw.answer(42).await;
    assert_eq!(answer["error"]["code"], -32600, "{answer}");

    // Broken JSON whose id can still be read, and garbage whose id cannot.
    raw.send(r#"{"jsonrpc":"2.0","id":43,"method":"tools/list",,,"#)
        .await;
    assert_eq!(raw.answer(43).await["error"]["code"], -32700);
    raw.send("this is not JSON {").await;
    let answer = raw.next_message().await;
    assert_eq!(
        (answer["id"].clone(), answer["error"]["code"].clone()),
        (Value::Null, json!(-32700)),
        "{answer}"
    );

    // An unknown method is answered with its id.
    raw.send(r#"{"jsonrpc":"2.0","id":44,"method":"no/such/method"}"#)
        .await;
    assert!(raw.answer(44).await["error"]["code"].is_i64());

    let ok = raw
        .call(45, "Bash", json!({"command": "echo still serving"}))
        .await;
    assert_eq!(ok["result"]["content"][0]["text"], "still serving");
}

#[tokio::test]
async fn a_command_longer_than_an_exec_argument_runs() {
    let root = tempfile::tempdir().unwrap();
    let mut raw = raw_server(root.path()).await;
    // Over Linux's 128 KiB limit on one exec argument (the supervisor's 1 MiB request limit
    // bounds how long a command the session layer carries).
    for (id, size) in [(2, 200_000), (3, 400_000)] {
        let command = format!("x='{}'; echo ${{#x}}", "y".repeat(size));
        let answer = raw.call(id, "Bash", json!({ "command": command })).await;
        assert_eq!(
            answer["result"]["content"][0]["text"],
            size.to_string(),
            "{}",
            answer.to_string().chars().take(500).collect::<String>()
        );
    }
}

#[tokio::test]
async fn monitor_events_are_pushed_and_delivered_in_order() {
    let server = Server::start().await;
    let gate = server.root.path().join("emit");
    let command = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; echo tick 1; echo tick 2",
        gate.display()
    );
    let started = server
        .call(
            "Monitor",
            json!({"description": "ticks", "timeout_ms": 20_000, "persistent": false, "command": command}),
        )
        .await;
    let id = structured(&started)["taskId"].as_str().unwrap().to_owned();
    assert_eq!(structured(&started)["timeoutMs"], 20_000);
    assert!(first_text(&started).starts_with(&format!("Monitor started with ID: {id}.")));
    std::fs::write(&gate, "").unwrap();

    support::eventually_async("two monitor events pushed", async || {
        let pushes = server.pushes_about(&id);
        (pushes.iter().filter(|l| l["event"].is_string()).count() >= 2).then_some(())
    })
    .await;
    let result = server.call("TaskList", json!({})).await;
    let envelopes = envelopes_about(&result, &id);
    assert!(envelopes.len() >= 2, "{result:?}");
    let ticks: Vec<&String> = envelopes.iter().filter(|e| e.contains("<event>")).collect();
    assert_eq!(ticks.len(), 2, "{envelopes:?}");
    assert!(ticks[0].contains("<event>tick 1</event>"), "{}", ticks[0]);
    assert!(ticks[1].contains("<event>tick 2</event>"), "{}", ticks[1]);
}

/// The task ids of the JSON lines `tasks notifications --json` printed.
fn delivered_ids(stdout: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| {
            let notice: Value = serde_json::from_str(line).unwrap();
            notice["taskId"].as_str().unwrap().to_owned()
        })
        .collect()
}

/// The task ids of every envelope appended to a result.
fn envelope_ids(result: &CallToolResult) -> Vec<String> {
    texts(result)
        .iter()
        .filter_map(|t| t.split_once("<task-id>")?.1.split_once("</task-id>"))
        .map(|(id, _)| id.to_owned())
        .collect()
}

#[tokio::test]
async fn a_foreground_bash_is_never_delivered_even_to_a_reader_polling_while_it_runs() {
    // The server looks at its foreground task every 300 ms: a reader polling meanwhile has all
    // that time to find it ended before the call returns.
    let server = Server::start_with_env(&[("TASKS_POLL_MS", "300")]).await;
    let stop = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicUsize::new(0));
    let delivered = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let root = server.root.path().to_owned();
        let (stop, polls) = (Arc::clone(&stop), Arc::clone(&polls));
        let delivered = Arc::clone(&delivered);
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let output = tasks_command(&root, &["notifications", "--json"])
                    .output()
                    .await
                    .unwrap();
                assert!(output.status.success(), "{output:?}");
                delivered
                    .lock()
                    .unwrap()
                    .extend(delivered_ids(&output.stdout));
                polls.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    // A background task the reader must get (so it does read), once the foreground runs are over.
    let gate = server.root.path().join("go");
    let wait_for_gate = format!("while [ ! -e '{}' ]; do sleep 0.02; done", gate.display());
    let background = server.background(&wait_for_gate, "bg").await;

    let mut in_results = Vec::new();
    for n in 1..=3 {
        let before = polls.load(Ordering::SeqCst);
        let result = server
            .call(
                "Bash",
                json!({"command": format!("sleep 0.1; echo fg {n}"), "description": "fg"}),
            )
            .await;
        assert_eq!(first_text(&result), format!("fg {n}"), "{result:?}");
        in_results.extend(envelope_ids(&result));
        assert!(
            polls.load(Ordering::SeqCst) > before,
            "the reader polled while fg {n} ran"
        );
    }
    std::fs::write(&gate, "").unwrap();
    support::eventually_async("the reader to get the background task", async || {
        delivered
            .lock()
            .unwrap()
            .contains(&background)
            .then_some(())
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    reader.await.unwrap();
    let mut delivered = delivered.lock().unwrap().clone();
    delivered.extend(server.cli_notifications().await);
    delivered.extend(in_results);
    delivered.extend(envelope_ids(&server.call("TaskList", json!({})).await));

    let tasks = server.cli_json(&["ps", "--all"]).await;
    let foreground: Vec<&str> = tasks
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .filter(|id| *id != background)
        .collect();
    assert_eq!(foreground.len(), 3, "{tasks}");
    assert_eq!(
        delivered,
        std::slice::from_ref(&background),
        "only the background task notifies"
    );
    let log = std::fs::read_to_string(server.session().notifications_log()).unwrap();
    assert!(
        foreground.iter().all(|id| !log.contains(id)),
        "{foreground:?} in {log}"
    );
}

/// A WebSocket server on 127.0.0.1 for one client: it accepts the first subprotocol offered
/// and, once told to go, sends `frames` as text messages and closes. Resolves to the
/// `Sec-WebSocket-Protocol` header the client offered.
async fn websocket_server(
    frames: Vec<String>,
) -> (
    String,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Option<String>>,
) {
    let (go, told) = tokio::sync::oneshot::channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/events", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let mut offered = None;
        #[allow(clippy::result_large_err)] // the handshake callback's type is tungstenite's
        let accept = |request: &Request, mut response: Response| {
            offered = request
                .headers()
                .get(SEC_WEBSOCKET_PROTOCOL)
                .map(|v| v.to_str().unwrap().to_owned());
            if let Some(first) = offered.as_deref().and_then(|o| o.split(',').next()) {
                let chosen = first.trim().parse().unwrap();
                response
                    .headers_mut()
                    .insert(SEC_WEBSOCKET_PROTOCOL, chosen);
            }
            Ok(response)
        };
        let mut socket = tokio_tungstenite::accept_hdr_async(stream, accept)
            .await
            .unwrap();
        told.await.unwrap();
        for frame in frames {
            socket.send(Message::text(frame)).await.unwrap();
        }
        socket.close(None).await.unwrap();
        offered
    });
    (url, go, server)
}

/// The `<event>` of an envelope.
fn event_of(envelope: &str) -> Option<String> {
    let (_, rest) = envelope.split_once("<event>")?;
    Some(rest.split_once("</event>")?.0.to_owned())
}

#[tokio::test]
async fn a_websocket_monitor_delivers_each_message_once_and_in_order() {
    let server = Server::start().await;
    let frames: Vec<String> = (1..=20).map(|i| format!("tick {i}")).collect();
    let (url, go, socket) = websocket_server(frames.clone()).await;
    let started = server
        .call(
            "Monitor",
            json!({"description": "socket ticks", "ws": {"url": url, "protocols": ["events.v1", "events.v0"]}}),
        )
        .await;
    assert_ne!(started.is_error, Some(true), "{started:?}");
    let id = structured(&started)["taskId"].as_str().unwrap().to_owned();
    assert!(first_text(&started).contains("Each message the WebSocket sends"));
    go.send(()).unwrap();
    let offered = socket.await.unwrap();
    assert_eq!(offered.as_deref(), Some("events.v1, events.v0"));

    // Pushed: every message once, and the monitor's end. The rmcp client runs each notification
    // handler in a task of its own, so the order in which the recorder sees pushes is not the
    // order the server sent them in; order is checked on the tool result below, which is one
    // message.
    let pushes = support::eventually_async("everything pushed", async || {
        let pushes = server.pushes_about(&id);
        let done = pushes.iter().any(|p| p["status"].is_string()) && pushes.len() > frames.len();
        done.then_some(pushes)
    })
    .await;
    let mut pushed: Vec<&str> = pushes.iter().filter_map(|p| p["event"].as_str()).collect();
    pushed.sort_unstable();
    let mut expected: Vec<&str> = frames.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(pushed, expected, "each message pushed exactly once");
    assert_eq!(pushes.len(), frames.len() + 1, "{pushes:?}");

    // Delivered in the next tool result: each message once, in order; nothing left after.
    let result = server.call("TaskList", json!({})).await;
    let envelopes = envelopes_about(&result, &id);
    let events: Vec<String> = envelopes.iter().filter_map(|e| event_of(e)).collect();
    assert_eq!(events, frames);
    assert_eq!(envelopes.len(), frames.len() + 1, "{envelopes:?}");
    assert!(
        envelopes
            .last()
            .unwrap()
            .contains("<status>completed</status>")
    );
    assert!(envelopes_about(&server.call("TaskList", json!({})).await, &id).is_empty());
    assert_eq!(server.cli_notifications().await, Vec::<String>::new());
}

#[tokio::test]
async fn a_websocket_monitor_started_by_the_cli_reaches_the_agent() {
    let server = Server::start().await;
    let (url, go, socket) = websocket_server(vec!["from the cli".into()]).await;
    let started = server
        .cli_json(&["monitor", "--ws", &url, "--ws-protocol", "events.v1"])
        .await;
    let id = started["id"].as_str().unwrap().to_owned();
    go.send(()).unwrap();
    assert_eq!(socket.await.unwrap().as_deref(), Some("events.v1"));

    let mut envelopes: Vec<String> = Vec::new();
    support::eventually_async("the monitor's end in TaskList", async || {
        envelopes.extend(envelopes_about(
            &server.call("TaskList", json!({})).await,
            &id,
        ));
        envelopes
            .iter()
            .any(|e| e.contains("<status>"))
            .then_some(())
    })
    .await;
    let events: Vec<String> = envelopes.iter().filter_map(|e| event_of(e)).collect();
    assert_eq!(events, ["from the cli"]);
    assert!(
        envelopes[0].contains(&format!("Monitor &quot;{url}&quot; event"))
            || envelopes[0].contains(&format!("Monitor \"{url}\" event")),
        "the URL is the default description: {}",
        envelopes[0]
    );
}

#[tokio::test]
async fn a_foreground_bash_whose_supervisor_dies_is_not_delivered_either() {
    let server = Arc::new(Server::start().await);
    let call = {
        let server = Arc::clone(&server);
        tokio::spawn(async move {
            server
                .call("Bash", json!({"command": "sleep 60", "timeout": 120_000}))
                .await
        })
    };
    let supervisor = support::eventually_async("the foreground task running", async || {
        let running = server.cli_json(&["ps"]).await;
        let pid = std::fs::read_to_string(server.session().lock()).unwrap_or_default();
        let one = running.as_array().is_some_and(|tasks| tasks.len() == 1);
        pid.trim().parse().ok().filter(|_| one)
    })
    .await;
    kill(supervisor);

    // The next look marks the orphan failed; its completion is still never delivered.
    let result = call.await.unwrap();
    assert!(envelope_ids(&result).is_empty(), "{result:?}");
    let stderr = structured(&result)["stderr"].as_str().unwrap();
    assert!(stderr.contains("supervisor"), "{result:?}");
    let tasks = server.cli_json(&["ps", "--all"]).await;
    assert_eq!(tasks[0]["status"], "failed", "{tasks}");
    assert_eq!(server.cli_notifications().await, Vec::<String>::new());
    let after = server.call("TaskList", json!({})).await;
    assert!(envelope_ids(&after).is_empty(), "{after:?}");
}

/// `SendMessage` reaches a teammate (spawned with `tasks team spawn`) as well as agents: the
/// teammate's agent CLI gets the message as its next turn once it is idle.
#[tokio::test]
async fn send_message_reaches_a_teammate_once_it_is_idle() {
    let server = Server::start().await;
    let fake = Path::new(env!("CARGO_BIN_EXE_tasks")).with_file_name("fake-agent");
    if !fake.exists() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let built = std::process::Command::new(cargo)
            .args(["build", "-p", "task-agent", "--bin", "fake-agent"])
            .status()
            .unwrap();
        assert!(built.success());
    }
    let script = server.root.path().join("mate.jsonl");
    let steps = [
        json!({"read_user": true}),
        json!({"result": "ready"}),
        json!({"teammate": true}),
    ];
    let text: String = steps.iter().map(|s| format!("{s}\n")).collect();
    std::fs::write(&script, text).unwrap();
    let (fake, script) = (fake.display().to_string(), script.display().to_string());
    let args = [
        "--json",
        "team",
        "spawn",
        "mate@crew",
        "--",
        &fake,
        "--script",
        &script,
    ];
    let spawned = tasks_command(server.root.path(), &args)
        .output()
        .await
        .unwrap();
    assert!(spawned.status.success(), "{spawned:?}");
    let spawned: Value = serde_json::from_slice(&spawned.stdout).unwrap();
    let transcript = PathBuf::from(spawned["outputFile"].as_str().unwrap());
    let result = server
        .call(
            "SendMessage",
            json!({"to": "mate", "message": "via mcp", "summary": "hi"}),
        )
        .await;
    assert!(
        first_text(&result).contains("Message sent to mate's inbox"),
        "{result:?}"
    );
    support::eventually_async("the teammate to get the message", async || {
        let text = std::fs::read_to_string(&transcript).unwrap_or_default();
        text.contains("via mcp").then_some(())
    })
    .await;
    let id = spawned["id"].as_str().unwrap();
    let killed = tasks_command(server.root.path(), &["kill", id])
        .output()
        .await
        .unwrap();
    assert!(killed.status.success(), "{killed:?}");
}

/// The `_meta` every 2026-07-28 request carries: its version and who the client is.
fn modern_meta(client: &str) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientInfo": {"name": client, "version": "1"},
           "io.modelcontextprotocol/clientCapabilities": {}})
}

impl Raw {
    /// The next message with `method`, skipping others.
    async fn next_with_method(&mut self, method: &str) -> Value {
        loop {
            let message = self.next_message().await;
            if message["method"] == method {
                return message;
            }
        }
    }
}

#[tokio::test]
async fn a_2026_07_28_client_gets_resource_changes_on_its_subscription_and_ends_in_results() {
    let root = tempfile::tempdir().unwrap();
    let mut raw = raw_spawn(root.path());
    let meta = modern_meta("claude-code");
    raw.send(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                "params": {"_meta": meta}})
        .to_string(),
    )
    .await;
    let discovered = raw.answer(1).await;
    let versions = &discovered["result"]["supportedVersions"];
    for version in ["2026-07-28", "2025-11-25", "2025-06-18", "2024-11-05"] {
        assert!(
            versions.as_array().unwrap().contains(&json!(version)),
            "{version} offered: {discovered}"
        );
    }

    raw.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
                "params": {"_meta": meta, "notifications": {"resourcesListChanged": true}}})
        .to_string(),
    )
    .await;
    let acknowledged = raw
        .next_with_method("notifications/subscriptions/acknowledged")
        .await;
    assert_eq!(
        acknowledged["params"]["notifications"]["resourcesListChanged"], true,
        "{acknowledged}"
    );

    let start = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "_meta": meta, "name": "Bash",
        "arguments": {"command": "sleep 0.3; exit 3", "run_in_background": true}}});
    raw.send(&start.to_string()).await;
    let started = raw.answer(3).await;
    let id = started["result"]["structuredContent"]["backgroundTaskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a background start: {started}"))
        .to_owned();
    // The new task is announced on the subscription, tagged with its id.
    let changed = raw
        .next_with_method("notifications/resources/list_changed")
        .await;
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 2,
        "{changed}"
    );

    // Its end rides in the next result, in the part Claude Code shows its model.
    let mut request = 4;
    let envelope = loop {
        let wait = json!({"jsonrpc": "2.0", "id": request, "method": "tools/call", "params": {
            "_meta": meta, "name": "Bash", "arguments": {"command": "sleep 0.1"}}});
        raw.send(&wait.to_string()).await;
        let answer = raw.answer(request).await;
        let carried = answer["result"]["structuredContent"]["notifications"].clone();
        if let Some(texts) = carried.as_array().filter(|t| !t.is_empty()) {
            break texts[0].as_str().unwrap().to_owned();
        }
        assert!(request < 200, "the end never reached a result");
        request += 1;
    };
    assert!(
        envelope.contains(&format!("<task-id>{id}</task-id>")),
        "{envelope}"
    );
    assert!(envelope.contains("<status>failed</status>"), "{envelope}");
}

/// Where a result carried the envelope of `id`: in how many text blocks, and whether in
/// `structuredContent.notifications`.
fn carried(answer: &Value, id: &str) -> (usize, bool) {
    let envelope = format!("<task-id>{id}</task-id>");
    let result = &answer["result"];
    let texts = result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|block| {
            block["text"]
                .as_str()
                .is_some_and(|t| t.contains(&envelope))
        })
        .count();
    let structured = result["structuredContent"]["notifications"]
        .as_array()
        .is_some_and(|n| {
            n.iter()
                .any(|t| t.as_str().is_some_and(|t| t.contains(&envelope)))
        });
    (texts, structured)
}

/// Starts a background command that fails with 3 once the start's result is in, and waits,
/// outside the protocol, for it to end: its notification is then pending.
async fn a_pending_end(raw: &mut Raw, request: u64) -> String {
    let go = raw.root.join("go");
    let command = format!(
        "while [ ! -e '{}' ]; do sleep 0.01; done; exit 3",
        go.display()
    );
    let started = raw
        .call(
            request,
            "Bash",
            json!({"command": command, "run_in_background": true}),
        )
        .await;
    let id = started["result"]["structuredContent"]["backgroundTaskId"]
        .as_str()
        .unwrap()
        .to_owned();
    std::fs::write(&go, "").unwrap();
    let root = raw.root.clone();
    let ended = || async {
        let ps = tasks_command(&root, &["ps", "--all", "--json"])
            .output()
            .await
            .unwrap();
        let tasks: Value = serde_json::from_slice(&ps.stdout).unwrap_or(Value::Null);
        tasks
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["id"] == id.as_str() && t["status"] == "failed")
            .then_some(())
    };
    support::eventually_async("the background end", ended).await;
    id
}

#[tokio::test]
async fn each_client_gets_a_pending_end_once_in_the_part_it_shows_its_model() {
    // (client, in text blocks, in structuredContent) for a successful result with a structure.
    let clients = [
        ("claude-code", 0, true),
        ("codex-mcp-client", 0, true),
        ("gemini-cli-mcp-client", 1, false),
        ("a-client-not-known", 1, true),
    ];
    for (client, texts, structured) in clients {
        let root = tempfile::tempdir().unwrap();
        let mut raw = raw_server_for(root.path(), client).await;
        let id = a_pending_end(&mut raw, 2).await;
        let next = raw.call(3, "Bash", json!({"command": "true"})).await;
        assert_eq!(carried(&next, &id), (texts, structured), "{client}: {next}");
        let after = raw.call(4, "Bash", json!({"command": "true"})).await;
        assert_eq!(
            carried(&after, &id),
            (0, false),
            "{client}: delivered once: {after}"
        );
    }
}

#[tokio::test]
async fn a_failed_result_shown_whole_carries_the_end_once() {
    // The Gemini CLI shows a failed result whole (text blocks and structure as JSON); Claude
    // Code shows a failure's text blocks: both get the envelope in text, once.
    for client in ["gemini-cli-mcp-client", "claude-code"] {
        let root = tempfile::tempdir().unwrap();
        let mut raw = raw_server_for(root.path(), client).await;
        let id = a_pending_end(&mut raw, 2).await;
        let failed = raw.call(3, "TaskStop", json!({"task_id": id})).await;
        assert_eq!(failed["result"]["isError"], true, "{failed}");
        assert_eq!(carried(&failed, &id), (1, false), "{client}: {failed}");
    }
}
