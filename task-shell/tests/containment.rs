//! Containment: descendants that double-fork or `setsid` away are still killed, and nothing is
//! left behind: every pid is checked in `/proc` afterwards (no survivor, no zombie).
//! This binary makes itself a child subreaper, as the supervisor does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::process::CommandExt;
use std::process::Command;

use common::{Fixture, is_alive, read_pid_file, stat, wait_until};
use task_core::TaskStatus;
use task_shell::ShellConfig;
use task_shell::process::{
    CommandSpec, Root, TASK_MARKER_ENV, become_subreaper, kill_tree, reap_adopted_orphans,
};
use task_shell::shell::ShellRequest;

/// Present in `/proc` at all (alive or zombie).
fn exists(pid: u32) -> bool {
    stat(pid).is_some()
}

async fn wait_gone(what: &str, pid: u32) {
    wait_until(&format!("{what} {pid} to be gone from /proc"), || {
        !exists(pid)
    })
    .await;
}

/// Spawns a background shell task running `script` (with `{d}` replaced by the temp dir), kills
/// it, and checks that the processes whose pids the script wrote to `names` are gone.
async fn kill_task_and_check(script: &str, names: &[&str]) {
    become_subreaper().unwrap();
    let fx = Fixture::new(ShellConfig::default());
    let d = fx.dir.path().display().to_string();
    let script = script.replace("{d}", &d);
    let request = ShellRequest::new(CommandSpec::new(script).unwrap(), "escape").background(true);
    let mut task = fx.executor.spawn(request).unwrap();
    let root = task.pid().unwrap();
    let mut pids = Vec::new();
    for name in names {
        let pid = read_pid_file(&fx.dir.path().join(name)).await;
        wait_until(&format!("{name} to exec sleep"), || {
            std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with("sleep"))
        })
        .await;
        pids.push((*name, pid));
    }
    fx.executor.kill(&task.id()).await.unwrap();
    assert_eq!(task.wait().await.unwrap().status, TaskStatus::Killed);
    for (name, pid) in pids {
        wait_gone(name, pid).await;
    }
    wait_gone("root", root).await;
}

#[tokio::test]
async fn a_setsid_escapee_of_a_subshell_is_killed_and_reaped() {
    // As in the report: `(setsid sleep 773 &) ; sleep 100`, the pid written first.
    kill_task_and_check(
        "(setsid sh -c 'echo $$ > {d}/escapee; exec sleep 773' &) ; sleep 100",
        &["escapee"],
    )
    .await;
}

/// The live process running `sleep {arg}` whose environment carries the marker of `task`.
fn find_marked_sleep(arg: &str, task: &str) -> Option<u32> {
    let marker = format!("{TASK_MARKER_ENV}={task}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            cmdline == format!("sleep\0{arg}\0").as_bytes()
                && environ.split(|&b| b == 0).any(|v| v == marker.as_bytes())
        })
}

#[tokio::test]
async fn the_command_of_the_report_leaves_no_survivor() {
    become_subreaper().unwrap();
    let fx = Fixture::new(ShellConfig::default());
    let command = "(setsid sleep 773 &) ; sleep 100";
    let request = ShellRequest::new(CommandSpec::new(command).unwrap(), "report").background(true);
    let mut task = fx.executor.spawn(request).unwrap();
    let id = task.id().to_string();
    let mut escapee = None;
    wait_until("sleep 773 to run", || {
        escapee = find_marked_sleep("773", &id);
        escapee.is_some()
    })
    .await;
    let escapee = escapee.unwrap();
    assert_eq!(
        stat(escapee).unwrap().session,
        escapee,
        "it left the session"
    );
    fx.executor.kill(&task.id()).await.unwrap();
    assert_eq!(task.wait().await.unwrap().status, TaskStatus::Killed);
    wait_gone("sleep 773", escapee).await;
    assert_eq!(find_marked_sleep("773", &id), None);
}

#[tokio::test]
async fn a_double_forked_grandchild_is_killed_and_reaped() {
    kill_task_and_check(
        "(sh -c 'echo $$ > {d}/orphan; exec sleep 774' &) ; \
         (setsid sh -c '(sh -c \"echo \\$\\$ > {d}/deep; exec sleep 775\" &)' &) ; sleep 100",
        &["orphan", "deep"],
    )
    .await;
}

#[tokio::test]
async fn an_escapee_whose_shell_already_exited_is_found_by_its_marker() {
    become_subreaper().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("escapee");
    // A shell tagged as task "lt_marker1" that leaves a setsid'd grandchild and exits at once:
    // the grandchild is outside every tree walk from the (zombie) shell.
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "(setsid sh -c 'echo $$ > {}; exec sleep 776' &)",
            file.display()
        ))
        .env(TASK_MARKER_ENV, "lt_marker1")
        .process_group(0)
        .spawn()
        .unwrap();
    let root = shell.id();
    // An unrelated process of the same user without the marker: must survive.
    let mut bystander = Command::new("sleep").arg("300").spawn().unwrap();
    let escapee = read_pid_file(&file).await;
    wait_until("the shell to exit", || {
        stat(root).is_some_and(|s| s.state == 'Z')
    })
    .await;
    wait_until("the escapee to be adopted", || {
        stat(escapee).is_some_and(|s| s.ppid == std::process::id())
    })
    .await;

    let signalled =
        tokio::task::spawn_blocking(move || kill_tree(root, Some("lt_marker1"), Root::Subreaper))
            .await
            .unwrap()
            .unwrap();
    assert!(signalled >= 1, "{signalled}");
    assert!(!exists(escapee), "killed and reaped by kill_tree itself");
    assert!(shell.wait().is_ok());
    assert!(
        is_alive(bystander.id()),
        "an unmarked process is left alone"
    );
    bystander.kill().unwrap();
    bystander.wait().unwrap();
}

#[tokio::test]
async fn adopted_orphans_are_reaped_and_spawned_children_are_not() {
    become_subreaper().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("orphan");
    let mut shell = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "(sh -c 'echo $$ > {}; exec sleep 0.05' &); exit 7",
            file.display()
        ))
        .process_group(0)
        .spawn()
        .unwrap();
    let root = shell.id();
    let orphan = read_pid_file(&file).await;
    wait_until("the orphan to exit and the shell to be a zombie", || {
        stat(orphan).is_some_and(|s| s.state == 'Z' && s.ppid == std::process::id())
            && stat(root).is_some_and(|s| s.state == 'Z')
    })
    .await;
    wait_until("the orphan to be reaped", || {
        reap_adopted_orphans();
        !exists(orphan)
    })
    .await;
    assert!(
        exists(root),
        "a child this process spawned is left to its Child"
    );
    assert_eq!(shell.wait().unwrap().code(), Some(7));
}
