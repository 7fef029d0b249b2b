//! The contract of the tasks system: what every front end, supervisor and executor agree on.
//!
//! - identity: [`TaskType`] and the validated, unpredictable [`TaskId`]; [`Address`]es of
//!   messages (an id, `name`, `name@team`);
//! - the lifecycle's words: [`TaskStatus`], [`TerminalStatus`], the typed [`EndReason`];
//! - who asks for a task ([`Caller`]: directory, whole environment, owning agent);
//! - the typed start request of every kind ([`start`]: shell, monitor, agent, teammate,
//!   dream, workflow, remote), each naming its kind on the wire ([`start::StartRequest`]);
//! - what a start asks of the queue ([`Schedule`], [`ReadyCheck`]) and of its end
//!   ([`StrayPolicy`]);
//! - the sessions API's wire shapes ([`remote_api`], SPEC §16), served by `tasks serve` and
//!   read by remote agents;
//! - the names of a workflow run's files ([`workflow`]);
//! - what a front end tells its model when a task it started runs in the background
//!   ([`texts`]);
//! - the supervisor's [`wire`]: one request line, one answer line, versioned
//!   ([`PROTOCOL_VERSION`](wire::PROTOCOL_VERSION)), with a deadline on every request.
//!
//! Serde only: no runtime, no processes, no files. With the feature `schema`, [`schema`]
//! gives the JSON Schema of the wire, from which a client in any language can be written
//! (the repository keeps it as `task-protocol/wire.schema.json`).
//!
//! # Example
//!
//! A client's request line, and the supervisor's check of its version:
//!
//! ```
//! use task_protocol::wire::{self, Op, Request, Response};
//!
//! let line = serde_json::to_string(&Request::new(u64::MAX, Op::Hello)).unwrap();
//! assert!(line.starts_with(r#"{"version":2,"#));
//!
//! // A supervisor reads the version even from a line it cannot otherwise read.
//! let newer = br#"{"version":99,"deadlineMs":1,"op":{"op":"teleport"}}"#;
//! let client = wire::claimed_version(newer);
//! assert!(!wire::serves(client));
//! let answer = Response::Unsupported {
//!     client,
//!     supervisor: wire::PROTOCOL_VERSION,
//!     oldest: wire::OLDEST_SERVED_VERSION,
//! };
//! assert!(serde_json::to_string(&answer).unwrap().contains(r#""result":"unsupported""#));
//! ```
#![deny(missing_docs)]

mod caller;
mod end;
mod id;
mod message;
mod refusal;
pub mod remote_api;
pub mod schedule;
#[cfg(feature = "schema")]
pub mod schema;
pub mod start;
mod status;
mod strays;
pub mod texts;
pub mod wire;
pub mod workflow;

pub use caller::{AGENT_ID_ENV, Caller, ProgramError, TASK_MARKER_ENV};
pub use end::{
    BudgetLimit, EXIT_KILLED, EXIT_SPAWN_FAILED, EXIT_TIMED_OUT, EndReason, human_duration,
    human_size,
};
pub use id::{IdError, TASK_ID_LEN, TaskId, TaskType, lenient_task_id};
pub use message::{Address, AddressError, MessageOutcome, MessageReply};
pub use refusal::InputRefusal;
pub use schedule::{ReadyCheck, Schedule};
pub use status::{TaskStatus, TerminalStatus};
pub use strays::StrayPolicy;
