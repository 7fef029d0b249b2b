//! Operating-system process control: spawning in a process group, containing and killing whole
//! trees, and killing what a dead supervisor left of a task.

mod contain;
mod orphan;
mod procfs;
mod script;
mod spawn;
mod tree;

pub use contain::{TASK_MARKER_ENV, become_subreaper, reap_adopted_orphans};
pub use orphan::{TaskFingerprint, kill_orphaned_group, kill_orphaned_task};
pub use script::MAX_ARGUMENT_COMMAND_BYTES;
pub use spawn::{
    CommandSpec, DEFAULT_SHELL, EXIT_KILLED, EXIT_SPAWN_FAILED, EXIT_TIMED_OUT, StdinMode,
    exit_code,
};
pub use tree::{kill_tree, start_time};
