//! Opening output files without ever following a symlink.
//!
//! Every function here passes `O_NOFOLLOW`, so a symlink planted at an output path makes the open
//! fail with [`OutputError::SymlinkRefused`] and nothing is written through it. Files are created
//! with mode `0600` and all descriptors are close-on-exec (a child gets the output file only
//! through [`child_stdio`], which `std::process::Command` installs as its fds 1 and 2).

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;

use rustix::fs::{Mode, OFlags};

use crate::OutputError;

/// The permission bits of every file this module creates: read and write for the owner only.
pub const OUTPUT_FILE_MODE: u32 = 0o600;

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
