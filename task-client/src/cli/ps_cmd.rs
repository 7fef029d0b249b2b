//! `tasks ps`: the session's tasks as a table a person reads: newest first, how each ended,
//! how long it ran (from when it began running, not from when it was queued) and how long ago
//! it ended, filtered by status and type, in colour only
//! where colour is wanted, and as wide as the terminal.

use std::time::Duration;

use task_core::{TaskStatus, TaskType, now_ms};

use crate::cli::args::{ColorChoice, StatusFilter};
use crate::cli::error::{Result, exit};
use crate::cli::printer::Printer;
use crate::cli::render::{self, Row};
use task_session::record::TaskRecord;
use task_session::session::Session;

impl ColorChoice {
    /// Whether to colour output going to stdout.
    pub fn enabled(self) -> bool {
        match self {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => {
                std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                    && render::stdout_is_terminal()
            }
        }
    }
}

impl StatusFilter {
    fn matches(self, status: TaskStatus) -> bool {
        match self {
            StatusFilter::Live => !status.is_terminal(),
            StatusFilter::Ended => status.is_terminal(),
            StatusFilter::Pending => status == TaskStatus::Pending,
            StatusFilter::Running => status == TaskStatus::Running,
            StatusFilter::Completed => status == TaskStatus::Completed,
            StatusFilter::Failed => status == TaskStatus::Failed,
            StatusFilter::Killed => status == TaskStatus::Killed,
        }
    }
}

/// The short name of a type, as the table shows it.
pub fn short_type(task_type: TaskType) -> &'static str {
    match task_type {
        TaskType::LocalBash => "bash",
        TaskType::LocalAgent => "agent",
        TaskType::RemoteAgent => "remote",
        TaskType::InProcessTeammate => "teammate",
        TaskType::LocalWorkflow => "workflow",
        TaskType::MonitorMcp => "monitor",
        TaskType::Dream => "dream",
    }
}

/// What `tasks ps` shows.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Also finished tasks whose completion was delivered.
    pub all: bool,
    /// Only these statuses (any of them).
    pub statuses: Vec<StatusFilter>,
    /// Only these types (any of them).
    pub types: Vec<TaskType>,
    /// Only the tasks of this group.
    pub group: Option<String>,
}

impl Filter {
    /// Whether `task` is shown; `settled`: it ended and its completion was delivered.
    fn shows(&self, task: &TaskRecord, settled: bool) -> bool {
        let status = task.status();
        let status_named = !self.statuses.is_empty();
        (self.all || status_named || !settled)
            && (!status_named || self.statuses.iter().any(|s| s.matches(status)))
            && (self.types.is_empty() || self.types.contains(&task.task.base.task_type))
            && self
                .group
                .as_ref()
                .is_none_or(|group| task.group() == group)
    }
}

/// The rows `filter` selects, newest first, and how many settled tasks it hid.
pub fn rows(session: &Session, tasks: &[TaskRecord], filter: &Filter) -> (Vec<Row>, usize) {
    let mut hidden = 0;
    let positions = task_session::queue::positions(tasks);
    let mut rows: Vec<Row> = tasks
        .iter()
        .filter_map(|task| {
            let id = task.id();
            let settled = task.is_settled(session.paths());
            if !filter.shows(task, settled) {
                // Hidden for being finished alone (not by a filter the caller gave).
                let only_settled = Filter {
                    all: true,
                    ..filter.clone()
                }
                .shows(task, settled);
                hidden += usize::from(only_settled);
                return None;
            }
            let size = std::fs::metadata(session.output_path(&id)).map_or(0, |m| m.len());
            let mut row = Row::new(task, size, settled);
            row.queue_position = positions.get(&id).copied();
            row.worktree_changes = render::existing_worktree(task)
                .and_then(|worktree| task_worktree::changes(worktree).ok());
            Some(row)
        })
        .collect();
    rows.sort_by(|a, b| {
        let key = |r: &Row| (r.task.base.start_time, r.task.base.id.as_str().to_owned());
        key(b).cmp(&key(a))
    });
    (rows, hidden)
}

/// The table, fitted to `width` columns (none: no limit).
pub fn table(rows: &[Row], color: bool, width: Option<usize>) -> String {
    let now = now_ms();
    let cells: Vec<[String; 8]> = rows.iter().map(|row| cells(row, now)).collect();
    let header = [
        "ID", "TYPE", "STATUS", "END", "AGE", "TOOK", "ENDED", "OUTPUT",
    ]
    .map(str::to_owned);
    let mut widths = [0usize; 8];
    for row in std::iter::once(&header).chain(&cells) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    // Columns dropped, least useful first, until the description gets 16 columns.
    let mut shown = [true; 8];
    let fixed = |shown: &[bool; 8]| -> usize {
        widths
            .iter()
            .zip(shown)
            .filter(|(_, s)| **s)
            .map(|(w, _)| w + 2)
            .sum()
    };
    for drop in [6, 1, 5] {
        if width.is_some_and(|w| w < fixed(&shown) + 16) {
            shown[drop] = false;
        }
    }
    let description_width = width.map_or(80, |w| w.saturating_sub(fixed(&shown)).max(10));
    let line = |row: &[String; 8], description: &str, status: Option<TaskStatus>| {
        let mut text = String::new();
        for (i, cell) in row.iter().enumerate().filter(|(i, _)| shown[*i]) {
            let padded = if i >= 4 {
                format!("{cell:>w$}  ", w = widths[i])
            } else {
                format!("{cell:<w$}  ", w = widths[i])
            };
            match (i, status) {
                (2, Some(status)) if color => text.push_str(&paint(status, &padded)),
                _ => text.push_str(&padded),
            }
        }
        text.push_str(&render::one_line(description, description_width));
        format!("{}\n", text.trim_end())
    };
    let mut text = line(&header, "DESCRIPTION", None);
    for (row, cells) in rows.iter().zip(&cells) {
        let description = render::describe(&row.task, row.worktree_changes);
        text.push_str(&line(cells, &description, Some(row.task.base.status)));
    }
    if rows.is_empty() {
        text = "No tasks.\n".to_owned();
    }
    text
}

/// The hint for finished tasks left out, if any.
pub fn hidden_hint(hidden: usize) -> Option<String> {
    let what = if hidden == 1 { "task" } else { "tasks" };
    (hidden > 0).then(|| format!("{hidden} finished {what} not shown (tasks ps --all shows them)"))
}

fn cells(row: &Row, now: u64) -> [String; 8] {
    let base = &row.task.base;
    let end = match &base.end_reason {
        Some(reason) => render::one_line(&reason.short(), 18),
        None if row.supervisor_down => SUPERVISOR_DOWN.to_owned(),
        None => batch_waiting(&row.task).unwrap_or_default(),
    };
    // Its run alone: a task that waited in a queue did not take that time, and one that never
    // ran took none.
    let took = base
        .run_ms(now)
        .map(|ms| took_text(Duration::from_millis(ms)))
        .unwrap_or_default();
    let ended = base
        .end_time
        .map(|at| format!("{} ago", render::age(now.saturating_sub(at))))
        .unwrap_or_default();
    [
        base.id.as_str().to_owned(),
        short_type(base.task_type).to_owned(),
        match row.queue_position {
            Some(position) => format!("queued #{position}"),
            None => base.status.as_str().to_owned(),
        },
        end,
        render::age(now.saturating_sub(base.start_time)),
        took,
        ended,
        render::size(row.output_bytes),
    ]
}

/// Why a shell placed on a batch system waits, as its batch system says (`slurm: Resources`).
pub fn batch_waiting(task: &task_core::TaskState) -> Option<String> {
    match &task.kind {
        task_core::TaskKind::Shell(shell) if task.status() == TaskStatus::Pending => {
            shell.batch.as_ref()?.waiting_note()
        }
        _ => None,
    }
}

/// The END cell of a live task whose supervisor is down but that outlives it (a remote agent):
/// the next supervisor resumes it.
pub const SUPERVISOR_DOWN: &str = "supervisor down, resumable";

/// A duration to the precision a person wants: `850ms`, `12.3s`, `4m 10s`, `2h 5m`.
pub fn took_text(duration: Duration) -> String {
    let ms = duration.as_millis();
    let secs = duration.as_secs();
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{:.1}s", duration.as_secs_f64()),
        60_000..3_600_000 => format!("{}m {}s", secs / 60, secs % 60),
        _ => format!("{}h {}m", secs / 3600, secs / 60 % 60),
    }
}

fn paint(status: TaskStatus, text: &str) -> String {
    let code = match status {
        TaskStatus::Running | TaskStatus::Pending => "33",
        TaskStatus::Completed => "32",
        TaskStatus::Failed => "31",
        TaskStatus::Killed => "35",
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// The width of the terminal on stdout (`$COLUMNS` if set), or none off a terminal.
pub fn terminal_width() -> Option<usize> {
    if let Some(columns) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()) {
        return Some(columns);
    }
    let stdout = std::io::stdout();
    rustix::termios::tcgetwinsize(&stdout)
        .ok()
        .map(|size| usize::from(size.ws_col))
        .filter(|&w| w > 0)
}

/// Runs `tasks ps`: the table, or JSON, once or refreshed every second.
pub fn ps(session: &Session, args: &crate::cli::args::PsArgs, printer: Printer) -> Result<u8> {
    let filter = Filter {
        all: args.all,
        statuses: args.status.clone(),
        types: args.r#type.clone(),
        group: args.group.clone(),
    };
    if let Some(group) = &filter.group {
        task_session::queue::validate_group(group)?;
    }
    let color = args.color.enabled();
    loop {
        let listing = session.tasks()?;
        for problem in &listing.problems {
            render::warn(&format!("warning: {problem}"));
        }
        let (rows, hidden) = rows(session, &listing.tasks, &filter);
        if printer.is_json() {
            // One document: `--watch` refreshes a table only.
            return printer.emit(&rows, "").map(|()| exit::OK);
        }
        let table = table(&rows, color, terminal_width());
        if !args.watch {
            render::out(&table)?;
            if let Some(hint) = hidden_hint(hidden) {
                render::warn(&hint);
            }
            return Ok(exit::OK);
        }
        render::out(&format!("\x1b[H\x1b[2J{table}"))?;
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::parse_type;

    #[test]
    fn durations_read_at_a_glance() {
        assert_eq!(took_text(Duration::from_millis(850)), "850ms");
        assert_eq!(took_text(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(took_text(Duration::from_secs(250)), "4m 10s");
        assert_eq!(took_text(Duration::from_secs(7_500)), "2h 5m");
    }

    #[test]
    fn types_take_short_names() {
        assert_eq!(parse_type("bash"), Ok(TaskType::LocalBash));
        assert_eq!(parse_type("monitor_mcp"), Ok(TaskType::MonitorMcp));
        assert!(parse_type("cron").is_err());
        for t in TaskType::ALL {
            assert_eq!(parse_type(short_type(t)), Ok(t));
        }
    }
}
