//! The session directory deleted (`rm -rf`) under a live task: its supervisor notices on its
//! sweep, kills the task (nobody could see, wait for or kill it any more), logs why and
//! leaves; while it lives, no second supervisor starts for the session (the lock in the root
//! survives the directory), and once it has left the next command starts exactly one.

use std::io::Read;
use std::path::Path;

use rustix::process::Signal;

use crate::sandbox::{Sandbox, eventually, is_alive, signal};

/// The pids of the processes that carry `TASKS_TASK_ID={id}` (a task's processes, escapees
/// included).
fn processes_of_task(root: &Path, id: &str) -> Vec<i32> {
    let marker = format!("TASKS_TASK_ID={id}");
    crate::support::processes_of(root)
        .into_iter()
        .filter(|pid| environ(*pid).contains(&marker))
        .collect()
}

/// The processes of the sandbox that belong to no task: its supervisors (and any would-be
/// supervisor still waiting for the lock).
fn supervisors(root: &Path) -> Vec<i32> {
    crate::support::processes_of(root)
        .into_iter()
        .filter(|pid| {
            !environ(*pid)
                .iter()
                .any(|var| var.starts_with("TASKS_TASK_ID="))
        })
        .collect()
}

fn environ(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| {
            env.split(|&b| b == 0)
                .map(|var| String::from_utf8_lossy(var).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Starts a long task, waits until it runs, and returns its id, the pids of its processes,
/// the supervisor's pid and its log, opened (the file outlives the directory while open).
fn a_live_task(sandbox: &Sandbox) -> (String, Vec<i32>, i32, std::fs::File) {
    let id = sandbox.start("sleep 600");
    sandbox.until_running(&id);
    let pids = eventually("the task's processes", || {
        let pids = processes_of_task(sandbox.root(), &id);
        (!pids.is_empty()).then_some(pids)
    });
    let supervisor = sandbox.supervisor_pid();
    assert_eq!(supervisors(sandbox.root()), [supervisor]);
    let log = std::fs::File::open(sandbox.session_dir().join("supervisor.log")).unwrap();
    (id, pids, supervisor, log)
}

fn remove_session_dir(sandbox: &Sandbox) {
    // Retried: a file the supervisor creates meanwhile makes one pass fail (ENOTEMPTY).
    eventually("the session directory removed", || {
        std::fs::remove_dir_all(sandbox.session_dir()).ok()
    });
}

fn read_rest(mut log: std::fs::File) -> String {
    let mut text = String::new();
    log.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn a_deleted_session_directory_makes_its_supervisor_kill_its_tasks_say_why_and_leave() {
    let sandbox = Sandbox::new();
    let (id, pids, supervisor, log) = a_live_task(&sandbox);
    remove_session_dir(&sandbox);

    eventually("the supervisor gone", || {
        (!is_alive(supervisor)).then_some(())
    });
    eventually("no process of the task left", || {
        (pids.iter().all(|&pid| !is_alive(pid))
            && processes_of_task(sandbox.root(), &id).is_empty())
        .then_some(())
    });
    assert!(supervisors(sandbox.root()).is_empty());
    assert!(
        !sandbox.session_dir().exists(),
        "the leaving supervisor never creates the directory again"
    );
    let logged = read_rest(log);
    let killed = logged
        .lines()
        .find(|line| line.contains(&id) && line.contains("killed"))
        .unwrap_or_else(|| panic!("no line says {id} was killed: {logged}"));
    assert!(
        killed.contains("session directory") && killed.contains("was deleted"),
        "{killed}"
    );
}

#[test]
fn no_second_supervisor_starts_while_the_one_of_a_deleted_directory_lives_and_one_starts_after() {
    let mut sandbox = Sandbox::new();
    let (id, pids, old, log) = a_live_task(&sandbox);
    // Stopped, it cannot notice: the next command must not start a second supervisor.
    signal(old, Signal::STOP);
    remove_session_dir(&sandbox);
    sandbox.set("TASKS_START_TIMEOUT_MS", "3000");
    let refused = sandbox.run(&["run", "--", "echo refused"]);
    refused.fails_saying(&["has not left yet", &format!("pid {old}")]);
    eventually("only the old supervisor", || {
        (supervisors(sandbox.root()) == [old]).then_some(())
    });
    assert!(!sandbox.session_dir().join("supervisor.sock").exists());
    assert!(pids.iter().all(|&pid| is_alive(pid)), "nothing killed yet");

    // Running again, it notices, kills the task and leaves; then the next command starts
    // exactly one supervisor.
    signal(old, Signal::CONT);
    eventually("the old supervisor gone", || (!is_alive(old)).then_some(()));
    eventually("no process of the task left", || {
        (pids.iter().all(|&pid| !is_alive(pid))
            && processes_of_task(sandbox.root(), &id).is_empty())
        .then_some(())
    });
    sandbox.set("TASKS_START_TIMEOUT_MS", "5000");
    let after = sandbox.start("echo after");
    sandbox.ok(&["wait", "--no-deliver", &after]);
    let new = sandbox.supervisor_pid();
    assert_ne!(new, old);
    assert_eq!(supervisors(sandbox.root()), [new], "exactly one supervisor");
    let listed: Vec<String> = sandbox
        .listed()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        listed,
        std::slice::from_ref(&after),
        "the new directory holds only the new task"
    );
    assert_eq!(sandbox.ok(&["output", &after]), "after\n");
    assert!(
        sandbox
            .log()
            .contains("of the session directory that was here before"),
        "the new directory's log says what became of the old one: {}",
        sandbox.log()
    );

    let logged = read_rest(log);
    assert!(
        logged.lines().any(|line| line.contains(&id)
            && line.contains("killed")
            && line.contains("session directory")),
        "{logged}"
    );
}
