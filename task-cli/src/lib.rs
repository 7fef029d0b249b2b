//! The `tasks` binary as a library: its composition root and its front ends.
//!
//! The session layer (supervisor, client, records, exactly-once delivery) is the
//! [`task_session`] crate; this crate wires the standard executors into it ([`wiring::standard`]:
//! shells and monitors, agents, workflows, teammates, dreams, remote agents, each configured from
//! the session's `config.json` by [`settings`]) and holds the front ends over it (with the
//! default `cli` feature): the commands, `tasks top`, the MCP server and `tasks serve`.
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
#[cfg(feature = "cli")]
pub mod daemon;
pub mod error;
#[cfg(feature = "cli")]
mod group_cmd;
#[cfg(feature = "cli")]
mod input_cmd;
#[cfg(feature = "cli")]
pub mod list_cmd;
#[cfg(feature = "cli")]
pub mod list_open;
#[cfg(feature = "cli")]
mod list_text;
#[cfg(feature = "cli")]
pub mod logging;
#[cfg(feature = "cli")]
pub mod mcp_cmd;
pub mod pill;
#[cfg(feature = "cli")]
pub mod printer;
#[cfg(feature = "cli")]
pub mod ps_cmd;
#[cfg(feature = "cli")]
mod remote_cmd;
mod remote_wiring;
pub mod render;
#[cfg(feature = "cli")]
pub mod report;
#[cfg(feature = "cli")]
pub mod serve_cmd;
pub mod settings;
#[cfg(feature = "cli")]
pub mod status_cmd;
#[cfg(feature = "cli")]
pub mod strays_cmd;
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
#[cfg(feature = "cli")]
mod worktree_cmd;

pub use error::{CliError, Result};
