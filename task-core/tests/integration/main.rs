//! Integration tests of task-core, built as one test binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
mod envelope;
mod escaping;
mod executors;
mod lifecycle;
mod poll;
mod registry;
mod spawn;
mod stress;
