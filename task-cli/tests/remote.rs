//! Remote agents through two real `tasks` processes on 127.0.0.1: `tasks serve` (agents run by
//! task-agent's scripted `fake-agent`) and a client session whose supervisor follows the remote
//! session (`tasks remote`): completion, a message mid-run, kill = archive, the sidecar's life,
//! a client supervisor SIGKILLed mid-poll and started again, and the server's refusals.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::hooks;

/// One `tasks` state root: the server's or the client's.
use support::root::TasksRoot as Root;

impl Root {
    /// A root with fast remote polling and backoff, whose supervisor outlives the test.
    fn remote() -> Self {
        Root::new()
            .env("TASKS_IDLE_EXIT_MS", "60000")
            .env("TASKS_REMOTE_POLL_MS", "30")
            .env("TASKS_REMOTE_BACKOFF_MS", "30")
            .env("TASKS_REMOTE_BACKOFF_CAP_MS", "120")
            .env("TASKS_REMOTE_REQUEST_MS", "5000")
            .env_remove("TASKS_AGENT_COMMAND")
    }

    fn all(&self) -> Vec<Value> {
        let all: Value = serde_json::from_str(&self.ok(&["ps", "--all", "--json"])).unwrap();
        all.as_array().unwrap().clone()
    }

    fn sidecar(&self, id: &str) -> PathBuf {
        self.path(&format!(
            "default/remote-agents/remote-agent-{id}.meta.json"
        ))
    }

    fn supervisor_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.path("default/supervisor.lock")).ok()?;
        let pid = text.trim().parse().ok()?;
        support::is_alive(pid).then_some(pid)
    }
}

/// `tasks serve` on 127.0.0.1 (any free port), its agents the fake agent with `script`.
struct Server {
    root: Root,
    child: Child,
    url: String,
    token_file: PathBuf,
    token: String,
}

impl Server {
    fn start(steps: &[Value]) -> Self {
        Self::start_with(steps, &["--listen", "127.0.0.1:0"])
    }

    fn start_with(steps: &[Value], extra: &[&str]) -> Self {
        Self::spawn(steps, extra, |_| {})
    }

    /// [`start_with`](Self::start_with), the server started with the soft descriptor limit of a
    /// login session (1024) under this process's hard one, as when it is started by hand.
    fn start_with_login_limits(steps: &[Value], extra: &[&str]) -> Self {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        Self::spawn(steps, extra, |command| {
            let hard = getrlimit(Resource::Nofile).maximum;
            let login = Rlimit {
                current: Some(hard.unwrap_or(u64::MAX).min(1024)),
                maximum: hard,
            };
            // SAFETY: the closure only makes the setrlimit system call, which is
            // async-signal-safe, between fork and exec.
            unsafe {
                command.pre_exec(move || setrlimit(Resource::Nofile, login).map_err(Into::into));
            }
        })
    }

    fn spawn(steps: &[Value], extra: &[&str], prepare: impl FnOnce(&mut Command)) -> Self {
        let root = Root::remote();
        let script = root.path("script.jsonl");
        let lines: String = steps.iter().map(|s| format!("{s}\n")).collect();
        std::fs::write(&script, lines).unwrap();
        let token_file = root.path("token");
        let token = root.ok(&["serve", "--init-token", token_file.to_str().unwrap()]);
        let agent = format!(
            "{} --script {}",
            support::fake_agent().display(),
            script.display()
        );
        let mut args = vec!["serve", "--token-file", token_file.to_str().unwrap()];
        args.extend_from_slice(extra);
        let mut command = root.command(&args);
        command
            .env("TASKS_AGENT_COMMAND", agent)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        prepare(&mut command);
        let mut child = command.spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("tasks serve said {line:?}"))
            .to_owned();
        Server {
            root,
            child,
            url,
            token_file,
            token: token.trim().to_owned(),
        }
    }

    /// The server's agent tasks (its sessions).
    fn sessions(&self) -> Vec<Value> {
        self.root.all()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client session that starts remote agents on `server`.
fn remote(client: &Root, server: &Server, extra: &[&str], prompt: &str) -> String {
    let mut args = vec![
        "remote",
        "--server",
        &server.url,
        "--token-file",
        server.token_file.to_str().unwrap(),
        "--description",
        "remote job",
    ];
    args.extend_from_slice(extra);
    args.extend(["--", prompt]);
    client.ok(&args).lines().next().unwrap().to_owned()
}

/// The events of a remote task's output file, in order.
fn logged_events(client: &Root, id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(client.path(&format!("default/tasks/{id}.output")))
        .unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn assert_no_duplicate_events(events: &[Value]) {
    let ids: Vec<u64> = events
        .iter()
        .map(|e| e["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "event ids must strictly increase (no event twice): {ids:?}"
    );
}

fn touch(path: &Path) {
    std::fs::write(path, b"").unwrap();
}

#[test]
fn a_remote_agent_runs_to_one_completion_notification_and_its_sidecar_lives_while_it_runs() {
    let gate = tempfile::tempdir().unwrap();
    let gate = gate.path().join("go");
    let server = Server::start(&[
        json!({"read_user": true}),
        json!({"text": "looking"}),
        json!({"wait_file": gate}),
        json!({"result": "remote work done"}),
    ]);
    let client = Root::remote();
    let id = remote(&client, &server, &[], "do the remote work");
    assert!(id.starts_with('r'), "{id}");

    let sidecar: Value = support::eventually("the sidecar", || {
        let text = std::fs::read_to_string(client.sidecar(&id)).ok()?;
        serde_json::from_str(&text).ok()
    });
    assert_eq!(sidecar["taskId"], id.as_str());
    assert_eq!(sidecar["remoteTaskType"], "remote-agent");
    assert_eq!(sidecar["command"], "do the remote work");
    assert_eq!(sidecar["server"], server.url.as_str());
    assert!(
        !sidecar.to_string().contains(&server.token),
        "no token in the sidecar"
    );
    let session = sidecar["sessionId"].as_str().unwrap().to_owned();
    support::eventually("the text event", || {
        logged_events(&client, &id)
            .iter()
            .any(|e| e["type"] == "assistant")
            .then_some(())
    });
    assert_eq!(client.listed(&id)["status"], "running");

    touch(&gate);
    let waited = client.run(&["wait", "--no-deliver", &id]);
    assert!(waited.status.success(), "{waited:?}");
    let notices = client.ok(&["notifications"]);
    assert_eq!(
        notices.matches("<task-notification>").count(),
        1,
        "{notices}"
    );
    assert!(
        notices.contains("<task-type>remote_agent</task-type>"),
        "{notices}"
    );
    assert!(notices.contains("<status>completed</status>"), "{notices}");
    assert!(
        notices.contains("<summary>Remote agent \"remote job\" completed</summary>"),
        "{notices}"
    );
    assert!(
        notices.contains("<result>remote work done</result>"),
        "{notices}"
    );
    assert!(!client.sidecar(&id).exists(), "deleted at completion");
    let events = logged_events(&client, &id);
    assert_no_duplicate_events(&events);
    assert_eq!(events.last().unwrap()["type"], "result");
    // The session was the server's agent task, which ended on its own.
    let sessions = server.sessions();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["id"], session.as_str());
    assert_eq!(sessions[0]["status"], "completed");
    assert!(client.ok(&["notifications"]).is_empty(), "exactly once");
}

/// A remote agent's output (its session's events) reads as its conversation, as every agent's
/// does (the others are in `conversations.rs`): the user's prompt, a tool its permission mode
/// denied with the reason, what it said and its result; `--json` gives the events as they are.
#[test]
fn a_remote_agents_output_is_its_conversation() {
    let denied = "Claude requested permissions to use Bash, but you haven't granted it yet.";
    let server = Server::start(&[
        json!({"read_user": true}),
        json!({"tool": "Bash", "input": {"command": "rm -rf build", "description": "Clean the build"},
               "output": denied, "is_error": true}),
        json!({"text": "Nothing could run."}),
        json!({"result": "blocked"}),
    ]);
    let client = Root::remote();
    let id = remote(&client, &server, &[], "clean the build remotely");
    let waited = client.run(&["wait", "--no-deliver", &id]);
    assert!(waited.status.success(), "{waited:?}");
    let last_three = format!("    (the tool failed: {denied})\nNothing could run.\n✓ blocked\n");
    assert_eq!(client.ok(&["output", &id, "--tail", "3"]), last_three);
    let whole = client.ok(&["output", &id]);
    assert!(whole.starts_with("> clean the build remotely\n"), "{whole}");
    assert!(whole.contains("  → Running Clean the build\n"), "{whole}");
    assert!(whole.ends_with(&last_three), "{whole}");
    let raw: Value = serde_json::from_str(&client.ok(&["output", &id, "--json"])).unwrap();
    assert!(
        raw["output"].as_str().unwrap().contains("\"tool_result\""),
        "{raw}"
    );
}

#[test]
fn a_message_sent_mid_run_reaches_the_remote_agent_and_its_answer_ends_the_task() {
    let gate = tempfile::tempdir().unwrap();
    let gate = gate.path().join("go");
    let server = Server::start(&[
        json!({"read_user": true}),
        json!({"wait_file": gate}),
        json!({"result": "first turn"}),
    ]);
    let client = Root::remote();
    let id = remote(&client, &server, &[], "start");
    support::eventually("running", || {
        (client.listed(&id)["status"] == "running" && client.sidecar(&id).exists()).then_some(())
    });
    let sent = client.ok(&["send", &id, "and one more thing"]);
    assert!(sent.contains("Message sent"), "{sent}");
    touch(&gate);
    assert!(client.run(&["wait", "--no-deliver", &id]).status.success());
    let notices = client.ok(&["notifications"]);
    assert!(
        notices.contains("<result>echo: and one more thing</result>"),
        "the task ends with the answer to the message: {notices}"
    );
    let events = logged_events(&client, &id);
    assert_no_duplicate_events(&events);
    let results = events.iter().filter(|e| e["type"] == "result").count();
    assert_eq!(results, 2, "{events:?}");
}

#[test]
fn killing_a_remote_agent_archives_its_session_and_deletes_its_sidecar() {
    let gate = tempfile::tempdir().unwrap();
    let never = gate.path().join("never");
    let server = Server::start(&[json!({"read_user": true}), json!({"wait_file": never})]);
    let client = Root::remote();
    let id = remote(&client, &server, &[], "wait forever");
    support::eventually("running", || {
        (client.listed(&id)["status"] == "running" && client.sidecar(&id).exists()).then_some(())
    });
    let killed = client.ok(&["kill", &id]);
    assert!(killed.contains("killed"), "{killed}");
    assert_eq!(client.listed(&id)["status"], "killed");
    assert!(!client.sidecar(&id).exists(), "deleted at kill");
    support::eventually("the server's session archived (its agent killed)", || {
        let sessions = server.sessions();
        (sessions.len() == 1 && sessions[0]["status"] == "killed").then_some(())
    });
    assert!(
        client.ok(&["notifications"]).is_empty(),
        "a kill on request is not notified to the model"
    );
}

#[test]
fn a_client_supervisor_killed_mid_poll_resumes_from_its_cursor_and_completes_exactly_once() {
    let gates = tempfile::tempdir().unwrap();
    let gate = gates.path().join("go");
    let server = Server::start(&[
        json!({"read_user": true}),
        json!({"text": "before the crash"}),
        json!({"wait_file": gate}),
        json!({"text": "after the crash"}),
        json!({"result": "survived"}),
    ]);
    let client = Root::remote();
    let id = remote(&client, &server, &[], "survive a crash");
    support::eventually("the first events", || {
        logged_events(&client, &id)
            .iter()
            .any(|e| e["type"] == "assistant")
            .then_some(())
    });
    let before = logged_events(&client, &id);
    let pid = client.supervisor_pid().expect("a live supervisor");
    support::sigkill(pid);
    support::eventually("the supervisor gone", || {
        (!support::is_alive(pid)).then_some(())
    });
    touch(&gate);

    // Any request starts a new supervisor, which follows the task again from its cursor.
    client.ok(&["run", "--", "true"]);
    assert!(client.run(&["wait", "--no-deliver", &id]).status.success());
    let task = client.listed(&id);
    assert_eq!(task["status"], "completed", "{task}");
    let events = logged_events(&client, &id);
    assert_no_duplicate_events(&events);
    assert_eq!(&events[..before.len()], &before[..], "the log only grew");
    let texts: Vec<&str> = events
        .iter()
        .filter_map(|e| e["message"]["content"][0]["text"].as_str())
        .collect();
    assert_eq!(
        texts.iter().filter(|t| **t == "after the crash").count(),
        1,
        "{texts:?}"
    );
    let notices = client.ok(&["notifications"]);
    let mine = notices.matches(&format!("<task-id>{id}</task-id>")).count();
    assert_eq!(mine, 1, "{notices}");
    assert!(notices.contains("<result>survived</result>"), "{notices}");
    assert!(!client.sidecar(&id).exists());

    // A finished task is never resurrected by the next supervisor.
    let pid = client.supervisor_pid().expect("a live supervisor");
    support::sigkill(pid);
    support::eventually("the supervisor gone", || {
        (!support::is_alive(pid)).then_some(())
    });
    client.ok(&["run", "--", "true"]);
    assert_eq!(client.listed(&id)["status"], "completed");
    assert_eq!(logged_events(&client, &id), events);
    let again = client.ok(&["notifications"]);
    assert!(!again.contains(&id), "{again}");
}

#[test]
fn the_configured_end_hook_runs_once_for_each_end_of_a_remote_agent_across_a_sigkilled_supervisor()
{
    let gates = tempfile::tempdir().unwrap();
    let gate = gates.path().join("go");
    let server = Server::start(&[
        json!({"read_user": true}),
        json!({"text": "working"}),
        json!({"wait_file": gate}),
        json!({"result": "done"}),
    ]);
    let client = Root::remote();
    let file = client.path("ends.txt");
    let client = client.env("TASKS_ON_END", hooks::appending_hook(&file));
    let [done, killed, survivor] =
        ["one", "two", "three"].map(|p| remote(&client, &server, &[], p));
    support::eventually("all three running", || {
        [&done, &killed, &survivor]
            .iter()
            .all(|id| client.listed(id)["status"] == "running" && client.sidecar(id).exists())
            .then_some(())
    });
    client.ok(&["kill", &killed]);
    let pid = client.supervisor_pid().expect("a live supervisor");
    support::sigkill(pid);
    support::eventually("the supervisor gone", || {
        (!support::is_alive(pid)).then_some(())
    });
    touch(&gate);
    // A new supervisor follows the two that run again, to their ends.
    let waited = run_bounded(&client, &["wait", "--no-deliver", &done, &survivor]);
    assert!(waited.status.success(), "{waited:?}");
    let expected = [
        (done.as_str(), "completed", "remote_agent"),
        (killed.as_str(), "killed killed", "remote_agent"),
        (survivor.as_str(), "completed", "remote_agent"),
    ];
    let lines = hooks::hooked(&file, &expected.map(|(id, ..)| id));
    hooks::assert_hooked_once(&lines, &expected);
    // Nor does the next supervisor run any again.
    let pid = client.supervisor_pid().expect("a live supervisor");
    support::sigkill(pid);
    let next = client.ok(&["run", "--", "true"]).trim().to_owned();
    let lines = hooks::hooked(&file, &[&next]);
    hooks::assert_hooked_once(&lines, &expected);
    assert_eq!(lines.len(), 4, "{lines:?}");
}

/// Runs `tasks ARGS` in `root` to its end, failing the test if it outlasts the deadline (a
/// `wait` that never returns is a failure, not a hung suite; the root's cleanup kills it by
/// pid). Its output is small: the pipes never fill while it runs.
fn run_bounded(root: &Root, args: &[&str]) -> std::process::Output {
    let mut child = root
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    support::eventually(&format!("tasks {args:?} to end"), || {
        child.try_wait().unwrap().map(drop)
    });
    child.wait_with_output().unwrap()
}

#[test]
fn a_client_supervisor_killed_mid_poll_then_tasks_wait_ends_completed_with_one_notification() {
    let gates = tempfile::tempdir().unwrap();
    let gate = gates.path().join("go");
    let server = Server::start(&[
        json!({"read_user": true}),
        json!({"text": "before the crash"}),
        json!({"wait_file": gate}),
        json!({"text": "after the crash"}),
        json!({"result": "the far result"}),
    ]);
    let client = Root::remote();
    let id = remote(&client, &server, &[], "outlive your supervisor");
    support::eventually("the first events", || {
        logged_events(&client, &id)
            .iter()
            .any(|e| e["type"] == "assistant")
            .then_some(())
    });
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(client.path(&format!("default/tasks/{id}.json"))).unwrap(),
    )
    .unwrap();
    assert_eq!(record["survivesSupervisor"], true, "{record}");
    let pid = client.supervisor_pid().expect("a live supervisor");
    support::sigkill(pid);
    let lock = client.path("default/supervisor.lock");
    support::eventually("the supervisor gone, its lock free", || {
        (!support::is_alive(pid) && !task_session::lock::is_held(&lock).unwrap()).then_some(())
    });
    touch(&gate);

    // The natural next command, and nothing before it: it sees the true end.
    let waited = run_bounded(&client, &["wait", &id]);
    let stdout = String::from_utf8_lossy(&waited.stdout);
    assert!(
        waited.status.success(),
        "{waited:?}: {}",
        String::from_utf8_lossy(&waited.stderr)
    );
    assert_eq!(stdout, format!("{id} completed (done)\n"));
    assert_ne!(
        client.supervisor_pid(),
        Some(pid),
        "a new supervisor resumed it"
    );

    // Exactly one notification, delivered by that wait, carrying the far result.
    let log = std::fs::read_to_string(client.path("default/notifications.jsonl")).unwrap();
    let mine: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|delivered| delivered["notification"]["task_id"] == id.as_str())
        .collect();
    assert_eq!(mine.len(), 1, "{log}");
    let notification = &mine[0]["notification"];
    assert_eq!(notification["status"], "completed", "{log}");
    assert_eq!(notification["agent"]["result"], "the far result", "{log}");
    let again = client.ok(&["notifications"]);
    assert!(!again.contains(id.as_str()), "{again}");
    let events = logged_events(&client, &id);
    assert_no_duplicate_events(&events);
    let after = events
        .iter()
        .filter(|e| e["message"]["content"][0]["text"] == "after the crash")
        .count();
    assert_eq!(after, 1, "{events:?}");
    assert!(!client.sidecar(&id).exists());
}

#[test]
fn a_remote_agent_whose_supervisor_died_is_listed_running_never_failed() {
    let gates = tempfile::tempdir().unwrap();
    let never = gates.path().join("never");
    let server = Server::start(&[json!({"read_user": true}), json!({"wait_file": never})]);
    let client = Root::remote();
    let id = remote(&client, &server, &[], "keep going");
    support::eventually("running with its sidecar", || {
        (client.listed(&id)["status"] == "running" && client.sidecar(&id).exists()).then_some(())
    });
    let pid = client.supervisor_pid().expect("a live supervisor");
    support::sigkill(pid);
    let lock = client.path("default/supervisor.lock");
    support::eventually("the supervisor gone, its lock free", || {
        (!support::is_alive(pid) && !task_session::lock::is_held(&lock).unwrap()).then_some(())
    });
    // A look brings its supervisor back, which follows it again: still running, not failed.
    let task = client.listed(&id);
    assert_eq!(task["status"], "running", "{task}");
    assert!(task.get("endReason").is_none(), "{task}");
    let revived = client
        .supervisor_pid()
        .expect("a supervisor started by the look");
    assert_ne!(revived, pid);
    assert!(client.ok(&["notifications"]).is_empty());
    let killed = client.ok(&["kill", &id]);
    assert!(killed.contains("killed"), "{killed}");
    support::eventually("the server's session archived", || {
        let sessions = server.sessions();
        (sessions.len() == 1 && sessions[0]["status"] == "killed").then_some(())
    });
}

#[test]
fn a_remote_agent_that_cannot_be_followed_again_ends_failed_with_that_reason_once() {
    let gates = tempfile::tempdir().unwrap();
    let never = gates.path().join("never");
    let server = Server::start(&[json!({"read_user": true}), json!({"wait_file": never})]);
    let client = Root::remote();
    // The client's own copy of the token, which goes away while its supervisor is dead.
    let token = client.path("client-token");
    std::fs::copy(&server.token_file, &token).unwrap();
    let id = client
        .ok(&[
            "remote",
            "--server",
            &server.url,
            "--token-file",
            token.to_str().unwrap(),
            "--description",
            "remote job",
            "--",
            "lose your token",
        ])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    support::eventually("running with its sidecar", || {
        (client.listed(&id)["status"] == "running" && client.sidecar(&id).exists()).then_some(())
    });
    let pid = client.supervisor_pid().expect("a live supervisor");
    support::sigkill(pid);
    let lock = client.path("default/supervisor.lock");
    support::eventually("the supervisor gone, its lock free", || {
        (!support::is_alive(pid) && !task_session::lock::is_held(&lock).unwrap()).then_some(())
    });
    std::fs::remove_file(&token).unwrap();

    let waited = run_bounded(&client, &["wait", "--json", &id]);
    let report: Value = serde_json::from_slice(&waited.stdout).unwrap();
    let task = &report["tasks"][0];
    assert_eq!(task["status"], "failed", "{report}");
    let reason = task["endReason"]["message"].as_str().unwrap_or_default();
    assert!(
        reason.contains("could not be followed again") && reason.contains("client-token"),
        "the true reason, not \"supervisor died\": {report}"
    );
    let text = task["notification"].as_str().unwrap_or_default();
    assert!(text.contains("could not be followed again"), "{report}");
    assert!(!client.sidecar(&id).exists());
    assert!(
        !client.ok(&["notifications"]).contains(id.as_str()),
        "exactly once"
    );
}

/// A request to the server with a raw HTTP client.
fn request(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
) -> (u16, Value) {
    request_with(server, method, path, token, body, &[])
}

/// [`request`] with extra `headers`.
fn request_with(
    server: &Server,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Vec<u8>>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let mut request = client.request(method, format!("{}{path}", server.url));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.json().await.unwrap_or(Value::Null);
        (status, body)
    })
}

#[test]
fn requests_without_the_token_or_over_the_size_limit_are_refused_and_start_nothing() {
    let server = Server::start_with(
        &[json!({"result": "x"})],
        &["--listen", "127.0.0.1:0", "--max-body", "4096"],
    );
    let create = serde_json::to_vec(&json!({
        "events": [{"type": "user", "message": {"role": "user", "content": "hi"}}]
    }))
    .unwrap();
    let post = reqwest::Method::POST;
    let (status, body) = request(
        &server,
        post.clone(),
        "/v1/sessions",
        None,
        Some(create.clone()),
    );
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["type"], "authentication_error");
    let (status, _) = request(
        &server,
        post.clone(),
        "/v1/sessions",
        Some("not-the-token"),
        Some(create.clone()),
    );
    assert_eq!(status, 401);
    let prefix = &server.token[..server.token.len() - 1];
    let (status, _) = request(
        &server,
        post.clone(),
        "/v1/sessions",
        Some(prefix),
        Some(create),
    );
    assert_eq!(status, 401, "a prefix of the token is not the token");
    let huge = serde_json::to_vec(&json!({
        "events": [{"type": "user", "message": {"role": "user", "content": "x".repeat(8192)}}]
    }))
    .unwrap();
    let (status, body) = request(
        &server,
        post,
        "/v1/sessions",
        Some(&server.token),
        Some(huge),
    );
    assert_eq!(status, 413, "{body}");
    let (status, _) = request(
        &server,
        reqwest::Method::GET,
        "/v1/sessions/..%2F..%2Fetc%2Fpasswd/events",
        Some(&server.token),
        None,
    );
    assert_eq!(status, 404, "an id is validated before any path is built");
    assert!(server.sessions().is_empty(), "nothing was started");
    assert!(
        !server.root.path("default/tasks").exists()
            || std::fs::read_dir(server.root.path("default/tasks"))
                .unwrap()
                .next()
                .is_none()
    );
}

#[test]
fn a_slow_client_does_not_stall_the_others() {
    let server = Server::start(&[json!({"result": "x"})]);
    let address = server.url.trim_start_matches("http://").to_owned();
    // Half a request, never finished.
    let mut slow = std::net::TcpStream::connect(&address).unwrap();
    slow.write_all(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
        .unwrap();
    let (status, _) = request(
        &server,
        reqwest::Method::GET,
        "/v1/sessions/a00000000",
        Some(&server.token),
        None,
    );
    assert_eq!(
        status, 404,
        "served while the slow client holds its connection"
    );
    drop(slow);
}

#[test]
fn a_non_loopback_address_without_tls_is_refused() {
    let root = Root::remote();
    let token_file = root.path("token");
    root.ok(&["serve", "--init-token", token_file.to_str().unwrap()]);
    let out = root.run(&[
        "serve",
        "--listen",
        "0.0.0.0:0",
        "--token-file",
        token_file.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("without TLS"), "{stderr}");
}

#[test]
fn a_wrong_token_fails_the_command_with_the_servers_reason_and_leaves_no_task() {
    let server = Server::start(&[json!({"result": "x"})]);
    let client = Root::remote();
    let wrong = client.path("wrong-token");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = client.run(&[
        "remote",
        "--server",
        &server.url,
        "--token-file",
        wrong.to_str().unwrap(),
        "--",
        "hello",
    ]);
    assert_eq!(out.status.code(), Some(70), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot start remote agent: the server refused the token (HTTP 401)"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "no task id is printed");
    let listed: Value = serde_json::from_str(&client.ok(&["ps", "--all", "--json"])).unwrap();
    assert_eq!(listed, json!([]), "no task is left behind");
    assert!(server.sessions().is_empty());
}

/// The schemathesis command: `TASKS_SCHEMATHESIS`, else the venv `.ci/schemathesis.sh` makes,
/// else one on the PATH.
fn schemathesis() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("TASKS_SCHEMATHESIS").filter(|p| !p.is_empty()) {
        return Some(path.into());
    }
    let venv =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/schemathesis-venv/bin/schemathesis");
    if venv.exists() {
        return Some(venv);
    }
    Command::new("schemathesis")
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|_| "schemathesis".into())
}

#[test]
#[allow(clippy::print_stderr)]
fn the_openapi_file_holds_against_the_running_server() {
    let Some(tool) = schemathesis() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "schemathesis is missing: run `export TASKS_SCHEMATHESIS=$(.ci/schemathesis.sh)`"
        );
        eprintln!("skipped: no schemathesis (see .ci/schemathesis.sh)");
        return;
    };
    let server = Server::start(&[json!({"read_user": true}), json!({"result": "ok"})]);
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("../task-remote/openapi.yaml");
    let reports = tempfile::tempdir().unwrap();
    let out = Command::new(tool)
        .args(["run", schema.to_str().unwrap(), "--url", &server.url])
        .args(["-H", &format!("Authorization: Bearer {}", server.token)])
        .args(["--max-examples", "30", "--seed", "20261123", "--no-color"])
        .args(["--report-dir", reports.path().to_str().unwrap()])
        .env("SCHEMATHESIS_HOOKS", "")
        .current_dir(reports.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found server errors or schema violations:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("No issues found"), "{stdout}");
}

/// `tasks mcp` on stdio, spoken to line by line (JSON-RPC), answers read with a deadline.
struct Mcp {
    child: Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<Value>,
}

impl Mcp {
    fn start(command: &mut Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(serde_json::from_str(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut mcp = Mcp {
            child,
            stdin,
            lines,
        };
        mcp.request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        mcp
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let message = self
                .lines
                .recv_timeout(support::DEADLINE)
                .expect("no answer from tasks mcp");
            if message["id"] == id {
                return message;
            }
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_mcp_agent_tool_with_remote_isolation_starts_a_remote_agent_on_the_configured_server() {
    let server = Server::start(&[json!({"read_user": true}), json!({"result": "from afar"})]);
    let client = Root::remote();
    let agent = json!({"description": "far job", "prompt": "work remotely",
        "isolation": "remote", "run_in_background": true});

    // With an agent command but no server, the tool exists and says what to set.
    let mut command = client.command(&["mcp"]);
    command.env("TASKS_AGENT_COMMAND", "true");
    let mut unconfigured = Mcp::start(&mut command);
    let refused = unconfigured.request(
        2,
        "tools/call",
        json!({"name": "Agent", "arguments": agent}),
    );
    assert!(
        refused.to_string().contains("TASKS_REMOTE_SERVER"),
        "without a server it says what to set: {refused}"
    );
    drop(unconfigured);

    // With a token the server refuses, the tool fails with the server's words and no task.
    let wrong = client.path("wrong-token");
    std::fs::write(&wrong, "not-the-token\n").unwrap();
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut command = client.command(&["mcp"]);
    command
        .env("TASKS_REMOTE_SERVER", &server.url)
        .env("TASKS_REMOTE_TOKEN_FILE", &wrong);
    let mut refusing = Mcp::start(&mut command);
    let refused = refusing.request(
        2,
        "tools/call",
        json!({"name": "Agent", "arguments": agent}),
    );
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        refused
            .to_string()
            .contains("the server refused the token (HTTP 401)"),
        "{refused}"
    );
    drop(refusing);
    let listed: Value = serde_json::from_str(&client.ok(&["ps", "--all", "--json"])).unwrap();
    assert_eq!(listed, json!([]), "a refused token leaves no task");

    let mut command = client.command(&["mcp"]);
    command
        .env("TASKS_REMOTE_SERVER", &server.url)
        .env("TASKS_REMOTE_TOKEN_FILE", &server.token_file);
    let mut mcp = Mcp::start(&mut command);
    let started = mcp.request(
        2,
        "tools/call",
        json!({"name": "Agent", "arguments": agent}),
    );
    let id = started["result"]["structuredContent"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    assert!(id.starts_with('r'), "{id}");
    assert!(client.run(&["wait", "--no-deliver", &id]).status.success());
    let notices = client.ok(&["notifications"]);
    assert!(notices.contains("<result>from afar</result>"), "{notices}");
    assert!(
        notices.contains("<task-type>remote_agent</task-type>"),
        "{notices}"
    );
    assert_eq!(server.sessions().len(), 1);
}

#[test]
fn a_non_loopback_address_is_served_over_tls_with_the_given_certificate() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tls");
    let cert = fixtures.join("cert.pem");
    let key = fixtures.join("key.pem");
    let server = Server::start_with(
        &[json!({"result": "x"})],
        &[
            "--listen",
            "0.0.0.0:0",
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let port = server.url.rsplit(':').next().unwrap();
    assert!(server.url.starts_with("https://"), "{}", server.url);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let ca = std::fs::read(fixtures.join("ca.pem")).unwrap();
        let ca = reqwest::Certificate::from_pem(&ca).unwrap();
        let client = reqwest::Client::builder()
            .add_root_certificate(ca)
            .build()
            .unwrap();
        let url = format!("https://localhost:{port}/v1/sessions/a00000000");
        let answer = client
            .get(&url)
            .bearer_auth(&server.token)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status().as_u16(), 404, "served over TLS");
        let plain = reqwest::get(format!("http://127.0.0.1:{port}/v1/sessions/a00000000")).await;
        assert!(
            plain.is_err() || plain.unwrap().status().as_u16() != 404,
            "no plain HTTP on a TLS port"
        );
    });
}

#[test]
fn a_client_trickling_its_request_head_is_disconnected_after_the_header_timeout() {
    use std::io::Read;
    let server = Server::start_with(
        &[json!({"result": "x"})],
        &["--listen", "127.0.0.1:0", "--header-timeout", "300ms"],
    );
    let address = server.url.strip_prefix("http://").unwrap();
    let mut slow = std::net::TcpStream::connect(address).unwrap();
    // The first line and one header, then silence: the head never ends.
    slow.write_all(b"GET /v1/sessions HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // Far longer than the timeout: without it the server would keep the connection (and this
    // read would fail with a timeout instead of seeing the server close it).
    slow.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut answer = Vec::new();
    let closed = slow.read_to_end(&mut answer);
    assert!(closed.is_ok(), "the server kept the connection: {closed:?}");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    // A client that sends whole requests is still served (here: a session that does not exist).
    let (status, body) = request(
        &server,
        reqwest::Method::GET,
        "/v1/sessions/a12345678",
        Some(&server.token),
        None,
    );
    assert_eq!(status, 404, "{body}");
}

#[test]
fn the_client_refuses_a_token_file_its_group_or_others_may_read() {
    let server = Server::start(&[json!({"result": "x"})]);
    let client = Root::remote();
    let shared = client.path("shared-token");
    std::fs::write(&shared, format!("{}\n", server.token)).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = client.run(&[
        "remote",
        "--server",
        &server.url,
        "--token-file",
        shared.to_str().unwrap(),
        "--",
        "hello",
    ]);
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    for said in [
        shared.to_str().unwrap(),
        "mode 644",
        "group or others",
        "chmod 600",
    ] {
        assert!(stderr.contains(said), "{said:?} not in {stderr}");
    }
    assert!(client.all().is_empty(), "no task was registered");
    assert!(server.sessions().is_empty(), "nothing reached the server");
}

/// An unauthenticated request for a session: answered 401 without touching the session layer.
const PROBE: &[u8] = b"GET /v1/sessions/a00000000 HTTP/1.1\r\nHost: x\r\n\r\n";

/// Sends `request` on `stream` and reads its answer; returns its status.
fn exchange(stream: &mut TcpStream, request: &[u8]) -> u16 {
    stream.write_all(request).unwrap();
    read_answer(stream)
}

/// Reads one whole answer from `stream` (its head and a `Content-Length` body); returns its
/// status.
fn read_answer(stream: &mut TcpStream) -> u16 {
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head_end, length) = loop {
        let read = read_retrying(stream, &mut chunk).unwrap();
        assert!(
            read > 0,
            "closed mid-answer: {:?}",
            String::from_utf8_lossy(&answer)
        );
        answer.extend_from_slice(&chunk[..read]);
        if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map_or(0, |n| n.trim().parse::<usize>().unwrap());
            break (end + 4, length);
        }
    };
    while answer.len() < head_end + length {
        let read = read_retrying(stream, &mut chunk).unwrap();
        assert!(read > 0, "closed mid-body");
        answer.extend_from_slice(&chunk[..read]);
    }
    let status = String::from_utf8_lossy(&answer[..head_end]);
    status.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// One `read` from `stream`, tried again when interrupted: a socket with a read timeout
/// answers `EINTR` after its reader was stopped and continued (signal(7)), which a loaded or
/// checkpointed machine does.
fn read_retrying(stream: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match stream.read(buf) {
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Lets this test process hold `needed` descriptors (its soft `RLIMIT_NOFILE` raised within
/// the hard one); false, after saying why, when the hard limit is lower.
fn hold_descriptors(needed: u64) -> bool {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    if hard < needed {
        support::skip(&format!(
            "the hard descriptor limit ({hard}) is below the {needed} this test holds"
        ));
        return false;
    }
    if limit.current.unwrap_or(u64::MAX) < needed {
        let raised = Rlimit {
            current: Some(needed),
            maximum: limit.maximum,
        };
        setrlimit(Resource::Nofile, raised).unwrap();
    }
    true
}

/// The soft and hard `Max open files` of a live process.
fn open_files_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .unwrap();
    let fields: Vec<&str> = line.split_whitespace().collect();
    (fields[3].to_owned(), fields[4].to_owned())
}

#[test]
fn a_remote_task_completes_beside_2000_idle_and_100_silent_connections_which_are_closed() {
    const IDLE: usize = 2000;
    const SILENT: usize = 100;
    if !hold_descriptors((IDLE + SILENT + 512) as u64) {
        return;
    }
    let server = Server::start_with_login_limits(
        &[json!({"read_user": true}), json!({"result": "served"})],
        &[
            "--listen",
            "127.0.0.1:0",
            "--header-timeout",
            "2s",
            // Longer than the test: the idle connections are the server's to keep.
            "--idle-timeout",
            "1h",
        ],
    );
    let (soft, hard) = open_files_limits(server.child.id());
    assert_eq!(
        soft, hard,
        "serve raised its soft descriptor limit (from 1024)"
    );
    let address = server.url.strip_prefix("http://").unwrap().to_owned();
    // Kept-alive clients that were served once and now say nothing.
    let mut idle: Vec<TcpStream> = (0..IDLE)
        .map(|_| {
            let mut stream = TcpStream::connect(&address).unwrap();
            stream.set_read_timeout(Some(support::DEADLINE)).unwrap();
            assert_eq!(exchange(&mut stream, PROBE), 401);
            stream
        })
        .collect();
    // Connections that never send a byte.
    let silent: Vec<TcpStream> = (0..SILENT)
        .map(|_| TcpStream::connect(&address).unwrap())
        .collect();

    let client = Root::remote();
    let out = client.run(&[
        "remote",
        "--server",
        &server.url,
        "--token-file",
        server.token_file.to_str().unwrap(),
        "--description",
        "beside the crowd",
        "--wait",
        "--",
        "work while others hold connections",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{out:?}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("<status>completed</status>"), "{stdout}");
    assert!(stdout.contains("<result>served</result>"), "{stdout}");

    let deadline = Instant::now() + support::DEADLINE;
    for (n, mut stream) in silent.into_iter().enumerate() {
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        stream.set_read_timeout(Some(left)).unwrap();
        let mut byte = [0u8; 1];
        match read_retrying(&mut stream, &mut byte) {
            Ok(0) => {}
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => {}
            other => panic!("silent connection {n} was not closed by the server: {other:?}"),
        }
    }
    // The established connections were kept, and are served.
    for stream in &mut idle {
        assert_eq!(exchange(stream, PROBE), 401);
    }
    assert_eq!(server.sessions().len(), 1);
}

#[test]
fn beyond_the_connection_cap_a_new_connection_waits_while_established_ones_are_served() {
    let server = Server::start_with(
        &[json!({"result": "x"})],
        &["--listen", "127.0.0.1:0", "--max-connections", "2"],
    );
    let address = server.url.strip_prefix("http://").unwrap().to_owned();
    let connect = || {
        let stream = TcpStream::connect(&address).unwrap();
        stream.set_read_timeout(Some(support::DEADLINE)).unwrap();
        stream
    };
    let (mut first, mut second) = (connect(), connect());
    assert_eq!(exchange(&mut first, PROBE), 401);
    assert_eq!(exchange(&mut second, PROBE), 401);
    // The third waits in the listen queue...
    let mut third = connect();
    third.write_all(PROBE).unwrap();
    // ...while an established one is served.
    assert_eq!(exchange(&mut first, PROBE), 401);
    third.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let unanswered = third.read(&mut byte);
    assert!(
        unanswered
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "the third connection was answered beyond the cap: {unanswered:?}"
    );
    third.set_nonblocking(false).unwrap();
    // A slot frees: the third is served.
    drop(second);
    assert_eq!(read_answer(&mut third), 401);
}

/// The body of a `POST /v1/sessions` on `prompt`.
fn create_body(prompt: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "events": [{"type": "user", "message": {"role": "user", "content": prompt}}]
    }))
    .unwrap()
}

/// `POST /v1/sessions` on `prompt` with the idempotency key `key`.
fn create_with_key(server: &Server, key: &str, prompt: &str) -> (u16, Value) {
    request_with(
        server,
        reqwest::Method::POST,
        "/v1/sessions",
        Some(&server.token),
        Some(create_body(prompt)),
        &[("Idempotency-Key", key)],
    )
}

/// Sends `POST /v1/sessions` on `prompt` with `key` on a connection of its own, which it
/// returns unread.
fn send_create(server: &Server, key: &str, prompt: &str) -> TcpStream {
    let body = create_body(prompt);
    let head = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Idempotency-Key: {key}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n",
        server.token,
        body.len()
    );
    let address = server.url.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .write_all(&[head.as_bytes(), &body].concat())
        .unwrap();
    stream
}

/// The ids of the server's sessions.
fn session_ids(server: &Server) -> Vec<String> {
    let sessions = server.sessions();
    sessions
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_create_repeated_with_its_idempotency_key_makes_one_session_and_another_key_a_second() {
    let server = Server::start(&[json!({"result": "x"})]);
    // The first attempt makes its session, and its connection is closed before the answer is
    // read: the answer is lost.
    let lost = send_create(&server, "key-one", "do it once");
    let made = support::eventually("the session of the lost answer", || {
        let ids = session_ids(&server);
        (ids.len() == 1).then(|| ids[0].clone())
    });
    drop(lost);
    // Retried with the same key (three at once): that session, not another.
    let retries: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let retries: Vec<_> = (0..3)
            .map(|_| scope.spawn(|| create_with_key(&server, "key-one", "do it once")))
            .collect();
        retries.into_iter().map(|r| r.join().unwrap()).collect()
    });
    for (status, session) in &retries {
        assert_eq!(*status, 200, "{session}");
        assert_eq!(session["id"], made.as_str(), "{session}");
    }
    assert_eq!(
        session_ids(&server),
        vec![made.clone()],
        "one session for one key"
    );

    // A first attempt dropped at once, whatever the server made of it, and its retry: one
    // session for the key (the retry's), made by whichever ran first.
    drop(send_create(&server, "key-two", "do it once"));
    let (status, retried) = create_with_key(&server, "key-two", "do it once");
    assert_eq!(status, 200, "{retried}");
    let mut ids = session_ids(&server);
    ids.sort();
    let mut expected = vec![made.clone(), retried["id"].as_str().unwrap().to_owned()];
    expected.sort();
    assert_eq!(ids, expected, "one session per key");

    // Two keys racing: one session each; the same key for another request is refused.
    let answers: Vec<(u16, Value)> = std::thread::scope(|scope| {
        let racing: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| create_with_key(&server, "key-three", "raced")))
            .collect();
        racing.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(answers[0].0, 200, "{answers:?}");
    assert_eq!(answers[0].1["id"], answers[1].1["id"], "{answers:?}");
    assert_eq!(server.sessions().len(), 3, "one session per key");
    let (status, refused) = create_with_key(&server, "key-one", "something else");
    assert_eq!(status, 409, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("key-one")
    );
    let (status, bad) = create_with_key(&server, "two words", "x");
    assert_eq!(status, 400, "{bad}");
    assert_eq!(server.sessions().len(), 3);
}
