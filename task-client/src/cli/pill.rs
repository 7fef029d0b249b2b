//! The reference harness's footer pill (`getPillLabel`, `pillNeedsCta`, `isBackgroundTask`):
//! one short label summing up the background work of a session, for `tasks status` (shell
//! prompts, tmux and terminal status bars).
//!
//! | Tasks in background                 | Label                          |
//! |-------------------------------------|--------------------------------|
//! | 1 shell                             | `1 shell`                      |
//! | 3 shells + 2 monitors               | `3 shells, 2 monitors`         |
//! | 1 ultraplan, phase `needs_input`    | `◇ ultraplan needs your input` |
//! | 1 ultraplan, phase `plan_ready`     | `◆ ultraplan ready`            |
//! | 5 teammates of 2 teams              | `2 teams`                      |
//! | 1 dream                             | `dreaming`                     |
//! | mixed types                         | `N background tasks`           |
//! | nothing                             | (no label)                     |
//!
//! The reference hides its pill when every background task is an in-process teammate (its
//! spinner tree shows them); a status line has no spinner tree, so teams are counted.
//! The reference keeps monitors as shells of kind `monitor`; here they are `monitor_mcp` tasks
//! with [`ShellKind::Monitor`] data, so shells and monitors count as one family.
//! An ultraplan's phase is read from its remote metadata (`remoteTaskMetadata.ultraplanPhase`,
//! `"needs_input"` or `"plan_ready"`), the only place task-core's state has for it.

use std::collections::BTreeSet;

use serde::Serialize;
use task_core::{RemoteSubtype, ShellKind, TaskKind, TaskState, TaskStatus};

/// The open diamond of a remote session (`◇`).
pub const DIAMOND_OPEN: &str = "\u{25c7}";
/// The filled diamond of an ultraplan that is ready (`◆`).
pub const DIAMOND_FILLED: &str = "\u{25c6}";

/// The summary of a session's background work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pill {
    /// The label; empty when nothing runs in the background.
    pub label: String,
    /// Whether the work needs the person's attention (the reference's call to action: a single
    /// ultraplan that needs input or whose plan is ready).
    pub needs_attention: bool,
    /// How many background tasks there are.
    pub count: usize,
}

/// Whether `task` is background work (`isBackgroundTask`): pending or running, and not a shell
/// or agent the caller holds in the foreground.
pub fn is_background(task: &TaskState) -> bool {
    if !matches!(task.status(), TaskStatus::Pending | TaskStatus::Running) {
        return false;
    }
    match &task.kind {
        TaskKind::Shell(shell) => shell.is_backgrounded,
        TaskKind::Agent(agent) => agent.is_backgrounded,
        _ => true,
    }
}

/// The pill of `tasks`: only the background ones count (see [`is_background`]).
pub fn pill<'a>(tasks: impl IntoIterator<Item = &'a TaskState>) -> Pill {
    let background: Vec<&TaskState> = tasks.into_iter().filter(|t| is_background(t)).collect();
    Pill {
        label: label(&background),
        needs_attention: needs_attention(&background),
        count: background.len(),
    }
}

/// The task families the pill tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    ShellsAndMonitors,
    LocalAgents,
    Teammates,
    Workflows,
    Remote,
    Dream,
}

fn family(task: &TaskState) -> Family {
    match task.kind {
        TaskKind::Shell(_) => Family::ShellsAndMonitors,
        TaskKind::Agent(_) => Family::LocalAgents,
        TaskKind::Teammate(_) => Family::Teammates,
        TaskKind::Workflow(_) => Family::Workflows,
        TaskKind::Remote(_) => Family::Remote,
        TaskKind::Dream(_) => Family::Dream,
    }
}

fn label(tasks: &[&TaskState]) -> String {
    let Some(first) = tasks.first() else {
        return String::new();
    };
    let n = tasks.len();
    let kind = family(first);
    if tasks.iter().any(|t| family(t) != kind) {
        return counted(n, "background task", "background tasks");
    }
    match kind {
        Family::ShellsAndMonitors => {
            let monitors = tasks.iter().filter(|t| is_monitor(t)).count();
            let shells = n - monitors;
            let mut parts = Vec::new();
            if shells > 0 {
                parts.push(counted(shells, "shell", "shells"));
            }
            if monitors > 0 {
                parts.push(counted(monitors, "monitor", "monitors"));
            }
            parts.join(", ")
        }
        Family::Teammates => {
            let teams: BTreeSet<&str> = tasks.iter().filter_map(|t| team(t)).collect();
            counted(teams.len(), "team", "teams")
        }
        Family::LocalAgents => counted(n, "local agent", "local agents"),
        Family::Workflows => counted(n, "background workflow", "background workflows"),
        Family::Dream => "dreaming".to_owned(),
        Family::Remote => match (n, ultraplan_phase(first)) {
            (1, Some(Some(UltraplanPhase::PlanReady))) => {
                format!("{DIAMOND_FILLED} ultraplan ready")
            }
            (1, Some(Some(UltraplanPhase::NeedsInput))) => {
                format!("{DIAMOND_OPEN} ultraplan needs your input")
            }
            (1, Some(None)) => format!("{DIAMOND_OPEN} ultraplan"),
            _ => format!(
                "{DIAMOND_OPEN} {}",
                counted(n, "cloud session", "cloud sessions")
            ),
        },
    }
}

/// `pillNeedsCta`: a single ultraplan in an attention phase.
fn needs_attention(tasks: &[&TaskState]) -> bool {
    matches!(tasks, [only] if matches!(ultraplan_phase(only), Some(Some(_))))
}

fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn is_monitor(task: &TaskState) -> bool {
    matches!(&task.kind, TaskKind::Shell(shell) if shell.kind == ShellKind::Monitor)
}

fn team(task: &TaskState) -> Option<&str> {
    match &task.kind {
        TaskKind::Teammate(mate) => Some(mate.identity.team_name.as_str()),
        _ => None,
    }
}

/// The phase of an ultraplan's plan-approval flow that asks for the person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UltraplanPhase {
    NeedsInput,
    PlanReady,
}

/// `None`: not an ultraplan; `Some(None)`: an ultraplan in no attention phase.
fn ultraplan_phase(task: &TaskState) -> Option<Option<UltraplanPhase>> {
    let TaskKind::Remote(remote) = &task.kind else {
        return None;
    };
    if remote.remote_task_type != RemoteSubtype::Ultraplan {
        return None;
    }
    let phase = remote
        .remote_task_metadata
        .as_ref()
        .and_then(|meta| meta.get("ultraplanPhase"))
        .and_then(serde_json::Value::as_str);
    Some(match phase {
        Some("needs_input") => Some(UltraplanPhase::NeedsInput),
        Some("plan_ready") => Some(UltraplanPhase::PlanReady),
        _ => None,
    })
}
