//! The task types the `tasks` supervisor runs: one line per executor crate.
//!
//! Everything else in the session layer is generic; adding a task type means an executor crate
//! (implementing task-core's `Task` and `Launch`) and a line here.

use task_shell::{Monitors, ShellExecutor};

use crate::engine::{Host, Launchers};
use crate::error::Result;

/// Shell commands and monitors (task-shell).
pub fn standard(host: &Host) -> Result<Launchers> {
    let shells = ShellExecutor::new(
        host.registry.clone(),
        host.paths.tasks_dir(),
        host.config.shell.clone(),
    )
    .register_with_registry();
    Ok(Launchers::new().with(shells.clone()).with(Monitors(shells)))
}
