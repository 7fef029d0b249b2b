//! Operating-system process control every process-backed executor shares (Linux): starting a
//! task's first process without copying the supervisor ([`Spawn`], [`Child`]) and what it does
//! before `exec` ([`ChildSetup`]), finding and killing a task's
//! whole tree, escapees included ([`kill_tree`], [`kill_and_reap`]), the supervisor's part in that
//! ([`become_subreaper`], [`reap_adopted_orphans`]), and killing what a dead supervisor left of
//! a task ([`kill_orphaned_task`]), and the processes a task left running when it ended
//! ([`strays_of`]).

mod child;
mod contain;
mod orphan;
mod procfs;
mod setup;
mod spawn;
mod strays;
mod tree;

pub use crate::TASK_MARKER_ENV;
pub use child::{Child, ChildStderr, ChildStdin, ChildStdout};
pub use contain::{become_subreaper, reap_adopted_orphans};
pub use orphan::{TaskFingerprint, kill_orphaned_group, kill_orphaned_task};
pub use setup::ChildSetup;
pub use spawn::{Group, Spawn, Stdio};
pub use strays::{
    STRAY_COMMAND_BYTES, Stray, StrayUsage, kill_strays_of, strays_of, strays_of_any,
};
pub use tree::{Root, kill_and_reap, kill_tree, start_time};
