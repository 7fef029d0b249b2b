//! The supervisor protocol (task-protocol's [`task_protocol::wire`], re-exported), and what a
//! start brings for its end ([`Ends`]).

pub use task_protocol::wire::*;
pub use task_protocol::{InputRefusal, Schedule};

/// What a task brings for its end ([`Start::on_end`], [`Start::strays`]); nothing: the
/// session's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ends {
    /// Its own end hook.
    pub on_end: Option<String>,
    /// What is done with the processes it leaves running.
    pub strays: Option<task_protocol::StrayPolicy>,
}
