//! The names of a workflow run's files under a session's tasks directory: the workflow
//! executor writes them, a front end reads a run's record to tell its model where the run is.
//!
//! ```
//! use std::path::Path;
//! use task_protocol::{TaskId, workflow};
//!
//! let id = TaskId::parse("w765vv7by").unwrap();
//! let run = workflow::run_id_of(&id);
//! assert_eq!(run, "wf_765vv7by");
//! assert!(workflow::is_run_id(&run));
//! assert!(!workflow::is_run_id("wf_../x"));
//! let tasks = Path::new("/s/tasks");
//! assert_eq!(workflow::record_path(tasks, &run), Path::new("/s/tasks/workflows/wf_765vv7by.json"));
//! assert_eq!(workflow::run_dir(tasks, &run), Path::new("/s/tasks/workflows/wf_765vv7by"));
//! ```

use std::path::{Path, PathBuf};

use crate::TaskId;

/// The run id of workflow task `id`: `wf_` and the id's random part.
pub fn run_id_of(id: &TaskId) -> String {
    format!("wf_{}", &id.as_str()[1..])
}

/// Whether `run_id` is a run id: `wf_` then 6 to 64 of `[a-z0-9-]` (the tool's pattern), so a
/// path built from it stays in its directory.
pub fn is_run_id(run_id: &str) -> bool {
    let tail = run_id.strip_prefix("wf_").unwrap_or("");
    (6..=64).contains(&tail.len())
        && tail
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// `{tasks_dir}/workflows/`: every run's files.
pub fn runs_dir(tasks_dir: &Path) -> PathBuf {
    tasks_dir.join("workflows")
}

/// `{tasks_dir}/workflows/{run_id}/`: a run's journal and its agents' transcripts. `run_id`
/// must be one ([`is_run_id`]).
pub fn run_dir(tasks_dir: &Path, run_id: &str) -> PathBuf {
    runs_dir(tasks_dir).join(run_id)
}

/// `{tasks_dir}/workflows/{run_id}.json`: a run's record. `run_id` must be one
/// ([`is_run_id`]).
pub fn record_path(tasks_dir: &Path, run_id: &str) -> PathBuf {
    runs_dir(tasks_dir).join(format!("{run_id}.json"))
}
