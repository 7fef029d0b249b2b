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
            | Self::Io { path, .. } => path,
        }
    }

    pub(crate) fn from_errno(path: &Path, errno: Errno) -> Self {
        Self::from_io(path, io::Error::from(errno))
    }
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
