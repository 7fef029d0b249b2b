//! Errors of the shell and monitor executors.

use std::io;
use std::path::PathBuf;

/// Why a shell or monitor operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShellError {
    /// The command line was empty or only whitespace.
    #[error("the command is empty")]
    EmptyCommand,
    /// The working directory does not exist or is not a directory.
    #[error("working directory {} does not exist or is not a directory", path.display())]
    MissingWorkingDir {
        /// The directory asked for.
        path: PathBuf,
    },
    /// The shell could not be started.
    #[error("could not start {}: {source}", shell.display())]
    Spawn {
        /// The shell binary.
        shell: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
}
