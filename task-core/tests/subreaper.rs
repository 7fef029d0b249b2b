//! `kill_tree` in a subreaper (as a supervisor is), in a test process of its own (a subreaper
//! inherits every orphan below it, which would change what the other suites see): an agent
//! CLI's tree (`Root::Plain`) whose double-forked escapee was re-parented to the subreaper is
//! killed whole, the escapee found among the subreaper's children by its marker; a process
//! carrying the same marker outside the subreaper's tree is not looked at, since nothing that
//! left the tree can be there (before, every process of the machine was read).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use task_core::process::{Root, TASK_MARKER_ENV, become_subreaper, kill_tree};

/// The state letter and parent of `pid` (`None`: gone).
fn state_and_parent(pid: i32) -> Option<(char, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some((state, fields.next()?.parse().ok()?))
}

fn alive(pid: i32) -> bool {
    state_and_parent(pid).is_some_and(|(state, _)| !matches!(state, 'Z' | 'X'))
}

/// Polls `probe` for up to 10 s.
fn eventually<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Starts `sh -c SCRIPT` carrying `marker`, where SCRIPT double-forks a `sleep 300` that
/// writes its pid to `file`, then runs `then`; the shell and the sleep's pid.
fn double_fork(marker: &str, file: &Path, then: &str) -> (std::process::Child, i32) {
    let shown = file.display();
    let script = format!(
        "(sh -c 'echo $$ > {shown}.new; mv {shown}.new {shown}; exec sleep 300' &); {then}"
    );
    let child = Command::new("sh")
        .arg("-c")
        .arg(script)
        .env(TASK_MARKER_ENV, marker)
        .spawn()
        .unwrap();
    let pid = eventually("the daemon's pid", || {
        std::fs::read_to_string(file).ok()?.trim().parse().ok()
    });
    (child, pid)
}

/// Kills the processes it holds when dropped (a failed test leaves none behind).
struct Cleanup(Vec<i32>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
    }
}

#[test]
fn an_escapee_re_parented_to_the_subreaper_is_killed_and_nothing_outside_is_looked_at() {
    let marker = format!("subreaper-test-{}", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    let me = i32::try_from(std::process::id()).unwrap();
    // Before this process is a subreaper, a marked daemon goes elsewhere (init, or a subreaper
    // above this process): not one of this process's descendants.
    let (mut gone, outside) = double_fork(&marker, &dir.path().join("outside"), "exit 0");
    let mut cleanup = Cleanup(vec![outside]);
    gone.wait().unwrap();
    eventually("the outside daemon re-parented", || {
        let (_, parent) = state_and_parent(outside)?;
        (parent != gone.id() as i32 && parent != me).then_some(())
    });

    become_subreaper().unwrap();
    // An agent-like root (not a subreaper) whose escapee comes to this process.
    let (mut root, escapee) = double_fork(&marker, &dir.path().join("escapee"), "exec sleep 300");
    let root_pid = i32::try_from(root.id()).unwrap();
    cleanup.0.extend([root_pid, escapee]);
    eventually("the escapee re-parented to this process", || {
        (state_and_parent(escapee)?.1 == me).then_some(())
    });

    let signalled = kill_tree(root.id(), Some(&marker), Root::Plain).unwrap();
    root.wait().unwrap();
    assert!(signalled >= 1, "{signalled}");
    // Killed, and reaped by `kill_tree` (this process is its parent now).
    eventually("the escapee gone", || {
        state_and_parent(escapee).is_none().then_some(())
    });
    assert!(
        alive(outside),
        "a marked process outside the tree is not looked at"
    );
}
