//! The typed start requests of the task kinds, as [`Start::request`](crate::wire::Start::request)
//! carries them, tagged by [`Start::kind`](crate::wire::Start::kind).

use serde::{Deserialize, Serialize};

/// The [`Start::kind`](crate::wire::Start::kind) of a [`ShellStart`].
pub const SHELL_KIND: &str = "shell";

/// A shell command to start (`local_bash`), as `tasks run` or the MCP `Bash` tool asks for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct ShellStart {
    /// Shell text, run with `sh -c`.
    pub command: String,
    /// The one-line description shown in notifications.
    pub description: String,
    /// Kill the command after this many milliseconds (exit code 143).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// `/dev/null` (the default), or a pipe the host holds for the task's life and writes to
    /// through the supervisor's input operation ([`Op::Input`](crate::wire::Op::Input)).
    #[serde(default, skip_serializing_if = "StdinMode::is_null")]
    pub stdin: StdinMode,
}

/// What the child's stdin is (on the wire `"null"` or `"pipe"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub enum StdinMode {
    /// `/dev/null`: a `read` gets end-of-file at once (the default, as in the reference).
    #[default]
    #[serde(rename = "null")]
    Null,
    /// A pipe the caller can write to.
    #[serde(rename = "pipe")]
    Piped,
}

impl StdinMode {
    /// Whether this is the default, `/dev/null`.
    pub fn is_null(&self) -> bool {
        *self == StdinMode::Null
    }
}
