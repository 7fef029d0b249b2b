//! Operating-system process control: spawning in a process group; containing and killing whole
//! trees, and killing what a dead supervisor left of a task, are task-core's
//! ([`task_core::process`], re-exported here).

mod script;
mod spawn;

pub use script::MAX_ARGUMENT_COMMAND_BYTES;
pub use spawn::{
    CommandSpec, DEFAULT_SHELL, EXIT_KILLED, EXIT_SPAWN_FAILED, EXIT_TIMED_OUT, StdinMode,
    exit_code,
};
pub use task_core::process::{
    ChildSetup, Root, TASK_MARKER_ENV, TaskFingerprint, become_subreaper, kill_orphaned_group,
    kill_orphaned_task, kill_tree, reap_adopted_orphans, start_time,
};
