//! A task's place in the queue as its record keeps it ([`Placement`]), and the group names
//! it is placed by: below the records that hold it. [`crate::queue`] places tasks and
//! re-exports all of it.

use std::cmp::Reverse;

use serde::{Deserialize, Serialize};
use task_core::TaskId;

use crate::error::{Error, Result};

pub use task_protocol::schedule::{DEFAULT_GROUP, MAX_GROUP_BYTES};

/// Checks a group name: 1 to [`MAX_GROUP_BYTES`] bytes, no whitespace or control character.
///
/// # Errors
/// [`Error::Invalid`] naming what is wrong.
pub fn validate_group(group: &str) -> Result<()> {
    if group.is_empty() || group.len() > MAX_GROUP_BYTES {
        return Err(Error::Invalid(format!(
            "a group name has 1 to {MAX_GROUP_BYTES} bytes"
        )));
    }
    if group.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Error::Invalid(format!(
            "{group:?}: a group name has no spaces or control characters"
        )));
    }
    Ok(())
}

/// A task's place in the queue, written into its record ([`crate::record::TaskRecord::queue`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    /// Its group.
    pub group: String,
    /// Its priority (higher first).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: i32,
    /// Its order of arrival in the session (smaller first among equal priorities).
    pub seq: u64,
    /// The tasks it starts after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<TaskId>,
    /// It starts no sooner than this (ms epoch, supervisor's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_before_ms: Option<u64>,
    /// It waits (for its turn, its dependencies or its time): `pending` and queued.
    #[serde(default)]
    pub waiting: bool,
}

impl Placement {
    /// Whether this is the place of a task started at once in the default group with no
    /// priority, dependency or time: nothing worth a record's bytes.
    pub(crate) fn is_plain(&self) -> bool {
        self.group == DEFAULT_GROUP
            && self.priority == 0
            && self.after.is_empty()
            && self.not_before_ms.is_none()
            && !self.waiting
    }

    /// The order of the queue: higher priority first, then arrival.
    pub(crate) fn key(&self) -> (Reverse<i32>, u64) {
        (Reverse(self.priority), self.seq)
    }
}

/// Whether `n` is 0 (a priority left out of a record or a start).
pub(crate) fn is_zero(n: &i32) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_are_short_and_plain() {
        assert!(validate_group("builds").is_ok());
        assert!(validate_group("").is_err());
        assert!(validate_group("a b").is_err());
        assert!(validate_group(&"x".repeat(65)).is_err());
    }
}
