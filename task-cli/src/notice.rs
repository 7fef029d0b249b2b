//! Cross-process, exactly-once delivery of notifications.
//!
//! Two kinds of notification reach readers, each with its own atomic claim:
//!
//! * **Completions** live in the task's snapshot ([`Snapshot::notification`]). A reader delivers
//!   one only if it creates `{id}.notified` with `O_CREAT|O_EXCL`: the kernel lets exactly one
//!   creator succeed, across processes.
//! * **Events** that do not end a task (stall warnings, monitor lines) are files the supervisor
//!   writes into `events/pending/` (written elsewhere, then renamed in, so never seen torn). A
//!   reader claims one by renaming it into `events/delivered/`: exactly one rename succeeds, the
//!   others get `ENOENT`.
//!
//! Every delivered notification is then appended, one JSON line, to `notifications.jsonl`.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use task_core::{Notification, Priority, TaskId, TerminalStatus};

use crate::error::{CliError, Result};
use crate::paths::{SessionPaths, private_file};
use crate::snapshot::{Snapshot, now_ms};

/// One notification (SPEC §3) and when and how urgently to deliver it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Notice {
    /// Delivery priority.
    pub priority: Priority,
    /// When it was produced, ms since the epoch.
    pub at_ms: u64,
    /// The notification.
    pub notification: Notification,
}

impl Notice {
    /// The task it is about.
    pub fn task_id(&self) -> TaskId {
        self.notification.task_id
    }

    /// The `<task-notification>` envelope, with any trailer.
    pub fn text(&self) -> String {
        self.notification.render()
    }
}

fn rank(priority: Priority) -> u8 {
    match priority {
        Priority::Now => 0,
        Priority::Next => 1,
        Priority::Later => 2,
    }
}

/// Writes a non-terminal event for readers to claim.
pub fn publish_event(paths: &SessionPaths, notice: &Notice) -> Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let name = format!(
        "{}-{:016}-{:08}-{:010}-{}.json",
        rank(notice.priority),
        notice.at_ms,
        std::process::id(),
        sequence,
        notice.task_id()
    );
    let body = serde_json::to_vec(notice)
        .map_err(|e| CliError::Invalid(format!("cannot encode an event: {e}")))?;
    let staging = paths.dir().join("events").join(format!(".{name}"));
    fs::write(&staging, body).map_err(|e| CliError::io("write", &staging, e))?;
    let target = paths.pending_events().join(&name);
    fs::rename(&staging, &target).map_err(|e| CliError::io("publish", &target, e))
}

/// Claims and returns every pending event, oldest first within a priority.
fn claim_events(paths: &SessionPaths) -> Result<Vec<Notice>> {
    let pending = paths.pending_events();
    let mut names: Vec<_> = match fs::read_dir(&pending) {
        Ok(entries) => entries
            .filter_map(|entry| entry.ok().map(|e| e.file_name()))
            .collect(),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CliError::io("list", &pending, e)),
    };
    names.sort();
    let mut claimed = Vec::new();
    for name in names {
        let delivered = paths.delivered_events().join(&name);
        match fs::rename(pending.join(&name), &delivered) {
            Ok(()) => claimed.push(read_event(&delivered)?),
            Err(e) if e.kind() == ErrorKind::NotFound => {} // another reader won it
            Err(e) => return Err(CliError::io("claim", &delivered, e)),
        }
    }
    Ok(claimed)
}

fn read_event(path: &Path) -> Result<Notice> {
    let bytes = fs::read(path).map_err(|e| CliError::io("read", path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| CliError::CorruptState {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Claims the completion of a terminal task: `Some` for exactly one caller across all
/// processes, `None` for every other caller, for a task not yet terminal, and for a task with no
/// notification due (killed on request).
pub fn claim_completion(paths: &SessionPaths, snapshot: &Snapshot) -> Result<Option<Notice>> {
    let Some(notice) = snapshot
        .notification
        .as_ref()
        .filter(|_| snapshot.status.is_terminal())
    else {
        return Ok(None);
    };
    let latch = paths.notified(&snapshot.id);
    let created = private_file().write(true).create_new(true).open(&latch);
    match created {
        Ok(_) => Ok(Some(notice.clone())),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(CliError::io("create", &latch, e)),
    }
}

/// Whether the completion of `id` was already delivered.
pub fn is_notified(paths: &SessionPaths, id: &TaskId) -> bool {
    paths.notified(id).exists()
}

/// Claims every deliverable notification of the session (events and completions), records them
/// in `notifications.jsonl` and returns them in priority order (FIFO within a priority).
pub fn drain(paths: &SessionPaths, tasks: &[Snapshot]) -> Result<Vec<Notice>> {
    let mut notices = claim_events(paths)?;
    for task in tasks {
        if task.notification.is_some() && !is_notified(paths, &task.id) {
            notices.extend(claim_completion(paths, task)?);
        }
    }
    notices.sort_by_key(|n| (n.priority, n.at_ms));
    record(paths, &notices)?;
    Ok(notices)
}

/// Appends delivered notifications to the session's log, one JSON line each, one write each
/// (`O_APPEND`, so concurrent readers never interleave inside a line).
pub fn record(paths: &SessionPaths, notices: &[Notice]) -> Result<()> {
    if notices.is_empty() {
        return Ok(());
    }
    let path = paths.notifications_log();
    let mut log = private_file()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| CliError::io("open", &path, e))?;
    for notice in notices {
        let mut line = serde_json::to_vec(notice)
            .map_err(|e| CliError::Invalid(format!("cannot encode a notification: {e}")))?;
        line.push(b'\n');
        log.write_all(&line)
            .map_err(|e| CliError::io("append to", &path, e))?;
    }
    Ok(())
}

/// The completion of `task`, due now.
pub fn completion(task: &Snapshot, notification: Notification) -> Notice {
    Notice {
        priority: Priority::Later,
        at_ms: task.end_time.unwrap_or_else(now_ms),
        notification,
    }
}

/// The notification of a task whose supervisor died while it ran (marked `failed`).
pub fn orphaned(task: &Snapshot) -> Notification {
    let what = match task.task_type {
        task_core::TaskType::MonitorMcp => "Monitor",
        _ => "Background command",
    };
    Notification {
        status: Some(TerminalStatus::Failed),
        ..Notification::new(
            task.id,
            task.output_file.clone(),
            format!(
                "{what} \"{}\" failed: its supervisor exited",
                task.description
            ),
        )
    }
}
