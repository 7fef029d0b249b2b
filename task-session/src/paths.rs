//! The session directory layout (DESIGN "Persistence and processes").
//!
//! ```text
//! {root}/{session}/tasks/{id}.output     output file of a task
//! {root}/{session}/tasks/{id}.json       state snapshot, replaced atomically
//! {root}/{session}/tasks/{id}.notified   the completion latch (O_CREAT|O_EXCL)
//! {root}/{session}/events/pending/       non-terminal events waiting for a reader
//! {root}/{session}/events/delivered/     events claimed by a reader (rename)
//! {root}/{session}/notifications.jsonl   every delivered notification, in order
//! {root}/{session}/supervisor.sock       the supervisor's socket (JSON lines)
//! {root}/{session}/supervisor.lock       flock'd by the live supervisor; holds its pid
//! {root}/{session}/supervisor.log        the supervisor's stderr (supervisor.log.1: the one before)
//! {root}/{session}/config.json           optional supervisor settings
//! {root}/.{session}.supervisor.lock       flock'd by the live supervisor too, outside the
//!                                         session directory (see [`SessionPaths::root_lock`])
//! ```

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use task_core::TaskId;

use crate::error::{Error, Result};

/// The paths of one session. Building one validates the session name; ids are typed, so no path
/// is ever built from unvalidated input.
#[derive(Debug, Clone)]
pub struct SessionPaths {
    root: PathBuf,
    name: String,
    dir: PathBuf,
}

impl SessionPaths {
    /// Resolves the root (`root`, else `$XDG_STATE_HOME/tasks`, else `~/.local/state/tasks`; the
    /// `$TASKS_ROOT` variable reaches `root` through the command line parser) and the session
    /// (`session`, else `default`).
    pub fn resolve(root: Option<PathBuf>, session: Option<String>) -> Result<Self> {
        let root = match root {
            Some(root) => root,
            None => default_root().ok_or(Error::NoRoot)?,
        };
        Self::new(root, session.as_deref().unwrap_or("default"))
    }

    /// The paths of session `name` under `root`.
    pub fn new(root: impl Into<PathBuf>, name: &str) -> Result<Self> {
        validate_session(name)?;
        let root = absolute(root.into())?;
        let dir = root.join(name);
        Ok(Self {
            root,
            name: name.to_owned(),
            dir,
        })
    }

    /// The state root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The session name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `{root}/{session}`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `{root}/{session}/tasks`.
    pub fn tasks_dir(&self) -> PathBuf {
        self.dir.join("tasks")
    }

    /// The output file of `id`.
    pub fn output(&self, id: &TaskId) -> PathBuf {
        self.tasks_dir().join(format!("{id}.output"))
    }

    /// The state snapshot of `id`.
    pub fn snapshot(&self, id: &TaskId) -> PathBuf {
        self.tasks_dir().join(format!("{id}.json"))
    }

    /// The space reserved for `id`'s end while it is live ([`crate::record::reserve_end`]).
    pub fn end_slot(&self, id: &TaskId) -> PathBuf {
        self.tasks_dir().join(format!("{id}.end"))
    }

    /// The start of a task waiting in the queue, environment included, for the supervisor
    /// that succeeds the one it waits under (see [`crate::queue`]).
    pub fn queued_start(&self, id: &TaskId) -> PathBuf {
        self.tasks_dir().join(format!("{id}.queued.json"))
    }

    /// Created once `id` passed its readiness check (see [`crate::ready`]).
    pub fn ready_marker(&self, id: &TaskId) -> PathBuf {
        self.tasks_dir().join(format!("{id}.ready"))
    }

    /// The parallelism limits of the session's groups (`tasks group set`).
    pub fn groups(&self) -> PathBuf {
        self.dir.join("groups.json")
    }

    /// How `id` was started (kind, working directory, request), for `tasks restart`.
    pub fn start_request(&self, id: &TaskId) -> PathBuf {
        self.tasks_dir().join(format!("{id}.start.json"))
    }

    /// The latch of one completion of `id`: the one that ended at `ended_ms` (a resumed agent
    /// ends, and notifies, more than once).
    pub fn notified(&self, id: &TaskId, ended_ms: u64) -> PathBuf {
        self.tasks_dir().join(format!("{id}.{ended_ms}.notified"))
    }

    /// The latch of the end hook of the end of `id` at `ended_ms`: created just before the
    /// hook runs, by the one supervisor that runs it.
    pub fn hook_ran(&self, id: &TaskId, ended_ms: u64) -> PathBuf {
        self.tasks_dir().join(format!("{id}.{ended_ms}.hook"))
    }

    /// Where the output of the end hook of `id`'s end at `ended_ms` goes once it passes what
    /// is kept in memory (task-output's pipe mode).
    pub fn hook_output(&self, id: &TaskId, ended_ms: u64) -> PathBuf {
        self.tasks_dir()
            .join(format!("{id}.{ended_ms}.hook.output"))
    }

    /// The log of end hooks: what each printed, and how it ended.
    pub fn hooks_log(&self) -> PathBuf {
        self.dir.join("hooks.log")
    }

    /// The marker of a task none of whose completions is ever delivered (its caller waits for
    /// it in the foreground).
    pub fn never_notified(&self, id: &TaskId) -> PathBuf {
        self.tasks_dir().join(format!("{id}.notified"))
    }

    /// Events written by the supervisor, not yet claimed.
    pub fn pending_events(&self) -> PathBuf {
        self.dir.join("events").join("pending")
    }

    /// Events claimed by a reader and being delivered (each named with its holder).
    pub fn leased_events(&self) -> PathBuf {
        self.dir.join("events").join("leased")
    }

    /// The lease of generation `generation` on the completion of `id` that ended at
    /// `ended_ms` (see [`crate::notice::claim_completion`]).
    pub fn lease(&self, id: &TaskId, ended_ms: u64, generation: u32) -> PathBuf {
        self.tasks_dir()
            .join(format!("{id}.{ended_ms}.lease{generation}"))
    }

    /// Events delivered by a reader.
    pub fn delivered_events(&self) -> PathBuf {
        self.dir.join("events").join("delivered")
    }

    /// The log of delivered notifications.
    pub fn notifications_log(&self) -> PathBuf {
        self.dir.join("notifications.jsonl")
    }

    /// The supervisor's socket.
    pub fn socket(&self) -> PathBuf {
        self.dir.join(SOCKET_NAME)
    }

    /// The supervisor's lock (and pid) file.
    pub fn lock(&self) -> PathBuf {
        self.dir.join("supervisor.lock")
    }

    /// The supervisor's second lock (and pid) file, `{root}/.{session}.supervisor.lock`: in
    /// the root, so deleting the session directory cannot free it. A supervisor whose
    /// directory was deleted under it holds it until it has noticed and left, and no other
    /// supervisor of the session starts meanwhile. (A session name never starts with a dot,
    /// so this is never a session's directory.)
    pub fn root_lock(&self) -> PathBuf {
        self.root.join(format!(".{}.supervisor.lock", self.name))
    }

    /// The supervisor's log file.
    pub fn log(&self) -> PathBuf {
        self.dir.join("supervisor.log")
    }

    /// The previous log, once the log has been rotated.
    pub fn previous_log(&self) -> PathBuf {
        self.dir.join("supervisor.log.1")
    }

    /// The optional settings file.
    pub fn config(&self) -> PathBuf {
        self.dir.join("config.json")
    }

    /// Which directory is at [`SessionPaths::dir`] now (not following a symlink), or `None`
    /// if nothing is there: a supervisor compares it with the one it started in to notice
    /// that its directory was deleted or replaced.
    pub fn dir_identity(&self) -> std::io::Result<Option<DirIdentity>> {
        use std::os::unix::fs::MetadataExt;
        match std::fs::symlink_metadata(&self.dir) {
            Ok(meta) => Ok(Some(DirIdentity {
                dev: meta.dev(),
                ino: meta.ino(),
            })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the session's directories, private to the user (idempotent), and refuses a
    /// root or session directory that is not private ([`SessionPaths::verify`]): before
    /// creating anything (nothing is ever created through a symlink or in a directory of
    /// another user) and again after (a directory created meanwhile by someone else).
    pub fn create_dirs(&self) -> Result<()> {
        self.verify()?;
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true).mode(0o700);
        for dir in [
            self.tasks_dir(),
            self.pending_events(),
            self.leased_events(),
            self.delivered_events(),
        ] {
            builder
                .create(&dir)
                .map_err(|e| Error::io("create", &dir, e))?;
        }
        self.verify()
    }

    /// Refuses (with [`Error::UnsafeState`]) a state root or session directory that is a
    /// symlink, belongs to another user, or that other users can write to: whoever can write
    /// there could plant state that drives this user's `tasks`. Missing directories are fine.
    pub fn verify(&self) -> Result<()> {
        for dir in [&self.root, &self.dir] {
            task_output::open::check_private_dir(dir).map_err(|e| match e {
                // Not a directory at all is a bad path (an I/O error), not an unsafe one.
                task_output::OutputError::UnsafeDirectory { problem, .. }
                    if problem != task_output::DirectoryProblem::NotADirectory =>
                {
                    Error::UnsafeState {
                        path: dir.clone(),
                        reason: with_remedy(&problem, dir),
                    }
                }
                _ => Error::io("use", dir, e.into()),
            })?;
        }
        Ok(())
    }

    /// Runs `use_path` with a path to the supervisor's socket that fits in a socket address
    /// (108 bytes): the socket's own path when it is short enough, else one through an open
    /// descriptor of the session directory (`/proc/self/fd/N/supervisor.sock`), which names the
    /// same file with the same permissions whatever the length of the root.
    pub fn with_socket_path<T>(
        &self,
        use_path: impl FnOnce(&Path) -> std::io::Result<T>,
    ) -> std::io::Result<T> {
        const SUN_PATH_MAX: usize = 107;
        let socket = self.socket();
        if socket.as_os_str().len() <= SUN_PATH_MAX {
            return use_path(&socket);
        }
        let dir = rustix::fs::open(
            &self.dir,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )?;
        let short = PathBuf::from(format!(
            "/proc/self/fd/{}/{SOCKET_NAME}",
            std::os::fd::AsRawFd::as_raw_fd(&dir)
        ));
        use_path(&short)
    }
}

/// Why `dir` is refused, and how its owner makes it private where a mode is the problem.
fn with_remedy(problem: &task_output::DirectoryProblem, dir: &Path) -> String {
    match problem {
        task_output::DirectoryProblem::WritableByOthers { .. } => {
            format!(
                "{problem}; make it private with `chmod 700 {}`",
                dir.display()
            )
        }
        _ => problem.to_string(),
    }
}

/// A directory's device and inode: two directories at one path, one deleted and one created
/// after it, differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirIdentity {
    dev: u64,
    ino: u64,
}

impl std::fmt::Display for DirIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "inode {} on device {}", self.ino, self.dev)
    }
}

/// The largest state file a reader accepts (a task snapshot, an event, the config); state
/// files are read as untrusted input ([`task_output::open::read_untrusted`]).
pub const MAX_STATE_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The file name of the supervisor's socket in the session directory.
const SOCKET_NAME: &str = "supervisor.sock";

fn default_root() -> Option<PathBuf> {
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from_env("XDG_STATE_HOME")
        .map(|state| state.join("tasks"))
        .or_else(|| from_env("HOME").map(|home| home.join(".local/state/tasks")))
}

fn absolute(path: PathBuf) -> Result<PathBuf> {
    std::path::absolute(&path).map_err(|e| Error::io("resolve", path, e))
}

fn validate_session(name: &str) -> Result<()> {
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.is_empty() || name.starts_with('.') || !name.chars().all(valid_char) {
        return Err(Error::InvalidSession(name.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn session_names_that_could_escape_the_root_are_rejected() {
        for bad in ["", "..", ".hidden", "a/b", "a b", "x\0"] {
            assert!(matches!(
                SessionPaths::new("/tmp", bad),
                Err(Error::InvalidSession(_))
            ));
        }
        let paths = SessionPaths::new("/tmp/r", "work-1.a_b").unwrap();
        assert_eq!(paths.dir(), Path::new("/tmp/r/work-1.a_b"));
        assert_eq!(
            paths.socket(),
            Path::new("/tmp/r/work-1.a_b/supervisor.sock")
        );
        assert_eq!(
            paths.root_lock(),
            Path::new("/tmp/r/.work-1.a_b.supervisor.lock")
        );
    }

    #[test]
    fn relative_roots_become_absolute() {
        let paths = SessionPaths::new("rel", "default").unwrap();
        assert!(paths.root().is_absolute());
    }
}
