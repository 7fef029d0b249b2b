//! Supervisor memory while following a 10 000-turn agent transcript.
//!
//! Backgrounds a "main session" over a transcript that this program grows by 1000 turns at a
//! time (about 1 MB each), waits after each batch until the executor has read it all, and
//! prints this process's resident set (`VmRSS`): it must stay flat, since no transcript is held
//! in memory and displayed messages are capped. Run with
//! `cargo run --release -p benches --example agent_rss`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use task_agent::{AgentConfig, AgentExecutor, CliFormat};
use task_core::{Registry, TaskKind};

const BATCHES: u64 = 10;
const TURNS_PER_BATCH: u64 = 1000;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn turn(i: u64) -> String {
    let output = "src/lib.rs\nsrc/main.rs\nCargo.toml\n".repeat(8);
    let tool = json!({"type": "assistant", "message": {"content": [{"type": "tool_use",
        "id": format!("toolu_{i}"), "name": "Bash", "input": {"command": "ls", "description": "list"}}],
        "usage": {"input_tokens": 1200 + i, "output_tokens": 40}}, "parent_tool_use_id": null});
    let result = json!({"type": "user", "message": {"content": [{"type": "tool_result",
        "tool_use_id": format!("toolu_{i}"), "content": output}]}, "parent_tool_use_id": null});
    let text = json!({"type": "assistant", "message": {"content": [{"type": "text",
        "text": format!("Turn {i} done.")}], "usage": {"input_tokens": 1300 + i, "output_tokens": 12}}});
    format!("{tool}\n{result}\n{text}\n")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let mut file = std::fs::File::create(&path).unwrap();
    let registry = Arc::new(Registry::default());
    let executor = AgentExecutor::new(Arc::clone(&registry), dir.path(), AgentConfig::default())
        .register_with_registry();
    let handle = executor
        .register_main_session(&path, "long session", Some(CliFormat::Claude))
        .await
        .unwrap();
    let tool_uses = || match &registry.get(&handle.id).unwrap().kind {
        TaskKind::Agent(agent) => agent.progress.tool_use_count,
        _ => 0,
    };
    println!("turns  transcript_MB  rss_KiB");
    for batch in 1..=BATCHES {
        let mut text = String::new();
        for i in (batch - 1) * TURNS_PER_BATCH..batch * TURNS_PER_BATCH {
            text.push_str(&turn(i));
        }
        file.write_all(text.as_bytes()).unwrap();
        while tool_uses() < batch * TURNS_PER_BATCH {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let size = std::fs::metadata(&path).unwrap().len();
        println!(
            "{:>5}  {:>13.1}  {:>7}",
            batch * TURNS_PER_BATCH,
            size as f64 / 1e6,
            rss_kib()
        );
    }
    writeln!(
        file,
        "{}",
        json!({"type": "result", "subtype": "success", "result": "done"})
    )
    .unwrap();
    while !registry.get(&handle.id).unwrap().base.notified {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
