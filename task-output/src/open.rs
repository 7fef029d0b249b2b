//! Opening output and state files without ever following a symlink.
//!
//! Every function here passes `O_NOFOLLOW`, so a symlink planted at an output path makes the open
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
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::process::Stdio;

use rustix::fs::{FileType, Mode, OFlags};

use crate::{DirectoryProblem, FileKind, OutputError};

/// The permission bits of every file this module creates: read and write for the owner only.
pub const OUTPUT_FILE_MODE: u32 = 0o600;

/// The permission bits of every directory [`ensure_private_dir`] creates: owner only.
pub const PRIVATE_DIR_MODE: u32 = 0o700;

/// Creates a new output file for writing: `O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW`, mode `0600`.
///
/// Fails with [`OutputError::AlreadyExists`] if anything is already at `path`, and with
/// [`OutputError::SymlinkRefused`] if that thing is a symlink (Linux reports `EEXIST` for a
/// symlink under `O_EXCL`; this function tells the two cases apart so callers see the real cause).
pub fn create_output_file(path: &Path) -> Result<File, OutputError> {
    let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
    open_nofollow(path, flags).map_err(|err| match err {
        OutputError::AlreadyExists { path } if is_symlink(&path) => {
            OutputError::SymlinkRefused { path }
        }
        other => other,
    })
}

/// Opens an existing output file for appending: `O_WRONLY|O_APPEND|O_NOFOLLOW`.
pub fn open_output_append(path: &Path) -> Result<File, OutputError> {
    open_nofollow(path, OFlags::WRONLY | OFlags::APPEND)
}

/// Opens a file to append to, creating it if needed: `O_WRONLY|O_CREAT|O_APPEND|O_NOFOLLOW`,
/// mode `0600` (a log that every run of a task adds to).
pub fn open_append_creating(path: &Path) -> Result<File, OutputError> {
    open_nofollow(path, OFlags::WRONLY | OFlags::CREATE | OFlags::APPEND)
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
    let fd = open_fd(path, OFlags::WRONLY | OFlags::CREATE | OFlags::APPEND)?;
    let stderr = fd
        .try_clone()
        .map_err(|err| OutputError::from_io(path, err))?;
    Ok((Stdio::from(fd), Stdio::from(stderr)))
}

/// Reads a whole state file that someone else may have tampered with, refusing anything but a
/// regular file of at most `max_bytes`.
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
    let fd = open_fd(path, OFlags::RDONLY | OFlags::NONBLOCK)?;
    let stat = rustix::fs::fstat(&fd).map_err(|errno| OutputError::from_errno(path, errno))?;
    let file_type = FileType::from_raw_mode(stat.st_mode);
    if file_type != FileType::RegularFile {
        return Err(OutputError::NotRegularFile {
            path: path.to_path_buf(),
            kind: file_kind(file_type),
        });
    }
    let too_large = || OutputError::TooLarge {
        path: path.to_path_buf(),
        limit: max_bytes,
    };
    let len = u64::try_from(stat.st_size).unwrap_or(0);
    if len > max_bytes {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    File::from(fd)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|err| OutputError::from_io(path, err))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
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
    let unsafe_dir = |problem| OutputError::UnsafeDirectory {
        path: path.to_path_buf(),
        problem,
    };
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let fd = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(errno) => {
            return Err(match path.symlink_metadata() {
                Ok(meta) if meta.file_type().is_symlink() => unsafe_dir(DirectoryProblem::Symlink),
                Ok(meta) if !meta.is_dir() => unsafe_dir(DirectoryProblem::NotADirectory),
                _ => OutputError::from_errno(path, errno),
            });
        }
    };
    let stat = rustix::fs::fstat(&fd).map_err(|errno| OutputError::from_errno(path, errno))?;
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
    Ok(())
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

fn open_nofollow(path: &Path, flags: OFlags) -> Result<File, OutputError> {
    open_fd(path, flags).map(File::from)
}

fn open_fd(path: &Path, flags: OFlags) -> Result<OwnedFd, OutputError> {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    rustix::fs::open(path, flags, Mode::from_raw_mode(OUTPUT_FILE_MODE))
        .map_err(|errno| OutputError::from_errno(path, errno))
}

fn is_symlink(path: &Path) -> bool {
    path.symlink_metadata()
        .is_ok_and(|meta| meta.file_type().is_symlink())
}
