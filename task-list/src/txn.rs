//! A write transaction: the list lock held, the reference's lock on every task file it reads
//! for writing, and all its writes committed at once through the list's write-ahead journal
//! (`wal`): one record appended and flushed (the commit point), then applied to the files
//! without waiting for their flush, so a multi-file change (an edge, a delete) is
//! all-or-nothing even if the writer is killed half way, and a write waits for one device
//! flush.
//!
//! A `.journal` left by an earlier version of this crate (a writer killed after its commit
//! point) is still finished by the next transaction: its changes go through the journal.
//! The reference reads only `{digits}.json`, so it ignores both.
//!
//! [`TaskList::write`] runs an operation in such a transaction, or, on PostgreSQL, in the
//! database's own.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::audit::AuditRecord;
use crate::backend::{Backend, StoreTxn};
use crate::entry::EntryFault;
use crate::error::{Error, Result};
use crate::fsutil::{self, Untrusted};
use crate::group::Shared;
use crate::id::TaskId;
use crate::lock::{DirLock, ListGuard};
use crate::record::Task;
use crate::snapshot::Snapshot;
use crate::store::{HIGH_WATER_MARK_FILE, TaskList};
use crate::wal::{FileChange, Wal, raises};

/// The journal an earlier version of this crate left while a multi-file commit was in flight
/// (a JSON array of [`FileChange`]s, renamed into place complete).
pub(crate) const JOURNAL_FILE: &str = ".journal";

/// The list locked for writing.
#[derive(Debug)]
pub(crate) struct Txn {
    pub(crate) list: TaskList,
    // Field order is drop order: task-file locks go before the list lock.
    file_locks: Vec<DirLock>,
    wal: Wal,
    guard: ListGuard,
    cache: HashMap<TaskId, Option<Task>>,
    changes: Vec<FileChange>,
    /// Where each staged file is in `changes`.
    staged: HashMap<String, usize>,
    audit: Vec<AuditRecord>,
}

/// What a transaction held before one writer's body ran on it, to go back to if the body
/// fails (see `group`).
#[derive(Debug)]
pub(crate) struct Savepoint {
    cache: HashMap<TaskId, Option<Task>>,
    changes: Vec<FileChange>,
    staged: HashMap<String, usize>,
    audit: usize,
    id_hint: u64,
}

impl TaskList {
    /// Runs `body` in a write transaction and commits it. `reference_list_lock`: the file
    /// store also takes the reference's list lock (create, reset, busy-checked claims, repair).
    ///
    /// On files, writers of this handle (and its clones) that arrive while another's
    /// transaction is open run their bodies in it, one after another, and share its commit and
    /// its one journal flush (`group`): a body must read the list through `txn` (a snapshot
    /// through [`StoreTxn::overlay`]), where the others' changes are.
    ///
    /// On PostgreSQL a transaction that fails on a serialization failure, a deadlock or a lost
    /// connection before it committed is run again from the start (bounded by
    /// [`crate::PgConfig::retries`], each retry logged at `warn`); `body` must therefore only
    /// change the world through the transaction (hooks run outside it).
    pub(crate) fn write<T: Send>(
        &self,
        reference_list_lock: bool,
        mut body: impl FnMut(&mut dyn StoreTxn) -> Result<T> + Send,
    ) -> Result<T> {
        match &self.backend {
            Backend::Files => self.group.write(
                || Ok(Box::new(Txn::begin(self, reference_list_lock)?)),
                reference_list_lock,
                false,
                body,
            ),
            Backend::Database(store) => {
                let mut value = None;
                store.write_erased(&mut |txn| {
                    value = Some(body(txn)?);
                    Ok(())
                })?;
                value.ok_or_else(|| Error::Internal("a committed write returned nothing".into()))
            }
        }
    }

    /// [`TaskList::write`] in a transaction of its own (on files, shared with no other
    /// writer): for a body that reads the list directory itself (`doctor --fix`, an import).
    pub(crate) fn write_alone<T: Send>(
        &self,
        reference_list_lock: bool,
        body: impl FnMut(&mut dyn StoreTxn) -> Result<T> + Send,
    ) -> Result<T> {
        match &self.backend {
            Backend::Files => self.group.write(
                || Ok(Box::new(Txn::begin(self, reference_list_lock)?)),
                reference_list_lock,
                true,
                body,
            ),
            Backend::Database(_) => self.write(reference_list_lock, body),
        }
    }
}

impl Txn {
    /// Locks the list. `reference_list_lock`: also take the reference's list lock
    /// (`.lock.lock`), which the reference takes for create, reset and busy-checked claims;
    /// other writes are protected, as in the reference, by the locks of the task files they write.
    pub(crate) fn begin(list: &TaskList, reference_list_lock: bool) -> Result<Self> {
        let guard = ListGuard::acquire(list.dir(), &list.config.lock, reference_list_lock)?;
        let mut txn = Self {
            list: list.clone(),
            file_locks: Vec::new(),
            wal: Wal::open(list, &guard)?,
            guard,
            cache: HashMap::new(),
            changes: Vec::new(),
            staged: HashMap::new(),
            audit: Vec::new(),
        };
        txn.replay_journal()?;
        Ok(txn)
    }

    /// What the transaction holds now, to [`Txn::rollback`] to.
    pub(crate) fn savepoint(&self) -> Savepoint {
        Savepoint {
            cache: self.cache.clone(),
            changes: self.changes.clone(),
            staged: self.staged.clone(),
            audit: self.audit.len(),
            id_hint: self.list.id_hint.load(Ordering::Acquire),
        }
    }

    /// Drops what was staged since `savepoint` (the locks taken since are kept until commit).
    pub(crate) fn rollback(&mut self, savepoint: Savepoint) {
        self.cache = savepoint.cache;
        self.changes = savepoint.changes;
        self.staged = savepoint.staged;
        self.audit.truncate(savepoint.audit);
        self.list
            .id_hint
            .store(savepoint.id_hint, Ordering::Release);
    }

    /// The contents staged for the file `name`: `None` if nothing is staged for it,
    /// `Some(None)` if its removal is.
    fn staged(&self, name: &str) -> Option<Option<&str>> {
        self.staged
            .get(name)
            .map(|&at| self.changes[at].contents.as_deref())
    }

    fn lock_file(&mut self, id: TaskId) -> Result<()> {
        let path = self.list.task_path(id);
        if !self.file_locks.iter().any(|l| l.protects(&path)) {
            self.file_locks.extend(self.guard.lock_file(&path)?);
        }
        Ok(())
    }

    fn stage(&mut self, name: String, contents: Option<String>) {
        match self.staged.get(&name) {
            Some(&at) => self.changes[at].contents = contents,
            None => {
                self.staged.insert(name.clone(), self.changes.len());
                self.changes.push(FileChange { name, contents });
            }
        }
    }

    /// Finishes the transaction of a writer of an earlier version that died after writing its
    /// `.journal`: its changes are committed through the write-ahead journal, then it is
    /// removed. Something at the journal's name that is not a regular file cannot be a journal
    /// (a journal is renamed into place): it is skipped with a warning (`doctor` names it). A
    /// journal over [`crate::StoreConfig::max_log_bytes`] refuses the write, as one that does
    /// not parse.
    fn replay_journal(&mut self) -> Result<()> {
        let dir = self.list.dir();
        let path = dir.join(JOURNAL_FILE);
        let bytes = match fsutil::read_untrusted(&path, self.list.config.max_log_bytes)? {
            Untrusted::Missing => return Ok(()),
            Untrusted::Refused(fault @ EntryFault::NotRegularFile { .. }) => {
                tracing::warn!(path = %path.display(), %fault, "skipping what stands at the journal's name");
                return Ok(());
            }
            Untrusted::Refused(fault) => return Err(Error::BadEntry { path, fault }),
            Untrusted::Found(bytes, _) => bytes,
        };
        // A journal is renamed into place complete, so one that does not parse cannot exist
        // unless something else wrote it: keep it for inspection and refuse to guess.
        let mut changes: Vec<FileChange> =
            serde_json::from_slice(&bytes).map_err(|e| Error::Corrupt {
                path: path.clone(),
                message: e.to_string(),
            })?;
        if let Some(outside) = changes.iter().find(|change| !change.is_in_list()) {
            return Err(Error::Corrupt {
                path,
                message: format!("journal names a file outside the list: {:?}", outside.name),
            });
        }
        let mut locks = Vec::new();
        for change in changes.iter().filter(|c| c.name != HIGH_WATER_MARK_FILE) {
            locks.extend(self.guard.lock_file(&dir.join(&change.name))?);
        }
        // The mark only ever rises: a journal older than the mark on disk (or one that names no
        // number) must not lower it, or a later create reuses an id (found with the list_dir
        // fuzz target).
        let mark = self.list.high_water_mark()?;
        changes.retain(|change| change.name != HIGH_WATER_MARK_FILE || raises(change, mark));
        tracing::warn!(list = %self.list.list_id(), files = changes.len(), "replaying the journal of an interrupted write");
        self.wal.commit(&changes, "")?;
        fsutil::remove_if_exists(&path)
    }
}

impl Shared for Txn {
    fn attempt(&mut self, body: &mut dyn FnMut(&mut dyn StoreTxn) -> Result<()>) -> Result<()> {
        let savepoint = self.savepoint();
        let done = body(self);
        if done.is_err() {
            self.rollback(savepoint);
        }
        done
    }
}

impl StoreTxn for Txn {
    /// Reads a task (cached for the rest of the transaction, including its own writes).
    fn get(&mut self, id: TaskId) -> Result<Option<&Task>> {
        if !self.cache.contains_key(&id) {
            let task = self.list.get(id)?;
            self.cache.insert(id, task);
        }
        Ok(self.cache.get(&id).and_then(Option::as_ref))
    }

    /// Takes the reference's lock on a task file (held until commit) and reads the task fresh.
    /// `None` if the task does not exist.
    fn lock(&mut self, id: TaskId) -> Result<Option<Task>> {
        self.lock_file(id)?;
        let task = match self.staged.contains_key(&id.file_name()) {
            true => self.cache.get(&id).cloned().flatten(),
            false => self.list.read_task(&self.list.task_path(id))?,
        };
        self.cache.insert(id, task.clone());
        Ok(task)
    }

    /// Stages a task's new contents. Existing tasks must have been read through [`Txn::lock`].
    fn save(&mut self, task: &Task) -> Result<()> {
        self.stage(task.id.file_name(), Some(task.to_file_json()));
        self.cache.insert(task.id, Some(task.clone()));
        Ok(())
    }

    /// Stages the removal of a task file (locking it first).
    fn remove(&mut self, id: TaskId) -> Result<()> {
        self.lock_file(id)?;
        // A directory at a task's name holds no task and cannot be unlinked: a journal that
        // removed it would fail at every replay. It is left for `doctor` to name.
        let path = self.list.task_path(id);
        if std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir()) {
            tracing::warn!(path = %path.display(), "a directory at a task's name is left in place");
            return Ok(());
        }
        self.stage(id.file_name(), None);
        self.cache.insert(id, None);
        Ok(())
    }

    /// Raises the high-water mark to at least `id` (never lowers it, on disk or as staged).
    fn raise_high_water_mark(&mut self, id: u64) -> Result<()> {
        let staged = self
            .staged(HIGH_WATER_MARK_FILE)
            .flatten()
            .and_then(|mark| mark.parse::<u64>().ok())
            .unwrap_or(0);
        if self.list.high_water_mark()?.max(staged) < id {
            self.stage(HIGH_WATER_MARK_FILE.to_string(), Some(id.to_string()));
        }
        Ok(())
    }

    /// Queues an audit record, written at commit.
    fn record(&mut self, record: AuditRecord) {
        self.audit.push(record);
    }

    /// The first call on a handle scans the directory. Later calls start from the highest id
    /// seen and probe upwards: every id above the high-water mark up to the highest file exists
    /// (creates are sequential and a delete raises the mark to the deleted id, here and in the
    /// reference), so the first missing file above max(hint, mark) is the answer.
    fn next_id(&mut self) -> Result<TaskId> {
        let list = &self.list;
        let mut highest = match list.id_hint.load(Ordering::Acquire) {
            0 => fsutil::task_ids(list.dir())?
                .last()
                .map_or(0, |id| id.get()),
            hint => hint,
        }
        .max(list.high_water_mark()?);
        while highest < TaskId::MAX
            && fsutil::exists(&list.dir().join(format!("{}.json", highest + 1)))?
        {
            highest += 1;
        }
        // The mark is read from a file anyone can write: at the largest id there is no next one
        // (an overflow panic, then an id no reader parses, before; found with the list_dir fuzz
        // target).
        if highest >= TaskId::MAX {
            return Err(Error::Corrupt {
                path: list.dir().join(HIGH_WATER_MARK_FILE),
                message: format!("no task id is left after {highest}"),
            });
        }
        let next = TaskId::new(highest + 1)?;
        list.id_hint.store(next.get(), Ordering::Release);
        Ok(next)
    }

    /// The ids on disk, with what is staged: created files in, removed ones out.
    fn task_ids(&mut self) -> Result<Vec<TaskId>> {
        let mut ids = fsutil::task_ids(self.list.dir())?;
        for change in &self.changes {
            let Some(id) = TaskId::from_file_name(&change.name) else {
                continue;
            };
            match (&change.contents, ids.binary_search(&id)) {
                (Some(_), Err(at)) => ids.insert(at, id),
                (None, Ok(at)) => {
                    ids.remove(at);
                }
                _ => {}
            }
        }
        Ok(ids)
    }

    /// `snapshot` with the tasks this transaction has staged in place of their files.
    fn overlay(&self, mut snapshot: Snapshot) -> Snapshot {
        for change in &self.changes {
            let Some(id) = TaskId::from_file_name(&change.name) else {
                continue;
            };
            match self.cache.get(&id) {
                Some(Some(task)) => {
                    snapshot.tasks.insert(id, task.clone());
                }
                _ => {
                    snapshot.tasks.remove(&id);
                }
            }
        }
        snapshot
    }

    /// Commits the staged changes and the audit records through the journal (see the
    /// module's documentation), then releases the locks.
    fn commit(mut self: Box<Self>) -> Result<()> {
        if self.changes.is_empty() && self.audit.is_empty() {
            return Ok(());
        }
        let lines: Vec<String> = self
            .audit
            .iter()
            .map(|record| serde_json::to_string(record).unwrap_or_default())
            .collect();
        let changes = std::mem::take(&mut self.changes);
        self.wal.commit(&changes, &lines.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::StoreConfig;
    use crate::api::CreateRequest;

    #[test]
    fn a_high_water_mark_at_the_largest_id_refuses_a_create_instead_of_overflowing() {
        // fuzz/regressions/list_dir/high-water-mark-at-u64-max
        let root = tempfile::tempdir().unwrap();
        let list = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        std::fs::write(list.dir().join(HIGH_WATER_MARK_FILE), u64::MAX.to_string()).unwrap();
        assert_no_id_is_left(&list);
    }

    fn assert_no_id_is_left(list: &TaskList) {
        let refused = list.create(&CreateRequest::new("a", "")).unwrap_err();
        assert!(matches!(refused, Error::Corrupt { .. }), "{refused}");
        assert!(
            refused.to_string().contains("no task id is left"),
            "{refused}"
        );
    }

    fn write_journal(list: &TaskList, changes: &[FileChange]) {
        let journal = serde_json::to_vec(changes).unwrap();
        std::fs::write(list.dir().join(JOURNAL_FILE), journal).unwrap();
    }

    #[test]
    fn a_create_below_the_largest_id_makes_an_id_readers_parse_and_then_stops() {
        // fuzz/regressions/list_dir/high-water-mark-one-below-u64-max: a mark of
        // 18446744073709551614 made id u64::MAX, which no reader parsed.
        let root = tempfile::tempdir().unwrap();
        let list = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        let mark = list.dir().join(HIGH_WATER_MARK_FILE);
        std::fs::write(&mark, (TaskId::MAX - 1).to_string()).unwrap();
        let last = list.create(&CreateRequest::new("last", "")).unwrap().task;
        assert_eq!(last.id.get(), TaskId::MAX);
        assert_eq!(list.get(last.id).unwrap().unwrap().subject, "last");
        assert_no_id_is_left(&list);
        std::fs::write(&mark, (u64::MAX - 1).to_string()).unwrap();
        assert_no_id_is_left(&list);
    }

    #[test]
    fn a_leftover_journal_never_lowers_the_high_water_mark() {
        // fuzz/regressions/list_dir/journal-lowers-the-high-water-mark
        let root = tempfile::tempdir().unwrap();
        let list = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        for subject in ["one", "two"] {
            list.create(&CreateRequest::new(subject, "")).unwrap();
        }
        std::fs::write(list.dir().join(HIGH_WATER_MARK_FILE), "6").unwrap();
        // A journal from before the mark reached 6, that would set it to 3 (or remove it).
        for stale in [Some("3".to_owned()), None, Some("not a number".to_owned())] {
            let changes = [
                FileChange {
                    name: "2.json".into(),
                    contents: None,
                },
                FileChange {
                    name: HIGH_WATER_MARK_FILE.into(),
                    contents: stale,
                },
            ];
            write_journal(&list, &changes);
            let created = list.create(&CreateRequest::new("next", "")).unwrap().task;
            assert!(
                created.id.get() > 6,
                "id {} reuses one at or below the mark",
                created.id
            );
            assert!(list.high_water_mark().unwrap() >= 6);
            assert!(!list.dir().join(JOURNAL_FILE).exists());
        }
        // A journal that raises the mark is applied.
        let raise = [FileChange {
            name: HIGH_WATER_MARK_FILE.into(),
            contents: Some("40".into()),
        }];
        write_journal(&list, &raise);
        assert_eq!(
            list.create(&CreateRequest::new("after", ""))
                .unwrap()
                .task
                .id
                .get(),
            41
        );
    }

    #[test]
    fn a_committed_journal_is_replayed_by_the_next_writer() {
        let root = tempfile::tempdir().unwrap();
        let list = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        for subject in ["one", "two"] {
            list.create(&CreateRequest::new(subject, "")).unwrap();
        }
        let one = TaskId::new(1).unwrap();
        let mut renamed = list.get(one).unwrap().unwrap();
        renamed.subject = "from the journal".into();
        // A writer that died after its journal was durable and before it renamed anything.
        let changes = [
            FileChange {
                name: "1.json".into(),
                contents: Some(renamed.to_file_json()),
            },
            FileChange {
                name: "2.json".into(),
                contents: None,
            },
        ];
        write_journal(&list, &changes);

        list.create(&CreateRequest::new("three", "")).unwrap();
        assert_eq!(list.get(one).unwrap().unwrap().subject, "from the journal");
        assert!(list.get(TaskId::new(2).unwrap()).unwrap().is_none());
        assert!(!list.dir().join(JOURNAL_FILE).exists());
    }
}
