//! Remote agents (`remote_agent`, SPEC §11): sessions on another machine, polled over the
//! sessions API of SPEC §16.
//!
//! - [`api`]: the wire shapes, shared with the server side (`tasks serve`): task-protocol's
//!   `remote_api`, re-exported;
//! - [`RemoteSessions`]: the client trait (create, status, events after a cursor, send,
//!   archive) and [`HttpSessions`], its implementation on reqwest with rustls (the
//!   sessions-client crate's, re-exported; front ends check a server through it without
//!   linking this executor);
//! - [`RemoteExecutor`]: task-core's [`Task`](task_core::Task) and
//!   [`Launch`](task_core::Launch) (`"remote"`) for `remote_agent`: the 1 s poll loop, idle
//!   trusted after 5 idle polls, completion checkers per subtype, the 30-minute review limit,
//!   the event log appended to the output file, the resume [`Sidecar`], kill = archive, and
//!   capped exponential backoff with jitter through server faults, up to a bounded outage.
//!
//! The poll and retry timings are in [`RemoteConfig`], whose `Default` is the SPEC's.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use task_remote::{HttpSessions, RemoteConfig};
//!
//! let config = RemoteConfig::default();
//! assert_eq!(config.poll_interval, Duration::from_secs(1));
//! assert_eq!(config.idle_polls_trusted, 5);
//! // A client: no request is made until it is used.
//! let client = HttpSessions::new("http://127.0.0.1:7070", "token", config.request_timeout);
//! assert!(client.is_ok());
//! assert!(HttpSessions::new("ftp://host", "token", config.request_timeout).is_err());
//! ```
#![deny(missing_docs)]

pub use task_protocol::remote_api as api;
mod backoff;
mod checker;
mod config;
mod error;
mod eventlog;
mod executor;
mod launch;
pub mod notify;
mod sidecar;

pub use backoff::Backoff;
pub use checker::CompletionChecker;
pub use config::{
    BACKOFF_BASE, BACKOFF_CAP, IDLE_POLLS_TRUSTED, OUTAGE_LIMIT, POLL_INTERVAL, REQUEST_TIMEOUT,
    REVIEW_TIMEOUT, RemoteConfig,
};
pub use error::{ApiError, RemoteError};
pub use eventlog::EventLog;
pub use executor::{PendingRemote, RemoteExecutor, RemoteRequest};
pub use launch::{RemoteStart, check_access};
pub use sessions_client::{HttpSessions, RemoteSessions};
pub use sidecar::{Sidecar, Sidecars};
pub use task_output::token::{MAX_TOKEN_FILE_BYTES, TokenFileError, read_token_file};
