//! Tunables. Every `Default` is the reference's value (SPEC §12); tests use milliseconds.

use std::path::PathBuf;
use std::time::Duration;

/// How locks are taken (the reference's `proper-lockfile` settings by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockConfig {
    /// A lock directory whose mtime is older than this is stale and is taken over (10 s).
    pub stale_after: Duration,
    /// How often a held lock directory's mtime is refreshed (5 s, half of `stale_after`).
    pub refresh_every: Duration,
    /// Retries after the first failed attempt (30).
    pub retries: u32,
    /// First backoff (5 ms); doubles each retry.
    pub min_backoff: Duration,
    /// Backoff ceiling (100 ms).
    pub max_backoff: Duration,
    /// Whether to take the reference's `F.lock` directories as well as the kernel `flock`
    /// (on). They exist only so that a running reference harness and this crate exclude each
    /// other on a list they share; between this crate's own processes the `flock` alone is
    /// enough. A list no reference harness writes can leave them off, which spares every write
    /// a `mkdir` and an `rmdir` (each a block allocation and free, slow on a disk mounted with
    /// `discard`) and the refresher thread.
    pub reference_locks: bool,
}

impl Default for LockConfig {
    fn default() -> Self {
        Self {
            stale_after: Duration::from_secs(10),
            refresh_every: Duration::from_secs(5),
            retries: 30,
            min_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(100),
            reference_locks: true,
        }
    }
}

/// One hook command: a program and its arguments, run without a shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCommand {
    /// The program to run.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
}

impl HookCommand {
    /// A command with arguments.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }
}

/// The `TaskCreated` / `TaskCompleted` hooks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookConfig {
    /// Run after a task file is written; a blocking result deletes the task.
    pub task_created: Vec<HookCommand>,
    /// Run before a task is marked completed; a blocking result refuses the update.
    pub task_completed: Vec<HookCommand>,
    /// A hook still running after this long is killed, with its process group (60 s).
    pub timeout: Duration,
}

impl Default for HookConfig {
    fn default() -> Self {
        Self {
            task_created: Vec::new(),
            task_completed: Vec::new(),
            timeout: Duration::from_secs(60),
        }
    }
}

/// How [`crate::TaskList::watch`] notices changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchConfig {
    /// Quiet time after the last filesystem event before a change is reported (50 ms).
    pub debounce: Duration,
    /// Fallback re-read interval while incomplete tasks exist (5 s).
    pub poll_every: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            debounce: Duration::from_millis(50),
            poll_every: Duration::from_secs(5),
        }
    }
}

/// How the PostgreSQL store retries (serialization failures, deadlocks, lost connections)
/// and connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgConfig {
    /// Retries of a transaction (or of a watcher's reconnect) after the first attempt (12).
    pub retries: u32,
    /// First backoff (20 ms); doubles each retry.
    pub min_backoff: Duration,
    /// Backoff ceiling (2 s): with the defaults, about 15 s of retries in all, enough to ride
    /// out a server restart.
    pub max_backoff: Duration,
    /// Connect timeout when the URL sets none (`connect_timeout`) (10 s).
    pub connect_timeout: Duration,
}

impl PgConfig {
    /// The delays between retries: from `min_backoff`, doubling, up to `max_backoff`.
    pub(crate) fn backoff(&self) -> task_output::Backoff {
        task_output::Backoff::new(self.min_backoff, self.max_backoff)
    }
}

impl Default for PgConfig {
    fn default() -> Self {
        Self {
            retries: 12,
            min_backoff: Duration::from_millis(20),
            max_backoff: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// Everything a [`crate::TaskList`] handle is configured with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    /// Lock protocol settings.
    pub lock: LockConfig,
    /// Hook commands and their timeout.
    pub hooks: HookConfig,
    /// Watch timing.
    pub watch: WatchConfig,
    /// PostgreSQL retries and timeouts (unused by the file store).
    pub pg: PgConfig,
    /// Agent swarms ("teammates") enabled: auto-ownership on `in_progress` and
    /// `task_assignment` mailbox messages (off by default, as in the reference).
    pub teammates: bool,
    /// Whether completing the last of 3+ tasks with no verification task returns the nudge (on).
    pub verification_nudge: bool,
    /// Flush the change to the disk before it counts as done (on): on files, one `fdatasync`
    /// of the list's write-ahead journal per write (see the README's "Guarantees"). Writes are
    /// atomic (journal, then temp file + rename) either way, so a killed process never leaves a
    /// torn file or half a change; turning this off only gives up durability across power loss
    /// or an OS crash. On
    /// PostgreSQL, off means `synchronous_commit = off` (the server's own crash may lose the
    /// last commits, never half of one).
    pub durable: bool,
    /// How long a task file must have been left unchanged before a snapshot may keep its
    /// parsed task in the handle's cache (2 s), on a filesystem not known to be local. Files
    /// changed more recently are read on every snapshot. This must exceed the filesystem's
    /// timestamp granularity (1 s on some older filesystems) plus any clock skew between this
    /// machine and a network filesystem's server; `Duration::MAX` turns the cache off.
    pub cache_min_age: Duration,
    /// The same on a local filesystem whose timestamps come from this machine's clock in ticks
    /// of a few milliseconds at most (ext2/3/4, xfs, btrfs, f2fs, zfs, bcachefs, tmpfs, and
    /// overlayfs on them): 50 ms. Never more than `cache_min_age`.
    pub cache_min_age_local: Duration,
    /// Whether the snapshot cache is also kept in the list directory (`.snapshot-cache`, not
    /// fsynced) for the next process, so that a short-lived command such as `tasks list ready`
    /// starts warm (on). Entries are checked against their files' stamps like the in-memory
    /// ones, so a stale or damaged cache file only costs a re-read.
    pub cache_file: bool,
    /// The largest task file that is read (1 MiB; a task the reference writes is a few hundred
    /// bytes). The list directory is untrusted input: a larger `{id}.json` is not read at all,
    /// but skipped with a warning like any other bad entry, named by `doctor` and moved aside by
    /// `doctor --fix` (see [`crate::EntryFault`]).
    pub max_task_file_bytes: u64,
    /// The largest audit log (`.events.jsonl`), inbox or leftover journal that is read
    /// (256 MiB: some two million audit records). A larger audit log or inbox is skipped with
    /// a warning (its records are not read) and named by `doctor`; a larger journal refuses
    /// writes, as a journal that does not parse does, until it is looked at.
    pub max_log_bytes: u64,
    /// How large the list's write-ahead journal (`.wal`) may grow before it is checkpointed
    /// (256 KiB, some 400 creates): the files its records changed, the audit log and the
    /// directory flushed, and a new journal started. A write waits for one flush of the journal;
    /// the one write that checkpoints also waits for those. Larger means rarer checkpoints, each
    /// flushing more files, and a longer replay after a machine crash.
    pub journal_checkpoint_bytes: u64,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            lock: LockConfig::default(),
            hooks: HookConfig::default(),
            watch: WatchConfig::default(),
            pg: PgConfig::default(),
            teammates: false,
            verification_nudge: true,
            durable: true,
            cache_min_age: Duration::from_secs(2),
            cache_min_age_local: Duration::from_millis(50),
            cache_file: true,
            max_task_file_bytes: 1 << 20,
            max_log_bytes: 256 << 20,
            journal_checkpoint_bytes: 256 << 10,
        }
    }
}
