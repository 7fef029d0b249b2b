//! Task state snapshots: `{id}.json`, written by the supervisor on every transition (temp file,
//! then rename, so a reader sees the old or the new state, never a torn one) and read by every
//! other `tasks` process.
//!
//! Writes are atomic but not durable: no `fsync`. A snapshot describes processes that do not
//! survive a power loss either, and a snapshot left saying "running" by a crash is marked failed
//! on the next look (see [`crate::session`]); ARCHITECTURE.md (task-cli) has the reasoning.

use std::fs;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use task_core::{TaskId, TaskStatus, TaskType};

use crate::error::{CliError, Result};
use crate::notice::Notice;
use crate::paths::{SessionPaths, private_file};

/// What every `tasks` process knows about a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Snapshot {
    /// The task id.
    pub id: TaskId,
    /// Its type.
    #[serde(rename = "type")]
    pub task_type: TaskType,
    /// Its status.
    pub status: TaskStatus,
    /// Human description.
    pub description: String,
    /// The shell text it runs.
    pub command: String,
    /// Start time, ms since the epoch.
    pub start_time: u64,
    /// End time, ms since the epoch, once terminal.
    pub end_time: Option<u64>,
    /// Absolute path of the output file.
    pub output_file: PathBuf,
    /// Exit code of the command, when it exited.
    pub exit_code: Option<i32>,
    /// The process group of the command, while it may be alive.
    pub pgid: Option<i32>,
    /// When the leader of that group started (clock ticks after boot), so that a reader never
    /// kills a group whose number has been reused.
    pub pgid_started: Option<u64>,
    /// The pid of the supervisor that ran it.
    pub supervisor_pid: u32,
    /// The completion notification to deliver (none for a task killed on request).
    pub notification: Option<Notice>,
    /// Why the task failed outside its command (a dead supervisor, a spawn error).
    pub error: Option<String>,
}

impl Snapshot {
    /// A new snapshot of a task that is about to start.
    pub fn new(id: TaskId, description: String, command: String, output_file: PathBuf) -> Self {
        Self {
            task_type: id.task_type(),
            id,
            status: TaskStatus::Pending,
            description,
            command,
            start_time: now_ms(),
            end_time: None,
            output_file,
            exit_code: None,
            pgid: None,
            pgid_started: None,
            supervisor_pid: std::process::id(),
            notification: None,
            error: None,
        }
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Replaces the snapshot of `snapshot.id` atomically: temp file, rename (no `fsync`: see the
/// module documentation).
pub fn write(paths: &SessionPaths, snapshot: &Snapshot) -> Result<()> {
    let path = paths.snapshot(&snapshot.id);
    let temp = paths
        .tasks_dir()
        .join(format!(".{}.json.{}.tmp", snapshot.id, std::process::id()));
    let body = serde_json::to_vec_pretty(snapshot)
        .map_err(|e| CliError::Invalid(format!("cannot encode {}: {e}", snapshot.id)))?;
    let mut file = private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&temp)
        .map_err(|e| CliError::io("create", &temp, e))?;
    file.write_all(&body)
        .map_err(|e| CliError::io("write", &temp, e))?;
    fs::rename(&temp, &path).map_err(|e| CliError::io("replace", &path, e))
}

/// Reads the snapshot of `id`: [`CliError::UnknownTask`] if there is none.
pub fn read(paths: &SessionPaths, id: &TaskId) -> Result<Snapshot> {
    let path = paths.snapshot(id);
    match fs::read(&path) {
        Ok(bytes) => parse(&path, &bytes),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(CliError::UnknownTask {
            id: id.to_string(),
            session: paths.name().to_owned(),
        }),
        Err(e) => Err(CliError::io("read", &path, e)),
    }
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Snapshot> {
    serde_json::from_slice(bytes).map_err(|e| CliError::CorruptState {
        path: path.to_owned(),
        reason: e.to_string(),
    })
}

/// Every snapshot of a session, and the files that could not be read (each named in its error).
#[derive(Debug, Default)]
pub struct Listing {
    /// Readable snapshots, oldest first.
    pub tasks: Vec<Snapshot>,
    /// One error per unreadable snapshot file.
    pub problems: Vec<CliError>,
}

/// Reads every `{id}.json` of the session. A corrupt file is reported in
/// [`Listing::problems`] and never hides the others.
pub fn list(paths: &SessionPaths) -> Result<Listing> {
    let dir = paths.tasks_dir();
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Listing::default()),
        Err(e) => return Err(CliError::io("list", &dir, e)),
    };
    let mut listing = Listing::default();
    for entry in entries {
        let entry = entry.map_err(|e| CliError::io("list", &dir, e))?;
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|stem| TaskId::parse(stem).ok())
        else {
            continue;
        };
        match read(paths, &id) {
            Ok(snapshot) => listing.tasks.push(snapshot),
            Err(CliError::UnknownTask { .. }) => {} // deleted while listing
            Err(e) => listing.problems.push(e),
        }
    }
    listing
        .tasks
        .sort_by(|a, b| (a.start_time, a.id.as_str()).cmp(&(b.start_time, b.id.as_str())));
    Ok(listing)
}
