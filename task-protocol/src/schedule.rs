//! What a start asks of the queue ([`Schedule`]): its group, priority, dependencies, time and
//! readiness check. The supervisor's queue acts on it.

use serde::{Deserialize, Serialize};

use crate::TaskId;

/// The group of a task whose start names none.
pub const DEFAULT_GROUP: &str = "default";

/// The longest group name accepted.
pub const MAX_GROUP_BYTES: usize = 64;

/// When and where a task may start, as its start asks ([`Start::schedule`](crate::wire::Start::schedule)).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    /// Its group ([`DEFAULT_GROUP`] if none).
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
    /// What makes it ready once it runs ([`ReadyCheck`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<ReadyCheck>,
}

impl Schedule {
    /// Whether the start asks for anything but an immediate start in the default group.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// What makes a task ready.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "check", rename_all = "snake_case")]
pub enum ReadyCheck {
    /// A line of its output matches this regular expression.
    Line {
        /// The pattern.
        pattern: String,
    },
    /// A TCP connection to this port of 127.0.0.1 succeeds.
    Port {
        /// The port.
        port: u16,
    },
    /// A `GET` of this `http://` URL answers 2xx.
    Http {
        /// The URL.
        url: String,
    },
}

fn is_zero(n: &i32) -> bool {
    *n == 0
}
