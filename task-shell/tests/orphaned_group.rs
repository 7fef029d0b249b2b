//! Killing what a dead supervisor left of a process group, without hitting a process that
//! reused the group's number.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{DEADLINE, is_alive};
use task_shell::process::{kill_orphaned_group, start_time};

/// SIGKILLs a process we cannot reap (it was re-parented) when the test ends, pass or fail.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(pid) = rustix::process::Pid::from_raw(self.0 as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}

fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn the_members_left_by_a_dead_leader_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let member_file = dir.path().join("member");
    let mut leader = Command::new("sh")
        .arg("-c")
        .arg(format!("sleep 300 & echo $! > '{}'", member_file.display()))
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = leader.id();
    assert!(leader.wait().unwrap().success());
    assert_eq!(start_time(pgid), None, "the reaped leader is gone");
    let member: u32 = std::fs::read_to_string(&member_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _guard = KillOnDrop(member);
    assert!(is_alive(member));

    assert!(kill_orphaned_group(pgid, Some(1)).unwrap());
    wait_for("the orphaned member to die", || !is_alive(member));
}

#[test]
fn a_live_leader_is_killed_only_if_it_is_the_one_recorded() {
    let mut leader = Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = leader.id();
    let started = start_time(pid).expect("a live child has a start time");
    assert_eq!(start_time(pid), Some(started), "stable while it lives");

    for other in [Some(started + 1), None] {
        assert!(
            !kill_orphaned_group(pid, other).unwrap(),
            "another process under the same number is left alone ({other:?})"
        );
        assert!(is_alive(pid));
    }
    assert!(kill_orphaned_group(pid, Some(started)).unwrap());
    assert_eq!(leader.wait().unwrap().signal(), Some(9));
}
