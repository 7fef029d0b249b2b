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

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use crate::id::TaskId;
use crate::record::Task;

/// What identifies one version of a regular file's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileStamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileStamp {
    /// The stamp of a regular file; `None` for anything else (never cached).
    pub(crate) fn of(meta: &Metadata) -> Option<Self> {
        meta.file_type().is_file().then(|| Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        })
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

/// A parsed task and the stamp of the file it came from.
#[derive(Debug, Clone)]
pub(crate) struct CachedTask {
    pub(crate) stamp: FileStamp,
    pub(crate) task: Arc<Task>,
}

/// The cached tasks of one list, sorted by id, shared by a handle and its clones.
#[derive(Default)]
pub(crate) struct TaskCache {
    entries: Mutex<Arc<Vec<CachedTask>>>,
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
        Arc::clone(&self.lock())
    }

    /// Replaces the cache after a snapshot (entries sorted by id). Every entry is checked
    /// against its file's stamp before use, so whichever of two concurrent snapshots stores
    /// last, the cache stays right.
    pub(crate) fn replace(&self, entries: Vec<CachedTask>) {
        *self.lock() = Arc::new(entries);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Arc<Vec<CachedTask>>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
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

    fn stamp_of(path: &std::path::Path) -> FileStamp {
        FileStamp::of(&std::fs::symlink_metadata(path).unwrap()).unwrap()
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
    fn directories_and_symlinks_have_no_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("2.json");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(FileStamp::of(&std::fs::symlink_metadata(dir.path()).unwrap()).is_none());
        assert!(FileStamp::of(&std::fs::symlink_metadata(&link).unwrap()).is_none());
    }
}
