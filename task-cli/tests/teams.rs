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

    /// Spawns `member`, a teammate that works on its first turn until a file that never
    /// appears: it never reads its mailbox, so it never sees a shutdown request, let alone
    /// approves one. Returns its id.
    fn silent_teammate(&self, member: &str) -> String {
        let script = self.silent_script();
        let fake = fake_agent();
        let args = ["team", "spawn", member, "--", fake.to_str().unwrap()];
        let out = self.ok(&[&args[..], &["--script", &script]].concat());
        out.trim().to_owned()
    }

    /// The script of a teammate that works on its first turn until a file that never appears.
    fn silent_script(&self) -> String {
        let never = self.path("never");
        let steps = [
            json!({"read_user": true}),
            json!({"wait_file": never.to_str().unwrap()}),
        ];
        self.script("silent.jsonl", &steps)
    }

    /// A teammate's script: it reads its prompt, answers `ready`, and from then on approves a
    /// shutdown request.
    fn ready_teammate_script(&self) -> String {
        let steps = [
            json!({"read_user": true}),
            json!({"result": "ready"}),
            json!({"teammate": true}),
        ];
        self.script("mate.jsonl", &steps)
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
    let script = sandbox.ready_teammate_script();
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
    // The lead is told once the list is written: its inbox may lag the records by a moment.
    let inbox = sandbox.path("default/teams/crew/inboxes/team-lead.jsonl");
    let told =
        "mate0 has shut down. 2 task(s) were unassigned: #1 \\\"write docs\\\", #3 \\\"ship\\\"";
    let lead = eventually("the lead told of the unassigned tasks", || {
        let lead = std::fs::read_to_string(&inbox).unwrap_or_default();
        lead.contains(told).then_some(lead)
    });
    assert!(lead.contains(r#"\"type\":\"shutdown_response\""#), "{lead}");
    // Teammates never notify the model.
    let notes = sandbox.ok(&["notifications"]);
    assert!(!notes.contains(&ids[0]), "{notes}");
    // An address that names no task: unknown task (66), said on stderr as every error is.
    let unknown = sandbox.run(&["send", "nobody", "hi"]);
    assert_eq!(unknown.status.code(), Some(66), "{unknown:?}");
    let said = String::from_utf8_lossy(&unknown.stderr);
    assert!(said.starts_with("tasks: No agent named 'nobody'"), "{said}");
    let malformed = sandbox.run(&["send", "mate1@", "hi"]);
    assert_eq!(malformed.status.code(), Some(2), "{malformed:?}");
    let said = String::from_utf8_lossy(&malformed.stderr);
    assert!(said.contains("\"mate1@\" is not an address"), "{said}");
    let rest: Vec<&str> = ids[1..].iter().map(String::as_str).collect();
    sandbox.ok(&[&["kill"], rest.as_slice()].concat());
}

#[test]
fn a_silent_teammate_asked_to_shut_down_is_ended_at_the_bound_and_force_ends_one_at_once() {
    let sandbox = Sandbox::for_agents().env("TASKS_TEAM_SHUTDOWN_MS", "3000");
    let spawn = |member: &str| sandbox.silent_teammate(member);
    let (quiet, stubborn) = (spawn("quiet@crew"), spawn("stubborn@crew"));
    eventually("both working", || {
        let rows = sandbox.teammates();
        (rows.len() == 2 && rows.iter().all(|r| r["activity"] == "working")).then_some(())
    });

    let asked = sandbox.ok(&["team", "shutdown", "quiet@crew"]);
    assert!(
        asked.contains("Message sent to quiet@crew's inbox"),
        "{asked}"
    );
    let row = |id: &str| {
        sandbox
            .teammates()
            .into_iter()
            .find(|r| r["id"] == id)
            .unwrap_or_default()
    };
    let asked_row = row(&quiet);
    assert!(asked_row["shutdownRequestedAt"].is_u64(), "{asked_row}");
    let table = sandbox.ok(&["team", "ls"]);
    assert!(table.contains("shutdown requested"), "{table}");
    assert_eq!(
        sandbox.status(&quiet),
        "running",
        "the bound has not passed yet"
    );

    let ended = eventually("the silent teammate ended at its bound", || {
        let task = sandbox.listed(&quiet);
        (task["status"] == "killed").then_some(task)
    });
    assert_eq!(
        ended["endReason"],
        json!({"reason": "shutdown_unanswered", "limitMs": 3000}),
        "{ended}"
    );
    assert_eq!(sandbox.status(&stubborn), "running", "only the one asked");

    let forced = sandbox.ok(&["team", "shutdown", "stubborn", "--force"]);
    assert_eq!(forced, format!("{stubborn} killed\n"));
    assert_eq!(sandbox.status(&stubborn), "killed");
    let gone = sandbox.run(&["team", "shutdown", "stubborn", "--force"]);
    assert!(!gone.status.success(), "no live teammate is left to force");
}

#[test]
fn a_shutdown_request_survives_a_sigkilled_supervisor_and_its_bound_still_ends_the_teammate() {
    let sandbox = Sandbox::for_agents().env("TASKS_TEAM_SHUTDOWN_MS", "3000");
    let id = sandbox.silent_teammate("quiet@crew");
    let id = id.as_str();
    eventually("it works", || {
        (sandbox.teammates().first()?["activity"] == "working").then_some(())
    });
    sandbox.ok(&["team", "shutdown", "quiet"]);
    let requested_at = sandbox.teammates()[0]["shutdownRequestedAt"]
        .as_u64()
        .unwrap();
    let supervisor: i32 = std::fs::read_to_string(sandbox.path("default/supervisor.lock"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: kill(2) on the pid of the supervisor this test started.
    assert_eq!(unsafe { libc::kill(supervisor, libc::SIGKILL) }, 0);

    // The next command starts a supervisor that resumes the teammate, request and all.
    let ended = eventually(
        "the resumed teammate ended at the bound of the first request",
        || {
            let task = sandbox.listed(id);
            (task["status"] == "killed").then_some(task)
        },
    );
    assert_eq!(
        ended["endReason"],
        json!({"reason": "shutdown_unanswered", "limitMs": 3000}),
        "{ended}"
    );
    assert_eq!(
        ended["kind"]["teammate"]["shutdownRequestedAt"].as_u64(),
        Some(requested_at),
        "{ended}"
    );
    let end = ended["endTime"].as_u64().unwrap();
    assert!(end >= requested_at + 3000, "not before its bound: {ended}");
}

#[test]
fn a_teammate_resumed_after_a_sigkilled_supervisor_approves_a_shutdown_request() {
    // A bound far beyond the test's deadlines: an end now is the teammate's own approval.
    let sandbox = Sandbox::for_agents().env("TASKS_TEAM_SHUTDOWN_MS", "600000");
    let script = sandbox.ready_teammate_script();
    let fake = fake_agent();
    let args = ["team", "spawn", "kit@crew", "--", fake.to_str().unwrap()];
    let id = sandbox.ok(&[&args[..], &["--script", &script]].concat());
    let id = id.trim();
    let idle = |row: &Value| row["kind"]["teammate"]["isIdle"] == true;
    let before = eventually("the teammate idle", || {
        Some(sandbox.listed(id)).filter(idle)
    });
    let supervisor = before["supervisorPid"].as_i64().unwrap() as i32;
    support::sigkill(supervisor);
    eventually("the supervisor gone", || {
        (!support::is_alive(supervisor)).then_some(())
    });
    eventually("the teammate resumed by the next supervisor", || {
        let row = sandbox.listed(id);
        (row["supervisorPid"].as_i64() != Some(i64::from(supervisor)) && idle(&row)).then_some(())
    });

    sandbox.ok(&["team", "shutdown", "kit"]);
    let ended = eventually("the resumed teammate ended", || {
        Some(sandbox.listed(id)).filter(|row| row["status"] != "running")
    });
    assert_eq!(ended["status"], "completed", "it approved: {ended}");
    assert_eq!(
        ended["endReason"],
        json!({"reason": "succeeded"}),
        "{ended}"
    );
    let said = std::fs::read_to_string(sandbox.output_file(id)).unwrap();
    assert!(
        said.contains(r#"\"type\":\"shutdown_response\""#),
        "its approval is in its transcript:\n{said}"
    );
}

/// Spawns `member`, a teammate that answers `ready` and approves shutdown requests, and waits
/// until it is idle. Returns its id.
fn idle_teammate(sandbox: &Sandbox, member: &str) -> String {
    let script = sandbox.ready_teammate_script();
    let fake = fake_agent();
    let args = ["team", "spawn", member, "--", fake.to_str().unwrap()];
    let id = sandbox.ok(&[&args[..], &["--script", &script]].concat());
    let id = id.trim().to_owned();
    eventually("the teammate idle", || {
        (sandbox.listed(&id)["kind"]["teammate"]["isIdle"] == true).then_some(())
    });
    id
}

/// The ended teammate `id` (its last end at `ended`, ms) is sent `message` at `to`: it runs
/// again under its id and its transcript gets the answer to the message.
fn resumed_with(sandbox: &Sandbox, id: &str, to: &str, message: &str, ended: u64) {
    let sent = sandbox.ok(&["send", to, message]);
    assert!(sent.contains("resumed it in the background"), "{sent}");
    let answered = |text: &str| {
        text.lines()
            .any(|line| line.contains("echo: ") && line.contains(message))
    };
    eventually("the resumed teammate answers the message", || {
        let said = std::fs::read_to_string(sandbox.output_file(id)).ok()?;
        answered(&said).then_some(())
    });
    let row = eventually("the teammate running again, idle after its answer", || {
        let row = sandbox.listed(id);
        (row["status"] == "running" && row["kind"]["teammate"]["isIdle"] == true).then_some(row)
    });
    assert_eq!(row["id"], id, "{row}");
    // Teammates never notify the model (`notified` is latched from the start): their end is
    // the record's, written again when this run ends (see `ended_again`).
    assert!(
        row["endTime"].as_u64().is_none_or(|end| end != ended),
        "a new run: {row}"
    );
    let mates: Vec<Value> = sandbox.teammates();
    assert_eq!(mates.len(), 1, "one teammate all along: {mates:?}");
}

/// The teammate `id` ended (`status`) after `after` (ms): its end, notified, recorded.
fn ended_again(sandbox: &Sandbox, id: &str, status: &str, after: u64) -> u64 {
    let row = support::poll_until(support::DEADLINE, || {
        Some(sandbox.listed(id)).filter(|row| row["status"] != "running")
    })
    .unwrap_or_else(|| {
        let read = |name: &str| std::fs::read_to_string(sandbox.path(name)).unwrap_or_default();
        panic!(
            "timed out waiting for the teammate to end: {}\ntranscript:\n{}\nlead's inbox:\n{}\nlog:\n{}",
            sandbox.listed(id),
            read(&format!("default/tasks/{id}.output")),
            read("default/teams/crew/inboxes/team-lead.jsonl"),
            read("default/supervisor.log"),
        )
    });
    assert_eq!(row["status"], status, "{row}");
    assert_eq!(row["notified"], true, "{row}");
    let end = row["endTime"].as_u64().unwrap();
    assert!(end > after, "a new end: {row}");
    end
}

#[test]
fn a_teammate_shut_down_resumes_under_its_id_when_sent_a_message_and_shuts_down_again() {
    // A bound far beyond the test's deadlines: an end is the teammate's own approval.
    let sandbox = Sandbox::for_agents().env("TASKS_TEAM_SHUTDOWN_MS", "600000");
    let id = idle_teammate(&sandbox, "mate@crew");
    sandbox.ok(&["team", "shutdown", "mate"]);
    let first = ended_again(&sandbox, &id, "completed", 0);

    resumed_with(&sandbox, &id, "mate@crew", "more work", first);
    let asked = sandbox.ok(&["team", "shutdown", "mate@crew"]);
    assert!(
        asked.contains("Message sent to mate@crew's inbox"),
        "{asked}"
    );
    ended_again(&sandbox, &id, "completed", first);
    let lead = std::fs::read_to_string(sandbox.path("default/teams/crew/inboxes/team-lead.jsonl"))
        .unwrap();
    assert_eq!(
        lead.matches(r#"\"type\":\"shutdown_response\""#).count(),
        2,
        "it approved each shutdown: {lead}"
    );
}

#[test]
fn a_killed_teammate_resumes_under_its_id_by_name_and_by_id() {
    let sandbox = Sandbox::for_agents();
    let id = idle_teammate(&sandbox, "mate@crew");
    assert_eq!(sandbox.ok(&["kill", &id]).trim(), format!("{id} killed"));
    let first = ended_again(&sandbox, &id, "killed", 0);

    resumed_with(&sandbox, &id, "mate", "by name", first);
    sandbox.ok(&["kill", &id]);
    let second = ended_again(&sandbox, &id, "killed", first);

    resumed_with(&sandbox, &id, &id, "by id", second);
    sandbox.ok(&["kill", &id]);
    ended_again(&sandbox, &id, "killed", second);
    let unknown = sandbox.run(&["send", "nobody@crew", "hi"]);
    assert!(!unknown.status.success(), "{unknown:?}");
}

#[test]
fn an_ended_teammate_resumes_when_sent_a_message_after_a_sigkilled_supervisor() {
    let sandbox = Sandbox::for_agents();
    let id = idle_teammate(&sandbox, "mate@crew");
    sandbox.ok(&["kill", &id]);
    let first = ended_again(&sandbox, &id, "killed", 0);
    let supervisor = sandbox.listed(&id)["supervisorPid"].as_i64().unwrap() as i32;
    support::sigkill(supervisor);
    eventually("the supervisor gone", || {
        (!support::is_alive(supervisor)).then_some(())
    });

    // This send starts the next supervisor, which takes the teammate back from its record.
    resumed_with(&sandbox, &id, "mate@crew", "after a restart", first);
    let row = sandbox.listed(&id);
    assert_ne!(
        row["supervisorPid"].as_i64(),
        Some(i64::from(supervisor)),
        "{row}"
    );
    sandbox.ok(&["kill", &id]);
    ended_again(&sandbox, &id, "killed", first);
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

/// Teammates of the crash test of budgets and end hooks, their time budget, and how many
/// times their supervisor is SIGKILLed while they run.
const CRASHED_TEAMMATES: usize = 20;
const TIME_BUDGET_MS: u64 = 4000;
const SUPERVISOR_KILLS: usize = 3;

/// #41.2: a teammate a dead supervisor left running goes on under the next one as the same
/// run: its time budget counts from when it began running (not from the resume), its end
/// hook runs (once), and its records keep the hook and how it was started.
#[test]
fn teammates_resumed_after_sigkilled_supervisors_keep_their_time_budget_and_end_hook() {
    let sandbox = Sandbox::for_agents();
    let log = sandbox.path("ends.log");
    let hook = format!("echo \"$TASKS_ID\" >> '{}'", log.display());
    let script = sandbox.silent_script();
    let fake = fake_agent();
    let ids: Vec<String> = (0..CRASHED_TEAMMATES)
        .map(|i| {
            let member = format!("m{i}@crew");
            let args = [
                "team",
                "spawn",
                &member,
                "--timeout",
                "4s",
                "--on-end",
                &hook,
                "--",
            ];
            let fake = [fake.to_str().unwrap(), "--script", &script];
            sandbox
                .ok(&[&args[..], &fake[..]].concat())
                .trim()
                .to_owned()
        })
        .collect();
    let began: HashMap<String, u64> = ids
        .iter()
        .map(|id| {
            let started = eventually("the teammate running", || {
                sandbox.listed(id)["startedAt"].as_u64()
            });
            (id.clone(), started)
        })
        .collect();

    // SIGKILLs at random points of their runs; after each, the next supervisor takes them back.
    let mut dice = support::Dice::seeded();
    let mut last_resume = 0;
    for _ in 0..SUPERVISOR_KILLS {
        // The kill's moment is the schedule's random input (the crash point), not a wait for an event.
        std::thread::sleep(Duration::from_millis(300 + dice.below(900)));
        let supervisor = supervisor_pid(&sandbox);
        support::sigkill(supervisor);
        eventually("the supervisor gone", || {
            (!support::is_alive(supervisor)).then_some(())
        });
        sandbox.ok(&["ps"]); // starts the next supervisor, which takes them back
        last_resume = now_ms();
    }

    let ended: Vec<Value> = ids
        .iter()
        .map(|id| {
            eventually("the teammate ended", || {
                Some(sandbox.listed(id)).filter(|row| row["status"] == "failed")
            })
        })
        .collect();
    for row in &ended {
        let id = row["id"].as_str().unwrap();
        assert_eq!(row["endReason"]["reason"], "budget_exceeded", "{row}");
        assert_eq!(row["endReason"]["limit"], "time", "{row}");
        assert_eq!(
            row["startedAt"].as_u64(),
            Some(began[id]),
            "the run that went on began when it first ran: {row}"
        );
        // Its time was up at its first start plus its budget, or at the resume after that.
        let due = (began[id] + TIME_BUDGET_MS).max(last_resume);
        let end = row["endTime"].as_u64().unwrap();
        assert!(
            end < due + TIME_BUDGET_MS / 2,
            "ended {} ms after its time was up: {row}",
            end.saturating_sub(due)
        );
        let record: Value = serde_json::from_slice(
            &std::fs::read(sandbox.path(&format!("default/tasks/{id}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(record["onEnd"].as_str(), Some(hook.as_str()), "{record}");
        assert!(record["start"]["kind"] == "teammate", "{record}");
    }
    let hooked = eventually("every end hook ran", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        (text.lines().count() >= CRASHED_TEAMMATES).then_some(text)
    });
    let mut times: HashMap<&str, usize> = HashMap::new();
    for line in hooked.lines() {
        *times.entry(line).or_default() += 1;
    }
    for id in &ids {
        assert_eq!(
            times.get(id.as_str()),
            Some(&1),
            "{id}'s hook ran once: {hooked}"
        );
    }
}

fn supervisor_pid(sandbox: &Sandbox) -> i32 {
    std::fs::read_to_string(sandbox.path("default/supervisor.lock"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// #41.2: the turns a teammate's budget counted before its supervisor died still count after
/// the next supervisor resumes it (they restarted from zero).
#[test]
fn a_teammate_resumed_after_a_sigkilled_supervisor_keeps_the_turns_its_budget_counted() {
    let sandbox = Sandbox::for_agents().env("TASKS_TEAM_SHUTDOWN_MS", "600000");
    // Each answer is a model response (a turn): the first, to the prompt, and the echo of
    // every message after it.
    let steps = [
        json!({"read_user": true}),
        json!({"text": "ready"}),
        json!({"result": "ready"}),
    ];
    let script = sandbox.script("tally.jsonl", &steps);
    let fake = fake_agent();
    let args = ["team", "spawn", "tally@crew", "--max-turns", "50", "--"];
    let id = sandbox.ok(&[&args[..], &[fake.to_str().unwrap(), "--script", &script]].concat());
    let id = id.trim();
    let turns = |row: &Value| row["kind"]["teammate"]["budget"]["turnsUsed"].as_u64();
    let idle_after = |after: u64| {
        let last = std::cell::RefCell::new(Value::Null);
        let idle = support::poll_until(Duration::from_secs(30), || {
            let row = sandbox.listed(id);
            last.replace(row.clone());
            (row["kind"]["teammate"]["isIdle"] == true && turns(&row)? > after).then_some(row)
        });
        idle.unwrap_or_else(|| panic!("not idle after turn {after}: {}", last.borrow()))
    };
    let first = idle_after(0);
    sandbox.ok(&["send", "tally", "one more turn"]);
    let before = idle_after(turns(&first).unwrap());
    let counted = turns(&before).unwrap();
    let supervisor = before["supervisorPid"].as_i64().unwrap() as i32;
    support::sigkill(supervisor);
    eventually("the supervisor gone", || {
        (!support::is_alive(supervisor)).then_some(())
    });

    // Its resumed turn counts on top of what was counted.
    let resumed = idle_after(counted);
    assert_ne!(
        resumed["supervisorPid"].as_i64(),
        Some(i64::from(supervisor)),
        "{resumed}"
    );
    assert_eq!(resumed["status"], "running", "{resumed}");
}
