//! What a supervisor and its clients agree on besides the protocol's messages: the longest
//! request line, and how a starting supervisor reports to the client that started it. Below
//! both sides; [`crate::supervisor`] re-exports it.

/// The longest request line accepted (a start carries the caller's whole environment).
pub const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// The environment variable naming the file descriptor on which a starting supervisor reports
/// to the client that started it: one line, `ready`, `busy` (another supervisor owns the
/// session) or `error: …`.
pub const READY_FD_ENV: &str = "TASKS_READY_FD";
