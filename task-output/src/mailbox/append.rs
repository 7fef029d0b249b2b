//! The append: one locked write per message, terminating a killed writer's fragment first.

use std::os::fd::AsFd;
use std::path::Path;

use rustix::fs::FlockOperation;

use super::MailboxError;
use crate::OutputError;
use crate::open::NoFollow;

/// Appends `line` and a newline to `path` under an exclusive `flock`; returns the offset just
/// past it.
pub(super) fn append_line(path: &Path, line: &[u8], sync: bool) -> Result<u64, MailboxError> {
    let io = |errno| OutputError::from_io(path, std::io::Error::from(errno));
    let fd = NoFollow::read_write().append().create().open(path)?;
    // Released when `fd` closes, also if this process is killed.
    rustix::fs::flock(&fd, FlockOperation::LockExclusive).map_err(io)?;
    let len = rustix::fs::fstat(&fd).map_err(io)?.st_size;
    let len = u64::try_from(len).unwrap_or(0);
    let mut bytes = Vec::with_capacity(line.len() + 2);
    if len > 0 && !ends_with_newline(&fd, len).map_err(io)? {
        // A writer died mid-append: its fragment becomes a line of its own.
        tracing::warn!(path = %path.display(), "terminating a torn mailbox line");
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(line);
    bytes.push(b'\n');
    write_all(&fd, &bytes).map_err(io)?;
    if sync {
        rustix::fs::fdatasync(&fd).map_err(io)?;
    }
    Ok(len + bytes.len() as u64)
}

fn ends_with_newline(fd: impl AsFd, len: u64) -> rustix::io::Result<bool> {
    let mut last = [0u8; 1];
    let read = rustix::io::pread(fd, &mut last, len - 1)?;
    Ok(read == 1 && last[0] == b'\n')
}

fn write_all(fd: impl AsFd, mut bytes: &[u8]) -> rustix::io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::write(&fd, bytes) {
            Ok(0) => return Err(rustix::io::Errno::NOSPC),
            Ok(n) => bytes = &bytes[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(errno),
        }
    }
    Ok(())
}
