//! `tasks notifications --follow` delivers an end when the task's record lands, not at its poll:
//! with a poll period of ten minutes, only the watch on the tasks directory can wake it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::root::TasksRoot;

/// Longer than the test may take: a follower that only polled would deliver nothing after its
/// first look.
const NEVER_MS: &str = "600000";

#[test]
fn a_follower_delivers_each_end_once_as_its_record_lands_without_waiting_for_its_poll() {
    let root = TasksRoot::new();
    // The first task makes the tasks directory the follower watches; it is delivered by the
    // follower's first look, the others only through the watch.
    let first = root.ok(&["run", "--", "true"]).trim().to_owned();
    root.ok(&["wait", "--no-deliver", &first]);
    let mut follower = root
        .command(&["notifications", "--follow", "--format", "json"])
        .env("TASKS_POLL_MS", NEVER_MS)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (send, lines) = mpsc::channel();
    let stdout = follower.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if send.send(line).is_err() {
                return;
            }
        }
    });
    let mut ids = vec![first];
    ids.extend((0..3).map(|_| root.ok(&["run", "--", "true"]).trim().to_owned()));

    let mut delivered: BTreeMap<String, usize> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ids.iter().all(|id| delivered.contains_key(id)) {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("delivered by the deadline: {delivered:?} of {ids:?}"));
        let notice: Value = serde_json::from_str(&line).unwrap();
        *delivered
            .entry(notice["taskId"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    follower.kill().unwrap();
    follower.wait().unwrap();
    reader.join().unwrap();
    for line in lines.try_iter() {
        let notice: Value = serde_json::from_str(&line).unwrap();
        *delivered
            .entry(notice["taskId"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let expected: BTreeMap<String, usize> = ids.iter().map(|id| (id.clone(), 1)).collect();
    assert_eq!(delivered, expected, "each end delivered exactly once");
}
