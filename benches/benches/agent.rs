//! Benchmarks of task-agent: parse throughput of a 10 000-turn stream-json transcript (MB/s)
//! side by side with `jq -c .` over the same file, and the latency from an agent's start to its
//! first `task_progress` event, with the scripted `fake-agent` CLI.
//!
//! Setup: `apt-get install -y jq` (the comparison is skipped without it) and
//! `cargo build --release -p task-agent --bin fake-agent` (the latency bench needs it). Run with
//! `cargo bench -p benches --bench agent -- --warm-up-time 1 --measurement-time 3`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group};
use serde_json::json;
use task_agent::{
    AgentConfig, AgentExecutor, AgentRequest, CliFormat, CommandRunner, ProgressTracker,
    TranscriptTail,
};
use task_core::{Registry, TaskEvent};

const TURNS: u64 = 10_000;

/// A transcript like the reference's: per turn an assistant tool use with usage, its tool
/// result (a few hundred bytes of output), and an assistant text.
fn write_transcript(path: &Path) -> u64 {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let output = "src/lib.rs\nsrc/main.rs\nCargo.toml\n".repeat(8);
    writeln!(
        out,
        "{}",
        json!({"type": "system", "subtype": "init", "session_id": "bench"})
    )
    .unwrap();
    for i in 0..TURNS {
        let tool = json!({"type": "assistant", "message": {"id": format!("msg_{i}"), "role": "assistant",
            "content": [{"type": "tool_use", "id": format!("toolu_{i}"), "name": "Bash",
            "input": {"command": "ls -R src", "description": "list sources"}}],
            "usage": {"input_tokens": 1200 + i, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 900, "output_tokens": 40}}, "parent_tool_use_id": null,
            "session_id": "bench"});
        let result = json!({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result",
            "tool_use_id": format!("toolu_{i}"), "content": output, "is_error": false}]},
            "parent_tool_use_id": null, "session_id": "bench"});
        let text = json!({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text",
            "text": format!("Turn {i}: the sources are listed above.")}],
            "usage": {"input_tokens": 1300 + i, "output_tokens": 12}}, "parent_tool_use_id": null});
        writeln!(out, "{tool}\n{result}\n{text}").unwrap();
    }
    writeln!(
        out,
        "{}",
        json!({"type": "result", "subtype": "success", "result": "done"})
    )
    .unwrap();
    out.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// Parses the whole transcript the way a running agent's tracker does.
fn parse_all(path: &Path) -> u64 {
    let mut tail = TranscriptTail::new(path, 0, CliFormat::Claude.parser(), 1 << 20, 16 << 20);
    let mut tracker = ProgressTracker::default();
    while tail.read_new().unwrap() > 0 {
        while let Some(event) = tail.pop() {
            tracker.apply(&event);
        }
    }
    tail.finish();
    tracker.progress().tool_use_count
}

fn has_jq() -> bool {
    Command::new("jq")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn parse_throughput(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("transcript.jsonl");
    let size = write_transcript(&path);
    eprintln!("transcript: {TURNS} turns, {:.1} MB", size as f64 / 1e6);
    let mut group = c.benchmark_group("transcript_parse_10k_turns");
    group.throughput(Throughput::Bytes(size));
    group.sample_size(20);
    group.bench_function("task-agent", |b| {
        b.iter(|| assert_eq!(black_box(parse_all(&path)), TURNS))
    });
    if has_jq() {
        group.bench_function("jq -c .", |b| {
            b.iter(|| {
                let status = Command::new("jq")
                    .args(["-c", "."])
                    .arg(&path)
                    .stdout(Stdio::null())
                    .status()
                    .unwrap();
                assert!(status.success());
            });
        });
    } else {
        eprintln!("jq not found: install it (apt-get install -y jq) for the side-by-side figure");
    }
    group.finish();
}

/// `target/release/fake-agent`, next to the bench's own `deps/` directory.
fn fake_agent() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .join("fake-agent");
    assert!(
        path.exists(),
        "{} missing: run `cargo build --release -p task-agent --bin fake-agent` first",
        path.display()
    );
    path
}

fn start_to_first_progress(c: &mut Criterion) {
    let fake = fake_agent();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.jsonl");
    let steps = [
        json!({"read_user": true}),
        json!({"tool": "Bash", "input": {"command": "true", "description": "first step"}}),
        json!({"result": "done"}),
    ];
    let text: Vec<String> = steps.iter().map(ToString::to_string).collect();
    std::fs::write(&script, text.join("\n")).unwrap();
    let registry = Arc::new(Registry::default());
    let config = AgentConfig::default();
    let executor = AgentExecutor::new(Arc::clone(&registry), dir.path(), config.clone())
        .register_with_registry();
    let command = [
        fake.display().to_string(),
        "--script".into(),
        script.display().to_string(),
    ];
    let runner = Arc::new(CommandRunner::new(command, CliFormat::Claude, config).unwrap());
    let mut group = c.benchmark_group("agent");
    group.sample_size(20);
    group.bench_function("start_to_first_progress", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut events = registry.subscribe();
                    let start = Instant::now();
                    let request = AgentRequest::new(runner.clone(), "bench", "go");
                    let handle = executor.start(request).await.unwrap();
                    loop {
                        match events.recv().await.unwrap() {
                            TaskEvent::TaskProgress { task_id, .. } if task_id == handle.id => {
                                break;
                            }
                            _ => {}
                        }
                    }
                    total += start.elapsed();
                    loop {
                        let state = registry.get(&handle.id).unwrap();
                        if state.base.notified {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    registry.notifications().drain();
                }
                total
            })
        });
    });
    group.finish();
}

criterion_group!(benches, parse_throughput, start_to_first_progress);

fn main() {
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
