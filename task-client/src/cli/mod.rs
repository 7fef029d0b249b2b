//! The terminal front end's client side: the short commands the `tasks` executable runs itself
//! (`run`, `ps`, `status`, `output`, `wait`, `kill`, `notifications`, `list` on files), and
//! how every command prints a task.
//!
//! Always here: [`render`] (a task's line and summary), [`pill`] (the status-bar label),
//! [`printer`] (human text or JSON), [`error`] (the error type and the exit codes). With the
//! feature `cli` (the default): the command line (`args`), `commands::execute_short` and the
//! modules it reaches, the `tasksd` it hands every other command to (`daemon`), and the
//! diagnostics (`logging`).
//!
//! The long commands (agents, teams, workflows, `top`, `mcp`, `serve`, the supervisor) are
//! task-cli's: they link the executors, which nothing here does.

#[cfg(feature = "cli")]
pub mod args;
#[cfg(feature = "cli")]
pub mod commands;
#[cfg(feature = "cli")]
pub mod daemon;
pub mod error;
#[cfg(feature = "cli")]
pub mod list_cmd;
#[cfg(feature = "cli")]
pub mod list_open;
#[cfg(feature = "cli")]
mod list_text;
#[cfg(feature = "cli")]
pub mod logging;
pub mod pill;
pub mod printer;
#[cfg(feature = "cli")]
pub mod ps_cmd;
pub mod render;
#[cfg(feature = "cli")]
pub mod report;
#[cfg(feature = "cli")]
pub mod status_cmd;
#[cfg(feature = "cli")]
pub mod strays_cmd;
#[cfg(feature = "cli")]
pub mod stream_cmd;
#[cfg(feature = "cli")]
pub mod transcript;
