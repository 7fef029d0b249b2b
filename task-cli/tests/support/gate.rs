//! A gate the tasks of a burst wait at, so that they end together when a test says.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A FIFO the tasks of a burst wait at, each reading one line from it; the test holds it open
/// for reading and writing (no task's open of it blocks, and one that comes late still finds
/// its line) and lets them all through at once with one write.
pub struct Gate {
    path: PathBuf,
    held: File,
}

impl Gate {
    /// A closed gate in `dir`.
    pub fn new(dir: &Path) -> Self {
        let path = dir.join("gate");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &path,
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let held = File::options().read(true).write(true).open(&path).unwrap();
        Self { path, held }
    }

    /// A shell command that waits at the gate.
    pub fn wait(&self) -> String {
        format!("read -r go < '{}'", self.path.display())
    }

    /// Lets `count` tasks through at once.
    pub fn open(&mut self, count: usize) {
        self.held.write_all(&vec![b'\n'; count]).unwrap();
    }
}
