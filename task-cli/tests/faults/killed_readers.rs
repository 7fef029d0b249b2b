//! Readers SIGKILLed at random moments while 200 tasks end: a notification is marked delivered
//! only once a reader has written it out, so every completion reaches some reader's output, and
//! one printed twice (its first reader died after writing, before marking) carries the same key
//! both times. The readers are `tasks notifications` and MCP servers (`tasks mcp`, whose tool
//! results carry the notifications, marked delivered once the result is written out).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::sandbox::{DEADLINE, Dice, Sandbox};
use crate::support::eventually;

const TASKS: usize = 200;

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

/// The notifications a tool result carries, as `{taskId, text}`.
fn carried_by(answer: &Value) -> Vec<Value> {
    let blocks = answer["result"]["content"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    blocks
        .iter()
        .filter_map(|block| block["text"].as_str())
        .filter_map(|text| {
            let id = text.split("<task-id>").nth(1)?.split("</task-id>").next()?;
            Some(serde_json::json!({"taskId": id, "text": text}))
        })
        .collect()
}

/// Runs one MCP server and calls a tool again and again; kills the server `kill_after` after
/// its start (if given; else calls until a result carries nothing). Returns every notification
/// a result it wrote whole carried, as `{taskId, text}`.
fn read_once_over_mcp(sandbox: &Sandbox, kill_after: Option<Duration>) -> Vec<Value> {
    let mut child = sandbox
        .command(&["mcp"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    // The client: initialize, then `TaskList` until the server dies (or, unkilled, until a
    // result carries no notification). Its stdin closes when it returns: the server ends.
    let client = std::thread::spawn(move || {
        let mut carried = Vec::new();
        let mut lines = stdout.lines();
        let initialize = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"killed","version":"1"}}}"#;
        let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        if writeln!(stdin, "{initialize}").is_err() || lines.next().is_none() {
            return carried;
        }
        let _ = writeln!(stdin, "{initialized}");
        for id in 1.. {
            let call = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"TaskList","arguments":{{}}}}}}"#
            );
            if writeln!(stdin, "{call}").is_err() {
                break;
            }
            // Pushed announcements (`notifications/message`) come between the answers.
            let Some(answer) = lines
                .by_ref()
                .map_while(Result::ok)
                .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
                .find(|message| message["id"] == id)
            else {
                break;
            };
            let notices = carried_by(&answer);
            if notices.is_empty() && kill_after.is_none() {
                break;
            }
            carried.extend(notices);
        }
        // Closing its stdin ends an unkilled server. Answers already in the pipe when the
        // server died were delivered all the same; a line cut by the kill is not a delivery.
        drop(stdin);
        for line in lines.map_while(Result::ok) {
            if let Ok(answer) = serde_json::from_str::<Value>(&line) {
                carried.extend(carried_by(&answer));
            }
        }
        carried
    });
    if let Some(after) = kill_after {
        std::thread::sleep(after);
        let _ = child.kill();
    }
    let carried = client.join().unwrap();
    eventually("the MCP server to exit", || child.try_wait().unwrap());
    carried
}

#[test]
fn mcp_servers_killed_mid_delivery_lose_no_completion() {
    // An MCP server takes longer to start than `tasks notifications`: killed 5–60 ms after its
    // start, most of them while they answer calls.
    let run = deliveries_while_tasks_end(read_once_over_mcp, 5..61);
    let by_task = grouped(&run.delivered, "taskId");
    let delivered: BTreeSet<String> = by_task.keys().cloned().collect();
    let ids: BTreeSet<String> = run.ids.iter().cloned().collect();
    let lost: Vec<_> = ids.difference(&delivered).collect();
    assert!(
        lost.is_empty(),
        "carried by no result of {} servers: {lost:?}",
        run.readers
    );
    assert_eq!(delivered, ids, "nothing but these completions");
    assert_repeats_are_the_same(&by_task);
    eprintln!(
        "{} MCP servers ({} killed), {} notifications carried, {} repeats",
        run.readers,
        run.killed,
        run.delivered.len(),
        run.delivered.len() - delivered.len()
    );
    assert!(
        run.killed >= 10,
        "too few servers were killed to show anything: {}",
        run.killed
    );
    assert!(
        read_once(&run.sandbox, None).is_empty(),
        "all marked delivered"
    );
    assert!(run.sandbox.listed().iter().all(|t| t["notified"] == true));
}

/// What readers delivered while the session's tasks ended.
struct Deliveries {
    sandbox: Arc<Sandbox>,
    /// The tasks started, in order.
    ids: Vec<String>,
    /// Every notification some reader delivered whole, repeats included.
    delivered: Vec<Value>,
    readers: usize,
    killed: usize,
}

/// Starts [`TASKS`] tasks whose ends spread over about five seconds while readers (`read`) come
/// and go, three in four killed `kill_ms` after they start, whatever they are doing then; a
/// last reader that nobody kills delivers whatever the killed ones left leased.
fn deliveries_while_tasks_end(
    read: fn(&Sandbox, Option<Duration>) -> Vec<Value>,
    kill_ms: std::ops::Range<u64>,
) -> Deliveries {
    let mut sandbox = Sandbox::new();
    sandbox.set("TASKS_IDLE_EXIT_MS", "10000");
    let sandbox = Arc::new(sandbox);
    let mut dice = Dice::seeded();
    let ending = Arc::new(AtomicBool::new(false));
    let readers = {
        let (sandbox, ending) = (Arc::clone(&sandbox), Arc::clone(&ending));
        std::thread::spawn(move || {
            let (mut delivered, mut readers, mut killed) = (Vec::new(), 0, 0);
            while !ending.load(Ordering::SeqCst) {
                let kill_after = (dice.below(4) != 0).then(|| {
                    Duration::from_millis(kill_ms.start + dice.below(kill_ms.end - kill_ms.start))
                });
                killed += usize::from(kill_after.is_some());
                delivered.extend(read(&sandbox, kill_after));
                readers += 1;
            }
            (delivered, readers, killed)
        })
    };
    let ids: Vec<String> = (0..TASKS)
        .map(|i| sandbox.start(&format!("sleep {}.{}", 1 + i % 5, i % 10)))
        .collect();
    sandbox.until_all_ended();
    ending.store(true, Ordering::SeqCst);
    let (mut delivered, readers, killed) = readers.join().unwrap();
    delivered.extend(read(&sandbox, None));
    Deliveries {
        sandbox,
        ids,
        delivered,
        readers,
        killed,
    }
}

/// The notifications grouped by the string field `field`.
fn grouped<'a>(notices: &'a [Value], field: &str) -> BTreeMap<String, Vec<&'a Value>> {
    let mut groups: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for notice in notices {
        groups
            .entry(notice[field].as_str().unwrap().to_owned())
            .or_default()
            .push(notice);
    }
    groups
}

/// A completion delivered more than once carries the same text each time.
fn assert_repeats_are_the_same(groups: &BTreeMap<String, Vec<&Value>>) {
    for (key, notices) in groups {
        assert!(
            notices.iter().all(|n| n["text"] == notices[0]["text"]),
            "{key}: repeats differ"
        );
    }
}

#[test]
fn readers_killed_mid_delivery_lose_no_completion_and_repeats_carry_the_same_key() {
    let run = deliveries_while_tasks_end(read_once, 1..16);
    let (sandbox, ids, printed, readers, killed) =
        (run.sandbox, run.ids, run.delivered, run.readers, run.killed);

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
    let by_key = grouped(&printed, "key");
    let delivered: BTreeSet<String> = by_key.keys().cloned().collect();
    let lost: Vec<_> = expected.difference(&delivered).collect();
    assert!(
        lost.is_empty(),
        "never printed by any of {readers} readers: {lost:?}"
    );
    assert_eq!(delivered, expected, "nothing but these completions");
    assert_repeats_are_the_same(&by_key);
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
