//! Bearer tokens of the sessions server: created in a file of mode `0600`, read back only from such a
//! file, and compared in constant time.

use std::io::Write;
use std::path::Path;

use subtle::ConstantTimeEq;

use crate::ServeError;

type Result<T> = std::result::Result<T, ServeError>;

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
    getrandom::fill(&mut random).map_err(|e| ServeError::NoRandomness(e.to_string()))?;
    let token: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let mut file = task_output::open::create_output_file(path)
        .map_err(|e| task_session::Error::io("create", path, e.into()))?;
    file.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| task_session::Error::io("write", path, e))?;
    Ok(token)
}

/// Reads the token in `path` with the client's own check
/// ([`task_output::token::read_token_file`]): a regular file, not a symlink, readable by its owner
/// only; refused with the same words on both ends.
///
/// # Errors
/// Missing, unreadable, open to others, too large, or empty.
pub fn read(path: &Path) -> Result<Token> {
    task_output::token::read_token_file(path)
        .map(|token| Token(token.into_bytes()))
        .map_err(ServeError::from)
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
        let refused = read(&path).unwrap_err().to_string();
        assert!(refused.contains("readable by its owner only"), "{refused}");
    }
}
