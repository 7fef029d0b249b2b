//! The `tasks` binary as a library: its composition root and its front ends.
//!
//! The session layer (supervisor, client, records, exactly-once delivery) is the
//! [`task_session`] crate; this crate wires the standard executors into it ([`wiring::standard`]:
//! shells and monitors, agents, workflows, teammates, dreams, remote agents, each configured from
//! the session's `config.json` by [`settings`]) and holds the front ends over it (with the
//! default `cli` feature): the long commands, `tasks top`, the MCP server and `tasks serve`.
//! The short commands, which the `tasks` executable runs itself, are task-client's
//! ([`task_client::cli`]): that executable links no executor.
//!
//! # Example
//!
//! The executors' settings of a session, read as the supervisor reads them:
//!
//! ```
//! use task_cli::settings::Settings;
//! use task_session::config::ExecutorSettings;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let file = serde_json::json!({"stall_threshold_ms": 1000, "agent_command": "claude"});
//! let env = [("TASKS_STALL_THRESHOLD_MS".to_owned(), "2000".to_owned())];
//! let from = ExecutorSettings::new(file.as_object().cloned().unwrap_or_default(), env);
//! let settings = Settings::read(&from)?;
//! assert_eq!(settings.shell.stall_threshold, std::time::Duration::from_secs(2));
//! assert_eq!(settings.agent_command.as_deref(), Some("claude"));
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod agent_wiring;
mod batch_wiring;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod commands;
#[cfg(feature = "cli")]
pub mod completions_cmd;
pub mod error;
#[cfg(feature = "cli")]
mod group_cmd;
#[cfg(feature = "cli")]
mod input_cmd;
#[cfg(feature = "cli")]
pub mod list_open;
#[cfg(feature = "cli")]
pub mod mcp_cmd;
#[cfg(feature = "cli")]
mod remote_cmd;
mod remote_wiring;
#[cfg(feature = "cli")]
pub mod serve_cmd;
pub mod settings;
#[cfg(feature = "cli")]
pub mod team_cmd;
pub mod team_wiring;
#[cfg(feature = "cli")]
pub mod tidy_cmd;
#[cfg(feature = "cli")]
pub mod top;
pub mod wiring;
#[cfg(feature = "cli")]
mod workflow_cmd;
#[cfg(feature = "cli")]
mod worktree_cmd;
mod worktree_wiring;

// What the short commands (task-client's) share with the long ones here.
pub use error::{CliError, Result};
#[cfg(feature = "cli")]
use task_client::cli::{daemon, pill, printer, render, report, stream_cmd, transcript};
