//! The resume sidecar `{session dir}/remote-agents/remote-agent-{id}.meta.json` (SPEC §11):
//! written when a session is spawned, deleted when its task completes or is killed, so a resume
//! re-polls exactly the unfinished ones.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use task_core::{RemoteSubtype, TaskId};
use task_output::OutputError;
use task_output::open::{create_output_file, ensure_private_dir, read_untrusted};

use crate::error::RemoteError;

/// The most bytes a sidecar may hold.
const MAX_SIDECAR_BYTES: u64 = 1024 * 1024;

/// What a resume needs to re-poll a remote session. The reference's fields, then (beyond the
/// reference) where the server is and how to reach it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sidecar {
    /// The task.
    pub task_id: TaskId,
    /// Its subtype.
    pub remote_task_type: RemoteSubtype,
    /// The session on the server.
    pub session_id: String,
    /// The session's title.
    pub title: String,
    /// The command (prompt) that started it.
    pub command: String,
    /// When it was spawned (ms epoch).
    pub spawned_at: u64,
    /// The tool call that started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Whether it is expected to run long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_long_running: Option<bool>,
    /// Subtype data for its completion checker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_task_metadata: Option<Value>,
    /// The task's description.
    #[serde(default)]
    pub description: String,
    /// The server's base URL.
    pub server: String,
    /// The file holding the bearer token (the token itself is never copied here).
    pub token_file: PathBuf,
    /// The agent that owns the task (other text than a task id reads as none).
    #[serde(
        default,
        deserialize_with = "task_core::lenient_task_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub agent_id: Option<TaskId>,
}

/// The sidecars of one session directory.
#[derive(Debug, Clone)]
pub struct Sidecars {
    dir: PathBuf,
}

impl Sidecars {
    /// The sidecars under `{session_dir}/remote-agents/`.
    pub fn new(session_dir: &Path) -> Self {
        Sidecars {
            dir: session_dir.join("remote-agents"),
        }
    }

    /// The sidecar of task `id` (an id is validated, so it cannot escape the directory).
    pub fn path(&self, id: &TaskId) -> PathBuf {
        self.dir.join(format!("remote-agent-{id}.meta.json"))
    }

    /// Writes `sidecar` (a new file, `0600`, never through a symlink).
    ///
    /// # Errors
    /// Output errors (one already exists, the directory is unsafe, the disk is full).
    pub fn write(&self, sidecar: &Sidecar) -> Result<(), RemoteError> {
        ensure_private_dir(&self.dir)?;
        let path = self.path(&sidecar.task_id);
        let json = serde_json::to_vec_pretty(sidecar).map_err(|e| RemoteError::BadSidecar {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let mut file = create_output_file(&path)?;
        file.write_all(&json)
            .and_then(|()| file.sync_data())
            .map_err(|e| OutputError::from_io(&path, e))?;
        Ok(())
    }

    /// Deletes the sidecar of `id` (gone already is fine).
    ///
    /// # Errors
    /// The file exists and cannot be removed.
    pub fn delete(&self, id: &TaskId) -> Result<(), RemoteError> {
        let path = self.path(id);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(OutputError::from_io(&path, e).into()),
        }
    }

    /// Every sidecar present, each read or the reason it cannot be (a file whose name is not a
    /// sidecar's is skipped).
    pub fn list(&self) -> Vec<Result<Sidecar, RemoteError>> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                let id = name
                    .to_str()?
                    .strip_prefix("remote-agent-")?
                    .strip_suffix(".meta.json")?;
                let id = TaskId::parse(id).ok()?;
                Some(self.read(&id))
            })
            .collect()
    }

    /// Reads the sidecar of `id`.
    ///
    /// # Errors
    /// Missing, unreadable, not a regular file, or not a sidecar.
    pub fn read(&self, id: &TaskId) -> Result<Sidecar, RemoteError> {
        let path = self.path(id);
        let bytes = read_untrusted(&path, MAX_SIDECAR_BYTES)?;
        let sidecar: Sidecar =
            serde_json::from_slice(&bytes).map_err(|e| RemoteError::BadSidecar {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        if sidecar.task_id != *id {
            return Err(RemoteError::BadSidecar {
                path,
                reason: format!("it names task {}", sidecar.task_id),
            });
        }
        Ok(sidecar)
    }
}
