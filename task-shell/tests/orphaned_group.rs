//! Killing what a dead supervisor left of a process group, without hitting a process that
//! reused the group's number.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{DEADLINE, is_alive};
use task_shell::process::{
    TASK_MARKER_ENV, TaskFingerprint, kill_orphaned_group, kill_orphaned_task, start_time,
};

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

fn read_pid(path: &std::path::Path) -> u32 {
    let mut pid = None;
    wait_for(&format!("pid file {}", path.display()), || {
        pid = common::pid_in(path);
        pid.is_some()
    });
    pid.unwrap()
}

#[test]
fn a_crafted_fingerprint_of_an_unrelated_group_kills_nothing() {
    // An unrelated process group of this same user, with a member besides its leader.
    let dir = tempfile::tempdir().unwrap();
    let member_file = dir.path().join("member");
    let mut leader = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "sleep 300 & echo $! > '{}'; exec sleep 300",
            member_file.display()
        ))
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = leader.id();
    let member = read_pid(&member_file);
    let _guard = KillOnDrop(member);
    // Every number a state file could hold, copied exactly from the live group...
    let exact = TaskFingerprint::of_leader(pid, None).unwrap();
    let crafted = [
        // ...claiming it is a task's (only a real task's processes carry its marker),
        TaskFingerprint {
            marker: Some("lt_crafted1".into()),
            ..exact.clone()
        },
        // ...or a group a supervisor created in another session,
        TaskFingerprint {
            session: exact.session.map(|s| s + 1),
            ..exact.clone()
        },
        // ...or another user's,
        TaskFingerprint {
            uid: exact.uid + 1,
            ..exact.clone()
        },
        // ...or a leader started at another time.
        TaskFingerprint {
            leader_started: exact.leader_started + 1_000_000,
            ..exact.clone()
        },
    ];
    for fingerprint in crafted {
        assert_eq!(
            kill_orphaned_task(&fingerprint).unwrap(),
            0,
            "{fingerprint:?}"
        );
        assert!(is_alive(pid) && is_alive(member), "{fingerprint:?}");
    }
    leader.kill().unwrap();
    leader.wait().unwrap();
}

#[test]
fn what_a_dead_supervisor_left_of_a_task_is_killed_escapees_included() {
    let dir = tempfile::tempdir().unwrap();
    let (member_file, escapee_file) = (dir.path().join("member"), dir.path().join("escapee"));
    // The task's shell, tagged as the executor tags it, leaves a group member and a setsid'd
    // escapee behind and exits (as when its supervisor died).
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "sleep 300 & echo $! > '{}'; (setsid sh -c 'echo $$ > {}; exec sleep 300' &)",
            member_file.display(),
            escapee_file.display()
        ))
        .env(TASK_MARKER_ENV, "lt_orphan01")
        .process_group(0)
        .spawn()
        .unwrap();
    let fingerprint = TaskFingerprint::of_leader(shell.id(), Some("lt_orphan01")).unwrap();
    let member = read_pid(&member_file);
    let escapee = read_pid(&escapee_file);
    let _guards = (KillOnDrop(member), KillOnDrop(escapee));
    assert!(shell.wait().unwrap().success());
    wait_for("the escapee to have its own session", || {
        common::stat(escapee).is_some_and(|s| s.session == escapee)
    });

    assert!(kill_orphaned_task(&fingerprint).unwrap() >= 2);
    wait_for("the member to die", || !is_alive(member));
    wait_for("the escapee to die", || !is_alive(escapee));
}

/// The registry's executor of shell tasks, as the session layer calls it for an orphan.
fn shell_executor(fx: &common::Fixture) -> std::sync::Arc<dyn task_core::Task> {
    fx.registry
        .executor(task_core::TaskType::LocalBash)
        .expect("the shell executor is registered")
}

fn process_of(state: &task_core::TaskState) -> task_core::ShellProcess {
    match &state.kind {
        task_core::TaskKind::Shell(shell) => shell.process.expect("a process was recorded"),
        other => panic!("not a shell: {other:?}"),
    }
}

#[tokio::test]
async fn an_orphan_recorded_by_the_executor_is_reaped_from_its_state_and_a_forged_one_is_not() {
    use task_shell::process::CommandSpec;
    use task_shell::shell::ShellRequest;

    let fx = common::Fixture::new(task_shell::ShellConfig::default());
    let escapee_file = fx.dir.path().join("escapee");
    let command = format!(
        "(setsid sh -c 'echo $$ > {}; exec sleep 300' &); exec sleep 300",
        escapee_file.display()
    );
    let request = ShellRequest::new(CommandSpec::new(command).unwrap(), "orphan").background(true);
    let mut task = fx.executor.spawn(request).unwrap();
    let escapee = common::read_pid_file(&escapee_file).await;
    let _guard = KillOnDrop(escapee);
    let recorded = fx.state(&task.id());
    let process = process_of(&recorded);
    assert_eq!(process.pgid, task.pid().unwrap());
    assert!(process.owner.is_some(), "{process:?}");

    // A forged state: the same task, its numbers pointing at an unrelated group of this user.
    let mut bystander = Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    let victim = TaskFingerprint::of_leader(bystander.id(), None).unwrap();
    let mut forged = (*recorded).clone();
    if let task_core::TaskKind::Shell(shell) = &mut forged.kind {
        shell.process = Some(task_core::ShellProcess {
            pgid: victim.pgid,
            leader_started: Some(victim.leader_started),
            owner: Some(task_core::ProcessOwner {
                session: victim.session.unwrap(),
                uid: victim.uid,
            }),
        });
    }
    shell_executor(&fx).reap_orphan(&forged).unwrap();
    assert!(
        is_alive(bystander.id()),
        "a forged state killed a bystander"
    );
    bystander.kill().unwrap();
    bystander.wait().unwrap();

    // The real state: the shell and its setsid'd escapee are killed.
    shell_executor(&fx).reap_orphan(&recorded).unwrap();
    let outcome = task.wait().await.unwrap();
    assert_eq!(outcome.exit_code, 137);
    wait_for("the escapee to die", || !is_alive(escapee));
}
