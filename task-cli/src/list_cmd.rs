//! `tasks list …`: the task-list store (SPEC §12).

use crate::cli::ListArgs;
use crate::error::{CliError, Result};
use crate::paths::SessionPaths;

/// Runs one `tasks list` operation.
pub fn execute(_paths: &SessionPaths, _args: ListArgs, _json: bool) -> Result<u8> {
    Err(CliError::List("task lists are not wired yet".into()))
}
