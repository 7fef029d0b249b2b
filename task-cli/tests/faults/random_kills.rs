//! Supervisors SIGKILLed at random moments while 300 short tasks of mixed types (shells,
//! monitors, agents) start and end, with a reader collecting notifications all along: every
//! task ends, and each is notified exactly once, whatever window the kills hit (a start being
//! recorded, an end being written, a notice being claimed).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::sandbox::{Dice, Sandbox, signal};
use crate::support::{eventually, fake_agent, is_alive, poll_until};

const TASKS: usize = 300;
const KILLS: usize = 5;

#[test]
fn supervisors_killed_at_random_while_300_mixed_tasks_end_notify_each_task_exactly_once() {
    let mut sandbox = Sandbox::new();
    sandbox.set("TASKS_IDLE_EXIT_MS", "10000");
    let sandbox = Arc::new(sandbox);
    let script = sandbox.scratch().join("agent.jsonl");
    std::fs::write(&script, "{\"text\": \"looking\"}\n{\"result\": \"done\"}\n").unwrap();
    let mut dice = Dice::seeded();
    let kill_gaps: Vec<u64> = (0..KILLS).map(|_| 50 + dice.below(700)).collect();

    let starting = Arc::new(AtomicBool::new(true));
    let killer = {
        let (sandbox, starting) = (Arc::clone(&sandbox), Arc::clone(&starting));
        std::thread::spawn(move || kill_at_random(&sandbox, &kill_gaps, &starting))
    };
    let reading = Arc::new(AtomicBool::new(true));
    let reader = {
        let (sandbox, reading) = (Arc::clone(&sandbox), Arc::clone(&reading));
        std::thread::spawn(move || {
            let mut delivered = Vec::new();
            while reading.load(Ordering::SeqCst) {
                delivered.extend(completions(&sandbox));
            }
            delivered
        })
    };
    let fake = fake_agent();
    let (fake, script) = (fake.to_str().unwrap(), script.to_str().unwrap());
    // A start whose supervisors all died before answering, and whose key no record carries,
    // fails (exit 69) and says the task was not made; one whose record is on disk is answered.
    let (mut ids, mut refused) = (Vec::new(), Vec::new());
    for i in 0..TASKS {
        let pause = format!("sleep 0.{}", i % 7);
        let args: Vec<&str> = match i % 3 {
            0 => vec!["run", "--", &pause],
            1 => vec!["monitor", "--", &pause],
            _ => vec!["agent", "--prompt", "p", "--", fake, "--script", script],
        };
        let ran = sandbox.run(&args);
        match ran.code() {
            0 => ids.push(ran.stdout.lines().next().unwrap().trim().to_owned()),
            69 => refused.push(ran.stderr),
            _ => panic!("tasks {args:?}: {ran:?}"),
        }
    }
    starting.store(false, Ordering::SeqCst);
    let kills = killer.join().unwrap();
    sandbox.until_all_ended();
    reading.store(false, Ordering::SeqCst);
    let mut delivered = reader.join().unwrap();
    delivered.extend(completions(&sandbox));

    // Every task that exists, whether or not its start was answered, is notified once.
    let listed = sandbox.listed();
    let mut times: BTreeMap<&str, usize> = listed
        .iter()
        .map(|t| (t["id"].as_str().unwrap(), 0))
        .collect();
    for id in &delivered {
        *times
            .get_mut(id.as_str())
            .unwrap_or_else(|| panic!("a notification of a task not listed: {id}")) += 1;
    }
    let wrong: Vec<_> = times.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        wrong.is_empty(),
        "after {kills} supervisor kills, tasks not notified exactly once: {wrong:?}"
    );
    assert!(listed.iter().all(|t| t["notified"] == true));
    // A start answered made one task; a start sent again after its supervisor died made none
    // more: only a start never answered may have made a task nobody was told of.
    let started: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
    assert_eq!(started.len(), ids.len(), "two starts answered with one id");
    assert!(
        started.iter().all(|id| times.contains_key(id)),
        "a started task is not listed"
    );
    let strangers: Vec<&Value> = listed
        .iter()
        .filter(|t| !started.contains(t["id"].as_str().unwrap()))
        .collect();
    // A start refused said whether it made its task, from disk (issue #24, window 2): one
    // that says "not made" made none; only one that could not tell ("unknown") may have. So
    // every other task is named by an answered start.
    let unannounced = strangers.len();
    let untold = refused
        .iter()
        .filter(|why| !why.contains("the task was not made"))
        .count();
    assert!(
        unannounced <= untold,
        "UNEXPLAINED: {unannounced} tasks nobody was told of ({strangers:?}), {} starts \
         refused, {untold} of them not saying the task was not made: {refused:?}",
        refused.len()
    );
    eprintln!(
        "{TASKS} starts, {kills} supervisor kills: {} started, {} refused ({unannounced} of \
         them made a task), each task notified once",
        ids.len(),
        refused.len()
    );
    assert!(kills >= 3, "too few kills to show anything: {kills}");
}

/// SIGKILLs the session's supervisor after each gap (ms) while tasks are being started,
/// waiting for the next supervisor where none runs (a loaded machine may take seconds to start
/// one); stops when the starts are over. Returns how many were killed.
fn kill_at_random(sandbox: &Sandbox, gaps: &[u64], starting: &AtomicBool) -> usize {
    let lock = sandbox.session_dir().join("supervisor.lock");
    let mut kills = 0;
    for gap in gaps {
        std::thread::sleep(Duration::from_millis(*gap));
        let holder = poll_until(Duration::from_secs(120), || {
            if !starting.load(Ordering::SeqCst) {
                return Some(None);
            }
            let held = task_session::lock::is_held(&lock).unwrap_or(false);
            held.then(|| task_session::lock::holder_pid(&lock))
                .flatten()
                .and_then(|pid| i32::try_from(pid).ok())
                .map(Some)
        });
        let Some(Some(pid)) = holder else { break };
        signal(pid, rustix::process::Signal::KILL);
        eventually("the supervisor gone", || (!is_alive(pid)).then_some(()));
        kills += 1;
    }
    kills
}

/// The tasks whose completions (not events) one `tasks notifications --json` delivered.
fn completions(sandbox: &Sandbox) -> Vec<String> {
    sandbox
        .ok(&["notifications", "--json"])
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|notice| !notice["notification"]["status"].is_null())
        .map(|notice| notice["taskId"].as_str().unwrap().to_owned())
        .collect()
}
