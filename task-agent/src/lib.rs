//! Background agents that run real agent CLIs: the `local_agent` task type (SPEC §7, §15).
//!
//! - [`AgentRunner`] / [`AgentSession`]: the seam an agent loop plugs into. A session yields
//!   normalised [`AgentEvent`]s (init, text, tool use started/finished, usage, turn result)
//!   and takes follow-up messages and cancellation. Everything agent-specific (progress,
//!   notifications, messages, resume, orphan cleanup) is written once against it.
//! - [`CommandRunner`]: runs an agent CLI speaking a JSON event stream (Claude Code's
//!   stream-json, `codex exec --json`, Gemini CLI's stream-json) in its own process group, with
//!   the flags each needs headless, its stdout going straight into the transcript file and
//!   events read back from that file by byte-offset delta reads.
//! - [`format`](mod@format): the line parsers of those formats (the `agent-stream` crate's);
//!   unknown and malformed lines are skipped, never fatal.
//! - [`ProgressTracker`]: token accounting (latest input with cache + cumulative output), tool
//!   uses, the last five activities, `task_progress` events shaped like the reference's.
//! - [`AgentExecutor`]: starts agents, queues messages (`pendingMessages`) for their next turn,
//!   resumes stopped ones under the same id, kills them (interrupt, then `SIGKILL` of the group),
//!   notifies once per stop in the reference's 2.1.197 form, and kills the tasks an agent owns
//!   when it ends. It also backgrounds the main session over an existing transcript.
//!
//! - teammates (`in_process_teammate`) are the crate `task-team`, built on this one's runner
//!   seam, budgets and worktrees.
//! - [`dream`]: `dream` tasks under the consolidation lock (one winner across processes,
//!   rollback of its mtime on kill, failure, or a dead holder).
//!
//! The `fake-agent` binary of this crate is a test tool: a scripted CLI speaking the Claude
//! stream-json protocol, and printing recorded Codex and Gemini streams when given their
//! command lines (see `src/bin/fake-agent.rs`).
//!
//! # Example
//!
//! ```no_run
//! use std::sync::Arc;
//! use task_agent::{AgentConfig, AgentExecutor, AgentRequest, CliFormat, CommandRunner};
//! use task_core::Registry;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let registry = Arc::new(Registry::default());
//! let executor = AgentExecutor::new(Arc::clone(&registry), "/tmp/tasks", AgentConfig::default())
//!     .register_with_registry();
//! let claude = CommandRunner::new(["claude"], CliFormat::Claude, AgentConfig::default())?;
//! let request = AgentRequest::new(Arc::new(claude), "count files", "How many files are here?");
//! let agent = executor.start(request).await?;
//! // Later: a message for its next turn, or a resume if it has stopped.
//! executor.send(agent.id.as_str(), "also check the README", None).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

pub mod activity;
pub mod budget;
mod command;
mod config;
mod consolidation_lock;
pub mod dream;
mod drive;
mod error;
mod executor;
mod launch;
mod notify;
mod progress;
mod record;
mod runner;
mod tail;
mod texts;
mod transcript_session;
pub mod worktree;

use agent_stream::event;
pub use agent_stream::event::{AgentEvent, ToolUse, TurnOutcome, Usage};
/// The stream parsers: agent-stream's, re-exported.
pub use agent_stream::format;
pub use command::{BatchRunner, CommandRunner, CommandSession, placed_runner};
pub use config::{
    AgentConfig, DEFAULT_DISPLAY_MESSAGES, DEFAULT_ERROR_LOOP_LIMIT, DEFAULT_KILL_GRACE,
    DEFAULT_STDERR_BYTES, DEFAULT_STDERR_LINES, DEFAULT_TRANSCRIPT_POLL,
};
pub use error::AgentError;
pub use executor::remove_left;
pub use executor::{
    AGENT_ID_ENV, AgentExecutor, AgentHandle, AgentRequest, DEFAULT_AGENT_TYPE, MAIN_SESSION_TYPE,
    PendingAgent, SendOutcome,
};
pub use format::{CliFormat, LineParser};
pub use launch::{AgentStart, RunnerFormat, RunnerFormatExt, command_runner, start_on_runtime};
pub use notify::{RunEnd, agent_notification, stopped_notification};
pub use progress::{Change, ProgressTracker, message_usage};
pub use runner::{AgentRunner, AgentSession, AgentSpec, SessionEnd, SessionEvent};
pub use tail::TranscriptTail;
pub use task_protocol::start::WorktreeRequest;
pub use task_protocol::texts::agent_launch as launch_text;
pub use texts::send_reply;
