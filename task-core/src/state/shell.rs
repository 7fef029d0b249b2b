//! Per-type state of shell commands and monitors (SPEC §5, §6).

use serde::{Deserialize, Serialize};

/// What a shell-run task is: a command or a monitor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ShellKind {
    /// A background command (`local_bash`).
    #[default]
    Shell,
    /// A watch whose every output line is an event (`monitor_mcp`).
    Monitor,
}

/// The data of a `local_bash` or `monitor_mcp` task.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShellState {
    /// The command line as the user gave it.
    pub command: String,
    /// The agent that started the command; when it ends, its shells are killed (SPEC §5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// Whether the task runs in the background (only those count as background tasks).
    #[serde(default)]
    pub is_backgrounded: bool,
    /// Command or monitor.
    #[serde(default)]
    pub kind: ShellKind,
    /// The exit code, once the process has ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
}
