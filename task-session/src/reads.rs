//! The reads a supervisor answers for clients that speak only the wire (task-protocol's
//! [`Op::Output`](crate::protocol::Op::Output) and
//! [`Op::TakeNotifications`](crate::protocol::Op::TakeNotifications)): the same reads a
//! [`Session`] makes from the session's files, run off the runtime's workers.

use std::sync::Arc;

use task_core::TaskId;

use crate::error::{Error, Result};
use crate::notice::Leased;
use crate::protocol::{ErrorKind, Response, WireNotice};
use crate::session::Session;

/// The most output one [`Op::Output`](crate::protocol::Op::Output) answer carries.
pub const MAX_OUTPUT_READ: u32 = 1 << 20;

/// Up to `max_bytes` (at most [`MAX_OUTPUT_READ`]) of `id`'s output from `offset`. Whether the
/// task has ended is read first, so an answer that says it ended carries its output's end.
pub(crate) async fn output(
    reads: &Arc<Session>,
    id: TaskId,
    offset: u64,
    max_bytes: u32,
) -> Response {
    let reads = Arc::clone(reads);
    let read = tokio::task::spawn_blocking(move || -> Result<Response> {
        let ended = reads.task(&id)?.is_terminal();
        let max = max_bytes.min(MAX_OUTPUT_READ) as usize;
        let delta = reads.read_text_delta(&id, offset, max)?;
        Ok(Response::Output {
            text: delta.text,
            next: delta.new_offset,
            ended,
        })
    });
    match read.await {
        Ok(Ok(response)) => response,
        Ok(Err(Error::UnknownTask { id, .. })) => Response::Error {
            kind: ErrorKind::UnknownTask,
            message: format!("no task {id}"),
        },
        Ok(Err(error)) => Response::Error {
            kind: ErrorKind::Internal,
            message: error.to_string(),
        },
        Err(join) => Response::Error {
            kind: ErrorKind::Internal,
            message: format!("the read failed: {join}"),
        },
    }
}

/// Claims every deliverable notification for the answer that will carry them, recorded in
/// the session's log; the caller marks them delivered once that answer is written (dropped
/// unwritten, they are given back).
pub(crate) async fn take_notifications(reads: &Arc<Session>) -> Result<(Response, Leased)> {
    let reads = Arc::clone(reads);
    tokio::task::spawn_blocking(move || {
        let mut leased = reads.lease_notifications()?;
        leased.record()?;
        let notices = leased
            .notices()
            .map(|notice| WireNotice {
                key: notice.key.clone().unwrap_or_default(),
                task_id: notice.task_id(),
                text: notice.text(),
            })
            .collect();
        Ok((Response::Notifications { notices }, leased))
    })
    .await
    .map_err(|join| Error::Supervisor(format!("taking notifications failed: {join}")))?
}
