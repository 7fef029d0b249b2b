//! How tasks end, through the `tasks` binary: end hooks (a command from `config.json` or
//! `--on-end`) run exactly once at every end of shells and agents (completed, failed, killed,
//! and ended as orphans by the supervisor that replaces a `SIGKILL`ed one), with the task in
//! their environment, and a hook that hangs is killed at its timeout without holding up the
//! task's notification.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use support::agent_sandbox::Sandbox;
use support::{eventually, fake_agent, is_alive, sigkill};

/// A hook that appends `ID STATUS REASON|TYPE|DESCRIPTION|OUTPUT` to `file`.
fn appending_hook(file: &Path) -> String {
    format!(
        r#"printf '%s %s %s|%s|%s|%s\n' "$TASKS_ID" "$TASKS_STATUS" "$TASKS_END_REASON" "$TASKS_TYPE" "$TASKS_DESCRIPTION" "$TASKS_OUTPUT_FILE" >> '{}'"#,
        file.display()
    )
}

/// The lines the hook appended, by task id (each id with every line it got).
fn hook_lines(file: &Path) -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let mut by_id: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let (id, rest) = line.split_once(' ').unwrap_or((line, ""));
        by_id
            .entry(id.to_owned())
            .or_default()
            .push(rest.to_owned());
    }
    by_id
}

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

    /// Waits until the hook has appended a line for each of `ids`.
    fn hooked(&self, file: &Path, ids: &[&str]) -> BTreeMap<String, Vec<String>> {
        eventually("a hook line for every task", || {
            let lines = hook_lines(file);
            ids.iter()
                .all(|id| lines.contains_key(*id))
                .then_some(lines)
        })
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

#[test]
fn the_configured_hook_runs_once_for_every_end_of_shells_and_agents() {
    let sandbox = Sandbox::for_agents().env("TASKS_START_TIMEOUT_MS", "60000");
    let file = sandbox.path("ends.txt");
    std::fs::create_dir_all(sandbox.path("default")).unwrap();
    let config = json!({ "on_end": appending_hook(&file) });
    std::fs::write(sandbox.path("default/config.json"), config.to_string()).unwrap();

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
    let lines = sandbox.hooked(&file, &ids);
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
    let lines = sandbox.hooked(&file, &[&next]);
    for id in ids.iter().chain([&next.as_str()]) {
        assert_eq!(lines[*id].len(), 1, "{id} hooked once: {lines:?}");
    }
    assert_eq!(lines.len(), ids.len() + 1, "{lines:?}");
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
    let own_lines = sandbox.hooked(&own, &[&shell, &agent]);
    let session_lines = sandbox.hooked(&session, &[&plain, &next]);
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
    let session_lines = sandbox.hooked(&session, &[&last]);
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
    let listed = sandbox.json(&["strays"]);
    let mut rows: Vec<(i64, String)> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["pid"].as_i64().unwrap(),
                row["task"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    rows.sort();
    let mut expected: Vec<(i64, String)> =
        pids.iter().map(|&p| (i64::from(p), id.clone())).collect();
    expected.sort();
    assert_eq!(rows, expected, "{listed}");
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

#[test]
fn a_daemon_an_agent_s_tool_started_is_killed_with_the_agent() {
    let sandbox = Sandbox::for_agents();
    let pid_file = sandbox.path("daemon.pid");
    let script = sandbox.script(
        "daemonizing.jsonl",
        &[
            json!({"read_user": true}),
            json!({"spawn": "exec sleep 305", "pid_file": pid_file.display().to_string(),
                   "setsid": true}),
            json!({"wait_file": sandbox.path("never").display().to_string()}),
        ],
    );
    let id = sandbox.agent(&[], &script);
    let daemon: i32 = eventually("the daemon's pid", || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    });
    assert!(is_alive(daemon));
    sandbox.running(&id);
    assert_eq!(sandbox.ok(&["kill", &id]).trim(), format!("{id} killed"));
    eventually("the daemon killed with its agent", || {
        (!is_alive(daemon)).then_some(())
    });
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
    let hooked = sandbox.path("ends.txt");
    let sandbox = sandbox.env("TASKS_ON_END", appending_hook(&hooked));
    let script = working_for_ever(&sandbox, "forever.jsonl", 1000);
    let agent = |flags: &[&str]| {
        let fake = fake_agent();
        let mut args = vec!["agent", "--prompt", "work"];
        args.extend_from_slice(flags);
        args.extend(["--", fake.to_str().unwrap(), "--script", &script]);
        sandbox.started(&args)
    };
    let tokens = agent(&["--max-tokens", "1100"]);
    let turns = agent(&["--max-turns", "5"]);
    let time = agent(&["--timeout", "1500ms"]);
    let cases = [
        (&tokens, "tokens", "budget: tokens 1100 of 1100"),
        (&turns, "turns", "budget: turns 5 of 5"),
        (&time, "time", "budget: time "),
    ];
    for (id, limit, words) in cases {
        let record = sandbox.ended(id);
        assert_eq!(record["task"]["status"], "failed", "{record}");
        let reason = &record["task"]["endReason"];
        assert_eq!(reason["reason"], "budget_exceeded", "{record}");
        assert_eq!(reason["limit"], limit, "{record}");
        let summary = record["notification"]["notification"]["summary"].to_string();
        assert!(summary.contains(words), "{words} in {summary}");
    }
    let listed = sandbox.ok(&["ps", "--all"]);
    assert!(listed.contains("/1.1k tokens"), "{listed}");
    assert!(listed.contains("5/5 turns"), "{listed}");
    let notices = sandbox.ok(&["notifications"]);
    for id in [&tokens, &turns, &time] {
        let tag = format!("<task-id>{id}</task-id>");
        assert_eq!(notices.matches(&tag).count(), 1, "{id} once in {notices}");
    }
    let lines = sandbox.hooked(&hooked, &[&tokens, &turns, &time]);
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[&tokens][0].starts_with("failed budget: tokens 1100 of 1100|local_agent|"));
    assert!(lines[&turns][0].starts_with("failed budget: turns 5 of 5|"));
    for id in [&tokens, &turns, &time] {
        assert_eq!(lines[id.as_str()].len(), 1, "{lines:?}");
    }
}

#[test]
fn a_session_token_budget_shared_by_five_agents_stops_the_one_that_crosses_it() {
    let sandbox = Sandbox::for_agents().env("TASKS_AGENT_TOKEN_BUDGET", "4500");
    let thrifty = sandbox.script(
        "thrifty.jsonl",
        &[
            json!({"read_user": true}),
            json!({"text": "done", "usage": {"input_tokens": 990, "output_tokens": 10}}),
            json!({"result": "done"}),
        ],
    );
    let finished: Vec<String> = (0..4).map(|_| sandbox.agent(&[], &thrifty)).collect();
    for id in &finished {
        let record = sandbox.ended(id);
        assert_eq!(record["task"]["status"], "completed", "{record}");
    }
    // 4000 tokens used: the fifth crosses 4500 after a few responses of 110, 120, … tokens.
    let script = working_for_ever(&sandbox, "forever.jsonl", 100);
    let spender = sandbox.agent(&[], &script);
    let record = sandbox.ended(&spender);
    assert_eq!(record["task"]["status"], "failed", "{record}");
    let reason = &record["task"]["endReason"];
    assert_eq!(reason["limit"], "session_tokens", "{record}");
    assert_eq!(reason["max"], 4500, "{record}");
    assert!(reason["used"].as_u64().unwrap() >= 4500, "{record}");
    let summary = record["notification"]["notification"]["summary"].to_string();
    assert!(summary.contains("budget: session tokens "), "{summary}");
    for id in &finished {
        assert_eq!(sandbox.status(id), "completed");
    }
}

#[test]
fn the_configured_budget_ends_an_agent_started_without_one() {
    let sandbox = Sandbox::for_agents().env("TASKS_AGENT_MAX_TURNS", "3");
    let script = working_for_ever(&sandbox, "forever.jsonl", 100);
    let id = sandbox.agent(&[], &script);
    let record = sandbox.ended(&id);
    assert_eq!(record["task"]["status"], "failed", "{record}");
    let summary = record["notification"]["notification"]["summary"].to_string();
    assert!(summary.contains("budget: turns 3 of 3"), "{summary}");
}
