//! A task runs as if started from its caller's shell: the caller's environment and working
//! directory, whichever process started the supervisor; and any root length works.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::sandbox::{Sandbox, bounded, tasks_bin};

/// The first line `run --wait` prints: the id.
fn id_of(run_wait_stdout: &str) -> String {
    run_wait_stdout.lines().next().unwrap().trim().to_owned()
}

#[test]
fn the_callers_environment_not_the_supervisor_starters_reaches_the_command() {
    let sandbox = Sandbox::new();
    // The supervisor starts from this process, with an environment of its own.
    let mut starter = sandbox.command(&["run", "--", "sleep 1000"]);
    starter.env("FOO", "starter").env("ONLY_STARTER", "set");
    let keeper = bounded(starter, "the starter").stdout.trim().to_owned();
    let supervisor = sandbox.supervisor_pid();
    let environ = std::fs::read(format!("/proc/{supervisor}/environ")).unwrap();
    assert!(
        environ.split(|&b| b == 0).any(|var| var == b"FOO=starter"),
        "the supervisor has the starter's environment"
    );

    // A second caller, with another environment and a PATH leading to its own `greet`.
    let bin = sandbox.scratch().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let greet = bin.join("greet");
    std::fs::write(&greet, "#!/bin/sh\necho greeted\n").unwrap();
    std::fs::set_permissions(&greet, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut caller = Command::new(tasks_bin());
    caller.args([
        "run",
        "--wait",
        "--",
        r#"echo "FOO=$FOO ONLY_STARTER=$ONLY_STARTER"; greet"#,
    ]);
    caller.env_clear();
    sandbox.environment(&mut caller);
    caller
        .env("FOO", "hello")
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()));
    let ran = bounded(caller, "the caller");
    assert!(ran.status.success(), "{ran:?}");
    assert_eq!(
        sandbox.supervisor_pid(),
        supervisor,
        "the same supervisor ran it"
    );
    let id = id_of(&ran.stdout);
    assert_eq!(
        sandbox.ok(&["output", &id]),
        "FOO=hello ONLY_STARTER=\ngreeted\n"
    );
    sandbox.ok(&["kill", &keeper]);
}

#[test]
fn a_deleted_working_directory_is_refused_at_run_and_nothing_is_registered() {
    let sandbox = Sandbox::new();
    let gone = sandbox.scratch().join("gone");
    std::fs::create_dir(&gone).unwrap();
    // The shell enters the directory, removes it, then becomes `tasks run` in it.
    let mut command = Command::new("sh");
    command.args([
        "-c",
        r#"cd "$1" && rmdir "$1" && exec "$2" run --wait -- pwd"#,
        "sh",
    ]);
    command.arg(&gone).arg(tasks_bin());
    sandbox.environment(&mut command);
    let ran = bounded(command, "tasks run in a deleted directory");
    ran.fails_saying(&["current directory", "cd to an existing directory"]);
    assert_eq!(ran.code(), 74);
    assert!(ran.stdout.is_empty(), "no id handed out: {}", ran.stdout);
    assert!(sandbox.listed().is_empty(), "nothing registered");
}

#[test]
fn a_300_character_root_works_end_to_end() {
    let sandbox = Sandbox::at(|base| {
        let mut root = base.to_path_buf();
        while root.as_os_str().len() < 300 {
            root.push("a-long-state-root-directory-name-segment");
        }
        root
    });
    assert!(sandbox.root().as_os_str().len() >= 300);

    let sleeper = sandbox.start("sleep 1000");
    sandbox.until_running(&sleeper);
    let socket = sandbox.session_dir().join("supervisor.sock");
    assert!(
        socket.as_os_str().len() > 108,
        "longer than a socket address holds"
    );
    assert!(sandbox.ok(&["ps"]).contains(&sleeper));
    assert_eq!(sandbox.json(&["kill", &sleeper])[0]["result"], "killed");
    assert_eq!(sandbox.run(&["wait", &sleeper]).code(), 137);
    let ran = sandbox.ok(&["run", "--wait", "--", "echo ok"]);
    assert_eq!(sandbox.ok(&["output", &id_of(&ran)]), "ok\n");
}
