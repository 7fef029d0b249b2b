//! Operating-system process control: spawning in a process group, killing whole trees, and
//! killing what a dead supervisor left of a group.

mod spawn;
mod tree;

pub use spawn::{
    CommandSpec, DEFAULT_SHELL, EXIT_KILLED, EXIT_SPAWN_FAILED, EXIT_TIMED_OUT, StdinMode,
    exit_code,
};
pub use tree::{kill_orphaned_group, kill_tree, start_time};
