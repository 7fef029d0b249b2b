//! The [`TaskList`] handle: one list (a directory, or a list in a database), its configuration
//! and the acting agent; and the primitive reads and appends every operation builds on (a
//! task, every task, the high-water mark, the audit log), on either store.
//!
//! The operations are `impl TaskList` blocks of higher modules (the write transaction in
//! `txn`, then `ops`, `update`, `ready`, …), which call down into this one, never the other
//! way.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use crate::audit::{AUDIT_LOG_FILE, AuditRecord};
use crate::backend::{Backend, DatabaseStore};
use crate::cache::{self, CachedTask, FileStamp, SettleRule, TaskCache};
use crate::config::StoreConfig;
use crate::entry::{EntryFault, FileProblem};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{self, Untrusted};
use crate::group::Group;
use crate::id::{TaskId, sanitize_name};
use crate::lock::{DirLock, LIST_LOCK_FILE, lock_dir_for};
use crate::pg::{PgEnv, PgStore};
use crate::record::Task;
use crate::snapshot::Snapshot;

/// The high-water mark file: the highest id ever issued, as a plain integer.
pub(crate) const HIGH_WATER_MARK_FILE: &str = ".highwatermark";

/// A larger high-water mark file is not read (an id has at most 16 digits).
pub(crate) const HIGH_WATER_MARK_MAX_BYTES: u64 = 64;

/// Who is acting: recorded in the audit log, used for auto-ownership and hook input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The agent's (or person's) name.
    pub name: String,
    /// The team it belongs to, if any.
    pub team: Option<String>,
}

impl Actor {
    /// An actor outside any team.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            team: None,
        }
    }
}

impl Default for Actor {
    fn default() -> Self {
        Self::new("user")
    }
}

/// A handle on one task list: `{lists root}/{list id}/`.
///
/// Cheap to clone; every operation opens, locks and closes what it needs, so any number of
/// handles in any number of processes can work on the same list.
#[derive(Debug, Clone)]
pub struct TaskList {
    dir: PathBuf,
    list_id: String,
    pub(crate) config: StoreConfig,
    pub(crate) actor: Actor,
    /// The highest id this handle has seen issued (0: not scanned yet); see `next_id`.
    pub(crate) id_hint: Arc<AtomicU64>,
    /// Tasks parsed by earlier snapshots, reused while their files are unchanged.
    cache: Arc<TaskCache>,
    /// The transactions this handle's writers share (files only; see `group`).
    pub(crate) group: Arc<Group>,
    /// Where the list lives.
    pub(crate) backend: Backend,
}

impl TaskList {
    /// Opens (creating if needed) the list `list_id` (sanitised) under `lists_root`.
    pub fn open(lists_root: impl AsRef<Path>, list_id: &str, config: StoreConfig) -> Result<Self> {
        let list_id = sanitize_name(list_id)?;
        let dir = lists_root.as_ref().join(&list_id);
        std::fs::create_dir_all(&dir).at("create", &dir)?;
        let lock_file = dir.join(LIST_LOCK_FILE);
        // Never followed nor waited on (a FIFO opened for writing blocks until a reader comes).
        // Something other than a file there is left for `doctor` to name: reads do not need
        // the lock, and writes refuse to take it.
        let created = task_output::open::NoFollow::write()
            .append()
            .create()
            .mode(fsutil::LIST_FILE_MODE)
            .open(&lock_file);
        match created {
            Ok(_) => {}
            Err(
                e @ (task_output::OutputError::SymlinkRefused { .. }
                | task_output::OutputError::NotRegularFile { .. }),
            ) => {
                tracing::warn!(path = %lock_file.display(), error = %e, "the list's lock file is not a regular file");
            }
            Err(e) => return Err(std::io::Error::from(e)).at("create", &lock_file),
        }
        let list = Self {
            dir,
            list_id,
            config,
            actor: Actor::default(),
            id_hint: Arc::default(),
            cache: Arc::default(),
            group: Arc::default(),
            backend: Backend::Files,
        };
        // A write interrupted by a kill or a machine crash is finished before anything is read.
        list.recover_journal();
        Ok(list)
    }

    /// Opens the list `list_id` (sanitised) in the PostgreSQL database `conninfo` names, as
    /// libpq would: a `postgres://…` / `postgresql://…` URL or a `key=value` string
    /// (`host=/run/postgresql dbname=tasks`), what it leaves out taken from the process's
    /// `PGHOST`, `PGPORT`, `PGUSER`, `PGDATABASE`, `PGPASSWORD`, `PGSSLMODE`,
    /// `PGSSLROOTCERT` and `~/.pgpass` (`PGPASSFILE`); TLS per `sslmode`, never on a Unix
    /// socket. The schema is created or migrated at connect. Anything else is
    /// [`Error::InvalidStore`]; the file store is opened with [`TaskList::open`].
    pub fn connect(conninfo: &str, list_id: &str, config: StoreConfig) -> Result<Self> {
        Self::connect_with_env(conninfo, list_id, config, &PgEnv::from_env())
    }

    /// [`TaskList::connect`] in the libpq environment `env` instead of the process's.
    pub fn connect_with_env(
        conninfo: &str,
        list_id: &str,
        config: StoreConfig,
        env: &PgEnv,
    ) -> Result<Self> {
        let list_id = sanitize_name(list_id)?;
        let store = PgStore::connect(conninfo, env, &list_id, config.pg.clone(), config.durable)?;
        Ok(Self {
            dir: PathBuf::new(),
            list_id,
            config,
            actor: Actor::default(),
            id_hint: Arc::default(),
            cache: Arc::default(),
            group: Arc::default(),
            backend: Backend::Database(Arc::new(store)),
        })
    }

    /// The same list, acting as `actor`.
    pub fn with_actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// The list directory (empty for a list in a database).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The (sanitised) list id.
    pub fn list_id(&self) -> &str {
        &self.list_id
    }

    /// The configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// The acting agent.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    /// The database store, if the list is in one.
    pub(crate) fn pg(&self) -> Option<&dyn DatabaseStore> {
        match &self.backend {
            Backend::Files => None,
            Backend::Database(store) => Some(store.as_ref()),
        }
    }

    pub(crate) fn task_path(&self, id: TaskId) -> PathBuf {
        self.dir.join(id.file_name())
    }

    /// Reads one task. A file that does not parse is read again under the reference's lock on
    /// it (the reference writes in place, so it may have been caught half written) before it is
    /// called corrupt, if the reference's locks are on; this crate's own writes never leave a
    /// file half written. An entry that is not a regular file, or is larger than
    /// [`StoreConfig::max_task_file_bytes`], is [`Error::BadEntry`] (never opened in a way that
    /// could block, nor read beyond the limit).
    pub fn get(&self, id: TaskId) -> Result<Option<Task>> {
        if let Some(pg) = self.pg() {
            return pg.get(id);
        }
        let path = self.task_path(id);
        match self.read_task(&path) {
            Err(Error::Corrupt { .. }) if self.config.lock.reference_locks => {
                let _lock = DirLock::acquire(lock_dir_for(&path), &self.config.lock)?;
                self.read_task(&path)
            }
            other => other,
        }
    }

    /// Reads and parses one task file; `Ok(None)` if it does not exist.
    pub(crate) fn read_task(&self, path: &Path) -> Result<Option<Task>> {
        fsutil::read_untrusted(path, self.config.max_task_file_bytes)?
            .into_result(path)?
            .map(|bytes| parse_task(path, &bytes))
            .transpose()
    }

    /// Reads every task. Malformed files are reported in [`Snapshot::problems`], never fatal.
    ///
    /// Each file is `stat`ed; one unchanged since this handle (or a clone of it, or, through
    /// the list's cache file, another process) last parsed it is taken from the cache instead
    /// of being read again (see [`StoreConfig::cache_min_age`] and [`StoreConfig::cache_file`]). Large lists are handled by several threads (one per
    /// core, at most 8).
    pub fn snapshot(&self) -> Result<Snapshot> {
        if let Some(pg) = self.pg() {
            return pg.snapshot();
        }
        let shared = self.shared_snapshot()?;
        Ok(Snapshot {
            tasks: shared
                .tasks
                .iter()
                .map(|task| (task.id, Task::clone(task)))
                .collect(),
            problems: shared.problems,
        })
    }

    /// [`TaskList::snapshot`], with the tasks shared with the cache rather than copied.
    pub(crate) fn shared_snapshot(&self) -> Result<SharedSnapshot> {
        if let Some(pg) = self.pg() {
            let snapshot = pg.snapshot()?;
            return Ok(SharedSnapshot {
                tasks: snapshot.tasks.into_values().map(Arc::new).collect(),
                problems: snapshot.problems,
            });
        }
        const PER_THREAD_MIN: usize = 512;
        let started = SystemTime::now();
        let files = fsutil::task_files(&self.dir)?;
        let ids = files.ids;
        let cache_dir = self.config.cache_file.then_some(self.dir.as_path());
        let cache_limit = cache::max_bytes(ids.len(), self.config.max_task_file_bytes);
        let cache = self.cache.current_or_load(cache_dir, cache_limit);
        // Asking for the core count reads cgroup files: not worth it for a small list.
        let threads = match ids.len() > PER_THREAD_MIN {
            true => std::thread::available_parallelism()
                .map_or(1, usize::from)
                .clamp(1, 8)
                .min(ids.len().div_ceil(PER_THREAD_MIN)),
            false => 1,
        };
        let chunk = ids.len().div_ceil(threads).max(1);
        let dir = fsutil::open_dir(&self.dir)?;
        let min_age = match fsutil::on_local_fs(&dir) {
            true => self
                .config
                .cache_min_age_local
                .min(self.config.cache_min_age),
            false => self.config.cache_min_age,
        };
        let rule = SettleRule { started, min_age };
        let dir = OwnedFd::from(dir);
        let parts: Vec<Result<Part>> = std::thread::scope(|scope| {
            let (cache, dir) = (cache.as_slice(), &dir);
            let handles: Vec<_> = ids
                .chunks(chunk)
                .skip(1)
                .map(|ids| scope.spawn(move || self.read_tasks(ids, dir, cache, rule)))
                .collect();
            let first = self.read_tasks(
                ids.chunks(chunk).next().unwrap_or_default(),
                dir,
                cache,
                rule,
            );
            std::iter::once(first)
                .chain(handles.into_iter().map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(std::io::Error::other("a reader thread panicked")).at("read", &self.dir)
                    })
                }))
                .collect()
        });
        let mut snapshot = SharedSnapshot::default();
        let mut cached = Vec::with_capacity(cache.len());
        for part in parts {
            let part = part?;
            snapshot.tasks.extend(part.tasks);
            snapshot.problems.extend(part.problems);
            cached.extend(part.cached);
        }
        snapshot.problems.extend(
            files
                .invalid
                .into_iter()
                .map(|name| FileProblem::skipped(name, EntryFault::InvalidId)),
        );
        self.cache.replace(&cache, cached, cache_dir);
        Ok(snapshot)
    }

    /// Reads `ids` (sorted) of the list directory `dir`: a task whose file still has its
    /// cached stamp is taken from `cache`; every other file is read.
    fn read_tasks(
        &self,
        ids: &[TaskId],
        dir: &OwnedFd,
        cache: &[CachedTask],
        rule: SettleRule,
    ) -> Result<Part> {
        let mut part = Part::default();
        for &id in ids {
            match cache::find(cache, id) {
                Some(cached) if self.unchanged(dir, id, cached.stamp)? => {
                    part.add(Arc::clone(&cached.task), Some(cached.stamp));
                }
                _ => self.read_uncached(id, rule, &mut part)?,
            }
        }
        Ok(part)
    }

    /// Whether task `id`'s file in the list directory `dir` still has the stamp `cached`.
    fn unchanged(&self, dir: &OwnedFd, id: TaskId, cached: FileStamp) -> Result<bool> {
        match FileStamp::at(dir, &id.file_name()) {
            Ok(stamp) => Ok(stamp == Some(cached)),
            Err(e) => Err(e).at("stat", &self.task_path(id)),
        }
    }

    /// Reads one task file into `part`, to be cached if it has settled; an entry that is not
    /// read goes into `part`'s problems.
    fn read_uncached(&self, id: TaskId, rule: SettleRule, part: &mut Part) -> Result<()> {
        let path = self.task_path(id);
        let (bytes, stat) = match fsutil::read_untrusted(&path, self.config.max_task_file_bytes)? {
            Untrusted::Found(bytes, stat) => (bytes, stat),
            Untrusted::Missing => return Ok(()),
            Untrusted::Refused(fault) => {
                part.problems
                    .push(FileProblem::skipped(id.file_name(), fault));
                return Ok(());
            }
        };
        // A file that does not parse may have been caught half written in place by the
        // reference: `get` reads it again under its lock. Whatever that finds is not cached.
        let (task, stamp) = match parse_task(&path, &bytes) {
            Ok(task) => (Some(task), FileStamp::of(&stat)),
            Err(_) => match self.get(id) {
                Ok(task) => (task, None),
                Err(Error::Corrupt { message, .. }) => {
                    let fault = EntryFault::Malformed { message };
                    part.problems
                        .push(FileProblem::skipped(id.file_name(), fault));
                    (None, None)
                }
                Err(Error::BadEntry { fault, .. }) => {
                    part.problems
                        .push(FileProblem::skipped(id.file_name(), fault));
                    (None, None)
                }
                Err(e) => return Err(e),
            },
        };
        if let Some(task) = task {
            let settled = stamp.filter(|s| rule.settled(s));
            part.add(Arc::new(task), settled);
        }
        Ok(())
    }

    /// The high-water mark: 0 when the file is missing and, with a warning, when it is not
    /// read or holds no number. A number beyond [`TaskId::MAX`] (which no id the list issued
    /// can have made) counts as [`TaskId::MAX`]: creates are refused ("no task id is left")
    /// until `doctor` has been looked at, never given an id no reader parses.
    pub fn high_water_mark(&self) -> Result<u64> {
        if let Some(pg) = self.pg() {
            return pg.high_water_mark();
        }
        let (mark, fault) = self.high_water_mark_on_disk()?;
        if let Some(fault) = fault {
            tracing::warn!(list = %self.list_id, %fault, mark, "the high-water mark is not an id");
        }
        Ok(mark)
    }

    /// The high-water mark in the list directory as [`TaskList::high_water_mark`] takes it,
    /// and why the file is not a valid mark, if it is not.
    pub(crate) fn high_water_mark_on_disk(&self) -> Result<(u64, Option<EntryFault>)> {
        let path = self.dir.join(HIGH_WATER_MARK_FILE);
        let bytes = match fsutil::read_untrusted(&path, HIGH_WATER_MARK_MAX_BYTES)? {
            Untrusted::Missing => return Ok((0, None)),
            Untrusted::Refused(fault) => return Ok((0, Some(fault))),
            Untrusted::Found(bytes, _) => bytes,
        };
        let text = String::from_utf8_lossy(&bytes);
        let text = text.trim();
        let digits = !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
        Ok(match text.parse::<u64>() {
            Ok(mark) if mark <= TaskId::MAX => (mark, None),
            _ if digits => (
                TaskId::MAX,
                Some(EntryFault::Malformed {
                    message: format!("{text} is beyond the largest task id, {}", TaskId::MAX),
                }),
            ),
            _ => (
                0,
                Some(EntryFault::Malformed {
                    message: format!("{text:?} is not a number"),
                }),
            ),
        })
    }

    /// Reads the audit log (oldest first). Lines that do not parse (a torn last line after a
    /// crash) are reported, not fatal; so is a log that is not a regular file or is larger than
    /// [`crate::StoreConfig::max_log_bytes`] (then nothing of it is read).
    pub fn audit_log(&self) -> Result<(Vec<AuditRecord>, Vec<FileProblem>)> {
        if let Some(pg) = self.pg() {
            return pg.audit_log();
        }
        let mut records = Vec::new();
        let problems = self.each_audit_record(|record| records.push(record))?;
        Ok((records, problems))
    }

    /// Calls `each` on every record of the file store's audit log, oldest first, holding one
    /// line at a time; returns what could not be read, as [`TaskList::audit_log`].
    pub(crate) fn each_audit_record(
        &self,
        each: impl FnMut(AuditRecord),
    ) -> Result<Vec<FileProblem>> {
        let path = self.dir().join(AUDIT_LOG_FILE);
        fsutil::each_json_line(&path, AUDIT_LOG_FILE, self.config.max_log_bytes, each)
    }
}

/// Every task of a list, shared with the handle's cache.
#[derive(Debug, Default)]
pub(crate) struct SharedSnapshot {
    /// The tasks, sorted by id.
    pub(crate) tasks: Vec<Arc<Task>>,
    /// Malformed or torn files, by name.
    pub(crate) problems: Vec<FileProblem>,
}

/// One reader thread's share of a snapshot, and the cache entries for its tasks.
#[derive(Debug, Default)]
struct Part {
    tasks: Vec<Arc<Task>>,
    problems: Vec<FileProblem>,
    cached: Vec<CachedTask>,
}

impl Part {
    /// Adds a task (the next by id); `stamp`: the file's, if the task may be cached.
    fn add(&mut self, task: Arc<Task>, stamp: Option<FileStamp>) {
        if let Some(stamp) = stamp {
            self.cached.push(CachedTask {
                stamp,
                task: Arc::clone(&task),
            });
        }
        self.tasks.push(task);
    }
}

/// Parses the contents of the task file `path`, which must hold the task its name says.
fn parse_task(path: &Path, bytes: &[u8]) -> Result<Task> {
    let task = Task::from_file_json(bytes).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(TaskId::from_file_name);
    if named != Some(task.id) {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: format!("file name does not match its id {:?}", task.id.to_string()),
        });
    }
    Ok(task)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::MetadataExt;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::api::CreateRequest;

    const MIN_AGE: Duration = Duration::from_millis(10);

    /// Waits until `path` was last changed more than `MIN_AGE` ago (with a margin).
    fn settle(path: &Path) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let meta = std::fs::symlink_metadata(path).unwrap();
        let changed =
            SystemTime::UNIX_EPOCH + Duration::new(meta.ctime() as u64, meta.ctime_nsec() as u32);
        while changed + 3 * MIN_AGE > SystemTime::now() {
            assert!(
                Instant::now() < deadline,
                "{} never settled",
                path.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn warm_snapshot_reuses_settled_files_and_rereads_changed_ones() {
        let root = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            cache_min_age: MIN_AGE,
            durable: false,
            ..StoreConfig::default()
        };
        let list = TaskList::open(root.path(), "l", config).unwrap();
        for subject in ["one", "two", "six"] {
            list.create(&CreateRequest::new(subject, "")).unwrap();
        }
        let path = |n: u64| list.task_path(TaskId::new(n).unwrap());
        (1..=3).for_each(|n| settle(&path(n)));
        let first = list.shared_snapshot().unwrap();
        assert_eq!(list.cache.current().len(), 3);
        let second = list.shared_snapshot().unwrap();
        assert!((0..3).all(|i| Arc::ptr_eq(&first.tasks[i], &second.tasks[i])));

        // Rewritten in place, same size: read again, and not cached while it is young. "Young"
        // is seen through a handle (sharing the cache) whose minimum age is an hour, so no
        // scheduling delay between the write and the snapshot can make the file old enough.
        let mut young = list.clone();
        young.config.cache_min_age = Duration::from_secs(3_600);
        let text = std::fs::read_to_string(path(2)).unwrap();
        std::fs::write(path(2), text.replace("\"two\"", "\"TWO\"")).unwrap();
        let third = young.shared_snapshot().unwrap();
        assert_eq!(third.tasks[1].subject, "TWO");
        assert!(Arc::ptr_eq(&first.tasks[0], &third.tasks[0]));
        assert!(Arc::ptr_eq(&first.tasks[2], &third.tasks[2]));
        assert_eq!(list.cache.current().len(), 2);
        let fourth = young.shared_snapshot().unwrap();
        assert!(!Arc::ptr_eq(&third.tasks[1], &fourth.tasks[1]));

        // Once it has settled, it is cached again.
        settle(&path(2));
        let fifth = list.shared_snapshot().unwrap();
        assert_eq!(list.cache.current().len(), 3);
        assert!(Arc::ptr_eq(
            &fifth.tasks[1],
            &list.shared_snapshot().unwrap().tasks[1]
        ));
    }
}
