//! Benchmarks of the mailbox (task-output's `mailbox`, used by teammates and task-list
//! inboxes): the locked append of one message, and the delivery of a batch (read from the
//! cursor, parse, commit the cursor durably).
//!
//! Run with `cargo bench -p benches --bench mailbox -- --warm-up-time 1 --measurement-time 3`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use task_output::mailbox::Mailbox;

/// A typical teammate message: about 200 bytes of JSON.
fn message(seq: u64) -> Value {
    json!({"from": "team-lead", "text": format!("message {seq}: please look at task #12 and report back when done"),
        "summary": "look at task 12", "timestamp": "2026-11-23T16:00:00.000Z", "read": false})
}

fn append(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let inbox = Mailbox::open(dir.path(), "alice@crew").unwrap();
    let mut group = c.benchmark_group("mailbox_append");
    group.throughput(Throughput::Elements(1));
    let mut seq = 0;
    group.bench_function("one_message", |b| {
        b.iter(|| {
            seq += 1;
            black_box(inbox.append(&message(seq)).unwrap())
        });
    });
    group.finish();
}

fn deliver(c: &mut Criterion) {
    let mut group = c.benchmark_group("mailbox_deliver");
    for batch in [1_u64, 100] {
        group.throughput(Throughput::Elements(batch));
        group.bench_with_input(
            BenchmarkId::new("append_read_commit", batch),
            &batch,
            |b, &batch| {
                let dir = tempfile::tempdir().unwrap();
                let inbox = Mailbox::open(dir.path(), "alice@crew").unwrap();
                let mut reader = inbox.reader().unwrap();
                b.iter(|| {
                    for seq in 0..batch {
                        inbox.append(&message(seq)).unwrap();
                    }
                    let got = reader.pending::<Value>().unwrap();
                    assert_eq!(got.messages.len() as u64, batch);
                    reader.commit(got.end).unwrap();
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, append, deliver);
criterion_main!(benches);
