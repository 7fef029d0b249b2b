//! Bearer token files, read the same way by both ends of the sessions API: the client
//! (`tasks remote`, the remote executor) and the server (`tasks serve`).
//!
//! A token file must be a regular file (never followed through a symlink, never a FIFO that
//! would block the reader) that only its owner may read or write (mode `0600` or stricter), of
//! at most [`MAX_TOKEN_FILE_BYTES`]; the token is its first line, trimmed.

use std::path::{Path, PathBuf};

use crate::OutputError;
use crate::open::NoFollow;

/// The most bytes a token file may hold.
pub const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// Why a token file is refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenFileError {
    /// Its group or others may read or write it.
    #[error(
        "the token file {path} has mode {mode:03o}, open to its group or others: a token file must be readable by its owner only (chmod 600 {path})"
    )]
    OpenToOthers {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It is a symlink, a directory, a FIFO, a device or a socket.
    #[error("the token file {path} is not a regular file")]
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// It is larger than [`MAX_TOKEN_FILE_BYTES`].
    #[error("the token file {path} holds more than {MAX_TOKEN_FILE_BYTES} bytes")]
    TooLarge {
        /// The file.
        path: PathBuf,
    },
    /// Its first line is empty, or it is not UTF-8.
    #[error("the token file {path} holds no token (its first line is empty or not UTF-8)")]
    Empty {
        /// The file.
        path: PathBuf,
    },
    /// It cannot be opened or read.
    #[error("cannot read the token file {path}: {source}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Reads the bearer token in `path`: the first line, trimmed, of a regular file that only its
/// owner may read (checked on the opened file, so the answer is about the file read).
///
/// # Errors
/// [`TokenFileError`]: missing or unreadable, a symlink or not a regular file, open to its
/// group or others, too large, or holding no token.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::os::unix::fs::PermissionsExt;
/// use task_output::token::{TokenFileError, read_token_file};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("token");
/// std::fs::write(&path, "s3cret\n")?;
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
/// assert_eq!(read_token_file(&path)?, "s3cret");
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
/// assert!(matches!(read_token_file(&path), Err(TokenFileError::OpenToOthers { mode: 0o644, .. })));
/// # Ok(()) }
/// ```
pub fn read_token_file(path: &Path) -> Result<String, TokenFileError> {
    let refused = |err: OutputError| match err {
        OutputError::SymlinkRefused { .. } | OutputError::NotRegularFile { .. } => {
            TokenFileError::NotRegular {
                path: path.to_owned(),
            }
        }
        OutputError::TooLarge { .. } => TokenFileError::TooLarge {
            path: path.to_owned(),
        },
        other => TokenFileError::Unreadable {
            path: path.to_owned(),
            source: other.into(),
        },
    };
    let file = NoFollow::read().open_regular(path).map_err(refused)?;
    let mode = file.stat().st_mode & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenFileError::OpenToOthers {
            path: path.to_owned(),
            mode,
        });
    }
    let bytes = file.read_within(MAX_TOKEN_FILE_BYTES).map_err(refused)?;
    let token = std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| text.lines().next())
        .map(str::trim)
        .unwrap_or_default();
    if token.is_empty() {
        return Err(TokenFileError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn only_a_private_regular_file_with_a_first_line_gives_a_token() {
        let dir = tempfile::tempdir().unwrap();
        let good = file(dir.path(), "good", "  tok  \nrest\n", 0o600);
        assert_eq!(read_token_file(&good).unwrap(), "tok");
        let owner_read_only = file(dir.path(), "ro", "tok\n", 0o400);
        assert_eq!(read_token_file(&owner_read_only).unwrap(), "tok");
        for mode in [0o644, 0o640, 0o604, 0o620, 0o602] {
            let shared = file(dir.path(), &format!("m{mode:o}"), "tok\n", mode);
            let error = read_token_file(&shared).unwrap_err();
            assert!(
                matches!(error, TokenFileError::OpenToOthers { mode: m, .. } if m == mode),
                "{error}"
            );
            assert!(error.to_string().contains("chmod 600"), "{error}");
        }
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&good, &link).unwrap();
        assert!(matches!(
            read_token_file(&link),
            Err(TokenFileError::NotRegular { .. })
        ));
        assert!(matches!(
            read_token_file(dir.path()),
            Err(TokenFileError::NotRegular { .. })
        ));
        let empty = file(dir.path(), "empty", "\n", 0o600);
        assert!(matches!(
            read_token_file(&empty),
            Err(TokenFileError::Empty { .. })
        ));
        let huge = file(
            dir.path(),
            "huge",
            &"x".repeat(MAX_TOKEN_FILE_BYTES as usize + 1),
            0o600,
        );
        assert!(matches!(
            read_token_file(&huge),
            Err(TokenFileError::TooLarge { .. })
        ));
        assert!(matches!(
            read_token_file(&dir.path().join("missing")),
            Err(TokenFileError::Unreadable { .. })
        ));
    }
}
