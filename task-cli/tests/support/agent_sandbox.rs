//! A session root in a temp dir for the suites that drive agents and teammates through the
//! `tasks` binary with task-agent's scripted `fake-agent` standing in for the agent CLI.

use std::path::Path;

use serde_json::Value;

pub use super::root::TasksRoot as Sandbox;

impl Sandbox {
    /// A root whose supervisor exits 2 s after it is idle; an agent's own `tasks run` finds the
    /// binary on its PATH.
    pub fn for_agents() -> Self {
        Self::new()
            .env("TASKS_IDLE_EXIT_MS", "2000")
            .env("PATH", path_with_tasks())
    }

    /// Writes a fake-agent script of `steps` (the first of which reads the prompt, the first
    /// user turn on its stream-json input); returns its path.
    pub fn script(&self, name: &str, steps: &[Value]) -> String {
        let path = self.path(name);
        let lines: String = steps.iter().map(|s| format!("{s}\n")).collect();
        std::fs::write(&path, lines).unwrap();
        path.display().to_string()
    }
}

fn path_with_tasks() -> String {
    let dir = Path::new(env!("CARGO_BIN_EXE_tasks")).parent().unwrap();
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The `<teammate-message>` bodies the agent echoed, in order, from its transcript.
pub fn received(transcript: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(transcript).unwrap_or_default();
    let mut out = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(turn) = event["message"]["content"][0]["text"].as_str() else {
            continue;
        };
        if event["type"] != "assistant" || !turn.starts_with("echo: ") {
            continue;
        }
        out.extend(teammate_messages(turn));
    }
    out
}

/// The bodies of the `<teammate-message>`s in a user turn's text.
pub fn teammate_messages(turn: &str) -> Vec<String> {
    turn.split("<teammate-message teammate_id=\"")
        .skip(1)
        .map(|part| {
            let body = part.split_once(">\n").unwrap().1;
            let body = body.split_once("\n</teammate-message>").unwrap().0;
            body.to_owned()
        })
        .collect()
}
