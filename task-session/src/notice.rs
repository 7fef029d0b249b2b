//! Cross-process, exactly-once delivery of notifications.
//!
//! Two kinds of notification reach readers, each with its own atomic claim:
//!
//! * **Completions** live in the task's record. A reader delivers one only if it holds its
//!   lease (`{id}.{end}.lease{n}`, created with `O_EXCL`: the kernel lets exactly one creator
//!   succeed, across processes), and marks it delivered by creating its latch
//!   `{id}.{end}.notified`. The end time is part of the name because a resumed agent ends,
//!   and notifies, once per run. `{id}.notified` marks a task whose completions are never
//!   delivered (its caller waits for it in the foreground).
//! * **Events** that do not end a task (stall warnings, monitor lines) are files the supervisor
//!   writes into `events/pending/` (written elsewhere, then renamed in, so never seen torn). A
//!   reader claims one by renaming it into `events/leased/` under a name that says who holds
//!   it (exactly one rename succeeds), and moves it to `events/delivered/` once delivered.
//!
//! A claim is a lease ([`crate::lease`]): the reader writes the notification out (its stdout
//! flushed, its MCP message sent) and only then commits it ([`Leased::commit`]): it is appended
//! to `notifications.jsonl` in one write and marked delivered (the latch created, the event
//! moved to `events/delivered/`). A reader that dies in between leaves a lease whose holder is
//! gone: the next reader delivers the notification again, with the same [`Notice::key`]. If the
//! log cannot be written (a full disk, a planted symlink) every claim is given back and the
//! error reported.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use task_core::{Notification, Priority, TaskId};

use crate::error::{Error, Result};
use crate::lease::Holder;
use task_output::OutputError;
use task_output::open::{NoFollow, read_untrusted};

use crate::paths::{MAX_STATE_FILE_BYTES, SessionPaths};

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
    /// Its stable key, set when it is claimed: the task id and end of a completion
    /// (`b12345678@1764000000000`), the file name of an event. A notification delivered twice
    /// (its first reader died before marking it delivered) carries the same key both times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Notice {
    /// A task's completion, due at `end_time` (now if unknown), with the default priority.
    pub fn completion(end_time: Option<u64>, notification: Notification) -> Self {
        Notice {
            priority: Priority::Later,
            at_ms: end_time.unwrap_or_else(task_core::now_ms),
            notification,
            key: None,
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
    let mut file = NoFollow::write()
        .create_new()
        .open(&staging)
        .map_err(|e| Error::io("create", &staging, e.into()))?;
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

/// A notification this process holds under a lease: written out, then committed (marked
/// delivered), or released (deliverable again).
#[derive(Debug)]
pub struct Claim {
    /// The notification, with its [`Notice::key`] set.
    pub notice: Notice,
    kind: ClaimKind,
}

#[derive(Debug)]
enum ClaimKind {
    /// A completion: the lease file of generation `generation` is ours.
    Completion { id: TaskId, generation: u32 },
    /// An event: renamed into `events/leased/` under `leased`, from `events/pending/{name}`.
    Event { name: OsString, leased: PathBuf },
}

impl Claim {
    /// Marks it delivered: the completion's latch is created (and its leases removed), the
    /// event is moved to `events/delivered/`.
    fn commit(self, paths: &SessionPaths) {
        let done = match &self.kind {
            ClaimKind::Completion { id, .. } => {
                create_latch(&paths.notified(id, self.notice.at_ms)).map(|_| {
                    forget_leases(paths, id, self.notice.at_ms);
                })
            }
            ClaimKind::Event { name, leased } => {
                let delivered = paths.delivered_events().join(name);
                fs::rename(leased, &delivered).map_err(|e| Error::io("deliver", delivered, e))
            }
        };
        if let Err(error) = done {
            // Written out but not marked: it will be delivered again, with the same key.
            tracing::warn!(task = %self.notice.task_id(), %error, "delivered, but not marked delivered");
        }
    }

    /// Gives it back: deliverable again at once.
    fn release(self, paths: &SessionPaths) {
        let undone = match &self.kind {
            ClaimKind::Completion { id, generation } => {
                let lease = paths.lease(id, self.notice.at_ms, *generation);
                let expired = Holder::this_process(Duration::ZERO).expired();
                write_lease(&lease, &expired, true).map(|_| ())
            }
            ClaimKind::Event { name, leased } => {
                let pending = paths.pending_events().join(name);
                fs::rename(leased, &pending).map_err(|e| Error::io("release", pending, e))
            }
        };
        if let Err(error) = undone {
            tracing::warn!(task = %self.notice.task_id(), %error, "could not give back a notification: deliverable again once its lease ends");
        }
    }
}

/// Notifications this process claimed under a lease and has not delivered yet.
///
/// [`Leased::record`] them, write them out, then [`Leased::mark_delivered`]. Dropped without a commit (the write failed), they
/// are given back at once; if this process dies first, they are deliverable again as soon as
/// another reader sees that their holder is gone (or their lease ran out).
#[derive(Debug)]
pub struct Leased {
    paths: SessionPaths,
    claims: Vec<Claim>,
}

impl Leased {
    /// Nothing claimed yet, in `paths`'s session.
    pub fn new(paths: &SessionPaths) -> Self {
        Self {
            paths: paths.clone(),
            claims: Vec::new(),
        }
    }

    /// The claimed notifications, in delivery order.
    pub fn notices(&self) -> impl Iterator<Item = &Notice> {
        self.claims.iter().map(|claim| &claim.notice)
    }

    /// Whether nothing was claimed.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
    }

    /// How many were claimed.
    pub fn len(&self) -> usize {
        self.claims.len()
    }

    /// Adds `claim`, keeping the delivery order (priority, then time).
    pub fn push(&mut self, claim: Claim) {
        let at = self.claims.partition_point(|c| {
            (c.notice.priority, c.notice.at_ms) <= (claim.notice.priority, claim.notice.at_ms)
        });
        self.claims.insert(at, claim);
    }

    /// Adds every claim of `more`, keeping the delivery order.
    pub fn extend(&mut self, mut more: Leased) {
        for claim in std::mem::take(&mut more.claims) {
            self.push(claim);
        }
    }

    /// Records the claimed notifications in `notifications.jsonl` (one `O_APPEND` write, so
    /// concurrent readers never interleave inside a line), before they are written out. If the
    /// log cannot be written, every claim is given back and the error returned: nothing is
    /// written out, and they stay deliverable.
    pub fn record(&mut self) -> Result<()> {
        if self.claims.is_empty() {
            return Ok(());
        }
        append_to_log(&self.paths, self.notices()).inspect_err(|_| {
            for claim in std::mem::take(&mut self.claims) {
                claim.release(&self.paths);
            }
        })
    }

    /// Marks every claimed notification delivered, once it has been recorded
    /// ([`Leased::record`]) and written out.
    pub fn mark_delivered(mut self) -> Vec<Notice> {
        std::mem::take(&mut self.claims)
            .into_iter()
            .map(|claim| {
                let notice = claim.notice.clone();
                claim.commit(&self.paths);
                notice
            })
            .collect()
    }

    /// Records and marks delivered at once, for a caller that keeps them in memory only.
    pub fn commit(mut self) -> Result<Vec<Notice>> {
        self.record()?;
        Ok(self.mark_delivered())
    }

    /// Records them, hands them all to `write_out` at once (which prints them, flushed, or
    /// sends them), then marks them delivered; if `write_out` fails they are given back and
    /// its error is returned. Returns what was delivered.
    pub fn deliver(
        mut self,
        write_out: impl FnOnce(&[&Notice]) -> std::io::Result<()>,
    ) -> Result<Vec<Notice>> {
        if self.is_empty() {
            return Ok(Vec::new());
        }
        self.record()?;
        let notices: Vec<&Notice> = self.notices().collect();
        write_out(&notices).map_err(|e| Error::io("write out", "the notifications", e))?;
        Ok(self.mark_delivered())
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        for claim in std::mem::take(&mut self.claims) {
            claim.release(&self.paths);
        }
    }
}

/// Claims every pending event under `holder`'s lease, in delivery order, after making the
/// events of stale leases pending again. A claimed file that cannot be read is reported (a
/// warning naming it, moved to `events/delivered/`) and never costs the events claimed with it.
pub fn claim_events(paths: &SessionPaths, holder: &Holder) -> Result<Leased> {
    let leased_dir = paths.leased_events();
    // A session made before leases has no `events/leased/`; one no supervisor ever started
    // has no `events/` at all, and nothing to claim.
    match fs::DirBuilder::new().mode(0o700).create(&leased_dir) {
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Leased::new(paths)),
        Err(e) if e.kind() != ErrorKind::AlreadyExists => {
            return Err(Error::io("create", leased_dir, e));
        }
        _ => {}
    }
    give_back_stale_events(paths)?;
    let pending = paths.pending_events();
    let mut claimed = Leased::new(paths);
    for name in pending_names(paths)? {
        let mut leased_name = name.clone();
        leased_name.push(format!("{LEASE_SEPARATOR}{}", holder.encode()));
        let leased = paths.leased_events().join(&leased_name);
        match fs::rename(pending.join(&name), &leased) {
            Ok(()) => match read_event(&leased) {
                Ok(mut notice) => {
                    notice.key = Some(event_key(&name));
                    claimed.push(Claim {
                        notice,
                        kind: ClaimKind::Event { name, leased },
                    });
                }
                Err(error) => {
                    tracing::warn!("skipped an unreadable event: {error}");
                    let _ = fs::rename(&leased, paths.delivered_events().join(&name));
                }
            },
            Err(e) if e.kind() == ErrorKind::NotFound => {} // another reader won it
            Err(e) => return Err(Error::io("claim", &leased, e)),
        }
    }
    Ok(claimed)
}

/// Separates an event's name from its holder in `events/leased/`.
const LEASE_SEPARATOR: &str = "@";

/// Makes the events whose lease is stale pending again (exactly one rename wins each).
fn give_back_stale_events(paths: &SessionPaths) -> Result<()> {
    let leased = paths.leased_events();
    let entries = match fs::read_dir(&leased) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io("list", &leased, e)),
    };
    let now = task_core::now_ms();
    for entry in entries.filter_map(std::result::Result::ok) {
        let file_name = entry.file_name();
        let Some((name, holder)) = file_name
            .to_str()
            .and_then(|text| text.rsplit_once(LEASE_SEPARATOR))
        else {
            continue;
        };
        if Holder::decode(holder).is_none_or(|holder| holder.is_stale(now)) {
            match fs::rename(entry.path(), paths.pending_events().join(name)) {
                Ok(()) => {
                    tracing::info!(event = name, "a reader died delivering it: pending again")
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {} // another reader gave it back
                Err(e) => return Err(Error::io("give back", entry.path(), e)),
            }
        }
    }
    Ok(())
}

/// The stable key of the event published under `name`.
fn event_key(name: &OsStr) -> String {
    let name = name.to_string_lossy();
    name.strip_suffix(".json").unwrap_or(&name).to_owned()
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
            Ok(mut notice) => {
                notice.key = Some(event_key(&name));
                events.push(PendingEvent {
                    name: name.to_string_lossy().into_owned(),
                    notice,
                });
            }
            Err(error) => tracing::debug!(%error, "a pending event is left to its claim to report"),
        }
    }
    Ok(events)
}

fn read_event(path: &Path) -> Result<Notice> {
    let bytes = read_untrusted(path, MAX_STATE_FILE_BYTES)
        .map_err(|e| Error::io("read", path, e.into()))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::CorruptState {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// How many times a completion may be claimed and left undelivered (its readers dying) before
/// its claims are refused; each claim is one small file until it is delivered.
const MAX_LEASE_GENERATIONS: u32 = 256;

/// Claims the completion `notice` of the ended task `id` under `holder`'s lease: `Some` for
/// exactly one caller at a time across all processes, `None` for every other, for a completion
/// already delivered and for a task never notified. A lease whose holder died or ran out of
/// time no longer counts: its completion is claimed again (the lease files are numbered, one
/// `O_EXCL` creation deciding each number, and never removed until the completion is
/// delivered, so two readers can never hold the same completion's live lease).
pub fn claim_completion(
    paths: &SessionPaths,
    id: &TaskId,
    notice: &Notice,
    holder: &Holder,
) -> Result<Option<Claim>> {
    if is_notified(paths, id, notice) {
        return Ok(None);
    }
    let now = task_core::now_ms();
    for generation in 0..MAX_LEASE_GENERATIONS {
        let lease = paths.lease(id, notice.at_ms, generation);
        if !write_lease(&lease, holder, false)? {
            let current = read_lease(&lease);
            if current.is_some_and(|current| !current.is_stale(now)) {
                return Ok(None); // a live reader is delivering it
            }
            continue;
        }
        // A holder whose lease ran out may have delivered it meanwhile.
        if exists(&paths.notified(id, notice.at_ms)) {
            let _ = write_lease(&lease, &holder.expired(), true);
            return Ok(None);
        }
        let mut notice = notice.clone();
        notice.key = Some(completion_key(id, notice.at_ms));
        return Ok(Some(Claim {
            notice,
            kind: ClaimKind::Completion {
                id: *id,
                generation,
            },
        }));
    }
    tracing::error!(task = %id, "its completion was claimed {MAX_LEASE_GENERATIONS} times and never delivered");
    Ok(None)
}

/// The stable key of a task's completion: its id and end.
pub fn completion_key(id: &TaskId, ended_ms: u64) -> String {
    format!("{id}@{ended_ms}")
}

/// Writes `holder` as `lease`: created only if absent (`replace` false; false if it exists),
/// or replaced (written aside, then renamed in). A lease is a symbolic link whose target is
/// the holder, never followed: created whole in one call, and small enough to live in its
/// inode, so leasing needs no data block and works on a full disk.
fn write_lease(lease: &Path, holder: &Holder, replace: bool) -> Result<bool> {
    let target = holder.encode();
    if !replace {
        return match std::os::unix::fs::symlink(&target, lease) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(Error::io("create", lease, e)),
        };
    }
    static SEQUENCE: AtomicU64 = AtomicU64::new(0);
    let sequence = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    let aside = lease.with_extension(format!("{}.{sequence}.tmp", std::process::id()));
    std::os::unix::fs::symlink(&target, &aside).map_err(|e| Error::io("create", &aside, e))?;
    fs::rename(&aside, lease).map_err(|e| {
        let _ = fs::remove_file(&aside);
        Error::io("replace", lease, e)
    })?;
    Ok(true)
}

/// The holder a lease names, or `None` if it is not a lease (no holder: stale).
fn read_lease(lease: &Path) -> Option<Holder> {
    let target = fs::read_link(lease).ok()?;
    Holder::decode(target.to_str()?)
}

/// Removes the lease files of a delivered (or removed) completion.
pub fn forget_leases(paths: &SessionPaths, id: &TaskId, ended_ms: u64) {
    for generation in 0..MAX_LEASE_GENERATIONS {
        match fs::remove_file(paths.lease(id, ended_ms, generation)) {
            Err(e) if e.kind() == ErrorKind::NotFound => return,
            Err(error) => {
                tracing::warn!(task = %id, %error, "cannot remove a delivered completion's lease");
                return;
            }
            Ok(()) => {}
        }
    }
}

/// Marks `id` as a task none of whose completions any reader delivers: the supervisor sets it
/// at start for a task whose caller waits for it itself. True for the one caller that sets it.
pub fn never_notify(paths: &SessionPaths, id: &TaskId) -> Result<bool> {
    create_latch(&paths.never_notified(id))
}

/// Creates `latch` with `O_CREAT|O_EXCL`: true for the one caller that creates it.
fn create_latch(latch: &Path) -> Result<bool> {
    match NoFollow::write().create_new().open(latch) {
        Ok(_) => Ok(true),
        Err(OutputError::AlreadyExists { .. }) => Ok(false),
        Err(e) => Err(Error::io("create", latch, e.into())),
    }
}

/// Whether the completion `notice` of `id` was already delivered, or is never to be. (One
/// being delivered under a lease is not: its reader may still die.)
pub fn is_notified(paths: &SessionPaths, id: &TaskId, notice: &Notice) -> bool {
    exists(&paths.never_notified(id)) || exists(&paths.notified(id, notice.at_ms))
}

fn exists(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok()
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
    let mut log = NoFollow::write()
        .create()
        .append()
        .open_regular(&path)
        .map_err(|e| Error::io("open", &path, e.into()))?
        .into_file();
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
            key: None,
        };
        publish_event(paths, &notice).unwrap();
    }

    fn lines(notices: impl IntoIterator<Item = Notice>) -> Vec<String> {
        notices
            .into_iter()
            .map(|n| n.notification.event.unwrap_or_default())
            .collect()
    }

    fn me() -> Holder {
        Holder::this_process(Duration::from_secs(60))
    }

    /// A holder that died: a process that has exited (its lease is stale at once).
    fn dead() -> Holder {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let started = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let started = &started[started.rfind(')').unwrap() + 1..];
        let started = started.split_whitespace().nth(19).unwrap().to_owned();
        child.wait().unwrap();
        Holder::decode(&format!("{pid}-{started}-{}", u64::MAX)).unwrap()
    }

    fn completion(id: &str, at: u64) -> (TaskId, Notice) {
        let id = TaskId::parse(id).unwrap();
        (
            id,
            Notice::completion(Some(at), Notification::new(id, "/o", "done")),
        )
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

        let claimed = claim_events(&paths, &me()).unwrap().commit().unwrap();
        assert_eq!(lines(claimed.clone()), order);
        assert!(
            claimed
                .iter()
                .all(|n| n.key.as_deref().is_some_and(|k| k.ends_with("-m12345678")))
        );
        assert!(peek_events(&paths).unwrap().is_empty());
        assert!(paths.delivered_events().join(corrupt).exists());
    }

    #[test]
    fn a_failed_delivery_gives_its_claims_back() {
        let (root, paths) = session();
        event(&paths, "m12345678", Priority::Next, 10, "an event");
        let (id, completion) = completion("b12345678", 5);
        // The log is a symlink: its append fails (O_NOFOLLOW).
        std::os::unix::fs::symlink(root.path().join("elsewhere"), paths.notifications_log())
            .unwrap();
        let mut leased = claim_events(&paths, &me()).unwrap();
        leased.push(
            claim_completion(&paths, &id, &completion, &me())
                .unwrap()
                .unwrap(),
        );
        assert_eq!(leased.len(), 2);
        assert!(leased.commit().is_err());

        assert!(!is_notified(&paths, &id, &completion));
        assert_eq!(
            peek_events(&paths).unwrap().len(),
            1,
            "the event is pending again"
        );

        fs::remove_file(paths.notifications_log()).unwrap();
        let mut leased = claim_events(&paths, &me()).unwrap();
        leased.push(
            claim_completion(&paths, &id, &completion, &me())
                .unwrap()
                .unwrap(),
        );
        assert_eq!(leased.commit().unwrap().len(), 2);
        assert!(is_notified(&paths, &id, &completion));
        assert!(
            claim_completion(&paths, &id, &completion, &me())
                .unwrap()
                .is_none()
        );
        assert!(
            claim_events(&paths, &me()).unwrap().is_empty(),
            "delivered once"
        );
        assert!(
            !paths.lease(&id, 5, 0).exists(),
            "a delivered completion keeps no lease"
        );
    }

    #[test]
    fn a_live_lease_holds_and_a_dropped_one_is_given_back() {
        let (_root, paths) = session();
        event(&paths, "m12345678", Priority::Next, 10, "an event");
        let (id, completion) = completion("b12345678", 5);
        let mut held = claim_events(&paths, &me()).unwrap();
        held.push(
            claim_completion(&paths, &id, &completion, &me())
                .unwrap()
                .unwrap(),
        );
        // Another reader (a live holder) gets nothing while the lease holds.
        let other = Holder::this_process(Duration::from_secs(60));
        assert!(claim_events(&paths, &other).unwrap().is_empty());
        assert!(
            claim_completion(&paths, &id, &completion, &other)
                .unwrap()
                .is_none()
        );
        drop(held);
        let again = claim_events(&paths, &other).unwrap();
        assert_eq!(again.len(), 1);
        let completion_again = claim_completion(&paths, &id, &completion, &other).unwrap();
        assert!(
            completion_again.is_some(),
            "a dropped lease is given back at once"
        );
    }

    #[test]
    fn a_reader_that_died_holding_notifications_leaves_them_deliverable_with_the_same_keys() {
        let (_root, paths) = session();
        event(&paths, "m12345678", Priority::Next, 10, "an event");
        let (id, completion) = completion("b12345678", 5);
        let dead = dead();
        let mut lost = claim_events(&paths, &dead).unwrap();
        lost.push(
            claim_completion(&paths, &id, &completion, &dead)
                .unwrap()
                .unwrap(),
        );
        let keys: Vec<_> = lost.notices().map(|n| n.key.clone()).collect();
        std::mem::forget(lost); // it died: nothing was given back

        let mut found = claim_events(&paths, &me()).unwrap();
        found.push(
            claim_completion(&paths, &id, &completion, &me())
                .unwrap()
                .unwrap(),
        );
        let delivered = found.commit().unwrap();
        let again: Vec<_> = delivered.iter().map(|n| n.key.clone()).collect();
        assert_eq!(again, keys, "the same notifications, with the same keys");
        assert_eq!(keys[1].as_deref(), Some("b12345678@5"));
        assert!(claim_events(&paths, &me()).unwrap().is_empty());
        assert!(
            claim_completion(&paths, &id, &completion, &me())
                .unwrap()
                .is_none()
        );
        assert!(
            !paths.lease(&id, 5, 1).exists(),
            "every generation is removed"
        );
    }
}
