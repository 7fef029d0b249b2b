//! Operating-system process control: spawning in a process group and killing whole trees.

mod spawn;
mod tree;

pub use spawn::{
    CommandSpec, DEFAULT_SHELL, EXIT_KILLED, EXIT_SPAWN_FAILED, EXIT_TIMED_OUT, StdinMode,
    exit_code,
};
pub use tree::kill_tree;
