//! Entries of a list directory that are not read: the list directory is untrusted input.
//!
//! Agents and the reference harness write a list directory directly, so anything may stand at
//! a name this crate reads: a FIFO (whose open would block), a symlink (to `/etc/passwd`, to a
//! directory), a directory, a socket, a device, a sparse file of a terabyte, a name such as
//! `0.json`, `-1.json` or `18446744073709551616.json`. Every such entry is refused with an
//! [`EntryFault`] before anything is read from it, skipped with a warning by every reader,
//! and named by [`crate::TaskList::doctor`], which (with `fix`) moves the entries that cannot
//! hold a task into [`QUARANTINE_DIR`]. A reader reports each such entry (or unreadable line
//! of a log) as a [`FileProblem`].
//!
//! It names no other module of the crate: the error type holds an [`EntryFault`], so the
//! bound on task ids that a fault names ([`MAX_TASK_ID`]) is defined here too.

use std::fmt;

use rustix::fs::FileType;
use serde::{Deserialize, Serialize};

/// The largest task id, 2^53 − 1 (the reference's ids are JavaScript numbers, exact up to
/// here): defined here, below [`crate::TaskId`] (whose [`crate::TaskId::MAX`] it is), because an
/// [`EntryFault::InvalidId`] names it and the crate's error type holds entry faults.
pub(crate) const MAX_TASK_ID: u64 = (1 << 53) - 1;

/// The directory, inside the list directory, where `doctor --fix` moves the entries that can
/// never be a task (an entry keeps its name, or gets a `.{n}` suffix if the name is taken).
/// The reference reads only `{digits}.json` in the list directory, so it ignores it.
pub const QUARANTINE_DIR: &str = ".quarantine";

/// What stands at a name instead of a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EntryKind {
    /// A symbolic link (never followed, whatever it points to).
    Symlink,
    /// A directory.
    Directory,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Something the system does not name.
    Unknown,
}

impl EntryKind {
    /// The kind of a file type that is not a regular file (`None` for a regular file).
    pub(crate) fn of(file_type: FileType) -> Option<Self> {
        Some(match file_type {
            FileType::RegularFile => return None,
            FileType::Symlink => Self::Symlink,
            FileType::Directory => Self::Directory,
            FileType::Fifo => Self::Fifo,
            FileType::Socket => Self::Socket,
            FileType::CharacterDevice => Self::CharDevice,
            FileType::BlockDevice => Self::BlockDevice,
            FileType::Unknown => Self::Unknown,
        })
    }
}

impl From<task_output::FileKind> for EntryKind {
    fn from(kind: task_output::FileKind) -> Self {
        use task_output::FileKind;
        match kind {
            FileKind::Directory => Self::Directory,
            FileKind::Fifo => Self::Fifo,
            FileKind::CharDevice => Self::CharDevice,
            FileKind::BlockDevice => Self::BlockDevice,
            FileKind::Socket => Self::Socket,
            FileKind::Symlink => Self::Symlink,
            _ => Self::Unknown,
        }
    }
}

impl fmt::Display for EntryKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Symlink => "symlink",
            Self::Directory => "directory",
            Self::Fifo => "FIFO",
            Self::Socket => "socket",
            Self::CharDevice => "character device",
            Self::BlockDevice => "block device",
            Self::Unknown => "file of unknown type",
        })
    }
}

/// Why an entry of a list directory (or a line of one of its logs) is not read as what it is
/// named after.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum EntryFault {
    /// Not a regular file: refused without reading (opened `O_NOFOLLOW|O_NONBLOCK`, so a
    /// symlink is never followed and a FIFO never waited on).
    #[error("it is a {kind}, not a regular file")]
    NotRegularFile {
        /// What is there instead.
        kind: EntryKind,
    },
    /// Not a directory where one is expected (the inbox directory): never followed if it is
    /// a symlink.
    #[error("it is a {}, not a directory", kind.map_or_else(|| "regular file".to_owned(), |kind| kind.to_string()))]
    NotADirectory {
        /// What is there instead (`None`: a regular file).
        kind: Option<EntryKind>,
    },
    /// Larger than the limit for its kind of file ([`crate::StoreConfig::max_task_file_bytes`],
    /// [`crate::StoreConfig::max_log_bytes`]): not read.
    #[error("it holds {size} bytes, over the {limit}-byte limit")]
    TooLarge {
        /// Its size (at least `limit + 1` if it grew while read).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Named like a task file (`{digits}.json`, `-{digits}.json`) without being one: the id is
    /// 0, negative, has a leading zero or is beyond [`crate::TaskId::MAX`] (the reference's ids are
    /// JavaScript numbers, exact up to 2^53 − 1).
    #[error("its name is not a task id from 1 to {max}", max = MAX_TASK_ID)]
    InvalidId,
    /// It could not be opened (permission denied).
    #[error("it cannot be opened: {message}")]
    Unreadable {
        /// The system's message.
        message: String,
    },
    /// Its contents do not parse (or a task file holds another task's id).
    #[error("{message}")]
    Malformed {
        /// What the parser said.
        message: String,
    },
}

impl EntryFault {
    /// Whether the entry may still hold a task that could not be read now (a malformed file
    /// may be one caught half written; an unreadable one may be fine for its owner). Such an
    /// entry is reported and left where it is; every other entry can never be a task, and
    /// `doctor --fix` moves it into [`QUARANTINE_DIR`].
    pub fn may_hold_a_task(&self) -> bool {
        matches!(self, Self::Unreadable { .. } | Self::Malformed { .. })
    }
}

/// An entry of the list that could not be read as what it is named after: a task file (or an
/// entry named like one) that is malformed, torn, not a regular file or too large, or a line of
/// the audit log. It is skipped (with a warning) and the rest of the list still loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    /// The entry's name inside the list directory (`{id}.json`, `0.json`,
    /// `.events.jsonl:{line}`; `{id}.json` or `task_audit:{seq}` on PostgreSQL).
    pub file: String,
    /// What is wrong with it.
    pub fault: EntryFault,
}

impl FileProblem {
    /// A problem of the entry `file`, logged as a warning (it is skipped).
    pub(crate) fn skipped(file: String, fault: EntryFault) -> Self {
        tracing::warn!(%file, %fault, "skipping an entry of the list that is not read");
        Self { file, fault }
    }
}

impl std::fmt::Display for FileProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.file, self.fault)
    }
}

/// Whether `name` looks like a task file (`{digits}.json` or `-{digits}.json`), whether or not
/// its id is valid.
pub(crate) fn looks_like_a_task_file(name: &str) -> bool {
    name.strip_suffix(".json")
        .map(|stem| stem.strip_prefix('-').unwrap_or(stem))
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_like_task_files_are_recognised_whatever_their_id() {
        for name in [
            "1.json",
            "0.json",
            "-1.json",
            "01.json",
            "18446744073709551616.json",
        ] {
            assert!(looks_like_a_task_file(name), "{name}");
        }
        for name in [
            "a.json",
            ".json",
            "-.json",
            "1.jsonl",
            "1",
            ".1.json",
            "1.json.lock",
        ] {
            assert!(!looks_like_a_task_file(name), "{name}");
        }
    }

    #[test]
    fn faults_say_what_is_wrong() {
        let fifo = EntryFault::NotRegularFile {
            kind: EntryKind::Fifo,
        };
        assert_eq!(fifo.to_string(), "it is a FIFO, not a regular file");
        assert!(!fifo.may_hold_a_task());
        assert_eq!(
            EntryFault::InvalidId.to_string(),
            "its name is not a task id from 1 to 9007199254740991"
        );
        let json = serde_json::to_value(&fifo).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"reason": "not_regular_file", "kind": "fifo"})
        );
    }
}
