//! State files are untrusted input: anyone who can write the session directory could plant a
//! FIFO (a reader would hang), a symlink (a reader would follow it), a device or a huge file. Every
//! state file is opened `O_NOFOLLOW|O_NONBLOCK`, checked to be a regular file, and read up to a
//! limit; every state directory is checked to be ours and private.

use std::fs::File;
use std::io::{self, ErrorKind, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use rustix::fs::OFlags;

/// The largest state file a reader accepts (a task snapshot, an event, the config).
pub const MAX_STATE_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Reads a whole state file that must be a regular file of at most `max_bytes`, without ever
/// following a symlink or blocking on a FIFO. A file that is not regular or is too large is an
/// [`ErrorKind::InvalidData`] error naming what it is.
pub fn read_file(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    read_file_with_mtime(path, max_bytes).map(|(bytes, _)| bytes)
}

/// [`read_file`], with the file's modification time (ms since the epoch).
pub fn read_file_with_mtime(path: &Path, max_bytes: u64) -> io::Result<(Vec<u8>, u64)> {
    let (mut file, meta) =
        open_regular_with_metadata(path, std::fs::OpenOptions::new().read(true))?;
    let len = meta.len();
    if len > max_bytes {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            format!("{len} bytes, more than a state file may hold ({max_bytes})"),
        ));
    }
    let mtime_ms = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.by_ref().take(max_bytes + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max_bytes {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            "grew past the limit while read",
        ));
    }
    Ok((bytes, mtime_ms))
}

/// Opens `path` with `options` plus `O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC` and checks that it is a
/// regular file (a symlink is `ELOOP`; a FIFO, socket or device an [`ErrorKind::InvalidData`]).
pub fn open_regular(path: &Path, options: &mut std::fs::OpenOptions) -> io::Result<File> {
    open_regular_with_metadata(path, options).map(|(file, _)| file)
}

/// [`open_regular`], with the metadata its check read (one `fstat` for both).
fn open_regular_with_metadata(
    path: &Path,
    options: &mut std::fs::OpenOptions,
) -> io::Result<(File, std::fs::Metadata)> {
    let flags = OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = options.custom_flags(flags.bits() as i32).open(path)?;
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        return Err(io::Error::new(
            ErrorKind::InvalidData,
            format!("not a regular file ({})", describe(kind)),
        ));
    }
    Ok((file, meta))
}

fn describe(kind: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else if kind.is_dir() {
        "a directory"
    } else {
        "not a plain file"
    }
}

/// Checks that `dir` is a real directory (not a symlink) owned by this user and writable by
/// nobody else; `Ok(false)` when it does not exist.
pub fn check_private_dir(dir: &Path) -> io::Result<bool> {
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let refuse = |why: String| Err(io::Error::new(ErrorKind::PermissionDenied, why));
    if meta.file_type().is_symlink() {
        return refuse("it is a symlink".into());
    }
    if !meta.is_dir() {
        return Err(io::Error::new(ErrorKind::NotADirectory, "not a directory"));
    }
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return refuse(format!(
            "it belongs to uid {}, not to this user ({me})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return refuse(format!(
            "other users can write to it (mode {:o}; run chmod 700 on it)",
            meta.mode() & 0o777
        ));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn only_small_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.json");
        std::fs::write(&file, b"{}").unwrap();
        assert_eq!(read_file(&file, 10).unwrap(), b"{}");
        assert_eq!(
            read_file(&file, 1).unwrap_err().kind(),
            ErrorKind::InvalidData
        );

        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(read_file(&link, 10).is_err(), "a symlink is never followed");

        let fifo = dir.path().join("fifo.json");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let err = read_file(&fifo, 10).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        assert!(read_file(Path::new("/dev/zero"), 10).is_err());
    }

    #[test]
    fn shared_or_foreign_directories_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("p");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(check_private_dir(&private).unwrap());
        assert!(!check_private_dir(&dir.path().join("missing")).unwrap());
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(check_private_dir(&private).is_err());
        let link = dir.path().join("l");
        std::os::unix::fs::symlink("/tmp", &link).unwrap();
        assert!(check_private_dir(&link).is_err());
    }
}
