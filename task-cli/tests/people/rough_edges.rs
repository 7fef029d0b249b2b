//! The rough edges of issue #18 (7), each as a person meets it.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

use serde_json::{Value, json};

use crate::sandbox::Sandbox;
use crate::support::{DEADLINE, sigkill};

#[test]
fn list_create_takes_the_subject_as_an_argument_and_quiet_prints_only_the_id() {
    let sandbox = Sandbox::new();
    let text = sandbox.ok(&["list", "create", "Write API"]);
    assert_eq!(text, "Task #1 created successfully: Write API\n");
    assert_eq!(sandbox.ok(&["list", "create", "-q", "Test API"]), "2\n");
    assert_eq!(
        sandbox.ok(&["list", "create", "--subject", "Ship", "--quiet"]),
        "3\n"
    );
    let missing = sandbox.run(&["list", "create"]);
    assert_eq!(missing.status.code(), Some(2), "a subject is required");
}

#[test]
fn list_get_shows_the_owner_in_text_and_json() {
    let sandbox = Sandbox::new();
    sandbox.ok(&["list", "create", "Write API"]);
    sandbox.ok(&["list", "update", "1", "--owner", "alice"]);
    let text = sandbox.ok(&["list", "get", "1"]);
    assert!(text.contains("Owner: alice"), "{text}");
    let value = sandbox.json(&["list", "get", "#1"]);
    assert_eq!(value["task"]["owner"], "alice");
    assert_eq!(value["task"]["subject"], "Write API");
}

#[test]
fn list_ready_says_how_many_tasks_it_unblocks_and_when_nothing_is_ready() {
    let sandbox = Sandbox::new();
    for subject in ["Design", "Build", "Test"] {
        sandbox.ok(&["list", "create", subject]);
    }
    sandbox.ok(&["list", "update", "2", "--add-blocked-by", "1"]);
    sandbox.ok(&["list", "update", "3", "--add-blocked-by", "2"]);
    let ready = sandbox.ok(&["list", "ready"]);
    assert!(
        ready.contains("#1 ready: Design (unblocks 2 tasks)"),
        "{ready}"
    );
    sandbox.ok(&["list", "update", "1", "--owner", "bob"]);
    let none = sandbox.ok(&["list", "ready"]);
    assert!(none.starts_with("No task is ready.\n"), "{none}");
}

#[test]
fn list_doctor_reports_in_sentences_and_not_its_own_lock() {
    let sandbox = Sandbox::new();
    sandbox.ok(&["list", "create", "Design"]);
    assert_eq!(sandbox.ok(&["list", "doctor"]), "No problems found.\n");
    // A reference to a task that does not exist, as a crashed editor could leave it.
    let file = sandbox.root().join("lists/default/1.json");
    let mut task: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    task["blocks"] = json!(["9"]);
    std::fs::write(&file, serde_json::to_vec_pretty(&task).unwrap()).unwrap();

    let report = sandbox.run(&["list", "doctor"]);
    let text = String::from_utf8(report.stdout).unwrap();
    assert!(
        text.contains("#1 refers to #9, which does not exist"),
        "{text}"
    );
    assert!(text.contains("--fix"), "{text}");
    let value = sandbox.json(&["list", "doctor", "--fix"]);
    let kinds: Vec<&str> = value["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["dangling_reference"], "{value}");
    assert_eq!(
        sandbox.ok(&["list", "doctor", "--fix"]),
        "No problems found.\n"
    );
}

#[test]
fn a_malformed_list_task_id_is_explained_as_a_list_id() {
    let sandbox = Sandbox::new();
    let output = sandbox.run(&["list", "get", "b12345678"]);
    assert_eq!(output.status.code(), Some(65));
    let message = String::from_utf8(output.stderr).unwrap();
    assert!(message.contains("numbered 1, 2, 3"), "{message}");
    assert!(!message.contains("lowercase letter"), "{message}");
}

#[test]
fn list_watch_prints_the_current_state_first() {
    let sandbox = Sandbox::new();
    sandbox.ok(&["list", "create", "Already here"]);
    let mut watcher = sandbox
        .command(&["list", "watch"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let received = crate::sandbox::stdout_lines(&mut watcher);
    let first = received.recv_timeout(DEADLINE);
    sigkill(watcher.id() as i32);
    watcher.wait().unwrap();
    assert_eq!(first.unwrap(), "#1 [pending] Already here");
}

#[test]
fn list_ls_prints_every_task() {
    let sandbox = Sandbox::new();
    sandbox.ok(&["list", "create", "One"]);
    sandbox.ok(&["list", "create", "Two"]);
    assert_eq!(
        sandbox.ok(&["list", "ls"]),
        "#1 [pending] One\n#2 [pending] Two\n"
    );
}

#[test]
fn list_ls_shows_each_tasks_priority_and_labels() {
    let sandbox = Sandbox::new();
    sandbox.ok(&[
        "list",
        "create",
        "Urgent",
        "--priority",
        "0",
        "--label",
        "auth",
    ]);
    sandbox.ok(&["list", "create", "Plain"]);
    sandbox.ok(&["list", "create", "Tagged", "--label", "ui", "--label", "v2"]);
    assert_eq!(
        sandbox.ok(&["list", "ls"]),
        "#1 [pending] Urgent · P0 · labels: auth\n#2 [pending] Plain\n\
         #3 [pending] Tagged · labels: ui, v2\n"
    );
    let json: serde_json::Value =
        serde_json::from_str(&sandbox.ok(&["list", "ls", "--json"])).unwrap();
    let tasks = json["tasks"].as_array().unwrap();
    let fields: Vec<(u64, Vec<&str>)> = tasks
        .iter()
        .map(|t| {
            let labels = t["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap());
            (t["priority"].as_u64().unwrap(), labels.collect())
        })
        .collect();
    assert_eq!(
        fields,
        [(0, vec!["auth"]), (2, vec![]), (2, vec!["ui", "v2"])]
    );
}

#[test]
fn completions_offer_no_hidden_command_and_complete_task_ids_and_list_names() {
    let sandbox = Sandbox::new();
    for shell in ["bash", "zsh", "fish"] {
        let script = sandbox.ok(&["completions", shell]);
        assert!(
            !script.contains("__supervise"),
            "{shell} offers __supervise"
        );
        assert!(
            !script.contains("__complete\""),
            "{shell} offers __complete"
        );
    }
    let id = sandbox.ok(&["run", "--", "true"]).trim().to_owned();
    sandbox.ok(&["list", "--list", "backlog", "create", "One"]);
    let ids = sandbox.complete_bash("tasks kill ''", 2);
    assert!(ids.split_whitespace().any(|w| w == id), "{ids}");
    let lists = sandbox.complete_bash("tasks list --list ''", 3);
    assert_eq!(lists.trim(), "backlog");
}

/// Sends one JSON-RPC message to an MCP server's stdin.
fn send(stdin: &mut impl Write, message: &Value) {
    writeln!(stdin, "{message}").unwrap();
    stdin.flush().unwrap();
}

#[test]
fn the_mcp_server_and_the_cli_use_the_same_list_of_a_session() {
    let sandbox = Sandbox::new();
    let mut server = sandbox
        .command(&["mcp"])
        .env("TASKS_SESSION", "my-project")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut replies = BufReader::new(server.stdout.take().unwrap()).lines();
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "people-test", "version": "0"}}}),
    );
    replies.next().unwrap().unwrap();
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    send(
        &mut stdin,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "TaskCreate",
            "arguments": {"subject": "From the agent", "description": "d"}}}),
    );
    let reply: Value = serde_json::from_str(&replies.next().unwrap().unwrap()).unwrap();
    assert_eq!(reply["id"], 2, "{reply}");
    drop(stdin);
    let status = server.wait().unwrap();
    assert!(status.success());

    let listed = sandbox
        .command(&["list", "ls"])
        .env("TASKS_SESSION", "my-project")
        .output()
        .unwrap();
    let text = String::from_utf8(listed.stdout).unwrap();
    assert_eq!(text, "#1 [pending] From the agent\n");
}
