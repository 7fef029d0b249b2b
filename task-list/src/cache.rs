//! The per-handle cache of parsed task files that makes a warm [`crate::TaskList::snapshot`]
//! cost one `stat` per file instead of an open, a read and a parse.
//!
//! Each cached task is kept with the [`FileStamp`] of the file it was parsed from (device,
//! inode, size, mtime and ctime with nanoseconds) and is served again only while the file's
//! current stamp is identical. Every change of a file moves its ctime, which no process can
//! set back, and a replaced file (our writes rename a new inode into place) differs in inode
//! and ctime too. The one blind spot of a stamp is timestamp granularity: two changes within
//! one tick of the filesystem's clock can leave the same size, mtime and ctime (the reference
//! rewrites files in place). So a file is only cached once its last change is older than
//! [`crate::StoreConfig::cache_min_age`] at the moment its stamp was taken: any later change
//! then gets a later ctime, and a file changed more recently than that is simply read again on
//! every snapshot until it has settled (the "racy clean" rule of git's index).
//!
//! The cache also outlives the process: it is kept in the list directory as [`CACHE_FILE`]
//! (when [`crate::StoreConfig::cache_file`] is on), loaded by a handle's first snapshot and
//! written again, atomically and without fsync, whenever a snapshot changed it. Its entries are
//! served under the same stamp check, so a cache file that is stale, torn by a crash, from
//! another version or unreadable costs a re-read and never a wrong task: such a file is ignored
//! (and replaced by the next snapshot that caches anything).

use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, FileType, Stat};
use serde::{Deserialize, Serialize};

use crate::fsutil;
use crate::id::TaskId;
use crate::record::Task;

/// The cache of a list's parsed tasks, kept for the next process (the reference reads only
/// `{digits}.json`, so it ignores this file).
pub(crate) const CACHE_FILE: &str = ".snapshot-cache";

/// The layout of [`CACHE_FILE`]; a file of another version is ignored.
const CACHE_VERSION: u32 = 1;

/// A larger cache file is never read (about 2 500 bytes a task: 200 000 tasks); see [`max_bytes`].
pub(crate) const CACHE_MAX_BYTES: u64 = 512 << 20;

/// What identifies one version of a regular file's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    /// The stamp of a regular file's `stat`; `None` for anything else (never cached).
    pub(crate) fn of(stat: &Stat) -> Option<Self> {
        let regular = FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile;
        // The field types differ between platforms and rustix backends.
        #[allow(clippy::useless_conversion)]
        let time = |secs, nanos| (i64::from(secs), i64::try_from(nanos).unwrap_or(-1));
        regular.then(|| Self {
            dev: stat.st_dev,
            ino: stat.st_ino,
            size: u64::try_from(stat.st_size).unwrap_or(u64::MAX),
            mtime: time(stat.st_mtime, stat.st_mtime_nsec),
            ctime: time(stat.st_ctime, stat.st_ctime_nsec),
        })
    }

    /// The stamp of the entry `name` in the directory `dir` (not following a symlink): `None`
    /// if it is missing or not a regular file. One `statx` relative to the open directory,
    /// without walking the directory's path again for every file.
    pub(crate) fn at(dir: &OwnedFd, name: &str) -> std::io::Result<Option<Self>> {
        match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Self::of(&stat)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether the file's last change happened at least `min_age` before `stamped_at` (a time
    /// taken before the stamp was), so that any later change is bound to move its ctime.
    pub(crate) fn settled(&self, stamped_at: SystemTime, min_age: Duration) -> bool {
        let (secs, nanos) = self.ctime;
        let changed = u64::try_from(secs)
            .ok()
            .zip(u32::try_from(nanos).ok())
            .and_then(|(secs, nanos)| {
                SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs, nanos))
            });
        match (changed, stamped_at.checked_sub(min_age)) {
            (Some(changed), Some(limit)) => changed < limit,
            _ => false,
        }
    }
}

/// When a snapshot began, and how long before that a file's last change must lie for its
/// parsed task to be cached.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SettleRule {
    /// Taken before any file was stamped.
    pub(crate) started: SystemTime,
    /// The filesystem's racy window ([`crate::StoreConfig::cache_min_age`] or its local value).
    pub(crate) min_age: Duration,
}

impl SettleRule {
    /// Whether the file stamped `stamp` may be cached.
    pub(crate) fn settled(&self, stamp: &FileStamp) -> bool {
        stamp.settled(self.started, self.min_age)
    }
}

/// A parsed task and the stamp of the file it came from.
#[derive(Debug, Clone)]
pub(crate) struct CachedTask {
    pub(crate) stamp: FileStamp,
    pub(crate) task: Arc<Task>,
}

/// The cached tasks of one list, sorted by id, shared by a handle and its clones.
#[derive(Default)]
pub(crate) struct TaskCache {
    state: Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    entries: Arc<Vec<CachedTask>>,
    /// Whether the cache file has been consulted (once per handle).
    loaded: bool,
}

/// [`CACHE_FILE`] as written.
#[derive(Serialize)]
struct SavedCache<'a> {
    version: u32,
    entries: Vec<(FileStamp, &'a Task)>,
}

/// [`CACHE_FILE`] as read.
#[derive(Deserialize)]
struct LoadedCache {
    version: u32,
    entries: Vec<(FileStamp, Task)>,
}

impl std::fmt::Debug for TaskCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskCache")
            .field("tasks", &self.current().len())
            .finish()
    }
}

impl TaskCache {
    /// The cached tasks, for a snapshot to consult.
    pub(crate) fn current(&self) -> Arc<Vec<CachedTask>> {
        Arc::clone(&self.lock().entries)
    }

    /// The cached tasks; on a handle's first call, those of `dir`'s cache file if there is one
    /// (`None`: no cache file) of at most `max_bytes` ([`max_bytes`]).
    pub(crate) fn current_or_load(
        &self,
        dir: Option<&Path>,
        max_bytes: u64,
    ) -> Arc<Vec<CachedTask>> {
        let mut state = self.lock();
        if !state.loaded {
            state.loaded = true;
            if let Some(dir) = dir {
                state.entries = Arc::new(load(dir, max_bytes));
            }
        }
        Arc::clone(&state.entries)
    }

    /// Replaces the cache after a snapshot (entries sorted by id), and rewrites `dir`'s cache
    /// file if the entries differ from `previous` (what the snapshot started from). Every entry
    /// is checked against its file's stamp before use, so whichever of two concurrent
    /// snapshots stores last, the cache stays right.
    pub(crate) fn replace(
        &self,
        previous: &[CachedTask],
        entries: Vec<CachedTask>,
        dir: Option<&Path>,
    ) {
        let changed = previous.len() != entries.len()
            || previous
                .iter()
                .zip(&entries)
                .any(|(a, b)| a.stamp != b.stamp || !Arc::ptr_eq(&a.task, &b.task));
        if let Some(dir) = dir.filter(|_| changed) {
            save(dir, &entries);
        }
        self.lock().entries = Arc::new(entries);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The largest cache file read for a list directory holding `task_files` task files: one entry
/// a file, each a task (no larger than its file, at most `max_task_file_bytes`) and its stamp,
/// and never more than [`CACHE_MAX_BYTES`]. A planted cache file costs no more than the task
/// files would.
pub(crate) fn max_bytes(task_files: usize, max_task_file_bytes: u64) -> u64 {
    const PER_ENTRY: u64 = 1024;
    u64::try_from(task_files)
        .unwrap_or(u64::MAX)
        .saturating_mul(max_task_file_bytes.saturating_add(PER_ENTRY))
        .min(CACHE_MAX_BYTES)
}

/// The entries of `dir`'s cache file, sorted by id; none if it is missing, over `max_bytes`, of
/// another version or unreadable.
fn load(dir: &Path, max_bytes: u64) -> Vec<CachedTask> {
    let path = dir.join(CACHE_FILE);
    let bytes = match fsutil::read_optional_within(&path, max_bytes) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Vec::new(),
        Err(
            e @ crate::Error::BadEntry {
                fault: crate::EntryFault::NotRegularFile { .. },
                ..
            },
        ) => {
            tracing::warn!(error = %e, "snapshot cache skipped");
            return Vec::new();
        }
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "snapshot cache not read");
            return Vec::new();
        }
    };
    match serde_json::from_slice::<LoadedCache>(&bytes) {
        Ok(cache) if cache.version == CACHE_VERSION => {
            let mut entries: Vec<CachedTask> = cache
                .entries
                .into_iter()
                .map(|(stamp, task)| CachedTask {
                    stamp,
                    task: Arc::new(task),
                })
                .collect();
            entries.sort_by_key(|c| c.task.id);
            entries.dedup_by_key(|c| c.task.id);
            entries
        }
        Ok(cache) => {
            tracing::debug!(path = %path.display(), version = cache.version, "snapshot cache of another version ignored");
            Vec::new()
        }
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "snapshot cache ignored");
            Vec::new()
        }
    }
}

/// Writes `entries` to `dir`'s cache file (renamed into place, not flushed: it is only a cache). A
/// failure (a read-only list directory, a full disk) is logged and otherwise ignored.
fn save(dir: &Path, entries: &[CachedTask]) {
    let saved = SavedCache {
        version: CACHE_VERSION,
        entries: entries.iter().map(|c| (c.stamp, &*c.task)).collect(),
    };
    let written = serde_json::to_vec(&saved)
        .map_err(std::io::Error::from)
        .map_err(|e| e.to_string())
        .and_then(|bytes| {
            fsutil::Staged::write(dir, CACHE_FILE, &bytes)
                .and_then(fsutil::Staged::publish)
                .map_err(|e| e.to_string())
        });
    if let Err(error) = written {
        tracing::debug!(dir = %dir.display(), %error, "snapshot cache not written");
    }
}

/// The cached entry of task `id`, if any.
pub(crate) fn find(entries: &[CachedTask], id: TaskId) -> Option<&CachedTask> {
    entries
        .binary_search_by_key(&id, |c| c.task.id)
        .ok()
        .map(|at| &entries[at])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn stat_of(path: &std::path::Path) -> Stat {
        rustix::fs::lstat(path).unwrap()
    }

    fn stamp_of(path: &std::path::Path) -> FileStamp {
        FileStamp::of(&stat_of(path)).unwrap()
    }

    #[test]
    fn only_files_changed_before_the_window_are_settled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.json");
        std::fs::write(&path, "{}").unwrap();
        let stamp = stamp_of(&path);
        let now = SystemTime::now();
        assert!(!stamp.settled(now, Duration::from_secs(60)));
        assert!(stamp.settled(now + Duration::from_secs(120), Duration::from_secs(60)));
    }

    #[test]
    fn a_stamp_taken_in_the_directory_equals_the_stamp_of_the_metadata() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("1.json"), "{}").unwrap();
        std::fs::create_dir(dir.path().join("2.json")).unwrap();
        let fd = OwnedFd::from(std::fs::File::open(dir.path()).unwrap());
        assert_eq!(
            FileStamp::at(&fd, "1.json").unwrap(),
            Some(stamp_of(&dir.path().join("1.json")))
        );
        assert_eq!(FileStamp::at(&fd, "2.json").unwrap(), None);
        assert_eq!(FileStamp::at(&fd, "3.json").unwrap(), None);
    }

    #[test]
    fn directories_and_symlinks_have_no_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("2.json");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(FileStamp::of(&stat_of(dir.path())).is_none());
        assert!(FileStamp::of(&stat_of(&link)).is_none());
    }
}
