//! An agent's conversation as a person reads it, whatever wrote the transcript: what the user
//! said, what the agent said, each tool it used (with the activity the reference shows) and why
//! one failed, errors, and how each turn ended.
//!
//! Every agent-like task keeps its conversation as a transcript of JSON lines in one of the
//! formats of [`crate::format`]: an agent or the main session (its CLI's stream), a teammate, a
//! dream, a workflow's agents, and a remote agent (the sessions API's events, which are Claude's
//! stream-json). The format is detected from the lines ([`DetectingParser`]), so one reader
//! serves them all.
//!
//! ```
//! use task_agent::conversation::{Entry, entries};
//!
//! let transcript = concat!(
//!     r#"{"type":"system","subtype":"init","session_id":"s1"}"#, "\n",
//!     r#"{"type":"user","message":{"role":"user","content":"count the files"}}"#, "\n",
//!     r#"{"type":"assistant","message":{"content":[{"type":"text","text":"There are 3."}]}}"#, "\n",
//! );
//! let said: Vec<String> = entries(transcript.as_bytes()).iter().map(Entry::to_string).collect();
//! assert_eq!(said, ["> count the files\n", "There are 3.\n"]);
//! ```

use std::fmt;
use std::path::Path;

use task_output::OutputError;
use task_output::read::{DEFAULT_MAX_READ_BYTES, read_delta};

use crate::event::{AgentEvent, TurnOutcome};
use crate::format::{DetectingParser, LineParser};

/// The longest a failed tool's reason is shown (in characters), on one line.
const REASON_CHARS: usize = 200;

/// One entry of a conversation.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Entry {
    /// A user turn's text.
    User(String),
    /// What the agent said.
    Said(String),
    /// A tool use began: what it does ("Running ls", "Reading README.md").
    Tool(String),
    /// A tool use failed, with the CLI's reason when it gave one.
    ToolFailed(Option<String>),
    /// An error outside any tool, in the CLI's words.
    Error(String),
    /// A turn ended.
    Ended(TurnOutcome),
    /// A line that is no event (a CLI's plain text, a malformed line), as it is.
    Line(String),
}

impl fmt::Display for Entry {
    /// The entry as lines of text, each ending in a newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::User(text) => text.lines().try_for_each(|line| writeln!(f, "> {line}")),
            Entry::Said(text) | Entry::Line(text) => writeln!(f, "{text}"),
            Entry::Tool(activity) => writeln!(f, "  → {activity}"),
            Entry::ToolFailed(None) => writeln!(f, "    (the tool failed)"),
            Entry::ToolFailed(Some(reason)) => {
                writeln!(f, "    (the tool failed: {})", one_line(reason))
            }
            Entry::Error(message) => writeln!(f, "  ! {}", one_line(message)),
            Entry::Ended(TurnOutcome::Success { result }) => {
                writeln!(f, "✓ {}", result.as_deref().unwrap_or("done"))
            }
            Entry::Ended(outcome) => writeln!(f, "✗ {}", outcome.error_text().unwrap_or_default()),
        }
    }
}

/// `text` on one line: its lines joined with ` ⏎ `, cut at [`REASON_CHARS`] characters.
fn one_line(text: &str) -> String {
    let joined = text.trim().lines().collect::<Vec<_>>().join(" ⏎ ");
    match joined.char_indices().nth(REASON_CHARS) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
}

/// Reads a transcript one line at a time.
#[derive(Default)]
pub struct Conversation {
    parser: DetectingParser,
    events: Vec<AgentEvent>,
}

impl fmt::Debug for Conversation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conversation").finish_non_exhaustive()
    }
}

impl Conversation {
    /// Appends the entries of one transcript line (given without its newline) to `out`:
    /// nothing for events of no interest to a reader (init, usage, a tool's success, unknown
    /// types), the line as it is when it is no event.
    pub fn read_line(&mut self, line: &[u8], out: &mut Vec<Entry>) {
        self.events.clear();
        if self.parser.parse_line(line, &mut self.events).is_err() {
            out.push(Entry::Line(String::from_utf8_lossy(line).into_owned()));
            return;
        }
        out.extend(self.events.drain(..).filter_map(entry));
    }

    /// The transcript ended: appends what the parser still held (a message whose fragments
    /// were not followed by anything).
    pub fn finish(&mut self, out: &mut Vec<Entry>) {
        self.events.clear();
        self.parser.finish(&mut self.events);
        out.extend(self.events.drain(..).filter_map(entry));
    }
}

/// The entry an event shows as, if any.
fn entry(event: AgentEvent) -> Option<Entry> {
    Some(match event {
        AgentEvent::UserMessage(text) => Entry::User(text),
        AgentEvent::Text(text) => Entry::Said(text),
        AgentEvent::ToolStarted(tool) => {
            Entry::Tool(crate::activity::description(&tool.name, &tool.input).unwrap_or(tool.name))
        }
        AgentEvent::ToolFinished {
            is_error: true,
            reason,
            ..
        } => Entry::ToolFailed(reason),
        AgentEvent::Error { message } => Entry::Error(message),
        AgentEvent::TurnEnded(outcome) => Entry::Ended(outcome),
        _ => return None,
    })
}

/// Every entry of a whole transcript (its last line may lack its newline).
pub fn entries(transcript: &[u8]) -> Vec<Entry> {
    let mut conversation = Conversation::default();
    let mut out = Vec::new();
    for line in transcript.split(|&b| b == b'\n') {
        if !line.is_empty() {
            conversation.read_line(line, &mut out);
        }
    }
    conversation.finish(&mut out);
    out
}

/// The end of the transcript at `path` read as a conversation: the entries of its last
/// [`DEFAULT_MAX_READ_BYTES`] (from the first whole line there), and whether earlier bytes
/// were left out. A missing file is an error; an empty one, no entries.
///
/// # Errors
/// The file cannot be opened (or is a symlink) or read.
pub fn tail_entries(path: &Path) -> Result<(Vec<Entry>, bool), OutputError> {
    let len = std::fs::symlink_metadata(path)
        .map_err(|e| OutputError::from_io(path, e))?
        .len();
    let start = len.saturating_sub(DEFAULT_MAX_READ_BYTES as u64);
    let window = read_delta(path, start, DEFAULT_MAX_READ_BYTES)?.bytes;
    let whole_lines = if start == 0 {
        &window[..]
    } else {
        memchr::memchr(b'\n', &window).map_or(&[][..], |cut| &window[cut + 1..])
    };
    Ok((entries(whole_lines), start > 0))
}

/// The last `n` entries of the transcript at `path` (see [`tail_entries`]), as text.
///
/// # Errors
/// As [`tail_entries`].
pub fn last_entries_text(path: &Path, n: usize) -> Result<String, OutputError> {
    let (entries, _) = tail_entries(path)?;
    Ok(text(&entries[entries.len().saturating_sub(n)..]))
}

/// The end of the transcript at `path` as text, after a line saying that earlier entries were
/// left out when the file is longer than [`DEFAULT_MAX_READ_BYTES`].
///
/// # Errors
/// As [`tail_entries`].
pub fn tail_text(path: &Path) -> Result<String, OutputError> {
    let (entries, cut) = tail_entries(path)?;
    let mut out = String::new();
    if cut {
        out.push_str("[earlier entries of the conversation omitted]\n");
    }
    out.push_str(&text(&entries));
    Ok(out)
}

/// The end of the conversation at `path` as a model reads a task's output (SPEC §4):
/// [`tail_text`], truncated to `TASK_MAX_OUTPUT_LENGTH` with the `[Truncated. Full output: …]`
/// header. A transcript that does not exist yet is an empty conversation.
///
/// # Errors
/// As [`tail_entries`], but for a missing file.
pub fn for_model(path: &Path) -> Result<String, OutputError> {
    let text = match tail_text(path) {
        Err(OutputError::NotFound { .. }) => String::new(),
        other => other?,
    };
    let limit = task_output::format::max_output_length_from_env();
    Ok(task_output::format::format_for_model(&text, path, limit))
}

/// Entries as text, one after another.
pub fn text(entries: &[Entry]) -> String {
    entries.iter().map(Entry::to_string).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_long_or_multi_line_reason_is_shown_on_one_cut_line() {
        let reason = format!("first\nsecond\n{}", "x".repeat(500));
        let shown = Entry::ToolFailed(Some(reason)).to_string();
        assert!(shown.starts_with("    (the tool failed: first ⏎ second ⏎ xxx"));
        assert_eq!(shown.lines().count(), 1);
        assert!(shown.chars().count() < REASON_CHARS + 40);
    }

    #[test]
    fn lines_that_are_no_events_are_kept_as_they_are() {
        let got = entries(
            b"plain text\n{\"type\":\"system\",\"subtype\":\"init\",\"session_id\":\"s\"}\n",
        );
        assert_eq!(got, [Entry::Line("plain text".into())]);
    }

    #[test]
    fn the_tail_starts_at_a_whole_line_and_says_it_left_some_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.output");
        let line = r#"{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]}}"#;
        let mut body = String::from(r#"{"type":"system","subtype":"init","session_id":"s"}"#);
        body.push('\n');
        while body.len() <= DEFAULT_MAX_READ_BYTES {
            body.push_str(line);
            body.push('\n');
        }
        std::fs::write(&path, &body).unwrap();
        let (entries, cut) = tail_entries(&path).unwrap();
        assert!(cut);
        assert!(entries.iter().all(|e| *e == Entry::Said("hi".into())));
        assert_eq!(last_entries_text(&path, 2).unwrap(), "hi\nhi\n");
        assert!(tail_text(&path).unwrap().starts_with("[earlier entries"));
    }
}
