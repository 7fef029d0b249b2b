//! Task records: `{id}.json`, task-core's own [`TaskState`] plus what the session adds (the
//! pending notification, the supervising process), written by the supervisor on every change
//! (temp file, then rename, so a reader sees the old or the new record, never a torn one) and
//! read by every other `tasks` process.
//!
//! Writes are atomic but not durable: no `fsync`. A record describes processes that do not
//! survive a power loss either, and a record left live by a crash is read as an orphan (see
//! [`crate::session`]); ARCHITECTURE.md has the reasoning.
//!
//! A live task also has its end slot, `{id}.end`: space allocated at its start (empty, the
//! blocks reserved beyond its end) into which its end is written in place when the disk is full
//! and the record cannot be replaced. Writing into blocks a file already holds needs no free
//! space, so a task's true end is on the state root even if its supervisor is then killed
//! before space returns; readers and the next supervisor take it from there
//! ([`read_end`]). The slot is removed once the end is in the record.
//!
//! Records are untrusted input: read through the `untrusted` module (no symlink, no FIFO, size
//! limited). Files of the first format (before task-core's state was persisted whole) are read
//! and converted.

use std::fs;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use task_core::{
    EndReason, Notification, ShellKind, ShellProcess, ShellState, TaskId, TaskKind, TaskState,
    TaskStatus, TaskType,
};

use crate::error::{Error, Result};
use crate::notice::Notice;
use crate::paths::{SessionPaths, private_file};
use crate::untrusted;

/// The format written today: 3 records when a task began running (`startedAt`), which a
/// record of format 2 does not say (it reads as before: a task past `pending` ran from its
/// `startTime`).
pub const FORMAT: u32 = 3;

/// The first format whose records say when a task began running.
const FORMAT_WITH_STARTED_AT: u32 = 3;

/// What every `tasks` process knows about a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskRecord {
    /// The record's format ([`FORMAT`]).
    pub format: u32,
    /// The task, as its executor left it in task-core's registry.
    pub task: TaskState,
    /// The pid of the supervisor that runs (or ran) it.
    pub supervisor_pid: u32,
    /// The completion notification to deliver (none for a task killed on request or run in
    /// the foreground).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notification: Option<Notice>,
    /// The task is live and outlives its supervisor (its executor says so through
    /// [`task_core::Task::survives_supervisor`]: a remote agent; or it waits in the queue, which
    /// the next supervisor takes over: see [`crate::queue`]): when its supervisor is found
    /// dead, the next supervisor resumes it (or ends it with the true reason), so no reader
    /// ever ends it as an orphan.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub survives_supervisor: bool,
    /// The key of the start that made the task ([`crate::protocol::Start::key`]): a start sent
    /// again with it finds the task instead of making a second one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_key: Option<String>,
    /// Its group and place in the queue ([`crate::queue`]), for a task started with a
    /// schedule or one that waited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<crate::placement::Placement>,
    /// The command run once when the task ends (its own end hook, or the session's at the
    /// time it was written): kept with the task so that an end recorded after a supervisor's
    /// death still runs it ([`crate::hooks`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_end: Option<String>,
    /// The processes the task left running when it ended, as found then (`tasks strays` shows
    /// those still alive).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub strays: Vec<task_core::process::Stray>,
    /// How the task was started, as its supervisor received it (with its caller's
    /// environment for a kind that resumes): what `tasks restart` starts again and what a
    /// resume runs in. `None` in a record written before supervisors kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<std::sync::Arc<crate::start_record::StartRecord>>,
    /// When the file was last written (its mtime, ms epoch; 0 for a record not read from disk):
    /// the last time its supervisor is known to have been alive.
    #[serde(skip)]
    pub written_ms: u64,
    /// Set by a reader, never written: the task outlives its supervisor, that supervisor is
    /// dead and none could be started to resume it yet, so it is shown live with this note
    /// ("supervisor down, resumable") instead of ended.
    #[serde(skip)]
    pub supervisor_down: bool,
}

impl TaskRecord {
    /// A record of `task`, supervised by this process.
    pub fn new(task: TaskState) -> Self {
        Self {
            format: FORMAT,
            task,
            supervisor_pid: std::process::id(),
            notification: None,
            survives_supervisor: false,
            start_key: None,
            queue: None,
            on_end: None,
            strays: Vec::new(),
            start: None,
            written_ms: 0,
            supervisor_down: false,
        }
    }

    /// The task's id.
    pub fn id(&self) -> TaskId {
        self.task.id()
    }

    /// Reads a record of a format from before `startedAt` as it was read then: a task past
    /// `pending` ran from its `startTime` (records of format 3 on say when a task began
    /// running, and a task that never ran has none).
    fn upgrade_started_at(&mut self) {
        let base = &mut self.task.base;
        if self.format < FORMAT_WITH_STARTED_AT
            && base.started_at.is_none()
            && base.status != TaskStatus::Pending
        {
            base.started_at = Some(base.start_time);
        }
    }

    /// Whether the task waits in its group's queue (`pending`, its placement waiting): for its
    /// turn, its dependencies or its time.
    pub fn waits_in_queue(&self) -> bool {
        self.status() == TaskStatus::Pending && self.queue.as_ref().is_some_and(|p| p.waiting)
    }

    /// The group the task counts in: its placement's, else the default group (a task started
    /// at once with no schedule).
    pub fn group(&self) -> &str {
        self.queue
            .as_ref()
            .map_or(crate::placement::DEFAULT_GROUP, |placement| {
                placement.group.as_str()
            })
    }

    /// The task's status.
    pub fn status(&self) -> TaskStatus {
        self.task.status()
    }

    /// Whether the task ended.
    pub fn is_terminal(&self) -> bool {
        self.status().is_terminal()
    }

    /// Whether the task is settled in the session at `paths`: ended, and its completion notice
    /// delivered or never due. A running task is not settled (its notice comes with its end).
    pub fn is_settled(&self, paths: &SessionPaths) -> bool {
        self.is_terminal()
            && self
                .notification
                .as_ref()
                .is_none_or(|notice| crate::notice::is_notified(paths, &self.id(), notice))
    }

    /// Why it ended, once it did.
    pub fn end_reason(&self) -> Option<&EndReason> {
        self.task.base.end_reason.as_ref()
    }

    /// The exit code of a shell command or monitor, once it ended.
    pub fn exit_code(&self) -> Option<i32> {
        self.task.kind.exit_code()
    }

    /// What the task runs, in one line: a shell's command, an agent's prompt.
    pub fn command(&self) -> &str {
        self.task.kind.command_line()
    }

    /// This live record as it reads once its supervisor is known to be dead: `failed` with
    /// [`EndReason::SupervisorDied`] (task-core's orphan transition), ended when the record was
    /// last written (so every reader and the next supervisor derive the same end, and the same
    /// completion latch), with its completion due. A terminal record is returned unchanged.
    /// Readers never call it on a record that [survives its supervisor](Self::survives_supervisor).
    #[must_use]
    pub fn orphaned(mut self) -> Self {
        self.survives_supervisor = false;
        let ended_at = match self.written_ms {
            0 => task_core::now_ms(),
            written => written,
        };
        if self.task.end_as_orphan(self.supervisor_pid, ended_at) {
            self.notification = Some(Notice::completion(
                self.task.base.end_time,
                Notification::orphaned(&self.task),
            ));
        }
        self
    }
}

/// Replaces the record of its task atomically: temp file, rename (no `fsync`: see the module
/// documentation). A failed write leaves no temp file behind.
pub fn write(paths: &SessionPaths, record: &TaskRecord) -> Result<()> {
    let id = record.id();
    let body = serde_json::to_vec_pretty(record)
        .map_err(|e| Error::Invalid(format!("cannot encode {id}: {e}")))?;
    replace(paths, &paths.snapshot(&id), &body)
}

/// Replaces the file `path` of the session's tasks directory with `body` atomically: the body is
/// written into an unnamed file of the directory (`O_TMPFILE`), which is named only once whole
/// and then renamed over `path`. A failed write (a full disk) never shows a temp file, not even
/// while it is tried; where the file system has no unnamed files, a named temp file is removed
/// after a failure.
pub(crate) fn replace(paths: &SessionPaths, path: &Path, body: &[u8]) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temp = paths
        .tasks_dir()
        .join(format!(".{name}.{}.tmp", std::process::id()));
    let written = write_unnamed_then_link(&paths.tasks_dir(), &temp, body)
        .unwrap_or_else(|| write_new(&temp, body))
        .and_then(|()| fs::rename(&temp, path).map_err(|e| Error::io("replace", path, e)));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// Writes `body` into an unnamed file of `dir` and links it at `temp`; `None` where `dir`'s file
/// system has no unnamed files or no `/proc` can name one.
fn write_unnamed_then_link(dir: &Path, temp: &Path, body: &[u8]) -> Option<Result<()>> {
    use rustix::fs::{AtFlags, CWD, Mode, OFlags};
    let flags = OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(CWD, dir, flags, Mode::from_raw_mode(0o600)) {
        Ok(fd) => fs::File::from(fd),
        Err(e) if [rustix::io::Errno::OPNOTSUPP, rustix::io::Errno::ISDIR].contains(&e) => {
            return None;
        }
        Err(e) => return Some(Err(Error::io("create", temp, e.into()))),
    };
    if let Err(e) = (&file).write_all(body) {
        return Some(Err(Error::io("write", temp, e)));
    }
    let fd = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&file));
    let link = || rustix::fs::linkat(CWD, fd.as_str(), CWD, temp, AtFlags::SYMLINK_FOLLOW);
    match link() {
        Ok(()) => Some(Ok(())),
        // Left by an earlier process of the same pid.
        Err(rustix::io::Errno::EXIST) => {
            let _ = fs::remove_file(temp);
            Some(link().map_err(|e| Error::io("link", temp, e.into())))
        }
        // No `/proc` to name the file by.
        Err(rustix::io::Errno::NOENT) => None,
        Err(e) => Some(Err(Error::io("link", temp, e.into()))),
    }
}

fn write_new(path: &Path, body: &[u8]) -> Result<()> {
    let mut file = private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .map_err(|e| Error::io("create", path, e))?;
    file.write_all(body)
        .map_err(|e| Error::io("write", path, e))
}

/// The bytes reserved for a task's end: a shell's or monitor's end takes about 1 KiB, an
/// agent's more with its final text. An end that does not fit relies on the supervisor alone
/// (kept in memory, written once space returns).
pub const END_SLOT_BYTES: usize = 8 * 1024;

/// Reserves the space of `id`'s end: `{id}.end`, empty, with [`END_SLOT_BYTES`] allocated
/// beyond its end (`fallocate` with `FALLOC_FL_KEEP_SIZE`). Where the file system cannot
/// allocate ahead, the slot is written full of NULs instead.
pub(crate) fn reserve_end(paths: &SessionPaths, id: &TaskId) -> Result<()> {
    let path = paths.end_slot(id);
    let file = private_file()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .map_err(|e| Error::io("create", &path, e))?;
    let reserved = rustix::fs::fallocate(
        &file,
        rustix::fs::FallocateFlags::KEEP_SIZE,
        0,
        END_SLOT_BYTES as u64,
    );
    let written = match reserved {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::OPNOTSUPP) => file.write_all_at(&[0; END_SLOT_BYTES], 0),
        Err(errno) => Err(errno.into()),
    };
    written.map_err(|e| {
        let _ = fs::remove_file(&path);
        Error::io("reserve space in", &path, e)
    })
}

/// Writes the end `record` into its task's slot, in place: its compact JSON, then NULs to the
/// end of the slot. Fails if the task has no slot or the end does not fit it.
pub(crate) fn write_end(paths: &SessionPaths, record: &TaskRecord) -> Result<()> {
    let path = paths.end_slot(&record.id());
    let mut body = serde_json::to_vec(record)
        .map_err(|e| Error::Invalid(format!("cannot encode {}: {e}", record.id())))?;
    if body.len() > END_SLOT_BYTES {
        return Err(Error::Invalid(format!(
            "the end of {} takes {} bytes, more than its slot holds ({END_SLOT_BYTES})",
            record.id(),
            body.len()
        )));
    }
    body.resize(END_SLOT_BYTES, 0);
    let file = untrusted::open_regular(&path, fs::OpenOptions::new().write(true))
        .map_err(|e| Error::io("open", &path, e))?;
    file.write_all_at(&body, 0)
        .map_err(|e| Error::io("write", &path, e))
}

/// Removes `id`'s end slot (its end is in its record now, or it has none).
pub(crate) fn release_end(paths: &SessionPaths, id: &TaskId) {
    let path = paths.end_slot(id);
    match fs::remove_file(&path) {
        Err(e) if e.kind() != ErrorKind::NotFound => {
            tracing::warn!(task = %id, error = %e, "cannot remove its end slot");
        }
        _ => {}
    }
}

/// The end its supervisor wrote into the slot of `live` (a record left live on disk) when the
/// disk was full: a terminal record of the same task and the same supervisor, or `None`. A
/// slot that was never written, was torn by a kill mid-write, or is not about this task reads
/// as `None`.
pub fn read_end(paths: &SessionPaths, live: &TaskRecord) -> Option<TaskRecord> {
    let id = live.id();
    let path = paths.end_slot(&id);
    let bytes = untrusted::read_file(&path, END_SLOT_BYTES as u64).ok()?;
    let body = bytes.split(|&b| b == 0).next().unwrap_or_default();
    if body.is_empty() {
        return None;
    }
    match parse(&path, &id, body) {
        Ok(end) if end.is_terminal() && end.supervisor_pid == live.supervisor_pid => Some(end),
        Ok(_) => None,
        Err(error) => {
            tracing::warn!(task = %id, %error, "its end slot holds no end");
            None
        }
    }
}

/// Reads the record of `id`: [`Error::UnknownTask`] if there is none.
pub fn read(paths: &SessionPaths, id: &TaskId) -> Result<TaskRecord> {
    let path = paths.snapshot(id);
    match untrusted::read_file_with_mtime(&path, untrusted::MAX_STATE_FILE_BYTES) {
        Ok((bytes, mtime_ms)) => parse(&path, id, &bytes).map(|mut record| {
            record.written_ms = mtime_ms;
            record
        }),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::UnknownTask {
            id: id.to_string(),
            session: paths.name().to_owned(),
        }),
        Err(e) if e.kind() == ErrorKind::InvalidData || e.raw_os_error() == Some(40) => {
            Err(Error::CorruptState {
                path,
                reason: e.to_string(),
            })
        }
        Err(e) => Err(Error::io("read", &path, e)),
    }
}

/// Parses a record of either format; the record must be about `id` (the file's name).
fn parse(path: &Path, id: &TaskId, bytes: &[u8]) -> Result<TaskRecord> {
    let corrupt = |reason: String| Error::CorruptState {
        path: path.to_owned(),
        reason,
    };
    let mut record = match serde_json::from_slice::<TaskRecord>(bytes) {
        Ok(record) => record,
        Err(current) => match serde_json::from_slice::<LegacyRecord>(bytes) {
            Ok(legacy) => legacy.upgrade(),
            Err(_) => return Err(corrupt(current.to_string())),
        },
    };
    if record.id() != *id {
        return Err(corrupt(format!("it describes task {}", record.id())));
    }
    record.task.validate().map_err(|e| corrupt(e.to_string()))?;
    record.upgrade_started_at();
    Ok(record)
}

/// Every record of a session, and the files that could not be read (each named in its error).
#[derive(Debug, Default)]
pub struct Listing {
    /// Readable records, oldest first.
    pub tasks: Vec<TaskRecord>,
    /// One error per unreadable record file.
    pub problems: Vec<Error>,
}

/// Reads every `{id}.json` of the session. A corrupt or hostile file is reported in
/// [`Listing::problems`] and never hides the others.
pub fn list(paths: &SessionPaths) -> Result<Listing> {
    let dir = paths.tasks_dir();
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Listing::default()),
        Err(e) => return Err(Error::io("list", &dir, e)),
    };
    let mut listing = Listing::default();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("list", &dir, e))?;
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|stem| TaskId::parse(stem).ok())
        else {
            continue;
        };
        match read(paths, &id) {
            Ok(record) => listing.tasks.push(record),
            Err(Error::UnknownTask { .. }) => {} // deleted while listing
            Err(e) => listing.problems.push(e),
        }
    }
    listing.tasks.sort_by(|a, b| {
        (a.task.base.start_time, a.id().as_str()).cmp(&(b.task.base.start_time, b.id().as_str()))
    });
    Ok(listing)
}

/// The task a start with `key` made, if its record is on disk (a start sent again after its
/// supervisor died without answering).
pub fn find_started(paths: &SessionPaths, key: &str) -> Result<Option<TaskId>> {
    Ok(list(paths)?
        .tasks
        .into_iter()
        .find(|record| record.start_key.as_deref() == Some(key))
        .map(|record| record.id()))
}

/// A record of the first format: shell facts at the top level.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LegacyRecord {
    id: TaskId,
    status: TaskStatus,
    description: String,
    command: String,
    start_time: u64,
    end_time: Option<u64>,
    output_file: PathBuf,
    exit_code: Option<i32>,
    pgid: Option<i32>,
    pgid_started: Option<u64>,
    supervisor_pid: u32,
    notification: Option<Notice>,
    error: Option<String>,
}

impl LegacyRecord {
    fn upgrade(self) -> TaskRecord {
        let kind = match self.id.task_type() {
            TaskType::MonitorMcp => ShellKind::Monitor,
            _ => ShellKind::Shell,
        };
        let process = self
            .pgid
            .and_then(|pgid| u32::try_from(pgid).ok())
            .map(|pgid| ShellProcess {
                pgid,
                leader_started: self.pgid_started,
                owner: None,
            });
        let end_reason = match (self.status, self.exit_code, &self.error) {
            (status, _, _) if !status.is_terminal() => None,
            (TaskStatus::Killed, _, _) => Some(EndReason::Killed),
            (_, _, Some(error)) if error.contains("supervisor") => {
                Some(EndReason::SupervisorDied {
                    pid: self.supervisor_pid,
                })
            }
            (_, Some(code), _) => Some(EndReason::Exited { code }),
            (_, None, error) => Some(EndReason::Errored {
                message: error.clone().unwrap_or_default(),
            }),
        };
        let mut task = TaskState {
            base: task_core::TaskStateBase::new(self.id, self.description, self.output_file),
            kind: TaskKind::Shell(ShellState {
                command: self.command,
                is_backgrounded: true,
                kind,
                exit_code: self.exit_code,
                process,
                batch: None,
            }),
        };
        task.base.status = self.status;
        task.base.start_time = self.start_time;
        task.base.started_at = (self.status != TaskStatus::Pending).then_some(self.start_time);
        task.base.end_time = self.end_time;
        task.base.end_reason = end_reason;
        task.base.notified = self.notification.is_none() && self.status.is_terminal();
        TaskRecord {
            format: FORMAT,
            task,
            supervisor_pid: self.supervisor_pid,
            notification: self.notification,
            survives_supervisor: false,
            start_key: None,
            queue: None,
            on_end: None,
            strays: Vec::new(),
            start: None,
            written_ms: 0,
            supervisor_down: false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const LEGACY: &str = r#"{
      "id": "b12345678", "type": "local_bash", "status": "failed", "description": "build",
      "command": "make", "startTime": 10, "endTime": 20, "outputFile": "/s/tasks/b12345678.output",
      "exitCode": 2, "pgid": null, "pgidStarted": null, "supervisorPid": 77,
      "notification": null, "error": null
    }"#;

    #[test]
    fn first_format_records_are_read_and_converted() {
        let id = TaskId::parse("b12345678").unwrap();
        let record = parse(Path::new("x.json"), &id, LEGACY.as_bytes()).unwrap();
        assert_eq!(record.status(), TaskStatus::Failed);
        assert_eq!(record.command(), "make");
        assert_eq!(record.exit_code(), Some(2));
        assert_eq!(record.end_reason(), Some(&EndReason::Exited { code: 2 }));
        assert_eq!(record.supervisor_pid, 77);
        assert_eq!(record.task.base.start_time, 10);
        assert_eq!(
            record.task.base.started_at,
            Some(10),
            "it ran from its start, as before"
        );
    }

    #[test]
    fn a_record_from_before_started_at_reads_as_before_and_a_new_one_as_written() {
        let id = TaskId::parse("b12345678").unwrap();
        let state = TaskState::new(
            id,
            "build",
            "/s/tasks/b12345678.output",
            TaskKind::Shell(ShellState::default()),
        )
        .unwrap();
        let mut record = TaskRecord::new(state);
        record.task.base.status = TaskStatus::Killed;
        record.task.base.start_time = 10;
        record.task.base.end_time = Some(20);
        let read = |record: &TaskRecord| {
            let bytes = serde_json::to_vec(record).unwrap();
            parse(Path::new("x.json"), &id, &bytes).unwrap()
        };
        // Written today without `startedAt`: it never ran (killed while it waited).
        assert_eq!(read(&record).task.base.started_at, None);
        // Written before `startedAt` existed: it ran from its start, as it was read then.
        record.format = 2;
        assert_eq!(read(&record).task.base.started_at, Some(10));
        record.task.base.status = TaskStatus::Pending;
        assert_eq!(read(&record).task.base.started_at, None, "still waiting");
    }

    #[test]
    fn an_end_slot_gives_back_only_a_whole_end_of_the_same_task_and_supervisor() {
        let root = tempfile::tempdir().unwrap();
        let paths = SessionPaths::new(root.path(), "default").unwrap();
        paths.create_dirs().unwrap();
        let id = TaskId::parse("b12345678").unwrap();
        let end = parse(Path::new("x.json"), &id, LEGACY.as_bytes()).unwrap();
        let live = end.clone();
        assert_eq!(read_end(&paths, &live), None, "no slot");
        reserve_end(&paths, &id).unwrap();
        assert_eq!(read_end(&paths, &live), None, "an empty slot");
        write_end(&paths, &end).unwrap();
        assert_eq!(read_end(&paths, &live), Some(end.clone()));
        let mut restarted = live.clone();
        restarted.supervisor_pid += 1;
        assert_eq!(
            read_end(&paths, &restarted),
            None,
            "another supervisor's task"
        );

        // A write torn by a kill: the start of the end, then the slot's NULs.
        reserve_end(&paths, &id).unwrap();
        let whole = serde_json::to_vec(&end).unwrap();
        let file = fs::OpenOptions::new()
            .write(true)
            .open(paths.end_slot(&id))
            .unwrap();
        file.write_all_at(&whole[..whole.len() / 2], 0).unwrap();
        assert_eq!(read_end(&paths, &live), None, "a torn end");

        let mut huge = end.clone();
        huge.task.base.description = "x".repeat(END_SLOT_BYTES);
        assert!(
            write_end(&paths, &huge).is_err(),
            "an end larger than its slot"
        );
        release_end(&paths, &id);
        assert!(!paths.end_slot(&id).exists());
        assert!(write_end(&paths, &end).is_err(), "no slot to write into");
    }

    #[test]
    fn garbage_and_records_of_another_task_are_corrupt_not_fatal() {
        let id = TaskId::parse("b12345678").unwrap();
        let other = TaskId::parse("b00000000").unwrap();
        assert!(matches!(
            parse(Path::new("x.json"), &other, LEGACY.as_bytes()),
            Err(Error::CorruptState { .. })
        ));
        assert!(matches!(
            parse(Path::new("x.json"), &id, b"{\"format\": 2}"),
            Err(Error::CorruptState { .. })
        ));
    }
}
