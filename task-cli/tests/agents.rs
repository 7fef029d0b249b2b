//! Agents through the `tasks` binary, with task-agent's scripted `fake-agent` standing in for an
//! agent CLI (it speaks Claude Code's stream-json in and out; no model, no network): start and
//! wait, the reference's completion envelope, `ps` with tokens and tool uses, messages while it
//! works, resume after it stopped (same id, a second notification), kill mid-turn, and the
//! shells an agent started dying with it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use support::agent_sandbox::Sandbox;
use support::{eventually, fake_agent};

use std::path::Path;

use serde_json::{Value, json};

impl Sandbox {
    fn agent(&self, extra: &[&str], script: &str) -> String {
        let fake = fake_agent();
        let mut args = vec!["agent"];
        args.extend_from_slice(extra);
        args.extend(["--", fake.to_str().unwrap(), "--script", script]);
        self.ok(&args).lines().next().unwrap().to_owned()
    }
}

#[test]
fn an_agent_runs_to_its_result_and_a_message_resumes_it_under_the_same_id() {
    let sandbox = Sandbox::for_agents();
    let script = sandbox.script(
        "count.jsonl",
        &[
            json!({"read_user": true}),
            json!({"tool": "Bash", "input": {"command": "ls", "description": "List files"},
                   "usage": {"input_tokens": 1200, "output_tokens": 5}, "output": "a\nb\nc"}),
            json!({"text": "There are 3 files.", "usage": {"input_tokens": 1300, "output_tokens": 7}}),
            json!({"result": "3 files"}),
        ],
    );
    let fake = fake_agent();
    let out = sandbox.run(&[
        "agent",
        "--name",
        "counter",
        "--prompt",
        "count the files",
        "--wait",
        "--",
        fake.to_str().unwrap(),
        "--script",
        &script,
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let id = text.lines().next().unwrap().to_owned();
    assert!(id.starts_with('a'), "{text}");
    for part in [
        "<status>completed</status>",
        "<summary>Agent \"count the files\" finished</summary>",
        "<result>3 files</result>",
        "<tool_uses>1</tool_uses>",
        "<subagent_tokens>1312</subagent_tokens>",
    ] {
        assert!(text.contains(part), "{part} missing in {text}");
    }
    // Its output reads as a conversation; --json gives the transcript as it is.
    let readable = sandbox.ok(&["output", &id]);
    assert!(readable.contains("There are 3 files.\n"), "{readable}");
    assert!(
        readable.contains("  → ") && readable.contains("List files"),
        "{readable}"
    );
    assert!(readable.contains("✓ 3 files\n"), "{readable}");
    assert!(!readable.contains("\"type\""), "{readable}");
    let raw: Value = serde_json::from_str(&sandbox.ok(&["output", &id, "--json"])).unwrap();
    assert!(
        raw["output"]
            .as_str()
            .unwrap()
            .contains("\"type\":\"result\""),
        "{raw}"
    );
    let table = sandbox.ok(&["ps", "--all"]);
    let row = table.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(row.contains("1.3k tokens · 1 tool"), "{row}");
    // What it was doing is over once it stopped (#41.7: its last tool use stayed on the row).
    assert!(!row.contains("List files"), "{row}");

    // A message to the stopped agent, by name, resumes it under the same id.
    let sent = sandbox.ok(&["send", "counter", "and now?"]);
    assert!(sent.contains("resumed it in the background"), "{sent}");
    assert_eq!(
        sandbox.run(&["wait", "--no-deliver", &id]).status.code(),
        Some(0)
    );
    let again = sandbox.ok(&["notifications"]);
    assert!(
        again.contains(&format!("<task-id>{id}</task-id>")),
        "{again}"
    );
    assert!(again.contains("<result>echo: and now?</result>"), "{again}");
}

#[test]
fn a_message_sent_while_the_agent_works_is_its_next_turn() {
    let sandbox = Sandbox::for_agents();
    let go = sandbox.path("go");
    let script = sandbox.script(
        "busy.jsonl",
        &[
            json!({"read_user": true}),
            json!({"text": "working"}),
            json!({"wait_file": go.display().to_string()}),
            json!({"result": "first turn done"}),
        ],
    );
    let id = sandbox.agent(&["--prompt", "work"], &script);
    support::eventually("the agent running", || {
        (sandbox.listed(&id)["status"] == "running").then_some(())
    });
    let sent = sandbox.ok(&["send", &id, "also this"]);
    assert!(sent.contains("queued"), "{sent}");
    std::fs::write(&go, "").unwrap();
    assert_eq!(
        sandbox.run(&["wait", "--no-deliver", &id]).status.code(),
        Some(0)
    );
    let done = sandbox.listed(&id);
    assert_eq!(done["kind"]["agent"]["result"], "echo: also this", "{done}");
    let notices = sandbox.ok(&["notifications"]);
    assert_eq!(
        notices.matches("<task-notification>").count(),
        1,
        "{notices}"
    );
}

#[test]
fn killing_an_agent_mid_turn_ends_its_cli_and_every_shell_it_started() {
    let sandbox = Sandbox::for_agents();
    let never = sandbox.path("never");
    let started = sandbox.path("started");
    let script = sandbox.script(
        "spawner.jsonl",
        &[
            json!({"read_user": true}),
            // The agent starts a background task through the tasks CLI, as it would through
            // `tasks mcp`: TASKS_AGENT_ID in its environment makes the task its own.
            json!({"spawn": format!("tasks run -- sleep 300 > {}", started.display()),
                   "pid_file": sandbox.path("spawn.pid").display().to_string()}),
            json!({"wait_file": never.display().to_string()}),
        ],
    );
    let id = sandbox.agent(&["--prompt", "spawn things"], &script);
    let shell = support::eventually("the agent's shell task", || {
        let text = std::fs::read_to_string(&started).ok()?;
        Some(text.trim().to_owned()).filter(|t| t.len() == 9)
    });
    let owned = support::eventually("the shell running", || {
        let task = sandbox.listed(&shell);
        (task["status"] == "running").then_some(task)
    });
    assert_eq!(owned["agentId"], id.as_str(), "{owned}");

    let killed = sandbox.ok(&["kill", &id]);
    assert_eq!(killed.trim(), format!("{id} killed"));
    assert_eq!(sandbox.listed(&id)["status"], "killed");
    support::eventually("the agent's shell killed with it", || {
        (sandbox.listed(&shell)["status"] == "killed").then_some(())
    });
    let notices = sandbox.ok(&["notifications"]);
    assert!(
        !notices.contains(&id) && !notices.contains(&shell),
        "a killed agent and its shells notify nothing: {notices}"
    );
    // Nothing of the session is left but its supervisor.
    let supervisor: i32 = std::fs::read_to_string(sandbox.path("default/supervisor.lock"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    support::eventually("no process left but the supervisor", || {
        let left: Vec<i32> = support::processes_of(sandbox.root())
            .into_iter()
            .filter(|&pid| pid != supervisor)
            .collect();
        left.is_empty().then_some(())
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn the_mcp_agent_tool_runs_the_configured_cli_and_send_message_resumes_it() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    let sandbox = Sandbox::for_agents();
    let script = sandbox.script(
        "mcp.jsonl",
        &[
            json!({"read_user": true}),
            json!({"text": "looking"}),
            json!({"result": "found it"}),
        ],
    );
    let fake = fake_agent();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_tasks"));
    command
        .arg("mcp")
        .env("TASKS_ROOT", sandbox.root())
        .env("TASKS_IDLE_EXIT_MS", "2000")
        .env("TASKS_POLL_MS", "10")
        .env_remove("TASKS_SESSION")
        .env_remove("TASKS_AGENT_ID")
        .env(
            "TASKS_AGENT_COMMAND",
            format!("{} --script '{script}'", fake.display()),
        );
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client = ().serve(transport).await.unwrap();
    let call = async |tool: &'static str, arguments: Value| {
        let params =
            CallToolRequestParams::new(tool).with_arguments(arguments.as_object().unwrap().clone());
        client.call_tool(params).await.unwrap()
    };
    let text =
        |result: &rmcp::model::CallToolResult| result.content[0].as_text().unwrap().text.clone();

    let tools = client.list_all_tools().await.unwrap();
    let agent = tools.iter().find(|t| t.name == "Agent").unwrap();
    let schema = Value::Object((*agent.input_schema).clone());
    assert_eq!(
        schema["required"],
        json!(["description", "prompt"]),
        "{schema}"
    );
    assert!(schema.to_string().contains("\"fable\""), "{schema}");

    // In the foreground, the answer is the agent's result.
    let answer = call("Agent", json!({"description": "find", "prompt": "find it"})).await;
    assert_eq!(text(&answer), "found it", "{answer:?}");

    // In the background: the reference's launch text, then TaskOutput gives the result.
    let launched = call(
        "Agent",
        json!({"description": "find again", "prompt": "find it", "run_in_background": true}),
    )
    .await;
    let launch = text(&launched);
    assert!(
        launch.starts_with("Async agent launched successfully.\nagentId: "),
        "{launch}"
    );
    let id = launch["Async agent launched successfully.\nagentId: ".len()..][..9].to_owned();
    let output = call(
        "TaskOutput",
        json!({"task_id": id, "block": true, "timeout": 30000}),
    )
    .await;
    let view = &output.structured_content.as_ref().unwrap()["task"];
    assert_eq!(view["status"], "completed", "{output:?}");
    assert_eq!(view["output"], "found it", "{output:?}");

    // SendMessage resumes it under the same id.
    let sent = call("SendMessage", json!({"to": id, "message": "more"})).await;
    let reply: Value = serde_json::from_str(&text(&sent)).unwrap();
    assert_eq!(reply["success"], true, "{reply}");
    assert_eq!(reply["resumedAgentId"], id.as_str(), "{reply}");
    let again = call(
        "TaskOutput",
        json!({"task_id": id, "block": true, "timeout": 30000}),
    )
    .await;
    assert_eq!(
        again.structured_content.as_ref().unwrap()["task"]["output"],
        "echo: more",
        "{again:?}"
    );
    client.cancel().await.unwrap();
}

#[test]
fn a_shell_an_agent_started_through_tasks_mcp_dies_with_the_agent() {
    let sandbox = Sandbox::for_agents();
    let requests = sandbox.path("mcp-in.jsonl");
    let answers = sandbox.path("mcp-out.jsonl");
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "agent", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "Bash", "arguments": {"command": "sleep 301", "run_in_background": true}}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&requests, text).unwrap();
    let script = sandbox.script(
        "mcp-user.jsonl",
        &[
            json!({"read_user": true}),
            // The agent's MCP client: `tasks mcp` on its stdio (kept open while the agent works).
            json!({"spawn": format!(
                "(cat {}; sleep 300) | tasks mcp > {}",
                requests.display(),
                answers.display()
            ), "pid_file": sandbox.path("mcp.pid").display().to_string()}),
            json!({"wait_file": sandbox.path("never").display().to_string()}),
        ],
    );
    let id = sandbox.agent(&["--prompt", "use mcp"], &script);
    let shell = support::eventually("the Bash tool's answer", || {
        let text = std::fs::read_to_string(&answers).ok()?;
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|answer| answer["id"] == 2)
            .and_then(|answer| {
                answer["result"]["structuredContent"]["backgroundTaskId"]
                    .as_str()
                    .map(str::to_owned)
            })
    });
    let owned = support::eventually("the shell running", || {
        let task = sandbox.listed(&shell);
        (task["status"] == "running").then_some(task)
    });
    assert_eq!(owned["agentId"], id.as_str(), "{owned}");
    assert_eq!(sandbox.ok(&["kill", &id]).trim(), format!("{id} killed"));
    support::eventually("the MCP-started shell killed with its agent", || {
        (sandbox.listed(&shell)["status"] == "killed").then_some(())
    });
}

#[test]
fn with_runner_auto_the_command_runs_as_given_and_its_format_is_detected() {
    let sandbox = Sandbox::for_agents();
    let script = sandbox.script(
        "auto.jsonl",
        &[
            json!({"tool": "Read", "input": {"file_path": "/etc/hostname"}}),
            json!({"text": "read it"}),
            json!({"result": "hostname read"}),
        ],
    );
    let fake = fake_agent();
    // The flags are the user's own; the runner adds none (no -p, no stream-json input).
    let out = sandbox.run(&[
        "agent",
        "--runner",
        "auto",
        "--prompt",
        "read the hostname",
        "--wait",
        "--",
        fake.to_str().unwrap(),
        "--script",
        &script,
        "--output-format",
        "stream-json",
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("<result>hostname read</result>"), "{text}");
    assert!(text.contains("<tool_uses>1</tool_uses>"), "{text}");
    let bad = sandbox.run(&["agent", "--runner", "cobol", "--prompt", "x", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("expected claude, codex, gemini or auto")
    );
}

#[test]
fn a_prompt_written_in_the_agent_command_is_its_first_turn_and_given_twice_is_refused() {
    let sandbox = Sandbox::for_agents();
    let script = sandbox.script(
        "in-command.jsonl",
        &[
            json!({"read_user": true}),
            json!({"by_prompt": [
                {"if": "count the files", "steps": [{"text": "counted"}, {"result": "3 files"}]},
                {"if": "", "steps": [{"result": "not the prompt"}]},
            ]}),
        ],
    );
    let fake = fake_agent();
    let script_flag = format!("--script={script}");
    // As a Claude user writes it: `claude -p "…"`, no --prompt.
    let out = sandbox.run(&[
        "agent",
        "--wait",
        "--",
        fake.to_str().unwrap(),
        &script_flag,
        "-p",
        "count the files",
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("<result>3 files</result>"), "{text}");
    assert!(
        text.contains("<summary>Agent \"count the files\" finished</summary>"),
        "{text}"
    );
    let first = text.lines().next().unwrap().to_owned();

    // In the command and with --prompt: refused, naming both; no task is left.
    let both = sandbox.run(&[
        "agent",
        "--prompt",
        "something else",
        "--",
        fake.to_str().unwrap(),
        &script_flag,
        "-p",
        "count the files",
    ]);
    assert_ne!(both.status.code(), Some(0), "{both:?}");
    let error = String::from_utf8_lossy(&both.stderr);
    for part in ["--prompt", "\"something else\"", "\"count the files\""] {
        assert!(error.contains(part), "{part} missing in {error}");
    }
    // Neither: refused, saying where a prompt goes.
    let neither = sandbox.run(&["agent", "--", fake.to_str().unwrap(), &script_flag]);
    assert_ne!(neither.status.code(), Some(0), "{neither:?}");
    assert!(
        String::from_utf8_lossy(&neither.stderr).contains("no prompt"),
        "{neither:?}"
    );
    let tasks: Value = serde_json::from_str(&sandbox.ok(&["ps", "--all", "--json"])).unwrap();
    assert!(
        tasks.as_array().unwrap().iter().all(|t| t["id"] == first),
        "only the first agent: {tasks}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_agent_command_may_come_from_the_sessions_config_file() {
    use rmcp::ServiceExt;

    let sandbox = Sandbox::for_agents();
    let session = sandbox.path("default");
    std::fs::create_dir_all(&session).unwrap();
    std::fs::set_permissions(
        &session,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let config = json!({"agent_command": format!("{} --script x", fake_agent().display()),
                        "agent_runner": "claude"});
    std::fs::write(session.join("config.json"), config.to_string()).unwrap();
    let list_tools = async |config_dir: &Path| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_tasks"));
        command
            .arg("mcp")
            .env("TASKS_ROOT", config_dir)
            .env_remove("TASKS_SESSION")
            .env_remove("TASKS_AGENT_COMMAND")
            .env_remove("TASKS_AGENT_RUNNER");
        let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
        let client = ().serve(transport).await.unwrap();
        let names: Vec<String> = client
            .list_all_tools()
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        client.cancel().await.unwrap();
        names
    };
    assert!(
        list_tools(sandbox.root())
            .await
            .contains(&"Agent".to_owned())
    );
    let unconfigured = tempfile::tempdir().unwrap();
    assert!(
        !list_tools(unconfigured.path())
            .await
            .contains(&"Agent".to_owned())
    );
}

#[test]
fn an_agents_tokens_reach_ps_while_it_works_between_tool_uses() {
    let sandbox = Sandbox::for_agents();
    let never = sandbox.path("never");
    let script = sandbox.script(
        "thinker.jsonl",
        &[
            json!({"read_user": true}),
            // Text and usage, no tool use: no progress event; only the sweep writes it.
            json!({"text": "Thinking it over.", "usage": {"input_tokens": 2100, "output_tokens": 9}}),
            json!({"wait_file": never.display().to_string()}),
        ],
    );
    let id = sandbox.agent(&["--prompt", "think"], &script);
    let listed = support::eventually("the agent's tokens in ps", || {
        let task = sandbox.listed(&id);
        let tokens = &task["kind"]["agent"]["progress"]["tokenCount"];
        (tokens.as_u64() > Some(0)).then_some(task)
    });
    assert_eq!(
        listed["kind"]["agent"]["progress"]["tokenCount"], 2109,
        "{listed}"
    );
    assert_eq!(listed["status"], "running");
    sandbox.ok(&["kill", &id]);
}

/// Kills its pids when dropped, whatever the test's outcome.
struct KillOnDrop(Vec<i32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            support::sigkill(pid);
        }
    }
}

/// Waits until none of `pids` is alive (a zombie counts as gone), failing the test once
/// `deadline` has passed.
fn wait_gone(what: &str, pids: &[i32], deadline: std::time::Instant) {
    let alive = || -> Vec<i32> {
        pids.iter()
            .copied()
            .filter(|&pid| support::is_alive(pid))
            .collect()
    };
    let within = deadline.saturating_duration_since(std::time::Instant::now());
    let gone = support::poll_until(within, || alive().is_empty().then_some(()));
    assert!(gone.is_some(), "{what}: {:?} still alive", alive());
}

#[test]
fn a_killed_agent_that_ignores_sigterm_and_its_setsid_child_are_gone_within_the_grace() {
    let sandbox = Sandbox::for_agents();
    let escapee_pid = sandbox.path("escapee.pid");
    let ready = sandbox.path("ready");
    let script = sandbox.script(
        "stubborn.jsonl",
        &[
            json!({"read_user": true}),
            // A descendant in a session of its own, deaf to every polite signal.
            json!({"spawn": format!(
                "trap '' INT TERM HUP; echo $$ > {}; exec sleep 300",
                escapee_pid.display()
            ), "setsid": true}),
            json!({"touch": ready.display().to_string()}),
            json!({"wait_file": sandbox.path("never").display().to_string()}),
        ],
    );
    // The CLI ignores SIGINT, SIGTERM and SIGHUP (dispositions survive `exec`).
    let fake = fake_agent();
    let id = sandbox
        .ok(&[
            "agent",
            "--prompt",
            "hold on",
            "--",
            "sh",
            "-c",
            "trap '' INT TERM HUP; exec \"$0\" \"$@\"",
            fake.to_str().unwrap(),
            "--script",
            &script,
        ])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let cli = support::eventually("the agent running with its process", || {
        let task = sandbox.listed(&id);
        let pgid = task["kind"]["agent"]["process"]["pgid"].as_i64()?;
        (task["status"] == "running").then_some(i32::try_from(pgid).unwrap())
    });
    support::eventually("the escapee started", || ready.exists().then_some(()));
    let escapee: i32 = support::eventually("the escapee's pid", || {
        std::fs::read_to_string(&escapee_pid)
            .ok()?
            .trim()
            .parse()
            .ok()
    });
    let session_of = |pid: i32| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let fields: Vec<String> = stat
            .rsplit_once(')')
            .unwrap()
            .1
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        fields[3].clone()
    };
    let _leftovers = KillOnDrop(vec![cli, escapee]);
    assert_ne!(
        session_of(escapee),
        session_of(cli),
        "the child left the session"
    );
    assert!(support::is_alive(cli) && support::is_alive(escapee));

    let asked = std::time::Instant::now();
    assert_eq!(sandbox.ok(&["kill", &id]).trim(), format!("{id} killed"));
    // Interrupt, the grace, then SIGKILL of everything: a generous bound on a loaded machine.
    let deadline = asked + task_agent::DEFAULT_KILL_GRACE + std::time::Duration::from_secs(10);
    wait_gone(
        "the agent CLI and its setsid child",
        &[cli, escapee],
        deadline,
    );
    eprintln!("both gone {:?} after the kill was asked", asked.elapsed());
    assert_eq!(sandbox.listed(&id)["status"], "killed");
}

/// `VmHWM` (peak resident set) of `pid` in KiB.
fn peak_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn the_supervisor_stays_under_64_mib_while_an_agent_writes_200_mb_of_stderr_in_one_line() {
    const LINE_BYTES: u64 = 200 * 1000 * 1000;
    let sandbox = Sandbox::for_agents();
    // A running shell keeps the supervisor from its idle exit until the peak is read.
    let keeper = sandbox.ok(&["run", "--", "sleep 300"]).trim().to_owned();
    let script = sandbox.script(
        "noisy.jsonl",
        &[
            json!({"read_user": true}),
            json!({"stderr_fill": {"text": "x", "bytes": LINE_BYTES}}),
            json!({"stderr": "\nprogress 1%\rprogress 2%\rprogress 100%"}),
            json!({"stderr": "fatal: the last words"}),
            json!({"exit": 3}),
        ],
    );
    let id = sandbox.agent(&["--prompt", "shout"], &script);
    let waited = sandbox.run(&["wait", "--no-deliver", &id]);
    assert!(!waited.status.success(), "{waited:?}");
    let supervisor: i32 = std::fs::read_to_string(sandbox.path("default/supervisor.lock"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let peak = peak_rss_kib(supervisor);
    eprintln!("supervisor peak RSS: {peak} KiB after {LINE_BYTES} bytes of stderr in one line");
    assert!(peak < 64 * 1024, "the supervisor peaked at {peak} KiB");
    let agent = sandbox.listed(&id);
    assert_eq!(agent["status"], "failed", "{agent}");
    let error = agent["kind"]["agent"]["error"].as_str().unwrap();
    assert!(
        error.contains("progress 100% / fatal: the last words"),
        "the last lines are kept, the progress bar's last drawing only: {error}"
    );
    assert!(error.len() < 20 * 1024, "{} bytes of error", error.len());
    // Its stderr is kept beside its transcript up to 8MB, then cut once, said so.
    let kept = sandbox.ok(&["output", &id, "--stderr"]);
    assert_eq!(
        kept.len(),
        8 * 1024 * 1024 + "\n[stderr truncated: exceeded 8MB]\n".len()
    );
    assert!(
        kept.ends_with("x\n[stderr truncated: exceeded 8MB]\n"),
        "{}",
        &kept[kept.len() - 80..]
    );
    sandbox.ok(&["kill", &keeper]);
}

#[test]
fn an_agent_cli_that_cannot_be_spawned_refuses_the_start_and_leaves_no_task() {
    let sandbox = Sandbox::for_agents();
    let plain = sandbox.path("plain-file");
    std::fs::write(&plain, "not a program").unwrap();
    for (program, reason) in [
        (
            "nonexistent-cli",
            "nonexistent-cli: No such file or directory",
        ),
        ("./nowhere/cli", "./nowhere/cli: No such file or directory"),
        (plain.to_str().unwrap(), "Permission denied"),
    ] {
        let out = sandbox.run(&["agent", "-p", "do X", "--", program]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{program}: {out:?}");
        assert!(out.stdout.is_empty(), "no id is printed: {out:?}");
        assert!(
            stderr.contains("cannot start agent: ") && stderr.contains(reason),
            "{program}: {stderr}"
        );
    }
    assert_eq!(
        sandbox.ok(&["ps", "--all", "--json"]).trim(),
        "[]",
        "no task left"
    );
}

/// The supervisor's pid and how many tasks it holds in memory ([`support::supervisor_memory`]).
fn supervisor_memory(sandbox: &Sandbox) -> (u32, usize) {
    support::supervisor_memory(sandbox.root())
}

/// Waits until the session's supervisor, which lives on, holds no task in memory.
fn wait_evicted_by_its_supervisor(sandbox: &Sandbox) {
    let (pid, _) = supervisor_memory(sandbox);
    eventually("the stopped agent evicted", || {
        (supervisor_memory(sandbox) == (pid, 0)).then_some(())
    });
}

/// Waits until the supervisor holds no task in memory, then SIGKILLs it.
fn wait_evicted_then_kill_the_supervisor(sandbox: &Sandbox) {
    eventually("the resumed run evicted", || {
        (supervisor_memory(sandbox).1 == 0).then_some(())
    });
    let supervisor = i32::try_from(supervisor_memory(sandbox).0).unwrap();
    // SAFETY: kill(2) on the pid of the supervisor this test's session started.
    assert_eq!(unsafe { libc::kill(supervisor, libc::SIGKILL) }, 0);
}

/// Moves every time of the task's record and its files `by_ms` into the past: a day later, as
/// far as anything of ours can tell.
fn age_task(sandbox: &Sandbox, id: &str, by_ms: u64) {
    let dir = sandbox.path("default/tasks");
    let record_path = dir.join(format!("{id}.json"));
    let mut record: Value =
        serde_json::from_str(&std::fs::read_to_string(&record_path).unwrap()).unwrap();
    for key in ["startTime", "endTime", "evictAfter"] {
        if let Some(ms) = record["task"][key].as_u64() {
            record["task"][key] = json!(ms - by_ms);
        }
    }
    std::fs::write(&record_path, record.to_string()).unwrap();
    let past = std::time::SystemTime::now() - std::time::Duration::from_millis(by_ms);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with(id) {
            let file = std::fs::File::options().append(true).open(&path);
            if let Ok(file) = file {
                file.set_modified(past).unwrap();
            }
        }
    }
}

#[test]
fn a_stopped_agent_resumes_under_its_id_after_eviction_after_a_sigkilled_supervisor_and_a_day_later()
 {
    let sandbox = Sandbox::for_agents()
        .env("TASKS_PANEL_GRACE_MS", "100")
        .env("TASKS_IDLE_EXIT_MS", "60000");
    let script = sandbox.script(
        "once.jsonl",
        &[json!({"read_user": true}), json!({"result": "first"})],
    );
    let id = sandbox.agent(
        &["--name", "keeper", "--prompt", "begin", "--wait"],
        &script,
    );
    let resumed_with = |to: &str, message: &str| {
        let sent = sandbox.ok(&["send", to, message]);
        assert!(sent.contains("resumed it in the background"), "{sent}");
        let waited = sandbox.run(&["wait", "--no-deliver", &id]);
        assert_eq!(waited.status.code(), Some(0), "{waited:?}");
        let notices = sandbox.ok(&["notifications"]);
        assert_eq!(
            notices.matches("<task-notification>").count(),
            1,
            "one more notification: {notices}"
        );
        assert!(
            notices.contains(&format!("<task-id>{id}</task-id>")),
            "{notices}"
        );
        assert!(
            notices.contains(&format!("<result>echo: {message}</result>")),
            "{notices}"
        );
    };
    sandbox.ok(&["notifications"]);

    // 1. Evicted from its supervisor's memory, which lives on: resumed by name.
    wait_evicted_by_its_supervisor(&sandbox);
    resumed_with("keeper", "after eviction");

    // 2. Its supervisor SIGKILLed: the next one takes it back from its record, by id.
    wait_evicted_then_kill_the_supervisor(&sandbox);
    resumed_with(&id, "after a restart");

    // 3. A day later (every time its record and files hold moved back 24 h), by name again.
    eventually("evicted again", || {
        (supervisor_memory(&sandbox).1 == 0).then_some(())
    });
    let supervisor = i32::try_from(supervisor_memory(&sandbox).0).unwrap();
    // SAFETY: as above.
    assert_eq!(unsafe { libc::kill(supervisor, libc::SIGKILL) }, 0);
    age_task(&sandbox, &id, 24 * 3600 * 1000);
    resumed_with("keeper", "a day later");
    let task = sandbox.listed(&id);
    assert_eq!(task["status"], "completed", "{task}");
    // Its age counts from its first start, not from the resume (#41.7).
    let now = task_core::now_ms();
    let created = task["startTime"].as_u64().unwrap();
    assert!(
        now - created > 23 * 3600 * 1000,
        "created {created}, now {now}: {task}"
    );
    let all: Value = serde_json::from_str(&sandbox.ok(&["ps", "--all", "--json"])).unwrap();
    assert_eq!(
        all.as_array().unwrap().len(),
        1,
        "one task all along: {all}"
    );
}

/// A Gemini-format agent named `gem` that says `done`, ends its turn, then runs `after` (more
/// fake-agent steps), run with `tasks agent --wait`; what that printed.
fn gemini_agent_waited(sandbox: &Sandbox, after: &[Value]) -> String {
    let raw = |line: Value| json!({"raw": line.to_string()});
    let at = "2025-10-10T12:00:00.000Z";
    let mut steps = vec![
        raw(json!({"type": "init", "timestamp": at, "session_id": "g1", "model": "gemini"})),
        raw(json!({"type": "message", "role": "assistant", "content": "done", "timestamp": at})),
        raw(
            json!({"type": "result", "status": "success", "timestamp": at,
                   "stats": {"total_tokens": 3, "input_tokens": 2, "output_tokens": 1}}),
        ),
    ];
    steps.extend_from_slice(after);
    let script = sandbox.script("gemini.jsonl", &steps);
    let fake = fake_agent();
    sandbox.ok(&[
        "agent",
        "--runner",
        "gemini",
        "--name",
        "gem",
        "--prompt",
        "begin",
        "--wait",
        "--",
        fake.to_str().unwrap(),
        "--script",
        &script,
    ])
}

#[test]
fn agent_wait_returns_with_the_notification_even_when_the_cli_lingers_after_its_result() {
    // The real Gemini CLI goes on for a while after its result; its notice follows its exit
    // (here the agent's kill grace, 2 s, then the kill), long after a sweep interval.
    let sandbox = Sandbox::for_agents();
    let never = sandbox.path("never");
    let out = gemini_agent_waited(
        &sandbox,
        &[json!({"wait_file": never.display().to_string()})],
    );
    assert!(
        out.contains("<task-notification>"),
        "the envelope printed: {out}"
    );
    assert!(out.contains("<status>completed</status>"), "{out}");
}

#[test]
fn a_stopped_gemini_agent_is_refused_a_message_and_its_notification_promises_no_resume() {
    let sandbox = Sandbox::for_agents().env("TASKS_PANEL_GRACE_MS", "100");
    let out = gemini_agent_waited(&sandbox, &[]);
    let id = out.lines().next().unwrap().to_owned();
    assert!(out.contains("<status>completed</status>"), "{out}");
    let note = out
        .split("<note>")
        .nth(1)
        .and_then(|rest| rest.split("</note>").next())
        .unwrap_or_else(|| panic!("a note: {out}"));
    assert!(
        !note.contains("send it another message and resume it"),
        "no promise of a resume: {note}"
    );
    assert!(note.contains("cannot resume"), "{note}");
    // Refused by a task that exists: any other error (70), not unknown task (66).
    let refused = |to: &str| {
        let sent = sandbox.run(&["send", to, "more"]);
        assert_eq!(sent.status.code(), Some(70), "{sent:?}");
        let said = String::from_utf8_lossy(&sent.stderr);
        assert!(said.starts_with("tasks: "), "{said}");
        assert!(said.contains("the gemini runner cannot resume"), "{said}");
    };
    // Held by its supervisor, then taken from its record once evicted.
    refused("gem");
    wait_evicted_by_its_supervisor(&sandbox);
    refused(&id);
    refused("gem");
    assert_eq!(sandbox.listed(&id)["status"], "completed");
}

/// `tasks ARGS…` with `TASKS_TEST_COLOR=color` in its environment (and so in the environment
/// of a supervisor it starts); its stdout.
fn in_color(sandbox: &Sandbox, color: &str, args: &[&str]) -> String {
    let mut command = sandbox.command(args);
    command.env("TASKS_TEST_COLOR", color);
    let out = command.output().unwrap();
    assert!(out.status.success(), "tasks {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn a_resumed_agent_runs_in_the_environment_it_was_started_with_whoever_sends_and_whichever_supervisor()
 {
    let sandbox = Sandbox::for_agents()
        .env("TASKS_PANEL_GRACE_MS", "100")
        .env("TASKS_IDLE_EXIT_MS", "60000")
        .env("FAKE_AGENT_ECHO_ENV", "TASKS_TEST_COLOR");
    let script = sandbox.script(
        "once.jsonl",
        &[json!({"read_user": true}), json!({"result": "first"})],
    );
    // The supervisor starts green; the agent is started red.
    in_color(&sandbox, "green", &["run", "--", "true"]);
    let fake = fake_agent();
    let started = in_color(
        &sandbox,
        "red",
        &[
            "agent",
            "--name",
            "painter",
            "--prompt",
            "begin",
            "--wait",
            "--",
            fake.to_str().unwrap(),
            "--script",
            &script,
        ],
    );
    let id = started.lines().next().unwrap().to_owned();
    sandbox.ok(&["notifications"]);
    let resumed_by_blue = |to: &str, message: &str| {
        let sent = in_color(&sandbox, "blue", &["send", to, message]);
        assert!(sent.contains("resumed it in the background"), "{sent}");
        let waited = sandbox.run(&["wait", "--no-deliver", &id]);
        assert_eq!(waited.status.code(), Some(0), "{waited:?}");
        let notices = sandbox.ok(&["notifications"]);
        assert!(
            notices.contains(&format!(
                "<result>echo: {message} [TASKS_TEST_COLOR=red]</result>"
            )),
            "the resumed CLI ran in another environment than its start's: {notices}"
        );
    };

    // 1. Evicted from the green supervisor's memory; a blue sender resumes it.
    wait_evicted_by_its_supervisor(&sandbox);
    resumed_by_blue("painter", "after eviction");

    // 2. The supervisor SIGKILLed: the blue sender starts the next one, which resumes it.
    wait_evicted_then_kill_the_supervisor(&sandbox);
    resumed_by_blue(&id, "after a restart");
}

#[test]
fn a_failed_agents_notification_says_the_first_line_that_said_why_and_its_whole_stderr_is_kept() {
    let sandbox = Sandbox::for_agents();
    let mut steps = vec![
        json!({"read_user": true}),
        json!({"stderr": "Error: thread/resume failed: no rollout found"}),
        json!({"stderr": "stack backtrace:"}),
    ];
    steps.extend((0..30).map(|n| json!({"stderr": format!("  {n}: <unknown>")})));
    steps.push(json!({"exit": 1}));
    let script = sandbox.script("crash.jsonl", &steps);
    let waited = sandbox.run(&[
        "agent",
        "--prompt",
        "go",
        "--wait",
        "--",
        fake_agent().to_str().unwrap(),
        "--script",
        &script,
    ]);
    let said = String::from_utf8_lossy(&waited.stdout);
    let notices = format!("{said}{}", sandbox.ok(&["notifications"]));
    assert!(
        notices.contains("Error: thread/resume failed: no rollout found"),
        "the line that said why is kept: {notices}"
    );
    assert!(
        notices.contains("29: &lt;unknown&gt;"),
        "and the tail: {notices}"
    );
    // The whole stderr is kept beside the transcript.
    let id = said.lines().next().unwrap();
    let stderr = sandbox.ok(&["output", id, "--stderr"]);
    let mut expected =
        String::from("Error: thread/resume failed: no rollout found\nstack backtrace:\n");
    expected.extend((0..30).map(|n| format!("  {n}: <unknown>\n")));
    assert_eq!(stderr, expected);
    let shell = sandbox.ok(&["run", "--", "true"]);
    let refused = sandbox.run(&["output", shell.trim(), "--stderr"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("keeps no stderr"));
}
