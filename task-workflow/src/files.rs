//! The files of a run: its directory (journal, agents' transcripts), its record, its script.
//! Every path is built from a validated run id; every write refuses symlinks.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::WorkflowError;

/// The most bytes a nested workflow's script may have (the tool's own `script` limit).
const MAX_SCRIPT_BYTES: u64 = 524_288;

/// The paths of one run under `{output_dir}/workflows/`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPaths {
    /// `workflows/{runId}/`: the journal and the agents' transcripts.
    pub dir: PathBuf,
    /// `workflows/{runId}/journal.jsonl`.
    pub journal: PathBuf,
    /// `workflows/{runId}.json`: the run record.
    pub record: PathBuf,
    /// `workflows/scripts/`: where scripts are kept.
    pub scripts: PathBuf,
}

impl RunPaths {
    /// The paths of `run_id` (checked) under `output_dir`.
    ///
    /// # Errors
    /// [`WorkflowError::InvalidRunId`].
    pub fn new(output_dir: &Path, run_id: &str) -> Result<RunPaths, WorkflowError> {
        check_run_id(run_id)?;
        let dir = task_protocol::workflow::run_dir(output_dir, run_id);
        Ok(RunPaths {
            journal: dir.join("journal.jsonl"),
            dir,
            record: task_protocol::workflow::record_path(output_dir, run_id),
            scripts: task_protocol::workflow::runs_dir(output_dir).join("scripts"),
        })
    }
}

/// A run id is `wf_` then at least 6 of `[a-z0-9-]` (the tool's pattern), at most 64
/// ([`task_protocol::workflow::is_run_id`]).
///
/// # Errors
/// [`WorkflowError::InvalidRunId`].
pub fn check_run_id(run_id: &str) -> Result<(), WorkflowError> {
    if task_protocol::workflow::is_run_id(run_id) {
        Ok(())
    } else {
        Err(WorkflowError::InvalidRunId(run_id.to_owned()))
    }
}

/// Writes `bytes` to `path`, replacing its content; a symlink at `path` is refused.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), WorkflowError> {
    let mut file = task_output::open::NoFollow::write()
        .create()
        .truncate()
        .open(path)
        .map_err(|e| WorkflowError::file(path, e))?;
    file.write_all(bytes)
        .map_err(|e| WorkflowError::file(path, e))
}

/// Reads a script (regular file, no symlink, at most 512 KiB).
pub(crate) fn read_script(path: &Path) -> Result<String, WorkflowError> {
    let bytes = task_output::open::read_untrusted(path, MAX_SCRIPT_BYTES + 1).map_err(|error| {
        // The caller's mistake, said as such (not as an output file of ours gone missing).
        let reason = match error {
            task_output::OutputError::NotFound { .. } => "no such workflow script".to_owned(),
            task_output::OutputError::PermissionDenied { .. } => {
                "the workflow script cannot be read: permission denied".to_owned()
            }
            other => format!("the workflow script cannot be read: {other}"),
        };
        WorkflowError::file(path, reason)
    })?;
    if bytes.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(WorkflowError::file(
            path,
            "the script is larger than 512 KiB",
        ));
    }
    String::from_utf8(bytes).map_err(|_| WorkflowError::file(path, "the script is not UTF-8"))
}

/// Reads a JSON file of a run.
pub(crate) fn read_json(path: &Path) -> Result<Value, WorkflowError> {
    let bytes = task_output::open::read_untrusted(path, 64 << 20)?;
    serde_json::from_slice(&bytes).map_err(|e| WorkflowError::file(path, e))
}

/// The script `workflow(reference)` names: `{scriptPath}` (relative to `cwd`) or a name
/// looked up as `{name}.js` in `dirs`.
pub(crate) fn resolve_reference(
    reference: &Value,
    cwd: &Path,
    dirs: &[PathBuf],
) -> Result<PathBuf, WorkflowError> {
    if let Some(path) = reference.get("scriptPath").and_then(Value::as_str) {
        return Ok(cwd.join(path));
    }
    let name = reference.as_str().unwrap_or_default();
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !valid {
        return Err(WorkflowError::UnknownWorkflow(reference.to_string()));
    }
    dirs.iter()
        .map(|dir| dir.join(format!("{name}.js")))
        .find(|path| path.is_file())
        .ok_or_else(|| WorkflowError::UnknownWorkflow(name.to_owned()))
}

/// A name safe in a file name: `[A-Za-z0-9_-]`, others as `-`, at most 64.
pub(crate) fn file_stem(name: &str) -> String {
    name.chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_checked_before_any_path() {
        assert!(check_run_id("wf_c35ccbad-117").is_ok());
        for bad in [
            "wf_../../x",
            "wf_abc",
            "WF_abcdefg",
            "wf_abcdef/g",
            "abcdefgh",
            "wf_ABCDEFG",
        ] {
            assert!(RunPaths::new(Path::new("/tmp"), bad).is_err(), "{bad}");
        }
    }
}
