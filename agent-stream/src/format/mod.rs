//! Parsers of the JSON event streams agent CLIs print, one object a line (SPEC §15).
//!
//! Each parser turns one line into zero or more [`AgentEvent`]s. A line of a type the parser
//! does not use yields nothing; a line that is not a JSON object is a [`LineError`], which
//! callers log and skip: neither is ever fatal.
//!
//! A parser keeps what it needs across lines: the fragments of a message not finished yet
//! (Gemini; [`LineParser::finish`] gives the last one when the stream ends), and the usage
//! totals reported so far. Codex and Gemini report running totals, not one request's usage;
//! their parsers emit the difference from the previous report ([`CodexParser`],
//! [`GeminiParser`]), so [`AgentEvent::Usage`] is always "used since the last usage event".
//! Fed the lines of the CLI's own session file ([`LineParser::parse_session_line`],
//! [`crate::session_file`]), which itemises every request, they count each request as one
//! message instead, exactly as SPEC §7's rule asks.

mod claude;
mod codex;
mod gemini;
mod totals;

use std::fmt;
use std::str::FromStr;

pub use claude::ClaudeParser;
pub use codex::CodexParser;
pub use gemini::GeminiParser;

use crate::event::AgentEvent;

/// Turns the lines of one CLI's event stream into normalised events.
pub trait LineParser: Send {
    /// Parses one line (without its newline), appending its events to `out`.
    ///
    /// # Errors
    /// [`LineError`] when the line is not a JSON object with a `type`; `out` is unchanged.
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) -> Result<(), LineError>;

    /// The stream ended (the CLI exited): appends the events of what the parser still holds,
    /// such as an assistant message whose fragments were not followed by anything else. The
    /// default holds nothing.
    fn finish(&mut self, _out: &mut Vec<AgentEvent>) {}

    /// Parses one line of the CLI's own record of the session (its session file, found with
    /// [`crate::session_file::SessionStore`]), appending the events it adds to `out`: the usage
    /// of each model request, which the stream reports only as running totals (Codex, Gemini).
    /// Lines may come before or after the stream's report of the same requests, and a line read
    /// twice counts once. The default (Claude, whose stream is per request) reads nothing.
    ///
    /// # Errors
    /// [`LineError`] when the line is not JSON of the file's shape; `out` is unchanged.
    fn parse_session_line(
        &mut self,
        _line: &[u8],
        _out: &mut Vec<AgentEvent>,
    ) -> Result<(), LineError> {
        Ok(())
    }
}

/// Why a line could not be read. Never fatal: the line stays in the transcript and is skipped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LineError {
    /// Not JSON, or JSON of an unexpected shape.
    #[error("malformed event line: {0}")]
    Malformed(#[from] serde_json::Error),
}

/// The `type` of the line the runner writes into a transcript before a turn whose CLI does not
/// show the user's message itself (Codex, which takes its prompt as an argument):
/// `{"type":"tasks.user","text":"…"}`. Every parser reads it as [`AgentEvent::UserMessage`];
/// [`CliFormat::detect`] does not take it for any CLI's line.
pub const USER_TURN_TYPE: &str = "tasks.user";

/// The line ([`USER_TURN_TYPE`]) that records a user turn of `text` in a transcript.
pub fn user_turn_line(text: &str) -> String {
    serde_json::json!({ "type": USER_TURN_TYPE, "text": text }).to_string()
}

/// The text of a [`USER_TURN_TYPE`] line; `None` for any other line.
fn user_turn(line: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Turn {
        #[serde(rename = "type")]
        kind: String,
        text: String,
    }
    memchr::memmem::find(line, USER_TURN_TYPE.as_bytes())?;
    serde_json::from_slice::<Turn>(line)
        .ok()
        .filter(|turn| turn.kind == USER_TURN_TYPE)
        .map(|turn| turn.text)
}

/// The event-stream formats the command runner understands. A closed set: a format added
/// here needs its runner's flags too, so a runner matches on every one.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum CliFormat {
    /// Claude Code: `claude -p … --output-format stream-json --verbose`.
    #[default]
    Claude,
    /// OpenAI Codex: `codex exec --json --skip-git-repo-check …`.
    Codex,
    /// Gemini CLI: `gemini --output-format stream-json --yolo -p …`.
    Gemini,
}

impl CliFormat {
    /// A fresh parser of this format (following the top-level agent of the stream).
    pub fn parser(self) -> Box<dyn LineParser> {
        match self {
            CliFormat::Claude => Box::new(ClaudeParser::default()),
            CliFormat::Codex => Box::new(CodexParser::default()),
            CliFormat::Gemini => Box::new(GeminiParser::default()),
        }
    }

    /// The format's name as the CLI front end spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            CliFormat::Claude => "claude",
            CliFormat::Codex => "codex",
            CliFormat::Gemini => "gemini",
        }
    }

    /// Guesses the format from the first line a CLI printed: Claude's `system`/`init`,
    /// Codex's `thread.started`, Gemini's `init`.
    pub fn detect(first_line: &[u8]) -> Option<CliFormat> {
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(rename = "type", borrow)]
            kind: std::borrow::Cow<'a, str>,
        }
        let head: Head<'_> = serde_json::from_slice(first_line).ok()?;
        match head.kind.as_ref() {
            "system" | "assistant" | "user" | "result" => Some(CliFormat::Claude),
            "init" | "message" | "tool_use" | "tool_result" => Some(CliFormat::Gemini),
            kind if kind.starts_with("thread.")
                || kind.starts_with("turn.")
                || kind.starts_with("item.") =>
            {
                Some(CliFormat::Codex)
            }
            _ => None,
        }
    }
}

impl fmt::Display for CliFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parser that detects the format from the first line it recognises ([`CliFormat::detect`])
/// and then parses like that format's; lines before it are skipped.
#[derive(Default)]
pub struct DetectingParser {
    inner: Option<Box<dyn LineParser>>,
}

impl fmt::Debug for DetectingParser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DetectingParser")
            .field("detected", &self.inner.is_some())
            .finish()
    }
}

impl LineParser for DetectingParser {
    fn parse_line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) -> Result<(), LineError> {
        if let Some(text) = user_turn(line) {
            out.push(AgentEvent::UserMessage(text));
            return Ok(());
        }
        if self.inner.is_none() {
            self.inner = CliFormat::detect(line).map(CliFormat::parser);
        }
        match &mut self.inner {
            Some(parser) => parser.parse_line(line, out),
            None => serde_json::from_slice::<serde::de::IgnoredAny>(line)
                .map(drop)
                .map_err(LineError::from),
        }
    }

    fn finish(&mut self, out: &mut Vec<AgentEvent>) {
        if let Some(parser) = &mut self.inner {
            parser.finish(out);
        }
    }

    fn parse_session_line(
        &mut self,
        line: &[u8],
        out: &mut Vec<AgentEvent>,
    ) -> Result<(), LineError> {
        match &mut self.inner {
            Some(parser) => parser.parse_session_line(line, out),
            None => Ok(()),
        }
    }
}

/// A name that is not one of `claude`, `codex`, `gemini`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown agent CLI format {0:?} (expected claude, codex or gemini)")]
pub struct UnknownFormat(pub String);

impl FromStr for CliFormat {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "claude" => Ok(CliFormat::Claude),
            "codex" => Ok(CliFormat::Codex),
            "gemini" => Ok(CliFormat::Gemini),
            other => Err(UnknownFormat(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_are_detected_from_their_first_line() {
        let claude = br#"{"type":"system","subtype":"init","session_id":"s"}"#;
        let codex = br#"{"type":"thread.started","thread_id":"t"}"#;
        let gemini = br#"{"type":"init","session_id":"g","model":"m"}"#;
        assert_eq!(CliFormat::detect(claude), Some(CliFormat::Claude));
        assert_eq!(CliFormat::detect(codex), Some(CliFormat::Codex));
        assert_eq!(CliFormat::detect(gemini), Some(CliFormat::Gemini));
        assert_eq!(CliFormat::detect(b"not json"), None);
        assert_eq!(CliFormat::detect(br#"{"type":"weird"}"#), None);
    }

    #[test]
    fn a_detecting_parser_follows_the_first_format_it_recognises() {
        let mut parser = DetectingParser::default();
        let mut out = Vec::new();
        parser
            .parse_line(br#"{"type":"weird"}"#, &mut out)
            .unwrap_or_default();
        assert!(parser.parse_line(b"garbage", &mut out).is_err());
        parser
            .parse_line(br#"{"type":"thread.started","thread_id":"t"}"#, &mut out)
            .unwrap_or_default();
        parser
            .parse_line(br#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"hi"}}"#, &mut out)
            .unwrap_or_default();
        assert_eq!(
            out,
            [
                AgentEvent::Init {
                    session_id: "t".into(),
                    model: None
                },
                AgentEvent::Text("hi".into())
            ]
        );
    }

    #[test]
    fn names_round_trip() {
        for format in [CliFormat::Claude, CliFormat::Codex, CliFormat::Gemini] {
            assert_eq!(format.as_str().parse::<CliFormat>(), Ok(format));
        }
        assert!("gpt".parse::<CliFormat>().is_err());
    }
}
