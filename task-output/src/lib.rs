//! Append-only output files and cheap incremental reads of them.
//!
//! `task-output` is the byte layer of a task system: it knows paths and bytes, nothing of tasks,
//! so any program that needs "a growing log file and cheap incremental reads of it" can use it
//! alone.
//!
//! - [`backoff`]: [`Backoff`], exponential delays between retries and polls.
//! - [`jsonl`]: [`JsonLines`](jsonl::JsonLines), the one reader of JSON lines: whole lines
//!   from chunks, bounded, with a typed outcome for each.
//! - [`open`]: create and open output files with `O_NOFOLLOW` (and `O_EXCL` when creating), and
//!   hand a child process one fd for both its stdout and stderr.
//! - [`writer`]: [`DiskWriter`], a queue of chunks drained into one file handle, capped at 5 GiB
//!   by default.
//! - [`pipe`]: [`PipeOutput`], output kept in memory up to 8 MiB, then spilled to a disk writer.
//! - [`recent`]: [`RecentLines`], the last lines of a stream, bounded in lines and bytes.
//! - [`read`]: delta reads by byte offset, tails, last lines and progress tails, each costing
//!   what it returns rather than the file's size.
//! - [`format`](mod@format): truncation of text for a language model.
//! - [`utf8`]: the helpers that keep every piece of text whole code points.
//! - [`token`]: bearer token files (a private regular file, its first line), read alike by
//!   both ends of the sessions API.
//! - [`transcript`]: output paths that are symlinks to transcripts.
//! - [`mailbox`]: per-recipient append-only JSONL mailboxes, safe under concurrent writers in
//!   many processes, read exactly once through a committed cursor.
//!
//! # Example
//!
//! A child writes straight into the output file; the reader follows it with delta reads and
//! shows the end of it to a model.
//!
//! ```
//! use std::process::Command;
//! use task_output::{format, open, read};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("job.output");
//!
//! let (stdout, stderr) = open::child_stdio(&path)?;
//! let status = Command::new("sh")
//!     .args(["-c", "echo building; echo warning >&2; echo done"])
//!     .stdout(stdout)
//!     .stderr(stderr)
//!     .status()?;
//! assert!(status.success());
//!
//! let first = read::read_delta(&path, 0, 9)?;
//! assert_eq!(&first.bytes[..], b"building\n");
//! let rest = read::read_delta(&path, first.new_offset, read::DEFAULT_MAX_READ_BYTES)?;
//! assert_eq!(&rest.bytes[..], b"warning\ndone\n");
//!
//! assert_eq!(read::last_lines(&path, 2)?, ["warning", "done"]);
//! let text = read::read_tail(&path, read::DEFAULT_MAX_READ_BYTES)?;
//! let for_model = format::format_for_model(&text, &path, format::max_output_length_from_env());
//! assert!(for_model.ends_with("done\n"));
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod backoff;
mod error;
pub mod format;
pub mod jsonl;
mod lines;
pub mod mailbox;
pub mod open;
pub mod pipe;
pub mod read;
pub mod recent;
pub mod token;
pub mod transcript;
pub mod utf8;
pub mod writer;

pub use backoff::Backoff;
pub use error::{DirectoryProblem, FileKind, OutputError};
pub use pipe::{PipeConfig, PipeOutput};
pub use read::{Delta, ProgressTail, TextDelta};
pub use recent::RecentLines;
pub use writer::{DiskWriter, DiskWriterConfig};

#[cfg(test)]
mod tests {
    /// Public types can move between and be shared by threads (checked at compile time).
    #[test]
    fn public_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<super::OutputError>();
        send_sync::<super::DiskWriter>();
        send_sync::<super::PipeOutput>();
        send_sync::<super::Delta>();
        send_sync::<super::ProgressTail>();
    }
}
