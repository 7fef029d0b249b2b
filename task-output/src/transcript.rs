//! Output files that are symlinks to transcripts, and the stderr kept beside a transcript.

use std::path::{Path, PathBuf};

use crate::OutputError;

/// Initialises `output_path` as a symlink to `transcript_path`, so reading the output (with the
/// functions of [`crate::read`], which follow symlinks) reads the transcript, with no copy.
///
/// The transcript need not exist yet. A relative `transcript_path` is resolved from the
/// directory of `output_path`, as for any symlink. Fails with [`OutputError::AlreadyExists`] if
/// anything is at `output_path`; it is never replaced. Writers still refuse the link
/// ([`OutputError::SymlinkRefused`]), so output cannot be written through it into the transcript.
pub fn link_transcript(output_path: &Path, transcript_path: &Path) -> Result<(), OutputError> {
    std::os::unix::fs::symlink(transcript_path, output_path)
        .map_err(|err| OutputError::from_io(output_path, err))
}

/// The most bytes of an agent CLI's stderr kept beside its transcript ([`stderr_path`]); what
/// comes after is dropped, with one [`stderr_cut_notice`].
pub const MAX_KEPT_STDERR_BYTES: u64 = 8 * 1024 * 1024;

/// The file where the stderr of the CLI writing `transcript` is kept: beside it, with the
/// extension `stderr` (`agent-{id}.jsonl` → `agent-{id}.stderr`).
pub fn stderr_path(transcript: &Path) -> PathBuf {
    transcript.with_extension("stderr")
}

/// The line appended once to a kept stderr when it reaches [`MAX_KEPT_STDERR_BYTES`].
pub fn stderr_cut_notice() -> String {
    format!(
        "\n[stderr truncated: exceeded {}]\n",
        crate::writer::human_size(MAX_KEPT_STDERR_BYTES)
    )
}
