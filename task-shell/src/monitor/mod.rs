//! `monitor_mcp` tasks: a watch whose every stdout line, or every WebSocket frame, is an event.

pub(crate) mod run;
pub mod ws;

use std::fmt;
use std::time::Duration;

use task_core::TaskId;

use crate::process::CommandSpec;
pub use ws::WsTarget;

/// Where a monitor's events come from: a command xor a WebSocket.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum MonitorSource {
    /// A shell command; each line it prints on stdout is one event, its stderr goes to the
    /// output file.
    Command(CommandSpec),
    /// A WebSocket; each text frame is one event, a binary frame becomes a placeholder line.
    WebSocket(WsTarget),
}

impl fmt::Display for MonitorSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MonitorSource::Command(spec) => f.write_str(spec.command()),
            MonitorSource::WebSocket(target) => f.write_str(&target.url),
        }
    }
}

/// What to watch as a `monitor_mcp` task (SPEC §6).
///
/// ```
/// use task_shell::monitor::{MonitorRequest, MonitorSource, WsTarget};
///
/// let request = MonitorRequest::new(MonitorSource::WebSocket(WsTarget::new("ws://127.0.0.1:9000/events")), "events")
///     .persistent(true);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MonitorRequest {
    /// The event source.
    pub source: MonitorSource,
    /// The one-line description shown in notifications.
    pub description: String,
    /// The tool call that started the monitor, if any.
    pub tool_use_id: Option<String>,
    /// The agent that started the monitor; its end stops the monitor.
    pub agent_id: Option<TaskId>,
    /// The monitor's lifetime (default 300 000 ms, at most 3 600 000 ms); ignored when
    /// persistent.
    pub timeout: Option<Duration>,
    /// Lives until stopped or the session ends.
    pub persistent: bool,
}

impl MonitorRequest {
    /// A non-persistent monitor with the default timeout.
    pub fn new(source: MonitorSource, description: impl Into<String>) -> Self {
        Self {
            source,
            description: description.into(),
            tool_use_id: None,
            agent_id: None,
            timeout: None,
            persistent: false,
        }
    }

    /// Sets the lifetime (clamped to the maximum when the monitor starts).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Makes the monitor live until stopped.
    #[must_use]
    pub fn persistent(mut self, persistent: bool) -> Self {
        self.persistent = persistent;
        self
    }

    /// Records the tool call that started the monitor.
    #[must_use]
    pub fn tool_use_id(mut self, tool_use_id: impl Into<String>) -> Self {
        self.tool_use_id = Some(tool_use_id.into());
        self
    }

    /// Records the agent that started the monitor.
    #[must_use]
    pub fn agent_id(mut self, agent_id: TaskId) -> Self {
        self.agent_id = Some(agent_id);
        self
    }
}
