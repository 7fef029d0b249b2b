//! The checks of what a start asks of the queue (task-protocol's [`Schedule`]): the protocol
//! carries it; [`crate::queue`] acts on it and re-exports it.

pub use task_protocol::Schedule;

use crate::error::Result;
use crate::placement::validate_group;

/// Checks what a client sent: a group name of 1 to [`MAX_GROUP_BYTES`](crate::queue::MAX_GROUP_BYTES) printable
/// characters, a readiness check that can be made.
///
/// # Errors
/// [`Error::Invalid`](crate::Error::Invalid) naming what is wrong.
pub fn validate(schedule: &Schedule) -> Result<()> {
    if let Some(group) = &schedule.group {
        validate_group(group)?;
    }
    match &schedule.ready {
        Some(check) => crate::ready::validate(check),
        None => Ok(()),
    }
}
