//! The notification texts of remote agents.

use task_core::{AgentExtras, Notification, TaskState, TerminalStatus};

/// How a remote task ended, with what its notification says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteEnd {
    /// Done: the session's final text, if it gave one.
    Completed(Option<String>),
    /// A completion checker said done, in these words (the summary).
    Checked(String),
    /// It failed, for this reason (one line).
    Failed(String),
    /// It ran past its time limit.
    TimedOut(std::time::Duration),
}

/// `Remote agent "{desc}" completed` / `… failed: {reason}` / `… was stopped`.
pub fn summary(description: &str, end: &RemoteEnd) -> String {
    match end {
        RemoteEnd::Completed(_) => format!("Remote agent \"{description}\" completed"),
        RemoteEnd::Checked(text) => text.clone(),
        RemoteEnd::Failed(reason) => format!("Remote agent \"{description}\" failed: {reason}"),
        RemoteEnd::TimedOut(limit) => format!(
            "Remote agent \"{description}\" timed out after {}",
            task_core::human_duration(*limit)
        ),
    }
}

/// The notification of a remote task that ended by itself (`<task-type>remote_agent</task-type>`
/// comes from the task's type), with the final text as `<result>`.
pub fn ended(task: &TaskState, end: &RemoteEnd) -> Notification {
    let status = match end {
        RemoteEnd::Completed(_) | RemoteEnd::Checked(_) => TerminalStatus::Completed,
        RemoteEnd::Failed(_) | RemoteEnd::TimedOut(_) => TerminalStatus::Failed,
    };
    let result = match end {
        RemoteEnd::Completed(text) => text.clone(),
        _ => None,
    };
    Notification {
        agent: result.map(|result| AgentExtras {
            note: None,
            result: Some(result),
            usage: None,
            worktree: None,
        }),
        ..Notification::for_task(task, Some(status), summary(&task.base.description, end))
    }
}

/// The notification of a killed remote task (`Remote agent "{desc}" was stopped`), never
/// queued for the model: the caller asked for the kill.
pub fn stopped(task: &TaskState) -> Notification {
    let summary = format!("Remote agent \"{}\" was stopped", task.base.description);
    Notification::for_task(task, Some(TerminalStatus::Killed), summary)
}
