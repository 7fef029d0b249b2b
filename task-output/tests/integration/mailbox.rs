//! Mailboxes under concurrent writers in several processes, killed writers, and the
//! exactly-once cursor. Writer processes are this test binary re-run as `mailbox::writer_process`
//! with its instructions in the environment.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use task_output::OutputError;
use task_output::mailbox::{Mailbox, MailboxError};

const DIR_ENV: &str = "MAILBOX_TEST_DIR";
const SENDER_ENV: &str = "MAILBOX_TEST_SENDER";
const COUNT_ENV: &str = "MAILBOX_TEST_COUNT";
const PAD_ENV: &str = "MAILBOX_TEST_PAD";

/// What a writer process prints (straight to its stdout, past the harness's capture) after
/// each append.
const APPENDED: &str = "appended";

/// How long a test waits for its writers before it fails.
const DEADLINE: Duration = Duration::from_secs(60);

/// Not a test: the body of a writer process (run by the tests below with `--ignored`).
#[test]
#[ignore = "run as a child process by the mailbox tests"]
fn writer_process() {
    let dir = std::env::var(DIR_ENV).unwrap();
    let sender = std::env::var(SENDER_ENV).unwrap();
    let count: u64 = std::env::var(COUNT_ENV).unwrap().parse().unwrap();
    let pad = "x".repeat(std::env::var(PAD_ENV).unwrap().parse().unwrap());
    let inbox = Mailbox::open(Path::new(&dir), "alice@team").unwrap();
    let mut progress = std::io::stdout();
    for seq in 0..count {
        inbox
            .append(&json!({"from": sender, "seq": seq, "pad": pad}))
            .unwrap();
        writeln!(progress, "{APPENDED}").unwrap();
        progress.flush().unwrap();
    }
}

fn writer(dir: &Path, sender: &str, count: u64, pad: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["mailbox::writer_process", "--exact", "--ignored", "--quiet"])
        .env(DIR_ENV, dir)
        .env(SENDER_ENV, sender)
        .env(COUNT_ENV, count.to_string())
        .env(PAD_ENV, pad.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// One message per append any of `writers` reports; the channel closes once all of them have
/// exited (or closed their stdout).
fn appends_of(writers: &mut [Child]) -> Receiver<()> {
    let (appended, appends) = mpsc::channel();
    for child in writers {
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let appended = appended.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if line == APPENDED && appended.send(()).is_err() {
                    return;
                }
            }
        });
    }
    appends
}

/// Waits for the next append of a writer: `false` once every writer has exited.
fn next_append(appends: &Receiver<()>, deadline: Instant) -> bool {
    match appends.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        Ok(()) => true,
        Err(RecvTimeoutError::Disconnected) => false,
        Err(RecvTimeoutError::Timeout) => panic!("the writers stopped appending"),
    }
}

/// Checks every sender's messages arrived once each, in order: returns the count per sender.
fn per_sender_in_order(messages: &[Value]) -> HashMap<String, u64> {
    let mut next: HashMap<String, u64> = HashMap::new();
    for message in messages {
        let sender = message["from"].as_str().unwrap().to_owned();
        let expected = next.entry(sender.clone()).or_default();
        assert_eq!(
            message["seq"].as_u64().unwrap(),
            *expected,
            "{sender} out of order"
        );
        *expected += 1;
    }
    next
}

#[test]
fn concurrent_writer_processes_lose_and_interleave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut writers: Vec<Child> = (0..8)
        .map(|n| writer(dir.path(), &format!("w{n}"), 200, 300))
        .collect();
    let appends = appends_of(&mut writers);
    let inbox = Mailbox::open(dir.path(), "alice@team").unwrap();
    // The consumer reads while they write, after each append they report, and commits as it
    // goes; once they have all exited, it takes what is left.
    let mut reader = inbox.reader().unwrap();
    let mut seen = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    loop {
        let writing = next_append(&appends, deadline);
        let batch = reader.pending::<Value>().unwrap();
        assert!(batch.skipped.is_empty(), "{:?}", batch.skipped);
        seen.extend(batch.messages.into_iter().map(|d| d.message));
        reader.commit(batch.end).unwrap();
        if !writing {
            break;
        }
    }
    for mut child in writers {
        assert!(child.wait().unwrap().success());
    }
    let counts = per_sender_in_order(&seen);
    assert_eq!(counts.len(), 8);
    assert!(counts.values().all(|&n| n == 200), "{counts:?}");
}

#[test]
fn a_writer_killed_mid_append_never_corrupts_the_mailbox() {
    let dir = tempfile::tempdir().unwrap();
    let inbox = Mailbox::open(dir.path(), "alice@team").unwrap();
    // Large messages (512 KiB) make the kill likely to land inside a write.
    for round in 0..3 {
        let mut child = writer(dir.path(), &format!("doomed{round}"), 1_000_000, 512 * 1024);
        // Three appends done, the next under way.
        let appends = appends_of(std::slice::from_mut(&mut child));
        let deadline = Instant::now() + DEADLINE;
        for _ in 0..3 {
            assert!(next_append(&appends, deadline), "the writer exited");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        inbox
            .append(&json!({"from": "survivor", "seq": round}))
            .unwrap();
    }
    let batch = inbox.read_from::<Value>(0, usize::MAX).unwrap();
    // At most one fragment per killed writer, each reported, never fatal.
    assert!(batch.skipped.len() <= 3, "{:?}", batch.skipped);
    let messages: Vec<Value> = batch.messages.into_iter().map(|d| d.message).collect();
    let counts = per_sender_in_order(&messages);
    assert_eq!(counts["survivor"], 3);
    assert_eq!(batch.end, std::fs::metadata(inbox.path()).unwrap().len());
}

#[test]
fn a_torn_last_line_is_terminated_by_the_next_append_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let inbox = Mailbox::open(dir.path(), "bob").unwrap();
    inbox.append(&json!({"n": 1})).unwrap();
    // What a writer killed in the middle of its write leaves.
    std::fs::OpenOptions::new()
        .append(true)
        .open(inbox.path())
        .and_then(|mut f| std::io::Write::write_all(&mut f, br#"{"n": 2, "te"#))
        .unwrap();
    // Not handed out while it might be a live writer's append in progress.
    let before = inbox.read_from::<Value>(0, 1 << 20).unwrap();
    assert_eq!(before.messages.len(), 1);
    assert!(before.skipped.is_empty());
    inbox.append(&json!({"n": 3})).unwrap();
    let after = inbox.read_from::<Value>(0, 1 << 20).unwrap();
    let values: Vec<i64> = after
        .messages
        .iter()
        .map(|d| d.message["n"].as_i64().unwrap())
        .collect();
    assert_eq!(values, [1, 3]);
    assert_eq!(after.skipped.len(), 1);
    assert_eq!(after.skipped[0].len, br#"{"n": 2, "te"#.len());
}

#[test]
fn a_committed_message_is_never_delivered_again_even_by_a_new_reader() {
    let dir = tempfile::tempdir().unwrap();
    let inbox = Mailbox::open(dir.path(), "carol").unwrap();
    for n in 0..5 {
        inbox.append(&json!({"n": n})).unwrap();
    }
    let mut reader = inbox.reader().unwrap();
    let first = reader.pending::<Value>().unwrap();
    assert_eq!(first.messages.len(), 5);
    // Handed on only in part: commit just past the third.
    reader.commit(first.messages[3].offset).unwrap();
    drop(reader);
    inbox.append(&json!({"n": 5})).unwrap();
    let mut again = Mailbox::open(dir.path(), "carol")
        .unwrap()
        .reader()
        .unwrap();
    let rest: Vec<i64> = again
        .pending::<Value>()
        .unwrap()
        .messages
        .iter()
        .map(|d| d.message["n"].as_i64().unwrap())
        .collect();
    assert_eq!(rest, [3, 4, 5]);
    let end = again.pending::<Value>().unwrap().end;
    again.commit(end).unwrap();
    assert!(again.pending::<Value>().unwrap().messages.is_empty());
    assert!(matches!(
        again.commit(0),
        Err(MailboxError::BadCursor { .. })
    ));
}

#[test]
fn a_mailbox_has_one_reader_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let inbox = Mailbox::open(dir.path(), "dave").unwrap();
    let held = inbox.reader().unwrap();
    assert!(matches!(
        inbox.reader(),
        Err(MailboxError::ReaderBusy { .. })
    ));
    drop(held);
    assert!(inbox.reader().is_ok());
}

#[test]
fn a_corrupt_or_past_the_end_cursor_is_refused_and_nothing_is_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let inbox = Mailbox::open(dir.path(), "erin").unwrap();
    inbox.append(&json!({"n": 1})).unwrap();
    std::fs::write(dir.path().join("erin.cursor"), b"banana").unwrap();
    assert!(matches!(
        inbox.reader(),
        Err(MailboxError::BadCursor { .. })
    ));
    std::fs::write(dir.path().join("erin.cursor"), b"999999").unwrap();
    assert!(matches!(
        inbox.reader(),
        Err(MailboxError::BadCursor { .. })
    ));
}

#[test]
fn a_symlink_at_the_mailbox_path_is_never_written_through() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("target");
    std::fs::write(&target, b"").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("frank.jsonl")).unwrap();
    let inbox = Mailbox::open(dir.path(), "frank").unwrap();
    let error = inbox.append(&json!({"n": 1})).unwrap_err();
    assert!(
        matches!(
            error,
            MailboxError::Output(OutputError::SymlinkRefused { .. })
        ),
        "{error}"
    );
    assert_eq!(std::fs::read(&target).unwrap(), b"");
}

#[test]
fn oversized_messages_are_refused_and_recent_keeps_the_newest() {
    let dir = tempfile::tempdir().unwrap();
    let inbox = Mailbox::open(dir.path(), "gina").unwrap();
    let huge = "x".repeat(task_output::mailbox::MAX_MESSAGE_BYTES);
    assert!(matches!(
        inbox.append(&json!({"text": huge})),
        Err(MailboxError::MessageTooLarge { .. })
    ));
    for n in 0..60 {
        inbox.append(&json!({"n": n})).unwrap();
    }
    let recent: Vec<i64> = inbox
        .recent::<Value>(50)
        .unwrap()
        .iter()
        .map(|v| v["n"].as_i64().unwrap())
        .collect();
    assert_eq!(recent, (10..60).collect::<Vec<_>>());
    assert!(Mailbox::open(dir.path(), "../escape").is_err());
}
