//! The files a job's wrapper writes beside its output: the start marker and the exit status.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::job::JobName;
use crate::parse::{StartMarker, parse_exit_status, parse_start_marker};

/// The paths of one job's status files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobFiles {
    /// `NAME.exit`: the command's exit status, written when it ends.
    pub exit: PathBuf,
    /// `NAME.started`: written when the job starts on its node.
    pub started: PathBuf,
}

impl JobFiles {
    /// The status files of job `name` in `dir`.
    pub fn in_dir(dir: &Path, name: &JobName) -> Self {
        Self {
            exit: dir.join(format!("{name}.exit")),
            started: dir.join(format!("{name}.started")),
        }
    }

    /// The exit status the job recorded ([`read_exit_status`] of [`JobFiles::exit`]).
    ///
    /// # Errors
    ///
    /// As [`read_exit_status`].
    pub async fn exit_status(&self) -> Result<RecordedExit> {
        read_exit_status(&self.exit).await
    }

    /// The start marker, `None` while there is none.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] when the file exists but cannot be read.
    pub async fn start_marker(&self) -> Result<Option<StartMarker>> {
        match tokio::fs::read(&self.started).await {
            Ok(bytes) => Ok(Some(parse_start_marker(&String::from_utf8_lossy(&bytes)))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(source) => Err(Error::Io {
                path: self.started.clone(),
                source,
            }),
        }
    }

    /// Whether a job Slurm reports running has shown that it can write here: its start marker
    /// is present, or not yet but it has run for less than `grace`, or not after `grace`, which
    /// means the job's node does not see this directory (the state directory is not shared
    /// with the node) and neither its output nor its exit status will arrive.
    ///
    /// `running_for` is how long the caller has seen the job running (from its own clock:
    /// Slurm's and the node's clocks are not compared).
    ///
    /// # Errors
    ///
    /// As [`JobFiles::start_marker`].
    pub async fn check_started(
        &self,
        running_for: Duration,
        grace: Duration,
    ) -> Result<StartCheck> {
        Ok(match self.start_marker().await? {
            Some(marker) => StartCheck::Started(marker),
            None if running_for < grace => StartCheck::NotYet,
            None => StartCheck::NotShared {
                path: self.started.clone(),
                waited: running_for,
            },
        })
    }
}

/// What [`JobFiles::check_started`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartCheck {
    /// The marker is there.
    Started(StartMarker),
    /// No marker yet, within the grace.
    NotYet,
    /// No marker after the grace: the node does not share the directory.
    NotShared {
        /// The marker's path.
        path: PathBuf,
        /// How long the job had been seen running.
        waited: Duration,
    },
}

/// The exit status a job recorded itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "recorded", rename_all = "snake_case")]
pub enum RecordedExit {
    /// The command's status as `sh` reported it: its exit code, or 128+N when signal N
    /// killed it.
    Code {
        /// The status.
        code: i32,
    },
    /// No status file: the job has not ended, or it ended without its wrapper recording
    /// anything (killed with `SIGKILL`, its node lost, the file removed). Nothing is guessed.
    Unknown,
}

/// Reads a job's exit status file (`NAME.exit`), as its wrapper wrote it: for a job Slurm no
/// longer knows, this is the only record of how it ended.
///
/// # Errors
///
/// [`Error::Io`] when the file exists but cannot be read; [`Error::BadStatusFile`] when it
/// holds anything but one decimal number and a newline (the wrapper renames a complete file
/// into place, so a partial one is not a normal sight).
pub async fn read_exit_status(path: &Path) -> Result<RecordedExit> {
    let bytes = match tokio::fs::read(path).await {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(RecordedExit::Unknown),
        Err(source) => {
            return Err(Error::Io {
                path: path.to_owned(),
                source,
            });
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    match parse_exit_status(&text) {
        Some(code) => Ok(RecordedExit::Code { code }),
        None => Err(Error::BadStatusFile {
            path: path.to_owned(),
            content: text.chars().take(64).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn absent_is_unknown_present_is_the_code_garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let files = JobFiles::in_dir(dir.path(), &JobName::new("t1").unwrap());
        assert_eq!(files.exit_status().await.unwrap(), RecordedExit::Unknown);
        std::fs::write(&files.exit, "3\n").unwrap();
        assert_eq!(
            files.exit_status().await.unwrap(),
            RecordedExit::Code { code: 3 }
        );
        std::fs::write(&files.exit, "3\nx").unwrap();
        assert!(matches!(
            files.exit_status().await,
            Err(Error::BadStatusFile { .. })
        ));
    }

    #[tokio::test]
    async fn a_missing_marker_is_not_yet_then_not_shared() {
        let dir = tempfile::tempdir().unwrap();
        let files = JobFiles::in_dir(dir.path(), &JobName::new("t1").unwrap());
        let grace = Duration::from_secs(10);
        assert_eq!(
            files
                .check_started(Duration::from_secs(1), grace)
                .await
                .unwrap(),
            StartCheck::NotYet
        );
        assert!(matches!(
            files.check_started(grace, grace).await.unwrap(),
            StartCheck::NotShared { .. }
        ));
        std::fs::write(&files.started, "5 vm 77\n").unwrap();
        assert!(matches!(
            files.check_started(grace, grace).await.unwrap(),
            StartCheck::Started(StartMarker { pid: Some(77), .. })
        ));
    }
}
