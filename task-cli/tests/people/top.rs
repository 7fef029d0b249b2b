//! `tasks top` on a real terminal (tmux, 80×24): the screen shows the session's tasks, follows
//! their changes, kills with `x`, helps with `?`, and gives the terminal back as it found it
//! on `q` and on SIGTERM. The streaming `run --wait` on the same terminal.

use crate::sandbox::Sandbox;
use crate::support::tmux::Tmux;
use crate::support::{eventually, processes_of};

/// The shell around the dashboard: a line before it, and after it the exit status and the
/// terminal's settings (to see that raw mode was undone).
fn around_top(sandbox: &Sandbox) -> String {
    around_top_with(sandbox, "")
}

/// [`around_top`] with `env` (`NAME=value …`) before the command.
fn around_top_with(sandbox: &Sandbox, env: &str) -> String {
    format!(
        "echo BEFORE-TOP; {env} {} top --interval 100ms; echo \"EXIT $?\"; stty -a > {}; sleep 1000",
        env!("CARGO_BIN_EXE_tasks"),
        sandbox.root().join("stty.txt").display()
    )
}

fn assert_restored(sandbox: &Sandbox, tmux: &Tmux) {
    let screen = tmux.wait_for("the dashboard to end", |s| s.contains("EXIT 0"));
    assert!(
        screen.contains("BEFORE-TOP"),
        "the screen before top is back:\n{screen}"
    );
    assert!(
        !screen.contains("Tasks ─"),
        "the dashboard is gone:\n{screen}"
    );
    let stty = eventually("stty's report", || {
        std::fs::read_to_string(sandbox.root().join("stty.txt"))
            .ok()
            .filter(|s| s.contains("icanon"))
    });
    let flags: Vec<&str> = stty.split_whitespace().collect();
    for flag in ["icanon", "echo", "isig"] {
        assert!(flags.contains(&flag), "{flag} is back on:\n{stty}");
    }
}

fn row_of<'a>(screen: &'a str, id: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.trim_start().starts_with(id))
        .unwrap_or("")
}

#[test]
fn top_shows_the_tasks_follows_an_end_kills_with_x_and_restores_the_terminal() {
    let sandbox = Sandbox::new();
    let gate = sandbox.root().join("gate");
    let ending = sandbox.start(&format!(
        "echo started; while [ ! -e {} ]; do sleep 0.01; done; echo finished",
        gate.display()
    ));
    let sleeper = sandbox.start("sleep 1000");
    let Some(tmux) = Tmux::start(&sandbox, &around_top(&sandbox)) else {
        return;
    };
    let screen = tmux.wait_for("both tasks running", |s| {
        row_of(s, &ending).contains("running") && row_of(s, &sleeper).contains("running")
    });
    assert!(screen.contains("Shells"), "{screen}");
    assert!(
        screen.contains("2 shells"),
        "the pill in the header:\n{screen}"
    );
    // A capture can land mid-frame: wait for the frame's last row.
    let screen = tmux.wait_for("the keys at the bottom", |s| {
        s.lines().nth(23).is_some_and(|row| row.contains("q quit"))
    });
    let rows = tmux.screen();
    assert_eq!(rows.len(), 24, "{screen}");

    std::fs::write(&gate, "").unwrap();
    tmux.wait_for("the end to show", |s| {
        row_of(s, &ending).contains("completed")
    });

    // Select the sleeper (the output pane names the selected task), then kill it.
    eventually("the sleeper selected", || {
        let screen = tmux.screen().join("\n");
        if screen.contains(&format!("Output of {sleeper}")) {
            return Some(());
        }
        tmux.keys(&["Down"]);
        None
    });
    tmux.keys(&["x"]);
    tmux.wait_for("the kill question", |s| {
        s.contains("Kill ") && s.contains("y/n")
    });
    tmux.keys(&["y"]);
    tmux.wait_for("the kill answer", |s| {
        s.contains(&format!("{sleeper}: killed"))
    });
    let killed = sandbox
        .statuses()
        .into_iter()
        .any(|(id, status)| id == sleeper && status == "killed");
    assert!(killed, "the kill key killed the task");

    tmux.keys(&["q"]);
    assert_restored(&sandbox, &tmux);
}

#[test]
fn top_shows_help_and_the_task_list() {
    let sandbox = Sandbox::new();
    sandbox.ok(&["list", "create", "Design API"]);
    sandbox.ok(&["list", "create", "Build API"]);
    sandbox.ok(&[
        "list",
        "update",
        "2",
        "--add-blocked-by",
        "1",
        "--owner",
        "bob",
    ]);
    let Some(tmux) = Tmux::start(&sandbox, &around_top(&sandbox)) else {
        return;
    };
    tmux.wait_for("the dashboard", |s| s.contains("No background tasks"));
    tmux.keys(&["?"]);
    tmux.wait_for("the help", |s| {
        s.contains("Keys") && s.contains("kill the selected task")
    });
    tmux.keys(&["Space"]);
    tmux.wait_for("the help to close", |s| {
        !s.contains("kill the selected task")
    });
    tmux.keys(&["l"]);
    let screen = tmux.wait_for("the task list", |s| s.contains("Task list default"));
    assert!(
        screen.contains("#1   pending     ready   Design API"),
        "{screen}"
    );
    assert!(screen.contains("Build API (bob) ← #1"), "{screen}");
    tmux.keys(&["q"]);
    assert_restored(&sandbox, &tmux);
}

#[test]
fn top_restores_the_terminal_on_sigterm() {
    let sandbox = Sandbox::new();
    sandbox.start("sleep 1000");
    let Some(tmux) = Tmux::start(&sandbox, &around_top(&sandbox)) else {
        return;
    };
    tmux.wait_for("the dashboard", |s| s.contains("Shells"));
    let top = eventually("the top process", || {
        processes_of(sandbox.root()).into_iter().find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == b"top"))
        })
    });
    let pid = rustix::process::Pid::from_raw(top).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    assert_restored(&sandbox, &tmux);
}

#[test]
fn run_wait_on_a_terminal_streams_the_output_then_says_how_it_ended() {
    let sandbox = Sandbox::new();
    let gate = sandbox.root().join("gate");
    let shell = format!(
        "{} run --wait -- 'echo first-line; while [ ! -e {} ]; do sleep 0.01; done; echo last-line'; echo \"EXIT $?\"; sleep 1000",
        env!("CARGO_BIN_EXE_tasks"),
        gate.display()
    );
    let Some(tmux) = Tmux::start(&sandbox, &shell) else {
        return;
    };
    let screen = tmux.wait_for("the first line", |s| s.contains("first-line"));
    assert!(!screen.contains("last-line"), "{screen}");
    assert!(!screen.contains("<task-notification>"), "{screen}");
    std::fs::write(&gate, "").unwrap();
    let screen = tmux.wait_for("the end", |s| s.contains("EXIT 0"));
    let summary = screen
        .lines()
        .find(|l| l.starts_with('✓'))
        .unwrap_or_else(|| panic!("no summary line:\n{screen}"));
    assert!(summary.contains("completed in"), "{summary}");
    assert!(screen.contains("last-line"), "{screen}");
}

#[test]
fn top_exits_when_its_terminal_goes_away() {
    let sandbox = Sandbox::new();
    let Some(tmux) = Tmux::start(
        &sandbox,
        &format!("{} top --interval 100ms", env!("CARGO_BIN_EXE_tasks")),
    ) else {
        return;
    };
    tmux.wait_for("the dashboard", |s| s.contains("No background tasks"));
    let is_top = |pid: &i32| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|&b| b == 0).any(|arg| arg == b"top"))
    };
    let top = eventually("the top process", || {
        processes_of(sandbox.root()).into_iter().find(is_top)
    });
    drop(tmux); // kills the server: the terminal is gone
    eventually("top to leave with its terminal", || {
        (!crate::support::is_alive(top)).then_some(())
    });
}

#[test]
fn top_takes_keys_again_after_the_pager() {
    let sandbox = Sandbox::new();
    sandbox.start("echo paged");
    // The pager: records that it ran (with the output file), then returns at once.
    let paged = sandbox.root().join("paged");
    let env = format!("PAGER='touch {}'", paged.display());
    let Some(tmux) = Tmux::start(&sandbox, &around_top_with(&sandbox, &env)) else {
        return;
    };
    tmux.wait_for("the task's output", |s| s.contains("Output of"));
    tmux.keys(&["o"]);
    eventually("the pager to run", || paged.exists().then_some(()));
    tmux.wait_for("the dashboard back", |s| s.contains("q quit"));
    // A key is read at once (raw mode is back): the help opens without an Enter.
    tmux.keys(&["?"]);
    tmux.wait_for("the help", |s| {
        s.contains("Keys") && s.contains("kill the selected task")
    });
    tmux.keys(&["Space"]);
    tmux.keys(&["q"]);
    assert_restored(&sandbox, &tmux);
}

#[test]
fn o_pages_an_agents_conversation_as_tasks_output_prints_it() {
    let sandbox = Sandbox::for_agents();
    let command = crate::stream::counting_agent(&sandbox);
    let mut args = vec!["agent", "--prompt", "count them", "--wait"];
    args.extend(command.split(' '));
    let id = sandbox.ok(&args).lines().next().unwrap().to_owned();
    // The pager: copies what it is given on stdin to a file.
    let paged = sandbox.root().join("paged");
    let env = format!("PAGER='tee {}'", paged.display());
    let Some(tmux) = Tmux::start(&sandbox, &around_top_with(&sandbox, &env)) else {
        return;
    };
    // Its end was delivered (`--wait` printed it): finished tasks are shown with `a`.
    tmux.wait_for("the dashboard", |s| s.contains("1 finished hidden"));
    tmux.keys(&["a"]);
    tmux.wait_for("the agent's output", |s| s.contains("Output of"));
    tmux.keys(&["o"]);
    // #41.7: `o` paged the raw JSON lines of the transcript.
    let text = eventually("the pager's copy", || {
        std::fs::read_to_string(&paged)
            .ok()
            .filter(|text| text.contains("✓ 3 files"))
    });
    assert_eq!(text, sandbox.ok(&["output", &id]));
    assert!(!text.contains("\"type\""), "{text}");
    tmux.wait_for("the dashboard back", |s| s.contains("q quit"));
    tmux.keys(&["q"]);
    assert_restored(&sandbox, &tmux);
}
