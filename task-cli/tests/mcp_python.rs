//! `tasks mcp` driven by the official MCP Python SDK (`tests/python/mcp_client_test.py`).
//!
//! `TASKS_MCP_PYTHON` names a python with `mcp` installed (`.ci/python-mcp.sh` makes one and
//! prints its path). Without it the test is skipped locally and fails under `CI=true`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(180);

/// Kills, by pid, every process started with `TASKS_ROOT={root}` in its environment: the
/// server, the session's supervisor and the tasks it ran.
struct KillByRoot<'a>(&'a Path);

impl Drop for KillByRoot<'_> {
    fn drop(&mut self) {
        let marker = format!("TASKS_ROOT={}", self.0.display());
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
                continue;
            };
            let matches = environ
                .split(|&b| b == 0)
                .any(|var| var == marker.as_bytes());
            if matches
                && pid != std::process::id() as i32
                && let Some(pid) = rustix::process::Pid::from_raw(pid)
            {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

#[test]
fn the_python_sdk_client_sees_tools_tasks_notifications_and_lists() {
    let Some(python) = std::env::var_os("TASKS_MCP_PYTHON").filter(|p| !p.is_empty()) else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "TASKS_MCP_PYTHON is not set: run `export TASKS_MCP_PYTHON=$(.ci/python-mcp.sh)`"
        );
        eprintln!(
            "skipped: set TASKS_MCP_PYTHON (see .ci/python-mcp.sh) to run the Python SDK test"
        );
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let _cleanup = KillByRoot(root.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/mcp_client_test.py");
    let mut child = Command::new(&python)
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_tasks"))
        .arg(root.path())
        .env("TASKS_ROOT", root.path())
        .spawn()
        .expect("start the python client");
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the python client did not finish within {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "the python client failed: {status}");
}
