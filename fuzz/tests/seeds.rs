//! Writes the generated part of the seed corpus: state files and protocol lines as the
//! workspace's own code writes them (records of every task type, events, requests and answers,
//! start records, configs, task-list directories, sidecars, API bodies, MCP lines). The rest of
//! the corpus is copied from the fixtures (README.md says which).
//!
//! Run it after a change to a format: `cargo test -p fuzz --test seeds -- --ignored`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::json;
use task_core::{
    AgentProgress, AgentState, Caller, EndReason, MessageOutcome, MessageReply, MessageUsage,
    Notification, Priority, RemoteState, ShellKind, ShellProcess, ShellState, TaskId, TaskKind,
    TaskState, TaskStatus, TeammateState, ToolActivity, WorkflowState,
};
use task_session::notice::Notice;
use task_session::protocol::{
    ErrorKind, InputRefusal, KillReport, KillResult, Op, Request, Response, Start,
};
use task_session::record::TaskRecord;
use task_session::restart::StartRecord;

fn corpus(target: &str) -> PathBuf {
    let dir = fuzz::smoke::crate_dir().join("corpus").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn put(target: &str, name: &str, bytes: impl AsRef<[u8]>) {
    std::fs::write(corpus(target).join(name), bytes).unwrap();
}

fn pretty(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec_pretty(value).unwrap()
}

fn line(value: &impl Serialize) -> Vec<u8> {
    serde_json::to_vec(value).unwrap()
}

fn state(id: &str, kind: TaskKind) -> TaskState {
    let id = TaskId::parse(id).unwrap();
    let mut state =
        TaskState::new(id, "build the thing", format!("/s/tasks/{id}.output"), kind).unwrap();
    state.base.start_time = 1_764_000_000_000;
    state
}

fn ended(mut state: TaskState, status: TaskStatus, reason: EndReason) -> TaskState {
    state.base.status = status;
    state.base.end_time = Some(state.base.start_time + 1_234);
    state.base.end_reason = Some(reason);
    state
}

fn record_with_notice(state: TaskState, summary: &str) -> TaskRecord {
    let mut record = TaskRecord::new(state);
    record.supervisor_pid = 4242;
    let status = record.status().terminal();
    let notification = Notification::for_task(&record.task, status, summary);
    record.notification = Some(Notice::completion(record.task.base.end_time, notification));
    record
}

fn records() -> Vec<(&'static str, TaskRecord)> {
    let shell = ShellState {
        command: "make -j8 && ./run-tests --all".into(),
        is_backgrounded: true,
        kind: ShellKind::Shell,
        exit_code: None,
        process: Some(ShellProcess {
            pgid: 31337,
            leader_started: Some(987_654),
            owner: None,
        }),
        batch: None,
    };
    let running = {
        let mut state = state("b12345678", TaskKind::Shell(shell.clone()));
        state.base.status = TaskStatus::Running;
        let mut record = TaskRecord::new(state);
        record.supervisor_pid = 4242;
        record
    };
    let completed = {
        let mut shell = shell.clone();
        shell.exit_code = Some(2);
        let state = ended(
            state("b00000001", TaskKind::Shell(shell)),
            TaskStatus::Failed,
            EndReason::Exited { code: 2 },
        );
        record_with_notice(state, "Background command \"make\" failed with exit code 2")
    };
    let monitor = {
        let mut monitor = shell.clone();
        monitor.kind = ShellKind::Monitor;
        monitor.command = "tail -f /var/log/syslog | grep -i error".into();
        let state = ended(
            state("m00000002", TaskKind::Shell(monitor)),
            TaskStatus::Killed,
            EndReason::TimedOut { limit_ms: 60_000 },
        );
        TaskRecord::new(state)
    };
    let agent = {
        let mut agent = AgentState {
            agent_id: "a0000000000000003".into(),
            prompt: "Read the logs and summarise the errors — ünïcödé ✓".into(),
            agent_type: "general-purpose".into(),
            model: Some("claude-sonnet".into()),
            is_backgrounded: true,
            ..AgentState::default()
        };
        let mut progress = AgentProgress::default();
        progress.record_usage(MessageUsage {
            input_tokens: 1200,
            cache_creation_input_tokens: 30,
            cache_read_input_tokens: 4000,
            output_tokens: 85,
        });
        progress.record_tool_use(ToolActivity {
            tool_name: "Bash".into(),
            input: json!({"command": "grep -c ERROR /var/log/syslog", "description": "Count errors"}),
            activity_description: Some("Running Count errors".into()),
            is_search: None,
            is_read: None,
        });
        agent.progress = progress;
        agent.result = Some("42 errors, all from the disk driver".into());
        let state = ended(
            state("a00000003", TaskKind::Agent(Box::new(agent))),
            TaskStatus::Completed,
            EndReason::Succeeded,
        );
        record_with_notice(state, "Agent \"logs\" completed")
    };
    let teammate = {
        let mate = TeammateState {
            agent_id: "researcher@team".into(),
            is_idle: true,
            pending_messages: vec!["look at issue 25".into()],
            ..TeammateState::default()
        };
        let mut state = state("t00000004", TaskKind::Teammate(Box::new(mate)));
        state.base.status = TaskStatus::Running;
        TaskRecord::new(state)
    };
    let workflow = {
        let flow = WorkflowState {
            run_id: Some("wf_00000005".into()),
            workflow_name: Some("count-things".into()),
            phase: Some("Scan".into()),
            agent_count: 3,
            total_tokens: 3603,
            total_tool_calls: 4,
            ..WorkflowState::default()
        };
        let state = ended(
            state("w00000005", TaskKind::Workflow(Box::new(flow))),
            TaskStatus::Failed,
            EndReason::Errored {
                message: "workflow script threw 42".into(),
            },
        );
        record_with_notice(state, "Workflow failed")
    };
    let remote = {
        let remote = RemoteState {
            session_id: "sess_01".into(),
            title: "remote review".into(),
            command: "review the PR".into(),
            spawned_at: 1_764_000_000_000,
            last_event_id: Some("evt_17".into()),
            events_received: 17,
            ..RemoteState::default()
        };
        let mut state = state("r00000006", TaskKind::Remote(Box::new(remote)));
        state.base.status = TaskStatus::Running;
        TaskRecord::new(state)
    };
    let dream = {
        let state = ended(
            state("d00000007", TaskKind::Dream(Box::default())),
            TaskStatus::Failed,
            EndReason::SupervisorDied { pid: 4242 },
        );
        record_with_notice(state, "Dream failed: its supervisor died")
    };
    let spawn_failed = {
        let state = ended(
            state("b00000008", TaskKind::Shell(shell.clone())),
            TaskStatus::Failed,
            EndReason::SpawnFailed {
                error: "No such file or directory (os error 2)".into(),
            },
        );
        record_with_notice(state, "Background command failed to start")
    };
    let capped = {
        let state = ended(
            state("b00000009", TaskKind::Shell(shell)),
            TaskStatus::Killed,
            EndReason::OutputCapExceeded { cap_bytes: 5 << 30 },
        );
        TaskRecord::new(state)
    };
    vec![
        ("shell-running", running),
        ("shell-failed", completed),
        ("monitor-timed-out", monitor),
        ("agent-completed", agent),
        ("teammate-idle", teammate),
        ("workflow-failed", workflow),
        ("remote-running", remote),
        ("dream-orphaned", dream),
        ("shell-spawn-failed", spawn_failed),
        ("shell-capped", capped),
    ]
}

/// A record of the first format (shell fields at the top level), as task-session's test has it.
const LEGACY_RECORD: &str = r#"{
  "id": "b12345678", "type": "local_bash", "status": "failed", "description": "build",
  "command": "make", "startTime": 10, "endTime": 20, "outputFile": "/s/tasks/b12345678.output",
  "exitCode": 2, "pgid": 31337, "pgidStarted": 99, "supervisorPid": 77,
  "notification": null, "error": null
}"#;

fn caller() -> Caller {
    Caller {
        cwd: "/home/me/project".into(),
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("LANG".into(), "C.UTF-8".into()),
            ("RAW".into(), OsString::from_vec(vec![0xff, b'x', 0x80])),
        ],
        agent_id: Some(TaskId::parse("a00000003").unwrap()),
        tool_use_id: Some("toolu_01".into()),
        background: true,
        task_id: None,
    }
}

fn requests() -> Vec<(&'static str, Request)> {
    let id = TaskId::parse("b12345678").unwrap();
    let start = Start {
        kind: "shell".into(),
        caller: caller(),
        request: json!({"command": "sleep 1; echo done", "description": "wait", "timeoutMs": 600000, "stdin": "pipe"}),
        key: None,
        retry: false,
        schedule: None,
        on_end: None,
        strays: None,
    };
    let request = |op| Request::new(1_764_000_010_000, op);
    vec![
        ("start-shell", request(Op::Start(start))),
        (
            "start-agent",
            request(Op::Start(Start {
                kind: "agent".into(),
                caller: caller(),
                request: json!({"prompt": "summarise", "subagentType": "general-purpose", "model": null, "runner": "codex", "args": ["--json", "-m", "o4"], "budget": 1.5e3}),
                key: Some("1f2e-18a9c4d2e5f60000-3".into()),
                retry: true,
                schedule: None,
                on_end: None,
                strays: None,
            })),
        ),
        (
            "kill",
            request(Op::Kill {
                ids: vec![id, TaskId::parse("a00000003").unwrap()],
            }),
        ),
        (
            "send",
            request(Op::Send {
                to: "researcher@team".parse().unwrap(),
                message: "please also look at \"issue 25\"\n".into(),
                id: Some("msg-0000abcd".into()),
            }),
        ),
        (
            "input",
            request(Op::Input {
                id,
                data: "aGVsbG8K".into(),
                close: true,
            }),
        ),
        ("ping", request(Op::Ping)),
    ]
}

fn responses() -> Vec<(&'static str, Response)> {
    let id = TaskId::parse("b12345678").unwrap();
    vec![
        ("started", Response::Started { id }),
        (
            "killed",
            Response::Killed {
                reports: vec![
                    KillReport {
                        id,
                        result: KillResult::Killed,
                    },
                    KillReport {
                        id,
                        result: KillResult::AlreadyEnded,
                    },
                ],
            },
        ),
        (
            "sent",
            Response::Sent {
                reply: MessageReply::reached(id, MessageOutcome::Posted),
            },
        ),
        (
            "written",
            Response::Written {
                bytes: 6,
                closed: true,
            },
        ),
        (
            "input-refused",
            Response::InputRefused {
                reason: InputRefusal::NotPiped,
                message: "started with stdin /dev/null".into(),
            },
        ),
        (
            "pong",
            Response::Pong {
                pid: 4242,
                registered: 3,
            },
        ),
        (
            "error",
            Response::Error {
                kind: ErrorKind::Expired,
                message: "the request arrived 12 ms late".into(),
            },
        ),
    ]
}

#[test]
#[ignore = "writes the generated seeds into fuzz/corpus/"]
fn write_generated_seeds() {
    for (name, record) in records() {
        put("session_record", &format!("{name}.json"), pretty(&record));
        let orphan = record.clone().orphaned();
        if orphan != record {
            put(
                "session_record",
                &format!("{name}-orphaned.json"),
                pretty(&orphan),
            );
        }
        if let Some(notice) = &record.notification {
            put(
                "session_event",
                &format!("completion-{name}.json"),
                line(notice),
            );
        }
    }
    put("session_record", "legacy.json", LEGACY_RECORD);

    let stalled = records().remove(0).1.task;
    let stall = Notice {
        priority: Priority::Next,
        at_ms: 1_764_000_005_000,
        notification: Notification::stall(&stalled, "Password: "),
        key: None,
    };
    put("session_event", "stall.json", line(&stall));
    let mut monitor_line = stall.clone();
    monitor_line.priority = Priority::Now;
    monitor_line.notification.summary = "ERROR disk full on /dev/sda1 — <b>&amp;</b>".into();
    monitor_line.notification.status = None;
    monitor_line.key = Some("2-0001764000005000-00004242-0000000001-m00000002".into());
    put("session_event", "monitor-line.json", line(&monitor_line));

    for (name, request) in requests() {
        let mut bytes = line(&request);
        bytes.push(b'\n');
        put("session_protocol", &format!("request-{name}.json"), bytes);
        if let Op::Start(start) = &request.op {
            put(
                "session_protocol",
                &format!("start-record-{name}.json"),
                pretty(&StartRecord::of(start)),
            );
        }
    }
    for (name, response) in responses() {
        put(
            "session_protocol",
            &format!("response-{name}.json"),
            line(&response),
        );
    }

    put(
        "session_config",
        "every-key.json",
        pretty(&json!({
            "idle_exit_ms": 30000, "start_timeout_ms": 5000, "poll_interval_ms": 100,
            "sweep_interval_ms": 1000, "request_timeout": "1m 30s", "delivery_lease_ms": 30000,
            "retention_older_than": "7d", "retention_keep_last": 100, "retention_max_size": "1G",
            "retention_interval_ms": 60000, "stall_check_interval_ms": 5000,
            "stall_threshold_ms": 45000, "size_check_interval_ms": 5000,
            "size_cap_bytes": 5368709120u64, "agent_command": "claude -p --verbose",
            "agent_runner": "auto", "remote_server": "https://example.test:8443",
            "remote_token_file": "/home/me/.config/tasks/token", "remote_poll_interval_ms": 1000,
            "remote_backoff_base_ms": 2000, "remote_backoff_cap_ms": 16000,
            "remote_outage_limit_ms": 300000, "remote_request_timeout_ms": 30000
        })),
    );
    put(
        "session_config",
        "small.json",
        br#"{"idle_exit_ms": 10, "request_timeout": "500ms", "retention_max_size": "12KiB"}"#,
    );
    for (name, text) in [
        ("duration", "1h30m"),
        ("number", "2500"),
        ("size", "500M"),
        ("days", "2d 3h"),
    ] {
        put("session_config", &format!("text-{name}"), text);
    }

    put("session_lease", "holder", "4242-987654-1764000030000");
    put(
        "session_lease",
        "holder-padded",
        " 1-0-18446744073709551615\n",
    );

    list_seeds();
    remote_seeds();
    mcp_seeds();
}

/// Task-list directories as the store leaves them (audit log, snapshot cache, high-water mark),
/// and a journal of an interrupted edge write.
fn list_seeds() {
    use task_list::{CreateRequest, StoreConfig, TaskList, UpdateRequest};
    let root = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        durable: false,
        cache_min_age: std::time::Duration::ZERO,
        cache_min_age_local: std::time::Duration::ZERO,
        ..StoreConfig::default()
    };
    let list = TaskList::open(root.path(), "seed", config).unwrap();
    let schema = list
        .create(&CreateRequest::new("Set up schema", "tables and indexes"))
        .unwrap();
    let mut api = CreateRequest::new("Write API", "REST over the schema ✓");
    api.active_form = Some("Writing API".into());
    api.metadata = Some(serde_json::Map::from_iter([(
        "priority".to_owned(),
        json!(2),
    )]));
    let api = list.create(&api).unwrap();
    let mut edge = UpdateRequest::new(api.task.id);
    edge.add_blocked_by = Some(vec![schema.task.id.to_string()]);
    list.update(&edge).unwrap();
    let docs = list.create(&CreateRequest::new("Docs", "")).unwrap();
    list.delete(docs.task.id).unwrap();
    list.snapshot().unwrap();
    list.snapshot().unwrap();
    let mut sections = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(list.dir())
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with(".lock"))
        .collect();
    names.sort();
    for name in &names {
        sections.extend_from_slice(format!("=== {name}\n").as_bytes());
        sections.extend_from_slice(&std::fs::read(list.dir().join(name)).unwrap());
        sections.push(b'\n');
    }
    put("list_dir", "created-edged-deleted", &sections);
    for name in names.iter().filter(|n| n.ends_with(".json")) {
        put(
            "list_task_file",
            &format!("store-{name}"),
            std::fs::read(list.dir().join(name)).unwrap(),
        );
    }
    let one = std::fs::read_to_string(list.dir().join("1.json")).unwrap();
    let journal = json!([
        {"name": "1.json", "contents": one},
        {"name": "3.json", "contents": null},
        {"name": ".highwatermark", "contents": "3"}
    ]);
    let mut with_journal = b"=== 1.json\n".to_vec();
    with_journal.extend_from_slice(one.as_bytes());
    with_journal.extend_from_slice(b"\n=== .journal\n");
    with_journal.extend_from_slice(&line(&journal));
    with_journal.extend_from_slice(b"\n=== .highwatermark\n2\n");
    put("list_dir", "journal", with_journal);
    for fixture in ["schema-and-edges", "delete-owner-metadata"] {
        let dir = fixtures().join("reference/task-lists").join(fixture);
        let mut sections = Vec::new();
        let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                !p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(".lock")
            })
            .collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            sections.extend_from_slice(format!("=== {name}\n").as_bytes());
            sections.extend_from_slice(&std::fs::read(&path).unwrap());
            sections.push(b'\n');
        }
        put("list_dir", &format!("reference-{fixture}"), sections);
    }
}

fn fixtures() -> PathBuf {
    let shared = Path::new("/work/shared/fixtures");
    match shared.is_dir() {
        true => shared.to_owned(),
        false => fuzz::smoke::crate_dir().join("../task-agent/tests/fixtures"),
    }
}

fn remote_seeds() {
    use task_remote::Sidecar;
    use task_remote::api::{
        CreateSession, ErrorBody, ErrorDetail, EventsPage, SendEvents, Session, SessionStatus,
        UserEvent,
    };
    put(
        "remote_api",
        "session.json",
        line(&Session {
            id: "sess_01".into(),
            title: "remote review".into(),
            session_status: SessionStatus::RequiresAction,
            created_at: "2025-11-24T16:00:00Z".into(),
            updated_at: "1764000000".into(),
        }),
    );
    let events: Vec<serde_json::Map<String, serde_json::Value>> = [
        json!({"id": "evt_1", "type": "system", "subtype": "init", "session_id": "s"}),
        json!({"uuid": "evt_2", "type": "assistant", "message": {"content": [{"type": "text", "text": "hi"}]}}),
        json!({"id": "evt_3", "type": "result", "subtype": "success", "result": "done"}),
    ]
    .into_iter()
    .map(|v| v.as_object().unwrap().clone())
    .collect();
    put(
        "remote_api",
        "events-page.json",
        line(&EventsPage {
            data: events.clone(),
            has_more: true,
            first_id: Some("evt_1".into()),
            last_id: Some("evt_3".into()),
        }),
    );
    let mut log = Vec::new();
    for event in &events {
        log.extend_from_slice(&line(event));
        log.push(b'\n');
    }
    log.extend_from_slice(br#"{"id":"evt_4","ty"#);
    put("remote_api", "event-log-torn.jsonl", log);
    put(
        "remote_api",
        "error.json",
        line(&ErrorBody {
            error: ErrorDetail {
                kind: "not_found_error".into(),
                message: "no session sess_02".into(),
            },
        }),
    );
    put(
        "remote_api",
        "create.json",
        line(&CreateSession {
            events: vec![UserEvent::text("review the PR")],
            title: Some("review".into()),
            model: None,
        }),
    );
    put(
        "remote_api",
        "send.json",
        line(&SendEvents {
            events: vec![UserEvent::text("and the tests")],
        }),
    );
    let sidecar: Sidecar = serde_json::from_value(json!({
        "taskId": "r00000006", "remoteTaskType": "remote-agent", "sessionId": "sess_01",
        "title": "remote review", "command": "review the PR", "spawnedAt": 1764000000000u64,
        "toolUseId": "toolu_9", "isLongRunning": true, "remoteTaskMetadata": {"pr": 25},
        "description": "review", "server": "https://example.test:8443",
        "tokenFile": "/home/me/.config/tasks/token", "agentId": "a00000003"
    }))
    .unwrap();
    put("remote_api", "sidecar.json", pretty(&sidecar));
}

fn mcp_seeds() {
    let lines = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": "call-2", "method": "tools/call", "params": {"name": "Bash", "arguments": {"command": "echo hi", "run_in_background": true}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "no/such/method"}),
        json!({"jsonrpc": "2.0", "id": 4, "result": {}}),
    ];
    let mut stream = vec![255u8];
    for value in &lines {
        stream.extend_from_slice(&line(value));
        stream.push(b'\n');
    }
    stream.extend_from_slice(b"not json at all\n\n{\"id\": 5, \"method\": \n");
    put("mcp_transport", "session-long-limit", &stream);
    stream[0] = 40; // most lines over the limit: the oversized path and its id scan
    put("mcp_transport", "session-short-limit", &stream);
    let mut nested = vec![60u8];
    nested.extend_from_slice(
        br#"{"params":{"id":1,"x":[{"id":2}],"s":"\"id\":9"},"method":"m","id":"abc"}"#,
    );
    nested.push(b'\n');
    put("mcp_transport", "id-after-nested", nested);
}
