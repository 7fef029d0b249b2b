//! A real terminal for the tests: a tmux server of the test's own (its socket in the sandbox),
//! one window (80×24 unless asked) running a shell command; keys sent and the screen read back
//! as text.

use std::path::PathBuf;
use std::process::Command;

use super::root::TasksRoot as Sandbox;
use super::{DEADLINE, poll_until};

/// One tmux window; the server is killed on drop.
pub struct Tmux {
    socket: PathBuf,
    /// The sandbox's environment (the server inherits it, so the sandbox kills what it starts).
    envs: Vec<(std::ffi::OsString, std::ffi::OsString)>,
}

impl Tmux {
    /// Starts `shell` (a `sh -c` script) in an 80×24 window; `None` when tmux is not installed
    /// (the test skips; under `CI=true` it fails: `.ci/tmux.sh` installs it).
    pub fn start(sandbox: &Sandbox, shell: &str) -> Option<Self> {
        Self::start_sized(sandbox, shell, (80, 24))
    }

    /// [`Tmux::start`] in a window of `(columns, rows)`.
    pub fn start_sized(
        sandbox: &Sandbox,
        shell: &str,
        (columns, rows): (u16, u16),
    ) -> Option<Self> {
        if !super::tool_installed("tmux", ".ci/tmux.sh") {
            return None;
        }
        let probe = sandbox.command(&[]);
        let envs = probe
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
            .collect();
        let tmux = Self {
            socket: sandbox.root().join("tmux.sock"),
            envs,
        };
        let started = tmux
            .command()
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                &columns.to_string(),
                "-y",
                &rows.to_string(),
            ])
            .args(["-s", "t", "sh", "-c", shell])
            .status()
            .unwrap();
        assert!(started.success(), "tmux could not start");
        Some(tmux)
    }

    fn command(&self) -> Command {
        let mut command = Command::new("tmux");
        command
            .arg("-S")
            .arg(&self.socket)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .env("TERM", "xterm-256color")
            .env_remove("TMUX");
        command
    }

    /// The screen as text, one string per row.
    pub fn screen(&self) -> Vec<String> {
        let output = self
            .command()
            .args(["capture-pane", "-p", "-t", "t"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Sends keys (tmux names: `Down`, `q`, `Escape`).
    pub fn keys(&self, keys: &[&str]) {
        let sent = self
            .command()
            .args(["send-keys", "-t", "t"])
            .args(keys)
            .status()
            .unwrap();
        assert!(sent.success());
    }

    /// Waits until the screen satisfies `test`; returns it (fails showing the last screen).
    pub fn wait_for(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
        let mut last = String::new();
        poll_until(DEADLINE, || {
            last = self.screen().join("\n");
            test(&last).then(|| last.clone())
        })
        .unwrap_or_else(|| panic!("timed out waiting for {what}; the screen:\n{last}"))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.command().arg("kill-server").status();
    }
}
