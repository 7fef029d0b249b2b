//! Readers of `tasks notifications` SIGKILLed at random moments while 200 tasks end: a
//! notification is marked delivered only once a reader has written it out, so every
//! completion reaches some reader's output, and one printed twice (its first reader died after
//! writing, before marking) carries the same key both times.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::sandbox::{DEADLINE, Sandbox};

const TASKS: usize = 200;

/// A small xorshift generator: the schedule of kills, reproducible from the printed seed.
struct Dice(u64);

impl Dice {
    fn seeded() -> Self {
        let seed = std::env::var("TASKS_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
                    | 1
            });
        eprintln!("killed_readers: TASKS_TEST_SEED={seed}");
        Self(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Runs one reader; kills it `kill_after` after its start (if given). Returns every complete
/// JSON line it printed before it ended.
fn read_once(sandbox: &Sandbox, kill_after: Option<Duration>) -> Vec<Value> {
    let mut command = sandbox.command(&["notifications", "--format", "json"]);
    let mut child = command.stdout(Stdio::piped()).spawn().unwrap();
    if let Some(after) = kill_after {
        std::thread::sleep(after);
        let _ = child.kill();
    }
    let mut printed = String::new();
    let _ = child.stdout.take().unwrap().read_to_string(&mut printed);
    let deadline = Instant::now() + DEADLINE;
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "a reader hung");
        std::thread::sleep(Duration::from_millis(2));
    }
    // A line cut by the kill is not a delivery: the reader died before marking it.
    printed
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect()
}

#[test]
fn readers_killed_mid_delivery_lose_no_completion_and_repeats_carry_the_same_key() {
    let mut sandbox = Sandbox::new();
    sandbox.set("TASKS_IDLE_EXIT_MS", "10000");
    let sandbox = Arc::new(sandbox);
    let mut dice = Dice::seeded();

    // Readers loop from the first task's start to the last one's end; three in four are killed
    // 1–15 ms after they start, whatever they are doing then.
    let ending = Arc::new(AtomicBool::new(false));
    let readers = {
        let (sandbox, ending) = (Arc::clone(&sandbox), Arc::clone(&ending));
        std::thread::spawn(move || {
            let (mut printed, mut readers, mut killed) = (Vec::new(), 0, 0);
            while !ending.load(Ordering::SeqCst) {
                let kill_after =
                    (dice.below(4) != 0).then(|| Duration::from_millis(1 + dice.below(15)));
                killed += usize::from(kill_after.is_some());
                printed.extend(read_once(&sandbox, kill_after));
                readers += 1;
            }
            (printed, readers, killed)
        })
    };
    // Ends spread over about five seconds, while the readers come and go.
    let ids: Vec<String> = (0..TASKS)
        .map(|i| sandbox.start(&format!("sleep {}.{}", 1 + i % 5, i % 10)))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while sandbox
        .listed()
        .iter()
        .any(|t| t["status"] == "running" || t["status"] == "pending")
    {
        assert!(Instant::now() < deadline, "the tasks never ended");
        std::thread::sleep(Duration::from_millis(100));
    }
    ending.store(true, Ordering::SeqCst);
    let (mut printed, readers, killed) = readers.join().unwrap();
    // A last reader that nobody kills delivers whatever the killed ones left leased.
    printed.extend(read_once(&sandbox, None));

    // Each completion's key: its task and the time of its notice, as its record holds them.
    let expected: BTreeSet<String> = ids
        .iter()
        .map(|id| {
            let record = std::fs::read(sandbox.tasks_dir().join(format!("{id}.json"))).unwrap();
            let record: Value = serde_json::from_slice(&record).unwrap();
            format!("{id}@{}", record["notification"]["atMs"])
        })
        .collect();
    assert_eq!(expected.len(), TASKS);
    let mut by_key: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for line in &printed {
        by_key
            .entry(line["key"].as_str().unwrap().to_owned())
            .or_default()
            .push(line);
    }
    let delivered: BTreeSet<String> = by_key.keys().cloned().collect();
    let lost: Vec<_> = expected.difference(&delivered).collect();
    assert!(
        lost.is_empty(),
        "never printed by any of {readers} readers: {lost:?}"
    );
    assert_eq!(delivered, expected, "nothing but these completions");
    for (key, lines) in &by_key {
        assert!(
            lines.iter().all(|line| line["text"] == lines[0]["text"]),
            "{key}: repeats differ"
        );
    }
    let repeats = printed.len() - delivered.len();
    eprintln!(
        "{readers} readers ({killed} killed), {} lines printed, {repeats} repeats",
        printed.len()
    );
    assert!(
        killed >= 20,
        "too few readers were killed to show anything: {killed}"
    );
    // Every completion is now marked delivered: nothing more to read.
    assert!(read_once(&sandbox, None).is_empty());
    assert!(sandbox.listed().iter().all(|t| t["notified"] == true));
}
