//! Groups as things a person acts on, and the time a queued task spends waiting (issue #41,
//! items 8 and 10), through the built `tasks` binary: `ps --group`, `wait --group`,
//! `kill --group`, `group pause` / `group resume` (kept across a supervisor killed with the
//! group's tasks queued), `group set`'s confirmation, and a queued task's run time measured
//! from when it began running (`startedAt`), not from when it was queued.
//!
//! A task that must hold its group's slot until the test lets it go reads one line of its
//! stdin (`--stdin pipe`), which `tasks input` writes: nothing here waits on a timer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::root::TasksRoot;
use support::{eventually, sigkill};

/// A sandbox with the steps these tests share.
struct Groups {
    root: TasksRoot,
}

impl Groups {
    fn new() -> Self {
        Self {
            root: TasksRoot::new(),
        }
    }

    /// Starts `command` in `group`; returns its id.
    fn run(&self, group: &str, command: &str) -> String {
        self.root
            .ok(&["run", "--group", group, "--", command])
            .trim()
            .to_owned()
    }

    /// A task of `group` that runs `then` once released ([`Groups::release`]): once this
    /// returns it is running.
    fn blocker(&self, group: &str, then: &str) -> String {
        let command = format!("read line; {then}");
        let id = self
            .root
            .ok(&["run", "--group", group, "--stdin", "pipe", "--", &command])
            .trim()
            .to_owned();
        eventually("the blocker running", || {
            (self.task(&id)["status"] == "running").then_some(())
        });
        id
    }

    fn release(&self, blocker: &str) {
        self.root.ok(&["input", blocker, "go"]);
    }

    /// The `ps --all --json` row of `id`.
    fn task(&self, id: &str) -> Value {
        let task = self.root.listed(id);
        assert!(!task.is_null(), "{id} not listed");
        task
    }

    fn status(&self, id: &str) -> String {
        self.task(id)["status"].as_str().unwrap().to_owned()
    }

    fn queued(&self, id: &str) -> bool {
        let task = self.task(id);
        task["status"] == "pending" && task["queuePosition"].is_u64()
    }

    fn ms(task: &Value, key: &str) -> u64 {
        task[key]
            .as_u64()
            .unwrap_or_else(|| panic!("no {key} in {task}"))
    }
}

/// The duration `tasks` prints for `ms`, as a person reads it (`850ms`, `1.2s`).
fn shown(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms}ms")
    } else {
        format!("{:.1}s", ms as f64 / 1_000.0)
    }
}

#[test]
fn a_queued_tasks_run_time_leaves_out_its_wait_and_one_that_never_ran_took_none() {
    let groups = Groups::new();
    groups.root.ok(&["group", "set", "one", "--parallel", "1"]);
    // The first holds the group's one slot until released, then runs one more second.
    let first = groups.blocker("one", "sleep 1");
    let second = groups.run("one", "echo second");
    let never = groups.run("one", "echo never");
    assert!(groups.queued(&second) && groups.queued(&never));
    assert!(groups.task(&second).get("startedAt").is_none(), "it waits");
    groups.root.ok(&["kill", &never]);
    groups.release(&first);
    let waited = groups.root.run(&["wait", "--follow", &second]);
    assert!(waited.status.success(), "{waited:?}");

    let (first, second, never) = (
        groups.task(&first),
        groups.task(&second),
        groups.task(&never),
    );
    assert_eq!(second["status"], "completed", "{second}");
    let created = Groups::ms(&second, "startTime");
    let started = Groups::ms(&second, "startedAt");
    let ended = Groups::ms(&second, "endTime");
    assert!(
        started >= Groups::ms(&first, "endTime"),
        "it began running once the first ended: {first} {second}"
    );
    let queue_wait = started - created;
    assert!(queue_wait >= 1_000, "it waited the first's second at least");
    let ran = ended - started;
    // What is shown is its run, not its wait (nor wait and run together).
    let summary = String::from_utf8(waited.stderr).unwrap();
    let second_id = second["id"].as_str().unwrap();
    assert!(
        summary.contains(&format!(
            "✓ {second_id} completed in {}: echo second",
            shown(ran)
        )),
        "{summary}"
    );
    assert!(ran < queue_wait, "ran {ran} ms, waited {queue_wait} ms");
    let listed = groups
        .root
        .command(&["ps", "--all"])
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    let table = String::from_utf8(listed.stdout).unwrap();
    // The TOOK column's cells end where its heading does (they are right-aligned).
    let took_end = table.lines().next().unwrap().find("TOOK").unwrap() + "TOOK".len();
    let row = |id: &Value| {
        let id = id.as_str().unwrap();
        table
            .lines()
            .find(|line| line.starts_with(id))
            .unwrap_or_else(|| panic!("{id} not in {table}"))
            .to_owned()
    };
    let second_row = row(&second["id"]);
    assert!(second_row.contains(&shown(ran)), "{second_row}");
    assert!(
        !second_row.contains(&shown(ended - created)),
        "{second_row}"
    );
    // Killed in the queue: no run, so no startedAt and no run time.
    assert!(never.get("startedAt").is_none(), "{never}");
    let never_row = row(&never["id"]);
    assert_eq!(
        never_row.as_bytes()[took_end - 1],
        b' ',
        "an empty TOOK cell: {never_row}"
    );
    assert_ne!(second_row.as_bytes()[took_end - 1], b' ', "{second_row}");
    let killed = groups
        .root
        .run(&["wait", "--follow", never["id"].as_str().unwrap()]);
    let line = String::from_utf8(killed.stderr).unwrap();
    assert!(
        line.contains("killed") && line.contains("before it ran") && !line.contains("after"),
        "{line}"
    );
}

#[test]
fn ps_wait_and_kill_take_a_group() {
    let groups = Groups::new();
    groups
        .root
        .ok(&["group", "set", "builds", "--parallel", "1"]);
    let outsider = groups.blocker("other", "true");
    let blocker = groups.blocker("builds", "exit 3");
    let queued = groups.run("builds", "true");
    let plain = groups.root.ok(&["run", "--", "true"]).trim().to_owned();

    let listed: Vec<String> = groups
        .root
        .json(&["ps", "--all", "--group", "builds"])
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(listed, [queued.clone(), blocker.clone()], "newest first");
    let default: Vec<Value> = groups
        .root
        .json(&["ps", "--all", "--group", "default"])
        .as_array()
        .unwrap()
        .clone();
    assert!(
        default.iter().any(|t| t["id"] == plain.as_str()),
        "{default:?}"
    );
    assert!(default.iter().all(|t| t["id"] != blocker.as_str()));

    // `wait --group` waits for every task of the group, as `wait` for several ids.
    let waiting = groups
        .root
        .command(&["wait", "--no-deliver", "--group", "builds"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    groups.release(&blocker);
    let waited = waiting.wait_with_output().unwrap();
    assert_eq!(waited.status.code(), Some(3), "the blocker's exit code");
    let text = String::from_utf8(waited.stdout).unwrap();
    assert!(text.contains(&format!("{blocker} failed")), "{text}");
    assert!(text.contains(&format!("{queued} completed")), "{text}");
    assert!(
        !text.contains(&outsider) && !text.contains(&plain),
        "{text}"
    );

    // `kill --group` kills the group's running and queued tasks, and nothing else.
    let running = groups.blocker("builds", "true");
    let waits = groups.run("builds", "true");
    assert!(groups.queued(&waits));
    let killed = groups.root.ok(&["kill", "--group", "builds"]);
    assert!(
        killed.contains(&running) && killed.contains(&waits),
        "{killed}"
    );
    eventually("the group killed", || {
        (groups.status(&running) == "killed" && groups.status(&waits) == "killed").then_some(())
    });
    assert_eq!(groups.status(&outsider), "running");
    // Nothing live is left in it: a second kill has nothing to do.
    let again = groups.root.run(&["kill", "--group", "builds"]);
    assert!(again.status.success(), "{again:?}");
    assert!(
        String::from_utf8(again.stderr)
            .unwrap()
            .contains("no live task")
    );
    groups.release(&outsider);
}

#[test]
fn a_paused_group_starts_nothing_until_resumed_even_after_its_supervisor_died() {
    let groups = Groups::new();
    let set = groups.root.ok(&["group", "set", "jobs", "--parallel", "2"]);
    assert_eq!(set, "group jobs: at most 2 of its tasks run at once\n");
    let json = groups
        .root
        .json(&["group", "set", "jobs", "--parallel", "0"]);
    assert_eq!(json, serde_json::json!({"group": "jobs", "parallel": 0}));

    let running = groups.blocker("jobs", "true");
    let paused = groups.root.ok(&["group", "pause", "jobs"]);
    assert!(paused.starts_with("group jobs paused"), "{paused}");
    let marker = groups.root.path("ran");
    let queued = groups.run("jobs", &format!("touch {}", marker.display()));
    assert!(
        groups.queued(&queued),
        "a paused group queues even without a limit"
    );
    // Its running task goes on, and ends, and still nothing of the group starts.
    groups.release(&running);
    groups.root.run(&["wait", "--no-deliver", &running]);
    assert_eq!(groups.status(&running), "completed");
    // A task of another group starts and ends meanwhile.
    let other = groups.run("other", "true");
    groups.root.run(&["wait", "--no-deliver", &other]);
    assert_eq!(groups.status(&other), "completed");
    assert!(groups.queued(&queued) && !marker.exists());
    let ls = groups.root.json(&["group", "ls"]);
    assert_eq!(ls["jobs"]["paused"], true, "{ls}");
    assert_eq!(ls["jobs"]["queued"], 1, "{ls}");

    // Kept across supervisors: the next one queues it again, still paused.
    let lock = groups.root.path("default/supervisor.lock");
    let pid: i32 = std::fs::read_to_string(&lock)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    sigkill(pid);
    eventually("a new supervisor", || {
        groups.task(&queued);
        let now: i32 = std::fs::read_to_string(&lock).ok()?.trim().parse().ok()?;
        (now != pid && support::is_alive(now)).then_some(())
    });
    let ping = groups.run("other", "true");
    groups.root.run(&["wait", "--no-deliver", &ping]);
    assert!(groups.queued(&queued) && !marker.exists());

    let resumed = groups.root.json(&["group", "resume", "jobs"]);
    assert_eq!(resumed["paused"], false, "{resumed}");
    groups.root.run(&["wait", "--no-deliver", &queued]);
    assert_eq!(groups.status(&queued), "completed");
    assert!(marker.exists());
    let ls = groups.root.json(&["group", "ls"]);
    assert_eq!(ls["jobs"]["paused"], false, "{ls}");
}
