//! `local_bash` tasks: a shell command whose output goes straight to its output file.

pub(crate) mod run;

use std::time::Duration;

use task_core::TaskId;

use crate::process::CommandSpec;

/// What to run as a `local_bash` task, and how.
///
/// ```
/// use std::time::Duration;
/// use task_shell::process::CommandSpec;
/// use task_core::TaskId;
/// use task_shell::shell::ShellRequest;
///
/// let agent = TaskId::parse("a1b2c3d4e")?;
/// let request = ShellRequest::new(CommandSpec::new("cargo build")?, "build")
///     .background(true)
///     .timeout(Duration::from_secs(600))
///     .agent_id(agent);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ShellRequest {
    /// The command line and how to spawn it.
    pub spec: CommandSpec,
    /// The one-line description shown in notifications.
    pub description: String,
    /// The tool call that started the task, if any.
    pub tool_use_id: Option<String>,
    /// The agent that spawned the task; its end kills the task (orphan cleanup).
    pub agent_id: Option<TaskId>,
    /// Whether the task starts in the background (its completion is then notified).
    pub background: bool,
    /// Kill the command after this long (exit code 143).
    pub timeout: Option<Duration>,
    /// The id to register it under instead of a new one ([`task_core::Caller::task_id`]: a
    /// queued task registered again by its next supervisor); ignored unless it is a shell's.
    pub id: Option<TaskId>,
}

impl ShellRequest {
    /// A foreground request without timeout, tool use or owning agent.
    pub fn new(spec: CommandSpec, description: impl Into<String>) -> Self {
        Self {
            spec,
            description: description.into(),
            tool_use_id: None,
            agent_id: None,
            background: false,
            timeout: None,
            id: None,
        }
    }

    /// Starts the task in the background (or not).
    #[must_use]
    pub fn background(mut self, background: bool) -> Self {
        self.background = background;
        self
    }

    /// Kills the command after `timeout`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Records the tool call that started the task.
    #[must_use]
    pub fn tool_use_id(mut self, tool_use_id: impl Into<String>) -> Self {
        self.tool_use_id = Some(tool_use_id.into());
        self
    }

    /// Records the agent that spawned the task.
    #[must_use]
    pub fn agent_id(mut self, agent_id: TaskId) -> Self {
        self.agent_id = Some(agent_id);
        self
    }
}
