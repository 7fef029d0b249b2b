//! The exit-code table of task-cli's README, walked: every code it lists is what a command
//! exits with in a case the table names, and every error is one `tasks: …` line on stderr
//! (#41.13). The table is read from the README, so a code added there without a case here
//! fails.

use std::process::Output;

use crate::sandbox::Sandbox;
use crate::support::eventually;

/// The codes the README's `## Exit codes` table lists (`1–255` as written).
fn table() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme.split("## Exit codes").nth(1).unwrap();
    section
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| line.split('|').nth(1).map(|cell| cell.trim().to_owned()))
        .filter(|code| code.starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}

/// The codes of errors (not of a task's end or a wait's), which say why in one line.
const ERRORS: [i32; 5] = [65, 66, 69, 70, 74];

/// Checks that `output` exited `code`, and that an error said so in one `tasks: …` line.
fn exited(what: &str, output: &Output, code: i32) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(code), "{what}: {output:?}");
    if ERRORS.contains(&code) {
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{what}: one line: {stderr}");
        assert!(lines[0].starts_with("tasks: "), "{what}: {stderr}");
    }
}

#[test]
fn every_code_of_the_readme_table_is_what_its_case_exits_with() {
    let sandbox = Sandbox::new();
    let mut walked = Vec::new();
    let mut check = |code: &str, what: &str, output: Output, expected: i32| {
        exited(what, &output, expected);
        walked.push(code.to_owned());
    };
    check("0", "success", sandbox.run(&["ps"]), 0);
    let own = sandbox.run(&["run", "--wait", "--", "exit 3"]);
    check("1–255", "a task's own code", own, 3);
    check("2", "usage", sandbox.run(&["run", "--no-such-flag"]), 2);
    check("65", "malformed id", sandbox.run(&["output", "a b"]), 65);
    check(
        "66",
        "unknown id",
        sandbox.run(&["output", "b00000000"]),
        66,
    );
    let sleeper = sandbox.start("sleep 30");
    let input = sandbox.run(&["input", &sleeper, "hi"]);
    check("70", "input to a task without a pipe", input, 70);
    let timed_out = sandbox.run(&["wait", "--timeout", "50ms", &sleeper]);
    check("124", "wait --timeout", timed_out, 124);
    sandbox.ok(&["kill", &sleeper]);
    check("137", "killed", sandbox.run(&["wait", &sleeper]), 137);
    // A reader that closed its stdin: the write fails with EPIPE.
    let reader = sandbox
        .ok(&["run", "--stdin", "pipe", "--", "exec 0<&-; sleep 30"])
        .trim()
        .to_owned();
    let epipe = eventually("the write to fail", || {
        let output = sandbox.run(&["input", &reader, "hi"]);
        (output.status.code() != Some(0)).then_some(output)
    });
    check("74", "input to a closed stdin", epipe, 74);
    sandbox.ok(&["kill", &reader]);
    // A supervisor that cannot start: its lock file's path is taken by a directory.
    let blocked = Sandbox::new();
    std::fs::create_dir_all(blocked.root().join(".default.supervisor.lock")).unwrap();
    let cannot = blocked.run(&["run", "--", "true"]);
    check("69", "the supervisor cannot start", cannot, 69);
    let mut listed = table();
    listed.sort();
    walked.sort();
    assert_eq!(
        walked, listed,
        "every code of the table walked, and only those"
    );
}

#[test]
fn a_read_only_state_root_with_state_is_one_clear_error() {
    let sandbox = Sandbox::new().env("TASKS_IDLE_EXIT_MS", "100");
    let id = sandbox.start("echo kept");
    sandbox.ok(&["wait", &id]);
    // The supervisor leaves once idle; then the root is made read-only in a mount namespace
    // of its own (user namespaces: a root user is not stopped by file modes).
    eventually("the supervisor to leave", || {
        crate::support::processes_of(sandbox.root())
            .is_empty()
            .then_some(())
    });
    let root = sandbox.root().display().to_string();
    let tasks = env!("CARGO_BIN_EXE_tasks");
    let script = format!(
        "mount --bind '{root}' '{root}' && mount -o remount,bind,ro '{root}' || exit 99; \
         '{tasks}' run -- echo again; echo \"run $?\" >&2; \
         '{tasks}' ps --all >/dev/null; echo \"ps $?\" >&2"
    );
    let mut unshare = std::process::Command::new("unshare");
    sandbox.environment(&mut unshare);
    let unshare = unshare.args(["-rm", "sh", "-c", &script]).output().unwrap();
    if unshare.status.code() == Some(99) || !unshare.status.success() {
        crate::support::skip(&format!("no user and mount namespaces here: {unshare:?}"));
        return;
    }
    let said = String::from_utf8_lossy(&unshare.stderr);
    let lines: Vec<&str> = said.lines().collect();
    // #41.13: a raw log line (`… WARN task_session::client: cannot open …`) and a doubled
    // `supervisor: supervisor:` prefix.
    assert_eq!(lines.len(), 3, "one error line, then the two codes: {said}");
    assert!(
        lines[0].starts_with("tasks: supervisor: could not start: ")
            && lines[0].contains("Read-only file system"),
        "{said}"
    );
    assert!(!said.contains("supervisor: supervisor:"), "{said}");
    assert_eq!(lines[1], "run 69", "the table's code: {said}");
    assert_eq!(lines[2], "ps 0", "reading still works: {said}");
}
