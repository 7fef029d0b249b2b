//! The one error type of this crate.

use std::io;
use std::path::{Path, PathBuf};

use rustix::io::Errno;

/// Why an operation on an output file failed. Every variant names the path it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// The file (or a directory leading to it) does not exist.
    #[error("output file not found: {}", path.display())]
    NotFound {
        /// The path that was looked up.
        path: PathBuf,
    },
    /// A read started past the end of the file.
    #[error("offset {offset} is past the end of {} ({len} bytes)", path.display())]
    OffsetPastEnd {
        /// The file that was read.
        path: PathBuf,
        /// The requested start offset.
        offset: u64,
        /// The file's length when it was read.
        len: u64,
    },
    /// The operating system refused access (`EACCES` or `EPERM`).
    #[error("permission denied: {}", path.display())]
    PermissionDenied {
        /// The path that could not be accessed.
        path: PathBuf,
    },
    /// A symlink sits at a path opened for writing (`ELOOP` from `O_NOFOLLOW`). Nothing was
    /// written through it.
    #[error("refusing to follow the symlink at {}", path.display())]
    SymlinkRefused {
        /// The path of the symlink.
        path: PathBuf,
    },
    /// An exclusive create found something already at the path (`EEXIST`).
    #[error("output file already exists: {}", path.display())]
    AlreadyExists {
        /// The path that already exists.
        path: PathBuf,
    },
    /// A file read as untrusted state is not a regular file (a FIFO, a device, a directory...),
    /// so it was not read (see [`crate::open::read_untrusted`]).
    #[error("{} is a {kind}, not a regular file", path.display())]
    NotRegularFile {
        /// The path that was opened.
        path: PathBuf,
        /// What is there instead.
        kind: FileKind,
    },
    /// A file read as untrusted state is larger than the caller's limit, so it was not read.
    #[error("{} is larger than the {limit}-byte limit", path.display())]
    TooLarge {
        /// The path that was opened.
        path: PathBuf,
        /// Its size when it was looked at, or the bytes read when it grew past the limit.
        size: u64,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A directory meant to be private is not (see [`crate::open::ensure_private_dir`]).
    #[error("refusing to use {} as a private directory: {problem}", path.display())]
    UnsafeDirectory {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        problem: DirectoryProblem,
    },
    /// Any other I/O failure.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// The path being worked on.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

impl OutputError {
    /// Classifies an I/O error that happened while working on `path`.
    pub fn from_io(path: &Path, source: io::Error) -> Self {
        let path = path.to_path_buf();
        match source.raw_os_error().map(Errno::from_raw_os_error) {
            Some(Errno::LOOP) => Self::SymlinkRefused { path },
            Some(Errno::EXIST) => Self::AlreadyExists { path },
            Some(Errno::NOENT) => Self::NotFound { path },
            Some(Errno::ACCESS | Errno::PERM) => Self::PermissionDenied { path },
            _ => Self::Io { path, source },
        }
    }

    /// The path this error concerns.
    pub fn path(&self) -> &Path {
        match self {
            Self::NotFound { path }
            | Self::OffsetPastEnd { path, .. }
            | Self::PermissionDenied { path }
            | Self::SymlinkRefused { path }
            | Self::AlreadyExists { path }
            | Self::NotRegularFile { path, .. }
            | Self::TooLarge { path, .. }
            | Self::UnsafeDirectory { path, .. }
            | Self::Io { path, .. } => path,
        }
    }

    pub(crate) fn from_errno(path: &Path, errno: Errno) -> Self {
        Self::from_io(path, io::Error::from(errno))
    }
}

/// For callers that speak [`io::Error`] (and name the path themselves): the system's own error
/// where there was one (`ENOENT`, `EEXIST`, `EACCES`, `ELOOP` for a symlink refused, the
/// underlying error of [`OutputError::Io`]); a file that is not regular or too large, or
/// anything else, is [`io::ErrorKind::InvalidData`] with this error's words.
impl From<OutputError> for io::Error {
    fn from(err: OutputError) -> Self {
        let errno = match err {
            OutputError::Io { source, .. } => return source,
            OutputError::NotFound { .. } => Errno::NOENT,
            OutputError::AlreadyExists { .. } => Errno::EXIST,
            OutputError::PermissionDenied { .. } => Errno::ACCESS,
            OutputError::SymlinkRefused { .. } => Errno::LOOP,
            other => return io::Error::new(io::ErrorKind::InvalidData, other),
        };
        io::Error::from(errno)
    }
}

/// What a path names when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// A directory.
    Directory,
    /// A named pipe: reading it could block forever.
    Fifo,
    /// A character device, such as `/dev/null` or a terminal.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A Unix socket.
    Socket,
    /// A symbolic link.
    Symlink,
    /// Anything else the system reports.
    Other,
}

impl std::fmt::Display for FileKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Directory => "directory",
            Self::Fifo => "FIFO",
            Self::CharDevice => "character device",
            Self::BlockDevice => "block device",
            Self::Socket => "socket",
            Self::Symlink => "symbolic link",
            Self::Other => "special file",
        })
    }
}

/// Why a directory is not private enough to keep state in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DirectoryProblem {
    /// The path is a symbolic link (which could point anywhere, such as a world-writable place).
    #[error("it is a symbolic link")]
    Symlink,
    /// The path exists and is not a directory.
    #[error("it is not a directory")]
    NotADirectory,
    /// The directory belongs to another user.
    #[error("it is owned by uid {owner}, not by uid {me}")]
    OwnedByOther {
        /// Its owner.
        owner: u32,
        /// The effective uid of this process.
        me: u32,
    },
    /// Its group or others may create and delete files in it.
    #[error("its mode {mode:04o} lets group or others write to it")]
    WritableByOthers {
        /// Its permission bits.
        mode: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_values_map_to_their_variants() {
        let path = Path::new("/x");
        let cases = [
            (Errno::LOOP, "SymlinkRefused"),
            (Errno::EXIST, "AlreadyExists"),
            (Errno::NOENT, "NotFound"),
            (Errno::ACCESS, "PermissionDenied"),
            (Errno::PERM, "PermissionDenied"),
            (Errno::IO, "Io"),
        ];
        for (errno, expected) in cases {
            let err = OutputError::from_errno(path, errno);
            assert!(
                format!("{err:?}").starts_with(expected),
                "{errno:?} gave {err:?}"
            );
            assert_eq!(err.path(), path);
        }
    }
}
