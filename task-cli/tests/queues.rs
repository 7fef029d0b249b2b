//! Queues, run dependencies and scheduled starts, through the built `tasks` binary: groups with a
//! parallelism limit (checked from the tasks' own start and end stamps), FIFO order within a
//! priority, a queued task killed before its turn, `--after` chains, `--at` with the
//! supervisor's clock moved forward by configuration, and a supervisor killed with tasks queued.
//!
//! A task that must hold its group's slot until the test lets it go reads one line of its stdin
//! (`--stdin pipe`), which `tasks input` writes: nothing here waits on a timer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use serde_json::{Value, json};
use support::root::TasksRoot;
use support::{eventually, sigkill};

mod support;

/// A sandbox whose `tasksd` runs the long commands (`group`) and `tasks` the short ones.
struct Queues {
    root: TasksRoot,
}

impl Queues {
    fn new() -> Self {
        Self {
            root: TasksRoot::new(),
        }
    }

    fn tasksd(&self, args: &[&str]) -> String {
        let bin = std::path::Path::new(env!("CARGO_BIN_EXE_tasks")).with_file_name("tasksd");
        let mut command = std::process::Command::new(bin);
        command.args(args);
        self.root.environment(&mut command);
        let output = command.output().unwrap();
        assert!(
            output.status.success(),
            "tasksd {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    fn set_parallel(&self, group: &str, parallel: u32) {
        self.tasksd(&["group", "set", group, "--parallel", &parallel.to_string()]);
    }

    /// Starts `command` with `options` before `--`; returns its id.
    fn run(&self, options: &[&str], command: &str) -> String {
        let mut args = vec!["run"];
        args.extend_from_slice(options);
        args.extend_from_slice(&["--", command]);
        self.root.ok(&args).trim().to_owned()
    }

    /// A task of `group` that holds its slot until [`Queues::release`].
    /// A task of `group` that runs until it is released: once this returns it is running.
    fn blocker(&self, group: &str) -> String {
        let blocker = self.run(&["--group", group, "--stdin", "pipe"], "read line");
        eventually("the blocker to run", || {
            (self.task(&blocker)["status"] == "running").then_some(())
        });
        blocker
    }

    fn release(&self, blocker: &str) {
        self.root.ok(&["input", blocker, "go"]);
    }

    fn task(&self, id: &str) -> Value {
        let all = self.root.json(&["ps", "--all"]);
        all.as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} not listed in {all}"))
    }

    fn wait(&self, ids: &[String]) {
        let mut args = vec!["wait", "--no-deliver"];
        args.extend(ids.iter().map(String::as_str));
        self.root.run(&args);
    }

    fn file(&self, name: &str) -> String {
        self.root.path(name).display().to_string()
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.root.path(name)).unwrap_or_default()
    }

    fn supervisor_pid(&self) -> i32 {
        let lock = self.root.path("default/supervisor.lock");
        std::fs::read_to_string(lock)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// The completions `tasks notifications` delivers now, by task id.
    fn delivered(&self) -> HashMap<String, usize> {
        let text = self.root.ok(&["notifications", "--format", "json"]);
        let mut counts = HashMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let notice: Value = serde_json::from_str(line).unwrap();
            let id = notice["taskId"]
                .as_str()
                .or_else(|| notice["notification"]["taskId"].as_str())
                .unwrap_or_else(|| panic!("no task id in {notice}"))
                .to_owned();
            *counts.entry(id).or_default() += 1;
        }
        counts
    }
}

#[test]
fn fifty_shells_in_a_group_of_four_never_run_more_than_four_at_once() {
    let queues = Queues::new();
    queues.set_parallel("four", 4);
    let stamps = queues.file("stamps");
    let ids: Vec<String> = (0..50)
        .map(|i| {
            let command = format!(
                "echo \"start {i} $(date +%s%N)\" >> {stamps}; sleep 0.02; echo \"end {i} $(date +%s%N)\" >> {stamps}"
            );
            queues.run(&["--group", "four"], &command)
        })
        .collect();
    queues.wait(&ids);
    for id in &ids {
        assert_eq!(queues.task(id)["status"], "completed", "{id}");
    }
    let mut events: Vec<(u128, i32, usize)> = queues
        .read("stamps")
        .lines()
        .map(|line| {
            let parts: Vec<&str> = line.split(' ').collect();
            let delta = if parts[0] == "start" { 1 } else { -1 };
            (parts[2].parse().unwrap(), delta, parts[1].parse().unwrap())
        })
        .collect();
    assert_eq!(events.len(), 100, "each of the 50 ran once");
    // Ends before starts at the same instant: a slot is given back before it is taken.
    events.sort();
    let mut running = 0;
    let mut most = 0;
    for (_, delta, _) in &events {
        running += delta;
        most = most.max(running);
    }
    assert!(most <= 4, "{most} ran at once in a group of 4");
    assert!(
        most >= 2,
        "the group ran its tasks side by side ({most} at most)"
    );
    let mut started: Vec<usize> = events
        .iter()
        .filter(|(_, delta, _)| *delta == 1)
        .map(|(_, _, i)| *i)
        .collect();
    started.sort_unstable();
    started.dedup();
    assert_eq!(started.len(), 50);
}

#[test]
fn a_group_of_one_runs_its_queue_by_priority_then_in_order_of_arrival() {
    let queues = Queues::new();
    queues.set_parallel("one", 1);
    let blocker = queues.blocker("one");
    let order = queues.file("order");
    let priorities = [0, 0, 5, 0, 5, -1, 2, 0];
    let ids: Vec<String> = priorities
        .iter()
        .enumerate()
        .map(|(i, priority)| {
            let priority = priority.to_string();
            queues.run(
                &["--group", "one", "--priority", &priority],
                &format!("echo {i} >> {order}"),
            )
        })
        .collect();
    // Queued, with their positions in the order they will run.
    let positions: Vec<u64> = ids
        .iter()
        .map(|id| {
            let task = queues.task(id);
            assert_eq!(task["status"], "pending", "{task}");
            task["queuePosition"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(positions, [4, 5, 1, 6, 2, 8, 3, 7]);
    assert!(queues.root.ok(&["ps"]).contains("queued #1"));
    queues.release(&blocker);
    queues.wait(&ids);
    let text = queues.read("order");
    let ran: Vec<&str> = text.lines().collect();
    assert_eq!(ran, ["2", "4", "6", "0", "1", "3", "7", "5"]);
    let groups = queues.tasksd(&["group", "ls", "--json"]);
    let groups: Value = serde_json::from_str(&groups).unwrap();
    assert_eq!(groups["one"]["parallel"], 1);
    assert_eq!(groups["one"]["queued"], 0);
}

#[test]
fn a_queued_task_killed_before_its_turn_never_runs_and_is_settled_once() {
    let queues = Queues::new();
    queues.set_parallel("one", 1);
    let blocker = queues.blocker("one");
    let ran = queues.file("ran");
    let queued = queues.run(&["--group", "one"], &format!("touch {ran}"));
    let after = queues.run(&["--group", "one"], "true");
    assert_eq!(queues.task(&queued)["status"], "pending");
    let killed = queues.root.json(&["kill", &queued]);
    assert_eq!(killed[0]["result"], "killed");
    let again = queues.root.json(&["kill", &queued]);
    assert_eq!(again[0]["result"], "already_ended", "{again}");
    let task = queues.task(&queued);
    assert_eq!(task["status"], "killed");
    assert_eq!(task["endReason"]["reason"], "killed");
    assert_eq!(task["exitCode"], 137);
    assert_eq!(task["notified"], true, "{task}");
    assert!(task.get("queuePosition").is_none(), "{task}");
    // The queue moves on past it: the next task takes the freed turn.
    queues.release(&blocker);
    queues.wait(std::slice::from_ref(&after));
    assert_eq!(queues.task(&after)["status"], "completed");
    assert!(!queues.root.path("ran").exists(), "the killed task ran");
    // A kill on request is never delivered as a completion (like every kill), and nothing
    // of it is left queued for a successor.
    let delivered = queues.delivered();
    assert_eq!(delivered.get(&queued), None, "{delivered:?}");
    assert!(
        !queues
            .root
            .path(&format!("default/tasks/{queued}.queued.json"))
            .exists()
    );
}

#[test]
fn a_queued_shell_is_its_record_and_kept_start_only_until_its_turn() {
    let queues = Queues::new();
    queues.set_parallel("one", 1);
    let blocker = queues.blocker("one");
    let ran = queues.file("ran");
    let queued: Vec<String> = (1..=3)
        .map(|n| queues.run(&["--group", "one"], &format!("echo {n} >> {ran}")))
        .collect();
    // The supervisor holds the running blocker only: each waiting task is its record
    // (`pending`, queued) and its kept start, on disk, and no executor state.
    let kept = |id: &str| queues.root.path(&format!("default/tasks/{id}.queued.json"));
    let (pid, registered) = support::supervisor_memory(queues.root.root());
    assert_eq!(registered, 1, "only the blocker is registered");
    for (index, id) in queued.iter().enumerate() {
        let task = queues.task(id);
        assert_eq!(task["status"], "pending", "{task}");
        assert_eq!(task["queuePosition"], index + 1, "{task}");
        assert!(kept(id).exists(), "{id}: its start is kept");
        assert_eq!(
            queues.root.ok(&["output", id]),
            "",
            "its output reads empty"
        );
    }
    queues.release(&blocker);
    queues.wait(&queued);
    for id in &queued {
        let task = queues.task(id);
        assert_eq!(task["status"], "completed", "{task}");
        assert_eq!(task["queue"]["group"], "one", "{task}");
        assert!(
            !kept(id).exists(),
            "{id}: its kept start is gone once it ran"
        );
    }
    assert_eq!(queues.read("ran"), "1\n2\n3\n", "each once, in their order");
    assert_eq!(
        support::supervisor_memory(queues.root.root()).0,
        pid,
        "one supervisor throughout"
    );
}

#[test]
fn a_queued_shell_whose_directory_is_gone_at_its_turn_ends_failed_without_running() {
    let queues = Queues::new();
    queues.set_parallel("one", 1);
    let blocker = queues.blocker("one");
    let dir = queues.root.path("workdir");
    std::fs::create_dir(&dir).unwrap();
    let ran = queues.file("ran");
    let mut run = queues
        .root
        .command(&["run", "--group", "one", "--", &format!("touch {ran}")]);
    let out = run.current_dir(&dir).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let queued = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(queues.task(&queued)["status"], "pending");
    std::fs::remove_dir(&dir).unwrap();
    queues.release(&blocker);
    queues.wait(&[blocker, queued.clone()]);
    let task = queues.task(&queued);
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["endReason"]["reason"], "spawn_failed", "{task}");
    assert!(!queues.root.path("ran").exists(), "it ran");
    assert_eq!(
        queues.delivered().get(&queued),
        Some(&1),
        "its end is notified once"
    );
}

#[test]
fn a_task_holds_its_end_slot_only_from_its_turn_to_its_end() {
    let queues = Queues::new();
    queues.set_parallel("one", 1);
    let blocker = queues.blocker("one");
    let queued = queues.run(&["--group", "one", "--stdin", "pipe"], "read line");
    let slot = |id: &str| queues.root.path(&format!("default/tasks/{id}.end"));
    eventually("the running task's end slot", || {
        slot(&blocker).exists().then_some(())
    });
    assert_eq!(queues.task(&queued)["status"], "pending");
    assert!(
        !slot(&queued).exists(),
        "a task waiting for its turn holds no end slot"
    );
    queues.release(&blocker);
    eventually("the queued task's end slot once it runs", || {
        (queues.task(&queued)["status"] == "running" && slot(&queued).exists()).then_some(())
    });
    queues.release(&queued);
    queues.wait(std::slice::from_ref(&queued));
    eventually("its end slot released", || {
        (!slot(&queued).exists()).then_some(())
    });
}

#[test]
fn a_queued_task_whose_owning_agent_is_killed_ends_at_once_without_running() {
    let queues = Queues {
        root: TasksRoot::for_agents(),
    };
    queues.set_parallel("one", 1);
    let blocker = queues.blocker("one");
    let (ran, started) = (queues.file("ran"), queues.file("started"));
    // The agent queues a task of its own (TASKS_AGENT_ID in its environment makes it the
    // owner) and ends its turn: it then waits for its own tasks (as the reference's agents do)
    // until it is killed.
    let steps = [
        json!({"read_user": true}),
        json!({"spawn": format!(
            "tasks run --group one -- touch {ran} > {started}.tmp && mv {started}.tmp {started}")}),
        json!({"wait_file": started}),
        json!({"result": "done"}),
    ];
    let script = queues.root.script("owner.jsonl", &steps);
    let fake = support::fake_agent();
    let out = queues.root.ok(&[
        "agent",
        "--prompt",
        "queue a task",
        "--",
        fake.to_str().unwrap(),
        "--script",
        &script,
    ]);
    let agent = out.lines().next().unwrap().to_owned();
    let owned = eventually("the agent's task queued", || {
        let owned = queues.read("started").trim().to_owned();
        (!owned.is_empty()).then_some(owned)
    });
    assert_eq!(queues.task(&owned)["status"], "pending");
    // The agent's end kills its tasks: the queued one at once, not on its turn (the kill
    // returns once the agent and its tasks are settled).
    let killed = queues.root.json(&["kill", &agent]);
    assert_eq!(killed[0]["result"], "killed", "{killed}");
    let task = eventually(
        "the owned task killed while its group is still full",
        || {
            let task = queues.task(&owned);
            (task["status"] == "killed").then_some(task)
        },
    );
    assert_eq!(task["agentId"], agent.as_str(), "{task}");
    assert_eq!(task["endReason"]["reason"], "killed", "{task}");
    assert_eq!(task["notified"], true, "{task}");
    assert_eq!(queues.task(&blocker)["status"], "running");
    assert!(
        !queues
            .root
            .path(&format!("default/tasks/{owned}.queued.json"))
            .exists()
    );
    queues.release(&blocker);
    queues.wait(std::slice::from_ref(&blocker));
    assert!(!queues.root.path("ran").exists(), "the killed task ran");
    let delivered = queues.delivered();
    assert_eq!(delivered.get(&owned), None, "{delivered:?}");
    assert_eq!(delivered.get(&agent), None, "{delivered:?}");
}

#[test]
fn status_shows_each_queued_tasks_position_as_ps_does() {
    let queues = Queues::new();
    queues.set_parallel("one", 1);
    queues.set_parallel("two", 1);
    let blockers = [queues.blocker("one"), queues.blocker("two")];
    let low = queues.run(&["--group", "one"], "true");
    let high = queues.run(&["--group", "one", "--priority", "5"], "true");
    let other = queues.run(&["--group", "two"], "true");
    let expected = [(&high, "one", 1), (&low, "one", 2), (&other, "two", 1)];
    for (id, _, position) in expected {
        assert_eq!(queues.task(id)["queuePosition"], position, "{id}");
    }
    let text = queues.root.ok(&["status"]);
    assert_eq!(
        text.trim(),
        format!("5 shells · 3 queued: {high} #1 in one, {low} #2 in one, {other} #1 in two"),
    );
    let json = queues.root.json(&["status"]);
    let listed: Vec<(String, String, u64)> = json["queued"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            let text = |key: &str| q[key].as_str().unwrap().to_owned();
            (text("id"), text("group"), q["position"].as_u64().unwrap())
        })
        .collect();
    let wanted: Vec<(String, String, u64)> = expected
        .iter()
        .map(|(id, group, position)| ((*id).clone(), (*group).to_owned(), *position))
        .collect();
    assert_eq!(listed, wanted, "{json}");
    assert_eq!(json["count"], 5, "{json}");
    queues.root.ok(&["kill", &low, &high, &other]);
    for blocker in &blockers {
        queues.release(blocker);
    }
    queues.wait(&blockers);
    assert!(queues.root.json(&["status"]).get("queued").is_none());
}

#[test]
fn after_starts_once_its_dependency_completed_and_never_runs_after_a_failure() {
    let queues = Queues::new();
    // Completed → starts; while the dependency runs it waits.
    let first = queues.run(&["--stdin", "pipe"], "read line");
    let second = queues.run(
        &["--after", &first],
        &format!("touch {}", queues.file("second")),
    );
    assert_eq!(queues.task(&second)["status"], "pending");
    assert!(queues.task(&second)["queue"]["waiting"] == true);
    queues.release(&first);
    queues.wait(std::slice::from_ref(&second));
    assert_eq!(queues.task(&second)["status"], "completed");
    assert!(queues.root.path("second").exists());

    // Failed → the chain ends `failed` with a typed reason and runs nothing.
    let failing = queues.run(&[], "exit 3");
    let dependent = queues.run(
        &["--after", &failing],
        &format!("touch {}", queues.file("d")),
    );
    let chained = queues.run(
        &["--after", &dependent],
        &format!("touch {}", queues.file("e")),
    );
    queues.wait(&[dependent.clone(), chained.clone()]);
    let dependent_task = queues.task(&dependent);
    assert_eq!(dependent_task["status"], "failed");
    assert_eq!(
        dependent_task["endReason"],
        serde_json::json!({"reason": "dependency_failed", "id": failing})
    );
    assert_eq!(
        queues.task(&chained)["endReason"],
        serde_json::json!({"reason": "dependency_failed", "id": dependent})
    );
    assert!(!queues.root.path("d").exists() && !queues.root.path("e").exists());
    // Each notified exactly once.
    let delivered = queues.delivered();
    assert_eq!(delivered.get(&dependent), Some(&1), "{delivered:?}");
    assert_eq!(delivered.get(&chained), Some(&1), "{delivered:?}");
    let again = queues.delivered();
    assert!(!again.contains_key(&dependent) && !again.contains_key(&chained));

    // Killed → dependency failed too.
    let victim = queues.run(&[], "sleep 1000");
    let orphan = queues.run(&["--after", &victim], "true");
    queues.root.ok(&["kill", &victim]);
    queues.wait(std::slice::from_ref(&orphan));
    assert_eq!(
        queues.task(&orphan)["endReason"]["reason"],
        "dependency_failed"
    );

    // An unknown id is refused; nothing is started.
    let refused = queues
        .root
        .run(&["run", "--after", "bzzzzzzzz", "--", "true"]);
    assert_eq!(
        refused.status.code(),
        Some(66),
        "the unknown-task exit code"
    );
    assert!(String::from_utf8_lossy(&refused.stderr).contains("bzzzzzzzz"));
}

/// RFC 3339 for `ms` past the epoch.
fn rfc3339(ms_from_now: u64) -> String {
    let at = std::time::SystemTime::now() + std::time::Duration::from_millis(ms_from_now);
    humantime::format_rfc3339_seconds(at).to_string()
}

#[test]
fn at_waits_for_the_supervisors_clock_and_survives_a_restart() {
    let queues = Queues::new();
    let hour = 3_600_000;
    let at = rfc3339(hour);
    let scheduled = queues.run(&["--at", &at], &format!("touch {}", queues.file("at")));
    let delayed = queues.run(
        &["--delay", "2h"],
        &format!("touch {}", queues.file("delay")),
    );
    let task = queues.task(&scheduled);
    assert_eq!(task["status"], "pending");
    assert!(task["queue"]["notBeforeMs"].as_u64().is_some(), "{task}");
    // Other work goes on meanwhile.
    let other = queues.run(&[], "true");
    queues.wait(std::slice::from_ref(&other));
    assert_eq!(queues.task(&scheduled)["status"], "pending");
    assert!(!queues.root.path("at").exists());
    // The clock moves 90 minutes on: the next supervisor runs what was due by then, once.
    std::fs::write(
        queues.root.path("default/config.json"),
        format!("{{\"clock_offset_ms\": {}}}", hour * 3 / 2),
    )
    .unwrap();
    sigkill(queues.supervisor_pid());
    queues.wait(std::slice::from_ref(&scheduled));
    assert_eq!(queues.task(&scheduled)["status"], "completed");
    assert!(queues.root.path("at").exists());
    assert_eq!(
        queues.task(&delayed)["status"],
        "pending",
        "due in 2 h, 1.5 h passed"
    );
    queues.root.ok(&["kill", &delayed]);
    assert!(!queues.root.path("delay").exists());
}

#[test]
fn a_supervisor_killed_with_twenty_queued_tasks_leaves_them_to_the_next_in_order_once_each() {
    let queues = Queues::new();
    queues.set_parallel("one", 1);
    let blocker = queues.blocker("one");
    let order = queues.file("order");
    let ids: Vec<String> = (0..20)
        .map(|i| queues.run(&["--group", "one"], &format!("echo {i} >> {order}")))
        .collect();
    sigkill(queues.supervisor_pid());
    // Read as waiting, not as orphans: the reader starts the next supervisor.
    queues.wait(&ids);
    for id in &ids {
        let task = queues.task(id);
        assert_eq!(
            task["status"],
            "completed",
            "{task}\n{}",
            queues.read("default/supervisor.log")
        );
    }
    let ran: Vec<usize> = queues
        .read("order")
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(ran, (0..20).collect::<Vec<_>>(), "in order, once each");
    assert_eq!(
        queues.task(&blocker)["endReason"]["reason"],
        "supervisor_died"
    );
    // The group's limit survived: its queue is empty and its limit kept.
    let groups: Value = serde_json::from_str(&queues.tasksd(&["group", "ls", "--json"])).unwrap();
    assert_eq!(groups["one"]["parallel"], 1, "{groups}");
    // Each completion delivered once.
    let delivered = queues.delivered();
    for id in &ids {
        assert_eq!(delivered.get(id), Some(&1), "{id}: {delivered:?}");
    }
}

#[test]
fn a_supervisor_killed_with_queued_agents_and_a_workflow_leaves_them_to_the_next_under_their_ids() {
    let root = TasksRoot::new();
    let steps = root.path("agent.jsonl");
    std::fs::write(
        &steps,
        "{\"read_user\": true}\n{\"text\": \"on it\"}\n{\"result\": \"done\"}\n",
    )
    .unwrap();
    let (fake, steps) = (support::fake_agent(), steps.display().to_string());
    let agent = format!("{} --script {steps}", fake.display());
    let queues = Queues {
        root: root
            .env("TASKS_AGENT_COMMAND", &agent)
            .env_remove("TASKS_AGENT_RUNNER"),
    };
    let workflow = queues.root.path("noop.js");
    std::fs::write(
        &workflow,
        "export const meta = { name: 'noop', description: 'a run with no agents' }\nreturn 'done'\n",
    )
    .unwrap();
    queues.set_parallel("one", 1);
    let blocker = queues.blocker("one");
    let start_agent = |i: usize| {
        let prompt = format!("agent {i}");
        let fake = fake.to_str().unwrap();
        let out = queues.root.ok(&[
            "agent", "--group", "one", "--prompt", &prompt, "--", fake, "--script", &steps,
        ]);
        out.lines().next().unwrap().to_owned()
    };
    let mut ids = vec![start_agent(0), start_agent(1)];
    let run = queues.root.ok(&[
        "workflow",
        "run",
        workflow.to_str().unwrap(),
        "--group",
        "one",
    ]);
    ids.push(run.split_whitespace().next().unwrap().to_owned());
    ids.push(queues.run(&["--group", "one"], "true"));
    ids.push(start_agent(4));
    for id in &ids {
        assert_eq!(queues.task(id)["status"], "pending", "{id} waits");
    }
    sigkill(queues.supervisor_pid());
    // Read as waiting, not as orphans: the reader starts the next supervisor.
    queues.wait(&ids);
    let log = queues.read("default/supervisor.log");
    let mut ended = Vec::new();
    for id in &ids {
        let task = queues.task(id);
        assert_eq!(task["status"], "completed", "{task}\n{log}");
        ended.push(task["endTime"].as_u64().unwrap());
    }
    assert!(
        ended.windows(2).all(|pair| pair[0] < pair[1]),
        "one at a time, in the order queued: {ids:?} ended at {ended:?}"
    );
    for id in ids.iter().filter(|id| id.starts_with('a')) {
        let transcript = queues.read(&format!("default/tasks/{id}.output"));
        let results = transcript.matches("\"type\":\"result\"").count();
        assert_eq!(results, 1, "{id} ran once: {transcript}");
    }
    assert_eq!(
        queues.task(&blocker)["endReason"]["reason"],
        "supervisor_died"
    );
    let delivered = queues.delivered();
    for id in &ids {
        assert_eq!(delivered.get(id), Some(&1), "{id}: {delivered:?}");
    }
}

/// A server on 127.0.0.1 answering every request with `status`, on its own thread (it lives as
/// long as the test process); its port.
fn http_server(status: &'static str) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let _ = write!(stream, "HTTP/1.0 {status}\r\nContent-Length: 0\r\n\r\n");
        }
    });
    port
}

impl Queues {
    /// `tasks wait --ready ID`: its exit code.
    fn wait_ready(&self, id: &str) -> i32 {
        let output = self.root.run(&["wait", "--ready", id, "--timeout", "20s"]);
        output.status.code().unwrap_or(-1)
    }

    /// The notifications delivered now for `id` that carry no status, and those that do.
    fn notices_of(&self, id: &str) -> (Vec<String>, usize) {
        let text = self.root.ok(&["notifications", "--format", "json"]);
        let mut updates = Vec::new();
        let mut completions = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let notice: Value = serde_json::from_str(line).unwrap();
            if notice["taskId"] != id {
                continue;
            }
            match notice["notification"]["status"].as_str() {
                None => updates.push(
                    notice["notification"]["summary"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                ),
                Some(_) => completions += 1,
            }
        }
        (updates, completions)
    }
}

#[test]
fn readiness_by_line_port_and_url_each_fails_when_the_task_ends_first() {
    let queues = Queues::new();
    // A line of output.
    let server = queues.run(
        &["--ready", "^listening on [0-9]+$", "--stdin", "pipe"],
        "echo starting; echo 'listening on 80'; read line",
    );
    assert_eq!(queues.wait_ready(&server), 0);
    let (updates, completions) = queues.notices_of(&server);
    assert_eq!(updates.len(), 1, "{updates:?}");
    assert!(updates[0].contains("is ready"), "{updates:?}");
    assert_eq!(completions, 0, "ready is no end");
    assert_eq!(queues.task(&server)["status"], "running");
    queues.release(&server);
    let quiet = queues.run(&["--ready", "listening"], "echo nothing to see");
    assert_eq!(queues.wait_ready(&quiet), 1, "ended first");

    // A port.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let open = listener.local_addr().unwrap().port().to_string();
    let waiting = queues.run(&["--ready-port", &open, "--stdin", "pipe"], "read line");
    assert_eq!(queues.wait_ready(&waiting), 0);
    queues.release(&waiting);
    drop(listener);
    let closed = queues.run(&["--ready-port", &open, "--stdin", "pipe"], "read line");
    queues.release(&closed);
    assert_eq!(
        queues.wait_ready(&closed),
        1,
        "nothing listened, and it ended"
    );

    // A URL.
    let healthy = format!("http://127.0.0.1:{}/health", http_server("200 OK"));
    let up = queues.run(&["--ready-http", &healthy, "--stdin", "pipe"], "read line");
    assert_eq!(queues.wait_ready(&up), 0);
    queues.release(&up);
    let failing = format!("http://127.0.0.1:{}/health", http_server("503 Unavailable"));
    let down = queues.run(&["--ready-http", &failing, "--stdin", "pipe"], "read line");
    let timed_out = queues
        .root
        .run(&["wait", "--ready", &down, "--timeout", "200ms"]);
    assert_eq!(timed_out.status.code(), Some(124), "a 503 is not ready");
    queues.release(&down);
    assert_eq!(queues.wait_ready(&down), 1);

    // A check that cannot be made is refused before anything starts.
    let refused = queues
        .root
        .run(&["run", "--ready", "lis(ten", "--", "true"]);
    assert!(!refused.status.success());
}
