//! A stopped supervisor (`SIGSTOP`): clients give up after their request timeout with a clear
//! message, and what they gave up on is never carried out once the supervisor runs again.

use rustix::process::Signal;

use crate::sandbox::{Sandbox, eventually, signal};

/// Sends `SIGCONT` to the supervisor when dropped, so a failing test leaves nothing stopped.
struct Stopped(i32);

impl Stopped {
    fn stop(pid: i32) -> Self {
        signal(pid, Signal::STOP);
        eventually("the supervisor stopped", || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
            (state == 'T').then_some(())
        });
        Self(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, Signal::CONT);
    }
}

#[test]
fn requests_to_a_stopped_supervisor_time_out_clearly_and_are_never_carried_out_later() {
    let mut sandbox = Sandbox::new();
    let sleeper = sandbox.start("sleep 1000");
    sandbox.until_running(&sleeper);
    let pid = sandbox.supervisor_pid();
    sandbox.set("TASKS_REQUEST_TIMEOUT", "1s");

    let stopped = Stopped::stop(pid);
    let expected = ["did not answer within 1s", &format!("kill -CONT {pid}")];
    let ghost = sandbox.scratch().join("ghost");
    sandbox
        .run(&["run", "--", &format!("touch {}", ghost.display())])
        .fails_saying(&expected);
    sandbox.run(&["kill", &sleeper]).fails_saying(&expected);
    drop(stopped);

    eventually("both late requests refused", || {
        let refused = sandbox
            .log()
            .matches("dropped a request read after its deadline")
            .count();
        (refused == 2).then_some(())
    });
    let listed = sandbox.listed();
    assert_eq!(listed.len(), 1, "no task was started late: {listed:?}");
    assert_eq!(listed[0]["id"], sleeper.as_str());
    assert_eq!(
        listed[0]["status"], "running",
        "the late kill did not happen"
    );
    assert!(!ghost.exists());
    assert_eq!(sandbox.supervisor_pid(), pid);

    sandbox.set("TASKS_REQUEST_TIMEOUT", "10s");
    assert_eq!(sandbox.json(&["kill", &sleeper])[0]["result"], "killed");
}
