//! Timing and size knobs of the agent executor.

use std::path::PathBuf;
use std::time::Duration;

/// How long a cancelled agent gets between the interrupt (`SIGINT` to its process group) and
/// `SIGKILL` of everything it started: its group and every descendant that left it.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(2_000);
/// The longest wait between two reads of a quiet transcript (reads start at 1 ms after activity
/// and back off to this).
pub const DEFAULT_TRANSCRIPT_POLL: Duration = Duration::from_millis(50);
/// How many stderr lines of an agent CLI are kept for a failure message.
pub const DEFAULT_STDERR_LINES: usize = 10;
/// How many bytes of stderr lines of an agent CLI are kept at most, whatever the line lengths.
pub const DEFAULT_STDERR_BYTES: usize = 16 * 1024;
/// How many assistant messages an agent's state holds for display.
pub const DEFAULT_DISPLAY_MESSAGES: usize = 20;
/// How long an agent CLI may report nothing but errors (Codex's `Reconnecting…` while its model
/// endpoint is gone) before the run is failed with its words.
pub const DEFAULT_ERROR_LOOP_LIMIT: Duration = Duration::from_secs(60);

/// Knobs of [`AgentExecutor`](crate::AgentExecutor). `Default` is the project's values; tests
/// use short durations.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentConfig {
    /// Interrupt → `SIGKILL` grace of a kill: after it, the CLI's whole tree (its group, and
    /// every process that left it, found through the task's marker) is killed, whether or not
    /// the CLI heeded the interrupt.
    pub kill_grace: Duration,
    /// Period of the transcript delta reads while the CLI is quiet.
    pub transcript_poll: Duration,
    /// The most bytes one delta read takes.
    pub max_read_bytes: usize,
    /// The longest transcript line parsed; longer ones are skipped, never buffered whole.
    pub max_line_bytes: usize,
    /// Stderr lines kept for a crash's failure message.
    pub stderr_lines: usize,
    /// The most bytes of stderr kept for it (a line is cut to this, and to 4 KiB, while it is
    /// read; a `\r` starts a line over, so a progress bar keeps its last drawing only).
    pub stderr_bytes: usize,
    /// Assistant messages kept in the state for display (`messages`).
    pub display_messages: usize,
    /// How long a run may go on reporting only errors ([`AgentEvent::Error`]) before it is
    /// failed (end reason `Errored`, with the CLI's last error) and its CLI stopped. The time
    /// counts from the first error after anything else the CLI reported; the run fails once it
    /// has passed and the CLI has reported at least two errors (a loop, not one transient
    /// error followed by a long silent model request). Any other event starts the count again.
    ///
    /// [`AgentEvent::Error`]: crate::AgentEvent::Error
    pub error_loop_limit: Duration,
    /// Where agents run in worktrees of their own are added (`{id}` under it); the `tasks`
    /// supervisor uses `{session}/worktrees`. `None`: `{output_dir}/worktrees`.
    pub worktrees_dir: Option<PathBuf>,
    /// The most tokens every agent of the executor may use together ([`crate::budget`]); the
    /// run that reaches it is stopped. `None`: no session budget.
    pub session_token_budget: Option<u64>,
    /// The budgets of every agent started without budgets of its own (the MCP `Agent` tool,
    /// workflow agents, `tasks agent` without `--max-*`); `None`: none.
    pub default_budget: Option<task_core::AgentBudget>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            kill_grace: DEFAULT_KILL_GRACE,
            transcript_poll: DEFAULT_TRANSCRIPT_POLL,
            max_read_bytes: 1024 * 1024,
            max_line_bytes: 16 * 1024 * 1024,
            stderr_lines: DEFAULT_STDERR_LINES,
            stderr_bytes: DEFAULT_STDERR_BYTES,
            display_messages: DEFAULT_DISPLAY_MESSAGES,
            error_loop_limit: DEFAULT_ERROR_LOOP_LIMIT,
            worktrees_dir: None,
            session_token_budget: None,
            default_budget: None,
        }
    }
}
