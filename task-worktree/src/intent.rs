//! A worktree's own record, `{dir}/{name}.json`: written (flushed, and its directory with it)
//! before `git worktree add`, removed once the worktree and its branch are gone. Whoever works
//! on a worktree holds an exclusive `flock` on its record, and every git command it runs for it
//! has the record as its stdin, so the lock lasts as long as that git does, even past the death
//! of the process that started it: a supervisor that takes over after a crash never works on a
//! worktree while a git of its predecessor still does.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use rustix::fs::{FlockOperation, Mode, OFlags};

use crate::{Worktree, WorktreeError};

/// How often a held record is looked at again while waiting for it.
const RETRY: Duration = Duration::from_millis(10);

/// The longest name a worktree is added under.
const NAME_CHARS: usize = 64;

/// Whether `name` can name a worktree (and its record): letters, digits, `-` and `_`, 1 to 64
/// of them.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_CHARS
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A worktree's record as found on disk: the name it was added under (a task's id) and the
/// worktree it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// The name the worktree was added under (`{dir}/{name}`).
    pub name: String,
    /// The worktree: path, branch, base and repository, known before it was added.
    pub worktree: Worktree,
}

/// The record of one worktree, locked by this process.
#[derive(Debug)]
pub(crate) struct Held {
    file: File,
    path: PathBuf,
}

fn record_error(path: &Path) -> impl FnOnce(std::io::Error) -> WorktreeError + '_ {
    move |source| WorktreeError::Record {
        path: path.to_path_buf(),
        source,
    }
}

/// The record of the worktree `name` under `dir`.
pub(crate) fn path_of(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.json"))
}

impl Held {
    /// Writes the record of `worktree` as `name` under `dir`, durably (the file and the
    /// directory flushed), locked from before it is visible under its name.
    pub(crate) fn create(
        dir: &Path,
        name: &str,
        worktree: &Worktree,
    ) -> Result<Self, WorktreeError> {
        let path = path_of(dir, name);
        let temp = dir.join(format!(".{name}.json.tmp"));
        let written = (|| {
            let flags =
                OFlags::CREATE | OFlags::TRUNC | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let mut file = File::from(rustix::fs::open(&temp, flags, Mode::from_raw_mode(0o600))?);
            rustix::fs::flock(file.as_fd(), FlockOperation::LockExclusive)?;
            let mut json = serde_json::to_vec(worktree).map_err(std::io::Error::other)?;
            json.push(b'\n');
            file.write_all(&json)?;
            file.sync_all()?;
            std::fs::rename(&temp, &path)?;
            File::open(dir)?.sync_all()?;
            Ok(file)
        })();
        match written {
            Ok(file) => Ok(Held { file, path }),
            Err(error) => {
                let _ = std::fs::remove_file(&temp);
                Err(record_error(&path)(error))
            }
        }
    }

    /// Locks the record at `path`, waiting up to `patience` for whoever holds it; `None` once
    /// there is no record there (never was, or its holder removed it while this waited).
    pub(crate) fn open(path: &Path, patience: Duration) -> Result<Option<Self>, WorktreeError> {
        let deadline = Instant::now() + patience;
        loop {
            let flags = OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let file = match rustix::fs::open(path, flags, Mode::empty()) {
                Ok(fd) => File::from(fd),
                Err(rustix::io::Errno::NOENT) => return Ok(None),
                Err(error) => return Err(record_error(path)(error.into())),
            };
            match rustix::fs::flock(file.as_fd(), FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(rustix::io::Errno::WOULDBLOCK) if Instant::now() < deadline => {
                    std::thread::sleep(RETRY);
                    continue;
                }
                Err(rustix::io::Errno::WOULDBLOCK) => {
                    return Err(WorktreeError::Busy {
                        path: path.to_path_buf(),
                    });
                }
                Err(error) => return Err(record_error(path)(error.into())),
            }
            // Locked: still the file at that name (its holder may have removed it, and another
            // record may have been written there since)?
            let held = rustix::fs::fstat(&file).map_err(|e| record_error(path)(e.into()))?;
            match rustix::fs::lstat(path) {
                Ok(now) if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino) => {
                    return Ok(Some(Held {
                        file,
                        path: path.to_path_buf(),
                    }));
                }
                Ok(_) => continue,
                Err(rustix::io::Errno::NOENT) => return Ok(None),
                Err(error) => return Err(record_error(path)(error.into())),
            }
        }
    }

    /// The worktree it records.
    pub(crate) fn read(&self) -> Result<Worktree, WorktreeError> {
        let mut text = String::new();
        (&self.file)
            .read_to_string(&mut text)
            .map_err(record_error(&self.path))?;
        serde_json::from_str(&text).map_err(|e| record_error(&self.path)(std::io::Error::other(e)))
    }

    /// A standard input for a git command run for this worktree: the record itself, so that
    /// git holds the lock as long as it runs.
    pub(crate) fn stdin(&self) -> Stdio {
        match self.file.try_clone() {
            Ok(file) => Stdio::from(file),
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "git runs without the record's lock");
                Stdio::null()
            }
        }
    }

    /// Removes the record (its worktree and branch are gone, or were never made).
    pub(crate) fn remove(self) -> Result<(), WorktreeError> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(()),
            Err(error) => Err(record_error(&self.path)(error)),
        }
    }
}

/// The names of the records under `dir` (none when `dir` does not exist).
pub(crate) fn names(dir: &Path) -> Result<Vec<String>, WorktreeError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(record_error(dir)(error)),
    };
    let mut names: Vec<String> = entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let name = entry.file_name().into_string().ok()?;
            let name = name.strip_suffix(".json")?;
            (entry.file_type().ok()?.is_file() && valid_name(name)).then(|| name.to_owned())
        })
        .collect();
    names.sort();
    Ok(names)
}

/// The record of `name` under `dir` as it is now, read without waiting for its lock.
pub(crate) fn read(dir: &Path, name: &str) -> Result<Option<Intent>, WorktreeError> {
    let path = path_of(dir, name);
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = match rustix::fs::open(&path, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(error) => return Err(record_error(&path)(error.into())),
    };
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(record_error(&path))?;
    match serde_json::from_str(&text) {
        Ok(worktree) => Ok(Some(Intent {
            name: name.to_owned(),
            worktree,
        })),
        // A record is renamed into place whole: this one is damaged.
        Err(error) => Err(record_error(&path)(std::io::Error::other(error))),
    }
}
