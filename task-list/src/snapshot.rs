//! [`Snapshot`]: what a read of a whole list gives, from either store: every task by id, and
//! the entries that could not be read.

use std::collections::BTreeMap;

use crate::entry::FileProblem;
use crate::id::TaskId;
use crate::record::Task;

/// Every task of a list, by id, and the entries that could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The tasks, ordered by id.
    pub tasks: BTreeMap<TaskId, Task>,
    /// Entries named like task files that hold no readable task (malformed, torn, not regular
    /// files, too large, an invalid id), by name.
    pub problems: Vec<FileProblem>,
}
