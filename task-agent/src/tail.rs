//! Following a growing transcript by byte-offset delta reads, parsing each complete line.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use task_output::jsonl::{JsonLines, Line};
use task_output::read::read_delta;
use task_output::{Backoff, OutputError};

use crate::event::AgentEvent;
use crate::format::LineParser;

/// Reads a transcript from where it left off and turns its new lines into events.
///
/// Only the unread part of the file is ever read (at most `max_read_bytes` a call), and only an
/// unfinished last line is held in memory, up to `max_line_bytes` (task-output's
/// [`JsonLines`]): a longer line is dropped (and counted as malformed) rather than buffered.
pub struct TranscriptTail {
    path: PathBuf,
    offset: u64,
    lines: JsonLines,
    parsed: Parsed,
    max_read_bytes: usize,
}

/// What the lines of a transcript gave.
struct Parsed {
    path: PathBuf,
    parser: Box<dyn LineParser>,
    events: VecDeque<AgentEvent>,
    scratch: Vec<AgentEvent>,
    malformed: u64,
}

impl std::fmt::Debug for TranscriptTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptTail")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .field("malformed", &self.parsed.malformed)
            .finish_non_exhaustive()
    }
}

impl TranscriptTail {
    /// A reader of `path` from byte `offset`.
    pub fn new(
        path: impl Into<PathBuf>,
        offset: u64,
        parser: Box<dyn LineParser>,
        max_read_bytes: usize,
        max_line_bytes: usize,
    ) -> Self {
        let path = path.into();
        TranscriptTail {
            path: path.clone(),
            offset,
            lines: JsonLines::new(max_line_bytes),
            parsed: Parsed {
                path,
                parser,
                events: VecDeque::new(),
                scratch: Vec::new(),
                malformed: 0,
            },
            max_read_bytes: max_read_bytes.max(1),
        }
    }

    /// The transcript's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes consumed so far (complete lines and the held-back partial one).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Lines that could not be parsed (kept in the file, skipped here).
    pub fn malformed_lines(&self) -> u64 {
        self.parsed.malformed
    }

    /// The next parsed event, if one is waiting.
    pub fn pop(&mut self) -> Option<AgentEvent> {
        self.parsed.events.pop_front()
    }

    /// Reads what was appended since the last call; returns how many bytes were new.
    ///
    /// # Errors
    /// [`OutputError`] when the transcript cannot be read (missing, replaced by a shorter file).
    pub fn read_new(&mut self) -> Result<usize, OutputError> {
        let delta = read_delta(&self.path, self.offset, self.max_read_bytes)?;
        self.offset = delta.new_offset;
        self.lines.push(&delta.bytes, |line| self.parsed.take(line));
        Ok(delta.bytes.len())
    }

    /// Parses an unfinished last line as if it were complete (the writer has exited), then
    /// takes the events the parser still held ([`LineParser::finish`]).
    pub fn finish(&mut self) {
        self.lines.finish(|line| self.parsed.take(line));
        let parsed = &mut self.parsed;
        parsed.parser.finish(&mut parsed.scratch);
        parsed.events.extend(parsed.scratch.drain(..));
    }

    /// Parses everything the file holds now and drops the events: the parser learns the
    /// history (the usage totals an earlier run of the session reported) without it being
    /// reported again.
    ///
    /// # Errors
    /// [`OutputError`] when the transcript cannot be read.
    pub(crate) fn replay(&mut self) -> Result<(), OutputError> {
        while self.read_new()? > 0 {}
        self.parsed.events.clear();
        Ok(())
    }

    /// Goes on from byte `offset`, dropping unread events and an unfinished line; the parser
    /// keeps what it learnt.
    pub(crate) fn restart_at(&mut self, offset: u64) {
        self.offset = offset;
        self.parsed.events.clear();
        self.lines.clear();
    }
}

impl Parsed {
    fn take(&mut self, line: Line<'_>) {
        let Some(text) = line.text() else {
            self.malformed += 1;
            tracing::warn!(path = %self.path.display(), "transcript line longer than the limit skipped");
            return;
        };
        match self.parser.parse_line(text, &mut self.scratch) {
            Ok(()) => self.events.extend(self.scratch.drain(..)),
            Err(error) => {
                self.malformed += 1;
                tracing::debug!(path = %self.path.display(), %error, "transcript line skipped");
            }
        }
    }
}

/// The wait between reads of a quiet transcript: 1 ms right after activity, doubling while
/// nothing new arrives, up to the configured poll period. A CLI that is writing is followed
/// closely; an idle one costs a read per period.
pub(crate) fn poll_backoff(max: Duration) -> Backoff {
    Backoff::new(Duration::from_millis(1), max)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::io::Write;

    use super::*;
    use crate::format::CliFormat;

    #[test]
    fn lines_split_across_reads_are_parsed_once_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut file = std::fs::File::create(&path).unwrap();
        let mut tail = TranscriptTail::new(&path, 0, CliFormat::Claude.parser(), 7, 1 << 20);
        file.write_all(
            br#"{"type":"assistant","message":{"content":[{"type":"text","text":"a"}]}}"#,
        )
        .unwrap();
        while tail.read_new().unwrap() > 0 {}
        assert!(tail.pop().is_none());
        file.write_all(b"\nnot json\n").unwrap();
        while tail.read_new().unwrap() > 0 {}
        assert_eq!(tail.pop(), Some(AgentEvent::Text("a".into())));
        assert_eq!(tail.malformed_lines(), 1);
    }

    #[test]
    fn an_over_long_line_is_dropped_not_buffered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let long = format!(
            "{{\"type\":\"assistant\",\"pad\":\"{}\"}}\n",
            "x".repeat(500)
        );
        let ok = r#"{"type":"assistant","message":{"content":"b"}}"#;
        std::fs::write(&path, format!("{long}{ok}")).unwrap();
        let mut tail = TranscriptTail::new(&path, 0, CliFormat::Claude.parser(), 64, 100);
        while tail.read_new().unwrap() > 0 {}
        tail.finish();
        assert_eq!(tail.pop(), Some(AgentEvent::Text("b".into())));
        assert_eq!(tail.malformed_lines(), 1);
        assert!(tail.lines.capacity() <= 100);
    }
}
