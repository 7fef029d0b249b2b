//! The supervisor protocol: one JSON request line, one JSON response line, per connection.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// What a client asks the supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Request {
    /// Start a background shell command (`local_bash`).
    Run(StartShell),
    /// Start a monitor (`monitor_mcp`): each stdout line is an event.
    Monitor(StartMonitor),
    /// Kill tasks (and their process trees).
    Kill {
        /// The ids, as validated strings.
        ids: Vec<String>,
    },
    /// Liveness check.
    Ping,
}

/// A shell command to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartShell {
    /// Shell text run with `sh -c`.
    pub command: String,
    /// Human description.
    pub description: String,
    /// Kill after this many milliseconds.
    pub timeout_ms: Option<u64>,
    /// The agent that owns the task.
    pub agent_id: Option<String>,
    /// The tool use that started it (MCP).
    pub tool_use_id: Option<String>,
    /// Working directory of the command (default: the supervisor's, `/`).
    pub cwd: Option<PathBuf>,
}

/// A monitor to start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartMonitor {
    /// Shell text whose stdout lines are events.
    pub command: String,
    /// Human description.
    pub description: String,
    /// Lifetime in milliseconds (default and cap from the config); ignored when persistent.
    pub timeout_ms: Option<u64>,
    /// Live until killed or the command exits.
    pub persistent: bool,
    /// Working directory of the command (default: the supervisor's, `/`).
    pub cwd: Option<PathBuf>,
}

/// The supervisor's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Response {
    /// A task was started.
    Started {
        /// Its id.
        id: String,
    },
    /// The outcome of each kill, in request order.
    Killed {
        /// One entry per requested id.
        outcomes: Vec<KillOutcome>,
    },
    /// Answer to [`Request::Ping`].
    Pong {
        /// The supervisor's pid.
        pid: u32,
    },
    /// The request failed.
    Error {
        /// What kind of failure.
        kind: ErrorKind,
        /// One line for humans.
        message: String,
    },
}

/// The outcome of killing one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillOutcome {
    /// The task.
    pub id: String,
    /// `killed`, `already_ended`, or `unknown`.
    pub outcome: String,
}

/// Classes of supervisor errors, mapped to exit codes by the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request was not understood.
    BadRequest,
    /// A task id was malformed.
    MalformedId,
    /// The task could not be started.
    Spawn,
    /// Anything else.
    Internal,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn requests_are_tagged_json_lines() {
        let line = serde_json::to_string(&Request::Kill {
            ids: vec!["b12345678".into()],
        })
        .unwrap();
        assert_eq!(line, r#"{"op":"kill","ids":["b12345678"]}"#);
        assert_eq!(
            serde_json::from_str::<Request>(&line).unwrap(),
            Request::Kill {
                ids: vec!["b12345678".into()]
            }
        );
    }
}
