//! Following a growing transcript by byte-offset delta reads, parsing each complete line; and,
//! beside it, the CLI's own session file, whose per-request usage the stream has only as
//! totals (agent-stream's [`session_file`](agent_stream::session_file)).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_stream::session_file::SessionStore;
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
///
/// With a [`SessionStore`] ([`with_session_store`](Self::with_session_store)), the session
/// file of the session the stream names is found as soon as its init line is read, and it is
/// read to its end after each read of the transcript and before the transcript's new lines are
/// parsed, so that the records of the requests a report covers reach the parser before the
/// report (a CLI writes a request's record before it prints the report of its turn).
pub struct TranscriptTail {
    path: PathBuf,
    offset: u64,
    lines: JsonLines,
    parsed: Parsed,
    max_read_bytes: usize,
    session: Option<SessionSide>,
}

/// What the lines of a transcript (and of the CLI's session file) gave.
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
            .field("session", &self.session)
            .finish_non_exhaustive()
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
    lines: JsonLines,
    max_read_bytes: usize,
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
            lines: JsonLines::new(self.lines.max_line_bytes()),
            max_read_bytes: self.max_read_bytes,
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
        let (parsed, session) = (&mut self.parsed, &mut self.session);
        if let Some(side) = session.as_mut() {
            side.read(parsed);
        }
        self.lines
            .push(&delta.bytes, |line| transcript_line(parsed, session, line));
        Ok(delta.bytes.len())
    }

    /// Parses an unfinished last line as if it were complete (the writer has exited), reads
    /// the session file a last time, then takes the events the parser still held
    /// ([`LineParser::finish`]).
    pub fn finish(&mut self) {
        let (parsed, session) = (&mut self.parsed, &mut self.session);
        self.lines
            .finish(|line| transcript_line(parsed, session, line));
        if let Some(side) = session.as_mut() {
            side.read(parsed);
        }
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

/// Parses one line of the transcript; when it names the stream's session, that session's file
/// is looked for and read before the next line.
fn transcript_line(parsed: &mut Parsed, session: &mut Option<SessionSide>, line: Line<'_>) {
    if let Some(session_id) = parsed.take(line)
        && let Some(side) = session.as_mut()
    {
        side.found(session_id, parsed);
    }
}

impl Parsed {
    /// Parses `line` into events; the session it names, if it is the stream's init line.
    fn take(&mut self, line: Line<'_>) -> Option<String> {
        let Some(text) = line.text() else {
            self.malformed += 1;
            tracing::warn!(path = %self.path.display(), "transcript line longer than the limit skipped");
            return None;
        };
        if let Err(error) = self.parser.parse_line(text, &mut self.scratch) {
            self.malformed += 1;
            tracing::debug!(path = %self.path.display(), %error, "transcript line skipped");
            return None;
        }
        let session = self.scratch.iter().find_map(|event| match event {
            AgentEvent::Init { session_id, .. } => Some(session_id.clone()),
            _ => None,
        });
        self.events.extend(self.scratch.drain(..));
        session
    }
}

impl SessionSide {
    /// The stream named its session: its file is looked for (once per session) and read.
    fn found(&mut self, session_id: String, parsed: &mut Parsed) {
        if self.session_id.as_deref() == Some(session_id.as_str()) && self.path.is_some() {
            return;
        }
        self.path = self.store.locate(&session_id);
        tracing::debug!(session = %session_id, file = ?self.path, "agent CLI session file");
        self.session_id = Some(session_id);
        self.looks_left = SESSION_FILE_LOOKS;
        self.offset = 0;
        self.lines.clear();
        self.read(parsed);
    }

    /// Reads the session file to its end, giving its lines to the parser. A file that cannot
    /// be read is left: the usage then comes from the stream's totals.
    fn read(&mut self, parsed: &mut Parsed) {
        if self.path.is_none()
            && self.looks_left > 0
            && let Some(session_id) = &self.session_id
        {
            // Looked for again: a CLI may create it after its init line.
            self.looks_left -= 1;
            self.path = self.store.locate(session_id);
        }
        let Some(path) = &self.path else {
            return;
        };
        loop {
            let delta = match read_delta(path, self.offset, self.max_read_bytes) {
                Ok(delta) if !delta.bytes.is_empty() => delta,
                Ok(_) => return,
                Err(error) => {
                    tracing::debug!(path = %path.display(), %error, "agent CLI session file not read");
                    return;
                }
            };
            self.offset = delta.new_offset;
            let (parser, scratch, events) =
                (&mut parsed.parser, &mut parsed.scratch, &mut parsed.events);
            self.lines.push(&delta.bytes, |line| {
                if let Some(text) = line.text()
                    && let Err(error) = parser.parse_session_line(text, scratch)
                {
                    tracing::debug!(%error, "agent CLI session file line skipped");
                }
                events.extend(scratch.drain(..));
            });
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
