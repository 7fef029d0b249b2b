//! The supervisor lock: an `flock`ed file that only the live supervisor of a session holds.
//!
//! The kernel drops an `flock` when its holder dies, however it dies, so "the lock is free" is a
//! reliable "no supervisor is alive" (unlike a pid file, which survives its process).

use std::fs::File;
use std::io::{self, Seek, Write};
use std::path::Path;

use rustix::fs::{FlockOperation, flock};

use crate::error::{Error, Result};
use task_output::OutputError;
use task_output::open::NoFollow;

/// A held exclusive lock on a session's `supervisor.lock`; released when dropped.
#[derive(Debug)]
pub struct SupervisorLock {
    file: File,
}

impl SupervisorLock {
    /// Takes the lock if nobody holds it; `None` if another process does.
    pub fn try_acquire(path: &Path) -> Result<Option<Self>> {
        let file = NoFollow::read_write()
            .create()
            .open(path)
            .map_err(|e| Error::io("open", path, e.into()))?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(Self { file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(Error::io("lock", path, e.into())),
        }
    }

    /// Records `pid` as the lock holder (the file's whole content). Not synced to disk: the
    /// `flock`, not the pid, says whether a supervisor is alive, and no lock survives a reboot.
    pub fn write_pid(&mut self, pid: u32) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.rewind()?;
        write!(self.file, "{pid}")
    }
}

/// Whether a live process holds the lock at `path` (a missing file means no).
///
/// Probing takes the lock for an instant when it is free; a supervisor starting at that very
/// moment retries (see [`crate::supervisor`]).
/// It never creates or writes anything: read-only commands use it.
pub fn is_held(path: &Path) -> Result<bool> {
    let file = match NoFollow::read().open_regular(path) {
        Ok(file) => file.into_file(),
        Err(OutputError::NotFound { .. }) => return Ok(false),
        Err(e) => return Err(Error::io("open", path, e.into())),
    };
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => Ok(false),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(true),
        Err(e) => Err(Error::io("lock", path, e.into())),
    }
}

/// The pid the lock's holder wrote in it, if it can be read.
pub fn holder_pid(path: &Path) -> Option<u32> {
    let bytes = task_output::open::read_untrusted(path, 64).ok()?;
    std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_held_lock_is_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("supervisor.lock");
        assert!(!is_held(&path).unwrap());
        let mut held = SupervisorLock::try_acquire(&path).unwrap().unwrap();
        held.write_pid(42).unwrap();
        assert!(SupervisorLock::try_acquire(&path).unwrap().is_none());
        assert!(is_held(&path).unwrap());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "42");
        drop(held);
        assert!(!is_held(&path).unwrap());
    }
}
