//! `process::Spawn`: real processes started with `clone(CLONE_VM | CLONE_VFORK)`, each waited
//! for and reaped by its `Child`.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::time::Duration;

use task_core::process::{Child, ChildSetup, Group, Spawn, Stdio};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long any one child may take.
const PATIENCE: Duration = Duration::from_secs(20);

/// Waits for `child` and returns its stdout and exit code.
async fn finish(mut child: Child) -> (String, i32) {
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    tokio::time::timeout(PATIENCE, stdout.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    let status = tokio::time::timeout(PATIENCE, child.wait())
        .await
        .unwrap()
        .unwrap();
    (out, status.code().unwrap_or(-1))
}

fn sh(script: &str) -> Spawn {
    Spawn::new("sh").arg("-c").arg(script).stdout(Stdio::Piped)
}

#[tokio::test]
async fn arguments_environment_and_directory_reach_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let child = sh("printf '%s|%s|%s|%s' \"$0\" \"$1\" \"$GREETING\" \"$(pwd -P)\"")
        .arg("zero")
        .arg("one two")
        .env("GREETING", "hello")
        .current_dir(dir.path())
        .spawn()
        .unwrap();
    let (out, code) = finish(child).await;
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(out, format!("zero|one two|hello|{}", cwd.display()));
    assert_eq!(code, 0);
}

#[tokio::test]
async fn a_cleared_environment_holds_only_what_was_set_and_not_what_was_removed() {
    let child = Spawn::new("/usr/bin/env")
        .env_clear()
        .env("A", "1")
        .env("B", "2")
        .env("A", "3")
        .env_remove("B")
        .stdout(Stdio::Piped)
        .spawn()
        .unwrap();
    assert_eq!(finish(child).await, ("A=3\n".to_owned(), 0));
}

#[tokio::test]
async fn the_exit_code_and_a_killing_signal_are_reported() {
    let (_, code) = finish(sh("exit 7").spawn().unwrap()).await;
    assert_eq!(code, 7);
    let mut child = sh("kill -9 $$").spawn().unwrap();
    drop(child.stdout.take());
    let status = child.wait().await.unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));
    // Waiting again gives the same status, without a second reap.
    assert_eq!(child.wait().await.unwrap(), status);
}

#[tokio::test]
async fn a_missing_program_is_an_error_and_leaves_no_child() {
    for program in ["/definitely/not/here", "definitely-not-a-program-here"] {
        let error = Spawn::new(program).spawn().unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "{program}");
    }
    // A program that exists but cannot be executed fails in the child's `execve`: its errno
    // comes back, and the child that failed was reaped.
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let error = Spawn::new(&script).spawn().unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EACCES));
    assert_no_zombie_children();
}

/// This test process has no zombie child that never exec'd (a failed spawn reaps what it
/// cloned). Such a child still bears this process's name; the children of the tests running
/// beside this one (`sh`, `env`, `sleep`) do not.
fn assert_no_zombie_children() {
    // `(name) state ...` of a process's `stat`.
    let name_and_state = |pid: &str| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (head, rest) = stat.rsplit_once(") ")?;
        let name = head.split_once('(')?.1.to_owned();
        Some((name, rest.chars().next()?))
    };
    let (own_name, _) = name_and_state("self").unwrap();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let children = std::fs::read_to_string(task.unwrap().path().join("children")).unwrap();
        for pid in children.split_whitespace() {
            let found = name_and_state(pid);
            assert_ne!(
                found,
                Some((own_name.clone(), 'Z')),
                "a failed spawn left zombie {pid}"
            );
        }
    }
}

#[tokio::test]
async fn the_child_starts_with_no_blocked_signal_and_sigpipe_at_its_default() {
    // The parent blocks every signal around the clone; the child must not keep that mask, nor
    // the Rust runtime's ignored SIGPIPE.
    let child = sh("grep -E '^Sig(Blk|Ign):' /proc/self/status")
        .spawn()
        .unwrap();
    let (out, code) = finish(child).await;
    assert_eq!(code, 0);
    let field = |name: &str| {
        let line = out.lines().find(|l| l.starts_with(name)).unwrap();
        u64::from_str_radix(line.split_whitespace().nth(1).unwrap(), 16).unwrap()
    };
    assert_eq!(field("SigBlk:"), 0, "{out}");
    let sigpipe = 1 << (libc::SIGPIPE - 1);
    assert_eq!(field("SigIgn:") & sigpipe, 0, "{out}");
}

#[tokio::test]
async fn a_group_leader_subreaper_holds_its_orphans() {
    let child = sh("(sleep 30 & echo $!) | { read pid; echo $$ $pid; \
                    ps -o ppid= -p $pid; ps -o pgid= -p $$; kill $pid; }")
    .group(Group::Lead)
    .setup(ChildSetup {
        die_with_parent: true,
        hold_orphans: true,
    })
    .spawn()
    .unwrap();
    let pid = child.id();
    let (out, code) = finish(child).await;
    assert_eq!(code, 0, "{out}");
    let numbers: Vec<u32> = out.split_whitespace().map(|n| n.parse().unwrap()).collect();
    let [shell, _orphan, orphan_parent, group] = numbers[..] else {
        panic!("{out}");
    };
    assert_eq!(shell, pid);
    // The subshell that started `sleep` exited at once: its orphan went to the shell.
    assert_eq!(orphan_parent, pid, "{out}");
    assert_eq!(group, pid, "{out}");
}

#[tokio::test]
async fn stdin_can_be_piped_and_a_descriptor_given_by_number() {
    let (read, write) = rustix::pipe::pipe().unwrap();
    let mut write = std::fs::File::from(write);
    write.write_all(b"from nine").unwrap();
    drop(write);
    let mut child = sh("cat; cat <&9")
        .stdin(Stdio::Piped)
        .fd(read, 9)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"from stdin, ").await.unwrap();
    drop(stdin);
    assert_eq!(finish(child).await, ("from stdin, from nine".to_owned(), 0));
}

#[tokio::test]
async fn a_source_numbered_like_an_earlier_target_is_not_overwritten() {
    // `q` goes to the number `p` has in this process, then `p` to 20: copied naively in order,
    // the first `dup2` would overwrite `p` before it is copied.
    let (p_read, p_write) = rustix::pipe::pipe().unwrap();
    let (q_read, q_write) = rustix::pipe::pipe().unwrap();
    let p_number = std::os::fd::AsRawFd::as_raw_fd(&p_write);
    // Through `/proc/self/fd` (dash parses only one-digit redirections).
    let script = format!("echo p > /proc/self/fd/20; echo q > /proc/self/fd/{p_number}");
    let mut child = Spawn::new("sh")
        .arg("-c")
        .arg(script)
        .fd(q_write, p_number)
        .fd(p_write, 20)
        .spawn()
        .unwrap();
    assert!(child.wait().await.unwrap().success());
    let read = |fd: OwnedFd| {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(fd), &mut text).unwrap();
        text
    };
    assert_eq!(
        (read(p_read), read(q_read)),
        ("p\n".to_owned(), "q\n".to_owned())
    );
}

#[tokio::test]
async fn a_descriptor_not_given_to_the_child_is_not_inherited_even_without_close_on_exec() {
    // Numbered far above the few low numbers a child keeps of this process's table.
    let null = std::fs::File::open("/dev/null").unwrap();
    let kept = rustix::io::fcntl_dupfd_cloexec(&null, 1000).unwrap();
    rustix::io::fcntl_setfd(&kept, rustix::io::FdFlags::empty()).unwrap();
    let number = std::os::fd::AsRawFd::as_raw_fd(&kept);
    let script =
        format!("if [ -e /proc/self/fd/{number} ]; then echo inherited; else echo not; fi");
    let (out, code) = finish(sh(&script).spawn().unwrap()).await;
    assert_eq!((out.as_str(), code), ("not\n", 0), "descriptor {number}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_spawns_each_get_their_own_descriptors() {
    let spawns = (0..64).map(|i| {
        tokio::spawn(async move {
            let (read, write) = rustix::pipe::pipe().unwrap();
            let mut write = std::fs::File::from(write);
            write.write_all(format!("nine {i}").as_bytes()).unwrap();
            drop(write);
            let child = sh(&format!("echo out {i}; cat <&9"))
                .fd(read, 9)
                .spawn()
                .unwrap();
            (i, finish(child).await)
        })
    });
    for spawned in join_in_order(spawns).await {
        let (i, (out, code)) = spawned;
        assert_eq!((out, code), (format!("out {i}\nnine {i}"), 0));
    }
}

/// Every handle's result, in order.
async fn join_in_order<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut results = Vec::new();
    for handle in handles.collect::<Vec<_>>() {
        results.push(handle.await.unwrap());
    }
    results
}

#[test]
fn spawning_outside_a_runtime_is_refused_before_anything_starts() {
    let error = Spawn::new("true").spawn().unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::Other);
}

#[tokio::test]
async fn a_dropped_child_is_still_reaped() {
    let child = sh("exec sleep 0.2").spawn().unwrap();
    let pid = child.id();
    drop(child);
    let stat = format!("/proc/{pid}/stat");
    let deadline = std::time::Instant::now() + PATIENCE;
    // Reaped by the task the drop left: the pid's entry disappears (no zombie stays).
    while std::path::Path::new(&stat).exists() {
        assert!(std::time::Instant::now() < deadline, "{pid} never reaped");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
