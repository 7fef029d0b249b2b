//! The supervisor's wire as its own contract (task-protocol): the checked-in JSON Schema is
//! the one the code builds, a client of another protocol version is told so and nothing is
//! done, and a client written from the schema alone (Python) runs a task end to end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use support::root::TasksRoot;
use task_protocol::wire::{OLDEST_SERVED_VERSION, PROTOCOL_VERSION};

const DEADLINE: Duration = Duration::from_secs(30);

fn schema_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../task-protocol/wire.schema.json")
}

fn socket_of(root: &TasksRoot) -> PathBuf {
    root.root().join("default").join("supervisor.sock")
}

/// One request line to the supervisor at `socket`, and its answer.
fn exchange(socket: &Path, line: &str) -> Value {
    let mut stream = UnixStream::connect(socket).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    stream.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap()
}

fn far_deadline() -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    u64::try_from(now.as_millis()).unwrap() + 30_000
}

/// A root whose supervisor is running (started by a first task, which has ended).
fn with_supervisor() -> (TasksRoot, String) {
    let root = TasksRoot::new().env("TASKS_IDLE_EXIT_MS", "30000");
    let first = root.ok(&["run", "--", "true"]).trim().to_owned();
    root.ok(&["wait", &first]);
    assert!(socket_of(&root).exists(), "no supervisor socket");
    (root, first)
}

#[test]
fn the_checked_in_wire_schema_is_the_one_the_code_builds() {
    let built = serde_json::to_string_pretty(&task_protocol::schema::wire()).unwrap() + "\n";
    if std::env::var_os("TASKS_UPDATE_SCHEMA").is_some() {
        std::fs::write(schema_file(), &built).unwrap();
    }
    let kept = std::fs::read_to_string(schema_file()).unwrap_or_default();
    assert!(
        kept == built,
        "task-protocol/wire.schema.json is not current: run `TASKS_UPDATE_SCHEMA=1 cargo test -p task-cli --test protocol` and commit it"
    );
    let schema: Value = serde_json::from_str(&kept).unwrap();
    assert_eq!(schema["x-protocol-version"], PROTOCOL_VERSION);
    for name in ["Request", "Response", "ShellStart", "TaskId", "Caller"] {
        assert!(schema["$defs"][name].is_object(), "{name} missing");
    }
}

#[test]
fn a_client_of_another_protocol_version_is_told_both_versions_and_nothing_is_done() {
    let (root, first) = with_supervisor();
    let socket = socket_of(&root);
    let start = |version: Option<u32>| {
        let mut request = json!({
            "deadlineMs": far_deadline(),
            "op": {
                "op": "start",
                "kind": "shell",
                "caller": {"cwd": "/", "env": [], "background": true},
                "request": {"command": "true", "description": "never"},
            },
        });
        if let Some(version) = version {
            request["version"] = json!(version);
        }
        request.to_string()
    };
    let told = |client: u32| {
        json!({
            "result": "unsupported",
            "client": client,
            "supervisor": PROTOCOL_VERSION,
            "oldest": OLDEST_SERVED_VERSION,
        })
    };
    let newer = PROTOCOL_VERSION + 1;
    assert_eq!(exchange(&socket, &start(Some(newer))), told(newer));
    // A client from before versions sends none.
    assert_eq!(exchange(&socket, &start(None)), told(0));
    // A newer client's new operation: still its version, not "bad request".
    let teleport =
        json!({"version": newer, "deadlineMs": far_deadline(), "op": {"op": "teleport"}});
    assert_eq!(exchange(&socket, &teleport.to_string()), told(newer));
    // This build's version is served.
    let hello = exchange(
        &socket,
        &json!({"version": PROTOCOL_VERSION, "deadlineMs": far_deadline(), "op": {"op": "hello"}})
            .to_string(),
    );
    assert_eq!(hello["result"], "hello");
    assert_eq!(hello["version"], PROTOCOL_VERSION);
    // Nothing was started by the refused starts.
    let listed = root.json(&["ps", "--all"]);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [first.as_str()], "{listed}");
}

#[test]
fn the_cli_names_both_versions_when_its_supervisor_speaks_another() {
    let root = TasksRoot::new();
    let session = root.root().join("default");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::set_permissions(
        &session,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    // A supervisor of a later build, as far as this client can tell: it answers every request
    // with the refusal a supervisor of version PROTOCOL_VERSION + 1 gives.
    let listener = UnixListener::bind(session.join("supervisor.sock")).unwrap();
    let newer = PROTOCOL_VERSION + 1;
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&stream).read_line(&mut line).unwrap();
        let answer = json!({"result": "unsupported", "client": PROTOCOL_VERSION, "supervisor": newer, "oldest": newer});
        (&stream)
            .write_all(format!("{answer}\n").as_bytes())
            .unwrap();
        serde_json::from_str::<Value>(&line).unwrap()
    });
    let out = root.run(&["run", "--", "true"]);
    let sent = server.join().unwrap();
    assert_eq!(sent["version"], PROTOCOL_VERSION, "{sent}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!(
            "this client speaks protocol version {PROTOCOL_VERSION}"
        )) && stderr.contains(&format!("running supervisor version {newer}"))
            && stderr.contains("nothing was done"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_python_client_written_from_the_schema_alone_runs_a_task_and_takes_its_notification_once() {
    let Some(python) = std::env::var_os("TASKS_MCP_PYTHON").filter(|p| !p.is_empty()) else {
        support::skip(
            "TASKS_MCP_PYTHON is not set (.ci/python-mcp.sh makes a python with jsonschema)",
        );
        return;
    };
    let (root, _) = with_supervisor();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/wire_client.py");
    let mut command = Command::new(python);
    command.arg(script).arg(socket_of(&root)).arg(schema_file());
    root.environment(&mut command);
    let out = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the python client failed: {stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["version"], PROTOCOL_VERSION);
    assert_eq!(seen["output"], "one\ntwo\n");
    let notifications = seen["notifications"].as_array().unwrap();
    assert_eq!(notifications.len(), 1, "{seen}");
    let envelope = notifications[0].as_str().unwrap();
    let task = seen["task"].as_str().unwrap();
    assert!(
        envelope.contains(&format!("<task-id>{task}</task-id>"))
            && envelope.contains("<status>failed</status>")
            && envelope.contains("exit code 3"),
        "{envelope}"
    );
    assert_eq!(seen["unknown"]["result"], "error");
    assert_eq!(seen["unknown"]["kind"], "unknown_task");
    // Taken over the wire is delivered: the CLI has nothing more to say of it.
    let listed = root.ok(&["notifications"]);
    assert!(!listed.contains(task), "{listed}");
}
