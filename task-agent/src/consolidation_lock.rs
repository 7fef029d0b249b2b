//! The consolidation lock: a file whose mtime records the last consolidation (SPEC §10).
//!
//! - Holding it is an exclusive `flock` on the lock file, so of N processes that try at once
//!   exactly one wins, and the kernel releases it when the holder dies in any way.
//! - Acquiring records `priorMtime` (the last consolidation) in the sidecar `{lock}.holder`
//!   and sets the mtime to now.
//! - [`LockHeld::succeed`] keeps the new mtime; [`LockHeld::roll_back`] (a kill or a failure)
//!   restores `priorMtime`, so a dream that did not finish never counts as a consolidation.
//! - A holder that died mid-dream (its supervisor was `SIGKILL`ed) leaves the sidecar behind:
//!   the next acquire finds it, rolls the mtime back to its `priorMtime`, then proceeds.
//!
//! "Never consolidated" is an mtime of 0 (the lock file is never deleted: a process may hold a
//! lock on it).
//!
//! A module of its own below `dream` (which re-exports its types) and `error`: `AgentError::Lock`
//! carries a [`LockError`], and `dream` returns `AgentError`s.

use std::fs::{File, FileTimes};
use std::io::Write;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::fs::FlockOperation;
use serde::{Deserialize, Serialize};
use task_output::OutputError;

/// Why the lock could not be taken or released.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// Another dream (in this or another process) holds it.
    #[error("another dream holds the consolidation lock {}", path.display())]
    Busy {
        /// The lock file.
        path: PathBuf,
    },
    /// A file operation failed.
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// What the sidecar records while the lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Holder {
    /// The mtime (ms) before this hold; 0 = never consolidated.
    prior_mtime: u64,
    /// The holding process.
    pid: u32,
}

/// The consolidation lock at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsolidationLock {
    path: PathBuf,
}

impl ConsolidationLock {
    /// The lock at `path` (created on first acquire).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        ConsolidationLock { path: path.into() }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// When the last consolidation finished (ms epoch), or `None` if never.
    ///
    /// # Errors
    /// File errors other than a missing lock file.
    pub fn last_consolidated(&self) -> Result<Option<u64>, LockError> {
        match std::fs::metadata(&self.path) {
            Ok(meta) => Ok(Some(mtime_ms(&meta)).filter(|&ms| ms > 0)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(OutputError::from_io(&self.path, e).into()),
        }
    }

    /// Takes the lock: rolls back a dead holder's hold, records `priorMtime`, sets the mtime
    /// to now.
    ///
    /// # Errors
    /// [`LockError::Busy`] while another holder lives; file errors (nothing is held then).
    pub fn acquire(&self) -> Result<LockHeld, LockError> {
        let io = |e: std::io::Error| LockError::from(OutputError::from_io(&self.path, e));
        self.create_if_missing().map_err(io)?;
        let file = task_output::open::NoFollow::read_write().open(&self.path)?;
        match rustix::fs::flock(file.as_fd(), FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(LockError::Busy {
                    path: self.path.clone(),
                });
            }
            Err(e) => return Err(io(e.into())),
        }
        if let Some(dead) = self.read_holder() {
            tracing::warn!(lock = %self.path.display(), pid = dead.pid,
                "a dream's holder died: rolling the consolidation lock back");
            set_mtime(&file, dead.prior_mtime).map_err(io)?;
        }
        let prior_mtime = mtime_ms(&file.metadata().map_err(io)?);
        let holder = Holder {
            prior_mtime,
            pid: std::process::id(),
        };
        self.write_holder(&holder)?;
        set_mtime(&file, now_ms()).map_err(io)?;
        Ok(LockHeld {
            lock: self.clone(),
            file,
            prior_mtime,
            settled: false,
        })
    }

    /// Creates the lock file with mtime 0 ("never") atomically: a temporary file linked into
    /// place, so no process ever sees a new lock file with another mtime.
    fn create_if_missing(&self) -> std::io::Result<()> {
        if self.path.symlink_metadata().is_ok() {
            return Ok(());
        }
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".new.{}", std::process::id()));
        let tmp = PathBuf::from(name);
        let _ = std::fs::remove_file(&tmp);
        let file = task_output::open::create_output_file(&tmp).map_err(std::io::Error::other)?;
        set_mtime(&file, 0)?;
        let linked = std::fs::hard_link(&tmp, &self.path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
            _ => Ok(()),
        }
    }

    fn holder_path(&self) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(".holder");
        PathBuf::from(name)
    }

    fn read_holder(&self) -> Option<Holder> {
        let bytes = task_output::open::read_untrusted(&self.holder_path(), 4096).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn write_holder(&self, holder: &Holder) -> Result<(), LockError> {
        let path = self.holder_path();
        let _ = std::fs::remove_file(&path);
        let mut file = task_output::open::create_output_file(&path)?;
        let text = serde_json::to_vec(holder).unwrap_or_default();
        file.write_all(&text)
            .and_then(|()| file.sync_data())
            .map_err(|e| OutputError::from_io(&path, e))?;
        Ok(())
    }
}

/// The held lock; released (unlocked) when dropped. Dropping it without
/// [`succeed`](Self::succeed) rolls back, like [`roll_back`](Self::roll_back).
#[derive(Debug)]
#[must_use = "dropping the hold rolls the consolidation back"]
pub struct LockHeld {
    lock: ConsolidationLock,
    file: File,
    prior_mtime: u64,
    settled: bool,
}

impl LockHeld {
    /// The mtime (ms) before this hold; `None` if never consolidated.
    pub fn prior_mtime(&self) -> Option<u64> {
        Some(self.prior_mtime).filter(|&ms| ms > 0)
    }

    /// The consolidation finished: the mtime set at acquire stands.
    pub fn succeed(mut self) {
        self.settled = true;
        let _ = std::fs::remove_file(self.lock.holder_path());
    }

    /// The consolidation was killed or failed: the mtime goes back to `priorMtime`.
    ///
    /// # Errors
    /// File errors (the sidecar then stays, and the next acquire rolls back).
    pub fn roll_back(mut self) -> Result<(), LockError> {
        self.settled = true;
        self.restore()
    }

    fn restore(&self) -> Result<(), LockError> {
        let io = |e| LockError::from(OutputError::from_io(&self.lock.path, e));
        set_mtime(&self.file, self.prior_mtime).map_err(io)?;
        let _ = std::fs::remove_file(self.lock.holder_path());
        Ok(())
    }
}

impl Drop for LockHeld {
    fn drop(&mut self) {
        if !self.settled
            && let Err(error) = self.restore()
        {
            tracing::warn!(%error, "could not roll the consolidation lock back");
        }
    }
}

fn now_ms() -> u64 {
    task_core::now_ms()
}

fn mtime_ms(meta: &std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn set_mtime(file: &File, ms: u64) -> std::io::Result<()> {
    let time = UNIX_EPOCH + Duration::from_millis(ms);
    file.set_times(
        FileTimes::new()
            .set_modified(time)
            .set_accessed(SystemTime::now()),
    )
}
