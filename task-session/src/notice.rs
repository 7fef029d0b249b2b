//! Cross-process, exactly-once delivery of notifications.
//!
//! Two kinds of notification reach readers, each with its own atomic claim:
//!
//! * **Completions** live in the task's record. A reader delivers one only if it creates its
//!   latch `{id}.{end}.notified` with `O_CREAT|O_EXCL`: the kernel lets exactly one creator
//!   succeed, across processes. The end time is part of the name because a resumed agent ends,
//!   and notifies, once per run. `{id}.notified` marks a task whose completions are never
//!   delivered (its caller waits for it in the foreground).
//! * **Events** that do not end a task (stall warnings, monitor lines) are files the supervisor
//!   writes into `events/pending/` (written elsewhere, then renamed in, so never seen torn). A
//!   reader claims one by renaming it into `events/delivered/`: exactly one rename succeeds.
//!
//! A claim and the durable record of the delivery succeed or fail together: every claimed
//! notification is appended to `notifications.jsonl` in one write, and if that fails (a full
//! disk, a planted symlink) every claim is released (the latch removed, the event renamed
//! back), so the notifications stay deliverable and the error is reported.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use task_core::{Notification, Priority, TaskId};

use crate::error::{Error, Result};
use crate::paths::{SessionPaths, private_file};
use crate::untrusted;

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
    /// A task's completion, due at `end_time` (now if unknown), with the default priority.
    pub fn completion(end_time: Option<u64>, notification: Notification) -> Self {
        Notice {
            priority: Priority::Later,
            at_ms: end_time.unwrap_or_else(task_core::now_ms),
            notification,
        }
    }

    /// The task it is about.
    pub fn task_id(&self) -> TaskId {
        self.notification.task_id
    }

    /// The `<task-notification>` envelope, with any trailer.
    pub fn text(&self) -> String {
        self.notification.render()
    }
}

/// Writes a non-terminal event for readers to claim.
pub fn publish_event(paths: &SessionPaths, notice: &Notice) -> Result<()> {
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let name = format!(
        "{}-{:016}-{:08}-{:010}-{}.json",
        notice.priority.rank(),
        notice.at_ms,
        std::process::id(),
        sequence,
        notice.task_id()
    );
    let body = serde_json::to_vec(notice)
        .map_err(|e| Error::Invalid(format!("cannot encode an event: {e}")))?;
    let staging = paths.dir().join("events").join(format!(".{name}"));
    let mut file = private_file()
        .write(true)
        .create_new(true)
        .open(&staging)
        .map_err(|e| Error::io("create", &staging, e))?;
    if let Err(e) = file.write_all(&body) {
        let _ = fs::remove_file(&staging);
        return Err(Error::io("write", &staging, e));
    }
    let target = paths.pending_events().join(&name);
    fs::rename(&staging, &target).map_err(|e| {
        let _ = fs::remove_file(&staging);
        Error::io("publish", &target, e)
    })
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
        Err(e) => return Err(Error::io("list", &pending, e)),
    };
    names.sort();
    Ok(names)
}

/// A notification this process claimed and has not recorded yet.
#[derive(Debug)]
pub struct Claim {
    /// The notification.
    pub notice: Notice,
    /// How to give it back.
    release: Release,
}

#[derive(Debug)]
enum Release {
    /// Remove this completion latch.
    Latch(PathBuf),
    /// Rename this delivered event back to pending.
    Event {
        delivered: PathBuf,
        pending: PathBuf,
    },
}

impl Claim {
    fn release(self) {
        let undone = match &self.release {
            Release::Latch(latch) => fs::remove_file(latch),
            Release::Event { delivered, pending } => fs::rename(delivered, pending),
        };
        if let Err(error) = undone {
            tracing::error!(task = %self.notice.task_id(), %error, "could not release a claimed notification: it may be lost");
        }
    }
}

/// Claims every pending event, oldest first within a priority. A claimed file that cannot be
/// read is reported (a warning naming it, left in `events/delivered/`) and never costs the
/// events claimed with it.
pub fn claim_events(paths: &SessionPaths) -> Result<Vec<Claim>> {
    let pending = paths.pending_events();
    let mut claimed = Vec::new();
    for name in pending_names(paths)? {
        let delivered = paths.delivered_events().join(&name);
        match fs::rename(pending.join(&name), &delivered) {
            Ok(()) => match read_event(&delivered) {
                Ok(notice) => claimed.push(Claim {
                    notice,
                    release: Release::Event {
                        delivered,
                        pending: pending.join(&name),
                    },
                }),
                Err(error) => tracing::warn!("skipped an unreadable event: {error}"),
            },
            Err(e) if e.kind() == ErrorKind::NotFound => {} // another reader won it
            Err(e) => {
                release_all(claimed);
                return Err(Error::io("claim", &delivered, e));
            }
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
/// announces them). An event claimed meanwhile is left out; so is a file that cannot be read,
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
            Err(error) => tracing::debug!(%error, "a pending event is left to its claim to report"),
        }
    }
    Ok(events)
}

fn read_event(path: &Path) -> Result<Notice> {
    let bytes = untrusted::read_file(path, untrusted::MAX_STATE_FILE_BYTES)
        .map_err(|e| Error::io("read", path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::CorruptState {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Claims the completion `notice` of the ended task `id`: `Some` for exactly one caller across
/// all processes, `None` for every other, and for a task never notified.
pub fn claim_completion(
    paths: &SessionPaths,
    id: &TaskId,
    notice: &Notice,
) -> Result<Option<Claim>> {
    if exists(&paths.never_notified(id)) {
        return Ok(None);
    }
    let latch = paths.notified(id, notice.at_ms);
    Ok(create_latch(&latch)?.then(|| Claim {
        notice: notice.clone(),
        release: Release::Latch(latch),
    }))
}

/// Marks `id` as a task none of whose completions any reader delivers: the supervisor sets it
/// at start for a task whose caller waits for it itself. True for the one caller that sets it.
pub fn never_notify(paths: &SessionPaths, id: &TaskId) -> Result<bool> {
    create_latch(&paths.never_notified(id))
}

/// Creates `latch` with `O_CREAT|O_EXCL`: true for the one caller that creates it.
fn create_latch(latch: &Path) -> Result<bool> {
    match private_file().write(true).create_new(true).open(latch) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(Error::io("create", latch, e)),
    }
}

/// Whether the completion `notice` of `id` was already delivered (or is being delivered), or
/// is never to be.
pub fn is_notified(paths: &SessionPaths, id: &TaskId, notice: &Notice) -> bool {
    exists(&paths.never_notified(id)) || exists(&paths.notified(id, notice.at_ms))
}

fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
}

/// Records claimed notifications in the session's log (one `O_APPEND` write for all, so
/// concurrent readers never interleave inside a line) and returns them in delivery order. If
/// the log cannot be written, every claim is released and the error returned: nothing claimed
/// is lost, and all of it can be delivered later.
pub fn deliver(paths: &SessionPaths, mut claims: Vec<Claim>) -> Result<Vec<Notice>> {
    claims.sort_by_key(|c| (c.notice.priority, c.notice.at_ms));
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    match append_to_log(paths, claims.iter().map(|c| &c.notice)) {
        Ok(()) => Ok(claims.into_iter().map(|c| c.notice).collect()),
        Err(error) => {
            release_all(claims);
            Err(error)
        }
    }
}

/// Gives back claims that will not be delivered: they stay deliverable.
pub fn release_all(claims: Vec<Claim>) {
    for claim in claims {
        claim.release();
    }
}

fn append_to_log<'a>(
    paths: &SessionPaths,
    notices: impl Iterator<Item = &'a Notice>,
) -> Result<()> {
    let path = paths.notifications_log();
    let mut lines = Vec::new();
    for notice in notices {
        serde_json::to_writer(&mut lines, notice)
            .map_err(|e| Error::Invalid(format!("cannot encode a notification: {e}")))?;
        lines.push(b'\n');
    }
    let mut log = untrusted::open_regular(&path, private_file().create(true).append(true))
        .map_err(|e| Error::io("open", &path, e))?;
    log.write_all(&lines)
        .map_err(|e| Error::io("append to", &path, e))
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

    fn session() -> (tempfile::TempDir, SessionPaths) {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        paths.create_dirs().unwrap();
        (root, paths)
    }

    #[test]
    fn peeking_reads_pending_events_in_delivery_order_and_claims_none() {
        let (_root, paths) = session();
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

        let claimed = deliver(&paths, claim_events(&paths).unwrap()).unwrap();
        assert_eq!(lines(claimed), order);
        assert!(peek_events(&paths).unwrap().is_empty());
        assert!(paths.delivered_events().join(corrupt).exists());
    }

    #[test]
    fn a_failed_delivery_releases_its_claims() {
        let (root, paths) = session();
        event(&paths, "m12345678", Priority::Next, 10, "an event");
        let id = TaskId::parse("b12345678").unwrap();
        let completion = Notice::completion(Some(5), Notification::new(id, "/o", "done"));
        // The log is a symlink: its append fails (O_NOFOLLOW).
        std::os::unix::fs::symlink(root.path().join("elsewhere"), paths.notifications_log())
            .unwrap();
        let mut claims = claim_events(&paths).unwrap();
        claims.extend(claim_completion(&paths, &id, &completion).unwrap());
        assert_eq!(claims.len(), 2);
        assert!(deliver(&paths, claims).is_err());

        assert!(
            !is_notified(&paths, &id, &completion),
            "the latch was released"
        );
        assert_eq!(
            peek_events(&paths).unwrap().len(),
            1,
            "the event is pending again"
        );

        fs::remove_file(paths.notifications_log()).unwrap();
        let mut claims = claim_events(&paths).unwrap();
        claims.extend(claim_completion(&paths, &id, &completion).unwrap());
        assert_eq!(deliver(&paths, claims).unwrap().len(), 2);
        assert!(
            claim_completion(&paths, &id, &completion)
                .unwrap()
                .is_none()
        );
        assert!(claim_events(&paths).unwrap().is_empty(), "delivered once");
    }
}
