//! Human renderings of `tasks list` reports a person reads: the listing, ready tasks, doctor
//! findings.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use task_list::{DEFAULT_PRIORITY, DoctorReport, ListResult, Problem, ReadyTask, Task, TaskId};

/// `tasks list ls`: each task as `TaskList` shows it, then its priority when it is not the
/// default and its labels (`#7 [pending] db · P1 · labels: backend, v2`); the JSON has
/// `priority` and `labels` on every entry. `tasks` holds the tasks' records (one missing,
/// removed since the listing was read, shows as listed).
pub fn listing(listing: &ListResult, tasks: &BTreeMap<TaskId, Task>) -> (Value, String) {
    if listing.tasks.is_empty() {
        return (json!({ "tasks": [] }), listing.model_text());
    }
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    for entry in &listing.tasks {
        let task = tasks.get(&entry.id);
        let priority = task.map_or(DEFAULT_PRIORITY, Task::priority);
        let labels = task.map(Task::labels).unwrap_or_default();
        let mut line = entry.model_line();
        if priority != DEFAULT_PRIORITY {
            line.push_str(&format!(" · P{priority}"));
        }
        if !labels.is_empty() {
            line.push_str(&format!(" · labels: {}", labels.join(", ")));
        }
        lines.push(line);
        let mut value = serde_json::to_value(entry).unwrap_or(Value::Null);
        if let Value::Object(map) = &mut value {
            map.insert("priority".into(), priority.into());
            map.insert("labels".into(), labels.into());
        }
        entries.push(value);
    }
    (json!({ "tasks": entries }), lines.join("\n"))
}

/// `#1 ready: Write API (unblocks 2 tasks)`; the count only when it unblocks any.
pub fn ready_line(task: &ReadyTask) -> String {
    let unblocks = match task.unblocks {
        0 => String::new(),
        1 => " (unblocks 1 task)".to_owned(),
        n => format!(" (unblocks {n} tasks)"),
    };
    format!("#{} ready: {}{unblocks}", task.id, task.subject)
}

/// The doctor's report: one sentence per finding, then whether it was repaired.
pub fn doctor_report(report: &DoctorReport) -> String {
    if report.is_clean() {
        return "No problems found.".to_owned();
    }
    let mut lines: Vec<String> = report
        .problems
        .iter()
        .map(|p| format!("- {}", problem(p)))
        .collect();
    let count = report.problems.len();
    let header = format!(
        "{count} problem{} found{}:",
        if count == 1 { "" } else { "s" },
        if report.fixed { " and repaired" } else { "" }
    );
    lines.insert(0, header);
    if !report.fixed {
        lines.push("Run `tasks list doctor --fix` to repair what can be repaired.".to_owned());
    }
    lines.join("\n")
}

fn ids(path: &[TaskId]) -> String {
    path.iter()
        .map(|id| format!("#{id}"))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// One finding as a sentence.
pub fn problem(problem: &Problem) -> String {
    match problem {
        Problem::AsymmetricEdge {
            blocker,
            blocked,
            missing_on,
        } => format!(
            "#{blocker} blocks #{blocked}, but only one side records it (missing on #{missing_on})"
        ),
        Problem::DanglingReference { task, target } => {
            format!("#{task} refers to #{target}, which does not exist")
        }
        Problem::SelfEdge { task } => format!("#{task} blocks itself"),
        Problem::DuplicateReference { task, target } => {
            format!("#{task} lists #{target} twice")
        }
        Problem::Cycle { path } => format!("dependency cycle: {}", ids(path)),
        Problem::HighWaterMarkDrift {
            high_water_mark,
            highest_issued,
        } => format!(
            "the high-water mark ({high_water_mark}) is below the highest id issued ({highest_issued}): an id could be reused"
        ),
        Problem::CorruptFile { file, message } => format!("{file} cannot be read: {message}"),
        Problem::BadEntry { file, fault } => format!("{file} is skipped: {fault}"),
        Problem::StaleLock { name, age_ms } => {
            format!("stale lock {name} (untouched for {})", seconds(*age_ms))
        }
        Problem::LeftoverTempFile { name } => {
            format!("temporary file {name} left by an interrupted writer")
        }
        Problem::UnfinishedJournal => {
            "a change was interrupted mid-commit (its journal is replayed by the next write)"
                .to_owned()
        }
        Problem::LockHeld { name, age_ms } => format!(
            "lock {name} is held (refreshed {} ago): another writer is active",
            seconds(*age_ms)
        ),
        other => format!("{other:?}"),
    }
}

fn seconds(ms: u64) -> String {
    task_core::human_duration(std::time::Duration::from_millis(ms))
}
