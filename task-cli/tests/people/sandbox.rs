//! A temporary `TASKS_ROOT` and the `tasks` binary run in it.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// One test's state root; every process that carries it is killed on drop.
pub struct Sandbox {
    root: tempfile::TempDir,
}

impl Sandbox {
    pub fn new() -> Self {
        Self {
            root: tempfile::tempdir().unwrap(),
        }
    }

    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// `tasks ARGS` with this root, short supervisor timings and a closed stdin.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tasks"));
        command
            .args(args)
            .env("TASKS_ROOT", self.root())
            .env("TASKS_IDLE_EXIT_MS", "3000")
            .env("TASKS_POLL_MS", "10")
            .env("TASKS_SWEEP_MS", "50")
            .env_remove("TASKS_SESSION")
            .env_remove("TASKS_LIST_ID")
            .env_remove("TASKS_LIST_ROOT")
            .env_remove("NO_COLOR")
            .stdin(Stdio::null());
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let output = self.run(args);
        assert!(
            output.status.success(),
            "tasks {args:?} failed: {:?}\nstderr: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut full = args.to_vec();
        full.push("--json");
        serde_json::from_str(&self.ok(&full)).unwrap()
    }

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

impl Drop for Sandbox {
    fn drop(&mut self) {
        super::support::kill_processes_of(self.root());
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
