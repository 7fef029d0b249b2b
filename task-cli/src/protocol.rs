//! The supervisor protocol: one JSON request line, one JSON response line, per connection.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{CliError, Result};

/// What a client asks the supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Request {
    /// Start a background shell command (`local_bash`).
    Run(StartShell),
    /// Start a monitor (`monitor_mcp`): each stdout line, or WebSocket frame, is an event.
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
    /// Whether its completion is notified (default). `false` starts it in the foreground (SPEC
    /// §5): its caller waits for the end itself, so the supervisor marks it notified at start
    /// (its `.notified` latch) and finishes it silently, and no reader ever delivers it.
    #[serde(default = "notify_by_default")]
    pub notify: bool,
}

fn notify_by_default() -> bool {
    true
}

/// A monitor to start: a command xor a WebSocket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartMonitor {
    /// Shell text whose stdout lines are events.
    #[serde(default)]
    pub command: Option<String>,
    /// A WebSocket whose frames are events.
    #[serde(default)]
    pub ws: Option<WsTarget>,
    /// Human description.
    pub description: String,
    /// Lifetime in milliseconds (default and cap from the config); ignored when persistent.
    pub timeout_ms: Option<u64>,
    /// Live until killed or the command exits.
    pub persistent: bool,
    /// Working directory of the command (default: the supervisor's, `/`).
    pub cwd: Option<PathBuf>,
}

/// A WebSocket to watch (SPEC §13's `ws` input of `Monitor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(inline)]
pub struct WsTarget {
    /// `ws://` or `wss://` URL
    pub url: String,
    /// Subprotocols to offer
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protocols: Vec<String>,
}

impl WsTarget {
    /// Checks the URL's scheme, so a typo is refused before a monitor starts.
    pub fn validate(&self) -> Result<()> {
        let scheme_ok = ["ws://", "wss://"].iter().any(|scheme| {
            self.url.len() > scheme.len()
                && self
                    .url
                    .get(..scheme.len())
                    .is_some_and(|s| s.eq_ignore_ascii_case(scheme))
        });
        if scheme_ok {
            Ok(())
        } else {
            Err(CliError::Invalid(format!(
                "not a WebSocket URL (ws://… or wss://…): {:?}",
                self.url
            )))
        }
    }
}

impl From<WsTarget> for task_shell::monitor::WsTarget {
    fn from(target: WsTarget) -> Self {
        Self {
            url: target.url,
            protocols: target.protocols,
        }
    }
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

    #[test]
    fn start_requests_from_older_clients_keep_their_meaning() {
        let shell: StartShell = serde_json::from_str(
            r#"{"command":"true","description":"d","timeout_ms":null,"agent_id":null,"tool_use_id":null,"cwd":null}"#,
        )
        .unwrap();
        assert!(shell.notify);
        let monitor: StartMonitor = serde_json::from_str(
            r#"{"command":"tail -f log","description":"d","timeout_ms":null,"persistent":false,"cwd":null}"#,
        )
        .unwrap();
        assert_eq!(monitor.command.as_deref(), Some("tail -f log"));
        assert_eq!(monitor.ws, None);
    }

    #[test]
    fn websocket_targets_need_a_websocket_url() {
        let target = |url: &str| WsTarget {
            url: url.into(),
            protocols: Vec::new(),
        };
        assert!(target("ws://127.0.0.1:9/events").validate().is_ok());
        assert!(target("WSS://example.com").validate().is_ok());
        for bad in ["", "ws://", "http://example.com", "example.com"] {
            assert!(
                matches!(target(bad).validate(), Err(CliError::Invalid(_))),
                "{bad:?}"
            );
        }
    }
}
