//! A private scratch directory per thread, for targets that read files.
//!
//! libFuzzer runs a target on one thread; `cargo test` runs several targets at once, each on
//! its own thread, so each thread gets its own directory. Set `TMPDIR=/dev/shm` for long runs
//! (the run script does) so that file-reading targets never touch a disk.

use std::cell::OnceCell;
use std::path::{Path, PathBuf};

thread_local! {
    static DIR: OnceCell<tempfile::TempDir> = const { OnceCell::new() };
}

/// This thread's scratch directory (created on first use, private, removed when the thread
/// ends).
pub fn dir() -> PathBuf {
    DIR.with(|cell| {
        cell.get_or_init(|| {
            tempfile::Builder::new()
                .prefix("tasks-fuzz-")
                .tempdir()
                .expect("a scratch directory")
        })
        .path()
        .to_owned()
    })
}

/// `sub` of this thread's scratch directory, emptied (created if missing).
pub fn fresh(sub: &str) -> PathBuf {
    let path = dir().join(sub);
    let _ = std::fs::remove_dir_all(&path);
    create_private_dir(&path);
    path
}

/// Creates `path` and its parents, mode 0700.
pub fn create_private_dir(path: &Path) {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .expect("a scratch subdirectory");
}

/// Replaces `path` with `bytes` (a new file each time, so a reader never sees a stale stamp).
pub fn write(path: &Path, bytes: &[u8]) {
    let _ = std::fs::remove_file(path);
    std::fs::write(path, bytes).expect("a scratch file");
}
