//! The supervisor's wire: one JSON request line, one JSON response line, per connection.
//!
//! Typed end to end: ids are [`TaskId`]s (validated when decoded), outcomes are enums, and a
//! start carries the typed request of one task kind as a JSON value tagged with its kind,
//! which the supervisor hands, undecoded, to the launcher of that kind. Every request carries
//! a deadline: the supervisor refuses one it reads too late, so a request its client gave up
//! on is never carried out afterwards.
//!
//! Every request also carries the [`PROTOCOL_VERSION`] its client speaks. A supervisor serves
//! the versions from [`OLDEST_SERVED_VERSION`] to its own, and answers any other with
//! [`Response::Unsupported`], naming both, having done nothing; a request from a client built
//! before versions (no `version` field) reads as version 0. [`Op::Hello`] asks a supervisor
//! for its version without doing anything else.

use serde::{Deserialize, Serialize};

use crate::{Address, Caller, InputRefusal, MessageReply, Schedule, StrayPolicy, TaskId};

/// The version of the wire this build speaks. It changes whenever a request or an answer
/// changes in a way the other side cannot read: 2 added [`Op::GroupPause`] and [`Op::Release`];
/// 3 added the `local` placement and a teammate's placement (a start an older supervisor would
/// refuse as malformed, or run on the wrong machine).
pub const PROTOCOL_VERSION: u32 = 3;

/// The oldest client version a supervisor of this build serves.
pub const OLDEST_SERVED_VERSION: u32 = 1;

/// The longest request line accepted (a start carries the caller's whole environment).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// Whether a supervisor of this build serves a client speaking `version`.
pub fn serves(version: u32) -> bool {
    (OLDEST_SERVED_VERSION..=PROTOCOL_VERSION).contains(&version)
}

/// The version a request line claims, read leniently, for a line that is not a request this
/// build understands: a newer client's new operation still gets [`Response::Unsupported`]
/// rather than "bad request". 0 when the line names none.
pub fn claimed_version(line: &[u8]) -> u32 {
    #[derive(Deserialize)]
    struct Claimed {
        #[serde(default)]
        version: u32,
    }
    serde_json::from_slice::<Claimed>(line).map_or(0, |claimed| claimed.version)
}

/// What a client asks the supervisor, and until when the answer is of use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Request {
    /// The protocol version the client speaks ([`PROTOCOL_VERSION`]; 0 when absent: a client
    /// from before versions).
    #[serde(default)]
    pub version: u32,
    /// After this time (ms since the epoch) the client no longer waits: do nothing.
    pub deadline_ms: u64,
    /// The operation.
    pub op: Op,
}

impl Request {
    /// `op`, in this build's [`PROTOCOL_VERSION`], of use until `deadline_ms`.
    pub fn new(deadline_ms: u64, op: Op) -> Self {
        Request {
            version: PROTOCOL_VERSION,
            deadline_ms,
            op,
        }
    }
}

/// The operations of the protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "op", rename_all = "snake_case", rename_all_fields = "camelCase")]
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
        /// Its id, the same on every attempt of this send (the sender's, so a receiver drops a repeat).
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
    /// Pauses a group (it starts none of its queued tasks; those running go on) or resumes it
    /// (`tasks group pause`, `tasks group resume`); kept across supervisors. Since version 2.
    GroupPause {
        /// The group.
        group: String,
        /// Paused (true) or resumed (false).
        paused: bool,
    },
    /// Liveness check.
    Ping,
    /// The supervisor's protocol version, and nothing else ([`Response::Hello`]).
    Hello,
    /// Up to `max_bytes` of a task's output from byte `offset`, as UTF-8 that never splits a
    /// character ([`Response::Output`]).
    Output {
        /// The task.
        id: TaskId,
        /// Where to read from (0: the start; the previous answer's `next` to follow).
        #[serde(default)]
        offset: u64,
        /// At most this many bytes.
        max_bytes: u32,
    },
    /// Lets go of ended tasks now rather than after their settle grace (a client about to
    /// remove their files): each whose final record is on disk is forgotten by the
    /// supervisor, which never writes it again ([`Response::Released`]).
    Release {
        /// The tasks.
        ids: Vec<TaskId>,
    },
    /// Takes every deliverable notification ([`Response::Notifications`]): each is marked
    /// delivered once the answer carrying it has been written to the client, so each reaches
    /// one taker once.
    TakeNotifications,
}

/// A task to start: which launcher, for whom, and the launcher's own request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Start {
    /// The launcher's kind (`"shell"`, `"agent"`, …: its executor's `Launch::KIND`).
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
    /// Its group, priority, dependencies and start time (see [`Schedule`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Box<Schedule>>,
    /// The task's own end hook (`tasks run --on-end CMD`), run instead of the session's
    /// end hook when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_end: Option<String>,
    /// What is done with the processes the task leaves running (`tasks run --strays`), instead
    /// of the session's setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strays: Option<StrayPolicy>,
}

/// The longest [`Start::key`] a supervisor takes.
pub const MAX_START_KEY_BYTES: usize = 64;

/// The supervisor's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(
    tag = "result",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
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
    /// A group was paused or resumed ([`Op::GroupPause`]).
    GroupPaused {
        /// The group.
        group: String,
        /// Whether it is paused now.
        paused: bool,
    },
    /// Answer to [`Op::Ping`].
    Pong {
        /// The supervisor's pid.
        pid: u32,
        /// How many tasks its registry holds (live, or ended and not evicted yet).
        registered: usize,
    },
    /// The supervisor's protocol versions ([`Op::Hello`]).
    Hello {
        /// The version it speaks.
        version: u32,
        /// The oldest client version it serves.
        oldest: u32,
        /// Its pid.
        pid: u32,
    },
    /// A slice of a task's output ([`Op::Output`]).
    Output {
        /// The text read (possibly empty).
        text: String,
        /// The offset to read from next.
        next: u64,
        /// Whether the task has ended (its output is then complete).
        ended: bool,
    },
    /// The tasks of an [`Op::Release`] the supervisor no longer holds (it will not write
    /// their records again); the others are live, or their end is not on disk yet.
    Released {
        /// The tasks let go of.
        ids: Vec<TaskId>,
    },
    /// The notifications taken ([`Op::TakeNotifications`]), in delivery order.
    Notifications {
        /// The notifications (possibly none).
        notices: Vec<WireNotice>,
    },
    /// The client speaks a protocol version this supervisor does not serve; nothing was done.
    Unsupported {
        /// The version the client sent.
        client: u32,
        /// The version the supervisor speaks.
        supervisor: u32,
        /// The oldest client version it serves.
        oldest: u32,
    },
    /// The request failed; nothing was done.
    Error {
        /// What kind of failure.
        kind: ErrorKind,
        /// One line for humans.
        message: String,
    },
}

/// One notification as the wire carries it: the `<task-notification>` envelope a model reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WireNotice {
    /// Its stable key: the same on every delivery of this notification.
    pub key: String,
    /// The task it is about.
    pub task_id: TaskId,
    /// The envelope.
    pub text: String,
}

/// What a kill did to one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct KillReport {
    /// The task.
    pub id: TaskId,
    /// What happened to it.
    pub result: KillResult,
}

/// What a kill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request was not understood (or names a kind no launcher starts).
    BadRequest,
    /// The request arrived after its deadline: it was not carried out.
    Expired,
    /// The task could not be started.
    Spawn,
    /// No task of the session has the id asked for.
    UnknownTask,
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
        let request = Request::new(5, Op::Kill { ids: vec![id] });
        let line = serde_json::to_string(&request).unwrap();
        assert_eq!(
            line,
            format!(
                r#"{{"version":{PROTOCOL_VERSION},"deadlineMs":5,"op":{{"op":"kill","ids":["b12345678"]}}}}"#
            )
        );
        assert_eq!(serde_json::from_str::<Request>(&line).unwrap(), request);
        let forged = r#"{"deadlineMs":5,"op":{"op":"kill","ids":["../etc"]}}"#;
        assert!(serde_json::from_str::<Request>(forged).is_err());
    }

    #[test]
    fn the_version_of_a_line_is_read_even_when_its_operation_is_not() {
        let newer = br#"{"version":7,"deadlineMs":5,"op":{"op":"teleport"}}"#;
        assert!(serde_json::from_slice::<Request>(newer).is_err());
        assert_eq!(claimed_version(newer), 7);
        assert!(!serves(7));
        let before_versions = br#"{"deadlineMs":5,"op":{"op":"ping"}}"#;
        let read = serde_json::from_slice::<Request>(before_versions).unwrap();
        assert_eq!(read.version, 0);
        assert!(!serves(read.version));
        assert_eq!(claimed_version(b"not json"), 0);
        assert!(serves(PROTOCOL_VERSION));
    }
}
