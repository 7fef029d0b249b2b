//! Teammates and dreams through the `tasks` binary, with task-agent's scripted `fake-agent` as
//! the agent CLI: `team spawn`, `send` from many concurrent `tasks` processes (each message
//! delivered exactly once and in order per sender), `team ls` and `ps` showing idle vs working,
//! `team shutdown` with the task-list unassign, and `dream` with its lock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Value, json};
use support::agent_sandbox::{Sandbox, received};
use support::eventually;
use support::fake_agent;

impl Sandbox {
    fn teammates(&self) -> Vec<Value> {
        serde_json::from_str::<Value>(&self.ok(&["team", "ls", "--json"]))
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    fn status(&self, id: &str) -> String {
        self.listed(id)["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn output_file(&self, id: &str) -> PathBuf {
        self.path(&format!("default/tasks/{id}.output"))
    }
}

/// Teammates in the CLI test, and messages each of its four senders sends each of them.
const TEAMMATES: usize = 20;
const PER_SENDER: usize = 25;

#[test]
fn teammates_get_every_message_from_concurrent_tasks_send_processes_once_in_order_and_shut_down() {
    let sandbox = Sandbox::for_agents();
    let script = sandbox.script(
        "mate.jsonl",
        &[
            json!({"read_user": true}),
            json!({"result": "ready"}),
            json!({"teammate": true}),
        ],
    );
    let fake = fake_agent();
    let names: Vec<String> = (0..TEAMMATES).map(|n| format!("mate{n}")).collect();
    let ids: Vec<String> = names
        .iter()
        .map(|name| {
            let member = format!("{name}@crew");
            let out = sandbox.ok(&[
                "team",
                "spawn",
                &member,
                "--",
                fake.to_str().unwrap(),
                "--script",
                &script,
            ]);
            out.trim().to_owned()
        })
        .collect();
    assert!(ids.iter().all(|id| id.starts_with('t')), "{ids:?}");
    eventually("every teammate idle", || {
        let rows = sandbox.teammates();
        (rows.len() == TEAMMATES && rows.iter().all(|r| r["activity"] == "idle")).then_some(())
    });
    let table = sandbox.ok(&["ps"]);
    assert!(
        table.lines().filter(|l| l.contains("· idle")).count() == TEAMMATES,
        "{table}"
    );
    // mate0 owns two open tasks and a completed one in the team's list.
    for subject in ["write docs", "fix bug", "ship"] {
        sandbox.ok(&["list", "--list", "crew", "create", "--subject", subject]);
    }
    for (task, status) in [("1", "pending"), ("2", "completed"), ("3", "in_progress")] {
        sandbox.ok(&[
            "list", "--list", "crew", "update", task, "--owner", "mate0", "--status", status,
        ]);
    }
    // Four senders, each a sequence of separate `tasks send` processes, all at once.
    std::thread::scope(|scope| {
        for sender in ["s0", "s1", "s2", "s3"] {
            let (sandbox, names) = (&sandbox, &names);
            scope.spawn(move || {
                for seq in 0..PER_SENDER {
                    for name in names {
                        let sent = sandbox.ok(&["send", name, &format!("{sender}#{seq}")]);
                        assert!(
                            sent.contains(&format!("Message sent to {name}'s inbox")),
                            "{sent}"
                        );
                    }
                }
            });
        }
    });
    for id in &ids {
        let transcript = sandbox.output_file(id);
        let got = eventually("every message", || {
            let got = received(&transcript);
            (got.len() >= 4 * PER_SENDER).then_some(got)
        });
        assert_eq!(got.len(), 4 * PER_SENDER, "{got:?}");
        let mut next: HashMap<String, u32> = HashMap::new();
        for body in got {
            let (sender, seq) = body.split_once('#').unwrap();
            let expected = next.entry(sender.to_owned()).or_default();
            assert_eq!(seq.parse::<u32>().unwrap(), *expected, "{id}: {sender}");
            *expected += 1;
        }
    }
    assert_eq!(record_owner(&sandbox, "1"), "mate0");
    assert_eq!(record_owner(&sandbox, "3"), "mate0");
    let asked = sandbox.ok(&["team", "shutdown", "mate0", "--reason", "done"]);
    assert!(asked.contains("Message sent to mate0's inbox"), "{asked}");
    eventually("mate0 completed", || {
        (sandbox.status(&ids[0]) == "completed").then_some(())
    });
    let record = |task: &str| list_record(&sandbox, task);
    eventually("its open tasks unassigned", || {
        (record("1").get("owner").is_none() && record("3").get("owner").is_none()).then_some(())
    });
    assert_eq!(record("3")["status"], "pending");
    assert_eq!(record("2")["owner"], "mate0");
    let lead = std::fs::read_to_string(sandbox.path("default/teams/crew/inboxes/team-lead.jsonl"))
        .unwrap();
    assert!(
        lead.contains(
            "mate0 has shut down. 2 task(s) were unassigned: #1 \\\"write docs\\\", #3 \\\"ship\\\""
        ),
        "{lead}"
    );
    assert!(lead.contains(r#"\"type\":\"shutdown_response\""#), "{lead}");
    // Teammates never notify the model.
    let notes = sandbox.ok(&["notifications"]);
    assert!(!notes.contains(&ids[0]), "{notes}");
    let unknown = sandbox.run(&["send", "nobody", "hi"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stdout).contains("No agent named 'nobody'"));
    let rest: Vec<&str> = ids[1..].iter().map(String::as_str).collect();
    sandbox.ok(&[&["kill"], rest.as_slice()].concat());
}

/// Task `task` of the team's list, read from the list's own file (the reference's format).
fn list_record(sandbox: &Sandbox, task: &str) -> Value {
    let path = sandbox.path(&format!("lists/crew/{task}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn record_owner(sandbox: &Sandbox, task: &str) -> Value {
    list_record(sandbox, task)["owner"].clone()
}

fn mtime_ms(path: &Path) -> u64 {
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    modified.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// The last real consolidation the dream tests start from (ms since the epoch).
const PRIOR_MS: u64 = 1_600_000_000_000;

/// A consolidation lock last touched at [`PRIOR_MS`], and the arguments of a `tasks dream` on
/// it whose agent touches `dreaming` and then works until killed.
fn dream_fixture(sandbox: &Sandbox) -> (PathBuf, Vec<String>) {
    let lock = sandbox.path("memory/.consolidate-lock");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    let file = std::fs::File::create(&lock).unwrap();
    file.set_modified(UNIX_EPOCH + Duration::from_millis(PRIOR_MS))
        .unwrap();
    let script = sandbox.script(
        "dream.jsonl",
        &[
            json!({"read_user": true}),
            json!({"touch": sandbox.path("dreaming").display().to_string()}),
            json!({"wait_file": sandbox.path("never").display().to_string()}),
        ],
    );
    let args = [
        "dream",
        "--lock",
        &lock.display().to_string(),
        "--",
        &fake_agent().display().to_string(),
        "--script",
        &script,
    ]
    .map(String::from)
    .to_vec();
    (lock, args)
}

#[test]
fn a_dream_holds_the_lock_refuses_a_second_and_a_kill_rolls_it_back() {
    let sandbox = Sandbox::for_agents();
    let (lock, args) = dream_fixture(&sandbox);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let dream = |sandbox: &Sandbox| sandbox.run(&args);
    let first = dream(&sandbox);
    assert!(first.status.success(), "{first:?}");
    let id = String::from_utf8(first.stdout).unwrap().trim().to_owned();
    assert!(id.starts_with('d'), "{id}");
    eventually("the dream running", || {
        sandbox.path("dreaming").exists().then_some(())
    });
    assert!(mtime_ms(&lock) > PRIOR_MS);
    let second = dream(&sandbox);
    assert!(!second.status.success());
    assert!(
        String::from_utf8_lossy(&second.stderr)
            .contains("another dream holds the consolidation lock"),
        "{second:?}"
    );
    sandbox.ok(&["kill", &id]);
    assert_eq!(sandbox.status(&id), "killed");
    assert_eq!(mtime_ms(&lock), PRIOR_MS);
    let notes = sandbox.ok(&["notifications"]);
    assert!(!notes.contains(&id), "{notes}");
}

#[test]
fn a_dream_whose_supervisor_is_sigkilled_is_rolled_back_by_the_next_dream() {
    let sandbox = Sandbox::for_agents();
    let (lock, args) = dream_fixture(&sandbox);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first = sandbox.ok(&args).trim().to_owned();
    eventually("the dream running", || {
        sandbox.path("dreaming").exists().then_some(())
    });
    assert!(mtime_ms(&lock) > PRIOR_MS);
    let all: Value = serde_json::from_str(&sandbox.ok(&["ps", "--json"])).unwrap();
    let row = all
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == first)
        .unwrap();
    let supervisor = i32::try_from(row["supervisorPid"].as_u64().unwrap()).unwrap();
    support::sigkill(supervisor);
    eventually("the supervisor gone", || {
        (!support::is_alive(supervisor)).then_some(())
    });
    // Mid-dream, and nobody rolled it back yet.
    assert!(mtime_ms(&lock) > PRIOR_MS);
    std::fs::remove_file(sandbox.path("dreaming")).unwrap();
    let second = sandbox.ok(&args).trim().to_owned();
    let listed = sandbox.ok(&["ps", "--json"]);
    let all: Value = serde_json::from_str(&listed).unwrap();
    let row = all
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == second)
        .unwrap();
    // The new dream's priorMtime is the last real consolidation, not the dead dream's start.
    assert!(
        row.to_string().contains("\"priorMtime\":1600000000000"),
        "{row}"
    );
    sandbox.ok(&["kill", &second]);
    assert_eq!(mtime_ms(&lock), PRIOR_MS);
}
