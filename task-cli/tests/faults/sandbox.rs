//! A session on a temporary root, the `tasks` binary run against it with a bound on every run
//! (a hang is a test failure, never a hung suite), and cleanup by pid of every process that
//! carries the root in its environment.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use crate::support::{eventually, is_alive};

/// How long any one `tasks` command or awaited event may take before the test calls it hung.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The `tasks` binary under test.
pub fn tasks_bin() -> String {
    std::env::var("TASKS_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tasks").to_owned())
}

/// A finished command: its status and both streams as text.
#[derive(Debug)]
pub struct Ran {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    pub fn code(&self) -> i32 {
        self.status.code().unwrap_or(-1)
    }

    /// Asserts a failure whose stderr contains every one of `words`.
    pub fn fails_saying(&self, words: &[&str]) {
        assert!(!self.status.success(), "expected a failure: {self:?}");
        for word in words {
            assert!(
                self.stderr.contains(word),
                "{word:?} not in {:?}",
                self.stderr
            );
        }
        assert!(!self.stderr.contains("panicked"), "{}", self.stderr);
    }
}

/// One temporary state root. Dropping it kills every process started with its root (pass or
/// fail), then removes the files (and unmounts a tmpfs root through its guard).
pub struct Sandbox {
    root: PathBuf,
    env: Vec<(String, String)>,
    _mount: Option<crate::full_disk::Tmpfs>,
    base: tempfile::TempDir,
}

impl Sandbox {
    /// A root under a fresh temporary directory.
    pub fn new() -> Self {
        Self::at(|base| base.join("root"))
    }

    /// A root at `place(base)` for a fresh temporary directory `base`.
    pub fn at(place: impl FnOnce(&Path) -> PathBuf) -> Self {
        let base = tempfile::tempdir().unwrap();
        let root = place(base.path());
        Self::assemble(base, root, None)
    }

    /// A root on a tmpfs of `bytes`, or `None` (after saying why) where none can be mounted.
    pub fn on_tmpfs(bytes: u64) -> Option<Self> {
        let base = tempfile::tempdir().unwrap();
        let mount = crate::full_disk::Tmpfs::mount(&base.path().join("mnt"), bytes)?;
        let root = mount.path().join("root");
        Some(Self::assemble(base, root, Some(mount)))
    }

    fn assemble(
        base: tempfile::TempDir,
        root: PathBuf,
        mount: Option<crate::full_disk::Tmpfs>,
    ) -> Self {
        let env = [
            ("TASKS_IDLE_EXIT_MS", "3000"),
            ("TASKS_POLL_MS", "10"),
            ("TASKS_SWEEP_MS", "50"),
        ];
        Self {
            root,
            env: env.map(|(k, v)| (k.to_owned(), v.to_owned())).to_vec(),
            _mount: mount,
            base,
        }
    }

    /// Sets an environment variable for every later command.
    pub fn set(&mut self, name: &str, value: &str) {
        self.env.retain(|(k, _)| k != name);
        self.env.push((name.to_owned(), value.to_owned()));
    }

    /// A scratch directory outside the root (gates, pid files, symlink targets).
    pub fn scratch(&self) -> &Path {
        self.base.path()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn session_dir(&self) -> PathBuf {
        self.root.join("default")
    }

    pub fn tasks_dir(&self) -> PathBuf {
        self.session_dir().join("tasks")
    }

    /// A `tasks` command with this sandbox's root and settings over the caller's environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(tasks_bin());
        command.args(args);
        self.environment(&mut command);
        command
    }

    /// Gives `command` this sandbox's root and settings (the root also marks the process as
    /// this sandbox's, for cleanup) and a closed stdin.
    pub fn environment(&self, command: &mut Command) {
        command
            .env("TASKS_ROOT", &self.root)
            .env_remove("TASKS_SESSION")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null());
    }

    /// Starts `command` and waits for it to end; returns its id.
    pub fn ended(&self, command: &str) -> String {
        let id = self.start(command);
        self.ok(&["wait", "--no-deliver", &id]);
        id
    }

    /// Runs `tasks args…`; a run that outlasts [`DEADLINE`] is killed and fails the test.
    pub fn run(&self, args: &[&str]) -> Ran {
        bounded(self.command(args), &format!("tasks {args:?}"))
    }

    /// Runs and expects success; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let ran = self.run(args);
        assert!(ran.status.success(), "tasks {args:?} failed: {ran:?}");
        ran.stdout
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut full = args.to_vec();
        full.push("--json");
        serde_json::from_str(&self.ok(&full)).unwrap()
    }

    /// Starts `command` in the background; returns its id.
    pub fn start(&self, command: &str) -> String {
        self.ok(&["run", "--", command]).trim().to_owned()
    }

    /// The record of `id` as `ps --all --json` shows it.
    pub fn task(&self, id: &str) -> Value {
        self.listed()
            .into_iter()
            .find(|t| t["id"] == id)
            .unwrap_or_else(|| panic!("{id} not listed"))
    }

    /// Every task `ps --all --json` lists.
    pub fn listed(&self) -> Vec<Value> {
        self.json(&["ps", "--all"]).as_array().unwrap().clone()
    }

    /// Waits until `id` is running.
    pub fn until_running(&self, id: &str) {
        eventually(&format!("{id} running"), || {
            (self.task(id)["status"] == "running").then_some(())
        });
    }

    /// Waits until no task of the session is running or pending.
    pub fn until_all_ended(&self) {
        let ended = crate::support::poll_until(Duration::from_secs(120), || {
            let listed = self.listed();
            (!listed
                .iter()
                .any(|t| t["status"] == "running" || t["status"] == "pending"))
            .then_some(())
        });
        assert!(ended.is_some(), "the tasks never ended");
    }

    /// The pid in the lock file of the session's supervisor.
    pub fn supervisor_pid(&self) -> i32 {
        let text = std::fs::read_to_string(self.session_dir().join("supervisor.lock")).unwrap();
        text.trim().parse().unwrap()
    }

    /// The supervisor's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.session_dir().join("supervisor.log")).unwrap_or_default()
    }

    /// Kills the session's supervisor by pid and waits until it is gone.
    pub fn kill_supervisor(&self) {
        let pid = self.supervisor_pid();
        signal(pid, rustix::process::Signal::KILL);
        // Gone means its lock is free: a process whose main thread is already a zombie still
        // holds its files until its last thread has left the kernel.
        let lock = self.session_dir().join("supervisor.lock");
        eventually("the supervisor gone", || {
            (!is_alive(pid) && !task_session::lock::is_held(&lock).unwrap()).then_some(())
        });
    }
}

pub use crate::support::Dice;

impl Drop for Sandbox {
    fn drop(&mut self) {
        crate::support::kill_processes_of(&self.root);
    }
}

/// Runs `command` to its end with both streams captured; past [`DEADLINE`] it is killed and
/// the test fails naming `what` as hung.
pub fn bounded(mut command: Command, what: &str) -> Ran {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let status = wait_bounded(&mut child, what);
    Ran {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

fn drain(mut stream: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    })
}

fn wait_bounded(child: &mut Child, what: &str) -> ExitStatus {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} hung: killed after {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub fn signal(pid: i32, signal: rustix::process::Signal) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, signal);
    }
}

/// Whether this process may do what only root may (mount, chown, change uid).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

pub use crate::support::skip;

/// Leftover temporary record files (`.{id}.json.{pid}.tmp`) in `dir`.
pub fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|name| name.starts_with('.') && name.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}
