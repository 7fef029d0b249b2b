//! Why a task ended, as the executor that ran it knew it: recorded in the task's state when it
//! reaches a terminal status, persisted with it, and read by every front end (texts, JSON,
//! notifications) so that nothing has to be guessed back from exit codes or timings.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Exit code of a process killed with `SIGKILL` (128 + 9): a kill on request or by the size cap.
pub const EXIT_KILLED: i32 = 137;
/// Exit code the reference reports for a timed-out command (128 + `SIGTERM`).
pub const EXIT_TIMED_OUT: i32 = 143;
/// Exit code of a command that could not be started.
pub const EXIT_SPAWN_FAILED: i32 = 1;

/// Why a task ended. Set once, by whoever moves the task to its terminal status.
///
/// Serialized as `{"reason": "exited", "code": 0}`, `{"reason": "timed_out", "limitMs": 120000}`, ….
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "reason",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[non_exhaustive]
pub enum EndReason {
    /// Its process exited by itself with this code (a death by signal is `128 + signal`).
    Exited {
        /// The exit code.
        code: i32,
    },
    /// It finished its work (a task without an exit code: an agent's result, a workflow).
    Succeeded,
    /// It reported a failure of its own (an agent's error result), in its words.
    Errored {
        /// What went wrong.
        message: String,
    },
    /// Killed because it ran past its time limit.
    TimedOut {
        /// The limit, in milliseconds.
        limit_ms: u64,
    },
    /// Killed on request (a user, a model's `TaskStop`, the end of the agent that owned it).
    Killed,
    /// Killed by the size watchdog: its output passed the cap.
    OutputCapExceeded {
        /// The cap, in bytes.
        cap_bytes: u64,
    },
    /// It could not be started.
    SpawnFailed {
        /// Why.
        error: String,
    },
    /// The process that supervised it died while it was live.
    SupervisorDied {
        /// That process's pid.
        pid: u32,
    },
    /// Killed because it did not approve a shutdown request within the bound (a teammate).
    ShutdownUnanswered {
        /// The bound, in milliseconds.
        limit_ms: u64,
    },
    /// It never ran: a task it was to start after (`--after`) failed or was killed.
    DependencyFailed {
        /// That task.
        id: crate::TaskId,
    },
    /// Stopped because it used up one of its budgets (an agent's tokens, turns or time, or
    /// the session's tokens shared by every agent).
    BudgetExceeded {
        /// Which budget.
        limit: BudgetLimit,
        /// How much of it was used (milliseconds for time).
        used: u64,
        /// The budget (milliseconds for time).
        max: u64,
    },
    /// Its batch job (a Slurm job) ended in a state of the batch system's other than a plain
    /// completion or a cancel: `FAILED` with the command's exit code, `TIMEOUT`,
    /// `OUT_OF_MEMORY`, `NODE_FAIL`, …; or the job left no exit status behind.
    BatchJob {
        /// The batch system (`slurm`).
        engine: String,
        /// Its state, as it names it (`FAILED`, `TIMEOUT`, …).
        state: String,
        /// The exit code it reported (or the job recorded), if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        code: Option<i32>,
    },
}

/// The budgets an agent runs under ([`EndReason::BudgetExceeded`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum BudgetLimit {
    /// Its tokens, counted as its progress counts them (the latest input plus every output).
    Tokens,
    /// Its turns (model responses).
    Turns,
    /// Its running time.
    Time,
    /// The tokens of every agent of the session together.
    SessionTokens,
}

impl BudgetLimit {
    /// How the budget is named: `tokens`, `turns`, `time`, `session tokens`.
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetLimit::Tokens => "tokens",
            BudgetLimit::Turns => "turns",
            BudgetLimit::Time => "time",
            BudgetLimit::SessionTokens => "session tokens",
        }
    }
}

impl EndReason {
    /// A timeout of `limit`.
    pub fn timed_out(limit: Duration) -> Self {
        EndReason::TimedOut {
            limit_ms: u64::try_from(limit.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// The exit code the reference reports for this end, where it reports one: the command's
    /// own code, 137 for a kill (also by the size cap), 143 for a timeout, 1 for a spawn error.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            EndReason::Exited { code } => Some(*code),
            EndReason::Killed
            | EndReason::OutputCapExceeded { .. }
            | EndReason::ShutdownUnanswered { .. } => Some(EXIT_KILLED),
            EndReason::TimedOut { .. } => Some(EXIT_TIMED_OUT),
            EndReason::SpawnFailed { .. } | EndReason::DependencyFailed { .. } => {
                Some(EXIT_SPAWN_FAILED)
            }
            EndReason::BatchJob { code, .. } => Some(code.unwrap_or(EXIT_SPAWN_FAILED)),
            EndReason::Succeeded
            | EndReason::Errored { .. }
            | EndReason::SupervisorDied { .. }
            | EndReason::BudgetExceeded { .. } => None,
        }
    }

    /// Whether the task was stopped by a limit (time, output size, an unanswered shutdown)
    /// rather than on its own.
    pub fn is_limit(&self) -> bool {
        matches!(
            self,
            EndReason::TimedOut { .. }
                | EndReason::OutputCapExceeded { .. }
                | EndReason::ShutdownUnanswered { .. }
                | EndReason::BudgetExceeded { .. }
        )
    }

    /// What the command's stderr would say about this end, in the reference's words where it
    /// has them: `Command timed out after 2m 0s`, `Background command killed: output file exceeded
    /// 5GB`; `None` for an end the task's own output already explains.
    pub fn stderr_note(&self) -> Option<String> {
        match self {
            EndReason::TimedOut { limit_ms } => Some(format!(
                "Command timed out after {}",
                human_duration(Duration::from_millis(*limit_ms))
            )),
            EndReason::OutputCapExceeded { cap_bytes } => Some(format!(
                "Background command killed: output file exceeded {}",
                human_size(*cap_bytes)
            )),
            EndReason::SpawnFailed { error } => Some(format!("could not start: {error}")),
            EndReason::SupervisorDied { pid } => Some(format!("its supervisor (pid {pid}) exited")),
            EndReason::DependencyFailed { id } => Some(format!("dependency failed: {id}")),
            EndReason::Errored { message } => Some(message.clone()),
            EndReason::ShutdownUnanswered { limit_ms } => Some(format!(
                "killed: it did not approve the shutdown request within {}",
                human_duration(Duration::from_millis(*limit_ms))
            )),
            EndReason::BudgetExceeded { .. } => Some(self.short()),
            EndReason::BatchJob { engine, state, .. } => Some(format!("{engine} job {state}")),
            EndReason::Exited { .. } | EndReason::Succeeded | EndReason::Killed => None,
        }
    }

    /// A few words for a table or a one-line summary: `exit 0`, `exit 2`, `done`, `error`,
    /// `timeout 2m 0s`, `killed`, `output cap 5GB`, `spawn failed`, `supervisor died`,
    /// `shutdown timeout 1m 0s`.
    pub fn short(&self) -> String {
        match self {
            EndReason::Exited { code } => format!("exit {code}"),
            EndReason::Succeeded => "done".into(),
            EndReason::Errored { .. } => "error".into(),
            EndReason::TimedOut { limit_ms } => format!(
                "timeout {}",
                human_duration(Duration::from_millis(*limit_ms))
            ),
            EndReason::Killed => "killed".into(),
            EndReason::OutputCapExceeded { cap_bytes } => {
                format!("output cap {}", human_size(*cap_bytes))
            }
            EndReason::SpawnFailed { .. } => "spawn failed".into(),
            EndReason::SupervisorDied { .. } => "supervisor died".into(),
            EndReason::ShutdownUnanswered { limit_ms } => format!(
                "shutdown timeout {}",
                human_duration(Duration::from_millis(*limit_ms))
            ),
            EndReason::DependencyFailed { .. } => "dependency failed".into(),
            EndReason::BatchJob {
                engine,
                state,
                code,
            } => match code {
                Some(code) => format!("{state} exit {code}"),
                None => format!("{engine} {state}"),
            },
            EndReason::BudgetExceeded { limit, used, max } => {
                let amount = |n: u64| match limit {
                    BudgetLimit::Time => human_duration(Duration::from_millis(n)),
                    _ => n.to_string(),
                };
                format!(
                    "budget: {} {} of {}",
                    limit.as_str(),
                    amount(*used),
                    amount(*max)
                )
            }
        }
    }
}

/// `bytes` in the largest binary unit that divides it exactly, as the reference names sizes
/// (`5GB`, `64KB`, `1000B`).
pub fn human_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")];
    UNITS
        .iter()
        .find(|(unit, _)| bytes >= *unit && bytes.is_multiple_of(*unit))
        .map_or_else(
            || format!("{bytes}B"),
            |(unit, name)| format!("{}{name}", bytes / unit),
        )
}

/// A duration as timeouts are printed: `250ms`, `30s`, `2m 0s`, `1h 5m 0s`.
pub fn human_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    if millis < 1_000 {
        return format!("{millis}ms");
    }
    let secs = duration.as_secs();
    let (hours, minutes, seconds) = (secs / 3_600, secs / 60 % 60, secs % 60);
    match (hours, minutes) {
        (0, 0) => format!("{seconds}s"),
        (0, _) => format!("{minutes}m {seconds}s"),
        _ => format!("{hours}h {minutes}m {seconds}s"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reasons_serialize_tagged_with_camel_case_fields() {
        let json = serde_json::to_value(EndReason::timed_out(Duration::from_secs(120))).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"reason": "timed_out", "limitMs": 120000})
        );
        let cap = EndReason::OutputCapExceeded { cap_bytes: 5 };
        let json = serde_json::to_string(&cap).unwrap();
        assert_eq!(json, r#"{"reason":"output_cap_exceeded","capBytes":5}"#);
        assert_eq!(serde_json::from_str::<EndReason>(&json).unwrap(), cap);
    }

    #[test]
    fn a_budget_end_names_its_limit() {
        let tokens = EndReason::BudgetExceeded {
            limit: BudgetLimit::Tokens,
            used: 200_000,
            max: 200_000,
        };
        assert_eq!(tokens.short(), "budget: tokens 200000 of 200000");
        let json = serde_json::to_string(&tokens).unwrap();
        assert_eq!(
            json,
            r#"{"reason":"budget_exceeded","limit":"tokens","used":200000,"max":200000}"#
        );
        let time = EndReason::BudgetExceeded {
            limit: BudgetLimit::Time,
            used: 5_000,
            max: 5_000,
        };
        assert_eq!(time.short(), "budget: time 5s of 5s");
        assert!(time.is_limit());
    }

    #[test]
    fn a_batch_job_end_carries_its_state_and_code() {
        let failed = EndReason::BatchJob {
            engine: "slurm".into(),
            state: "FAILED".into(),
            code: Some(3),
        };
        assert_eq!(failed.exit_code(), Some(3));
        assert_eq!(failed.short(), "FAILED exit 3");
        assert_eq!(failed.stderr_note().unwrap(), "slurm job FAILED");
        let json = serde_json::to_string(&failed).unwrap();
        assert_eq!(
            json,
            r#"{"reason":"batch_job","engine":"slurm","state":"FAILED","code":3}"#
        );
        assert_eq!(serde_json::from_str::<EndReason>(&json).unwrap(), failed);
    }

    #[test]
    fn exit_codes_follow_the_reference() {
        assert_eq!(EndReason::Exited { code: 3 }.exit_code(), Some(3));
        assert_eq!(EndReason::Killed.exit_code(), Some(137));
        assert_eq!(
            EndReason::OutputCapExceeded { cap_bytes: 1 }.exit_code(),
            Some(137)
        );
        assert_eq!(EndReason::TimedOut { limit_ms: 1 }.exit_code(), Some(143));
        assert_eq!(
            EndReason::SpawnFailed { error: "x".into() }.exit_code(),
            Some(1)
        );
        assert_eq!(EndReason::SupervisorDied { pid: 1 }.exit_code(), None);
    }

    #[test]
    fn stderr_notes_use_the_reference_words() {
        assert_eq!(
            EndReason::timed_out(Duration::from_secs(120))
                .stderr_note()
                .unwrap(),
            "Command timed out after 2m 0s"
        );
        assert_eq!(
            EndReason::OutputCapExceeded {
                cap_bytes: 5 * 1024 * 1024 * 1024
            }
            .stderr_note()
            .unwrap(),
            "Background command killed: output file exceeded 5GB"
        );
        assert_eq!(EndReason::Exited { code: 1 }.stderr_note(), None);
    }

    #[test]
    fn durations_read_like_the_reference() {
        assert_eq!(human_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(human_duration(Duration::from_secs(30)), "30s");
        assert_eq!(human_duration(Duration::from_secs(120)), "2m 0s");
        assert_eq!(human_duration(Duration::from_secs(3_900)), "1h 5m 0s");
    }
}
