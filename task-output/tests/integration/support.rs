//! Helpers shared by the integration tests.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use tempfile::TempDir;

/// A temp dir and a not-yet-existing output path inside it.
pub fn output_path() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("task.output");
    (dir, path)
}

/// Writes `content` to a new file `name` in `dir`.
pub fn file_with(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, content).unwrap();
    path
}

/// Runs `check` with filesystem permission checks in force, inside a directory nobody may
/// enter, and passes it a path inside that directory. As root, the check runs on a thread whose
/// own uid is set to `nobody` (which clears its capabilities); other threads are unaffected.
pub fn in_forbidden_dir(check: impl FnOnce(&Path) + Send + 'static) {
    let dir = tempfile::tempdir().unwrap();
    let locked = dir.path().join("locked");
    fs::create_dir(&locked).unwrap();
    fs::write(locked.join("existing.output"), b"data").unwrap();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let inside = locked.join("existing.output");
    let outcome = std::thread::spawn(move || {
        if rustix::process::geteuid().is_root() {
            let nobody = rustix::process::Uid::from_raw(65534);
            rustix::thread::set_thread_res_uid(nobody, nobody, nobody).unwrap();
        }
        check(&inside);
    })
    .join();
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o700)).unwrap();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}
