//! What a start asks of the queue ([`Schedule`]): its group, priority, dependencies, time and
//! readiness check. The protocol carries it; [`crate::queue`] acts on it and re-exports it.

use serde::{Deserialize, Serialize};
use task_core::TaskId;

use crate::error::Result;
use crate::placement::{is_zero, validate_group};

/// When and where a task may start, as its start asks ([`Start::schedule`](crate::protocol::Start::schedule)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    /// Its group ([`DEFAULT_GROUP`](crate::queue::DEFAULT_GROUP) if none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Higher starts first within its group; equal priorities in order of arrival.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// Tasks that must have completed first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<TaskId>,
    /// Not before this time (ms since the epoch, by the supervisor's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    /// Not before this long after the supervisor receives the start (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// What makes it ready once it runs ([`crate::ready`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<crate::ready::ReadyCheck>,
}

impl Schedule {
    /// Whether the start asks for anything but an immediate start in the default group.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Checks what a client sent: a group name of 1 to [`MAX_GROUP_BYTES`](crate::queue::MAX_GROUP_BYTES) printable
    /// characters, a readiness check that can be made.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) naming what is wrong.
    pub fn validate(&self) -> Result<()> {
        if let Some(group) = &self.group {
            validate_group(group)?;
        }
        match &self.ready {
            Some(check) => check.validate(),
            None => Ok(()),
        }
    }
}
