//! `tasks restart ID`: the same command, working directory and options under a new id.

use crate::sandbox::Sandbox;

#[test]
fn restart_runs_the_same_command_in_the_same_directory_with_the_same_options() {
    let sandbox = Sandbox::new();
    let workdir = sandbox.root().join("project");
    std::fs::create_dir(&workdir).unwrap();
    let started = sandbox
        .command(&[
            "run",
            "-d",
            "where am I",
            "--",
            "pwd; echo \"greeting=$GREETING\"",
        ])
        .current_dir(&workdir)
        .env("GREETING", "first")
        .output()
        .unwrap();
    let first = String::from_utf8(started.stdout).unwrap().trim().to_owned();
    assert_eq!(sandbox.run(&["wait", &first]).status.code(), Some(0));

    // Restarted from elsewhere: the task's directory, this process's environment.
    let restarted = sandbox
        .command(&["restart", &first])
        .current_dir(sandbox.root())
        .env("GREETING", "again")
        .output()
        .unwrap();
    assert!(restarted.status.success(), "{restarted:?}");
    let second = String::from_utf8(restarted.stdout)
        .unwrap()
        .trim()
        .to_owned();
    assert_ne!(second, first);
    assert_eq!(sandbox.run(&["wait", &second]).status.code(), Some(0));
    let output = sandbox.ok(&["output", &second]);
    assert_eq!(
        output,
        format!(
            "{}\ngreeting=again\n",
            workdir.canonicalize().unwrap().display()
        )
    );
    let listed = sandbox.json(&["ps", "--all"]);
    let second_row = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == second.as_str())
        .unwrap();
    assert_eq!(second_row["description"], "where am I");
}

#[test]
fn restart_keeps_the_timeout_and_refuses_unknown_tasks() {
    let sandbox = Sandbox::new();
    let first = sandbox.ok(&["run", "--timeout", "100ms", "--", "sleep 1000"]);
    let first = first.trim();
    assert_eq!(sandbox.run(&["wait", first]).status.code(), Some(143));
    let second = sandbox.ok(&["restart", first]);
    assert_eq!(
        sandbox.run(&["wait", second.trim()]).status.code(),
        Some(143),
        "the restarted task has the same timeout"
    );
    assert_eq!(
        sandbox.run(&["restart", "b00000000"]).status.code(),
        Some(66)
    );
    assert_eq!(sandbox.run(&["restart", "../x"]).status.code(), Some(65));
}
