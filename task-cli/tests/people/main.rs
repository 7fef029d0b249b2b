//! `tasks` for people (issue #18): the status line, removing finished tasks, and the rough edges
//! of the command line. The built binary, run as separate processes on a temporary
//! `TASKS_ROOT`; every process a test causes is killed by pid when its sandbox drops.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../support/mod.rs"]
mod support;

mod exit_codes;
mod help;
mod input;
mod ps;
mod readme;
mod restart;
mod rough_edges;
mod sandbox;
mod status;
mod stream;
mod strict_json;
mod tidy;
mod top;
mod zsh_completion;
