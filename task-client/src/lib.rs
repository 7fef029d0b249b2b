//! The client side of the task system: what a front end (the `tasks` short commands, the MCP
//! server, the HTTP far end) needs to read and start tasks, with no executor linked. A task's
//! kind is a typed start request of [`task_protocol`](https://docs.rs/task-protocol); what the
//! task wrote is read from its output file. [`AsyncSession`] speaks the supervisor's wire
//! over tokio for async front ends (the MCP server).
//!
//! # Example
//!
//! The end of an agent's transcript, read as the conversation a person sees:
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let transcript = dir.path().join("a0000001.output");
//! std::fs::write(
//!     &transcript,
//!     concat!(
//!         r#"{"type":"user","message":{"role":"user","content":"count the files"}}"#, "\n",
//!         r#"{"type":"assistant","message":{"content":[{"type":"text","text":"There are 3."}]}}"#, "\n",
//!     ),
//! )?;
//! let said = task_client::conversation::last_entries_text(&transcript, 1)?;
//! assert_eq!(said, "There are 3.\n");
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

pub mod conversation;
pub mod session;
pub mod workflow;

pub use session::AsyncSession;
