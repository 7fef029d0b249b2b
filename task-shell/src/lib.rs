//! Background shell commands and monitors with real process control for an AI-agent task system.
//!
//! This crate runs the two process-backed task types of the task system (SPEC §5, §6) and
//! records their lifecycle in a [`task_core::Registry`]:
//!
//! - **`local_bash`** ([`ShellExecutor::spawn`]): `sh -c` in its own process group, stdout and
//!   stderr both the task's output file (no byte passes through this process), stdin
//!   `/dev/null` unless a pipe is asked for, `GIT_EDITOR=true`, and on Linux a parent-death
//!   signal. Exit 0 is `completed`, anything else `failed`; a kill is `killed` with exit code
//!   137 and no notification; a timeout is exit code 143. Backgrounded commands are watched for
//!   interactive prompts (the stall watchdog) and for runaway output (the size watchdog).
//! - **`monitor_mcp`** ([`ShellExecutor::spawn_monitor`]): a command whose every stdout line is
//!   an event, or a WebSocket whose every frame is; events are queued with priority `next`.
//! - **`local_bash` on a batch system** ([`ShellExecutor::register_batch`], a
//!   [`Placement`](launch::Placement) in the start request): the command runs as a job of a
//!   [`batch::BatchEngine`] (a Slurm cluster: `batch::SlurmEngine`, feature `slurm`), its
//!   output the same file, with the same lifecycle and one end; a dead supervisor's jobs are
//!   followed again by the next one ([`ShellExecutor::adopt_batch`]).
//!
//! A kill ([`ShellExecutor::kill`], [`Registry::kill`](task_core::Registry::kill),
//! [`Registry::kill_tasks_for_agent`](task_core::Registry::kill_tasks_for_agent)) SIGKILLs the
//! whole tree: the process group and every descendant that left it ([`process::kill_tree`]),
//! including double-forked and `setsid` escapees (task shells are child subreapers and every
//! process of a task carries its marker; a supervisor calls [`process::become_subreaper`] so the
//! killed remains are reaped). After a supervisor died, [`process::kill_orphaned_task`] kills
//! what is left of a task, checked live against its [`process::TaskFingerprint`].
//! Each task is supervised by one tokio task; every timing constant comes from [`ShellConfig`].
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use task_core::{Registry, TaskStatus};
//! use task_shell::process::CommandSpec;
//! use task_shell::shell::ShellRequest;
//! use task_shell::{ShellConfig, ShellExecutor};
//!
//! let dir = tempfile::tempdir()?;
//! let registry = Arc::new(Registry::default());
//! let shells = ShellExecutor::new(Arc::clone(&registry), dir.path(), ShellConfig::default())
//!     .register_with_registry();
//!
//! let request = ShellRequest::new(CommandSpec::new("echo hello; exit 3")?, "greet").background(true);
//! let mut task = shells.spawn(request)?;
//! let outcome = task.wait().await?;
//! assert_eq!((outcome.status, outcome.exit_code), (TaskStatus::Failed, 3));
//! assert_eq!(std::fs::read_to_string(task.output_file())?, "hello\n");
//!
//! let notes = registry.notifications().drain();
//! assert_eq!(notes[0].summary, "Background command \"greet\" failed with exit code 3");
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod batch;
mod book;
pub mod config;
mod control;
pub mod error;
mod executor;
mod growth;
mod handle;
pub mod launch;
pub mod lines;
pub mod monitor;
mod output;
pub mod process;
pub mod prompt;
pub mod shell;
mod stdin;
pub mod watchdog;

pub use book::monitor_event_summary;
pub use config::ShellConfig;
pub use control::Outcome;
pub use error::ShellError;
pub use executor::{PendingBatch, PendingShell, ShellExecutor};
pub use handle::TaskHandle;
pub use launch::{MonitorStart, Monitors, ShellStart};
