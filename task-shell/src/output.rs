//! The few things the controls do with a task's output file besides handing it to the child.
//!
//! All of these are bounded (one `lstat`, one read of at most the stall tail, one short append),
//! so they run inline in the supervising task.

use std::io::Write;
use std::path::Path;

use task_output::OutputError;
use task_output::open::open_output_append;
use task_output::read::{read_delta, read_text_delta};

/// The current size of the output file, without following a symlink; 0 when it is gone.
pub(crate) fn output_size(path: &Path) -> u64 {
    path.symlink_metadata().map_or(0, |meta| meta.len())
}

/// The last `max_bytes` of output as text (starting on a character boundary).
pub(crate) fn output_tail(path: &Path, size: u64, max_bytes: u64) -> String {
    let from = size.saturating_sub(max_bytes);
    let max = usize::try_from(max_bytes).unwrap_or(usize::MAX);
    match read_text_delta(path, from, max) {
        Ok(delta) => delta.text,
        Err(error) => {
            tracing::warn!(path = %path.display(), %error, "could not read the output tail");
            String::new()
        }
    }
}

/// Appends `line` to the output file on a line of its own (SPEC: the text a command's stderr
/// would carry, such as `Command timed out after 2m 0s`).
pub(crate) fn append_line(path: &Path, line: &str) -> Result<(), OutputError> {
    let mut file = open_output_append(path)?;
    let size = file
        .metadata()
        .map_err(|err| OutputError::from_io(path, err))?
        .len();
    let needs_newline =
        size > 0 && read_delta(path, size - 1, 1).is_ok_and(|last| last.bytes.as_ref() != b"\n");
    let text = if needs_newline {
        format!("\n{line}\n")
    } else {
        format!("{line}\n")
    };
    file.write_all(text.as_bytes())
        .map_err(|err| OutputError::from_io(path, err))
}

/// Appends raw bytes (monitor events) to the output file through an already open handle.
pub(crate) fn append_bytes(
    file: &mut std::fs::File,
    path: &Path,
    bytes: &[u8],
) -> Result<(), OutputError> {
    file.write_all(bytes)
        .map_err(|err| OutputError::from_io(path, err))
}
