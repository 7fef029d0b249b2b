//! Per-recipient mailboxes: append-only JSONL files that any number of processes write to at
//! once, read by one consumer exactly once through a persistent byte-offset cursor.
//!
//! Layout, for a mailbox named `N` in directory `D`:
//! - `D/N.jsonl`: one JSON message a line, appended under an exclusive `flock` with one
//!   `write` per message (`O_APPEND|O_NOFOLLOW`, mode `0600`);
//! - `D/N.cursor`: the consumer's committed byte offset (decimal), replaced atomically
//!   (temporary file, `fsync`, `rename`);
//! - `D/N.reader`: the consumer lock (`flock`), so two consumers can never deliver the same
//!   message.
//!
//! **A killed writer never corrupts the mailbox.** A writer killed in the middle of its append
//! can leave at most one unterminated fragment at the end of the file. The next append, under
//! the lock, sees that the file does not end with a newline and terminates the fragment first,
//! so the fragment becomes one line of its own: readers skip it and report it in
//! [`Batch::skipped`]; every message before and after it is intact. A line without its newline
//! is never handed out (it may be a live writer's append in progress).
//!
//! **Exactly once.** [`MailboxReader::pending`] returns the complete messages after the
//! committed cursor; the consumer hands them on and then [`commit`](MailboxReader::commit)s
//! the batch's end. A consumer that dies between the two gets the batch again (nothing is
//! lost); one that commits never sees it again.
//!
//! ```
//! use serde_json::json;
//! use task_output::mailbox::Mailbox;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let inbox = Mailbox::open(dir.path(), "alice@team")?;
//! inbox.append(&json!({"from": "lead", "text": "hello"}))?;
//!
//! let mut reader = inbox.reader()?;
//! let batch = reader.pending::<serde_json::Value>()?;
//! assert_eq!(batch.messages[0].message["text"], "hello");
//! reader.commit(batch.end)?;
//! assert!(reader.pending::<serde_json::Value>()?.messages.is_empty());
//! # Ok(()) }
//! ```

mod append;
mod batch;
mod reader;
mod time;

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use batch::{Batch, Delivered, Skipped};
pub use reader::MailboxReader;
pub use time::rfc3339;

use crate::OutputError;

/// The largest message a mailbox takes, in bytes of JSON.
pub const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// The longest mailbox name.
pub const MAX_NAME_LEN: usize = 128;

/// Why a mailbox operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MailboxError {
    /// The name could become a path outside the mailbox directory, or is empty or too long.
    #[error(
        "invalid mailbox name {0:?}: use 1-128 characters from A-Z a-z 0-9 _ - . @, not starting with a dot"
    )]
    InvalidName(String),
    /// The message is larger than [`MAX_MESSAGE_BYTES`].
    #[error("message of {len} bytes is larger than the {MAX_MESSAGE_BYTES}-byte limit")]
    MessageTooLarge {
        /// Its size.
        len: usize,
    },
    /// The message could not be encoded as JSON.
    #[error("message could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
    /// Another consumer holds the mailbox.
    #[error("mailbox {} already has a reader", path.display())]
    ReaderBusy {
        /// The mailbox file.
        path: PathBuf,
    },
    /// The committed cursor is not a byte offset of the mailbox (corrupt, or the mailbox was
    /// truncated or replaced). Nothing was delivered.
    #[error("mailbox cursor {} is invalid: {reason}", path.display())]
    BadCursor {
        /// The cursor file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A file operation failed.
    #[error(transparent)]
    Output(#[from] OutputError),
}

/// One recipient's mailbox (see the [module documentation](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mailbox {
    path: PathBuf,
    sync: bool,
}

impl Mailbox {
    /// The mailbox `name` in `dir` (created if missing). Nothing else is created until the
    /// first append.
    ///
    /// # Errors
    /// [`MailboxError::InvalidName`] before any path is built; directory creation errors.
    pub fn open(dir: &Path, name: &str) -> Result<Self, MailboxError> {
        validate_name(name)?;
        std::fs::create_dir_all(dir).map_err(|e| OutputError::from_io(dir, e))?;
        Ok(Mailbox {
            path: dir.join(format!("{name}.jsonl")),
            sync: false,
        })
    }

    /// Whether each append is `fdatasync`ed before it returns (off by default: appends survive
    /// any process's death, not a power cut).
    #[must_use]
    pub fn with_sync(mut self, sync: bool) -> Self {
        self.sync = sync;
        self
    }

    /// The mailbox file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `message` as one line; returns the offset just past it. Safe against concurrent
    /// appends from any number of processes.
    ///
    /// # Errors
    /// [`MailboxError::Encode`], [`MailboxError::MessageTooLarge`], file errors
    /// ([`OutputError::SymlinkRefused`] if a symlink sits at the path).
    pub fn append<T: Serialize + ?Sized>(&self, message: &T) -> Result<u64, MailboxError> {
        let line = serde_json::to_vec(message)?;
        if line.len() > MAX_MESSAGE_BYTES {
            return Err(MailboxError::MessageTooLarge { len: line.len() });
        }
        append::append_line(&self.path, &line, self.sync)
    }

    /// The complete messages from byte `offset` on (at most about `max_bytes` of them).
    ///
    /// # Errors
    /// File errors; a missing mailbox is empty.
    pub fn read_from<T: DeserializeOwned>(
        &self,
        offset: u64,
        max_bytes: usize,
    ) -> Result<Batch<T>, MailboxError> {
        batch::read_batch(&self.path, offset, max_bytes)
    }

    /// The newest `n` messages, oldest first (lines that do not parse are left out).
    ///
    /// # Errors
    /// File errors; a missing mailbox is empty.
    pub fn recent<T: DeserializeOwned>(&self, n: usize) -> Result<Vec<T>, MailboxError> {
        match crate::read::last_lines(&self.path, n.saturating_add(1)) {
            Ok(lines) => {
                let parsed: Vec<T> = lines
                    .iter()
                    .filter_map(|line| serde_json::from_str(line).ok())
                    .collect();
                let skip = parsed.len().saturating_sub(n);
                Ok(parsed.into_iter().skip(skip).collect())
            }
            Err(OutputError::NotFound { .. }) => Ok(Vec::new()),
            Err(error) => Err(error.into()),
        }
    }

    /// Becomes this mailbox's one consumer, with its committed cursor.
    ///
    /// # Errors
    /// [`MailboxError::ReaderBusy`] while another reader (in any process) holds it;
    /// [`MailboxError::BadCursor`]; file errors.
    pub fn reader(&self) -> Result<MailboxReader, MailboxError> {
        MailboxReader::acquire(self.clone())
    }

    fn sibling(&self, extension: &str) -> PathBuf {
        self.path.with_extension(extension)
    }
}

/// Checks a mailbox name: `[A-Za-z0-9_.@-]{1,128}`, not starting with a dot.
///
/// # Errors
/// [`MailboxError::InvalidName`].
pub fn validate_name(name: &str) -> Result<(), MailboxError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@');
    if name.is_empty()
        || name.len() > MAX_NAME_LEN
        || name.starts_with('.')
        || !name.chars().all(allowed)
    {
        return Err(MailboxError::InvalidName(name.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_escape_the_directory_are_refused() {
        for bad in ["", "..", ".hidden", "a/b", "a\0b", "x y", &"n".repeat(129)] {
            assert!(validate_name(bad).is_err(), "{bad:?} accepted");
        }
        for good in ["alice@team", "team-lead@my_team", "a.b", "N1"] {
            assert!(validate_name(good).is_ok(), "{good:?} refused");
        }
    }
}
