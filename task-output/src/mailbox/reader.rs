//! The one consumer of a mailbox and its committed cursor.

use std::io::Write;
use std::path::Path;

use rustix::fs::FlockOperation;
use serde::de::DeserializeOwned;

use super::{Batch, Mailbox, MailboxError};
use crate::OutputError;
use crate::open::NoFollow;
use crate::read::DEFAULT_MAX_READ_BYTES;

/// The consumer of a mailbox: holds its reader lock (in every process) and its cursor.
#[derive(Debug)]
pub struct MailboxReader {
    mailbox: Mailbox,
    cursor: u64,
    _lock: std::fs::File,
}

impl MailboxReader {
    pub(super) fn acquire(mailbox: Mailbox) -> Result<Self, MailboxError> {
        let lock_path = mailbox.sibling("reader");
        let lock = NoFollow::read_write().create().open(&lock_path)?;
        match rustix::fs::flock(&lock, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                return Err(MailboxError::ReaderBusy {
                    path: mailbox.path.clone(),
                });
            }
            Err(errno) => return Err(OutputError::from_io(&lock_path, errno.into()).into()),
        }
        let cursor = read_cursor(&mailbox)?;
        Ok(MailboxReader {
            mailbox,
            cursor,
            _lock: lock,
        })
    }

    /// The mailbox.
    pub fn mailbox(&self) -> &Mailbox {
        &self.mailbox
    }

    /// The committed offset: everything before it was delivered.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The complete messages after the cursor, not yet delivered. Reading does not move the
    /// cursor: [`commit`](Self::commit) does, once they were handed on.
    ///
    /// # Errors
    /// File errors.
    pub fn pending<T: DeserializeOwned>(&self) -> Result<Batch<T>, MailboxError> {
        self.mailbox.read_from(self.cursor, DEFAULT_MAX_READ_BYTES)
    }

    /// Records that everything before `end` (a [`Batch::end`]) was delivered, atomically and
    /// durably; those messages are never returned again.
    ///
    /// # Errors
    /// [`MailboxError::BadCursor`] for an `end` before the cursor; file errors (the cursor is
    /// then unchanged).
    pub fn commit(&mut self, end: u64) -> Result<(), MailboxError> {
        if end < self.cursor {
            return Err(MailboxError::BadCursor {
                path: self.mailbox.sibling("cursor"),
                reason: format!("commit of {end} before the cursor {}", self.cursor),
            });
        }
        if end == self.cursor {
            return Ok(());
        }
        write_cursor(&self.mailbox.sibling("cursor"), end)?;
        self.cursor = end;
        Ok(())
    }
}

fn read_cursor(mailbox: &Mailbox) -> Result<u64, MailboxError> {
    let path = mailbox.sibling("cursor");
    let bad = |reason: String| MailboxError::BadCursor {
        path: path.clone(),
        reason,
    };
    let text = match crate::open::read_untrusted(&path, 64) {
        Ok(bytes) => String::from_utf8(bytes).map_err(|e| bad(e.to_string()))?,
        Err(OutputError::NotFound { .. }) => return Ok(0),
        Err(error) => return Err(error.into()),
    };
    let cursor: u64 = text.trim().parse().map_err(|_| bad(format!("{text:?}")))?;
    let len = std::fs::metadata(&mailbox.path).map_or(0, |m| m.len());
    if cursor > len {
        return Err(bad(format!("offset {cursor} past the end ({len} bytes)")));
    }
    Ok(cursor)
}

/// Temporary file, `fsync`, `rename`: a reader sees the old cursor or the new one.
fn write_cursor(path: &Path, cursor: u64) -> Result<(), MailboxError> {
    let tmp = path.with_extension("cursor.tmp");
    let write = || -> std::io::Result<()> {
        let _ = std::fs::remove_file(&tmp);
        let mut file = crate::open::create_output_file(&tmp).map_err(std::io::Error::other)?;
        file.write_all(cursor.to_string().as_bytes())?;
        file.sync_data()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| OutputError::from_io(path, e).into())
}
