//! Output files that are symlinks to transcripts.

use std::path::Path;

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
