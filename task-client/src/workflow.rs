//! A workflow run as a front end reads it once its task started: what its record (written by
//! the workflow executor before the start was answered) says the model is told.

use std::path::{Path, PathBuf};

use serde_json::Value;
use task_output::OutputError;
use task_protocol::{TaskId, workflow};

/// The most bytes of a run record read.
const MAX_RECORD_BYTES: u64 = 64 << 20;

/// Why a run's record could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The record is missing or unreadable (a symlink, not a regular file, too large).
    #[error(transparent)]
    Read(#[from] OutputError),
    /// The record is not JSON.
    #[error("{}: {reason}", path.display())]
    Corrupt {
        /// The record.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

/// A started workflow run: where its files are and what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launched {
    /// Its run id (`wf_…`).
    pub run_id: String,
    /// Its summary (the script's `meta.description`).
    pub summary: String,
    /// The file its script is kept in.
    pub script_path: String,
    /// Its journal and agents' transcripts.
    pub run_dir: PathBuf,
}

impl Launched {
    /// The run of workflow task `id`, from its record under `tasks_dir`.
    ///
    /// # Errors
    /// [`RecordError`]: no record, or one that is not JSON.
    pub fn read(tasks_dir: &Path, id: &TaskId) -> Result<Self, RecordError> {
        let run_id = workflow::run_id_of(id);
        let path = workflow::record_path(tasks_dir, &run_id);
        let bytes = task_output::open::read_untrusted(&path, MAX_RECORD_BYTES)?;
        let record: Value = serde_json::from_slice(&bytes).map_err(|e| RecordError::Corrupt {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let text = |key: &str| {
            record
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Ok(Launched {
            run_dir: workflow::run_dir(tasks_dir, &run_id),
            summary: text("summary"),
            script_path: text("scriptPath"),
            run_id,
        })
    }

    /// What the model is told of task `id`'s run (the reference's words,
    /// [`task_protocol::texts::workflow_launch`]).
    pub fn text(&self, id: &TaskId) -> String {
        task_protocol::texts::workflow_launch(
            id.as_str(),
            &self.summary,
            &self.run_dir,
            self.script_path.as_ref(),
            &self.run_id,
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_run_reads_from_its_record_and_a_missing_one_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let id = TaskId::parse("w765vv7by").unwrap();
        assert!(matches!(
            Launched::read(dir.path(), &id),
            Err(RecordError::Read(OutputError::NotFound { .. }))
        ));
        std::fs::create_dir(dir.path().join("workflows")).unwrap();
        let record = dir.path().join("workflows/wf_765vv7by.json");
        std::fs::write(&record, "{not json").unwrap();
        assert!(matches!(
            Launched::read(dir.path(), &id),
            Err(RecordError::Corrupt { .. })
        ));
        std::fs::write(&record, r#"{"summary":"count","scriptPath":"/s/count.js"}"#).unwrap();
        let run = Launched::read(dir.path(), &id).unwrap();
        assert_eq!(run.run_id, "wf_765vv7by");
        assert_eq!(run.run_dir, dir.path().join("workflows/wf_765vv7by"));
        let text = run.text(&id);
        assert!(
            text.starts_with(
                "Workflow launched in background. Task ID: w765vv7by\nSummary: count\n"
            ),
            "{text}"
        );
        assert!(text.contains("Script file: /s/count.js\n"), "{text}");
    }
}
