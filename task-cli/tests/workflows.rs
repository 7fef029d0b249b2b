//! Workflows through the `tasks` binary: `tasks workflow run|resume|show` with the reference's
//! own script, its agents run by task-agent's scripted `fake-agent` configured as the
//! session's agent CLI (`TASKS_AGENT_COMMAND`); a kill leaves no process of the run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use support::root::TasksRoot;

use serde_json::{Value, json};

/// The reference's workflow script (task-agent keeps the fixtures).
const SCRIPT: &str = include_str!("../../task-workflow/tests/fixtures/workflow/script.js");

/// A session root whose agent CLI is a fake agent answering by prompt (the shared
/// [`TasksRoot`], whose `root`, `path`, `run` and `ok` it offers).
struct Session {
    root: TasksRoot,
    agent_command: String,
}

impl std::ops::Deref for Session {
    type Target = TasksRoot;

    fn deref(&self) -> &TasksRoot {
        &self.root
    }
}

impl Session {
    /// `rules`: (text in the prompt, steps).
    fn new(rules: &[(&str, Value)]) -> Session {
        let root = TasksRoot::new();
        let rules: Vec<Value> = rules
            .iter()
            .map(|(needle, steps)| json!({"if": needle, "steps": steps}))
            .collect();
        let script = root.path("agent.jsonl");
        std::fs::write(
            &script,
            format!(
                "{}\n{}\n",
                json!({"read_user": true}),
                json!({"by_prompt": rules})
            ),
        )
        .unwrap();
        let agent_command = format!(
            "{} --script {}",
            support::fake_agent().display(),
            script.display()
        );
        let root = root
            .env("TASKS_AGENT_COMMAND", &agent_command)
            .env("TASKS_IDLE_EXIT_MS", "2000")
            .env_remove("TASKS_AGENT_RUNNER");
        Session {
            root,
            agent_command,
        }
    }

    fn file(&self, name: &str, text: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    /// Waits until `ps` lists `count` agent tasks (records are mirrored to disk by the
    /// supervisor as events arrive); fails on more.
    fn wait_agents(&self, count: usize) {
        let listed = support::eventually("the agents' records", || {
            let agents = self
                .listed()
                .iter()
                .filter(|t| t["type"] == "local_agent")
                .count();
            (agents >= count).then_some(agents)
        });
        assert_eq!(listed, count);
    }

    fn listed(&self) -> Vec<Value> {
        serde_json::from_str::<Value>(&self.ok(&["ps", "--all", "--json"]))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

fn answer(text: &str) -> Value {
    json!([{"text": text, "usage": {"input_tokens": 1200, "output_tokens": 1}}, {"result": text}])
}

fn fixture_answers() -> Vec<(&'static str, Value)> {
    vec![
        ("scan part A", answer("A=3")),
        ("scan part B", answer("B=4")),
        ("sum A=3,B=4", answer("7")),
        ("total A=3,B=4", answer("seven")),
    ]
}

#[test]
fn run_show_and_resume_the_reference_script() {
    let session = Session::new(&fixture_answers());
    let script = session.file("count.js", SCRIPT);
    let out = session.ok(&["workflow", "run", &script, "--wait"]);
    let mut lines = out.lines();
    let id = lines.next().unwrap().to_owned();
    let run_id = lines.next().unwrap().to_owned();
    assert!(id.starts_with('w') && id.len() == 9, "{out}");
    assert_eq!(run_id, format!("wf_{}", &id[1..]));
    assert!(
        out.contains(
            "<summary>Dynamic workflow \"Count things in two places\" completed</summary>"
        ),
        "{out}"
    );
    assert!(
        out.contains(r#"<result>{"parts":["A=3","B=4"],"total":"7"}</result>"#),
        "{out}"
    );
    assert!(
        out.contains("<usage><agent_count>3</agent_count><subagent_tokens>3603</subagent_tokens>"),
        "{out}"
    );

    // The workflow and its three agents are tasks of the session.
    let listed = session.listed();
    assert!(
        listed
            .iter()
            .any(|t| t["id"] == id.as_str() && t["type"] == "local_workflow"),
        "{listed:?}"
    );
    // Records are mirrored to disk by the supervisor as events arrive: wait for them.
    session.wait_agents(3);

    let tree = session.ok(&["workflow", "show", &run_id]);
    assert!(
        tree.starts_with(&format!(
            "{run_id} count-things [completed] 3 agents, 3603 tokens"
        )),
        "{tree}"
    );
    assert!(tree.contains("├─ Scan\n│  ├─ #1 scan:a [done]"), "{tree}");
    assert!(
        tree.contains("└─ Sum\n   └─ #3 sum [done]") && tree.contains("→ 7\n"),
        "{tree}"
    );

    // Resume with nothing changed: every call from the journal, no new agent.
    let out = session.ok(&["workflow", "resume", &run_id, "--wait"]);
    let resumed = out.lines().nth(1).unwrap().to_owned();
    assert!(
        out.contains(r#"<result>{"parts":["A=3","B=4"],"total":"7"}</result>"#),
        "{out}"
    );
    session.wait_agents(3);
    assert!(
        session
            .ok(&["workflow", "show", &resumed])
            .contains("[completed] 3 agents, 0 tokens")
    );

    // Resume an edited script: only the edited call runs.
    let edited = session.file(
        "edited.js",
        &SCRIPT.replace("'SUBAGENT-MARK sum '", "'SUBAGENT-MARK total '"),
    );
    let out = session.ok(&[
        "workflow", "resume", &resumed, "--script", &edited, "--wait",
    ]);
    assert!(out.contains(r#""total":"seven""#), "{out}");
    session.wait_agents(4);

    // Bad run ids are refused before any path is built.
    for bad in ["wf_../../x", "nope"] {
        assert!(!session.run(&["workflow", "show", bad]).status.success());
        assert!(!session.run(&["workflow", "resume", bad]).status.success());
    }
}

#[test]
fn kill_stops_the_script_and_leaves_no_process() {
    let session = Session::new(&[(
        "",
        json!([{"spawn": "sleep 300"}, {"wait_file": "/nonexistent/never"}]),
    )]);
    let script = session.file(
        "slow.js",
        "export const meta = { name: 'slow', description: 'A slow one' }\n\
        return await parallel([() => agent('one'), () => agent('two')])",
    );
    let out = session.ok(&["workflow", "run", &script]);
    let id = out.lines().next().unwrap().to_owned();
    support::eventually("an agent of the run is running", || {
        session
            .listed()
            .iter()
            .any(|t| t["type"] == "local_agent" && t["status"] == "running")
            .then_some(())
    });
    session.ok(&["kill", &id]);
    let listed = session.listed();
    let workflow = listed.iter().find(|t| t["id"] == id.as_str()).unwrap();
    assert_eq!(workflow["status"], "killed");
    support::eventually("every agent killed", || {
        session
            .listed()
            .iter()
            .filter(|t| t["type"] == "local_agent")
            .all(|t| t["status"] == "killed")
            .then_some(())
    });
    // Nothing of the run is left (agents and the `sleep`s they spawned): only the supervisor
    // itself carries the session's root.
    support::eventually("no agent or child process left", || {
        let left: Vec<i32> = support::processes_of(session.root())
            .into_iter()
            .filter(|pid| !is_supervisor(*pid))
            .collect();
        left.is_empty().then_some(())
    });
}

/// Whether `pid` is the session's `tasks __supervise` process.
fn is_supervisor(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.split(|&b| b == 0).any(|arg| arg == b"__supervise"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_workflow_tool_launches_and_notifies() {
    use rmcp::ServiceExt;
    use rmcp::model::CallToolRequestParams;

    let session = Session::new(&fixture_answers());
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_tasks"));
    command
        .arg("mcp")
        .env("TASKS_ROOT", session.root())
        .env("TASKS_IDLE_EXIT_MS", "2000")
        .env("TASKS_POLL_MS", "10")
        .env_remove("TASKS_SESSION")
        .env_remove("TASKS_AGENT_ID")
        .env_remove("TASKS_AGENT_RUNNER")
        .env("TASKS_AGENT_COMMAND", &session.agent_command);
    let transport = rmcp::transport::TokioChildProcess::new(command).unwrap();
    let client = ().serve(transport).await.unwrap();
    let call = async |tool: &'static str, arguments: Value| {
        let params =
            CallToolRequestParams::new(tool).with_arguments(arguments.as_object().unwrap().clone());
        client.call_tool(params).await.unwrap()
    };

    let tools = client.list_all_tools().await.unwrap();
    let workflow = tools.iter().find(|t| t.name == "Workflow").unwrap();
    let schema = Value::Object((*workflow.input_schema).clone());
    for field in [
        "script",
        "name",
        "description",
        "title",
        "args",
        "scriptPath",
        "resumeFromRunId",
    ] {
        assert!(
            schema["properties"].get(field).is_some(),
            "{field}: {schema}"
        );
    }
    assert_eq!(
        schema["properties"]["resumeFromRunId"]["pattern"],
        "^wf_[a-z0-9-]{6,}$"
    );

    let launched = call("Workflow", json!({"script": SCRIPT})).await;
    let text = launched.content[0].as_text().unwrap().text.clone();
    assert!(
        text.starts_with("Workflow launched in background. Task ID: w"),
        "{text}"
    );
    assert!(
        text.contains("\nSummary: Count things in two places\n"),
        "{text}"
    );
    let id = text["Workflow launched in background. Task ID: ".len()..][..9].to_owned();
    assert!(
        text.contains(&format!("\nRun ID: wf_{}\n", &id[1..])),
        "{text}"
    );
    let output = call(
        "TaskOutput",
        json!({"task_id": id, "block": true, "timeout": 30000}),
    )
    .await;
    let view = &output.structured_content.as_ref().unwrap()["task"];
    assert_eq!(view["status"], "completed", "{output:?}");
    let summary: Value = serde_json::from_str(view["output"].as_str().unwrap()).unwrap();
    assert_eq!(
        summary["result"],
        json!({"parts": ["A=3", "B=4"], "total": "7"})
    );
    client.cancel().await.unwrap();
}

/// The agents `ps` lists that are not terminal.
fn live_agents(session: &Session) -> Vec<String> {
    session
        .listed()
        .iter()
        .filter(|t| t["type"] == "local_agent")
        .filter(|t| matches!(t["status"].as_str(), Some("running" | "pending")))
        .map(|t| format!("{} {}", t["id"], t["status"]))
        .collect()
}

/// Waits until no agent of the session is running or pending and no process of the run is
/// left (the supervisor aside).
fn wait_every_agent_terminal_and_gone(session: &Session) {
    support::eventually("every agent terminal", || {
        live_agents(session).is_empty().then_some(())
    });
    support::eventually("no agent or child process left", || {
        let left: Vec<i32> = support::processes_of(session.root())
            .into_iter()
            .filter(|pid| !is_supervisor(*pid))
            .collect();
        left.is_empty().then_some(())
    });
}

/// How many `agent()` calls the runs below make (the most a run may): the issue saw the fault
/// at 1000.
const MANY: usize = 1000;
/// How many of them run to their end first (one at a time on a two-core machine).
const FINISHED: usize = 200;

fn hold_forever() -> Value {
    json!([{"spawn": "sleep 300"}, {"wait_file": "/nonexistent/never"}])
}

#[test]
fn a_run_of_many_agents_that_ends_with_agents_in_flight_leaves_every_agent_terminal() {
    let session = Session::new(&[("quick", answer("ok")), ("hold", hold_forever())]);
    // Many agents run to their end; then the script returns while some hold their slots and
    // the rest wait for one: the run's end kills the first, and none of the others may start.
    let script = session.file(
        "early.js",
        &format!(
            "export const meta = {{ name: 'early', description: 'Ends early' }}\n\
             const done = await parallel(Array.from({{ length: {FINISHED} }}, (_, i) => () => agent('quick ' + i)))\n\
             const first = agent('quick last')\n\
             for (let i = 0; i < {holds}; i++) agent('hold ' + i)\n\
             await first\n\
             return done.length",
            holds = MANY - FINISHED - 1
        ),
    );
    // Agents deaf to the interrupt: each kill takes the whole grace, a long window for a
    // queued call to start an agent behind the run's back.
    let mut args = vec!["workflow", "run", &script, "--wait", "--", "sh", "-c"];
    args.push("trap '' INT TERM; exec \"$0\" \"$@\"");
    args.extend(session.agent_command.split(' '));
    let started = std::time::Instant::now();
    let out = session.run(&args);
    eprintln!("{MANY} calls: the run ended after {:?}", started.elapsed());
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && printed.contains("completed"),
        "{out:?}"
    );
    wait_every_agent_terminal_and_gone(&session);
    let agents = session
        .listed()
        .iter()
        .filter(|t| t["type"] == "local_agent")
        .count();
    assert!(agents > FINISHED, "{agents} agents listed");
}

#[test]
fn a_killed_run_of_many_agents_leaves_every_agent_terminal() {
    let session = Session::new(&[("hold", hold_forever())]);
    let script = session.file(
        "many.js",
        &format!(
            "export const meta = {{ name: 'many', description: 'Many agents' }}\n\
             return await parallel(Array.from({{ length: {MANY} }}, (_, i) => () => agent('hold ' + i)))"
        ),
    );
    let id = session
        .ok(&["workflow", "run", &script])
        .lines()
        .next()
        .unwrap()
        .to_owned();
    support::eventually("an agent of the run is running", || {
        (!live_agents(&session).is_empty()).then_some(())
    });
    session.ok(&["kill", &id]);
    wait_every_agent_terminal_and_gone(&session);
    let listed = session.listed();
    let workflow = listed.iter().find(|t| t["id"] == id.as_str()).unwrap();
    assert_eq!(workflow["status"], "killed");
}

#[test]
fn a_workflow_script_that_does_not_exist_refuses_the_run_and_leaves_no_task() {
    let session = Session::new(&[]);
    let missing = session.path("nowhere.js");
    let out = session.run(&["workflow", "run", missing.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains(&format!("{}: no such workflow script", missing.display())),
        "{stderr}"
    );
    assert!(
        !stderr.contains("supervisor"),
        "not the supervisor's failure: {stderr}"
    );
    assert!(session.listed().is_empty(), "no task left");
}
