//! The output of a task that holds a conversation ([`TaskType::holds_conversation`]: an agent,
//! the main session, a workflow's agents, a teammate, a dream, a remote agent) as a person
//! reads it ([`agent_stream::conversation`]): what the user and the agent said, each tool it used
//! and why one failed, how each turn ended, and how the task stopped when the transcript does
//! not say it ([`end_note`]: a budget, a kill). This is the one view of an agent a person gets:
//! `tasks output` (`--json` and byte ranges excepted), `tasks output --follow`, `tasks wait
//! --follow`, `tasks run|agent --wait` on a terminal ([`follow_output`](crate::cli::stream_cmd::follow_output)), and `tasks top`'s
//! pane and pager.
//!
//! [`TaskType::holds_conversation`]: task_core::TaskType::holds_conversation

use std::io::BufRead;
use std::path::Path;

use crate::conversation as transcript_file;
use crate::conversation::last_entries_text;
use agent_stream::conversation::{self, Conversation, Entry};
use task_core::{BudgetLimit, EndReason, TaskId};
use task_output::OutputError;
use task_session::record::TaskRecord;
use task_session::session::Session;

use crate::cli::error::{CliError, Result};
use crate::cli::render;

/// How a task stopped, when its transcript cannot say it: the last line of its conversation
/// (`✗ stopped: --max-turns 10 reached`). A budget, a time limit, a kill or a supervisor's
/// death end an agent from outside its CLI; an end the CLI reported (a result, an error) is in
/// the transcript already.
pub fn end_note(task: &TaskRecord) -> Option<String> {
    let why = match task.end_reason()? {
        EndReason::BudgetExceeded { limit, used, max } => {
            let time = |ms: u64| task_core::human_duration(std::time::Duration::from_millis(ms));
            match limit {
                BudgetLimit::Turns => format!("--max-turns {max} reached"),
                BudgetLimit::Tokens => format!("--max-tokens {max} reached ({used} used)"),
                BudgetLimit::Time => format!("--timeout {} reached", time(*max)),
                BudgetLimit::SessionTokens => {
                    format!("the session's agent_token_budget {max} reached ({used} used)")
                }
            }
        }
        EndReason::Killed => "killed".to_owned(),
        EndReason::TimedOut { .. }
        | EndReason::SupervisorDied { .. }
        | EndReason::ShutdownUnanswered { .. }
        | EndReason::OutputCapExceeded { .. } => reason_text(task)?,
        _ => return None,
    };
    Some(format!("✗ stopped: {why}\n"))
}

/// The end reason's own words.
fn reason_text(task: &TaskRecord) -> Option<String> {
    let reason = task.end_reason()?;
    Some(reason.stderr_note().unwrap_or_else(|| reason.short()))
}

/// Prints the end note of `id` ([`end_note`]) once it has ended, if it has one.
fn print_end_note(session: &Session, id: &TaskId) -> Result<()> {
    match end_note(&session.task(id)?) {
        Some(note) => render::out(&note),
        None => Ok(()),
    }
}

/// Writes the whole conversation of `id` to `out`, a line of the transcript at a time, then
/// its end note.
pub fn write_whole(
    session: &Session,
    id: &TaskId,
    mut out: impl FnMut(&str) -> Result<()>,
) -> Result<()> {
    let path = session.output_path(id);
    let file = match std::fs::File::open(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        other => Some(other.map_err(|e| CliError::io("read", &path, e))?),
    };
    if let Some(file) = file {
        let mut reader = Conversation::default();
        let mut entries = Vec::new();
        for line in std::io::BufReader::new(file).split(b'\n') {
            let line = line.map_err(|e| CliError::io("read", &path, e))?;
            reader.read_line(&line, &mut entries);
            write_entries(&mut entries, &mut out)?;
        }
        reader.finish(&mut entries);
        write_entries(&mut entries, &mut out)?;
    }
    match end_note(&session.task(id)?) {
        Some(note) => out(&note),
        None => Ok(()),
    }
}

/// Prints the whole conversation of `id`.
pub fn print_whole(session: &Session, id: &TaskId) -> Result<()> {
    write_whole(session, id, render::out)
}

/// Prints the last `n` entries of the conversation of `id`, then its end note.
pub fn print_last(session: &Session, id: &TaskId, n: usize) -> Result<()> {
    let path = session.output_path(id);
    let text = missing_is_empty(&path, last_entries_text(&path, n))?;
    render::out(&text)?;
    print_end_note(session, id)
}

/// The conversation of `id` as its model reads it ([`transcript_file::for_model`]).
pub fn for_model(session: &Session, id: &TaskId) -> Result<String> {
    let path = session.output_path(id);
    transcript_file::for_model(&path).map_err(|error| output_error(&path, error))
}

/// Follows the conversation of `id` from byte `offset` (the start of a line) until the task is
/// terminal and all of it was printed: each entry once its line is whole; then its end note.
pub(crate) fn follow(session: &Session, id: &TaskId, mut offset: u64, chunk: usize) -> Result<()> {
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
            print_entries(&mut entries)?;
            return print_end_note(session, id);
        }
        std::thread::sleep(session.config().poll_interval);
    }
}

/// Prints `entries` and empties it.
fn print_entries(entries: &mut Vec<Entry>) -> Result<()> {
    write_entries(entries, &mut render::out)
}

/// Writes `entries` to `out` and empties it.
fn write_entries(entries: &mut Vec<Entry>, out: &mut impl FnMut(&str) -> Result<()>) -> Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let text = conversation::text(entries);
    entries.clear();
    out(&text)
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
