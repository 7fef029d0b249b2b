//! Bearer tokens of `tasks serve`: created in a file of mode `0600`, read back only from such a
//! file, and compared in constant time.

use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use subtle::ConstantTimeEq;

use crate::error::{CliError, Result};

/// The most bytes a token file may hold.
const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;
/// Random bytes in a new token (256 bits).
const TOKEN_BYTES: usize = 32;

/// A bearer token held in memory.
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(…)")
    }
}

impl Token {
    /// Whether `presented` is this token, in time independent of where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        self.0.ct_eq(presented).into()
    }
}

/// Writes a new random token to `path` (which must not exist), mode `0600`; returns it.
///
/// # Errors
/// The file exists, or cannot be written; no entropy.
pub fn init(path: &Path) -> Result<String> {
    let mut random = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut random)
        .map_err(|e| CliError::invalid(format!("no randomness for a token: {e}")))?;
    let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(path)
        .map_err(|e| CliError::io("create", path, e))?;
    file.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| CliError::io("write", path, e))?;
    Ok(token)
}

/// Reads the token in `path`: a regular file, not a symlink, readable by its owner only.
///
/// # Errors
/// Missing, unreadable, open to others, or empty.
pub fn read(path: &Path) -> Result<Token> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| CliError::io("read", path, e))?;
    if meta.mode() & 0o077 != 0 {
        return Err(task_session::Error::UnsafeState {
            path: path.to_owned(),
            reason: format!(
                "a token file must be readable by its owner only (mode {:o}; chmod 600 it)",
                meta.mode() & 0o777
            ),
        }
        .into());
    }
    let bytes = task_session::untrusted::read_file(path, MAX_TOKEN_FILE_BYTES)
        .map_err(|e| CliError::io("read", path, e))?;
    let text = String::from_utf8_lossy(&bytes);
    let token = text.lines().next().unwrap_or_default().trim();
    if token.is_empty() {
        return Err(CliError::invalid(format!(
            "the token file {} is empty",
            path.display()
        )));
    }
    Ok(Token(token.as_bytes().to_vec()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_new_token_is_private_and_reads_back_and_a_shared_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        let token = init(&path).unwrap();
        assert_eq!(token.len(), 64);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let read_back = read(&path).unwrap();
        assert!(read_back.matches(token.as_bytes()));
        assert!(!read_back.matches(b"wrong"));
        assert!(init(&path).is_err(), "never overwritten");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read(&path).is_err());
    }
}
