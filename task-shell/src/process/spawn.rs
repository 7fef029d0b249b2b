//! Starting a shell command the way SPEC §5 asks: own process group, output straight to a file,
//! stdin closed, `GIT_EDITOR=true`, and (on Linux) death with the supervisor. The shell is also
//! made a child subreaper and tagged with the task's marker (see the `contain` module), so that
//! nothing it starts can escape a kill.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;

use task_core::process::{Child, Group, Spawn, Stdio};

use super::script::attach_command;
use super::{ChildSetup, TASK_MARKER_ENV};
use crate::error::ShellError;

/// The shell used when the caller names none.
pub const DEFAULT_SHELL: &str = "/bin/sh";

pub use task_core::{EXIT_KILLED, EXIT_SPAWN_FAILED, EXIT_TIMED_OUT};

pub use task_protocol::start::StdinMode;

/// A validated shell command line and how to run it.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    command: String,
    shell: PathBuf,
    cwd: Option<PathBuf>,
    /// The environment given whole ([`CommandSpec::environment`]), shared between commands
    /// given the same one.
    base_env: Arc<[(OsString, OsString)]>,
    /// Variables added to it ([`CommandSpec::env`]).
    env: Vec<(OsString, OsString)>,
    clear_env: bool,
    stdin: StdinMode,
    die_with_parent: bool,
    marker: Option<String>,
}

impl CommandSpec {
    /// A command line run as `/bin/sh -c {command}`.
    ///
    /// # Errors
    /// [`ShellError::EmptyCommand`] when `command` is empty or only whitespace.
    pub fn new(command: impl Into<String>) -> Result<Self, ShellError> {
        let command = command.into();
        if command.trim().is_empty() {
            return Err(ShellError::EmptyCommand);
        }
        Ok(Self {
            command,
            shell: PathBuf::from(DEFAULT_SHELL),
            cwd: None,
            base_env: Arc::new([]),
            env: Vec::new(),
            clear_env: false,
            stdin: StdinMode::Null,
            die_with_parent: true,
            marker: None,
        })
    }

    /// Runs the command in exactly this environment (the caller's whole environment, say)
    /// instead of the one inherited from this process; [`env`](Self::env) still adds to it.
    #[must_use]
    pub fn environment(self, env: impl IntoIterator<Item = (OsString, OsString)>) -> Self {
        self.shared_environment(env.into_iter().collect())
    }

    /// [`environment`](Self::environment) with an environment shared with other commands (many
    /// tasks of one caller waiting in a queue hold one copy of its environment, not one each).
    #[must_use]
    pub fn shared_environment(mut self, env: Arc<[(OsString, OsString)]>) -> Self {
        self.base_env = env;
        self.clear_env = true;
        self
    }

    /// Runs the command with another POSIX shell (it must accept `-c`), such as the user's `$SHELL`.
    #[must_use]
    pub fn shell(mut self, shell: impl Into<PathBuf>) -> Self {
        self.shell = shell.into();
        self
    }

    /// Runs the command in `dir`, which must exist when the task is spawned.
    #[must_use]
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// Adds one environment variable to the inherited environment.
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Chooses what stdin is.
    #[must_use]
    pub fn stdin(mut self, stdin: StdinMode) -> Self {
        self.stdin = stdin;
        self
    }

    /// Lets the command outlive a crashed supervisor (Linux `PR_SET_PDEATHSIG` is not set).
    #[must_use]
    pub fn detached(mut self) -> Self {
        self.die_with_parent = false;
        self
    }

    /// Tags every process of the command with `TASKS_TASK_ID={marker}` in its environment
    /// ([`TASK_MARKER_ENV`]), overriding any inherited value, so a kill can find the ones that
    /// left the process tree. The executors set the task id.
    #[must_use]
    pub fn task_marker(mut self, marker: impl Into<String>) -> Self {
        self.marker = Some(marker.into());
        self
    }

    /// The marker set with [`task_marker`](Self::task_marker).
    pub fn marker(&self) -> Option<&str> {
        self.marker.as_deref()
    }

    /// The command line as given.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The stdin mode.
    pub fn stdin_mode(&self) -> StdinMode {
        self.stdin
    }

    /// Checks what can be checked before spawning, so errors are specific.
    ///
    /// # Errors
    /// [`ShellError::MissingWorkingDir`] when the working directory is not a directory.
    pub fn validate(&self) -> Result<(), ShellError> {
        match &self.cwd {
            Some(dir) if !dir.is_dir() => Err(ShellError::MissingWorkingDir { path: dir.clone() }),
            _ => Ok(()),
        }
    }

    /// Starts the command in a new process group with `stdout` and `stderr` as its output,
    /// without copying this process ([`Spawn`]).
    ///
    /// Call this from a tokio worker thread or another long-lived thread, never from
    /// `spawn_blocking`: Linux delivers the parent-death signal when the *thread* that started the
    /// child exits, and blocking-pool threads exit after a short idle time.
    ///
    /// # Errors
    /// [`ShellError::MissingWorkingDir`] or [`ShellError::Spawn`].
    pub fn spawn(&self, stdout: Stdio, stderr: Stdio) -> Result<Child, ShellError> {
        self.validate()?;
        let spawn_error = |source| ShellError::Spawn {
            shell: self.shell.clone(),
            source,
        };
        let mut cmd = Spawn::new(&self.shell);
        if self.clear_env {
            cmd = cmd.env_clear();
        }
        cmd = attach_command(cmd, &self.command).map_err(spawn_error)?;
        cmd = cmd
            .env("GIT_EDITOR", "true")
            .envs(self.base_env.iter().chain(&self.env).cloned())
            .stdin(match self.stdin {
                StdinMode::Null => Stdio::Null,
                StdinMode::Piped => Stdio::Piped,
            })
            .stdout(stdout)
            .stderr(stderr)
            .group(Group::Lead)
            .setup(ChildSetup {
                die_with_parent: self.die_with_parent,
                hold_orphans: true,
            });
        if let Some(dir) = &self.cwd {
            cmd = cmd.current_dir(dir);
        }
        if let Some(marker) = &self.marker {
            cmd = cmd.env(TASK_MARKER_ENV, marker);
        }
        cmd.spawn().map_err(spawn_error)
    }

    /// The environment the command gets: exactly the one given with
    /// [`environment`](Self::environment) (and [`env`](Self::env)), or this process's with
    /// [`env`](Self::env)'s variables added. Without the task marker (which only a local
    /// spawn adds).
    pub fn environment_pairs(&self) -> Vec<(OsString, OsString)> {
        let base: Vec<(OsString, OsString)> = if self.clear_env {
            Vec::new()
        } else {
            std::env::vars_os().collect()
        };
        base.into_iter()
            .chain(self.base_env.iter().cloned())
            .chain(self.env.iter().cloned())
            .collect()
    }

    /// The working directory, if one was set.
    pub fn working_dir(&self) -> Option<&Path> {
        self.cwd.as_deref()
    }
}

/// The exit code a finished process reports: its own code, or 128 + the signal that killed it.
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|signal| 128 + signal))
        .unwrap_or(EXIT_SPAWN_FAILED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_commands_are_rejected() {
        assert!(matches!(
            CommandSpec::new(""),
            Err(ShellError::EmptyCommand)
        ));
        assert!(matches!(
            CommandSpec::new(" \n\t"),
            Err(ShellError::EmptyCommand)
        ));
    }

    #[test]
    fn a_missing_working_dir_is_named() {
        let spec = CommandSpec::new("true").map(|s| s.current_dir("/definitely/not/here"));
        match spec.and_then(|s| s.validate()) {
            Err(ShellError::MissingWorkingDir { path }) => {
                assert_eq!(path, PathBuf::from("/definitely/not/here"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn exit_codes_include_signals() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
    }
}
