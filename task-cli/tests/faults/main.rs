//! Fault injection against the built `tasks` binary (issue #12): real processes, real files, a
//! real full filesystem (a small tmpfs), a stopped supervisor, hostile state files, foreign
//! process groups and foreign users. Each test is named for the property it shows;
//! `RELIABILITY.md` at the repository root maps every fault to its test.
//!
//! Tests that need root (mounting a tmpfs, `chown`, a second uid) print why and skip when not
//! root; under `CI=true` they fail instead, since CI runs as root.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod deleted_session;
mod environment;
mod full_disk;
mod hostile_files;
mod killed_readers;
mod private_state;
mod random_kills;
mod sandbox;
mod stopped;
mod supervisor_death;
#[path = "../support/mod.rs"]
mod support;
mod teammate_crash;
mod worktree_crash;
