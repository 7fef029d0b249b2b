//! What the dashboard says about a task, by type: a shell's command and end; an agent's
//! tokens, tool uses and recent activities; a teammate idle or working; a workflow's phases and
//! agents as a tree; a remote session's kind and phase; a dream's phase and files.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use serde_json::Value;
use task_core::{TaskKind, TaskState, TaskStatus, WorkflowStep, now_ms};
use task_worktree::Changes;

use crate::render;
use task_session::record::TaskRecord;

/// The task's state in one line, for the task table, with what its worktree holds (`changes`)
/// when it has one.
pub fn one_line_state(task: &TaskState, changes: Option<Changes>) -> String {
    let description = &task.base.description;
    match &task.kind {
        TaskKind::Teammate(mate) => {
            let doing = if mate.is_idle { "idle" } else { "working" };
            let who = format!("{}@{}", mate.identity.agent_name, mate.identity.team_name);
            let branch = render::worktree_suffix(task, changes);
            match description == &who {
                // A teammate's description is usually its name: say it once.
                true => format!("{who} · {doing}{branch}"),
                false => format!("{who} · {doing} · {description}{branch}"),
            }
        }
        TaskKind::Workflow(flow) => {
            let done = flow.steps.iter().filter(|s| s.status.is_terminal()).count();
            format!("{description} · {done}/{} steps", flow.steps.len())
        }
        TaskKind::Dream(dream) => format!("{description} · {:?}", dream.phase).to_lowercase(),
        _ => render::describe(task, changes),
    }
}

/// The details pane of `record`, whose worktree (if it has one) holds `changes`.
pub fn lines(record: &TaskRecord, changes: Option<Changes>) -> Vec<Line<'static>> {
    let task = &record.task;
    let base = &task.base;
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut lines = vec![Line::styled(
        format!("{} {}", base.id, base.task_type.as_str()),
        bold,
    )];
    let mut status = format!(
        "{} {}",
        base.status.as_str(),
        crate::stream_cmd::how_long(base, now_ms())
    );
    if let Some(reason) = &base.end_reason {
        status.push_str(&format!(" ({})", reason.short()));
    }
    lines.push(Line::styled(status, status_style(base.status)));
    lines.push(Line::raw(base.description.clone()));
    match &task.kind {
        TaskKind::Shell(shell) => {
            lines.push(Line::raw(format!("$ {}", shell.command)));
            if let Some(process) = &shell.process {
                lines.push(Line::raw(format!("process group {}", process.pgid)));
            }
        }
        TaskKind::Agent(agent) => {
            let progress = &agent.progress;
            lines.push(Line::raw(format!(
                "{} tokens · {} tool uses",
                progress.token_count, progress.tool_use_count
            )));
            // What it is doing, while it works: once stopped, its conversation tells the rest.
            let live = !task.status().is_terminal();
            for activity in progress.recent_activities.iter().filter(|_| live) {
                let what = activity
                    .activity_description
                    .clone()
                    .unwrap_or_else(|| activity.tool_name.clone());
                lines.push(Line::raw(format!("  → {what}")));
            }
            if let Some(result) = agent.result.as_ref().or(agent.error.as_ref()) {
                lines.push(Line::raw(format!("= {}", render::one_line(result, 200))));
            }
        }
        TaskKind::Teammate(mate) => {
            let doing = if mate.is_idle { "idle" } else { "working" };
            lines.push(Line::raw(format!(
                "{}@{} · {doing}",
                mate.identity.agent_name, mate.identity.team_name
            )));
            if mate.awaiting_plan_approval {
                lines.push(Line::styled(
                    "plan awaits approval",
                    Style::new().fg(Color::Yellow),
                ));
            }
            if !mate.pending_messages.is_empty() {
                lines.push(Line::raw(format!(
                    "{} message(s) queued",
                    mate.pending_messages.len()
                )));
            }
        }
        TaskKind::Workflow(flow) => lines.extend(workflow_tree(&flow.steps)),
        TaskKind::Remote(remote) => {
            lines.push(Line::raw(format!(
                "{:?} · {}",
                remote.remote_task_type, remote.title
            )));
            let pill = crate::pill::pill([task]);
            if pill.needs_attention {
                lines.push(Line::styled(pill.label, Style::new().fg(Color::Yellow)));
            }
        }
        TaskKind::Dream(dream) => {
            lines.push(Line::raw(format!(
                "{:?} · reviewing {} sessions",
                dream.phase, dream.sessions_reviewing
            )));
            for file in &dream.files_touched {
                lines.push(Line::raw(format!("  ✎ {file}")));
            }
        }
    }
    if let Some(worktree) = task.kind.worktree() {
        let held = match changes {
            Some(changes) => format!("changes: {}", render::changes_text(&Ok(changes))),
            None if !std::path::Path::new(&worktree.worktree_path).is_dir() => "removed".into(),
            None => "changes: unknown".into(),
        };
        lines.push(Line::raw(format!(
            "⎇ {} · {held}",
            worktree.worktree_branch
        )));
        lines.push(Line::raw(format!("  {}", worktree.worktree_path)));
    }
    lines
}

/// The colour of a status.
pub fn status_style(status: TaskStatus) -> Style {
    Style::new().fg(match status {
        TaskStatus::Pending | TaskStatus::Running => Color::Yellow,
        TaskStatus::Completed => Color::Green,
        TaskStatus::Failed => Color::Red,
        TaskStatus::Killed => Color::Magenta,
    })
}

fn glyph(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Pending => "○",
        TaskStatus::Running => "◐",
        TaskStatus::Completed => "✓",
        TaskStatus::Failed => "✗",
        TaskStatus::Killed => "■",
    }
}

/// A workflow's steps as a tree, each step's agents (its `agents` detail: names, or objects
/// with `name`/`id` and `status`) under it.
pub fn workflow_tree(steps: &[WorkflowStep]) -> Vec<Line<'static>> {
    let mut lines = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let last = i + 1 == steps.len();
        let (branch, stem) = if last {
            ("└─", "  ")
        } else {
            ("├─", "│ ")
        };
        lines.push(Line::styled(
            format!("{branch} {} {}", glyph(step.status), step.step),
            status_style(step.status),
        ));
        let agents = step.detail.get("agents").and_then(Value::as_array);
        let agents = agents.map(Vec::as_slice).unwrap_or_default();
        for (j, agent) in agents.iter().enumerate() {
            let twig = if j + 1 == agents.len() {
                "└─"
            } else {
                "├─"
            };
            lines.push(Line::raw(format!("{stem} {twig} {}", agent_label(agent))));
        }
    }
    lines
}

fn agent_label(agent: &Value) -> String {
    match agent {
        Value::String(name) => name.clone(),
        Value::Object(fields) => {
            let name = ["name", "id", "agent"]
                .iter()
                .find_map(|k| fields.get(*k).and_then(Value::as_str))
                .unwrap_or("agent");
            match fields.get("status").and_then(Value::as_str) {
                Some(status) => format!("{name} ({status})"),
                None => name.to_owned(),
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn step(name: &str, status: TaskStatus, agents: Value) -> WorkflowStep {
        serde_json::from_value(json!({ "step": name, "status": status, "agents": agents })).unwrap()
    }

    #[test]
    fn a_workflow_reads_as_a_tree_of_phases_and_agents() {
        let steps = [
            step("plan", TaskStatus::Completed, json!(["planner"])),
            step(
                "build",
                TaskStatus::Running,
                json!([{"name": "api", "status": "running"}, {"name": "ui"}]),
            ),
        ];
        let text: Vec<String> = workflow_tree(&steps)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            text,
            [
                "├─ ✓ plan",
                "│  └─ planner",
                "└─ ◐ build",
                "   ├─ api (running)",
                "   └─ ui",
            ]
        );
    }
}
