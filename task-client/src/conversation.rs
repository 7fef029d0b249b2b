//! An agent's conversation read from its transcript file (the task's output file): the end of
//! it, as entries, as text, and as a model reads a task's output. The view itself (entries from
//! lines, whatever CLI wrote them) is agent-stream's [`conversation`](agent_stream::conversation).

use std::path::Path;

pub use agent_stream::conversation::{Conversation, Entry, entries, text};
use task_output::OutputError;
use task_output::read::{DEFAULT_MAX_READ_BYTES, read_delta};

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

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
