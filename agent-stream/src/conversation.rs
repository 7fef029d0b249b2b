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
//! use agent_stream::conversation::{Entry, entries};
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
}
