//! Reading complete messages from an offset.

use std::path::Path;

use serde::de::DeserializeOwned;

use super::MailboxError;
use crate::OutputError;
use crate::jsonl::JsonLines;
use crate::read::read_delta;

/// A message and where it starts in the mailbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered<T> {
    /// The byte offset of its line.
    pub offset: u64,
    /// The message.
    pub message: T,
}

/// A line that is not a message (a killed writer's fragment, or foreign bytes), skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The byte offset of the line.
    pub offset: u64,
    /// Its length, without the newline.
    pub len: usize,
    /// Why it did not parse.
    pub error: String,
}

/// The complete messages of a read, in mailbox order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch<T> {
    /// The messages.
    pub messages: Vec<Delivered<T>>,
    /// Lines skipped because they are not messages.
    pub skipped: Vec<Skipped>,
    /// The offset just past the last complete line read: where the next read starts.
    pub end: u64,
}

/// Reads the complete lines from `offset` (about `max_bytes` of them; always at least one
/// whole line if one is there).
pub(super) fn read_batch<T: DeserializeOwned>(
    path: &Path,
    offset: u64,
    max_bytes: usize,
) -> Result<Batch<T>, MailboxError> {
    let mut batch = Batch {
        messages: Vec::new(),
        skipped: Vec::new(),
        end: offset,
    };
    let mut want = max_bytes.max(1);
    let delta = loop {
        let delta = match read_delta(path, offset, want) {
            Ok(delta) => delta,
            Err(OutputError::NotFound { .. }) if offset == 0 => return Ok(batch),
            Err(error) => return Err(error.into()),
        };
        // A line longer than the window: widen it until the line is whole or the file ends.
        if memchr::memchr(b'\n', &delta.bytes).is_some() || delta.bytes.len() < want {
            break delta;
        }
        want = want.saturating_mul(2);
    };
    let mut lines = JsonLines::new(usize::MAX).starting_at(offset);
    lines.push(&delta.bytes, |line| {
        let line_offset = line.start;
        match line.parse::<T>() {
            Ok(message) => batch.messages.push(Delivered {
                offset: line_offset,
                message,
            }),
            Err(error) => {
                tracing::warn!(path = %path.display(), offset = line_offset, %error,
                    "skipping a mailbox line that is not a message");
                batch.skipped.push(Skipped {
                    offset: line_offset,
                    // Without its newline.
                    len: usize::try_from(line.end - line.start - 1).unwrap_or(usize::MAX),
                    error: error.to_string(),
                });
            }
        }
    });
    batch.end = offset + delta.bytes.len() as u64 - lines.pending();
    Ok(batch)
}
