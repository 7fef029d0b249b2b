//! Who asks for a task and from where ([`Caller`]), and the environment variables that carry
//! a task's identity to its processes.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::TaskId;

/// The environment variable naming the agent on whose behalf a process runs: set on an agent's
/// CLI and inherited by every process it starts (a `tasks` command or MCP server among them),
/// whose tasks are then owned by that agent ([`Caller::agent_id`]).
pub const AGENT_ID_ENV: &str = "TASKS_AGENT_ID";

/// The environment variable naming the task a process belongs to, set on every task's process.
pub const TASK_MARKER_ENV: &str = "TASKS_TASK_ID";

/// Whether `path` is an executable regular file (`None`: nothing there).
fn executable(path: &std::path::Path) -> Option<bool> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).ok()?;
    Some(meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Who asks for a task, and from where: the task runs as if started from the caller's shell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Caller {
    /// The caller's working directory (it must exist: a task never silently runs elsewhere).
    pub cwd: PathBuf,
    /// The caller's whole environment, in order.
    /// Each name and value is a string, or `{"bytes": [..]}` when it is not UTF-8.
    #[serde(with = "os_pairs")]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<(String, String)>"))]
    pub env: Vec<(OsString, OsString)>,
    /// The agent on whose behalf the task runs (it is killed when that agent ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<TaskId>,
    /// The tool call that asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Whether its end is notified (a background task); `false` for a foreground task whose
    /// caller waits for the result itself.
    pub background: bool,
    /// The id the task must get instead of a new one: a queued task registered again, under
    /// the id its caller already holds, by the supervisor that succeeded the one it queued
    /// under. Launchers that cannot honour it make a new id, and the host then refuses the task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
}

/// Why a program cannot be run as a caller would run it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgramError {
    /// No such file, in the caller's directory (a path) or on its `PATH` (a bare name).
    #[error("{program}: No such file or directory")]
    NotFound {
        /// The program as given.
        program: String,
    },
    /// Found, but not an executable regular file.
    #[error("{program}: Permission denied (not an executable file)")]
    NotExecutable {
        /// The program as given.
        program: String,
    },
}

/// The `PATH` searched when the caller's environment has none (as `execvp` does).
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

impl Caller {
    /// The file `program` names as the caller's shell would run it: a name with a `/` relative
    /// to the caller's directory, a bare name searched on the caller's `PATH`. Checked before a
    /// task is registered, so a program that cannot run refuses the start instead of making a
    /// task that fails at once.
    ///
    /// # Errors
    /// No such file, or no executable one.
    pub fn find_program(&self, program: &str) -> Result<PathBuf, ProgramError> {
        let not_found = || ProgramError::NotFound {
            program: program.to_owned(),
        };
        if program.is_empty() {
            return Err(not_found());
        }
        if program.contains('/') {
            let path = self.cwd.join(program);
            return match executable(&path) {
                Some(true) => Ok(path),
                Some(false) => Err(ProgramError::NotExecutable {
                    program: program.to_owned(),
                }),
                None => Err(not_found()),
            };
        }
        let path = self
            .env
            .iter()
            .rev()
            .find(|(name, _)| name == "PATH")
            .map_or_else(|| OsString::from(DEFAULT_PATH), |(_, value)| value.clone());
        std::env::split_paths(&path)
            .map(|dir| self.cwd.join(dir).join(program))
            .find(|candidate| executable(candidate) == Some(true))
            .ok_or_else(not_found)
    }

    /// The calling process itself: its working directory and environment, in the background.
    ///
    /// # Errors
    /// The working directory cannot be determined (it was deleted, or is not accessible).
    pub fn current() -> std::io::Result<Self> {
        Ok(Caller {
            cwd: std::env::current_dir()?,
            env: std::env::vars_os().collect(),
            agent_id: None,
            tool_use_id: None,
            background: true,
            task_id: None,
        })
    }
}

/// `(OsString, OsString)` pairs as JSON: each side a string when it is UTF-8 (the usual case),
/// else `{"bytes": [..]}`, so no environment is ever altered on the way.
mod os_pairs {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum OsText {
        Text(String),
        Bytes { bytes: Vec<u8> },
    }

    fn encode(text: &OsString) -> OsText {
        match text.to_str() {
            Some(text) => OsText::Text(text.to_owned()),
            None => OsText::Bytes {
                bytes: text.as_bytes().to_vec(),
            },
        }
    }

    fn decode(text: OsText) -> OsString {
        match text {
            OsText::Text(text) => text.into(),
            OsText::Bytes { bytes } => OsString::from_vec(bytes),
        }
    }

    pub(super) fn serialize<S: Serializer>(
        pairs: &[(OsString, OsString)],
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(pairs.iter().map(|(k, v)| (encode(k), encode(v))))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<(OsString, OsString)>, D::Error> {
        let pairs = Vec::<(OsText, OsText)>::deserialize(deserializer)?;
        Ok(pairs
            .into_iter()
            .map(|(k, v)| (decode(k), decode(v)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::os::unix::ffi::OsStringExt;

    use super::*;

    #[test]
    fn environments_cross_json_unaltered_even_when_not_utf8() {
        let caller = Caller {
            cwd: "/work".into(),
            env: vec![
                ("PATH".into(), "/bin".into()),
                ("RAW".into(), OsString::from_vec(vec![0xff, b'x'])),
            ],
            agent_id: Some(TaskId::parse("aagent001").unwrap()),
            tool_use_id: None,
            background: false,
            task_id: None,
        };
        let json = serde_json::to_string(&caller).unwrap();
        assert!(json.contains(r#"["PATH","/bin"]"#), "{json}");
        assert!(json.contains(r#"{"bytes":[255,120]}"#), "{json}");
        assert_eq!(serde_json::from_str::<Caller>(&json).unwrap(), caller);
    }

    #[test]
    fn a_program_is_found_as_the_callers_shell_would_find_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("tool");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(bin.join("data"), "").unwrap();
        let caller = Caller {
            cwd: dir.path().to_path_buf(),
            env: vec![("PATH".into(), "/nonexistent:bin".into())],
            agent_id: None,
            tool_use_id: None,
            background: true,
            task_id: None,
        };
        // On the caller's PATH, a relative entry taken from the caller's directory.
        assert_eq!(caller.find_program("tool").unwrap(), bin.join("tool"));
        assert_eq!(
            caller.find_program("./bin/tool").unwrap(),
            dir.path().join("./bin/tool")
        );
        let missing = caller.find_program("nonexistent-cli").unwrap_err();
        assert_eq!(
            missing.to_string(),
            "nonexistent-cli: No such file or directory"
        );
        // Not executable: skipped on the PATH, refused as a path.
        assert!(matches!(
            caller.find_program("data"),
            Err(ProgramError::NotFound { .. })
        ));
        assert!(matches!(
            caller.find_program("bin/data"),
            Err(ProgramError::NotExecutable { .. })
        ));
        assert!(caller.find_program("").is_err());
        assert!(
            caller.find_program("bin").is_err(),
            "a directory is no program"
        );
    }
}
