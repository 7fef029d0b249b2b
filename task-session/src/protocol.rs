//! The supervisor protocol: one JSON request line, one JSON response line, per connection.
//!
//! Typed end to end: ids are [`TaskId`]s (validated when decoded), outcomes are enums, and a
//! start carries the typed request of one task kind ([`task_core::Launch::Request`]) as a JSON
//! value tagged with its kind, which the supervisor hands, undecoded, to the launcher of that
//! kind. Every request carries a deadline: the supervisor refuses one it reads too late, so a
//! request its client gave up on is never carried out afterwards.

use serde::{Deserialize, Serialize};
use task_core::{Address, Caller, MessageReply, TaskId};

use crate::schedule::Schedule;

pub use crate::refusal::InputRefusal;

/// What a client asks the supervisor, and until when the answer is of use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// After this time (ms since the epoch) the client no longer waits: do nothing.
    pub deadline_ms: u64,
    /// The operation.
    pub op: Op,
}

/// The operations of the protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Op {
    /// Start a task of one kind.
    Start(Start),
    /// Kill tasks (and their process trees).
    Kill {
        /// The tasks.
        ids: Vec<TaskId>,
    },
    /// A message to a task that takes messages (an agent, a teammate, a remote agent).
    Send {
        /// Who it is for (on the wire, the address as written: an id, `name`, `name@team`).
        to: Address,
        /// The message.
        message: String,
        /// Its id, the same on every attempt of this send ([`Messenger::send`](crate::engine::Messenger::send)).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
    },
    /// Bytes for a task's stdin (`tasks input`), then, if asked, its end. One chunk per
    /// request: the answer comes once the bytes are in the task's pipe, so a client that sends
    /// its next chunk only then keeps order and never has more than one chunk in flight.
    Input {
        /// The task.
        id: TaskId,
        /// The bytes, base64 (standard alphabet, padded); empty to only close.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        data: String,
        /// Close the task's stdin after the bytes.
        #[serde(default)]
        close: bool,
    },
    /// Sets the parallelism limit of a group (`tasks group set`).
    Group {
        /// The group.
        group: String,
        /// At most this many of its tasks run at once (0: unlimited).
        parallel: u32,
    },
    /// Liveness check.
    Ping,
}

/// A task to start: which launcher, for whom, and the launcher's own request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Start {
    /// The launcher's [`KIND`](task_core::Launch::KIND).
    pub kind: String,
    /// Who asks, from which directory and environment.
    pub caller: Caller,
    /// The launcher's request, encoded.
    pub request: serde_json::Value,
    /// The same on every attempt of one start (set by the client): a start sent again after
    /// its supervisor died without answering gets the task the first attempt made, if it made
    /// one, instead of a second task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// This is not the first attempt: the supervisor looks for a task the key already made.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry: bool,
    /// Its group, priority, dependencies and start time (see [`crate::queue`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Box<Schedule>>,
    /// The task's own end hook (`tasks run --on-end CMD`), run instead of the session's
    /// [`crate::config::Config::on_end`] when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_end: Option<String>,
    /// What is done with the processes the task leaves running (`tasks run --strays`), instead
    /// of the session's [`crate::config::Config::strays`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strays: Option<crate::strays::StrayPolicy>,
}

/// What a task brings for its end ([`Start::on_end`], [`Start::strays`]); nothing: the
/// session's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ends {
    /// Its own end hook.
    pub on_end: Option<String>,
    /// What is done with the processes it leaves running.
    pub strays: Option<crate::strays::StrayPolicy>,
}

/// The longest [`Start::key`] a supervisor takes.
pub const MAX_START_KEY_BYTES: usize = 64;

/// The supervisor's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Response {
    /// A task was started.
    Started {
        /// Its id.
        id: TaskId,
    },
    /// The outcome of each kill, in request order.
    Killed {
        /// One report per requested id.
        reports: Vec<KillReport>,
    },
    /// What became of a message ([`Op::Send`]).
    Sent {
        /// Its outcome.
        reply: MessageReply,
    },
    /// The bytes of an [`Op::Input`] are in the task's stdin pipe.
    Written {
        /// How many.
        bytes: usize,
        /// Whether the stdin was closed after them.
        closed: bool,
    },
    /// An [`Op::Input`] was refused (nothing written), or only partly written (`Stalled`).
    InputRefused {
        /// Why.
        reason: InputRefusal,
        /// One line for humans.
        message: String,
    },
    /// A group's limit was set ([`Op::Group`]).
    GroupSet {
        /// The group.
        group: String,
        /// Its limit (0: unlimited).
        parallel: u32,
    },
    /// Answer to [`Op::Ping`].
    Pong {
        /// The supervisor's pid.
        pid: u32,
        /// How many tasks its registry holds (live, or ended and not evicted yet).
        registered: usize,
    },
    /// The request failed; nothing was done.
    Error {
        /// What kind of failure.
        kind: ErrorKind,
        /// One line for humans.
        message: String,
    },
}

/// What a kill did to one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KillReport {
    /// The task.
    pub id: TaskId,
    /// What happened to it.
    pub result: KillResult,
}

/// What a kill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KillResult {
    /// It was killed.
    Killed,
    /// It had already ended.
    AlreadyEnded,
    /// No such task.
    Unknown,
    /// The kill failed (see the supervisor's log).
    Failed,
}

impl KillResult {
    /// The result in words: `killed`, `already ended`, `unknown`, `failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            KillResult::Killed => "killed",
            KillResult::AlreadyEnded => "already ended",
            KillResult::Unknown => "unknown",
            KillResult::Failed => "failed",
        }
    }
}

/// Classes of supervisor errors, mapped to exit codes by the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request was not understood (or names a kind no launcher starts).
    BadRequest,
    /// The request arrived after its deadline: it was not carried out.
    Expired,
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
    fn requests_are_tagged_json_lines_with_validated_ids() {
        let id = TaskId::parse("b12345678").unwrap();
        let request = Request {
            deadline_ms: 5,
            op: Op::Kill { ids: vec![id] },
        };
        let line = serde_json::to_string(&request).unwrap();
        assert_eq!(
            line,
            r#"{"deadlineMs":5,"op":{"op":"kill","ids":["b12345678"]}}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), request);
        let forged = r#"{"deadlineMs":5,"op":{"op":"kill","ids":["../etc"]}}"#;
        assert!(serde_json::from_str::<Request>(forged).is_err());
    }
}
