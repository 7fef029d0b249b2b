//! A teammate whose supervisor is SIGKILLed as the teammate takes each message: every accepted
//! send reaches its conversation exactly once, no refused send does (issue #24, item 2).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::agent_sandbox::{Sandbox, received, teammate_messages};
use crate::support::{eventually, fake_agent, is_alive, sigkill};

/// Concurrent senders, each a sequence of separate `tasks send` processes.
const SENDERS: usize = 5;
/// Messages each sender sends.
const PER_SENDER: usize = 10;
/// How often the killer looks for a turn the teammate took.
const WATCH: Duration = Duration::from_millis(1);

/// The pid of the session's supervisor, as its lock names it (it may be dead already).
fn supervisor_pid(sandbox: &Sandbox) -> Option<i32> {
    let text = std::fs::read_to_string(sandbox.path("default/supervisor.lock")).ok()?;
    text.trim().parse().ok()
}

/// The turns the teammate's agent CLIs have read (one signal file each, holding the turn).
fn turns_taken(signals: &Path) -> BTreeSet<String> {
    std::fs::read_dir(signals)
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| !name.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

fn teammate_row(sandbox: &Sandbox, id: &str) -> Option<Value> {
    let rows: Value = serde_json::from_str(&sandbox.ok(&["team", "ls", "--json"])).ok()?;
    rows.as_array()?.iter().find(|r| r["id"] == id).cloned()
}

#[test]
fn a_teammates_supervisor_sigkilled_as_it_takes_each_message_loses_none_repeats_none_and_delivers_no_refused_one()
 {
    let sandbox = Sandbox::for_agents();
    let signals = sandbox.path("turns");
    std::fs::create_dir(&signals).unwrap();
    let script = sandbox.script(
        "mate.jsonl",
        &[json!({"read_user": true}), json!({"result": "ready"})],
    );
    let fake = fake_agent();
    let spawned = sandbox.ok(&[
        "team",
        "spawn",
        "bob@crew",
        "--",
        fake.to_str().unwrap(),
        "--script",
        &script,
        "--turn-signal",
        signals.to_str().unwrap(),
    ]);
    let id = spawned.trim().to_owned();
    eventually("bob idle", || {
        teammate_row(&sandbox, &id).filter(|r| r["activity"] == "idle")
    });
    let transcript = sandbox.path(&format!("default/tasks/{id}.output"));
    let done = AtomicBool::new(false);
    let kills = AtomicUsize::new(0);
    let outcomes = std::thread::scope(|scope| {
        // Kills the supervisor the moment the teammate's CLI has read a turn holding a
        // message it never read before: once as it takes each message.
        scope.spawn(|| {
            let mut seen = turns_taken(&signals);
            let mut taken_once = HashSet::new();
            while !done.load(Ordering::SeqCst) {
                let now = turns_taken(&signals);
                let mut fresh = false;
                for turn in now.difference(&seen) {
                    let text = std::fs::read_to_string(signals.join(turn)).unwrap();
                    for body in teammate_messages(&text) {
                        fresh |= taken_once.insert(body);
                    }
                }
                seen = now;
                if fresh && let Some(pid) = supervisor_pid(&sandbox).filter(|&pid| is_alive(pid)) {
                    sigkill(pid);
                    kills.fetch_add(1, Ordering::SeqCst);
                }
                std::thread::sleep(WATCH);
            }
        });
        let senders: Vec<_> = (0..SENDERS)
            .map(|sender| {
                let sandbox = &sandbox;
                scope.spawn(move || {
                    (0..PER_SENDER)
                        .map(|seq| {
                            let body = format!("s{sender}#{seq}");
                            let sent = sandbox.run(&["send", "bob@crew", &body]);
                            let stdout = String::from_utf8_lossy(&sent.stdout).into_owned();
                            let stderr = String::from_utf8_lossy(&sent.stderr);
                            let stdout = format!("{stdout}{stderr} ({})", sent.status);
                            if sent.status.success() {
                                assert!(
                                    stdout.contains("Message sent to bob@crew's inbox"),
                                    "{stdout}"
                                );
                            }
                            (body, sent.status.success(), stdout)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let outcomes: Vec<(String, bool, String)> = senders
            .into_iter()
            .flat_map(|sender| sender.join().unwrap())
            .collect();
        // Every accepted message in the conversation; each probe is a `tasks` command, which
        // restarts a killed supervisor and so resumes the teammate.
        eventually("every accepted message in bob's conversation", || {
            let got = received(&transcript);
            let live = teammate_row(&sandbox, &id).is_some_and(|r| r["activity"] == "idle");
            let all = outcomes
                .iter()
                .filter(|(_, accepted, _)| *accepted)
                .all(|(body, _, _)| got.contains(body));
            (live && all).then_some(())
        });
        done.store(true, Ordering::SeqCst);
        outcomes
    });
    let got = received(&transcript);
    let mut times: HashMap<&str, usize> = HashMap::new();
    for body in &got {
        *times.entry(body.as_str()).or_default() += 1;
    }
    let repeated: Vec<_> = times.iter().filter(|(_, n)| **n > 1).collect();
    if !repeated.is_empty() {
        let _ = std::fs::copy(&transcript, "/tmp/teammate-crash-transcript.jsonl");
        let _ = std::fs::copy(
            sandbox.path("default/supervisor.log"),
            "/tmp/teammate-crash-supervisor.log",
        );
    }
    assert!(
        repeated.is_empty(),
        "delivered more than once: {repeated:?}"
    );
    let refused: Vec<_> = outcomes
        .iter()
        .filter(|(_, accepted, _)| !accepted)
        .collect();
    for (body, _, stdout) in &refused {
        assert!(
            !times.contains_key(body.as_str()),
            "refused ({stdout}) yet delivered: {body}"
        );
    }
    let kills = kills.load(Ordering::SeqCst);
    eprintln!(
        "{} messages delivered once each, {} refused, {kills} supervisors killed, {} turns",
        got.len(),
        refused.len(),
        turns_taken(&signals).len()
    );
    assert_eq!(got.len() + refused.len(), SENDERS * PER_SENDER);
    assert!(kills >= 5, "only {kills} kills landed");
    sandbox.ok(&["kill", &id]);
}
