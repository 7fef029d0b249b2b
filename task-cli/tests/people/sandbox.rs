//! A temporary `TASKS_ROOT` and the `tasks` binary run in it.

use std::path::Path;
use std::process::Command;

/// One test's state root: the shared [`TasksRoot`] as it is (`new`, `root`, `command`, `run`,
/// `ok`, `json`), with what this suite adds below.
pub use crate::support::root::TasksRoot as Sandbox;

impl Sandbox {
    /// `tasks ARGS` (shell words) on a pseudo-terminal (util-linux `script`), with `NO_COLOR`
    /// set or not; what it printed.
    pub fn on_terminal(&self, args: &str, no_color: bool) -> String {
        let probe = self.command(&[]);
        let mut command = Command::new("script");
        command
            .args([
                "-qec",
                &format!("{} {args}", env!("CARGO_BIN_EXE_tasks")),
                "/dev/null",
            ])
            .envs(probe.get_envs().filter_map(|(k, v)| Some((k, v?))));
        if no_color {
            command.env("NO_COLOR", "1");
        }
        String::from_utf8(command.output().unwrap().stdout).unwrap()
    }

    /// What `tasks completions bash` offers for the command line `words` (bash words) with the
    /// cursor on word `index`, called as bash calls it (command, current word, previous word),
    /// with the built binary on `PATH`.
    pub fn complete_bash(&self, words: &str, index: usize) -> String {
        let script = self.root().join("tasks.bash");
        std::fs::write(&script, self.ok(&["completions", "bash"])).unwrap();
        let bin_dir = Path::new(env!("CARGO_BIN_EXE_tasks")).parent().unwrap();
        let program = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={index}; _tasks_dynamic tasks \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        );
        let command = self.command(&[]);
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
        let output = Command::new("bash")
            .args(["-c", &program])
            .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .env("PATH", path)
            .output()
            .unwrap();
        String::from_utf8(output.stdout).unwrap()
    }

    /// Starts `command` in the background; returns its id.
    pub fn start(&self, command: &str) -> String {
        self.ok(&["run", "--", command]).trim().to_owned()
    }

    /// The status of every task listed by `ps --all`, by id.
    pub fn statuses(&self) -> Vec<(String, String)> {
        let all = self.json(&["ps", "--all"]);
        all.as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let field = |k: &str| t[k].as_str().unwrap().to_owned();
                (field("id"), field("status"))
            })
            .collect()
    }
}

/// The lines `child` prints on stdout, as they come (read on a thread of their own).
pub fn stdout_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            if lines.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    received
}
