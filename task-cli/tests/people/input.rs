//! `tasks input ID TEXT|-|--close`: writing to the stdin of a task run with `--stdin pipe`;
//! stdin stays `/dev/null` without it.

use std::io::Write;
use std::process::Stdio;

use crate::sandbox::Sandbox;
use crate::support::eventually;
use crate::support::tmux::Tmux;

const LINE_READER: &str = r#"while IFS= read -r l; do echo "got:$l"; done"#;

/// Starts `command` with a stdin pipe; returns its id.
fn start_piped(sandbox: &Sandbox, command: &str) -> String {
    sandbox
        .ok(&["run", "--stdin", "pipe", "--", command])
        .trim()
        .to_owned()
}

/// Waits for `id` to end; returns its exit status.
fn wait(sandbox: &Sandbox, id: &str) -> Option<i32> {
    sandbox.run(&["wait", "--no-deliver", id]).status.code()
}

/// The notifications delivered now for `id` (each claimed once).
fn notifications_of(sandbox: &Sandbox, id: &str) -> usize {
    let lines = sandbox.ok(&["notifications", "--format", "json"]);
    lines
        .lines()
        .filter(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["taskId"] == id)
        .count()
}

/// Runs `tasks ARGS` expecting it to fail; returns its exit code and stderr.
fn refused(sandbox: &Sandbox, args: &[&str]) -> (Option<i32>, String) {
    let output = sandbox.run(args);
    assert!(!output.status.success(), "tasks {args:?} succeeded");
    (
        output.status.code(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn lines_reach_a_line_reader_in_order_and_close_ends_it_with_one_notification() {
    let sandbox = Sandbox::new();
    let id = start_piped(&sandbox, LINE_READER);
    for line in ["first", "second line", "  third, with spaces  "] {
        assert_eq!(sandbox.ok(&["input", &id, line]), "");
    }
    sandbox.ok(&["input", &id, "--close"]);
    assert_eq!(wait(&sandbox, &id), Some(0));
    assert_eq!(
        sandbox.ok(&["output", &id]),
        "got:first\ngot:second line\ngot:  third, with spaces  \n"
    );
    assert_eq!(notifications_of(&sandbox, &id), 1);
    assert_eq!(notifications_of(&sandbox, &id), 0, "delivered once");
}

#[test]
fn ten_mib_from_stdin_reach_wc_exactly_with_bounded_memory() {
    const MIB: usize = 1024 * 1024;
    let sandbox = Sandbox::new();
    let id = start_piped(&sandbox, "wc -c");
    let mut writer = sandbox
        .command(&["input", &id, "-", "--close"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = writer.id();
    // Every byte value, newlines rare and irregular: chunks end at line ends or at full size.
    let block: Vec<u8> = (0..MIB).map(|i| (i * 7 % 251) as u8).collect();
    let mut stdin = writer.stdin.take().unwrap();
    stdin.write_all(&block).unwrap();
    // A pipe holds 64 KiB: by now the client has read (and sent on) nearly all of the first MiB.
    let peak_after_one = peak_rss_kib(pid);
    for _ in 1..10 {
        stdin.write_all(&block).unwrap();
    }
    let peak_after_ten = peak_rss_kib(pid);
    drop(stdin);
    assert!(writer.wait().unwrap().success());
    assert!(
        peak_after_ten < peak_after_one + 2 * 1024,
        "the client's peak memory grew from {peak_after_one} KiB to {peak_after_ten} KiB for 9 MiB more"
    );
    assert_eq!(wait(&sandbox, &id), Some(0));
    assert_eq!(sandbox.ok(&["output", &id]).trim(), (10 * MIB).to_string());
}

/// `VmHWM` of a live process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn eight_concurrent_writers_of_fifty_lines_each_never_interleave_within_a_line() {
    let sandbox = Sandbox::new();
    let id = start_piped(&sandbox, "cat");
    // Writers 0, 2, 4, 6 copy their stdin (`-`): lines long enough that a chunk holds only a
    // few of them (and ends mid-line unless cut at a line end). Writers 1, 3, 5, 7 run `tasks input ID TEXT` once per line.
    let line = |writer: usize, n: usize| {
        let pad = if writer.is_multiple_of(2) { 3000 } else { 20 };
        format!(
            "w{writer}-{n:02}-{}",
            char::from(b'a' + writer as u8).to_string().repeat(pad)
        )
    };
    std::thread::scope(|scope| {
        for writer in 0..8_usize {
            let (sandbox, id) = (&sandbox, &id);
            scope.spawn(move || {
                if writer.is_multiple_of(2) {
                    // From a file, so every read fills the client's buffer: chunks must be cut
                    // at line ends, not where the buffer ends.
                    let file = sandbox.root().join(format!("lines-{writer}"));
                    let lines: String = (0..50).map(|n| format!("{}\n", line(writer, n))).collect();
                    std::fs::write(&file, lines).unwrap();
                    let status = sandbox
                        .command(&["input", id, "-"])
                        .stdin(std::fs::File::open(&file).unwrap())
                        .status()
                        .unwrap();
                    assert!(status.success());
                } else {
                    for n in 0..50 {
                        sandbox.ok(&["input", id, &line(writer, n)]);
                    }
                }
            });
        }
    });
    sandbox.ok(&["input", &id, "--close"]);
    assert_eq!(wait(&sandbox, &id), Some(0));
    let output = sandbox.ok(&["output", &id]);
    let received: Vec<&str> = output.lines().collect();
    assert_eq!(received.len(), 400, "every line arrives, none twice");
    let mut expected: Vec<String> = (0..8)
        .flat_map(|w| (0..50).map(move |n| (w, n)))
        .map(|(w, n)| line(w, n))
        .collect();
    let mut whole: Vec<String> = received.iter().map(|l| (*l).to_owned()).collect();
    // Each writer's own lines arrive in the order it sent them.
    for writer in 0..8 {
        let prefix = format!("w{writer}-");
        let own: Vec<&String> = whole.iter().filter(|l| l.starts_with(&prefix)).collect();
        let sent: Vec<String> = (0..50).map(|n| line(writer, n)).collect();
        assert_eq!(own, sent.iter().collect::<Vec<_>>(), "writer {writer}");
    }
    expected.sort();
    whole.sort();
    assert_eq!(whole, expected, "every line whole");
}

#[test]
fn input_is_refused_clearly_and_the_supervisor_serves_on() {
    let sandbox = Sandbox::new();
    // A task started without a pipe.
    let unpiped = sandbox.start("sleep 1000");
    let (code, said) = refused(&sandbox, &["input", &unpiped, "hello"]);
    assert_eq!(code, Some(70));
    assert!(
        said.contains("started without a stdin pipe") && said.contains("--stdin pipe"),
        "{said}"
    );
    // A finished task.
    let finished = start_piped(&sandbox, "true");
    assert_eq!(wait(&sandbox, &finished), Some(0));
    let (code, said) = refused(&sandbox, &["input", &finished, "hello"]);
    assert_eq!(code, Some(70));
    assert!(said.contains("has already ended (completed)"), "{said}");
    // Stdin already closed on request.
    let closed = start_piped(&sandbox, "sleep 1000");
    sandbox.ok(&["input", &closed, "--close"]);
    for args in [["input", &closed, "more"], ["input", &closed, "--close"]] {
        let (code, said) = refused(&sandbox, &args);
        assert_eq!(code, Some(70));
        assert!(said.contains("is already closed"), "{said}");
    }
    // A process that closed its stdin itself: EPIPE is reported, the supervisor lives.
    let pid = supervisor_pid(&sandbox);
    let closer = start_piped(&sandbox, "exec 0<&-; echo closed; sleep 1000");
    eventually("the task to close its stdin", || {
        (sandbox.ok(&["output", &closer]) == "closed\n").then_some(())
    });
    let (code, said) = refused(&sandbox, &["input", &closer, "hello"]);
    assert_eq!(code, Some(74));
    assert!(said.contains("closed its stdin"), "{said}");
    // A task of a type that takes no input.
    let monitor = sandbox
        .ok(&["monitor", "--persistent", "--", "sleep 1000"])
        .trim()
        .to_owned();
    let (code, said) = refused(&sandbox, &["input", &monitor, "hello"]);
    assert_eq!(code, Some(70));
    assert!(
        said.contains("monitor_mcp task, which takes no input") && said.contains("tasks send"),
        "{said}"
    );
    // Malformed and unknown ids.
    let (code, said) = refused(&sandbox, &["input", "../etc", "hello"]);
    assert_eq!(code, Some(65));
    assert!(said.contains("malformed task id"), "{said}");
    let (code, said) = refused(&sandbox, &["input", "b00000000", "hello"]);
    assert_eq!(code, Some(66));
    assert!(said.contains("no task b00000000"), "{said}");
    // The same supervisor still serves: a new piped task gets its input.
    let echo = start_piped(&sandbox, LINE_READER);
    sandbox.ok(&["input", &echo, "still here", "--close"]);
    assert_eq!(wait(&sandbox, &echo), Some(0));
    assert_eq!(sandbox.ok(&["output", &echo]), "got:still here\n");
    assert_eq!(
        supervisor_pid(&sandbox),
        pid,
        "the supervisor is the same process"
    );
    sandbox.ok(&["kill", &unpiped, &closed, &closer, &monitor]);
}

/// The pid of the session's supervisor, as its lock file says.
fn supervisor_pid(sandbox: &Sandbox) -> u32 {
    let lock = sandbox.root().join("default").join("supervisor.lock");
    std::fs::read_to_string(lock)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn restart_of_a_piped_task_keeps_its_stdin_pipe() {
    let sandbox = Sandbox::new();
    let first = start_piped(&sandbox, LINE_READER);
    sandbox.ok(&["input", &first, "one", "--close"]);
    assert_eq!(wait(&sandbox, &first), Some(0));
    let second = sandbox.ok(&["restart", &first]).trim().to_owned();
    assert_ne!(second, first);
    sandbox.ok(&["input", &second, "two"]);
    sandbox.ok(&["input", &second, "--close"]);
    assert_eq!(wait(&sandbox, &second), Some(0));
    assert_eq!(sandbox.ok(&["output", &second]), "got:two\n");
}

#[test]
fn without_the_flag_stdin_is_dev_null_and_a_read_sees_end_of_file_at_once() {
    let sandbox = Sandbox::new();
    let id = sandbox.start("if read -r line; then echo \"read:$line\"; else echo eof; fi");
    assert_eq!(wait(&sandbox, &id), Some(0));
    assert_eq!(sandbox.ok(&["output", &id]), "eof\n");
}

#[test]
fn typed_lines_reach_the_task_from_a_terminal_until_ctrl_d() {
    let sandbox = Sandbox::new();
    let id = start_piped(&sandbox, LINE_READER);
    let tasks = env!("CARGO_BIN_EXE_tasks");
    let done = sandbox.root().join("input-done");
    let Some(tmux) = Tmux::start(
        &sandbox,
        &format!(
            "{tasks} input {id} -; echo \"input exit $?\" > {}; sleep 1000",
            done.display()
        ),
    ) else {
        return;
    };
    tmux.keys(&["typed one", "Enter"]);
    tmux.keys(&["typed two", "Enter"]);
    eventually("both typed lines in the task's output", || {
        (sandbox.ok(&["output", &id]) == "got:typed one\ngot:typed two\n").then_some(())
    });
    tmux.keys(&["C-d"]);
    // The shell creates the file, then writes the line: wait for the whole line.
    let said = eventually("tasks input to end at Ctrl-D", || {
        std::fs::read_to_string(&done)
            .ok()
            .filter(|said| said.ends_with('\n'))
    });
    assert_eq!(said, "input exit 0\n");
    // The task is still live and reading: end of file was for `tasks input`, not the task.
    sandbox.ok(&["input", &id, "--close"]);
    assert_eq!(wait(&sandbox, &id), Some(0));
    assert_eq!(
        sandbox.ok(&["output", &id]),
        "got:typed one\ngot:typed two\n"
    );
}

#[test]
fn completion_offers_input_its_task_ids_and_the_stdin_modes() {
    let sandbox = Sandbox::new();
    let id = start_piped(&sandbox, "sleep 1000");
    let commands = sandbox.complete_bash("tasks in", 1);
    assert!(
        commands.split_whitespace().any(|w| w == "input"),
        "{commands}"
    );
    let ids = sandbox.complete_bash("tasks input ''", 2);
    assert!(ids.split_whitespace().any(|w| w == id), "{ids}");
    let modes = sandbox.complete_bash("tasks run --stdin ''", 3);
    assert_eq!(
        modes.split_whitespace().collect::<Vec<_>>(),
        ["null", "pipe"]
    );
    sandbox.ok(&["kill", &id]);
}
