//! `tasks workflow show`: a run's record as a tree of phases and agents.

use std::fmt::Write;
use std::path::Path;

use serde_json::Value;

use super::error::WorkflowError;
use super::files::{RunPaths, read_json};

/// The record of run `run_id` under `output_dir`.
///
/// # Errors
/// [`WorkflowError::InvalidRunId`], [`WorkflowError::UnknownRun`], unreadable records.
pub fn load_record(output_dir: &Path, run_id: &str) -> Result<Value, WorkflowError> {
    let paths = RunPaths::new(output_dir, run_id)?;
    if !paths.record.is_file() {
        return Err(WorkflowError::UnknownRun(run_id.to_owned()));
    }
    read_json(&paths.record)
}

/// The record as text: the run, then each phase with its agents, then agents of no phase.
///
/// ```text
/// wf_765vv7by count-things [completed] 3 agents, 3603 tokens, 177 ms
/// ├─ Scan
/// │  ├─ #1 scan:a [done] a56909a1a 1201 tokens → A=3
/// ```
pub fn render_tree(record: &Value) -> String {
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
    let number = |v: &Value, key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
    let mut out = format!(
        "{} {} [{}] {} agents, {} tokens, {} ms\n",
        text(record, "runId"),
        text(record, "workflowName"),
        text(record, "status"),
        number(record, "agentCount"),
        number(record, "totalTokens"),
        number(record, "durationMs"),
    );
    let entries = record
        .get("workflowProgress")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let agents: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "workflow_agent")
        .collect();
    let phases: Vec<&Value> = entries
        .iter()
        .filter(|e| e["type"] == "workflow_phase")
        .collect();
    let agent_line = |agent: &Value| {
        let mut line = format!(
            "#{} {} [{}]",
            number(agent, "index"),
            text(agent, "label"),
            text(agent, "state")
        );
        if let Some(id) = agent.get("agentId").and_then(Value::as_str) {
            let _ = write!(line, " {id}");
        }
        if let Some(tokens) = agent.get("tokens").and_then(Value::as_u64) {
            let _ = write!(line, " {tokens} tokens");
        }
        if let Some(result) = agent.get("resultPreview").and_then(Value::as_str) {
            let first = result.lines().next().unwrap_or_default();
            let _ = write!(line, " → {first}");
        }
        line
    };
    let orphans: Vec<&&Value> = agents
        .iter()
        .filter(|a| a.get("phaseIndex").and_then(Value::as_u64).is_none())
        .collect();
    let groups = phases.len() + usize::from(!orphans.is_empty());
    for (position, phase) in phases.iter().enumerate() {
        let last_group = position + 1 == groups;
        let (branch, stem) = if last_group {
            ("└─", "   ")
        } else {
            ("├─", "│  ")
        };
        let _ = writeln!(out, "{branch} {}", text(phase, "title"));
        let members: Vec<&&Value> = agents
            .iter()
            .filter(|a| {
                a.get("phaseIndex").and_then(Value::as_u64)
                    == phase.get("index").and_then(Value::as_u64)
            })
            .collect();
        push_members(&mut out, stem, &members, &agent_line);
    }
    if !orphans.is_empty() {
        out.push_str("└─ (no phase)\n");
        push_members(&mut out, "   ", &orphans, &agent_line);
    }
    out
}

fn push_members(
    out: &mut String,
    stem: &str,
    members: &[&&Value],
    line: &dyn Fn(&Value) -> String,
) {
    for (i, agent) in members.iter().enumerate() {
        let branch = if i + 1 == members.len() {
            "└─"
        } else {
            "├─"
        };
        let _ = writeln!(out, "{stem}{branch} {}", line(agent));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_fixture_record_as_a_tree() {
        let record: Value =
            serde_json::from_str(include_str!("../tests/fixtures/workflow/run-record.json"))
                .unwrap();
        let tree = render_tree(&record);
        assert_eq!(
            tree,
            "wf_c35ccbad-117 count-things [completed] 3 agents, 3603 tokens, 177 ms\n\
             ├─ Scan\n\
             │  ├─ #1 scan:a [done] a56909a1a312ba5e1 1201 tokens → A=3\n\
             │  └─ #2 scan:b [done] afd8cac0dcc04ce3f 1201 tokens → B=4\n\
             └─ Sum\n   \
             └─ #3 sum [done] aecb417f6ea52eded 1201 tokens → 7\n"
        );
    }
}
