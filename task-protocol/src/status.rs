//! The task lifecycle: statuses and the transition table of SPEC §2.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Where a task is in its life. Serialized in lowercase (`running`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// Registered, not started yet.
    Pending,
    /// Doing its work.
    Running,
    /// Finished successfully (exit 0, agent success). Terminal.
    Completed,
    /// Finished unsuccessfully, or could not start. Terminal.
    Failed,
    /// Stopped on request. Terminal.
    Killed,
}

impl TaskStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Pending,
        TaskStatus::Running,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Killed,
    ];

    /// Whether nothing can follow this status (completed, failed, killed).
    pub const fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Killed
        )
    }

    /// Whether the lifecycle allows moving from `self` to `next`.
    ///
    /// Allowed: `pending→running`, `pending→failed`, `pending→killed`, `running→completed`,
    /// `running→failed`, `running→killed`. Nothing else, not even a status to itself.
    pub const fn can_transition_to(self, next: TaskStatus) -> bool {
        matches!(
            (self, next),
            (
                TaskStatus::Pending,
                TaskStatus::Running | TaskStatus::Failed | TaskStatus::Killed
            ) | (
                TaskStatus::Running,
                TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Killed
            )
        )
    }

    /// The terminal outcome this status stands for, if it is terminal.
    pub const fn terminal(self) -> Option<TerminalStatus> {
        match self {
            TaskStatus::Completed => Some(TerminalStatus::Completed),
            TaskStatus::Failed => Some(TerminalStatus::Failed),
            TaskStatus::Killed => Some(TerminalStatus::Killed),
            TaskStatus::Pending | TaskStatus::Running => None,
        }
    }

    /// The lowercase name (`running`).
    pub const fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Pending => "pending",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Killed => "killed",
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A terminal status: what a notification's `<status>` can say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum TerminalStatus {
    /// The task completed.
    Completed,
    /// The task failed.
    Failed,
    /// The task was killed.
    Killed,
}

impl TerminalStatus {
    /// The lowercase name (`completed`).
    pub const fn as_str(self) -> &'static str {
        TaskStatus::from_terminal(self).as_str()
    }
}

impl TaskStatus {
    const fn from_terminal(status: TerminalStatus) -> TaskStatus {
        match status {
            TerminalStatus::Completed => TaskStatus::Completed,
            TerminalStatus::Failed => TaskStatus::Failed,
            TerminalStatus::Killed => TaskStatus::Killed,
        }
    }
}

impl From<TerminalStatus> for TaskStatus {
    fn from(status: TerminalStatus) -> Self {
        TaskStatus::from_terminal(status)
    }
}

impl fmt::Display for TerminalStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus::*;

    /// SPEC §2, written out pair by pair: every (from, to) of the 25 with its verdict.
    const TABLE: [(TaskStatus, TaskStatus, bool); 25] = [
        (Pending, Pending, false),
        (Pending, Running, true),
        (Pending, Completed, false),
        (Pending, Failed, true),
        (Pending, Killed, true),
        (Running, Pending, false),
        (Running, Running, false),
        (Running, Completed, true),
        (Running, Failed, true),
        (Running, Killed, true),
        (Completed, Pending, false),
        (Completed, Running, false),
        (Completed, Completed, false),
        (Completed, Failed, false),
        (Completed, Killed, false),
        (Failed, Pending, false),
        (Failed, Running, false),
        (Failed, Completed, false),
        (Failed, Failed, false),
        (Failed, Killed, false),
        (Killed, Pending, false),
        (Killed, Running, false),
        (Killed, Completed, false),
        (Killed, Failed, false),
        (Killed, Killed, false),
    ];

    #[test]
    fn transition_table_matches_spec_for_every_pair() {
        for (from, to, allowed) in TABLE {
            assert_eq!(from.can_transition_to(to), allowed, "{from} → {to}");
        }
        // The table above covers every pair exactly once.
        for from in TaskStatus::ALL {
            for to in TaskStatus::ALL {
                assert_eq!(
                    TABLE
                        .iter()
                        .filter(|(f, t, _)| *f == from && *t == to)
                        .count(),
                    1
                );
            }
        }
    }

    #[test]
    fn terminal_statuses_have_no_exit() {
        for from in TaskStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            assert!(
                TaskStatus::ALL
                    .iter()
                    .all(|&to| !from.can_transition_to(to))
            );
        }
        assert!(!Pending.is_terminal() && !Running.is_terminal());
        assert!(Completed.is_terminal() && Failed.is_terminal() && Killed.is_terminal());
    }

    #[test]
    fn terminal_maps_to_terminal_status_and_back() {
        for status in TaskStatus::ALL {
            match status.terminal() {
                Some(t) => assert_eq!(TaskStatus::from(t), status),
                None => assert!(!status.is_terminal()),
            }
        }
    }
}
