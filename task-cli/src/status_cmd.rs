//! `tasks status`: the footer pill of the reference harness as one line for a shell prompt or a
//! status bar ([`crate::pill`]). It reads only what can be background work, starts nothing and
//! writes nothing, and an idle session prints nothing.
//!
//! What it skips, so that a prompt stays fast in a session with thousands of finished tasks:
//! everything, when no supervisor holds the session lock (no task runs without one: a record
//! left live reads as an orphan); and the record of every task whose completion latch exists
//! (it ended and was delivered), except agents and teammates, which a message can resume.

use std::collections::HashSet;

use task_core::{TaskId, TaskType};

use crate::error::{CliError, Result, exit};
use crate::pill;
use crate::render;
use task_session::paths::SessionPaths;
use task_session::record::{self, TaskRecord};

/// Prints the pill of the session at `paths` (`--json`: label, attention flag and count).
pub fn status(paths: SessionPaths, json: bool) -> Result<u8> {
    paths.verify()?;
    let tasks = if task_session::lock::is_held(&paths.lock())? {
        candidates(&paths)?
    } else {
        Vec::new()
    };
    let mut pill = pill::pill(tasks.iter().map(|record| &record.task));
    let queued = task_session::queue::positions(&tasks).len();
    if queued > 0 {
        pill.label.push_str(&format!(" · {queued} queued"));
    }
    if json {
        render::json(&pill)?;
    } else if !pill.label.is_empty() {
        render::out(&format!("{}\n", pill.label))?;
    }
    Ok(exit::OK)
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
