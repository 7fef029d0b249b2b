//! Small filesystem helpers: atomic writes, no-follow opens, directory scans.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{IoContext, Result};
use crate::id::TaskId;

fn nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Reads a whole file without following a symlink at its last component.
/// `Ok(None)` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    Ok(read_with_metadata(path)?.map(|(bytes, _)| bytes))
}

/// [`read_optional`], also returning the metadata of the file that was read, taken from the
/// open file before reading it (so the contents are at least as new as the metadata).
pub(crate) fn read_with_metadata(path: &Path) -> Result<Option<(Vec<u8>, Metadata)>> {
    read_within(path, u64::MAX)
}

/// [`read_optional`] of a file that may hold at most `max` bytes: a larger one is an error
/// (`InvalidData`), and is not read.
pub(crate) fn read_optional_within(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    Ok(read_within(path, max)?.map(|(bytes, _)| bytes))
}

fn read_within(path: &Path, max: u64) -> Result<Option<(Vec<u8>, Metadata)>> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nofollow())
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).at("open", path),
    };
    let meta = file.metadata().at("stat", path)?;
    if meta.len() > max {
        let error = std::io::Error::new(ErrorKind::InvalidData, format!("over {max} bytes"));
        return Err(error).at("read", path);
    }
    let size = usize::try_from(meta.len()).unwrap_or(0);
    // One spare byte lets the final read see end-of-file without growing the buffer; `take`
    // reads to the end without repeating the size probe of `File::read_to_end`.
    let mut bytes = Vec::with_capacity(size.saturating_add(1));
    file.take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .at("read", path)?;
    Ok(Some((bytes, meta)))
}

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A file's new contents, written under a temp name in the same directory (created `O_EXCL`,
/// `O_NOFOLLOW`), waiting to be flushed and renamed over its target. Dropped unpublished, the
/// temp file is removed.
#[derive(Debug)]
pub(crate) struct Staged {
    /// Open until [`Staged::close`] (a large write cannot keep every file open).
    file: Option<File>,
    temp: PathBuf,
    target: PathBuf,
    published: bool,
}

impl Staged {
    /// Writes `contents` to a temp file for `dir/name` (`.{name}.tmp.{pid}.{n}`), not flushed.
    pub(crate) fn write(dir: &Path, name: &str, contents: &[u8]) -> Result<Self> {
        let n = TEMP_COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!(".{name}.tmp.{}.{n}", std::process::id()));
        let file = match create_new(&temp, contents) {
            Ok(file) => file,
            Err(e) => {
                let _ = std::fs::remove_file(&temp);
                return Err(e);
            }
        };
        Ok(Self {
            file: Some(file),
            temp,
            target: dir.join(name),
            published: false,
        })
    }

    /// The temp file while it is open, to be flushed before [`Staged::publish`].
    pub(crate) fn file(&self) -> Option<&File> {
        self.file.as_ref()
    }

    /// Closes the temp file (flushed or not; its contents stay).
    pub(crate) fn close(&mut self) {
        self.file = None;
    }

    /// The temp file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.temp
    }

    /// Renames the temp file over the target.
    pub(crate) fn publish(mut self) -> Result<()> {
        std::fs::rename(&self.temp, &self.target).at("rename", &self.target)?;
        self.published = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// Whether `name` is one of [`Staged`]'s temp files (`.{name}.tmp.{pid}.{n}`).
pub(crate) fn is_temp_file(name: &str) -> bool {
    name.starts_with('.') && name.contains(".tmp.")
}

/// Creates `path` (`O_EXCL`, `O_NOFOLLOW`) holding `contents`, not flushed.
pub(crate) fn create_new(path: &Path, contents: &[u8]) -> Result<File> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(nofollow())
        .open(path)
        .at("create", path)?;
    file.write_all(contents).at("write", path)?;
    Ok(file)
}

/// Opens a directory, to fsync it.
pub(crate) fn open_dir(dir: &Path) -> Result<File> {
    File::open(dir).at("open", dir)
}

/// Whether the open directory `dir` is on a local filesystem that takes its timestamps from
/// this machine's clock in ticks of milliseconds (see [`crate::StoreConfig::cache_min_age_local`]).
pub(crate) fn on_local_fs(dir: &File) -> bool {
    const LOCAL: [u64; 9] = [
        0xEF53,      // ext2, ext3, ext4
        0x5846_5342, // xfs
        0x9123_683E, // btrfs
        0xF2F5_2010, // f2fs
        0x2FC1_2FC1, // zfs
        0xCA45_1A4E, // bcachefs
        0x0102_1994, // tmpfs
        0x8584_58F6, // ramfs
        0x794C_7630, // overlayfs (containers)
    ];
    rustix::fs::fstatfs(dir).is_ok_and(|fs| {
        // `f_type` is signed on some targets; the magic numbers are 32-bit.
        #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
        let magic = (fs.f_type as i64 as u64) & 0xFFFF_FFFF;
        LOCAL.contains(&magic)
    })
}

/// Fsyncs every file at once, one thread each (the calling thread takes the first). A disk
/// that is busy serves concurrent flushes together, where one after another each would wait
/// its turn. The first error is returned once all are done.
pub(crate) fn sync_all_at_once(files: &[(&File, &Path)]) -> Result<()> {
    let sync = |(file, path): &(&File, &Path)| file.sync_all().at("fsync", path);
    at_once(files, sync)
}

/// Runs `job` on every item, at once: on up to [`MAX_FLUSH_THREADS`] threads, each taking an
/// equal share in order (the calling thread takes the first); the first error, once all are
/// done.
pub(crate) fn at_once<T: Sync>(items: &[T], job: impl Fn(&T) -> Result<()> + Sync) -> Result<()> {
    let share = items.len().div_ceil(MAX_FLUSH_THREADS).max(1);
    let mut shares = items.chunks(share);
    let Some(first) = shares.next() else {
        return Ok(());
    };
    let job = &job;
    let run = move |share: &[T]| share.iter().try_for_each(job);
    std::thread::scope(|scope| {
        let others: Vec<_> = shares
            .map(|share| scope.spawn(move || run(share)))
            .collect();
        let mut result = run(first);
        for other in others {
            let outcome = other.join().unwrap_or_else(|_| {
                Err(std::io::Error::other("a flush thread panicked")).at("fsync", Path::new("."))
            });
            result = result.and(outcome);
        }
        result
    })
}

/// At most this many threads flush at once (a write may flush thousands of files).
const MAX_FLUSH_THREADS: usize = 8;

/// Appends one line to a file (created if missing, `O_APPEND`, `O_NOFOLLOW`) in a single
/// `write`, and fsyncs it when `durable`.
pub(crate) fn append_line(path: &Path, line: &str, durable: bool) -> Result<()> {
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .custom_flags(nofollow())
        .open(path)
        .at("open", path)?;
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line);
    buf.push('\n');
    file.write_all(buf.as_bytes()).at("append", path)?;
    if durable {
        file.sync_data().at("fsync", path)?;
    }
    Ok(())
}

/// Whether `path` exists (without following a final symlink).
pub(crate) fn exists(path: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).at("stat", path),
    }
}

/// Removes a file; a missing file is not an error.
pub(crate) fn remove_if_exists(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != ErrorKind::NotFound => Err(e).at("remove", path),
        _ => Ok(()),
    }
}

/// The ids of every `{digits}.json` file in `dir`, sorted.
pub(crate) fn task_ids(dir: &Path) -> Result<Vec<TaskId>> {
    let mut ids = Vec::new();
    for entry in std::fs::read_dir(dir).at("list", dir)? {
        let entry = entry.at("list", dir)?;
        if let Some(id) = entry.file_name().to_str().and_then(TaskId::from_file_name) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tmpfs_is_local_and_procfs_is_not() {
        assert!(!on_local_fs(&File::open("/proc").unwrap()));
        if let Ok(shm) = File::open("/dev/shm") {
            assert!(on_local_fs(&shm), "/dev/shm (tmpfs)");
        }
    }
}
