//! What the suites that run the `tasks` binary share: finding the processes a test caused (they
//! carry the test's `TASKS_ROOT` in their environment) and killing them by pid; waiting with a
//! deadline. Each suite uses part of it.
#![allow(dead_code)]

pub mod agent_sandbox;
pub mod claude_code;
pub mod codex_cli;
pub mod gate;
pub mod gemini_cli;
pub mod git;
pub mod hooks;
pub mod model_server;
pub mod root;
pub mod tmux;

use std::path::Path;
use std::time::{Duration, Instant};

/// The pid of the supervisor of `root`'s default session and how many tasks it holds in memory
/// (registered), asked through the session layer (the tasks binary's own supervisor is started
/// if none is running).
pub fn supervisor_memory(root: &Path) -> (u32, usize) {
    use task_session::client::SupervisorCommand;
    use task_session::config::Config;
    use task_session::paths::SessionPaths;
    use task_session::session::Session;
    let paths = SessionPaths::new(root.to_path_buf(), "default").unwrap();
    let config = Config::load(&paths.config()).unwrap();
    let session = Session::with_config(paths, config).with_supervisor(SupervisorCommand {
        program: env!("CARGO_BIN_EXE_tasks").into(),
        args: vec!["__supervise".into()],
    });
    session.ping().unwrap()
}

/// Says why a test skips; under `CI=true` (where `.ci/run` installs every tool a test needs and
/// runs as root) a skip is a failure instead.
#[allow(clippy::print_stderr)]
pub fn skip(why: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI must not skip: {why}"
    );
    eprintln!("skipped: {why}");
}

/// An agent CLI: `$variable` if set, else `name` on the `PATH`; `None` when it does not run
/// (the test skips; under `CI=true` it fails: `.ci/agent-clis.sh` installs the pinned versions
/// and prints the variables).
pub fn agent_cli(variable: &str, name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os(variable).map_or_else(|| name.into(), std::path::PathBuf::from);
    let runs = std::process::Command::new(&path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        skip(&format!(
            "{name} is not installed (.ci/agent-clis.sh installs it and sets {variable})"
        ));
    }
    runs.then_some(path)
}

/// Whether `tool` runs here (`tool --version` succeeds); when it does not, the test says so
/// and skips ([`skip`]: a failure under `CI=true`). `installer` is the script that installs it.
pub fn tool_installed(tool: &str, installer: &str) -> bool {
    let runs = std::process::Command::new(tool)
        .arg(if tool == "tmux" { "-V" } else { "--version" })
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        skip(&format!(
            "{tool} is not installed ({installer} installs it)"
        ));
    }
    runs
}

/// Every live process, other than this one, whose environment sets `TASKS_ROOT` to `root`.
pub fn processes_of(root: &Path) -> Vec<i32> {
    let marker = format!("TASKS_ROOT={}", root.display());
    let me = std::process::id() as i32;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != me && is_alive(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|var| var == marker.as_bytes()))
        })
        .collect()
}

/// Kills every process of `root` by pid until none is left (for up to 10 s: a test's cleanup
/// never hangs).
pub fn kill_processes_of(root: &Path) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_of(root);
        if left.is_empty() || Instant::now() > deadline {
            return;
        }
        for pid in left {
            sigkill(pid);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn sigkill(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Alive and not a zombie.
pub fn is_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !matches!(state.and_then(|s| s.chars().next()), Some('Z' | 'X') | None)
        }
        Err(_) => false,
    }
}

/// How long a test waits for anything before it fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Polls `probe` until it returns `Some`, failing the test after [`DEADLINE`].
pub fn eventually<T>(what: &str, probe: impl FnMut() -> Option<T>) -> T {
    poll_until(DEADLINE, probe).unwrap_or_else(|| panic!("timed out waiting for {what}"))
}

/// Polls `probe` until it returns `Some` or `within` has passed (then `None`): the one wait of
/// these suites, for an event no process signals (a file appearing, a process gone).
pub fn poll_until<T>(within: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = probe() {
            return Some(value);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// [`eventually`] for a probe that awaits (an MCP call, a tokio lock), without blocking the
/// runtime while it waits.
pub async fn eventually_async<T>(what: &str, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(value) = probe().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// task-agent's scripted `fake-agent` CLI, built next to the `tasks` binary (`cargo test
/// --workspace` builds it; a lone `cargo test -p task-cli` builds it here).
pub fn fake_agent() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // Built once per test binary, even when one exists: a stale one would run old code.
    let built = BUILT.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        std::process::Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "task-agent",
                "--bin",
                "fake-agent",
            ])
            .status()
            .is_ok_and(|status| status.success())
    });
    assert!(built, "could not build fake-agent");
    Path::new(env!("CARGO_BIN_EXE_tasks")).with_file_name("fake-agent")
}

/// A small xorshift generator: the schedule of kills, reproducible from the printed seed.
pub struct Dice(u64);

impl Dice {
    /// Seeded from `TASKS_TEST_SEED`, else the clock; says its seed on stderr (to reproduce).
    #[allow(clippy::print_stderr)]
    pub fn seeded() -> Self {
        let seed = std::env::var("TASKS_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
                    | 1
            });
        eprintln!("TASKS_TEST_SEED={seed}");
        Self(seed)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}
