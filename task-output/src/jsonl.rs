//! JSON lines: the one reader of newline-delimited JSON (records, journals, transcripts,
//! mailboxes, logs) in this workspace.
//!
//! [`JsonLines`] splits a stream that arrives in chunks (delta reads of a growing file, reads
//! of a pipe) into whole lines, holding only an unfinished last line, and never more than its
//! limit of it: a longer line is skipped as it streams by and handed over as
//! [`Content::Oversized`], so a line of any length costs at most the limit. A line ends at `\n`;
//! a `\r` before it is dropped (CRLF files); blank lines are passed over. An unfinished last
//! line is held until more arrives, and handed over by [`JsonLines::finish`] once the writer
//! is known to be done. [`Line::parse`] gives the typed outcome of a line:
//! the value, or [`LineError::Oversized`] / [`LineError::Malformed`] with its number.
//!
//! ```
//! use serde::Deserialize;
//! use task_output::jsonl::{JsonLines, LineError};
//!
//! #[derive(Debug, Deserialize, PartialEq)]
//! struct Event {
//!     n: u32,
//! }
//!
//! let mut lines = JsonLines::new(32);
//! let (mut events, mut problems) = (Vec::new(), Vec::new());
//! let mut take = |line: task_output::jsonl::Line<'_>| match line.parse::<Event>() {
//!     Ok(event) => events.push(event),
//!     Err(problem) => problems.push(problem),
//! };
//! lines.push(b"{\"n\":1}\r\n{\"n\"", &mut take);
//! lines.push(b":2}\nnot json\n", &mut take);
//! lines.push(format!("{{\"pad\":\"{}\"}}\n{{\"n\":3}}", "x".repeat(64)).as_bytes(), &mut take);
//! lines.finish(&mut take);
//! assert_eq!(events, [Event { n: 1 }, Event { n: 2 }, Event { n: 3 }]);
//! assert!(matches!(problems[0], LineError::Malformed { number: 3, .. }));
//! assert!(matches!(problems[1], LineError::Oversized { number: 4, len: 74, limit: 32 }));
//! ```

use serde::Deserialize;

/// The longest line a reader holds unless told otherwise: 4 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 4 << 20;

/// The memory kept for the next unfinished line once a longer one was handed over.
const KEPT_CAPACITY: usize = 64 * 1024;

/// A line of a JSON-lines stream, as [`JsonLines`] hands it over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line<'a> {
    /// Its number in the stream, from 1 (blank lines count).
    pub number: u64,
    /// The stream offset of its first byte.
    pub start: u64,
    /// The stream offset just past it: past its `\n`, or the end of the stream for a last line
    /// without one (offsets count from [`JsonLines::starting_at`]).
    pub end: u64,
    /// What it holds.
    pub content: Content<'a>,
}

/// What a line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content<'a> {
    /// Its bytes, without the `\n` or `\r\n` that ended it.
    Text(&'a [u8]),
    /// It was longer than the limit, and skipped without being held.
    Oversized {
        /// Its length, without the `\n`.
        len: u64,
        /// The limit it went past.
        limit: usize,
    },
}

/// Why a line is not a value (its words leave out the line's number: [`LineError::number`]).
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// The line was longer than the reader's limit, and skipped.
    #[error("{len} bytes, more than the {limit}-byte limit of a line")]
    Oversized {
        /// The line's number.
        number: u64,
        /// Its length.
        len: u64,
        /// The limit.
        limit: usize,
    },
    /// The line is not JSON of the expected shape.
    #[error("{source}")]
    Malformed {
        /// The line's number.
        number: u64,
        /// What the parser said.
        source: serde_json::Error,
    },
}

impl LineError {
    /// The number of the line.
    pub fn number(&self) -> u64 {
        match self {
            Self::Oversized { number, .. } | Self::Malformed { number, .. } => *number,
        }
    }
}

impl<'a> Line<'a> {
    /// The line's bytes, `None` for an oversized line.
    pub fn text(&self) -> Option<&'a [u8]> {
        match self.content {
            Content::Text(text) => Some(text),
            Content::Oversized { .. } => None,
        }
    }

    /// Parses the line as a `T`.
    ///
    /// # Errors
    /// [`LineError::Oversized`] for a line that was skipped, [`LineError::Malformed`] for one
    /// that is not a `T`.
    pub fn parse<T: Deserialize<'a>>(&self) -> Result<T, LineError> {
        match self.content {
            Content::Text(text) => {
                serde_json::from_slice(text).map_err(|source| LineError::Malformed {
                    number: self.number,
                    source,
                })
            }
            Content::Oversized { len, limit } => Err(LineError::Oversized {
                number: self.number,
                len,
                limit,
            }),
        }
    }
}

/// Splits a stream pushed in chunks into [`Line`]s, holding at most `max_line_bytes` of an
/// unfinished one (see the [module](self)).
#[derive(Debug, Clone)]
pub struct JsonLines {
    /// The unfinished line, when it started in an earlier chunk.
    partial: Vec<u8>,
    /// The length so far of an unfinished line past the limit, being skipped.
    skipping: Option<u64>,
    max_line_bytes: usize,
    /// Lines ended so far.
    number: u64,
    /// The stream offset where the unfinished line starts.
    start: u64,
    /// The stream offset just past the bytes pushed.
    offset: u64,
}

impl JsonLines {
    /// A reader that holds lines of at most `max_line_bytes`.
    pub fn new(max_line_bytes: usize) -> Self {
        Self {
            partial: Vec::new(),
            skipping: None,
            max_line_bytes,
            number: 0,
            start: 0,
            offset: 0,
        }
    }

    /// Counts [`Line::end`] from `offset` (where the first byte pushed stands in the stream).
    #[must_use]
    pub fn starting_at(self, offset: u64) -> Self {
        Self {
            offset,
            start: offset,
            ..self
        }
    }

    /// Takes the next `chunk` of the stream; calls `each` on every line it completes.
    pub fn push(&mut self, chunk: &[u8], mut each: impl FnMut(Line<'_>)) {
        let mut rest = chunk;
        while let Some(newline) = memchr::memchr(b'\n', rest) {
            self.offset += newline as u64 + 1;
            self.end_line(&rest[..newline], &mut each);
            rest = &rest[newline + 1..];
        }
        self.offset += rest.len() as u64;
        self.hold(rest);
    }

    /// The stream ended: hands over its unfinished last line, if any, as whole.
    pub fn finish(&mut self, mut each: impl FnMut(Line<'_>)) {
        if !self.partial.is_empty() || self.skipping.is_some() {
            self.end_line(&[], &mut each);
        }
    }

    /// Drops an unfinished line (the stream goes on elsewhere); numbering goes on.
    pub fn clear(&mut self) {
        self.partial.clear();
        self.skipping = None;
        self.start = self.offset;
    }

    /// The bytes pushed since the end of the last whole line (held or being skipped): the
    /// last whole line ends at the offset pushed up to, less these.
    pub fn pending(&self) -> u64 {
        self.skipping
            .unwrap_or_else(|| u64::try_from(self.partial.len()).unwrap_or(u64::MAX))
    }

    /// The longest line it holds.
    pub fn max_line_bytes(&self) -> usize {
        self.max_line_bytes
    }

    /// The memory held for an unfinished line.
    pub fn capacity(&self) -> usize {
        self.partial.capacity()
    }

    fn hold(&mut self, bytes: &[u8]) {
        if let Some(skipped) = &mut self.skipping {
            *skipped += bytes.len() as u64;
        } else if self.partial.len() + bytes.len() > self.max_line_bytes {
            self.skipping = Some((self.partial.len() + bytes.len()) as u64);
            self.partial = Vec::new();
        } else {
            self.partial.extend_from_slice(bytes);
        }
    }

    /// Ends the line made of what is held and `tail`.
    fn end_line(&mut self, tail: &[u8], each: &mut impl FnMut(Line<'_>)) {
        self.number += 1;
        let (number, start, end) = (self.number, self.start, self.offset);
        self.start = end;
        let skipped = self.skipping.take();
        let len = skipped.unwrap_or(self.partial.len() as u64) + tail.len() as u64;
        let limit = self.max_line_bytes;
        if skipped.is_some() || len > limit as u64 {
            self.partial.clear();
            let content = Content::Oversized { len, limit };
            each(Line {
                number,
                start,
                end,
                content,
            });
            return;
        }
        let text = if self.partial.is_empty() {
            trim(tail)
        } else {
            self.partial.extend_from_slice(tail);
            trim(&self.partial)
        };
        if !text.is_empty() {
            let content = Content::Text(text);
            each(Line {
                number,
                start,
                end,
                content,
            });
        }
        self.partial.clear();
        if self.partial.capacity() > KEPT_CAPACITY {
            self.partial.shrink_to(KEPT_CAPACITY);
        }
    }
}

/// Calls `each` on every line of `bytes`, a whole stream (its last line need not end with a
/// newline), holding nothing: lines longer than `max_line_bytes` are [`Content::Oversized`].
pub fn each_line(bytes: &[u8], max_line_bytes: usize, each: impl FnMut(Line<'_>)) {
    let mut lines = JsonLines::new(max_line_bytes);
    let mut each = each;
    lines.push(bytes, &mut each);
    lines.finish(&mut each);
}

/// A line without its `\r` and the white space around it (a blank line is empty).
fn trim(line: &[u8]) -> &[u8] {
    line.trim_ascii()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Every line of `chunks` pushed in turn: its number, end, and text (or `None`: oversized).
    fn split(chunks: &[&[u8]], max: usize) -> (Vec<(u64, u64, Option<String>)>, u64) {
        let mut lines = JsonLines::new(max).starting_at(100);
        let mut seen = Vec::new();
        let mut take = |line: Line<'_>| {
            let text = line.text().map(|t| String::from_utf8_lossy(t).into_owned());
            seen.push((line.number, line.end, text));
        };
        for chunk in chunks {
            lines.push(chunk, &mut take);
        }
        let pending = lines.pending();
        lines.finish(&mut take);
        (seen, pending)
    }

    #[test]
    fn lines_split_across_chunks_are_whole_and_crlf_and_blanks_are_dropped() {
        let (lines, pending) = split(&[b"a\r\n\n b", b"c \nd", b"", b"e\r\nf"], 16);
        let text = |s: &str| Some(s.to_owned());
        assert_eq!(
            lines,
            [
                (1, 103, text("a")),
                (3, 109, text("bc")),
                (4, 113, text("de")),
                (5, 114, text("f"))
            ]
        );
        assert_eq!(pending, 1, "the unfinished `f`");
    }

    #[test]
    fn an_oversized_line_is_skipped_whole_holding_nothing_of_it() {
        let mut lines = JsonLines::new(4);
        let mut seen = Vec::new();
        let mut take = |line: Line<'_>| seen.push((line.number, line.content.to_owned_text()));
        lines.push(b"ok\n0123", &mut take);
        lines.push(b"456789", &mut take);
        assert_eq!(lines.pending(), 10);
        assert_eq!(lines.capacity(), 0);
        lines.push(b"\nfine\n12345\n", &mut take);
        assert_eq!(
            seen,
            [
                (1, Ok("ok".to_owned())),
                (2, Err(10)),
                (3, Ok("fine".to_owned())),
                (4, Err(5))
            ]
        );
    }

    #[test]
    fn parse_gives_the_value_or_a_typed_problem_with_the_line_number() {
        let mut outcomes = Vec::new();
        each_line(b"1\n{\n[1,2]\n", 4, |line| {
            outcomes.push(line.parse::<u32>().map_err(|e| (e.number(), e.to_string())));
        });
        assert_eq!(outcomes[0].as_ref().unwrap(), &1);
        let (number, message) = outcomes[1].as_ref().unwrap_err();
        assert_eq!(*number, 2);
        assert!(message.contains("expected"), "{message}");
        let (number, message) = outcomes[2].as_ref().unwrap_err();
        assert_eq!(*number, 3);
        assert_eq!(message, "5 bytes, more than the 4-byte limit of a line");
    }

    impl Content<'_> {
        fn to_owned_text(self) -> Result<String, u64> {
            match self {
                Content::Text(text) => Ok(String::from_utf8_lossy(text).into_owned()),
                Content::Oversized { len, .. } => Err(len),
            }
        }
    }
}
