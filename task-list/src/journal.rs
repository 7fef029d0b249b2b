//! The journal of a multi-file transaction: every new file's contents, written before any of
//! them replaces a task file, so that a writer killed half way is finished by the next one.
//!
//! A journal is created under its final name, `.journal.{nonce}`, and flushed together with
//! the directory and the transaction's new files (one round of concurrent fsyncs instead of a
//! write, an fsync, a rename and a directory fsync in a row). So a crash can leave a journal
//! whose directory entry reached the disk but whose contents did not: torn, zeros, or blocks
//! of an older file. Its first line therefore names the nonce of its file name, the payload's
//! length and its SHA-256; a journal that does not match all three was never committed (its
//! writer had not answered yet) and is discarded. The previous layout, a complete `.journal`
//! renamed into place, is still replayed.

use std::fs::File;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{Error, IoContext, Result};
use crate::fsutil;

/// The journal of the previous layout (complete when present).
pub(crate) const LEGACY_JOURNAL_FILE: &str = ".journal";

/// The prefix of a journal's file name; the nonce follows.
const JOURNAL_PREFIX: &str = ".journal.";

/// One file change: new contents, or removal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FileChange {
    /// The file's name in the list directory.
    pub(crate) name: String,
    /// Its new contents; `None`: removed.
    pub(crate) contents: Option<String>,
}

/// The first line of a journal.
#[derive(Debug, Serialize, Deserialize)]
struct Header {
    nonce: String,
    length: usize,
    sha256: String,
}

/// Whether `name` is a journal's file name (either layout).
pub(crate) fn is_journal(name: &str) -> bool {
    name == LEGACY_JOURNAL_FILE
        || name
            .strip_prefix(JOURNAL_PREFIX)
            .is_some_and(|nonce| !nonce.is_empty() && !nonce.contains(".tmp."))
}

/// Creates the journal of `changes` in `dir` (written, not yet flushed): the open file and its
/// path.
pub(crate) fn create(dir: &Path, changes: &[FileChange]) -> Result<(File, PathBuf)> {
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .at("getrandom", dir)?;
    let nonce = hex(&nonce);
    let payload = serde_json::to_vec(changes)
        .map_err(std::io::Error::from)
        .at("encode", dir)?;
    let header = Header {
        nonce: nonce.clone(),
        length: payload.len(),
        sha256: hex(&Sha256::digest(&payload)),
    };
    let mut bytes = serde_json::to_vec(&header)
        .map_err(std::io::Error::from)
        .at("encode", dir)?;
    bytes.push(b'\n');
    bytes.extend_from_slice(&payload);
    let path = dir.join(format!("{JOURNAL_PREFIX}{nonce}"));
    let file = fsutil::create_new(&path, &bytes)?;
    Ok((file, path))
}

/// What a journal file holds.
#[derive(Debug)]
pub(crate) enum Found {
    /// A committed journal: its changes are to be applied.
    Committed(Vec<FileChange>),
    /// A journal whose writer died before it was complete on disk: to be discarded.
    Torn(String),
}

/// Reads the journal `name` in `dir`. A legacy journal that does not parse, which only
/// something else can have written, is [`Error::Corrupt`].
pub(crate) fn read(dir: &Path, name: &str) -> Result<Option<Found>> {
    let path = dir.join(name);
    let Some(bytes) = fsutil::read_optional(&path)? else {
        return Ok(None);
    };
    if name == LEGACY_JOURNAL_FILE {
        return serde_json::from_slice(&bytes)
            .map(|changes| Some(Found::Committed(changes)))
            .map_err(|e| Error::Corrupt {
                path,
                message: e.to_string(),
            });
    }
    let nonce = name.strip_prefix(JOURNAL_PREFIX).unwrap_or_default();
    Ok(Some(match verify(&bytes, nonce) {
        Ok(changes) => Found::Committed(changes),
        Err(why) => Found::Torn(why),
    }))
}

/// The changes of a journal whose header matches its name and its payload.
fn verify(bytes: &[u8], nonce: &str) -> std::result::Result<Vec<FileChange>, String> {
    let split = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or("no header line")?;
    let (header, payload) = (&bytes[..split], &bytes[split + 1..]);
    let header: Header = serde_json::from_slice(header).map_err(|e| format!("header: {e}"))?;
    if header.nonce != nonce {
        return Err("the header names another journal".into());
    }
    if header.length != payload.len() {
        return Err(format!(
            "{} of {} payload bytes",
            payload.len(),
            header.length
        ));
    }
    if header.sha256 != hex(&Sha256::digest(payload)) {
        return Err("checksum mismatch".into());
    }
    serde_json::from_slice(payload).map_err(|e| format!("payload: {e}"))
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The journals in `dir`, by name.
pub(crate) fn find(dir: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).at("list", dir)? {
        let name = entry.at("list", dir)?.file_name();
        if let Some(name) = name.to_str().filter(|n| is_journal(n)) {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn changes() -> Vec<FileChange> {
        vec![
            FileChange {
                name: "1.json".into(),
                contents: Some("{\"id\":\"1\"}".into()),
            },
            FileChange {
                name: "2.json".into(),
                contents: None,
            },
        ]
    }

    #[test]
    fn a_complete_journal_is_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = create(dir.path(), &changes()).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(is_journal(name));
        assert_eq!(find(dir.path()).unwrap(), [name]);
        match read(dir.path(), name).unwrap() {
            Some(Found::Committed(found)) => assert_eq!(found, changes()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_torn_zeroed_or_foreign_journal_is_not_committed() {
        let dir = tempfile::tempdir().unwrap();
        let (_, path) = create(dir.path(), &changes()).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let good = std::fs::read(&path).unwrap();
        let (_, other) = create(dir.path(), &changes()).unwrap();
        let foreign = std::fs::read(&other).unwrap();
        let mut flipped = good.clone();
        let last = flipped.len() - 2;
        flipped[last] ^= 1;
        for bytes in [
            good[..good.len() - 1].to_vec(),
            vec![0; good.len()],
            foreign,
            flipped,
            Vec::new(),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            assert!(
                matches!(read(dir.path(), &name).unwrap(), Some(Found::Torn(_))),
                "{:?}",
                String::from_utf8_lossy(&bytes)
            );
        }
    }

    #[test]
    fn temp_files_are_not_journals() {
        assert!(is_journal(".journal"));
        assert!(!is_journal(".journal."));
        assert!(!is_journal(".journal.x.tmp.1.2"));
        assert!(!is_journal("1.json"));
    }
}
