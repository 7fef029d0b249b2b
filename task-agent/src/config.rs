//! Timing and size knobs of the agent executor.

use std::time::Duration;

/// How long a cancelled agent gets between the interrupt and `SIGKILL` of its process group.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(2_000);
/// The longest wait between two reads of a quiet transcript (reads start at 1 ms after activity
/// and back off to this).
pub const DEFAULT_TRANSCRIPT_POLL: Duration = Duration::from_millis(50);
/// How many stderr lines of an agent CLI are kept for a failure message.
pub const DEFAULT_STDERR_LINES: usize = 10;
/// How many assistant messages an agent's state holds for display.
pub const DEFAULT_DISPLAY_MESSAGES: usize = 20;

/// Knobs of [`AgentExecutor`](crate::AgentExecutor). `Default` is the project's values; tests
/// use short durations.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentConfig {
    /// Interrupt → `SIGKILL` grace of a kill.
    pub kill_grace: Duration,
    /// Period of the transcript delta reads while the CLI is quiet.
    pub transcript_poll: Duration,
    /// The most bytes one delta read takes.
    pub max_read_bytes: usize,
    /// The longest transcript line parsed; longer ones are skipped, never buffered whole.
    pub max_line_bytes: usize,
    /// Stderr lines kept for a crash's failure message.
    pub stderr_lines: usize,
    /// Assistant messages kept in the state for display (`messages`).
    pub display_messages: usize,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            kill_grace: DEFAULT_KILL_GRACE,
            transcript_poll: DEFAULT_TRANSCRIPT_POLL,
            max_read_bytes: 1024 * 1024,
            max_line_bytes: 16 * 1024 * 1024,
            stderr_lines: DEFAULT_STDERR_LINES,
            display_messages: DEFAULT_DISPLAY_MESSAGES,
        }
    }
}
