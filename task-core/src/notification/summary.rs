//! The exact summary texts of SPEC §3.

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
