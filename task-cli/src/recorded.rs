//! Stopped tasks on the session's records that a message can take back: an agent or a teammate
//! the supervisor no longer holds (evicted, ended, or run by an earlier supervisor), for as
//! long as its record exists.

use task_core::{Address, TaskType};
use task_session::paths::SessionPaths;
use task_session::record::{self, TaskRecord};
use task_session::restart::{self, StartRecord};

/// The stopped task of `task_type` that `to` names, as the session's records have it, with how
/// it was started (or why that is not known): by id, or else the newest one that `named` says
/// `to` names (given its record and its start record, when there is one). An id of another
/// type reads nothing; a name lists the session's records.
pub(crate) fn stopped(
    paths: &SessionPaths,
    to: &Address,
    task_type: TaskType,
    named: impl Fn(&TaskRecord, Option<&StartRecord>) -> bool,
) -> Option<(TaskRecord, Result<StartRecord, String>)> {
    let stopped =
        |found: &TaskRecord| found.task.base.task_type == task_type && found.is_terminal();
    let start_of =
        |found: &TaskRecord| restart::recall(paths, &found.id()).map_err(|e| e.to_string());
    match to {
        Address::Task(id) if id.task_type() != task_type => None,
        Address::Task(id) => {
            let found = record::read(paths, id).ok().filter(stopped)?;
            let start = start_of(&found);
            Some((found, start))
        }
        Address::Name(_) | Address::Teammate { .. } => record::list(paths)
            .ok()?
            .tasks
            .into_iter()
            .filter(stopped)
            .map(|found| {
                let start = start_of(&found);
                (found, start)
            })
            .filter(|(found, start)| named(found, start.as_ref().ok()))
            .max_by_key(|(found, _)| found.task.base.start_time),
    }
}
