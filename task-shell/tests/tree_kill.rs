//! Tree kill through the registry: a grandchild and a `setsid` great-grandchild are gone
//! afterwards, and no zombie of ours remains.
//! One test per binary so the "no zombie of ours" check sees only this test's processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{Fixture, is_alive, our_zombies, read_pid_file, stat, wait_until};
use task_core::TaskStatus;
use task_shell::ShellConfig;
use task_shell::process::CommandSpec;
use task_shell::shell::ShellRequest;

#[tokio::test]
async fn tree_with_setsid_great_grandchild_is_fully_gone_after_kill() {
    let fx = Fixture::new(ShellConfig::default());
    let dir = &fx.dir;
    let write = |name: &str, body: String| std::fs::write(dir.path().join(name), body).unwrap();
    let d = dir.path().display();
    write(
        "child.sh",
        format!("echo $$ > {d}/child; sh {d}/grand.sh & exec sleep 300\n"),
    );
    write(
        "grand.sh",
        format!("echo $$ > {d}/grand; setsid sh {d}/great.sh & exec sleep 300\n"),
    );
    write("great.sh", format!("echo $$ > {d}/great; exec sleep 300\n"));
    let script = format!("sh {d}/child.sh & exec sleep 300");
    let request = ShellRequest::new(CommandSpec::new(script).unwrap(), "tree").background(true);
    let mut task = fx.executor.spawn(request).unwrap();
    let root_pid = task.pid().unwrap();
    let child = read_pid_file(&dir.path().join("child")).await;
    let grand = read_pid_file(&dir.path().join("grand")).await;
    let great = read_pid_file(&dir.path().join("great")).await;
    wait_until("great-grandchild in its own session", || {
        stat(great).is_some_and(|s| s.session == great && s.pgrp == great)
    })
    .await;
    assert_eq!(
        stat(grand).unwrap().pgrp,
        root_pid,
        "grandchild stays in the task's group"
    );

    fx.registry.kill(&task.id()).await.unwrap();
    assert_eq!(task.wait().await.unwrap().status, TaskStatus::Killed);

    for (name, pid) in [
        ("child", child),
        ("grandchild", grand),
        ("great-grandchild", great),
    ] {
        wait_until(&format!("{name} {pid} to die"), || !is_alive(pid)).await;
    }
    assert!(!is_alive(root_pid));
    assert_eq!(our_zombies(), Vec::<u32>::new());
}
