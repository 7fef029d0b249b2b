//! Following a growing transcript by byte-offset delta reads, parsing each complete line; and,
//! beside it, the CLI's own session file, whose per-request usage the stream has only as
//! totals (agent-stream's [`session_file`](agent_stream::session_file)).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_stream::session_file::SessionStore;
use task_output::OutputError;
use task_output::read::read_delta;

use crate::event::AgentEvent;
use crate::format::LineParser;

/// Reads a transcript from where it left off and turns its new lines into events.
///
/// Only the unread part of the file is ever read (at most `max_read_bytes` a call), and only an
/// unfinished last line is held in memory, up to `max_line_bytes`: a longer line is dropped
/// (and counted as malformed) rather than buffered.
///
/// With a [`SessionStore`] ([`with_session_store`](Self::with_session_store)), the session
/// file of the session the stream names is found as soon as its init line is read, and it is
/// read to its end after each read of the transcript and before the transcript's new lines are
/// parsed, so that the records of the requests a report covers reach the parser before the
/// report (a CLI writes a request's record before it prints the report of its turn).
pub struct TranscriptTail {
    path: PathBuf,
    offset: u64,
    lines: Lines,
    parser: Box<dyn LineParser>,
    events: VecDeque<AgentEvent>,
    scratch: Vec<AgentEvent>,
    malformed: u64,
    max_read_bytes: usize,
    session: Option<SessionSide>,
}

impl std::fmt::Debug for TranscriptTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptTail")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .field("malformed", &self.malformed)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

/// The lines of a file read in pieces: an unfinished last line held up to a bound, a longer
/// one dropped until its newline.
#[derive(Debug)]
struct Lines {
    partial: Vec<u8>,
    /// Dropping the rest of an over-long line until its newline.
    skipping: bool,
    max_line_bytes: usize,
    /// Held back from growing past this when a long line is done.
    keep_capacity: usize,
}

/// One line that [`Lines`] gives: whole, or dropped for its length.
enum Line<'a> {
    Whole(&'a [u8]),
    TooLong,
}

impl Lines {
    fn new(max_line_bytes: usize, keep_capacity: usize) -> Self {
        Lines {
            partial: Vec::new(),
            skipping: false,
            max_line_bytes,
            keep_capacity,
        }
    }

    /// Splits `bytes` into lines, giving each complete one to `each`.
    fn feed(&mut self, bytes: &[u8], mut each: impl FnMut(Line<'_>)) {
        let mut rest = bytes;
        while let Some(end) = memchr::memchr(b'\n', rest) {
            self.push(&rest[..end]);
            self.end(&mut each);
            rest = &rest[end + 1..];
        }
        self.push(rest);
    }

    /// The file ended: its unfinished last line, as if it were complete.
    fn flush(&mut self, each: impl FnMut(Line<'_>)) {
        if !self.partial.is_empty() || self.skipping {
            self.end(each);
        }
    }

    fn clear(&mut self) {
        self.partial.clear();
        self.skipping = false;
    }

    fn push(&mut self, bytes: &[u8]) {
        if self.skipping {
            return;
        }
        if self.partial.len() + bytes.len() > self.max_line_bytes {
            self.partial = Vec::new();
            self.skipping = true;
            return;
        }
        self.partial.extend_from_slice(bytes);
    }

    fn end(&mut self, mut each: impl FnMut(Line<'_>)) {
        if std::mem::take(&mut self.skipping) {
            each(Line::TooLong);
            return;
        }
        let line = trim(&self.partial);
        if !line.is_empty() {
            each(Line::Whole(line));
        }
        self.partial.clear();
        if self.partial.capacity() > self.keep_capacity {
            self.partial.shrink_to(self.keep_capacity);
        }
    }
}

/// The CLI's session file beside the transcript.
#[derive(Debug)]
struct SessionSide {
    store: SessionStore,
    /// The session the file was looked for, and the file once found.
    session_id: Option<String>,
    path: Option<PathBuf>,
    /// How many more times a file not found yet is looked for.
    looks_left: u32,
    offset: u64,
    lines: Lines,
}

/// How many reads look for a session file not found at the stream's init line (a CLI may
/// create it a little later); after that the usage comes from the stream's totals.
const SESSION_FILE_LOOKS: u32 = 64;

impl TranscriptTail {
    /// A reader of `path` from byte `offset`.
    pub fn new(
        path: impl Into<PathBuf>,
        offset: u64,
        parser: Box<dyn LineParser>,
        max_read_bytes: usize,
        max_line_bytes: usize,
    ) -> Self {
        let max_read_bytes = max_read_bytes.max(1);
        TranscriptTail {
            path: path.into(),
            offset,
            lines: Lines::new(max_line_bytes, max_read_bytes),
            parser,
            events: VecDeque::new(),
            scratch: Vec::new(),
            malformed: 0,
            max_read_bytes,
            session: None,
        }
    }

    /// Also reads the session file the CLI keeps in `store` (none: the transcript alone).
    pub fn with_session_store(mut self, store: Option<SessionStore>) -> Self {
        self.session = store.map(|store| SessionSide {
            store,
            session_id: None,
            path: None,
            looks_left: SESSION_FILE_LOOKS,
            offset: 0,
            lines: Lines::new(self.lines.max_line_bytes, self.max_read_bytes),
        });
        self
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
        self.malformed
    }

    /// The next parsed event, if one is waiting.
    pub fn pop(&mut self) -> Option<AgentEvent> {
        self.events.pop_front()
    }

    /// Reads what was appended since the last call; returns how many bytes were new.
    ///
    /// # Errors
    /// [`OutputError`] when the transcript cannot be read (missing, replaced by a shorter file).
    pub fn read_new(&mut self) -> Result<usize, OutputError> {
        let delta = read_delta(&self.path, self.offset, self.max_read_bytes)?;
        self.offset = delta.new_offset;
        self.read_session();
        let mut lines = std::mem::replace(&mut self.lines, Lines::new(0, 0));
        lines.feed(&delta.bytes, |line| self.transcript_line(line));
        self.lines = lines;
        Ok(delta.bytes.len())
    }

    /// Parses an unfinished last line as if it were complete (the writer has exited), reads
    /// the session file a last time, then takes the events the parser still held
    /// ([`LineParser::finish`]).
    pub fn finish(&mut self) {
        let mut lines = std::mem::replace(&mut self.lines, Lines::new(0, 0));
        lines.flush(|line| self.transcript_line(line));
        self.lines = lines;
        self.read_session();
        self.parser.finish(&mut self.scratch);
        self.events.extend(self.scratch.drain(..));
    }

    /// Parses everything the file holds now and drops the events: the parser learns the
    /// history (the usage totals an earlier run of the session reported) without it being
    /// reported again.
    ///
    /// # Errors
    /// [`OutputError`] when the transcript cannot be read.
    pub(crate) fn replay(&mut self) -> Result<(), OutputError> {
        while self.read_new()? > 0 {}
        self.events.clear();
        Ok(())
    }

    /// Goes on from byte `offset`, dropping unread events and an unfinished line; the parser
    /// keeps what it learnt.
    pub(crate) fn restart_at(&mut self, offset: u64) {
        self.offset = offset;
        self.events.clear();
        self.lines.clear();
    }

    fn transcript_line(&mut self, line: Line<'_>) {
        let line = match line {
            Line::Whole(line) => line,
            Line::TooLong => {
                self.malformed += 1;
                tracing::warn!(path = %self.path.display(), "transcript line longer than the limit skipped");
                return;
            }
        };
        if let Err(error) = self.parser.parse_line(line, &mut self.scratch) {
            self.malformed += 1;
            tracing::debug!(path = %self.path.display(), %error, "transcript line skipped");
            return;
        }
        let session = self.scratch.iter().find_map(|event| match event {
            AgentEvent::Init { session_id, .. } => Some(session_id.clone()),
            _ => None,
        });
        self.events.extend(self.scratch.drain(..));
        if let Some(session_id) = session {
            self.found_session(session_id);
        }
    }

    /// The stream named its session: its file is looked for (once per session) and read.
    fn found_session(&mut self, session_id: String) {
        let Some(side) = &mut self.session else {
            return;
        };
        if side.session_id.as_deref() == Some(session_id.as_str()) && side.path.is_some() {
            return;
        }
        side.path = side.store.locate(&session_id);
        tracing::debug!(session = %session_id, file = ?side.path, "agent CLI session file");
        side.session_id = Some(session_id);
        side.looks_left = SESSION_FILE_LOOKS;
        side.offset = 0;
        side.lines.clear();
        self.read_session();
    }

    /// Reads the session file to its end, giving its lines to the parser. A file that cannot
    /// be read is left: the usage then comes from the stream's totals.
    fn read_session(&mut self) {
        let Some(side) = &mut self.session else {
            return;
        };
        if side.path.is_none()
            && side.looks_left > 0
            && let Some(session_id) = &side.session_id
        {
            // Looked for again: a CLI may create it after its init line.
            side.looks_left -= 1;
            side.path = side.store.locate(session_id);
        }
        let Some(path) = &side.path else {
            return;
        };
        loop {
            let delta = match read_delta(path, side.offset, self.max_read_bytes) {
                Ok(delta) if !delta.bytes.is_empty() => delta,
                Ok(_) => return,
                Err(error) => {
                    tracing::debug!(path = %path.display(), %error, "agent CLI session file not read");
                    return;
                }
            };
            side.offset = delta.new_offset;
            let (parser, scratch, events) = (&mut self.parser, &mut self.scratch, &mut self.events);
            side.lines.feed(&delta.bytes, |line| {
                if let Line::Whole(line) = line
                    && let Err(error) = parser.parse_session_line(line, scratch)
                {
                    tracing::debug!(%error, "agent CLI session file line skipped");
                }
                events.extend(scratch.drain(..));
            });
        }
    }
}

fn trim(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    &line[start..]
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
        assert!(tail.lines.partial.capacity() <= 100);
    }
}

/// The wait between reads of a quiet transcript: 1 ms right after activity, doubling while
/// nothing new arrives, up to the configured poll period. A CLI that is writing is followed
/// closely; an idle one costs a read per period.
#[derive(Debug, Clone)]
pub(crate) struct PollBackoff {
    max: Duration,
    next: Duration,
}

impl PollBackoff {
    const MIN: Duration = Duration::from_millis(1);

    pub(crate) fn new(max: Duration) -> Self {
        PollBackoff {
            max,
            next: Self::MIN.min(max),
        }
    }

    /// New bytes arrived: poll closely again.
    pub(crate) fn reset(&mut self) {
        self.next = Self::MIN.min(self.max);
    }

    /// The wait before the next read; each call doubles the following one.
    pub(crate) fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(self.max);
        wait
    }
}
