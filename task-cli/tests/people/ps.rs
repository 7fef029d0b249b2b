//! `tasks ps` answers questions: newest first, how each task ended, how long it took and when,
//! filters, colour only where wanted, widths that fit, a hint for what is hidden.

use crate::sandbox::Sandbox;
use crate::support::eventually;

/// The sandbox with a failed, a completed and a running task, started in that order; their ids.
fn three_tasks(sandbox: &Sandbox) -> [String; 3] {
    let failed = sandbox.start("exit 3");
    let done = sandbox.start("echo hi");
    let running = sandbox.start("sleep 1000");
    eventually("two tasks to end", || {
        let ended = sandbox
            .statuses()
            .iter()
            .filter(|(_, s)| s == "completed" || s == "failed")
            .count();
        (ended == 2).then_some(())
    });
    [failed, done, running]
}

#[test]
fn ps_lists_the_newest_first_with_how_and_when_each_ended() {
    let sandbox = Sandbox::new();
    let [failed, done, running] = three_tasks(&sandbox);
    let table = sandbox.ok(&["ps", "--all"]);
    let lines: Vec<&str> = table.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        [
            "ID",
            "TYPE",
            "STATUS",
            "END",
            "AGE",
            "TOOK",
            "ENDED",
            "OUTPUT",
            "DESCRIPTION"
        ]
    );
    assert!(lines[1].starts_with(&running), "{table}");
    assert!(lines[2].starts_with(&done), "{table}");
    assert!(lines[3].starts_with(&failed), "{table}");
    assert!(
        lines[3].contains("failed") && lines[3].contains("exit 3"),
        "{table}"
    );
    assert!(lines[3].contains(" ago"), "the end time: {table}");
}

#[test]
fn ps_filters_by_status_and_type_and_hints_at_hidden_tasks() {
    let sandbox = Sandbox::new();
    let [failed, done, running] = three_tasks(&sandbox);
    let only_failed = sandbox.ok(&["ps", "--status", "failed"]);
    assert!(
        only_failed.contains(&failed) && !only_failed.contains(&done),
        "{only_failed}"
    );
    let live = sandbox.ok(&["ps", "--status", "live", "--type", "bash"]);
    assert!(live.contains(&running) && !live.contains(&failed), "{live}");
    assert_eq!(sandbox.ok(&["ps", "--type", "monitor"]), "No tasks.\n");

    sandbox.ok(&["notifications"]);
    let output = sandbox.run(&["ps"]);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(!stdout.contains(&done), "{stdout}");
    let hint = String::from_utf8(output.stderr).unwrap();
    assert!(hint.contains("2 finished tasks not shown"), "{hint}");
    let bad = sandbox.run(&["ps", "--type", "cron"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn ps_fits_the_terminal_width() {
    let sandbox = Sandbox::new();
    sandbox.start(&format!("echo {}", "a-very-long-description ".repeat(10)));
    for columns in ["60", "80", "120"] {
        let output = sandbox
            .command(&["ps", "--all"])
            .env("COLUMNS", columns)
            .output()
            .unwrap();
        let table = String::from_utf8(output.stdout).unwrap();
        let width: usize = columns.parse().unwrap();
        for line in table.lines() {
            assert!(line.chars().count() <= width, "{columns}: {line:?}");
        }
        assert!(table.contains('…'), "the description is cut: {table}");
    }
}

#[test]
fn ps_colours_a_terminal_unless_no_color_and_follows_color() {
    let sandbox = Sandbox::new();
    sandbox.start("true");
    eventually("the task to end", || {
        sandbox
            .statuses()
            .iter()
            .any(|(_, s)| s == "completed")
            .then_some(())
    });
    assert!(sandbox.on_terminal("ps --all", false).contains("\x1b[32m"));
    assert!(!sandbox.on_terminal("ps --all", true).contains("\x1b["));
    assert!(
        !sandbox
            .on_terminal("ps --all --color never", false)
            .contains("\x1b[")
    );
    assert!(
        sandbox
            .ok(&["ps", "--all", "--color", "always"])
            .contains("\x1b[32m")
    );
    assert!(
        !sandbox.ok(&["ps", "--all"]).contains("\x1b["),
        "no colour in a pipe"
    );
}

#[test]
fn durations_are_accepted_as_people_write_them() {
    let sandbox = Sandbox::new();
    let sleeper = sandbox.start("sleep 1000");
    let waited = sandbox.run(&["wait", "--timeout", "50ms", &sleeper]);
    assert_eq!(waited.status.code(), Some(124));
    let timed = sandbox.ok(&["run", "--timeout", "1m30s", "--", "true"]);
    assert_eq!(timed.trim().len(), 9);
}
