//! The printer every command prints its result through, chosen once from the global flags
//! (`--json`): a command gives it the JSON value and the text a person reads, and it prints
//! the one its mode asks for.

use std::io;

use serde::Serialize;

use crate::cli::error::{CliError, Result};
use crate::cli::render;

/// How results are printed: text a person reads, or one JSON document (`--json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Printer {
    /// The text a person reads.
    Text,
    /// One JSON document on stdout (or one per line for a stream).
    Json,
}

impl Printer {
    /// The printer `--json` asks for.
    pub fn new(json: bool) -> Self {
        if json { Printer::Json } else { Printer::Text }
    }

    /// Whether results are JSON (for the modes that read or wait differently then).
    pub fn is_json(self) -> bool {
        self == Printer::Json
    }

    /// Prints `value` as one JSON line, or `text` as it is (nothing when it is empty).
    pub fn emit(self, value: &impl Serialize, text: &str) -> Result<()> {
        match self {
            Printer::Json => render::out(&json_line(value)?),
            Printer::Text => render::out(text),
        }
    }

    /// [`Printer::emit`], with a newline after `text` unless it is empty or has one.
    pub fn emit_line(self, value: &impl Serialize, text: &str) -> Result<()> {
        self.emit(value, &render::with_newline(text))
    }

    /// Prints `text` as it is in text mode; nothing in JSON mode.
    pub fn text(self, text: &str) -> Result<()> {
        match self {
            Printer::Json => Ok(()),
            Printer::Text => render::out(text),
        }
    }

    /// [`Printer::emit`] for what is delivered only once written out (a notification): every
    /// failure is returned, a closed pipe included.
    pub fn deliver(self, value: &impl Serialize, text: &str) -> io::Result<()> {
        match self {
            Printer::Json => {
                let line = json_line(value).map_err(io::Error::other)?;
                render::write_out(&line)
            }
            Printer::Text => render::write_out(text),
        }
    }
}

/// `value` as one line of JSON, newline included.
fn json_line(value: &impl Serialize) -> Result<String> {
    let text = serde_json::to_string(value)
        .map_err(|e| CliError::invalid(format!("cannot encode output: {e}")))?;
    Ok(format!("{text}\n"))
}
