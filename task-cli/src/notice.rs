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

/// The names of the files in `events/pending/`, in delivery order (priority, then time, then
/// publication order): the publisher's file names sort that way.
fn pending_names(paths: &SessionPaths) -> Result<Vec<std::ffi::OsString>> {
    let pending = paths.pending_events();
    let mut names: Vec<_> = match fs::read_dir(&pending) {
        Ok(entries) => entries
            .filter_map(|entry| entry.ok().map(|e| e.file_name()))
            .collect(),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CliError::io("list", &pending, e)),
    };
    names.sort();
    Ok(names)
}

/// Claims and returns every pending event, oldest first within a priority. A claimed file that
/// cannot be parsed is reported (a warning naming it, left in `events/delivered/`) and never
/// costs the events claimed with it.
fn claim_events(paths: &SessionPaths) -> Result<Vec<Notice>> {
    let pending = paths.pending_events();
    let mut claimed = Vec::new();
    for name in pending_names(paths)? {
        let delivered = paths.delivered_events().join(&name);
        match fs::rename(pending.join(&name), &delivered) {
            Ok(()) => match read_event(&delivered) {
                Ok(notice) => claimed.push(notice),
                Err(error) => tracing::warn!("skipped an unreadable event: {error}"),
            },
            Err(e) if e.kind() == ErrorKind::NotFound => {} // another reader won it
            Err(e) => return Err(CliError::io("claim", &delivered, e)),
        }
    }
    Ok(claimed)
}

/// An event waiting in `events/pending/`, read without claiming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingEvent {
    /// Its file name: unique within the session, and stable until a reader claims it.
    pub name: String,
    /// The event.
    pub notice: Notice,
}

/// Every event still pending, in delivery order, without claiming any (for a watcher that only
/// announces them). An event claimed meanwhile is left out; so is a file that cannot be parsed,
/// which the claim that takes it reports.
pub fn peek_events(paths: &SessionPaths) -> Result<Vec<PendingEvent>> {
    let pending = paths.pending_events();
    let mut events = Vec::new();
    for name in pending_names(paths)? {
        match read_event(&pending.join(&name)) {
            Ok(notice) => events.push(PendingEvent {
                name: name.to_string_lossy().into_owned(),
                notice,
            }),
            // Claimed by a reader meanwhile.
            Err(CliError::Io { source, .. }) if source.kind() == ErrorKind::NotFound => {}
            Err(error) => tracing::debug!(%error, "a pending event is left to its claim to report"),
        }
    }
    Ok(events)
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
    Ok(mark_notified(paths, &snapshot.id)?.then(|| notice.clone()))
}

/// Sets the completion latch of `id` (`{id}.notified`, created with `O_CREAT|O_EXCL`): true for
/// the one caller that creates it, false for every other. Once set, no reader delivers the
/// task's completion; the supervisor sets it at start for a task whose caller waits itself.
pub fn mark_notified(paths: &SessionPaths, id: &TaskId) -> Result<bool> {
    let latch = paths.notified(id);
    match private_file().write(true).create_new(true).open(&latch) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn event(paths: &SessionPaths, id: &str, priority: Priority, at_ms: u64, line: &str) {
        let id = TaskId::parse(id).unwrap();
        let notification = Notification {
            event: Some(line.into()),
            ..Notification::new(id, paths.output(&id), "event")
        };
        let notice = Notice {
            priority,
            at_ms,
            notification,
        };
        publish_event(paths, &notice).unwrap();
    }

    fn lines(notices: impl IntoIterator<Item = Notice>) -> Vec<String> {
        notices
            .into_iter()
            .map(|n| n.notification.event.unwrap_or_default())
            .collect()
    }

    #[test]
    fn peeking_reads_pending_events_in_delivery_order_and_claims_none() {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        paths.create_dirs().unwrap();
        event(&paths, "m12345678", Priority::Next, 20, "second");
        event(&paths, "m12345678", Priority::Later, 10, "last");
        event(&paths, "m12345678", Priority::Next, 20, "third");
        event(&paths, "m12345678", Priority::Next, 10, "first");
        let corrupt = "1-corrupt.json";
        fs::write(paths.pending_events().join(corrupt), b"{").unwrap();

        let peeked = peek_events(&paths).unwrap();
        let order = ["first", "second", "third", "last"];
        assert_eq!(lines(peeked.iter().map(|e| e.notice.clone())), order);
        assert_eq!(
            peek_events(&paths).unwrap(),
            peeked,
            "peeking claims nothing"
        );
        let names: std::collections::HashSet<_> = peeked.iter().map(|e| &e.name).collect();
        assert_eq!(names.len(), 4, "each event has its own name");

        assert_eq!(lines(claim_events(&paths).unwrap()), order);
        assert!(peek_events(&paths).unwrap().is_empty());
        assert!(
            fs::read_dir(paths.pending_events())
                .unwrap()
                .next()
                .is_none()
        );
        assert!(paths.delivered_events().join(corrupt).exists());
    }

    #[test]
    fn a_task_marked_notified_at_start_never_has_its_completion_claimed() {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        paths.create_dirs().unwrap();
        let id = TaskId::parse("b12345678").unwrap();
        assert!(mark_notified(&paths, &id).unwrap());
        assert!(!mark_notified(&paths, &id).unwrap());

        let mut task = Snapshot::new(id, "d".into(), "true".into(), paths.output(&id));
        task.status = task_core::TaskStatus::Completed;
        task.notification = Some(completion(&task, orphaned(&task)));
        assert_eq!(claim_completion(&paths, &task).unwrap(), None);
        assert!(drain(&paths, &[task]).unwrap().is_empty());
    }
}
