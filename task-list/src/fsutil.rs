//! Small filesystem helpers: atomic writes, no-follow opens, directory scans.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::Stat;
use serde::de::DeserializeOwned;
use task_output::OutputError;
use task_output::jsonl::{JsonLines, Line, LineError};
use task_output::open::NoFollow;

use crate::entry::{EntryFault, EntryKind, FileProblem, looks_like_a_task_file};
use crate::error::{Error, IoContext, Result};
use crate::id::TaskId;

/// What a look at an untrusted entry of the list directory found: nothing, an entry that is not
/// read (and why), or a regular file within the limit with its `fstat`, taken on the open file
/// before anything was read from it (so what is read is at least as new as the stat).
#[derive(Debug)]
pub(crate) enum Untrusted<T> {
    /// Nothing is there.
    Missing,
    /// Something is there that is not read.
    Refused(EntryFault),
    /// A regular file within the limit (opened, or read).
    Found(T, Stat),
}

impl<T> Untrusted<T> {
    /// The contents, `None` if missing; a refused entry is [`Error::BadEntry`] at `path`.
    pub(crate) fn into_result(self, path: &Path) -> Result<Option<T>> {
        match self {
            Self::Missing => Ok(None),
            Self::Refused(fault) => Err(Error::BadEntry {
                path: path.to_path_buf(),
                fault,
            }),
            Self::Found(contents, _) => Ok(Some(contents)),
        }
    }
}

/// Opens `path` for reading as untrusted input ([`task_output::open::open_untrusted`]: no
/// symlink followed, no FIFO waited on, a regular file of at most `max` bytes, checked on the
/// open file). Only a failure that says nothing about the entry (out of descriptors, an I/O
/// error) is an error.
pub(crate) fn open_untrusted(path: &Path, max: u64) -> Result<Untrusted<File>> {
    let opened = task_output::open::open_untrusted(path, max).map(|file| {
        let stat = *file.stat();
        (file.into_file(), stat)
    });
    classify(path, opened)
}

/// Reads `path` as untrusted input ([`task_output::open::read_untrusted`]): never more than
/// `max` bytes, even from a file that grows while it is read.
pub(crate) fn read_untrusted(path: &Path, max: u64) -> Result<Untrusted<Vec<u8>>> {
    classify(path, task_output::open::read_untrusted_with_stat(path, max))
}

/// What an untrusted open or read of `path` found.
fn classify<T>(
    path: &Path,
    result: std::result::Result<(T, Stat), OutputError>,
) -> Result<Untrusted<T>> {
    match result {
        Ok((found, stat)) => Ok(Untrusted::Found(found, stat)),
        Err(OutputError::NotFound { .. }) => Ok(Untrusted::Missing),
        Err(err) => match fault_of(err) {
            Ok(fault) => Ok(Untrusted::Refused(fault)),
            Err(err) => Err(std::io::Error::from(err)).at("read", path),
        },
    }
}

/// The fault an open or a read found in the entry, if the error shows one: not a regular file
/// (a symlink, a FIFO, a socket...), too large, permission denied.
fn fault_of(err: OutputError) -> std::result::Result<EntryFault, OutputError> {
    Ok(match err {
        OutputError::SymlinkRefused { .. } => EntryFault::NotRegularFile {
            kind: EntryKind::Symlink,
        },
        OutputError::NotRegularFile { kind, .. } => EntryFault::NotRegularFile {
            kind: EntryKind::from(kind),
        },
        OutputError::TooLarge { size, limit, .. } => EntryFault::TooLarge { size, limit },
        OutputError::PermissionDenied { .. } => EntryFault::Unreadable {
            message: "permission denied".to_owned(),
        },
        other => return Err(other),
    })
}

/// [`read_untrusted`] of a file of the list's own (the high-water mark, the journal, the
/// snapshot cache): `Ok(None)` when it does not exist, [`Error::BadEntry`] when it is not read.
pub(crate) fn read_optional_within(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    read_untrusted(path, max)?.into_result(path)
}

/// Calls `each` on every line of the JSON-lines file `path` (named `label` in problems) that
/// parses as a `T`, in order, holding one line at a time; returns the lines that do not parse
/// or are longer than [`MAX_LINE_BYTES`] (skipped without being held), or the whole file if it
/// is not read ([`open_untrusted`] with the limit `max`). Each problem is logged as a warning.
pub(crate) fn each_json_line<T: DeserializeOwned>(
    path: &Path,
    label: &str,
    max: u64,
    mut each: impl FnMut(T),
) -> Result<Vec<FileProblem>> {
    let file = match open_untrusted(path, max)? {
        Untrusted::Missing => return Ok(Vec::new()),
        Untrusted::Refused(fault) => return Ok(vec![FileProblem::skipped(label.into(), fault)]),
        Untrusted::Found(file, _) => file,
    };
    // `take`: a file that grows while it is read is read up to the limit.
    let mut file = file.take(max);
    let mut lines = JsonLines::new(usize::try_from(MAX_LINE_BYTES).unwrap_or(usize::MAX));
    let mut problems = Vec::new();
    let mut take = |line: Line<'_>| match line.parse::<T>() {
        Ok(value) => each(value),
        Err(problem) => {
            let fault = match problem {
                LineError::Oversized { len, .. } => EntryFault::TooLarge {
                    size: len,
                    limit: MAX_LINE_BYTES,
                },
                LineError::Malformed { source, .. } => EntryFault::Malformed {
                    message: source.to_string(),
                },
            };
            problems.push(FileProblem::skipped(
                format!("{label}:{}", line.number),
                fault,
            ));
        }
    };
    let mut buf = vec![0; READ_CHUNK];
    loop {
        let read = file.read(&mut buf).at("read", path)?;
        if read == 0 {
            break;
        }
        lines.push(&buf[..read], &mut take);
    }
    lines.finish(&mut take);
    Ok(problems)
}

/// How much of a JSON-lines file is read at a time.
const READ_CHUNK: usize = 64 * 1024;

/// The longest line of an audit log or an inbox that is read (a record is a few hundred bytes,
/// an inbox message at most a task's subject and description).
pub(crate) const MAX_LINE_BYTES: u64 = 4 << 20;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// The permission bits of the files the list creates, before the umask (so a list shared
/// through the umask stays shared).
pub(crate) const LIST_FILE_MODE: u32 = 0o666;

/// A file's new contents, written under a temp name in the same directory (created `O_EXCL`,
/// `O_NOFOLLOW`), waiting to be flushed and renamed over its target. Dropped unpublished, the
/// temp file is removed.
#[derive(Debug)]
pub(crate) struct Staged {
    file: File,
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
            file,
            temp,
            target: dir.join(name),
            published: false,
        })
    }

    /// The temp file, to be flushed before [`Staged::publish`].
    pub(crate) fn file(&self) -> &File {
        &self.file
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
    // Mode 0666 before the umask, as any file the list writes.
    let mut file = NoFollow::write()
        .create_new()
        .mode(LIST_FILE_MODE)
        .open(path)
        .map_err(std::io::Error::from)
        .at("create", path)?;
    file.write_all(contents).at("write", path)?;
    Ok(file)
}

/// Opens a directory, to fsync it.
pub(crate) fn open_dir(dir: &Path) -> Result<File> {
    File::open(dir).at("open", dir)
}

/// Flushes the directory `dir` (its entries: names created, renamed or removed).
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    open_dir(dir)?.sync_all().at("fsync", dir)
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

/// Appends one line to a file (created if missing, `O_APPEND`, `O_NOFOLLOW`, `O_NONBLOCK`) in
/// a single `write`, and fsyncs it when `durable`. Anything but a regular file there (a
/// symlink, a FIFO, which would block the open for ever) is [`Error::BadEntry`].
pub(crate) fn append_line(path: &Path, line: &str, durable: bool) -> Result<()> {
    let opened = NoFollow::write()
        .append()
        .create()
        .mode(LIST_FILE_MODE)
        .open_regular(path);
    let mut file = match opened {
        Ok(file) => file.into_file(),
        Err(err) => {
            return Err(match fault_of(err) {
                Ok(fault) => Error::BadEntry {
                    path: path.to_path_buf(),
                    fault,
                },
                Err(err) => return Err(std::io::Error::from(err)).at("open", path),
            });
        }
    };
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

/// The entries of a list directory named like task files.
#[derive(Debug, Default)]
pub(crate) struct TaskFiles {
    /// The ids of the `{id}.json` entries, sorted (whatever the entries are).
    pub(crate) ids: Vec<TaskId>,
    /// The names like task files whose id is not a task id: `0.json`, `-1.json`, `01.json`,
    /// `9007199254740992.json` (sorted).
    pub(crate) invalid: Vec<String>,
}

/// The entries of `dir` named like task files ([`TaskFiles`]).
pub(crate) fn task_files(dir: &Path) -> Result<TaskFiles> {
    let mut files = TaskFiles::default();
    for entry in std::fs::read_dir(dir).at("list", dir)? {
        let entry = entry.at("list", dir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        match TaskId::from_file_name(name) {
            Some(id) => files.ids.push(id),
            None if looks_like_a_task_file(name) => files.invalid.push(name.to_owned()),
            None => {}
        }
    }
    files.ids.sort_unstable();
    files.invalid.sort_unstable();
    Ok(files)
}

/// The ids of every `{id}.json` entry in `dir`, sorted.
pub(crate) fn task_ids(dir: &Path) -> Result<Vec<TaskId>> {
    Ok(task_files(dir)?.ids)
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
