//! The output of a task that holds a conversation ([`TaskType::holds_conversation`]: an agent,
//! the main session, a workflow's agents, a teammate, a dream, a remote agent) as a person
//! reads it ([`agent_stream::conversation`]): what the user and the agent said, each tool it used
//! and why one failed, and how each turn ended. `tasks output` prints it so in every mode
//! (`--json` and byte ranges excepted), and `tasks top` shows it so.
//!
//! [`TaskType::holds_conversation`]: task_core::TaskType::holds_conversation

use std::io::BufRead;
use std::path::Path;

use agent_stream::conversation::{self, Conversation, Entry};
use task_agent::conversation::{self as transcript_file, last_entries_text};
use task_core::TaskId;
use task_output::OutputError;
use task_session::session::Session;

use crate::render;
use crate::{CliError, Result};

/// Prints the whole conversation of `id`, a line of the transcript at a time.
pub fn print_whole(session: &Session, id: &TaskId) -> Result<()> {
    let path = session.output_path(id);
    let file = match std::fs::File::open(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        other => other.map_err(|e| CliError::io("read", &path, e))?,
    };
    let mut reader = Conversation::default();
    let mut entries = Vec::new();
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| CliError::io("read", &path, e))?;
        reader.read_line(&line, &mut entries);
        print_entries(&mut entries)?;
    }
    reader.finish(&mut entries);
    print_entries(&mut entries)
}

/// Prints the last `n` entries of the conversation of `id`.
pub fn print_last(session: &Session, id: &TaskId, n: usize) -> Result<()> {
    let path = session.output_path(id);
    let text = missing_is_empty(&path, last_entries_text(&path, n))?;
    render::out(&text)
}

/// The conversation of `id` as its model reads it ([`transcript_file::for_model`]).
pub fn for_model(session: &Session, id: &TaskId) -> Result<String> {
    let path = session.output_path(id);
    transcript_file::for_model(&path).map_err(|error| output_error(&path, error))
}

/// Follows the conversation of `id` from byte `offset` (the start of a line) until the task is
/// terminal and all of it was printed: each entry once its line is whole.
pub fn follow(session: &Session, id: &TaskId, mut offset: u64, chunk: usize) -> Result<()> {
    let mut reader = Conversation::default();
    let mut entries = Vec::new();
    let mut partial = Vec::new();
    loop {
        // The status first, so that the last read sees everything written before the end.
        let ended = session.task(id)?.is_terminal();
        loop {
            let delta = session.read_delta(id, offset, chunk)?;
            if delta.bytes.is_empty() {
                break;
            }
            offset = delta.new_offset;
            partial.extend_from_slice(&delta.bytes);
            let whole = partial
                .iter()
                .rposition(|&b| b == b'\n')
                .map_or(0, |i| i + 1);
            for line in partial[..whole].split(|&b| b == b'\n') {
                if !line.is_empty() {
                    reader.read_line(line, &mut entries);
                }
            }
            partial.drain(..whole);
            print_entries(&mut entries)?;
        }
        if ended {
            if !partial.is_empty() {
                reader.read_line(&partial, &mut entries);
            }
            reader.finish(&mut entries);
            return print_entries(&mut entries);
        }
        std::thread::sleep(session.config().poll_interval);
    }
}

/// Prints `entries` and empties it.
fn print_entries(entries: &mut Vec<Entry>) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let text = conversation::text(entries);
    entries.clear();
    render::out(&text)
}

/// A transcript that does not exist yet reads as an empty conversation.
fn missing_is_empty(path: &Path, read: std::result::Result<String, OutputError>) -> Result<String> {
    match read {
        Ok(text) => Ok(text),
        Err(OutputError::NotFound { .. }) => Ok(String::new()),
        Err(error) => Err(output_error(path, error)),
    }
}

fn output_error(path: &Path, error: OutputError) -> CliError {
    match error {
        OutputError::Io { source, .. } => CliError::io("read", path, source),
        other => task_session::Error::Invalid(other.to_string()).into(),
    }
}
