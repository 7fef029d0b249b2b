//! Human output: the task table, ages, sizes, colours and the spinner.

use std::io::{self, IsTerminal, Write};

use serde::Serialize;

use crate::cli::error::{CliError, Result};
use task_core::{TaskState, Worktree};
use task_worktree::Changes;

use task_session::record::TaskRecord;

/// The worktree a record (an agent's or a teammate's) names, if its directory still exists.
pub fn existing_worktree(record: &TaskRecord) -> Option<&Worktree> {
    record
        .task
        .kind
        .worktree()
        .filter(|w| std::path::Path::new(&w.worktree_path).is_dir())
}

/// Writes to stdout; a closed pipe (`tasks ps | head`) is not an error worth a message.
pub fn out(text: &str) -> Result<()> {
    match write_out(text) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(CliError::io("write", "standard output", e))
        }
        _ => Ok(()),
    }
}

/// Writes `text` to stdout and flushes it; any failure, a closed pipe included, is returned
/// (what is delivered only once written out, such as a notification, must know).
pub fn write_out(text: &str) -> io::Result<()> {
    let mut stdout = io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
}

/// Writes raw bytes to stdout.
pub fn out_bytes(bytes: &[u8]) -> Result<()> {
    let mut stdout = io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(CliError::io("write", "standard output", e))
        }
        _ => Ok(()),
    }
}

/// Writes `tasks: {line}` to stderr (a warning or a hint beside the output).
pub fn warn(line: &str) {
    let _ = writeln!(io::stderr(), "tasks: {line}");
}

/// Writes `line` to stderr as it is (a summary beside streamed output).
pub fn warn_plain(line: &str) {
    let _ = writeln!(io::stderr(), "{line}");
}

/// `text` ending in a newline: as it is when it is empty or has one, else with one added.
pub fn with_newline(text: &str) -> String {
    if text.is_empty() || text.ends_with('\n') {
        text.to_owned()
    } else {
        format!("{text}\n")
    }
}

/// One row of `tasks ps`: the task's state (flat, as task-core names its fields), what the
/// session knows of it, and what is measured at listing time.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// The task; its `notified` says whether its completion was delivered to a reader (what
    /// the session's latches say, not the supervisor's in-memory flag).
    #[serde(flatten)]
    pub task: TaskState,
    /// The exit code of a command that ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// The supervisor that runs (or ran) it.
    pub supervisor_pid: u32,
    /// Size of the output file in bytes.
    pub output_bytes: u64,
    /// The task is live and outlives its supervisor, which is down and could not be started
    /// again yet: it is resumed once one starts (never read as failed meanwhile).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub supervisor_down: bool,
    /// Its group and place in the queue, if it was started with a schedule or waited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<task_session::queue::Placement>,
    /// Its 1-based position among the waiting tasks of its group, while it waits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_position: Option<usize>,
    /// What its git worktree holds beyond its base, when it has one that exists (asked of git
    /// by `tasks ps`; `None` elsewhere).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree_changes: Option<Changes>,
}

impl Row {
    /// The row of `record`, whose output file holds `output_bytes` and whose completion was
    /// delivered or not.
    pub fn new(record: &TaskRecord, output_bytes: u64, notified: bool) -> Self {
        let mut task = record.task.clone();
        task.base.notified = notified;
        Self {
            task,
            exit_code: record.exit_code(),
            supervisor_pid: record.supervisor_pid,
            output_bytes,
            supervisor_down: record.supervisor_down,
            queue: record.queue.clone(),
            queue_position: None,
            worktree_changes: None,
        }
    }
}

/// A task's description, and for an agent what it has done: `research · 1.4k tokens · 3 tools
/// · Reading /etc/hostname` (with its budgets: `1.4k/200k tokens`, `· 3/10 turns`, `· time
/// limit 5m 0s`; for a teammate, `idle` or `working`), then the branch of its worktree, if it
/// runs (or ran, and its worktree was kept) in one, with what it holds when that was asked of
/// git: `· ⎇ tasks/research-a12345678 (changes: commits)`.
pub fn describe(task: &TaskState, changes: Option<Changes>) -> String {
    format!("{}{}", what_it_did(task), worktree_suffix(task, changes))
}

/// ` · ⎇ {branch}` when the task (an agent or a teammate) has a worktree, followed by
/// ` (changes: …)` when its `changes` are known; else nothing.
pub fn worktree_suffix(task: &TaskState, changes: Option<Changes>) -> String {
    let Some(worktree) = task.kind.worktree() else {
        return String::new();
    };
    match changes {
        Some(changes) => format!(
            " · ⎇ {} (changes: {})",
            worktree.worktree_branch,
            changes_text(&Ok(changes))
        ),
        None => format!(" · ⎇ {}", worktree.worktree_branch),
    }
}

/// `commits, uncommitted`, `commits`, `uncommitted`, `none`, or why it is unknown.
pub fn changes_text(
    changes: &std::result::Result<Changes, task_worktree::WorktreeError>,
) -> String {
    match changes {
        Ok(changes) => changes.describe().into(),
        Err(error) => format!("unknown: {error}"),
    }
}

/// [`describe`] without the worktree.
fn what_it_did(task: &TaskState) -> String {
    let base = &task.base.description;
    if let task_core::TaskKind::Teammate(teammate) = &task.kind {
        let activity = teammate_activity(task);
        let mut text = if activity.is_empty() {
            base.clone()
        } else {
            format!("{base} · {activity}")
        };
        text.push_str(&turns_and_time(&teammate.budget.unwrap_or_default()));
        return text;
    }
    let task_core::TaskKind::Agent(agent) = &task.kind else {
        return base.clone();
    };
    let progress = &agent.progress;
    let budget = agent.budget.unwrap_or_default();
    let of = |max: Option<u64>| {
        max.map(|max| format!("/{}", count(max)))
            .unwrap_or_default()
    };
    let mut text = format!(
        "{base} · {}{} tokens · {} tool{}",
        count(progress.token_count),
        of(budget.max_tokens),
        progress.tool_use_count,
        if progress.tool_use_count == 1 {
            ""
        } else {
            "s"
        }
    );
    text.push_str(&turns_and_time(&budget));
    // What it is doing: nothing once it has stopped (its last tool use is history).
    if let Some(latest) = progress
        .recent_activities
        .iter()
        .last()
        .filter(|_| !task.status().is_terminal())
    {
        let activity = latest
            .activity_description
            .as_deref()
            .unwrap_or(&latest.tool_name);
        text.push_str(&format!(" · {activity}"));
    }
    text
}

/// ` · 3/5 turns · time limit 10m` for the turns and time budgets of `budget` it has.
fn turns_and_time(budget: &task_core::AgentBudget) -> String {
    let mut text = String::new();
    if let Some(max) = budget.max_turns {
        text.push_str(&format!(" · {}/{max} turns", budget.turns_used));
    }
    if let Some(max) = budget.timeout_ms {
        let max = task_core::human_duration(std::time::Duration::from_millis(max));
        text.push_str(&format!(" · time limit {max}"));
    }
    text
}

/// `idle`, `working`, `awaiting plan approval` or `shutdown requested` for a live teammate;
/// empty once it ended.
pub fn teammate_activity(task: &task_core::TaskState) -> &'static str {
    match &task.kind {
        task_core::TaskKind::Teammate(_) if task.status().is_terminal() => "",
        task_core::TaskKind::Teammate(mate) if mate.shutdown_requested_at.is_some() => {
            "shutdown requested"
        }
        task_core::TaskKind::Teammate(mate) if mate.awaiting_plan_approval => {
            "awaiting plan approval"
        }
        task_core::TaskKind::Teammate(mate) if mate.is_idle => "idle",
        task_core::TaskKind::Teammate(_) => "working",
        _ => "",
    }
}

/// `950`, `1.4k`, `2.0M`.
fn count(n: u64) -> String {
    match n {
        0..1000 => n.to_string(),
        1000..1_000_000 => format!("{:.1}k", n as f64 / 1000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// `950ms`-free ages: `12s`, `4m`, `3h`, `2d`.
pub fn age(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// Byte sizes: `512B`, `12K`, `3.4M`, `1.0G`.
pub fn size(bytes: u64) -> String {
    const K: u64 = 1024;
    match bytes {
        0..K => format!("{bytes}B"),
        K..1_048_576 => format!("{}K", bytes / K),
        1_048_576..1_073_741_824 => format!("{:.1}M", bytes as f64 / 1_048_576.0),
        _ => format!("{:.1}G", bytes as f64 / 1_073_741_824.0),
    }
}

/// The first line of `text`, cut to `max_chars` with an ellipsis when anything is left out.
pub fn one_line(text: &str, max_chars: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() <= max_chars && !text.contains('\n') {
        return line.to_owned();
    }
    let cut: String = line.chars().take(max_chars.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// Whether stdout is a terminal (tables, colour, in-place refresh).
pub fn stdout_is_terminal() -> bool {
    io::stdout().is_terminal()
}

/// A spinner on stderr, drawn only when stderr is a terminal.
#[derive(Debug)]
pub struct Spinner {
    frame: usize,
    enabled: bool,
}

impl Spinner {
    const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

    /// A spinner, enabled when stderr is a terminal and `allowed`.
    pub fn new(allowed: bool) -> Self {
        Self {
            frame: 0,
            enabled: allowed && io::stderr().is_terminal(),
        }
    }

    /// Draws the next frame with `message`.
    pub fn tick(&mut self, message: &str) {
        if self.enabled {
            let glyph = Self::FRAMES[self.frame % Self::FRAMES.len()];
            self.frame += 1;
            let _ = write!(io::stderr(), "\r\x1b[2K{glyph} {message}");
        }
    }

    /// Erases the spinner line.
    pub fn clear(&mut self) {
        if self.enabled && self.frame > 0 {
            let _ = write!(io::stderr(), "\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_sizes_are_compact() {
        assert_eq!(age(59_999), "59s");
        assert_eq!(age(60_000), "1m");
        assert_eq!(age(7_200_000), "2h");
        assert_eq!(age(172_800_000), "2d");
        assert_eq!(size(1023), "1023B");
        assert_eq!(size(2048), "2K");
        assert_eq!(size(3 * 1_048_576 + 400_000), "3.4M");
        assert_eq!(size(1_073_741_824), "1.0G");
    }

    #[test]
    fn descriptions_are_cut_to_one_line() {
        assert_eq!(one_line("short", 10), "short");
        assert_eq!(one_line("a\nb", 10), "a…");
        assert_eq!(one_line("abcdefghijkl", 5), "abcd…");
    }
}
