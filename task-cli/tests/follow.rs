//! `tasks notifications --follow` delivers an end when the task's record lands, and an event
//! when it is published, not at its poll: with a poll period of ten minutes, only the watch on
//! the tasks directory and on the pending events can wake it. A burst of ends is delivered
//! once each, however many followers share the session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::gate::Gate;
use support::root::TasksRoot;

/// Longer than the test may take: a follower that only polled would deliver nothing after its
/// first look.
const NEVER_MS: &str = "600000";

/// A `tasks notifications --follow --format json` that never polls, and its lines.
struct Follower {
    child: Child,
    lines: mpsc::Receiver<Value>,
    reader: Option<JoinHandle<()>>,
}

impl Follower {
    /// One that never looks at every record after its first look: only its watch wakes it.
    fn start(root: &TasksRoot) -> Self {
        Self::rescanning_every(root, NEVER_MS)
    }

    /// One woken by its watch that also looks at every record every `rescan_ms`.
    fn rescanning_every(root: &TasksRoot, rescan_ms: &str) -> Self {
        let mut child = root
            .command(&["notifications", "--follow", "--format", "json"])
            .env("TASKS_POLL_MS", NEVER_MS)
            .env("TASKS_RESCAN_MS", rescan_ms)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if send.send(serde_json::from_str(&line).unwrap()).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            lines,
            reader: Some(reader),
        }
    }

    /// The next notification it prints before `deadline`, if any.
    fn next(&self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        self.lines.recv_timeout(left).ok()
    }

    /// Reads what it prints until each of `ids` was delivered (failing at `deadline`), stops
    /// it, and asserts that it delivered each exactly once and nothing else.
    fn delivers_each_once(self, ids: &[String], deadline: Instant) {
        let mut delivered = Vec::new();
        while !ids
            .iter()
            .all(|id| delivered.iter().any(|n| task_of(n) == *id))
        {
            let notice = self
                .next(deadline)
                .unwrap_or_else(|| panic!("delivered by the deadline: {delivered:?} of {ids:?}"));
            delivered.push(notice);
        }
        delivered.extend(self.stop());
        assert_each_delivered_once(&delivered, ids);
    }

    /// Stops it (killed by its pid) and returns what it printed that was not read yet.
    fn stop(mut self) -> Vec<Value> {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        self.reader.take().unwrap().join().unwrap();
        self.lines.try_iter().collect()
    }
}

/// The task id of a printed notification.
fn task_of(notice: &Value) -> String {
    notice["taskId"].as_str().unwrap().to_owned()
}

/// How many times each task was delivered.
fn counted<'a>(notices: impl IntoIterator<Item = &'a Value>) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for notice in notices {
        *counts.entry(task_of(notice)).or_default() += 1;
    }
    counts
}

#[test]
fn a_follower_delivers_each_end_once_as_its_record_lands_without_waiting_for_its_poll() {
    let root = TasksRoot::new();
    // The first task makes the tasks directory the follower watches; it is delivered by the
    // follower's first look, the others only through the watch.
    let first = root.ok(&["run", "--", "true"]).trim().to_owned();
    root.ok(&["wait", "--no-deliver", &first]);
    let follower = Follower::start(&root);
    let mut ids = vec![first];
    ids.extend((0..3).map(|_| root.ok(&["run", "--", "true"]).trim().to_owned()));

    follower.delivers_each_once(&ids, Instant::now() + Duration::from_secs(60));
}

/// Asserts that `delivered` holds one notification of each of `ids`, and no other.
fn assert_each_delivered_once(delivered: &[Value], ids: &[String]) {
    let expected: BTreeMap<String, usize> = ids.iter().map(|id| (id.clone(), 1)).collect();
    assert_eq!(
        counted(delivered),
        expected,
        "each end delivered exactly once"
    );
}

/// Tasks in the burst test.
const BURST: usize = 100;

#[test]
fn a_burst_of_ends_is_delivered_once_each_between_two_followers_woken_by_their_watches() {
    let root = TasksRoot::new();
    let mut gate = Gate::new(root.root());
    let ids: Vec<String> = (0..BURST)
        .map(|_| root.ok(&["run", "--", &gate.wait()]).trim().to_owned())
        .collect();
    let followers = [Follower::start(&root), Follower::start(&root)];
    gate.open(BURST);

    let mut delivered = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while counted(&delivered).len() < BURST {
        let got = followers
            .iter()
            .find_map(|follower| follower.next(Instant::now() + Duration::from_millis(10)));
        delivered.extend(got);
        assert!(
            Instant::now() < deadline,
            "delivered by the deadline: {} of {BURST}",
            counted(&delivered).len()
        );
    }
    for follower in followers {
        delivered.extend(follower.stop());
    }
    assert_each_delivered_once(&delivered, &ids);
}

/// Ends a reader claimed and then died holding, before it wrote them out: no file changes when
/// it dies, so a follower's watch has nothing to wake it for; its rescan finds them.
#[test]
fn what_a_reader_died_holding_is_delivered_by_a_follower_at_its_rescan() {
    let root = TasksRoot::new();
    let ids: Vec<String> = (0..20)
        .map(|_| root.ok(&["run", "--", "true"]).trim().to_owned())
        .collect();
    let mut waited = vec!["wait", "--no-deliver"];
    waited.extend(ids.iter().map(String::as_str));
    root.ok(&waited);
    // A reader whose output nobody reads: one page of pipe, which 20 notifications overflow,
    // so it blocks writing them out, holding every claim.
    let (unread, output) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    rustix::pipe::fcntl_setpipe_size(&output, 4096).unwrap();
    let mut stuck = root
        .command(&["notifications", "--format", "json"])
        .stdout(std::fs::File::from(output))
        .spawn()
        .unwrap();
    let tasks_dir = root.path("default/tasks");
    support::eventually("every end claimed by the stuck reader", || {
        // A claim under a lease is `{id}.{end}.lease{N}` until it is committed.
        let claims = std::fs::read_dir(&tasks_dir)
            .unwrap()
            .filter(|e| {
                let path = e.as_ref().unwrap().path();
                path.extension()
                    .is_some_and(|x| x.to_string_lossy().starts_with("lease"))
            })
            .count();
        (claims == ids.len()).then_some(())
    });
    // The follower starts while the claims are held: its first look finds nothing to deliver.
    // A task ended after it started shows it is past that look, woken by its watch.
    let follower = Follower::rescanning_every(&root, "200");
    let marker = root.ok(&["run", "--", "true"]).trim().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    let first = follower.next(deadline).expect("the marker delivered");
    assert_eq!(task_of(&first), marker, "nothing held was delivered first");
    stuck.kill().unwrap();
    stuck.wait().unwrap();
    drop(unread);

    follower.delivers_each_once(&ids, deadline);
}

#[test]
fn a_monitor_s_event_wakes_a_follower_that_never_polls() {
    let root = TasksRoot::new();
    let mut gate = Gate::new(root.root());
    let command = format!("{}; echo tick; exec sleep 300", gate.wait());
    let monitor = root.ok(&["monitor", "--persistent", "--", &command]);
    let monitor = monitor.lines().next().unwrap().trim().to_owned();
    let first = root.ok(&["run", "--", "true"]).trim().to_owned();
    root.ok(&["wait", "--no-deliver", &first]);
    let follower = Follower::start(&root);
    // Its first look delivered `first`: its watch is up (it is made before that look), and
    // the event can only come through the watch on `events/pending/`.
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen = follower.next(deadline).expect("the first look's delivery");
    assert_eq!(task_of(&seen), first, "{seen}");
    gate.open(1);
    let event = follower
        .next(deadline)
        .expect("the monitor's event delivered by the deadline");
    assert_eq!(task_of(&event), monitor, "{event}");
    assert_eq!(event["notification"]["event"], "tick", "{event}");
    root.ok(&["kill", &monitor]);
    let rest = follower.stop();
    assert!(
        rest.iter().all(|n| !n["notification"]["event"].is_string()),
        "delivered once: {rest:?}"
    );
}
