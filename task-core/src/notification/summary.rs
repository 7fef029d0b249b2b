//! The exact summary texts of SPEC §3.

use crate::{EndReason, TaskType};

/// The advice that ends a stall warning (version 2.1.197 wording: "Stop this task").
pub const STALL_ADVICE: &str = "The command is likely blocked on an interactive prompt. Stop this task and re-run with piped input (e.g., `echo y | command`) or a non-interactive flag if one exists.";

/// How a shell command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellEnd {
    /// Exit code 0 (or the code it completed with).
    Completed(i32),
    /// A non-zero exit code.
    Failed(i32),
    /// Killed.
    Stopped,
}

/// How a monitor ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MonitorEnd {
    /// Its stream ended (process exit or socket close).
    StreamEnded,
    /// Its script exited non-zero.
    ScriptFailed(i32),
    /// Stopped.
    Stopped,
}

/// How an agent ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentEnd<'a> {
    /// It finished.
    Finished,
    /// It failed, with its error if known.
    Failed(Option<&'a str>),
    /// It was stopped.
    Stopped,
}

/// `Background command "{desc}" completed (exit code {n})`, `… failed with exit code {n}`,
/// `… was stopped`.
pub fn shell(description: &str, end: ShellEnd) -> String {
    match end {
        ShellEnd::Completed(code) => {
            format!("Background command \"{description}\" completed (exit code {code})")
        }
        ShellEnd::Failed(code) => {
            format!("Background command \"{description}\" failed with exit code {code}")
        }
        ShellEnd::Stopped => format!("Background command \"{description}\" was stopped"),
    }
}

/// The summary of a shell command that ended for `reason`: the reference's text for an exit
/// or a stop, and for an end it has no summary of its own (a timeout, the size cap, a spawn
/// error) its exit-code text followed by the reference's stderr words in parentheses:
/// `Background command "x" failed with exit code 143 (Command timed out after 2m 0s)`.
pub fn shell_ended(description: &str, reason: &EndReason) -> String {
    match reason {
        EndReason::Exited { code: 0 } | EndReason::Succeeded => {
            shell(description, ShellEnd::Completed(0))
        }
        EndReason::Killed => shell(description, ShellEnd::Stopped),
        EndReason::SupervisorDied { .. } => orphaned(TaskType::LocalBash, description),
        other => {
            let code = other.exit_code().unwrap_or(crate::EXIT_SPAWN_FAILED);
            let text = shell(description, ShellEnd::Failed(code));
            match other.stderr_note() {
                Some(note) => format!("{text} ({note})"),
                None => text,
            }
        }
    }
}

/// The summary of a task whose supervising process died while it was live:
/// `Background command "x" failed: its supervisor exited` (`Monitor "x" …`, `Agent "x" …`).
pub fn orphaned(task_type: TaskType, description: &str) -> String {
    let what = what(task_type);
    format!("{what} \"{description}\" failed: its supervisor exited")
}

/// The summary of a task that ended for `reason` before it ever ran (killed while queued, a
/// failed dependency): a shell's as [`shell_ended`] words it, anything else
/// `Agent "x" never started (dependency failed: b…)`.
pub fn never_started(task_type: TaskType, description: &str, reason: &EndReason) -> String {
    match (task_type, reason.stderr_note()) {
        (TaskType::LocalBash, _) => shell_ended(description, reason),
        (_, Some(note)) => format!(
            "{} \"{description}\" never started ({note})",
            what(task_type)
        ),
        (_, None) => format!("{} \"{description}\" never started", what(task_type)),
    }
}

/// What a task of `task_type` is called in a summary: `Background command`, `Agent`, ….
fn what(task_type: TaskType) -> &'static str {
    match task_type {
        TaskType::LocalBash => "Background command",
        TaskType::MonitorMcp => "Monitor",
        TaskType::LocalAgent => "Agent",
        TaskType::InProcessTeammate => "Teammate",
        TaskType::LocalWorkflow => "Dynamic workflow",
        TaskType::RemoteAgent => "Remote agent",
        TaskType::Dream => "Dream",
    }
}

/// `Monitor "{desc}" stream ended`, `… script failed (exit {n})`, `… stopped`.
pub fn monitor(description: &str, end: MonitorEnd) -> String {
    match end {
        MonitorEnd::StreamEnded => format!("Monitor \"{description}\" stream ended"),
        MonitorEnd::ScriptFailed(code) => {
            format!("Monitor \"{description}\" script failed (exit {code})")
        }
        MonitorEnd::Stopped => format!("Monitor \"{description}\" stopped"),
    }
}

/// `Agent "{desc}" finished` (2.1.197; the 2.1.88 source said `completed`),
/// `… failed: {error or "Unknown error"}`, `… was stopped`.
pub fn agent(description: &str, end: AgentEnd<'_>) -> String {
    match end {
        AgentEnd::Finished => format!("Agent \"{description}\" finished"),
        AgentEnd::Failed(error) => format!(
            "Agent \"{description}\" failed: {}",
            error.unwrap_or("Unknown error")
        ),
        AgentEnd::Stopped => format!("Agent \"{description}\" was stopped"),
    }
}

/// `Background command "{desc}" appears to be waiting for interactive input`.
pub fn stall(description: &str) -> String {
    format!("Background command \"{description}\" appears to be waiting for interactive input")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_ends_say_why() {
        let limit = std::time::Duration::from_secs(120);
        assert_eq!(
            shell_ended("t", &EndReason::timed_out(limit)),
            "Background command \"t\" failed with exit code 143 (Command timed out after 2m 0s)"
        );
        assert_eq!(
            shell_ended("t", &EndReason::OutputCapExceeded { cap_bytes: 1 << 20 }),
            "Background command \"t\" failed with exit code 137 (Background command killed: output file exceeded 1MB)"
        );
        assert_eq!(
            shell_ended("t", &EndReason::Exited { code: 2 }),
            "Background command \"t\" failed with exit code 2"
        );
        assert_eq!(
            shell_ended("t", &EndReason::Killed),
            "Background command \"t\" was stopped"
        );
        assert_eq!(
            shell_ended("t", &EndReason::SupervisorDied { pid: 7 }),
            "Background command \"t\" failed: its supervisor exited"
        );
        assert_eq!(
            orphaned(TaskType::MonitorMcp, "m"),
            "Monitor \"m\" failed: its supervisor exited"
        );
    }

    #[test]
    fn summaries_have_the_exact_spec_text() {
        assert_eq!(
            shell("bg test", ShellEnd::Failed(3)),
            "Background command \"bg test\" failed with exit code 3"
        );
        assert_eq!(
            shell("ask", ShellEnd::Completed(0)),
            "Background command \"ask\" completed (exit code 0)"
        );
        assert_eq!(
            shell("x", ShellEnd::Stopped),
            "Background command \"x\" was stopped"
        );
        assert_eq!(
            monitor("m", MonitorEnd::StreamEnded),
            "Monitor \"m\" stream ended"
        );
        assert_eq!(
            monitor("m", MonitorEnd::ScriptFailed(2)),
            "Monitor \"m\" script failed (exit 2)"
        );
        assert_eq!(monitor("m", MonitorEnd::Stopped), "Monitor \"m\" stopped");
        assert_eq!(agent("a", AgentEnd::Finished), "Agent \"a\" finished");
        assert_eq!(
            agent("a", AgentEnd::Failed(None)),
            "Agent \"a\" failed: Unknown error"
        );
        assert_eq!(
            agent("a", AgentEnd::Failed(Some("boom"))),
            "Agent \"a\" failed: boom"
        );
        assert_eq!(agent("a", AgentEnd::Stopped), "Agent \"a\" was stopped");
        assert_eq!(
            stall("p"),
            "Background command \"p\" appears to be waiting for interactive input"
        );
    }
}
