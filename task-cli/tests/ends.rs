//! How tasks end, through the `tasks` binary: end hooks (a command from `config.json` or
//! `--on-end`) run exactly once at every end of every task type (completed, failed, killed,
//! and ended as orphans by the supervisor that replaces a `SIGKILL`ed one; remote agents in
//! `remote.rs`), with the task in their environment, and a hook that hangs is killed at its
//! timeout without holding up the task's notification; strays (what a shell or an agent's
//! tools leave running: reported, or killed); budgets of agents, teammates and workflow
//! agents, and the session's token budget they share.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::agent_sandbox::Sandbox;
use support::gate::Gate;
use support::hooks::{appending_hook, assert_hooked_once, hook_lines, hooked};
use support::{eventually, fake_agent, is_alive, sigkill};

impl Sandbox {
    fn started(&self, args: &[&str]) -> String {
        self.ok(args).lines().next().unwrap().trim().to_owned()
    }

    fn agent(&self, extra: &[&str], script: &str) -> String {
        let fake = fake_agent();
        let mut args = vec!["agent", "--prompt", "work"];
        args.extend_from_slice(extra);
        args.extend(["--", fake.to_str().unwrap(), "--script", script]);
        self.started(&args)
    }

    /// Spawns teammate `member` (`name@team`) running `script` with `extra` flags; its id.
    fn teammate(&self, member: &str, extra: &[&str], script: &str) -> String {
        let fake = fake_agent();
        let mut args = vec!["team", "spawn", member];
        args.extend_from_slice(extra);
        args.extend(["--", fake.to_str().unwrap(), "--script", script]);
        self.started(&args)
    }

    fn status(&self, id: &str) -> Value {
        let all = self.json(&["ps", "--all"]);
        all.as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .map(|t| t["status"].clone())
            .unwrap_or(Value::Null)
    }

    fn running(&self, id: &str) {
        eventually(&format!("{id} running"), || {
            (self.status(id) == "running").then_some(())
        });
    }

    /// The task's record as the supervisor wrote it.
    fn record(&self, id: &str) -> Value {
        let bytes = std::fs::read(self.path(&format!("default/tasks/{id}.json"))).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    fn supervisor_pid(&self) -> i32 {
        let text = std::fs::read_to_string(self.path("default/supervisor.lock")).unwrap();
        text.trim().parse().unwrap()
    }

    fn never_ending_agent(&self, name: &str, extra: &[&str]) -> String {
        let script = self.script(
            &format!("{name}.jsonl"),
            &[
                json!({"read_user": true}),
                json!({"wait_file": self.path("never").display().to_string()}),
            ],
        );
        self.agent(extra, &script)
    }
}

/// A session (a new supervisor may take a while to reap what the last one left: seconds
/// with tens of thousands of processes) whose `config.json` runs [`appending_hook`] at every
/// end; with the hook's file.
fn with_session_hook() -> (Sandbox, std::path::PathBuf) {
    let sandbox = Sandbox::for_agents().env("TASKS_START_TIMEOUT_MS", "60000");
    let file = sandbox.path("ends.txt");
    std::fs::create_dir_all(sandbox.path("default")).unwrap();
    let config = json!({ "on_end": appending_hook(&file) });
    std::fs::write(sandbox.path("default/config.json"), config.to_string()).unwrap();
    (sandbox, file)
}

#[test]
fn the_configured_hook_runs_once_for_every_end_of_shells_and_agents() {
    let (sandbox, file) = with_session_hook();

    let done = sandbox.started(&["run", "-d", "it's done", "--", "true"]);
    let failed = sandbox.started(&["run", "--", "exit 3"]);
    let killed = sandbox.started(&["run", "--", "sleep 300"]);
    let answering = sandbox.script(
        "answer.jsonl",
        &[json!({"read_user": true}), json!({"result": "answered"})],
    );
    let agent_done = sandbox.agent(&[], &answering);
    let crashing = sandbox.script(
        "crash.jsonl",
        &[json!({"read_user": true}), json!({"exit": 2})],
    );
    let agent_failed = sandbox.agent(&[], &crashing);
    let agent_killed = sandbox.never_ending_agent("hang", &[]);
    sandbox.running(&killed);
    sandbox.running(&agent_killed);
    sandbox.ok(&["kill", &killed, &agent_killed]);

    let ids = [
        &done,
        &failed,
        &killed,
        &agent_done,
        &agent_failed,
        &agent_killed,
    ]
    .map(String::as_str);
    let lines = hooked(&file, &ids);
    let first = |id: &str| lines[id][0].clone();
    let done_line = first(&done);
    assert!(
        done_line.starts_with("completed exit 0|local_bash|it's done|"),
        "{done_line}"
    );
    let output = done_line.rsplit('|').next().unwrap();
    assert!(Path::new(output).exists(), "{done_line}");
    assert!(
        first(&failed).starts_with("failed exit 3|local_bash|"),
        "{lines:?}"
    );
    assert!(
        first(&killed).starts_with("killed killed|local_bash|"),
        "{lines:?}"
    );
    assert!(
        first(&agent_done).starts_with("completed done|local_agent|work|"),
        "{lines:?}"
    );
    assert!(first(&agent_failed).starts_with("failed "), "{lines:?}");
    assert!(
        first(&agent_killed).starts_with("killed killed|local_agent|"),
        "{lines:?}"
    );
    let log = std::fs::read_to_string(sandbox.path("default/hooks.log")).unwrap();
    assert!(
        log.contains(&format!("{done} on-end hook exited 0")),
        "{log}"
    );

    // A supervisor killed now, and the one that replaces it, run none of them again: the next
    // task's hook runs after the new supervisor looked at every ended record.
    sigkill(sandbox.supervisor_pid());
    let next = sandbox.started(&["run", "--", "true"]);
    let lines = hooked(&file, &[&next]);
    for id in ids.iter().chain([&next.as_str()]) {
        assert_eq!(lines[*id].len(), 1, "{id} hooked once: {lines:?}");
    }
    assert_eq!(lines.len(), ids.len() + 1, "{lines:?}");
}

/// A workflow of one agent.
const FLOW: &str =
    "export const meta = { name: 'one', description: 'one agent' }\nreturn await agent('go')\n";

/// A workflow that throws before it starts any agent.
const THROWING_FLOW: &str =
    "export const meta = { name: 'throws', description: 'fails' }\nthrow new Error('boom')\n";

#[test]
fn the_configured_hook_runs_once_for_every_end_of_monitors_teammates_workflows_and_dreams() {
    let (sandbox, file) = with_session_hook();
    let fake = fake_agent();
    let fake = fake.to_str().unwrap();
    let read = json!({"read_user": true});
    let answering = sandbox.script("answer.jsonl", &[read.clone(), json!({"result": "done"})]);
    let never = json!({"wait_file": sandbox.path("never").display().to_string()});
    let waiting = sandbox.script("wait.jsonl", &[read.clone(), never]);
    let crashing = sandbox.script("crash.jsonl", &[read.clone(), json!({"exit": 2})]);
    let mate = json!({"teammate": true});
    let teammate = sandbox.script("mate.jsonl", &[read, json!({"result": "ready"}), mate]);
    let flow = sandbox.path("flow.js");
    std::fs::write(&flow, FLOW).unwrap();
    let flow = flow.display().to_string();
    let lock = sandbox
        .path("memory/.consolidate-lock")
        .display()
        .to_string();
    let with_agent = |args: &[&str], script: &str| {
        sandbox.started(&[args, &["--", fake, "--script", script]].concat())
    };

    let monitor_done = sandbox.started(&["monitor", "--", "echo event"]);
    let monitor_failed = sandbox.started(&["monitor", "--", "exit 3"]);
    let persistent = ["monitor", "--persistent", "--", "sleep 300"];
    let (monitor_killed, monitor_orphan) =
        (sandbox.started(&persistent), sandbox.started(&persistent));
    let spawn = |member: &str, script: &str| with_agent(&["team", "spawn", member], script);
    let mate_done = spawn("done@crew", &teammate);
    let mate_killed = spawn("killed@crew", &waiting);
    let mate_survivor = spawn("survivor@crew", &waiting);
    let workflow = |script: &str| with_agent(&["workflow", "run", &flow], script);
    let (flow_done, flow_killed) = (workflow(&answering), workflow(&waiting));
    let throwing = sandbox.path("throw.js");
    std::fs::write(&throwing, THROWING_FLOW).unwrap();
    let flow_failed = with_agent(&["workflow", "run", throwing.to_str().unwrap()], &answering);
    let flow_orphan = workflow(&waiting);
    let dream = |script: &str| with_agent(&["dream", "--lock", &lock], script);
    // One dream at a time holds the consolidation lock.
    let dream_done = dream(&answering);
    hooked(&file, &[&dream_done]);
    let dream_failed = dream(&crashing);
    hooked(&file, &[&dream_failed]);
    let dream_killed = dream(&waiting);
    sandbox.running(&dream_killed);
    sandbox.ok(&["kill", &dream_killed]);
    let dream_orphan = dream(&waiting);
    let killed = [&monitor_killed, &mate_killed, &flow_killed];
    for id in killed
        .iter()
        .chain([&monitor_orphan, &mate_survivor, &flow_orphan, &dream_orphan].iter())
    {
        sandbox.running(id);
    }
    eventually("the teammate idle", || {
        let rows = sandbox.json(&["team", "ls"]);
        let row = rows
            .as_array()?
            .iter()
            .find(|r| r["id"] == mate_done.as_str())?;
        (row["activity"] == "idle").then_some(())
    });
    sandbox.ok(&["team", "shutdown", "done@crew"]);
    sandbox.ok(&[&["kill"], killed.map(String::as_str).as_slice()].concat());
    let ended = [
        (&monitor_done, "completed", "monitor_mcp"),
        (&monitor_failed, "failed", "monitor_mcp"),
        (&monitor_killed, "killed killed", "monitor_mcp"),
        (&mate_done, "completed", "in_process_teammate"),
        (&mate_killed, "killed killed", "in_process_teammate"),
        (&flow_done, "completed", "local_workflow"),
        (&flow_failed, "failed", "local_workflow"),
        (&flow_killed, "killed killed", "local_workflow"),
        (&dream_done, "completed", "dream"),
        (&dream_failed, "failed", "dream"),
        (&dream_killed, "killed killed", "dream"),
    ]
    .map(|(id, start, kind)| (id.as_str(), start, kind));
    let lines = hooked(&file, &ended.map(|(id, ..)| id));
    assert_hooked_once(&lines, &ended);

    // A supervisor SIGKILLed: the next one ends the orphans once, and resumes the teammate,
    // whose one end is its kill.
    sigkill(sandbox.supervisor_pid());
    let next = sandbox.started(&["run", "--", "true"]);
    sandbox.running(&mate_survivor);
    sandbox.ok(&["kill", &mate_survivor]);
    let orphans = [
        (&monitor_orphan, "failed supervisor died", "monitor_mcp"),
        (&flow_orphan, "failed supervisor died", "local_workflow"),
        (&dream_orphan, "failed supervisor died", "dream"),
        (&mate_survivor, "killed killed", "in_process_teammate"),
        (&next, "completed exit 0", "local_bash"),
    ]
    .map(|(id, start, kind)| (id.as_str(), start, kind));
    let lines = hooked(&file, &orphans.map(|(id, ..)| id));
    assert_hooked_once(&lines, &[&ended[..], &orphans[..]].concat());

    // Yet another supervisor runs none again; every task that ended (the workflows' agents
    // too) got one line, with its status and type.
    sigkill(sandbox.supervisor_pid());
    let last = sandbox.started(&["run", "--", "true"]);
    let lines = hooked(&file, &[&last]);
    let all = sandbox.json(&["ps", "--all"]);
    let listed = all.as_array().unwrap();
    for task in listed {
        let id = task["id"].as_str().unwrap();
        let (status, kind) = (
            task["status"].as_str().unwrap(),
            task["type"].as_str().unwrap(),
        );
        assert_hooked_once(&lines, &[(id, status, kind)]);
    }
    assert_eq!(lines.len(), listed.len(), "{lines:?}");
}

#[test]
fn a_hook_given_to_a_task_replaces_the_session_hook_and_runs_once_after_a_supervisor_sigkill() {
    // A new supervisor reaps the orphans before it answers, which scans every process of the
    // machine (seconds with tens of thousands of them).
    let sandbox = Sandbox::for_agents().env("TASKS_START_TIMEOUT_MS", "60000");
    let own = sandbox.path("own.txt");
    let session = sandbox.path("session.txt");
    let sandbox = sandbox.env("TASKS_ON_END", appending_hook(&session));
    let hook = appending_hook(&own);
    let shell = sandbox.started(&["run", "--on-end", &hook, "--", "sleep 300"]);
    let agent = sandbox.never_ending_agent("hang", &["--on-end", &hook]);
    let plain = sandbox.started(&["run", "--", "sleep 300"]);
    for id in [&shell, &agent, &plain] {
        sandbox.running(id);
    }
    sigkill(sandbox.supervisor_pid());
    // The next supervisor records the orphans' ends and runs their hooks, once.
    let next = sandbox.started(&["run", "--", "true"]);
    let own_lines = hooked(&own, &[&shell, &agent]);
    let session_lines = hooked(&session, &[&plain, &next]);
    for (lines, ids) in [
        (&own_lines, [&shell, &agent]),
        (&session_lines, [&plain, &next]),
    ] {
        assert_eq!(lines.len(), 2, "{lines:?}");
        for id in ids {
            assert_eq!(lines[id.as_str()].len(), 1, "{id} hooked once: {lines:?}");
        }
    }
    for id in [&shell, &agent, &plain] {
        let lines = if id == &plain {
            &session_lines
        } else {
            &own_lines
        };
        let line = &lines[id.as_str()][0];
        assert!(line.starts_with("failed supervisor died|"), "{line}");
    }
    // Yet another supervisor runs none of them again.
    sigkill(sandbox.supervisor_pid());
    let last = sandbox.started(&["run", "--", "true"]);
    let session_lines = hooked(&session, &[&last]);
    assert_eq!(session_lines.len(), 3, "{session_lines:?}");
    assert_eq!(hook_lines(&own), own_lines);
}

#[test]
fn a_hanging_hook_is_killed_at_its_timeout_and_never_holds_up_the_notification() {
    let sandbox = Sandbox::for_agents().env("TASKS_ON_END_TIMEOUT_MS", "1000");
    let pid_file = sandbox.path("hook.pid");
    let hook = format!("echo $$ > '{}'; sleep 300; echo never", pid_file.display());
    let id = sandbox.started(&["run", "--on-end", &hook, "--", "echo hi"]);
    // `wait` delivers the completion.
    let waited = sandbox.run(&["wait", &id]);
    assert_eq!(waited.status.code(), Some(0));
    let notice = String::from_utf8(waited.stdout).unwrap();
    assert!(
        notice.contains(&id) && notice.contains("completed"),
        "{notice}"
    );
    let hook_pid: i32 = eventually("the hook's pid", || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    eventually("the hook killed", || (!is_alive(hook_pid)).then_some(()));
    let log = eventually("the hook's end logged", || {
        let log = std::fs::read_to_string(sandbox.path("default/hooks.log")).ok()?;
        log.contains("killed after its timeout").then_some(log)
    });
    assert!(
        log.contains(&format!("{id} on-end hook killed after its timeout of 1s")),
        "{log}"
    );
    assert!(!log.contains("never"), "{log}");
}

/// The high-water mark of resident memory of process `pid` (`VmHWM`), in KiB.
fn peak_resident_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_hook_that_writes_20_mb_is_read_through_pipe_mode_in_bounded_memory() {
    let sandbox = Sandbox::for_agents();
    // A supervisor kept alive by a task: its peak memory before any hook ran.
    let keeper = sandbox.started(&["run", "--", "sleep 300"]);
    sandbox.running(&keeper);
    let supervisor = sandbox.supervisor_pid();
    let before = peak_resident_kib(supervisor);
    // 20 MB of 50-byte lines on stdout, a line on stderr, then the last line.
    let hook = "yes 0123456789012345678901234567890123456789012345678 | head -c 20000000; \
                echo; echo to stderr >&2; echo the last line";
    let id = sandbox.started(&["run", "--on-end", hook, "--", "true"]);
    let log = eventually("the hook's end logged", || {
        let log = std::fs::read_to_string(sandbox.path("default/hooks.log")).ok()?;
        log.contains(&format!("{id} on-end hook ")).then_some(log)
    });
    assert!(log.contains(&format!("{id} on-end hook exited 0")), "{log}");
    // Shown: the recent lines and where the whole output is, not 20 MB.
    assert!(log.len() < 64 * 1024, "the log holds {} bytes", log.len());
    assert!(log.contains("\nthe last line\n"), "{log}");
    let saved = log
        .split("Full output saved to: ")
        .nth(1)
        .and_then(|rest| rest.lines().next())
        .unwrap_or_else(|| panic!("no spill named: {log}"));
    let spilled = std::fs::read(saved).unwrap();
    assert!(
        spilled.len() > 20_000_000,
        "{} bytes spilled",
        spilled.len()
    );
    // Both streams, in the order read (two pipes: either may come first at the end).
    for end in [&b"\nthe last line\n"[..], b"[stderr] to stderr\n"] {
        assert!(spilled.windows(end.len()).any(|w| w == end));
    }
    assert!(Path::new(saved).starts_with(sandbox.path("default/tasks")));
    // Memory: what pipe mode keeps (8 MiB, and 1 MiB of recent lines), never the whole output.
    let grew = peak_resident_kib(supervisor).saturating_sub(before);
    assert!(grew < 16 * 1024, "the supervisor's peak grew by {grew} KiB");
    assert_eq!(
        sandbox.supervisor_pid(),
        supervisor,
        "one supervisor throughout"
    );
    sandbox.ok(&["kill", &keeper]);
    // Delivered, the task is removed with its spilled hook output.
    sandbox.ok(&["wait", &id]);
    sandbox.ok(&["rm", &id]);
    assert!(!Path::new(saved).exists(), "{saved} left after rm");
}

/// A shell command that leaves two daemons behind, a `setsid` one and a double-forked one,
/// each writing its pid to a file of `sandbox`; it ends once both have; with the files.
fn leaving_daemons(sandbox: &Sandbox) -> (String, [std::path::PathBuf; 2]) {
    let files = [sandbox.path("setsid.pid"), sandbox.path("forked.pid")];
    let (a, b) = (files[0].display(), files[1].display());
    let command = format!(
        "setsid sh -c 'echo $$ > {a}.new; mv {a}.new {a}; exec sleep 301' & \
         (sh -c 'echo $$ > {b}.new; mv {b}.new {b}; exec sleep 302' &); \
         until [ -s {a} ] && [ -s {b} ]; do sleep 0.01; done; echo started"
    );
    (command, files)
}

impl Sandbox {
    /// Asserts that `tasks strays` lists `pids`, each left by `id`, and nothing else; the
    /// listing.
    fn strays_are(&self, pids: &[i32], id: &str) -> Value {
        let listed = self.json(&["strays"]);
        let mut rows: Vec<(i64, String)> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|row| {
                let task = row["task"].as_str().unwrap().to_owned();
                (row["pid"].as_i64().unwrap(), task)
            })
            .collect();
        rows.sort();
        let mut expected: Vec<(i64, String)> = pids
            .iter()
            .map(|&pid| (i64::from(pid), id.to_owned()))
            .collect();
        expected.sort();
        assert_eq!(rows, expected, "{listed}");
        listed
    }
}

fn read_pids(files: &[std::path::PathBuf; 2]) -> [i32; 2] {
    files.clone().map(|file| {
        eventually("a daemon's pid", || {
            std::fs::read_to_string(&file).ok()?.trim().parse().ok()
        })
    })
}

#[test]
fn daemons_left_by_a_finished_shell_are_named_listed_and_killed_by_kill_strays() {
    let sandbox = Sandbox::for_agents();
    let (command, files) = leaving_daemons(&sandbox);
    let id = sandbox.started(&["run", "--", &command]);
    let pids = read_pids(&files);
    assert_eq!(sandbox.run(&["wait", &id]).status.code(), Some(0));
    let record = sandbox.record(&id);
    let summary = record["notification"]["notification"]["summary"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(summary.contains("left 2 processes running: "), "{record}");
    for pid in pids {
        assert!(summary.contains(&format!("{pid} `")), "{pid} in {summary}");
    }
    let listed = sandbox.strays_are(&pids, &id);
    assert!(listed[0]["rssBytes"].as_u64().unwrap() > 0, "{listed}");
    assert!(sandbox.ok(&["strays", &id]).contains("sleep 30"));

    let killed = sandbox.ok(&["kill", "--strays", &id]);
    assert_eq!(killed.trim(), format!("{id} killed 2 strays"));
    for pid in pids {
        eventually("the stray gone", || (!is_alive(pid)).then_some(()));
    }
    assert_eq!(sandbox.json(&["strays"]), json!([]));
    assert_eq!(sandbox.ok(&["kill", "--all-strays"]), "");
}

#[test]
fn under_strays_kill_the_daemons_a_shell_leaves_die_when_it_ends() {
    let sandbox = Sandbox::for_agents();
    let (command, files) = leaving_daemons(&sandbox);
    let id = sandbox.started(&["run", "--strays", "kill", "--", &command]);
    let pids = read_pids(&files);
    let waited = sandbox.run(&["wait", &id]);
    assert_eq!(waited.status.code(), Some(0));
    for pid in pids {
        eventually("the stray killed", || (!is_alive(pid)).then_some(()));
    }
    let record = sandbox.record(&id);
    let summary = record["notification"]["notification"]["summary"].to_string();
    assert!(
        summary.contains("left 2 processes running, killed: "),
        "{record}"
    );
    assert!(record.get("strays").is_none(), "{record}");
    assert_eq!(sandbox.json(&["strays"]), json!([]));
}

/// An agent's steps that leave two daemons, a `setsid` one and a double-forked one, whose
/// pids go to `{name}.setsid.pid` and `{name}.forked.pid`, and go on once both run; with
/// those files. Like a real agent's tools' daemons they do not keep the CLI's stderr (the
/// fake agent's `spawn` passes it on): one that did would hold the end of its agent up to
/// the kill grace, whose cancel kills it whatever the stray policy.
fn daemonizing(sandbox: &Sandbox, name: &str) -> (Vec<Value>, [std::path::PathBuf; 2]) {
    let files = ["setsid", "forked"].map(|how| sandbox.path(&format!("{name}.{how}.pid")));
    let forked = files[1].display();
    let steps = vec![
        json!({"read_user": true}),
        json!({"spawn": "exec sleep 305 2>/dev/null", "setsid": true,
               "pid_file": files[0].display().to_string()}),
        json!({"spawn": format!(
            "(sh -c 'echo $$ > {forked}; exec sleep 306' 2>/dev/null &)"
        )}),
        json!({"wait_file": forked.to_string()}),
    ];
    (steps, files)
}

#[test]
fn the_daemons_an_agent_s_tools_leave_die_with_it_unless_it_asks_to_report_them() {
    let sandbox = Sandbox::for_agents();
    let never = json!({"wait_file": sandbox.path("never").display().to_string()});
    let done = json!({"result": "done"});
    let start = |name: &str, last: &Value, extra: &[&str]| {
        let (mut steps, files) = daemonizing(&sandbox, name);
        steps.push(last.clone());
        let script = sandbox.script(&format!("{name}.jsonl"), &steps);
        (sandbox.agent(extra, &script), files)
    };
    let (completed, completed_files) = start("completed", &done, &[]);
    let (killed, killed_files) = start("killed", &never, &[]);
    let (reported, reported_files) = start("reported", &done, &["--strays", "report"]);
    let [completed_pids, killed_pids, reported_pids] =
        [&completed_files, &killed_files, &reported_files].map(read_pids);
    sandbox.running(&killed);
    assert_eq!(
        sandbox.ok(&["kill", &killed]).trim(),
        format!("{killed} killed")
    );
    for pid in completed_pids.iter().chain(&killed_pids) {
        eventually("the daemon killed with its agent", || {
            (!is_alive(*pid)).then_some(())
        });
    }
    let summary = |id: &str| {
        let record = sandbox.ended(id);
        let summary = &record["notification"]["notification"]["summary"];
        summary.as_str().unwrap_or_default().to_owned()
    };
    let said = summary(&completed);
    // The shells that started them may not have exited yet: named too, and killed.
    assert!(said.contains(" processes running, killed: "), "{said}");
    for pid in completed_pids {
        assert!(said.contains(&format!("{pid} `")), "{pid} in {said}");
    }
    // Asked to report them, an agent leaves them running, listed with its id.
    let said = summary(&reported);
    assert!(said.contains(" processes running: "), "{said}");
    let listed = sandbox.json(&["strays"]);
    for pid in reported_pids {
        assert!(said.contains(&format!("{pid} `")), "{pid} in {said}");
        let row = listed
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["pid"] == pid);
        assert_eq!(row.unwrap()["task"], reported.as_str(), "{pid} in {listed}");
    }
    sandbox.ok(&["kill", "--strays", &reported]);
    for pid in reported_pids {
        eventually("the stray gone", || (!is_alive(pid)).then_some(()));
    }
}

/// A script for an agent that answers for ever: after the prompt, a response every 20 ms,
/// each with `input` input tokens and 10 output tokens.
fn working_for_ever(sandbox: &Sandbox, name: &str, input: u64) -> String {
    let usage = json!({"input_tokens": input, "output_tokens": 10});
    sandbox.script(
        name,
        &[
            json!({"read_user": true}),
            json!({"forever": {"steps": [{"text": "still working", "usage": usage}], "every_ms": 20}}),
        ],
    )
}

impl Sandbox {
    /// Waits for `id` to end; its record.
    fn ended(&self, id: &str) -> Value {
        eventually(&format!("{id} ended"), || {
            let record = self.record(id);
            let status = record["task"]["status"].as_str()?;
            (status != "running" && status != "pending" && record["notification"].is_object())
                .then_some(record)
        })
    }
}

#[test]
fn each_budget_ends_an_agent_that_would_work_for_ever_once_with_its_reason() {
    let sandbox = Sandbox::for_agents();
    let hook_file = sandbox.path("ends.txt");
    let sandbox = sandbox.env("TASKS_ON_END", appending_hook(&hook_file));
    let script = working_for_ever(&sandbox, "forever.jsonl", 1000);
    let agent = |flags: &[&str; 2]| {
        let fake = fake_agent();
        let mut args = vec!["agent", "--prompt", "work"];
        args.extend_from_slice(flags);
        args.extend(["--", fake.to_str().unwrap(), "--script", &script]);
        sandbox.started(&args)
    };
    let ids = BUDGETS.map(|flags| agent(&flags));
    ended_by_their_budgets(&sandbox, &hook_file, &ids, "local_agent");
    for id in &ids {
        let summary = sandbox.ended(id)["notification"]["notification"]["summary"].to_string();
        let words = hook_lines(&hook_file)[id][0].clone();
        let words = words
            .split('|')
            .next()
            .unwrap()
            .trim_start_matches("failed ");
        let words = words.split(" of ").next().unwrap();
        assert!(summary.contains(words), "{words} in {summary}");
    }
    let listed = sandbox.ok(&["ps", "--all"]);
    assert!(listed.contains("/1.1k tokens"), "{listed}");
    assert!(listed.contains("5/5 turns"), "{listed}");
    // Its conversation says why it stopped, which its CLI's transcript cannot (#41.7), and
    // reads the same followed.
    let [tokens, turns, time] = ids.each_ref().map(String::as_str);
    let last_line = |id: &str| {
        sandbox
            .ok(&["output", id])
            .lines()
            .last()
            .unwrap()
            .to_owned()
    };
    let stopped = last_line(tokens);
    assert!(
        stopped.starts_with("✗ stopped: --max-tokens 1100 reached ("),
        "{stopped}"
    );
    assert_eq!(last_line(turns), "✗ stopped: --max-turns 5 reached");
    let stopped = last_line(time);
    assert!(stopped.starts_with("✗ stopped: --timeout "), "{stopped}");
    let followed = sandbox.run(&["wait", "--follow", "--no-deliver", turns]);
    let followed = String::from_utf8(followed.stdout).unwrap();
    assert!(
        followed.ends_with("still working\n✗ stopped: --max-turns 5 reached\n"),
        "{followed}"
    );
    let notices = sandbox.ok(&["notifications"]);
    for id in &ids {
        let tag = format!("<task-id>{id}</task-id>");
        assert_eq!(notices.matches(&tag).count(), 1, "{id} once in {notices}");
    }
}

/// The flags of a tokens, a turns and a time budget.
const BUDGETS: [[&str; 2]; 3] = [
    ["--max-tokens", "1100"],
    ["--max-turns", "5"],
    ["--timeout", "1500ms"],
];

/// Waits for `ids`, of type `task_type`, started under [`BUDGETS`] in that order (or their
/// equivalents) and working for ever, to end; each ended once (in its record and its one end
/// hook line), `failed` by its budget.
fn ended_by_their_budgets(sandbox: &Sandbox, hook_file: &Path, ids: &[String; 3], task_type: &str) {
    let [tokens, turns, time] = ids.each_ref().map(String::as_str);
    let expected = [
        (tokens, "failed budget: tokens 1100 of 1100", task_type),
        (turns, "failed budget: turns 5 of 5", task_type),
        (time, "failed budget: time", task_type),
    ];
    let lines = hooked(hook_file, &[tokens, turns, time]);
    assert_hooked_once(&lines, &expected);
    for (id, limit) in [(tokens, "tokens"), (turns, "turns"), (time, "time")] {
        let record = sandbox.record(id);
        assert_eq!(record["task"]["status"], "failed", "{record}");
        let reason = &record["task"]["endReason"];
        assert_eq!(reason["reason"], "budget_exceeded", "{record}");
        assert_eq!(reason["limit"], limit, "{record}");
    }
}

#[test]
fn each_budget_ends_a_teammate_that_would_work_for_ever_once_with_its_reason() {
    let sandbox = Sandbox::for_agents();
    let hook_file = sandbox.path("ends.txt");
    let sandbox = sandbox.env("TASKS_ON_END", appending_hook(&hook_file));
    let script = working_for_ever(&sandbox, "forever.jsonl", 1000);
    let ids = [0, 1, 2].map(|n| sandbox.teammate(&format!("mate{n}@crew"), &BUDGETS[n], &script));
    ended_by_their_budgets(&sandbox, &hook_file, &ids, "in_process_teammate");
    let listed = sandbox.ok(&["ps", "--all"]);
    assert!(listed.contains("5/5 turns"), "{listed}");
    assert!(listed.contains("time limit 1s"), "{listed}");
}

#[test]
fn a_workflow_agent_s_opts_budgets_end_it_once_with_its_reason() {
    let sandbox = Sandbox::for_agents();
    let hook_file = sandbox.path("ends.txt");
    let sandbox = sandbox.env("TASKS_ON_END", appending_hook(&hook_file));
    let script = working_for_ever(&sandbox, "forever.jsonl", 1000);
    let flow = sandbox.path("budgets.js");
    std::fs::write(
        &flow,
        "export const meta = { name: 'budgets', description: 'three budgets' }\n\
         return await parallel([\n\
           () => agent('tokens', {maxTokens: 1100}),\n\
           () => agent('turns', {maxTurns: 5}),\n\
           () => agent('time', {timeout: 1500}),\n\
         ])\n",
    )
    .unwrap();
    let fake = fake_agent();
    let flow = flow.display().to_string();
    let args = [
        "workflow",
        "run",
        &flow,
        "--",
        fake.to_str().unwrap(),
        "--script",
        &script,
    ];
    let workflow = sandbox.started(&args);
    let lines = hooked(&hook_file, &[&workflow]);
    assert_hooked_once(&lines, &[(&workflow, "completed", "local_workflow")]);
    let all = sandbox.json(&["ps", "--all"]);
    let agent = |prompt: &str| {
        let found = all
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["type"] == "local_agent" && t["description"] == prompt);
        found.unwrap_or_else(|| panic!("no agent {prompt} in {all}"))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let ids = ["tokens", "turns", "time"].map(agent);
    ended_by_their_budgets(&sandbox, &hook_file, &ids, "local_agent");
}

#[test]
fn a_session_token_budget_counts_agents_and_teammates_and_stops_the_one_that_crosses_it() {
    let sandbox = Sandbox::for_agents().env("TASKS_AGENT_TOKEN_BUDGET", "4500");
    // One response of `input` + 10 tokens, then `then`.
    let spending = |name: &str, input: u64, then: &[Value]| {
        let usage = json!({"input_tokens": input, "output_tokens": 10});
        let mut steps = vec![
            json!({"read_user": true}),
            json!({"text": "done", "usage": usage}),
        ];
        steps.extend_from_slice(then);
        sandbox.script(name, &steps)
    };
    let done = json!({"result": "done"});
    let thrifty = spending("thrifty.jsonl", 990, std::slice::from_ref(&done));
    let finished: Vec<String> = (0..3).map(|_| sandbox.agent(&[], &thrifty)).collect();
    for id in &finished {
        let record = sandbox.ended(id);
        assert_eq!(record["task"]["status"], "completed", "{record}");
    }
    let spawn = |member: &str, script: &str| sandbox.teammate(member, &[], script);
    let mate = spawn(
        "thrifty@crew",
        &spending("mate.jsonl", 990, std::slice::from_ref(&done)),
    );
    eventually("the teammate idle after its response", || {
        let rows = sandbox.json(&["team", "ls"]);
        let row = rows.as_array()?.iter().find(|r| r["id"] == mate.as_str())?;
        (row["activity"] == "idle").then_some(())
    });
    // 4000 tokens used, 1000 of them by the teammate: 600 more cross 4500.
    let big = spending("big.jsonl", 590, &[done]);
    let spender = sandbox.agent(&[], &big);
    let record = sandbox.ended(&spender);
    let crossed = |record: &Value| {
        assert_eq!(record["task"]["status"], "failed", "{record}");
        let reason = &record["task"]["endReason"];
        assert_eq!(reason["limit"], "session_tokens", "{record}");
        assert_eq!(reason["max"], 4500, "{record}");
        assert!(reason["used"].as_u64().unwrap() >= 4500, "{record}");
    };
    crossed(&record);
    let summary = record["notification"]["notification"]["summary"].to_string();
    assert!(summary.contains("budget: session tokens "), "{summary}");
    // A teammate's response past it stops the teammate too.
    let late = spawn("late@crew", &big);
    let record = eventually("the late teammate stopped", || {
        let record = sandbox.record(&late);
        (record["task"]["status"] == "failed").then_some(record)
    });
    crossed(&record);
    for id in &finished {
        assert_eq!(sandbox.status(id), "completed");
    }
    assert_eq!(sandbox.status(&mate), "running");
}

#[test]
fn the_configured_budget_ends_an_agent_and_a_teammate_started_without_one() {
    let sandbox = Sandbox::for_agents().env("TASKS_AGENT_MAX_TURNS", "3");
    let script = working_for_ever(&sandbox, "forever.jsonl", 100);
    let id = sandbox.agent(&[], &script);
    let record = sandbox.ended(&id);
    assert_eq!(record["task"]["status"], "failed", "{record}");
    let summary = record["notification"]["notification"]["summary"].to_string();
    assert!(summary.contains("budget: turns 3 of 3"), "{summary}");
    let mate = sandbox.teammate("bounded@crew", &[], &script);
    // A teammate's end has no notification (the lead hears of it through its mailbox).
    let record = eventually("the teammate ended", || {
        let record = sandbox.record(&mate);
        (record["task"]["status"] == "failed").then_some(record)
    });
    let reason = &record["task"]["endReason"];
    assert_eq!(reason["reason"], "budget_exceeded", "{record}");
    assert_eq!(reason["limit"], "turns", "{record}");
    assert_eq!(reason["max"], 3, "{record}");
}

#[test]
fn shells_that_end_together_are_each_told_only_the_daemons_they_left() {
    const SHELLS: usize = 6;
    let sandbox = Sandbox::for_agents();
    let mut gate = Gate::new(sandbox.root());
    let started: Vec<(String, std::path::PathBuf)> = (0..SHELLS)
        .map(|n| {
            let file = sandbox.path(&format!("daemon{n}.pid"));
            let f = file.display();
            let command = format!(
                "mkfifo {f}.ready; \
                 setsid sh -c 'echo $$ > {f}.new; mv {f}.new {f}; echo > {f}.ready; exec sleep 31{n}' & \
                 read -r _ < {f}.ready; {}",
                gate.wait()
            );
            (sandbox.started(&["run", "--", &command]), file)
        })
        .collect();
    let pids: Vec<i32> = started
        .iter()
        .map(|(_, file)| {
            eventually("a daemon's pid", || {
                std::fs::read_to_string(file).ok()?.trim().parse().ok()
            })
        })
        .collect();
    // Every end at once: the supervisor looks for what they left in one look.
    gate.open(SHELLS);
    let ids: Vec<&str> = started.iter().map(|(id, _)| id.as_str()).collect();
    let waited = sandbox.run(&[&["wait", "--no-deliver"][..], ids.as_slice()].concat());
    assert_eq!(waited.status.code(), Some(0));
    for ((id, _), pid) in started.iter().zip(&pids) {
        let record = sandbox.record(id);
        let strays: Vec<i64> = record["strays"]
            .as_array()
            .unwrap_or_else(|| panic!("{id} left its daemon: {record}"))
            .iter()
            .map(|stray| stray["pid"].as_i64().unwrap())
            .collect();
        assert_eq!(strays, [i64::from(*pid)], "{record}");
        let summary = record["notification"]["notification"]["summary"].to_string();
        assert!(
            summary.contains(&format!("left 1 process running: {pid} `sleep 31")),
            "{record}"
        );
    }
    assert_eq!(sandbox.json(&["strays"]).as_array().unwrap().len(), SHELLS);
    sandbox.ok(&["kill", "--all-strays"]);
    for pid in pids {
        eventually("the stray gone", || (!is_alive(pid)).then_some(()));
    }
}
