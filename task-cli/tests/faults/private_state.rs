//! The state root and session directory are private: one that is a symlink, belongs to another
//! user or that others can write to is refused by every command; and the supervisor serves only
//! processes of its own user, even when file permissions would let another reach its socket.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::sandbox::{Sandbox, bounded, is_root, skip, tasks_bin};

/// The uid and gid of `nobody`.
const NOBODY: u32 = 65534;

fn private_dir(path: &Path) {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .unwrap();
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
}

/// Every command that uses a session refuses it, naming `dir`; so does a supervisor started
/// on it by hand.
fn every_command_refuses(sandbox: &Sandbox, dir: &Path, what: &str) {
    let id = "b00000000";
    for args in [
        &["run", "--", "true"][..],
        &["ps", "--all"],
        &["wait", id],
        &["kill", id],
        &["output", id],
        &["notifications"],
        &["__supervise"],
    ] {
        let ran = sandbox.run(args);
        let shown = dir.display().to_string();
        assert!(!ran.status.success(), "{what}: {args:?} accepted: {ran:?}");
        for word in ["refusing to use", shown.as_str()] {
            assert!(ran.stderr.contains(word), "{what}: {args:?}: {ran:?}");
        }
    }
}

#[test]
fn a_session_dir_that_is_a_symlink_or_writable_by_others_is_refused_by_every_command() {
    let sandbox = Sandbox::new();
    private_dir(sandbox.root());
    let elsewhere = sandbox.scratch().join("elsewhere");
    private_dir(&elsewhere);
    std::os::unix::fs::symlink(&elsewhere, sandbox.session_dir()).unwrap();
    every_command_refuses(&sandbox, &sandbox.session_dir(), "a symlink");
    let planted: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().collect();
    assert!(planted.is_empty(), "something was created through the link");

    std::fs::remove_file(sandbox.session_dir()).unwrap();
    private_dir(&sandbox.session_dir());
    for mode in [0o777, 0o770, 0o702] {
        chmod(&sandbox.session_dir(), mode);
        every_command_refuses(&sandbox, &sandbox.session_dir(), &format!("mode {mode:o}"));
        let told = sandbox.run(&["ps"]).stderr;
        let remedy = format!("chmod 700 {}", sandbox.session_dir().display());
        assert!(told.contains(&remedy), "mode {mode:o}: {told}");
    }
    chmod(&sandbox.session_dir(), 0o700);
    chmod(sandbox.root(), 0o777);
    every_command_refuses(&sandbox, sandbox.root(), "a world-writable root");
    chmod(sandbox.root(), 0o700);
    sandbox.ok(&["run", "--wait", "--", "true"]);
}

#[test]
fn a_session_dir_owned_by_another_user_is_refused_by_every_command() {
    if !is_root() {
        return skip("giving a directory to another user needs root");
    }
    let sandbox = Sandbox::new();
    private_dir(&sandbox.session_dir());
    chown(&sandbox.session_dir(), NOBODY);
    every_command_refuses(&sandbox, &sandbox.session_dir(), "owned by nobody");
    assert!(
        std::fs::read_dir(sandbox.session_dir())
            .unwrap()
            .next()
            .is_none(),
        "nothing was created in it"
    );
}

#[test]
fn a_connection_from_another_user_gets_no_service() {
    if !is_root() {
        return skip("running a client as another user needs root");
    }
    let sandbox = Sandbox::new();
    let sleeper = sandbox.start("sleep 1000");
    sandbox.until_running(&sleeper);
    // Let anyone reach the socket (directories searchable, the socket writable): only the
    // supervisor's own check stands between another user and the session.
    for dir in [sandbox.scratch(), sandbox.root(), &sandbox.session_dir()] {
        chmod(dir, 0o711);
    }
    let socket = sandbox.session_dir().join("supervisor.sock");
    chmod(&socket, 0o777);
    // The other user's own (private, valid) session, whose socket is ours.
    let theirs = sandbox.scratch().join("theirs");
    private_dir(&theirs.join("default"));
    for dir in [&theirs, &theirs.join("default")] {
        chown(dir, NOBODY);
    }
    std::os::unix::fs::symlink(&socket, theirs.join("default/supervisor.sock")).unwrap();

    let pwned = sandbox.scratch().join("pwned");
    let mut intruder = Command::new(tasks_bin());
    intruder
        .args(["run", "--", &format!("touch {}", pwned.display())])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("TASKS_ROOT", &theirs)
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY);
    let ran = bounded(intruder, "tasks run as nobody");
    ran.fails_saying(&["closed the connection without answering"]);
    assert!(
        sandbox
            .log()
            .contains("refused a connection from another user"),
        "{}",
        sandbox.log()
    );
    let listed = sandbox.listed();
    assert_eq!(listed.len(), 1, "nothing started for nobody: {listed:?}");
    assert!(!pwned.exists());
    assert!(
        !theirs.join("default/supervisor.lock").exists(),
        "no supervisor started"
    );
}
