//! `tasks status`: the footer pill of the reference harness as one line for a shell prompt or a
//! status bar ([`crate::cli::pill`]). It reads only what can be background work, starts nothing and
//! writes nothing, and an idle session prints nothing.
//!
//! What it skips, so that a prompt stays fast in a session with thousands of finished tasks:
//! everything, when no supervisor holds the session lock (no task runs without one: a record
//! left live reads as an orphan); and the record of every task whose completion latch exists
//! (it ended and was delivered), except agents and teammates, which a message can resume.

use std::collections::HashSet;

use serde::Serialize;
use task_core::{TaskId, TaskType};

use crate::cli::error::{CliError, Result, exit};
use crate::cli::pill;
use crate::cli::printer::Printer;
use task_session::paths::SessionPaths;
use task_session::record::{self, TaskRecord};

/// Prints the pill of the session at `paths` (`--json`: label, attention flag and count).
pub fn status(paths: SessionPaths, printer: Printer) -> Result<u8> {
    paths.verify()?;
    let tasks = if task_session::lock::is_held(&paths.lock())? {
        candidates(&paths)?
    } else {
        Vec::new()
    };
    let mut pill = pill::pill(tasks.iter().map(|record| &record.task));
    let queued = queued(&tasks);
    if !queued.is_empty() {
        pill.label.push_str(&queued_label(&queued));
    }
    // An idle session prints nothing.
    let text = match pill.label.as_str() {
        "" => String::new(),
        label => format!("{label}\n"),
    };
    printer.emit(&Status { pill, queued }, &text)?;
    Ok(exit::OK)
}

/// How many queued tasks the text line names; `--json` lists them all.
const NAMED_QUEUED: usize = 3;

/// What `status --json` prints: the pill, and every queued task in the order it starts.
#[derive(Debug, Serialize)]
struct Status {
    #[serde(flatten)]
    pill: pill::Pill,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    queued: Vec<Queued>,
}

/// A task waiting in its group's queue.
#[derive(Debug, Serialize)]
struct Queued {
    id: TaskId,
    group: String,
    /// Its 1-based place among the waiting tasks of its group, as `ps` shows it (`queued #N`).
    position: usize,
}

/// The queued tasks of `tasks`, by group, then position.
fn queued(tasks: &[TaskRecord]) -> Vec<Queued> {
    let positions = task_session::queue::positions(tasks);
    let mut queued: Vec<Queued> = tasks
        .iter()
        .filter_map(|record| {
            let id = record.id();
            Some(Queued {
                id,
                group: record.queue.as_ref()?.group.clone(),
                position: *positions.get(&id)?,
            })
        })
        .collect();
    queued.sort_by(|a, b| (&a.group, a.position).cmp(&(&b.group, b.position)));
    queued
}

/// ` · 4 queued: s1 #1, s2 #2, a3 #1 in agents…`: the count, then the first few with their
/// position (and group, but the default one).
fn queued_label(queued: &[Queued]) -> String {
    let named: Vec<String> = queued
        .iter()
        .take(NAMED_QUEUED)
        .map(|q| match q.group.as_str() {
            task_session::queue::DEFAULT_GROUP => format!("{} #{}", q.id, q.position),
            group => format!("{} #{} in {group}", q.id, q.position),
        })
        .collect();
    let more = if queued.len() > NAMED_QUEUED {
        "…"
    } else {
        ""
    };
    format!(" · {} queued: {}{more}", queued.len(), named.join(", "))
}

/// The records of the tasks that may be live: all but those delivered and not resumable.
fn candidates(paths: &SessionPaths) -> Result<Vec<TaskRecord>> {
    let dir = paths.tasks_dir();
    let names: Vec<String> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CliError::io("list", &dir, e)),
    };
    let delivered: HashSet<&str> = names
        .iter()
        .filter(|name| name.ends_with(".notified"))
        .filter_map(|name| name.split('.').next())
        .collect();
    let mut records = Vec::new();
    for name in &names {
        let Some(id) = name
            .strip_suffix(".json")
            .and_then(|stem| TaskId::parse(stem).ok())
        else {
            continue;
        };
        let resumable = matches!(
            id.task_type(),
            TaskType::LocalAgent | TaskType::InProcessTeammate
        );
        if delivered.contains(id.as_str()) && !resumable {
            continue;
        }
        match record::read(paths, &id) {
            Ok(record) => records.push(record),
            // Gone while listing, or unreadable: `tasks ps` names the problem.
            Err(error) => tracing::debug!(task = %id, %error, "not counted"),
        }
    }
    Ok(records)
}
