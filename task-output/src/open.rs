//! Opening output and state files without ever following a symlink.
//!
//! Every open here goes through [`NoFollow`], which passes `O_NOFOLLOW`, so a symlink planted at an output path makes the open
//! fail with [`OutputError::SymlinkRefused`] and nothing is written through it. Files are created
//! with mode `0600` and all descriptors are close-on-exec (a child gets the output file only
//! through [`child_stdio`], which `std::process::Command` installs as its fds 1 and 2).
//!
//! State a program reads back from disk is untrusted input (anyone able to write to the
//! directory may have planted a FIFO, a device or a huge file there): [`read_untrusted`] reads
//! only regular files up to a size limit and never blocks on the open, and
//! [`ensure_private_dir`] makes sure the directory itself belongs to this user alone.

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;

pub use rustix::fs::Stat;
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::{DirectoryProblem, FileKind, OutputError};

/// The permission bits of every file this module creates: read and write for the owner only.
pub const OUTPUT_FILE_MODE: u32 = 0o600;

/// The permission bits of every directory [`ensure_private_dir`] creates: owner only.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// How a file is opened by path, the one way this workspace does it: never through a symlink.
///
/// Like [`std::fs::OpenOptions`], with the safety flags fixed: every open passes `O_NOFOLLOW`
/// (a symlink at the last component is [`OutputError::SymlinkRefused`], also under
/// `O_CREAT|O_EXCL`, where Linux says `EEXIST`), `O_CLOEXEC` (a child gets a file only when
/// it is handed one) and `O_NONBLOCK` (a FIFO planted at the path never blocks the open; a
/// socket is [`OutputError::NotRegularFile`]). A file created is given
/// [`OUTPUT_FILE_MODE`] (`0600`) unless [`mode`](Self::mode) says otherwise, before the umask.
///
/// [`open`](Self::open) opens whatever is there that is not a symlink;
/// [`open_regular`](Self::open_regular) also refuses anything but a regular file, checked on the
/// open descriptor (no race with a swap of the path), and keeps its `fstat`.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::io::Write;
/// use task_output::OutputError;
/// use task_output::open::NoFollow;
///
/// let dir = tempfile::tempdir()?;
/// let log = dir.path().join("hooks.log");
/// NoFollow::write().append().create().open(&log)?.write_all(b"ran\n")?;
/// std::os::unix::fs::symlink(&log, dir.path().join("link"))?;
/// assert!(matches!(
///     NoFollow::write().append().open(&dir.path().join("link")),
///     Err(OutputError::SymlinkRefused { .. })
/// ));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use]
pub struct NoFollow {
    flags: OFlags,
    mode: u32,
}

impl NoFollow {
    fn with(flags: OFlags) -> Self {
        Self {
            flags: flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            mode: OUTPUT_FILE_MODE,
        }
    }

    /// Opens for reading (`O_RDONLY`).
    pub fn read() -> Self {
        Self::with(OFlags::RDONLY)
    }

    /// Opens for writing (`O_WRONLY`).
    pub fn write() -> Self {
        Self::with(OFlags::WRONLY)
    }

    /// Opens for reading and writing (`O_RDWR`).
    pub fn read_write() -> Self {
        Self::with(OFlags::RDWR)
    }

    /// Opens a directory (`O_RDONLY|O_DIRECTORY`): anything else there is refused.
    pub fn directory() -> Self {
        Self::with(OFlags::RDONLY | OFlags::DIRECTORY)
    }

    /// Creates the file if it is missing (`O_CREAT`).
    pub fn create(self) -> Self {
        self.flag(OFlags::CREATE)
    }

    /// Creates the file, failing with [`OutputError::AlreadyExists`] if anything is there
    /// (`O_CREAT|O_EXCL`).
    pub fn create_new(self) -> Self {
        self.flag(OFlags::CREATE | OFlags::EXCL)
    }

    /// Every write goes to the end (`O_APPEND`).
    pub fn append(self) -> Self {
        self.flag(OFlags::APPEND)
    }

    /// Empties the file when opening it (`O_TRUNC`).
    pub fn truncate(self) -> Self {
        self.flag(OFlags::TRUNC)
    }

    /// The permission bits of a file this open creates (default [`OUTPUT_FILE_MODE`]), before
    /// the umask.
    pub fn mode(self, mode: u32) -> Self {
        Self { mode, ..self }
    }

    /// Waits on a FIFO at the open, as a plain open does: only for a file a child inherits
    /// (see [`child_stdio`]).
    fn blocking(self) -> Self {
        Self {
            flags: self.flags - OFlags::NONBLOCK,
            ..self
        }
    }

    fn flag(self, flag: OFlags) -> Self {
        Self {
            flags: self.flags | flag,
            ..self
        }
    }

    /// Opens `path`.
    ///
    /// # Errors
    /// [`OutputError::SymlinkRefused`] for a symlink, [`OutputError::NotRegularFile`] for a
    /// socket (which cannot be opened), [`OutputError::AlreadyExists`],
    /// [`OutputError::NotFound`], [`OutputError::PermissionDenied`], or another I/O error.
    pub fn open(&self, path: &Path) -> Result<File, OutputError> {
        self.open_fd(path).map(File::from)
    }

    /// Opens `path` and checks on the open file that it is a regular file.
    ///
    /// # Errors
    /// Those of [`open`](Self::open), and [`OutputError::NotRegularFile`] for a FIFO, a
    /// device or a directory.
    pub fn open_regular(&self, path: &Path) -> Result<RegularFile, OutputError> {
        let fd = self.open_fd(path)?;
        let stat = rustix::fs::fstat(&fd).map_err(|errno| OutputError::from_errno(path, errno))?;
        let file_type = FileType::from_raw_mode(stat.st_mode);
        if file_type != FileType::RegularFile {
            return Err(OutputError::NotRegularFile {
                path: path.to_path_buf(),
                kind: file_kind(file_type),
            });
        }
        Ok(RegularFile {
            file: File::from(fd),
            stat,
            path: path.to_path_buf(),
        })
    }

    fn open_fd(&self, path: &Path) -> Result<OwnedFd, OutputError> {
        match rustix::fs::open(path, self.flags, Mode::from_raw_mode(self.mode)) {
            Ok(fd) => Ok(fd),
            // Under `O_EXCL` a symlink is `EEXIST`; say what it is.
            Err(Errno::EXIST) if is_symlink(path) => Err(OutputError::SymlinkRefused {
                path: path.to_path_buf(),
            }),
            Err(Errno::ISDIR) => Err(OutputError::NotRegularFile {
                path: path.to_path_buf(),
                kind: FileKind::Directory,
            }),
            // A socket cannot be opened; a FIFO opened for writing with no reader neither.
            Err(errno @ Errno::NXIO) => match path.symlink_metadata() {
                Ok(meta) => Err(OutputError::NotRegularFile {
                    path: path.to_path_buf(),
                    kind: file_kind(FileType::from_raw_mode(meta.mode())),
                }),
                Err(_) => Err(OutputError::from_errno(path, errno)),
            },
            Err(errno) => Err(OutputError::from_errno(path, errno)),
        }
    }
}

/// A regular file opened by [`NoFollow::open_regular`], with the `fstat` taken on it before
/// anything was read (what is read is at least as new as the stat).
#[derive(Debug)]
pub struct RegularFile {
    file: File,
    stat: Stat,
    path: PathBuf,
}

impl RegularFile {
    /// Its `fstat` at the open.
    pub fn stat(&self) -> &Stat {
        &self.stat
    }

    /// Its length at the open.
    pub fn len(&self) -> u64 {
        u64::try_from(self.stat.st_size).unwrap_or(0)
    }

    /// Whether it was empty at the open.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The open file, given up.
    pub fn into_file(self) -> File {
        self.file
    }

    /// Refuses a file over `max_bytes` at the open ([`OutputError::TooLarge`]).
    ///
    /// # Errors
    /// [`OutputError::TooLarge`].
    pub fn within(self, max_bytes: u64) -> Result<Self, OutputError> {
        match self.len() {
            size if size > max_bytes => Err(too_large(&self.path, size, max_bytes)),
            _ => Ok(self),
        }
    }

    /// Reads the file to its end, never more than `max_bytes` (also from a file that grows
    /// while it is read: [`OutputError::TooLarge`]).
    ///
    /// # Errors
    /// [`OutputError::TooLarge`], or the read's I/O error.
    pub fn read_within(self, max_bytes: u64) -> Result<Vec<u8>, OutputError> {
        let mut bytes =
            Vec::with_capacity(usize::try_from(self.len()).unwrap_or(0).saturating_add(1));
        // One spare byte sees a file that grew past the limit.
        self.file
            .take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|err| OutputError::from_io(&self.path, err))?;
        let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if read > max_bytes {
            return Err(too_large(&self.path, read, max_bytes));
        }
        Ok(bytes)
    }
}

fn too_large(path: &Path, size: u64, limit: u64) -> OutputError {
    OutputError::TooLarge {
        path: path.to_path_buf(),
        size,
        limit,
    }
}

/// Creates a new output file for writing: `O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW`, mode `0600`
/// ([`NoFollow::write`]`().create_new()`).
///
/// Fails with [`OutputError::AlreadyExists`] if anything is already at `path`, and with
/// [`OutputError::SymlinkRefused`] if that thing is a symlink (Linux reports `EEXIST` for a
/// symlink under `O_EXCL`; this function tells the two cases apart so callers see the real cause).
pub fn create_output_file(path: &Path) -> Result<File, OutputError> {
    NoFollow::write().create_new().open(path)
}

/// Opens an existing output file for appending: `O_WRONLY|O_APPEND|O_NOFOLLOW`.
pub fn open_output_append(path: &Path) -> Result<File, OutputError> {
    NoFollow::write().append().open(path)
}

/// Opens a file to append to, creating it if needed: `O_WRONLY|O_CREAT|O_APPEND|O_NOFOLLOW`,
/// mode `0600` (a log that every run of a task adds to).
pub fn open_append_creating(path: &Path) -> Result<File, OutputError> {
    NoFollow::write().create().append().open(path)
}

/// Opens (creating if needed) the output file a child process writes to directly, and returns
/// it twice, as the child's stdout and its stderr: `O_WRONLY|O_CREAT|O_APPEND|O_NOFOLLOW`, mode
/// `0600`.
///
/// Both [`Stdio`] values share one open file description, so the child's stdout and stderr
/// interleave in the order they are written and no byte passes through the parent. The parent's
/// copies are closed when the `Command` holding them is dropped.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let (stdout, stderr) = task_output::open::child_stdio("/tmp/job.output".as_ref())?;
/// let status = std::process::Command::new("make").stdout(stdout).stderr(stderr).status()?;
/// # Ok(()) }
/// ```
pub fn child_stdio(path: &Path) -> Result<(Stdio, Stdio), OutputError> {
    let fd = NoFollow::write()
        .create()
        .append()
        .blocking()
        .open_fd(path)?;
    let stderr = fd
        .try_clone()
        .map_err(|err| OutputError::from_io(path, err))?;
    Ok((Stdio::from(fd), Stdio::from(stderr)))
}

/// Opens a file that someone else may have tampered with for reading, refusing anything but a
/// regular file of at most `max_bytes` at the open ([`NoFollow::read`], then
/// [`RegularFile::within`]).
///
/// # Errors
/// [`OutputError::SymlinkRefused`], [`OutputError::NotRegularFile`],
/// [`OutputError::TooLarge`], [`OutputError::NotFound`] and the other errors of an open.
pub fn open_untrusted(path: &Path, max_bytes: u64) -> Result<RegularFile, OutputError> {
    NoFollow::read().open_regular(path)?.within(max_bytes)
}

/// Reads a whole state file that someone else may have tampered with, refusing anything but a
/// regular file of at most `max_bytes` ([`open_untrusted`], then [`RegularFile::read_within`]).
///
/// The open is `O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC`, so a symlink is refused
/// ([`OutputError::SymlinkRefused`]) and a FIFO cannot block the open; the type and size are then
/// checked on the open descriptor (no race with a swap of the path): a FIFO, a device, a socket
/// or a directory is [`OutputError::NotRegularFile`], a file over the limit (or one that grows
/// past it while read) is [`OutputError::TooLarge`].
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use task_output::OutputError;
/// use task_output::open::read_untrusted;
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("state.json");
/// std::fs::write(&path, b"{}")?;
/// assert_eq!(read_untrusted(&path, 1024)?, b"{}");
/// assert!(matches!(
///     read_untrusted("/dev/null".as_ref(), 1024),
///     Err(OutputError::NotRegularFile { .. })
/// ));
/// # Ok(()) }
/// ```
pub fn read_untrusted(path: &Path, max_bytes: u64) -> Result<Vec<u8>, OutputError> {
    open_untrusted(path, max_bytes)?.read_within(max_bytes)
}

/// [`read_untrusted`], with the `fstat` taken on the open file before it was read.
///
/// # Errors
/// Those of [`read_untrusted`].
pub fn read_untrusted_with_stat(
    path: &Path,
    max_bytes: u64,
) -> Result<(Vec<u8>, Stat), OutputError> {
    let file = open_untrusted(path, max_bytes)?;
    let stat = file.stat;
    file.read_within(max_bytes).map(|bytes| (bytes, stat))
}

/// The last modification a `stat` saw, in milliseconds since the epoch (0 before it).
// The fields' types differ between targets.
#[allow(clippy::useless_conversion)]
pub fn modified_ms(stat: &Stat) -> u64 {
    let secs = u64::try_from(stat.st_mtime).unwrap_or(0);
    let nanos = u64::try_from(stat.st_mtime_nsec).unwrap_or(0);
    secs.saturating_mul(1000).saturating_add(nanos / 1_000_000)
}

/// Creates `path` (and missing parents) with mode `0700`, or checks the directory already there,
/// so that only this user can create, replace or read state in it.
///
/// Refused with [`OutputError::UnsafeDirectory`]: a symlink at `path` (whatever it points to),
/// something that is not a directory, a directory owned by another user, or one that its group
/// or others can write to. The checks are made on the opened directory (`O_NOFOLLOW`), not on
/// the path, so the answer is about the directory that is there. Parents that already exist are
/// not checked (a private directory under the sticky, world-writable `/tmp` is fine).
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::os::unix::fs::PermissionsExt;
/// use task_output::open::ensure_private_dir;
///
/// let root = tempfile::tempdir()?;
/// let session = root.path().join("state/session");
/// ensure_private_dir(&session)?;
/// assert_eq!(std::fs::metadata(&session)?.permissions().mode() & 0o777, 0o700);
///
/// std::fs::set_permissions(&session, std::fs::Permissions::from_mode(0o777))?;
/// assert!(ensure_private_dir(&session).is_err());
/// # Ok(()) }
/// ```
pub fn ensure_private_dir(path: &Path) -> Result<(), OutputError> {
    if let Err(err) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(PRIVATE_DIR_MODE)
        .create(path)
    {
        // Something is already there: the checks below say what is wrong with it.
        if err.kind() != std::io::ErrorKind::AlreadyExists {
            return Err(OutputError::from_io(path, err));
        }
    }
    check_private_dir(path).map(drop)
}

/// Checks, as [`ensure_private_dir`] does, the directory at `path` without creating it:
/// `Ok(false)` when nothing is there, `Ok(true)` for a private directory of this user.
///
/// # Errors
/// [`OutputError::UnsafeDirectory`] naming what is wrong, or the error of the open.
pub fn check_private_dir(path: &Path) -> Result<bool, OutputError> {
    let unsafe_dir = |problem| OutputError::UnsafeDirectory {
        path: path.to_path_buf(),
        problem,
    };
    let dir = match NoFollow::directory().open(path) {
        Ok(dir) => dir,
        Err(OutputError::NotFound { .. }) => return Ok(false),
        Err(err) => {
            return Err(match path.symlink_metadata() {
                Ok(meta) if meta.file_type().is_symlink() => unsafe_dir(DirectoryProblem::Symlink),
                Ok(meta) if !meta.is_dir() => unsafe_dir(DirectoryProblem::NotADirectory),
                _ => err,
            });
        }
    };
    let stat = rustix::fs::fstat(&dir).map_err(|errno| OutputError::from_errno(path, errno))?;
    let me = rustix::process::geteuid().as_raw();
    if stat.st_uid != me {
        return Err(unsafe_dir(DirectoryProblem::OwnedByOther {
            owner: stat.st_uid,
            me,
        }));
    }
    let mode = stat.st_mode & 0o7777;
    if mode & 0o022 != 0 {
        return Err(unsafe_dir(DirectoryProblem::WritableByOthers { mode }));
    }
    Ok(true)
}

fn file_kind(file_type: FileType) -> FileKind {
    match file_type {
        FileType::Directory => FileKind::Directory,
        FileType::Fifo => FileKind::Fifo,
        FileType::CharacterDevice => FileKind::CharDevice,
        FileType::BlockDevice => FileKind::BlockDevice,
        FileType::Socket => FileKind::Socket,
        FileType::Symlink => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

fn is_symlink(path: &Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|meta| meta.file_type().is_symlink())
}
