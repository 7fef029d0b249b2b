//! The `tasks` binary as a library: the session layer that makes tasks outlive the command that
//! started them, and (with the default `cli` feature) the CLI and MCP front ends over it.
//!
//! `tasks run` hands a start request to the session's supervisor, one daemon per session started
//! on demand ([`supervisor`]), which runs every task of the session in one process and mirrors
//! each task's state to `{id}.json` ([`record`]). Every other command reads those files
//! ([`session::Session`]); completions and events are delivered exactly once across processes by
//! atomic file claims ([`notice`]).
//!
//! Nothing in the session layer knows a task type. The supervisor holds task-core executors by
//! type and [`Launch`](task_core::Launch)ers by kind, registered by a [`engine::Wiring`]
//! function ([`wiring::standard`] for the `tasks` binary: shells and monitors). A harness with
//! task types of its own writes its own wiring, runs [`supervisor::run`] in a process of its own
//! and points its [`session::Session`] at it with
//! [`with_supervisor`](session::Session::with_supervisor); built with
//! `default-features = false`, this crate pulls in neither clap nor rmcp.
//!
//! # Example
//!
//! Reading a session from files alone (no supervisor is started by reads):
//!
//! ```
//! use task_cli::paths::SessionPaths;
//! use task_cli::session::Session;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let root = tempfile::tempdir()?;
//! let session = Session::open(SessionPaths::new(root.path(), "default")?)?;
//! assert!(session.tasks()?.tasks.is_empty());
//! assert!(session.drain_notifications()?.is_empty());
//! assert!(Session::parse_id("../etc").is_err());
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod commands;
#[cfg(feature = "cli")]
pub mod completions_cmd;
pub mod error;
#[cfg(feature = "cli")]
mod input_cmd;
#[cfg(feature = "cli")]
mod list_cmd;
#[cfg(feature = "cli")]
mod list_text;
#[cfg(feature = "cli")]
pub mod mcp;
pub mod pill;
#[cfg(feature = "cli")]
pub mod ps_cmd;
#[cfg(feature = "cli")]
mod remote_cmd;
mod remote_wiring;
pub mod render;
#[cfg(feature = "cli")]
pub mod serve;
pub mod settings;
#[cfg(feature = "cli")]
pub mod status_cmd;
#[cfg(feature = "cli")]
pub mod stream_cmd;
#[cfg(feature = "cli")]
pub mod team_cmd;
pub mod team_wiring;
#[cfg(feature = "cli")]
pub mod tidy_cmd;
#[cfg(feature = "cli")]
pub mod top;
#[cfg(feature = "cli")]
pub mod transcript;
pub mod wiring;
#[cfg(feature = "cli")]
mod workflow_cmd;

pub use error::{CliError, Result};
