//! Locking: the reference's `mkdir F.lock` protocol plus a kernel `flock`.
//!
//! The reference (via `proper-lockfile`) locks a file `F` by creating the directory `F.lock`,
//! refreshes its mtime while held, treats it as stale once the mtime is older than
//! [`LockConfig::stale_after`], and removes it to release. This crate takes the same directories
//! so that it and a running reference harness exclude each other. Between processes of this
//! crate, an exclusive `flock` on the list's `.lock` file is taken first: it is released by the
//! kernel when a holder dies, and it orders our own writers fairly without backoff loops.

use std::fs::File;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use crate::config::LockConfig;
use crate::error::{Error, IoContext, Result};

/// The list-level lock file (empty, as in the reference).
pub(crate) const LIST_LOCK_FILE: &str = ".lock";

/// The lock directory for a file: `F` → `F.lock`.
pub(crate) fn lock_dir_for(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_os_string();
    name.push(".lock");
    PathBuf::from(name)
}

/// Lock directories held by this process, refreshed by one background thread.
#[derive(Debug)]
struct Held {
    paths: Mutex<Vec<PathBuf>>,
    /// Signalled when the refresh period shrinks.
    wake: Condvar,
    /// The refresh period in milliseconds (the smallest any holder asked for).
    tick_ms: AtomicU64,
}

/// The process-wide set of held lock directories. The first call starts the refresher thread,
/// which touches every held directory once per tick.
fn held() -> &'static Held {
    static HELD: OnceLock<Held> = OnceLock::new();
    HELD.get_or_init(|| {
        if let Err(e) = std::thread::Builder::new()
            .name("task-list-lock-refresh".into())
            .spawn(refresh_forever)
        {
            tracing::warn!(error = %e, "could not start the lock refresher");
        }
        Held {
            paths: Mutex::default(),
            wake: Condvar::new(),
            tick_ms: AtomicU64::new(u64::MAX),
        }
    })
}

fn refresh_forever() {
    let held = held();
    let mut paths = lock_paths(held);
    loop {
        // Wake every tick, held locks or not: a lock registered just before a tick is touched
        // early, which is harmless, and holders never have to wake this thread.
        let tick = Duration::from_millis(held.tick_ms.load(Ordering::Relaxed));
        paths = match held.wake.wait_timeout(paths, tick) {
            Ok((paths, _)) => paths,
            Err(poisoned) => poisoned.into_inner().0,
        };
        for path in paths.iter() {
            touch(path);
        }
    }
}

/// A held `F.lock` directory; removed on drop.
#[derive(Debug)]
pub(crate) struct DirLock {
    path: PathBuf,
    registered: bool,
}

impl DirLock {
    /// Takes `lock_dir`, retrying with exponential backoff and taking over a stale one.
    pub(crate) fn acquire(lock_dir: PathBuf, config: &LockConfig) -> Result<Self> {
        let mut backoff = task_output::Backoff::new(config.min_backoff, config.max_backoff);
        for attempt in 0..=config.retries {
            if try_mkdir(&lock_dir, config)? {
                return Ok(Self {
                    path: lock_dir,
                    registered: false,
                });
            }
            if attempt < config.retries {
                std::thread::sleep(backoff.next_delay());
            }
        }
        Err(Error::LockBusy {
            path: lock_dir,
            attempts: config.retries + 1,
        })
    }

    /// Whether this is the lock of `file`.
    pub(crate) fn protects(&self, file: &Path) -> bool {
        self.path == lock_dir_for(file)
    }

    /// Keeps the lock's mtime fresh (every `refresh_every`) until it is released.
    fn refreshed(mut self, refresh_every: Duration) -> Self {
        let held = held();
        let ms = u64::try_from(refresh_every.as_millis()).unwrap_or(u64::MAX);
        let mut paths = lock_paths(held);
        if held.tick_ms.fetch_min(ms, Ordering::Relaxed) > ms {
            // A shorter period than the thread is sleeping for: restart its wait.
            held.wake.notify_one();
        }
        paths.push(self.path.clone());
        self.registered = true;
        self
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        if self.registered {
            let mut paths = lock_paths(held());
            if let Some(at) = paths.iter().position(|p| p == &self.path) {
                paths.swap_remove(at);
            }
        }
        if let Err(e) = std::fs::remove_dir(&self.path) {
            tracing::warn!(path = %self.path.display(), error = %e, "could not release lock directory");
        }
    }
}

fn lock_paths(held: &Held) -> std::sync::MutexGuard<'_, Vec<PathBuf>> {
    held.paths.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One attempt: `Ok(true)` when the directory is now ours.
fn try_mkdir(lock_dir: &Path, config: &LockConfig) -> Result<bool> {
    match std::fs::create_dir(lock_dir) {
        Ok(()) => return Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).at("mkdir", lock_dir),
    }
    if !is_stale(lock_dir, config.stale_after)? {
        return Ok(false);
    }
    tracing::warn!(path = %lock_dir.display(), "taking over a stale lock");
    match std::fs::remove_dir(lock_dir) {
        Err(e) if e.kind() != ErrorKind::NotFound => return Err(e).at("rmdir", lock_dir),
        _ => {}
    }
    match std::fs::create_dir(lock_dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e).at("mkdir", lock_dir),
    }
}

/// Whether a lock directory's mtime is older than `stale_after` (a vanished one counts as stale).
pub(crate) fn is_stale(lock_dir: &Path, stale_after: Duration) -> Result<bool> {
    Ok(lock_age(lock_dir)?.is_none_or(|age| age > stale_after))
}

/// How long ago a lock directory was last refreshed; `None` if it does not exist.
pub(crate) fn lock_age(lock_dir: &Path) -> Result<Option<Duration>> {
    match std::fs::symlink_metadata(lock_dir) {
        Ok(meta) => {
            let modified = meta.modified().at("stat", lock_dir)?;
            Ok(Some(
                SystemTime::now()
                    .duration_since(modified)
                    .unwrap_or_default(),
            ))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).at("stat", lock_dir),
    }
}

/// Sets a lock directory's mtime to now.
fn touch(path: &Path) {
    let now = rustix::fs::Timespec {
        tv_sec: 0,
        tv_nsec: rustix::fs::UTIME_NOW,
    };
    let times = rustix::fs::Timestamps {
        last_access: now,
        last_modification: now,
    };
    if let Err(e) = rustix::fs::utimensat(
        rustix::fs::CWD,
        path,
        &times,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    ) {
        tracing::debug!(path = %path.display(), error = %e, "could not refresh lock");
    }
}

/// The list lock: `flock(.lock)` then the `.lock.lock` directory, refreshed while held.
/// Task-file locks (`{id}.json.lock`) are taken through it so they are refreshed too.
#[derive(Debug)]
pub(crate) struct ListGuard {
    // Field order is drop order: remove the directory, then release the flock.
    _dir_lock: Option<DirLock>,
    _kernel: File,
    config: LockConfig,
}

impl ListGuard {
    /// Locks the list in `dir`: the flock always, the `.lock.lock` directory if `with_dir_lock`
    /// and the reference's locks are on ([`LockConfig::reference_locks`]).
    pub(crate) fn acquire(dir: &Path, config: &LockConfig, with_dir_lock: bool) -> Result<Self> {
        let lock_file = dir.join(LIST_LOCK_FILE);
        let kernel = task_output::open::NoFollow::read_write()
            .create()
            .mode(crate::fsutil::LIST_FILE_MODE)
            .open(&lock_file)
            .map_err(std::io::Error::from)
            .at("open", &lock_file)?;
        rustix::fs::flock(&kernel, rustix::fs::FlockOperation::LockExclusive)
            .map_err(std::io::Error::from)
            .at("flock", &lock_file)?;
        let dir_lock = match with_dir_lock && config.reference_locks {
            true => Some(
                DirLock::acquire(lock_dir_for(&lock_file), config)?.refreshed(config.refresh_every),
            ),
            false => None,
        };
        Ok(Self {
            _dir_lock: dir_lock,
            _kernel: kernel,
            config: config.clone(),
        })
    }

    /// Takes the reference's lock on one task file (`{file}.lock`) for as long as the result
    /// lives; `None` when the reference's locks are off.
    pub(crate) fn lock_file(&self, file: &Path) -> Result<Option<DirLock>> {
        if !self.config.reference_locks {
            return Ok(None);
        }
        let lock = DirLock::acquire(lock_dir_for(file), &self.config)?;
        Ok(Some(lock.refreshed(self.config.refresh_every)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn fast() -> LockConfig {
        LockConfig {
            stale_after: Duration::from_millis(200),
            refresh_every: Duration::from_millis(20),
            retries: 3,
            min_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
            ..LockConfig::default()
        }
    }

    #[test]
    fn busy_lock_gives_up_after_retries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.json.lock");
        let _held = DirLock::acquire(path.clone(), &fast()).unwrap();
        match DirLock::acquire(path, &fast()) {
            Err(Error::LockBusy { attempts, .. }) => assert_eq!(attempts, 4),
            other => panic!("expected LockBusy, got {other:?}"),
        }
    }

    #[test]
    fn stale_lock_is_taken_over_and_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.json.lock");
        std::fs::create_dir(&path).unwrap();
        let old = std::time::SystemTime::now() - Duration::from_secs(60);
        File::open(&path).unwrap().set_modified(old).unwrap();
        let lock = DirLock::acquire(path.clone(), &fast()).unwrap();
        assert!(lock_age(&path).unwrap().unwrap() < Duration::from_secs(30));
        drop(lock);
        assert!(!path.exists());
    }

    #[test]
    fn held_list_lock_is_refreshed() {
        let dir = tempfile::tempdir().unwrap();
        let config = fast();
        let guard = ListGuard::acquire(dir.path(), &config, true).unwrap();
        let lock_dir = dir.path().join(".lock.lock");
        let old = std::time::SystemTime::now() - Duration::from_secs(60);
        File::open(&lock_dir).unwrap().set_modified(old).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while lock_age(&lock_dir).unwrap().unwrap() > Duration::from_secs(30) {
            assert!(std::time::Instant::now() < deadline, "lock never refreshed");
            std::thread::sleep(Duration::from_millis(5));
        }
        drop(guard);
        assert!(!lock_dir.exists());
        assert!(dir.path().join(".lock").exists());
    }
}
