//! Re-running a task: how it was started is kept in its record ([`StartRecord`], written by
//! the supervisor), so `tasks restart ID` starts the same thing again under a new id.
//! A record written before the supervisor kept it has it beside it (`{id}.start.json`, written
//! by the client of that time), and is read from there.

use task_core::TaskId;

use crate::error::{Error, Result};
use crate::paths::SessionPaths;
use crate::record::TaskRecord;
pub use crate::start_record::{FORMAT, StartRecord};

/// How `id` was started.
///
/// # Errors
/// No record of `id`; a record that does not say how it was started; a corrupt file.
pub fn recall(paths: &SessionPaths, id: &TaskId) -> Result<StartRecord> {
    start_of(paths, &crate::record::read(paths, id)?)
}

/// How the task of `found` (its record) was started.
///
/// # Errors
/// As [`recall`].
pub fn start_of(paths: &SessionPaths, found: &TaskRecord) -> Result<StartRecord> {
    match &found.start {
        Some(start) => Ok(StartRecord::clone(start)),
        None => recall_beside(paths, &found.id()),
    }
}

/// How `id` was started, from the file an older client wrote beside its record.
fn recall_beside(paths: &SessionPaths, id: &TaskId) -> Result<StartRecord> {
    let path = paths.start_request(id);
    let bytes = crate::untrusted::read_file(&path, crate::untrusted::MAX_STATE_FILE_BYTES)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::Invalid(format!(
                "task {id} cannot be restarted: how it was started was not recorded"
            )),
            _ => Error::io("read", &path, e),
        })?;
    serde_json::from_slice(&bytes).map_err(|e| Error::CorruptState {
        path,
        reason: e.to_string(),
    })
}
