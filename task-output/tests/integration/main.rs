//! Integration tests of task-output on real files in temp dirs, built as one test binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod format;
mod mailbox;
mod open;
mod pipe;
mod read;
mod support;
mod transcript;
mod untrusted;
mod writer;
