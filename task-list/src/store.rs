//! The [`TaskList`] handle: one list directory, its configuration and the acting agent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::config::StoreConfig;
use crate::error::{Error, IoContext, Result};
use crate::fsutil;
use crate::id::{TaskId, sanitize_name};
use crate::lock::{DirLock, LIST_LOCK_FILE, lock_dir_for};
use crate::record::Task;

/// The high-water mark file: the highest id ever issued, as a plain integer.
pub(crate) const HIGH_WATER_MARK_FILE: &str = ".highwatermark";

/// Who is acting: recorded in the audit log, used for auto-ownership and hook input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    /// The agent's (or person's) name.
    pub name: String,
    /// The team it belongs to, if any.
    pub team: Option<String>,
}

impl Actor {
    /// An actor outside any team.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            team: None,
        }
    }
}

impl Default for Actor {
    fn default() -> Self {
        Self::new("user")
    }
}

/// A task file that could not be read as a task. The rest of the list still loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileProblem {
    /// The file's name inside the list directory (`{id}.json`).
    pub file: String,
    /// What was wrong with it.
    pub message: String,
}

/// Every task of a list, by id, and the files that could not be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The tasks, ordered by id.
    pub tasks: BTreeMap<TaskId, Task>,
    /// Malformed or torn files, by name.
    pub problems: Vec<FileProblem>,
}

/// A handle on one task list: `{lists root}/{list id}/`.
///
/// Cheap to clone; every operation opens, locks and closes what it needs, so any number of
/// handles in any number of processes can work on the same list.
#[derive(Debug, Clone)]
pub struct TaskList {
    dir: PathBuf,
    list_id: String,
    pub(crate) config: StoreConfig,
    pub(crate) actor: Actor,
    /// The highest id this handle has seen issued (0: not scanned yet); see `next_id`.
    pub(crate) id_hint: Arc<AtomicU64>,
}

impl TaskList {
    /// Opens (creating if needed) the list `list_id` (sanitised) under `lists_root`.
    pub fn open(lists_root: impl AsRef<Path>, list_id: &str, config: StoreConfig) -> Result<Self> {
        let list_id = sanitize_name(list_id)?;
        let dir = lists_root.as_ref().join(&list_id);
        std::fs::create_dir_all(&dir).at("create", &dir)?;
        let lock_file = dir.join(LIST_LOCK_FILE);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&lock_file)
            .at("create", &lock_file)?;
        Ok(Self {
            dir,
            list_id,
            config,
            actor: Actor::default(),
            id_hint: Arc::default(),
        })
    }

    /// The same list, acting as `actor`.
    pub fn with_actor(mut self, actor: Actor) -> Self {
        self.actor = actor;
        self
    }

    /// The list directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The (sanitised) list id.
    pub fn list_id(&self) -> &str {
        &self.list_id
    }

    /// The configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// The acting agent.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    pub(crate) fn task_path(&self, id: TaskId) -> PathBuf {
        self.dir.join(id.file_name())
    }

    /// Reads one task. A file that does not parse is read again under the reference's lock on
    /// it (the reference writes in place, so it may have been caught half written) before it is
    /// called corrupt.
    pub fn get(&self, id: TaskId) -> Result<Option<Task>> {
        let path = self.task_path(id);
        match read_task(&path) {
            Err(Error::Corrupt { .. }) => {
                let _lock = DirLock::acquire(lock_dir_for(&path), &self.config.lock)?;
                read_task(&path)
            }
            other => other,
        }
    }

    /// Reads every task. Malformed files are reported in [`Snapshot::problems`], never fatal.
    /// Large lists are read by several threads (one per core, at most 8).
    pub fn snapshot(&self) -> Result<Snapshot> {
        const PER_THREAD_MIN: usize = 512;
        let ids = fsutil::task_ids(&self.dir)?;
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .clamp(1, 8)
            .min(ids.len().div_ceil(PER_THREAD_MIN).max(1));
        let chunk = ids.len().div_ceil(threads).max(1);
        let parts: Vec<Result<Snapshot>> = std::thread::scope(|scope| {
            let handles: Vec<_> = ids
                .chunks(chunk)
                .skip(1)
                .map(|ids| scope.spawn(move || self.read_tasks(ids)))
                .collect();
            let first = self.read_tasks(ids.chunks(chunk).next().unwrap_or_default());
            std::iter::once(first)
                .chain(handles.into_iter().map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(std::io::Error::other("a reader thread panicked")).at("read", &self.dir)
                    })
                }))
                .collect()
        });
        let mut snapshot = Snapshot::default();
        for part in parts {
            let part = part?;
            snapshot.tasks.extend(part.tasks);
            snapshot.problems.extend(part.problems);
        }
        Ok(snapshot)
    }

    fn read_tasks(&self, ids: &[TaskId]) -> Result<Snapshot> {
        let mut snapshot = Snapshot::default();
        for &id in ids {
            match self.get(id) {
                Ok(Some(task)) => {
                    snapshot.tasks.insert(id, task);
                }
                Ok(None) => {}
                Err(Error::Corrupt { message, .. }) => snapshot.problems.push(FileProblem {
                    file: id.file_name(),
                    message,
                }),
                Err(e) => return Err(e),
            }
        }
        Ok(snapshot)
    }

    /// The high-water mark (0 when the file is missing or unreadable as a number).
    pub fn high_water_mark(&self) -> Result<u64> {
        let path = self.dir.join(HIGH_WATER_MARK_FILE);
        Ok(fsutil::read_optional(&path)?
            .and_then(|bytes| String::from_utf8_lossy(&bytes).trim().parse().ok())
            .unwrap_or(0))
    }
}

/// Reads and parses one task file; `Ok(None)` if it does not exist.
pub(crate) fn read_task(path: &Path) -> Result<Option<Task>> {
    let Some(bytes) = fsutil::read_optional(path)? else {
        return Ok(None);
    };
    let task = Task::from_file_json(&bytes).map_err(|e| Error::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let named = path
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(TaskId::from_file_name);
    if named != Some(task.id) {
        return Err(Error::Corrupt {
            path: path.to_path_buf(),
            message: format!("file name does not match its id {:?}", task.id.to_string()),
        });
    }
    Ok(Some(task))
}
