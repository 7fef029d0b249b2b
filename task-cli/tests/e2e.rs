//! End-to-end tests: the built `tasks` binary, run as separate processes, each test on its own
//! temporary `TASKS_ROOT`. Every process a test causes (supervisors, task trees) carries that
//! root in its environment; the [`Sandbox`] guard kills all of them by pid when the test ends,
//! pass or fail.
//!
//! They run the binary Cargo built for the tests, or the one named by `TASKS_E2E_BIN` (CI points
//! it at the static-pie build that `cargo build-tasks` makes, the binary as shipped).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{eventually, is_alive, sigkill};

mod support;

const DEADLINE: Duration = Duration::from_secs(20);

/// The `tasks` binary under test.
fn tasks_bin() -> String {
    std::env::var("TASKS_E2E_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_tasks").to_owned())
}

/// A test's root: the shared [`TasksRoot`] running [`tasks_bin`], with what this suite adds.
use support::root::TasksRoot as Sandbox;

/// A root with the supervisor's default sweep, with `extra` settings.
fn root_with(extra: &[(&'static str, &str)]) -> Sandbox {
    let root = Sandbox::new()
        .bin(tasks_bin())
        .env_remove("TASKS_SWEEP_MS")
        .env_remove("TASK_MAX_OUTPUT_LENGTH");
    extra.iter().fold(root, |root, (k, v)| root.env(k, v))
}

impl Sandbox {
    fn session_dir(&self) -> PathBuf {
        self.root().join("default")
    }

    fn start(&self, command: &str) -> String {
        self.ok(&["run", "--", command]).trim().to_owned()
    }

    fn task(&self, id: &str) -> Value {
        let all = self.json(&["ps", "--all"]);
        all.as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} not listed in {all}"))
    }

    fn supervisor_pid(&self) -> i32 {
        let text = std::fs::read_to_string(self.session_dir().join("supervisor.lock")).unwrap();
        text.trim().parse().unwrap()
    }

    /// Every live process whose environment names this sandbox's root.
    fn processes(&self) -> Vec<i32> {
        support::processes_of(self.root())
    }
}

fn code(output: &Output) -> i32 {
    output.status.code().unwrap_or(-1)
}

fn stderr_line(output: &Output) -> String {
    let text = String::from_utf8(output.stderr.clone()).unwrap();
    assert_eq!(
        text.lines().count(),
        1,
        "expected one stderr line, got {text:?}"
    );
    assert!(
        !text.contains("panicked") && !text.contains("backtrace"),
        "{text}"
    );
    text
}

#[test]
fn a_task_started_by_one_invocation_is_listed_read_waited_and_killed_by_later_ones() {
    let sandbox = root_with(&[]);
    let id = sandbox.start("echo hello; echo world");
    assert_eq!(sandbox.run(&["wait", &id]).status.code(), Some(0));
    assert_eq!(sandbox.ok(&["output", &id]), "hello\nworld\n");
    assert_eq!(sandbox.ok(&["output", &id, "--tail", "1"]), "world\n");
    let delta = sandbox.json(&["output", &id, "--offset", "6"]);
    assert_eq!(delta["output"], "world\n");
    assert_eq!(delta["newOffset"], 12);
    assert_eq!(sandbox.task(&id)["status"], "completed");

    let sleeper = sandbox.start("sleep 1000");
    // Listed at once: `pending` until the supervisor has started its process (the id is handed
    // out first), then `running`.
    let status_in_ps = || {
        let live = sandbox.json(&["ps"]);
        let listed = live.as_array().unwrap().iter().find(|t| t["id"] == sleeper);
        listed.map(|t| t["status"].as_str().unwrap().to_owned())
    };
    let first = status_in_ps().expect("listed as soon as its id is printed");
    assert!(["pending", "running"].contains(&first.as_str()), "{first}");
    eventually("the sleeper to be running", || {
        (status_in_ps()?.as_str() == "running").then_some(())
    });
    let killed = sandbox.json(&["kill", &sleeper]);
    assert_eq!(killed[0]["result"], "killed");
    assert_eq!(code(&sandbox.run(&["wait", &sleeper])), 137);
    assert_eq!(sandbox.task(&sleeper)["status"], "killed");
    assert!(
        !sandbox.ok(&["ps"]).contains(&sleeper),
        "a killed task is hidden without --all"
    );
}

#[test]
fn output_follows_a_task_until_it_ends_and_formats_for_the_model() {
    let sandbox = root_with(&[]);
    let gate = sandbox.root().join("gate");
    let script = format!(
        "echo first; while [ ! -e {0} ]; do sleep 0.01; done; echo last",
        gate.display()
    );
    let id = sandbox.start(&script);
    let follower = sandbox
        .command(&["output", &id, "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    eventually("first line", || {
        sandbox
            .ok(&["output", &id])
            .starts_with("first")
            .then_some(())
    });
    std::fs::write(&gate, "").unwrap();
    let followed = follower.wait_with_output().unwrap();
    assert_eq!(String::from_utf8(followed.stdout).unwrap(), "first\nlast\n");
    let for_model = sandbox.ok(&["output", &id, "--for-model"]);
    assert_eq!(for_model, "first\nlast\n");
    let long = sandbox.start("yes x | head -c 50000");
    sandbox.ok(&["wait", &long]);
    let truncated = sandbox
        .command(&["output", &long, "--for-model"])
        .env("TASK_MAX_OUTPUT_LENGTH", "1000")
        .output()
        .unwrap();
    let text = String::from_utf8(truncated.stdout).unwrap();
    assert!(text.starts_with("[Truncated. Full output: "), "{text:.80}");
    assert!(text.chars().count() <= 1000);
}

#[test]
fn killing_a_tree_leaves_no_survivor() {
    let sandbox = root_with(&[]);
    let pids = sandbox.root().join("pids");
    let script = format!(
        "sleep 1001 & echo $! >> {0}; (sleep 1002 & echo $! >> {0}; wait) & \
         setsid sleep 1003 & echo $! >> {0}; wait",
        pids.display()
    );
    let id = sandbox.start(&script);
    let tree: Vec<i32> = eventually("three pids", || {
        let text = std::fs::read_to_string(&pids).ok()?;
        let pids: Vec<i32> = text.lines().filter_map(|l| l.parse().ok()).collect();
        (pids.len() == 3).then_some(pids)
    });
    assert!(tree.iter().all(|&pid| is_alive(pid)));
    sandbox.ok(&["kill", &id]);
    eventually("every process of the tree gone", || {
        tree.iter().all(|&pid| !is_alive(pid)).then_some(())
    });
    assert_eq!(sandbox.task(&id)["status"], "killed");
}

#[test]
fn live_background_shells_share_one_inotify_instance_of_the_supervisor() {
    // A user may hold 128 inotify instances: one per task starved every other program of the
    // user (editors, file watchers) once 128 tasks ran.
    let sandbox = root_with(&[]);
    let ids: Vec<String> = (0..5).map(|_| sandbox.start("sleep 1000")).collect();
    eventually("five shells running", || {
        let live = sandbox.json(&["ps"]);
        let running = live.as_array()?.iter().filter(|t| t["status"] == "running");
        (running.count() == 5).then_some(())
    });
    let instances = std::fs::read_dir(format!("/proc/{}/fd", sandbox.supervisor_pid()))
        .unwrap()
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter(|target| target.to_string_lossy() == "anon_inode:inotify")
        .count();
    assert_eq!(instances, 1, "inotify instances of the supervisor");
    let mut kill = vec!["kill"];
    kill.extend(ids.iter().map(String::as_str));
    sandbox.ok(&kill);
}

#[test]
fn a_prompt_waiting_command_shows_up_as_a_stall_warning() {
    let sandbox = root_with(&[
        ("TASKS_STALL_CHECK_MS", "20"),
        ("TASKS_STALL_THRESHOLD_MS", "100"),
    ]);
    let id = sandbox.start("printf 'Overwrite existing file? (y/n) '; sleep 1000");
    let warning = eventually("a stall warning", || {
        let lines = sandbox.ok(&["notifications", "--json"]);
        lines
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|n| n["taskId"] == id)
    });
    let text = warning["text"].as_str().unwrap();
    assert!(
        text.contains("appears to be waiting for interactive input"),
        "{text}"
    );
    assert!(
        !text.contains("<status>"),
        "a stall warning has no status: {text}"
    );
    assert!(text.contains("Last output:"), "{text}");
    assert_eq!(warning["priority"], "next");
    let task = sandbox.task(&id);
    assert_eq!(task["status"], "running");
    assert_eq!(
        task["notified"], false,
        "a running task is not notified: {task}"
    );
    sandbox.ok(&["kill", &id]);
}

#[test]
fn each_completion_is_delivered_exactly_once_when_two_readers_race() {
    let sandbox = root_with(&[]);
    let ids: Vec<String> = (0..8)
        .map(|i| sandbox.start(&format!("exit {}", i % 2)))
        .collect();
    let mut args = vec!["wait", "--no-deliver"];
    args.extend(ids.iter().map(String::as_str));
    sandbox.run(&args);
    let readers: Vec<_> = (0..4)
        .map(|_| {
            sandbox
                .command(&["notifications", "--json"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let delivered: Vec<String> = readers
        .into_iter()
        .flat_map(|reader| {
            let out = reader.wait_with_output().unwrap();
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .map(|line| {
            serde_json::from_str::<Value>(&line).unwrap()["taskId"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut sorted = delivered.clone();
    sorted.sort();
    let mut expected = ids.clone();
    expected.sort();
    assert_eq!(
        sorted, expected,
        "each completion exactly once: {delivered:?}"
    );
    assert_eq!(
        sandbox.ok(&["notifications"]),
        "",
        "nothing is delivered twice"
    );
    let log = std::fs::read_to_string(sandbox.session_dir().join("notifications.jsonl")).unwrap();
    assert_eq!(log.lines().count(), ids.len());
}

#[test]
fn wait_mirrors_exit_codes() {
    let sandbox = root_with(&[]);
    let ok = sandbox.start("true");
    let three = sandbox.start("exit 3");
    assert_eq!(code(&sandbox.run(&["wait", &ok])), 0);
    assert_eq!(code(&sandbox.run(&["wait", &three])), 3);
    assert_eq!(code(&sandbox.run(&["wait", &ok, &three])), 3);
    assert_eq!(code(&sandbox.run(&["run", "--wait", "--", "exit 5"])), 5);
    let sleeper = sandbox.start("sleep 1000");
    assert_eq!(
        code(&sandbox.run(&["wait", &sleeper, "--timeout", "50"])),
        124
    );
    sandbox.ok(&["kill", &sleeper]);
    assert_eq!(code(&sandbox.run(&["wait", &sleeper])), 137);
}

#[test]
fn run_wait_prints_the_id_and_the_notification_once() {
    let sandbox = root_with(&[]);
    let out = sandbox.ok(&["run", "--wait", "--", "echo", "hello"]);
    let (id, envelope) = out.split_once('\n').unwrap();
    assert!(envelope.starts_with("<task-notification>\n"), "{out}");
    assert!(
        envelope.contains(&format!("<task-id>{id}</task-id>")),
        "{out}"
    );
    assert!(envelope.contains("<status>completed</status>"), "{out}");
    assert!(
        envelope.contains("Background command &quot;echo hello&quot; completed (exit code 0)")
            || envelope.contains("Background command \"echo hello\" completed (exit code 0)"),
        "{out}"
    );
    assert_eq!(sandbox.ok(&["notifications"]), "");
}

#[test]
fn a_supervisor_killed_with_sigkill_leaves_its_task_marked_failed() {
    let sandbox = root_with(&[]);
    let pidfile = sandbox.root().join("pid");
    let sleep_pidfile = sandbox.root().join("sleep-pid");
    let id = sandbox.start(&format!(
        "echo $$ > {}; sleep 1000 & echo $! > {}; wait",
        pidfile.display(),
        sleep_pidfile.display()
    ));
    let read_pid =
        |path: &Path| -> Option<i32> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
    let child = eventually("the task's pid", || read_pid(&pidfile));
    let sleep = eventually("its sleep's pid", || read_pid(&sleep_pidfile));
    eventually("the process group in the snapshot", || {
        sandbox.task(&id)["kind"]["shell"]["process"]["pgid"]
            .as_i64()
            .filter(|&pgid| pgid == i64::from(child))
    });
    sigkill(sandbox.supervisor_pid());
    let task = eventually("the task marked failed", || {
        let task = sandbox.task(&id);
        (task["status"] == "failed").then_some(task)
    });
    assert_eq!(task["endReason"]["reason"], "supervisor_died", "{task}");
    let notices = sandbox.ok(&["notifications"]);
    assert!(notices.contains("<status>failed</status>"), "{notices}");
    assert!(notices.contains("its supervisor exited"), "{notices}");
    // A new supervisor starts for the next task, records the orphan's end and reaps what it
    // left (reads wrote and killed nothing).
    let next = sandbox.start("true");
    assert_eq!(code(&sandbox.run(&["wait", &next])), 0);
    eventually("the orphaned shell and its sleep gone", || {
        (!is_alive(child) && !is_alive(sleep)).then_some(())
    });
    let on_disk: serde_json::Value = serde_json::from_slice(
        &std::fs::read(
            sandbox
                .session_dir()
                .join("tasks")
                .join(format!("{id}.json")),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(on_disk["task"]["endReason"]["reason"], "supervisor_died");
    let later = sandbox.ok(&["notifications"]);
    assert!(
        !later.contains(&id),
        "the orphan's completion was delivered once: {later}"
    );
}

#[test]
fn a_corrupt_state_file_is_reported_by_name_and_the_others_are_still_listed() {
    let sandbox = root_with(&[]);
    let id = sandbox.start("true");
    sandbox.ok(&["wait", &id]);
    let corrupt = sandbox.session_dir().join("tasks").join("bcorrupt1.json");
    std::fs::write(&corrupt, "{\"id\": \"bcorrupt1\", \"sta").unwrap();
    let listed = sandbox.run(&["ps", "--all"]);
    assert!(listed.status.success());
    assert!(String::from_utf8_lossy(&listed.stdout).contains(&id));
    let warning = String::from_utf8(listed.stderr).unwrap();
    assert!(
        warning.contains(&corrupt.display().to_string()),
        "{warning}"
    );
    let error = sandbox.run(&["output", "bcorrupt1"]);
    assert_ne!(code(&error), 0);
    assert!(stderr_line(&error).contains("bcorrupt1.json"));
}

#[test]
fn bad_ids_get_clear_errors_with_distinct_exit_codes() {
    let sandbox = root_with(&[]);
    for args in [
        &["output", "../etc/passwd"][..],
        &["wait", "b1234 x"],
        &["kill", "@team"],
    ] {
        let out = sandbox.run(args);
        assert_eq!(code(&out), 65, "{args:?}");
        assert!(stderr_line(&out).contains("malformed task id"));
    }
    // A well-formed id, a name (`B12345678` could be an agent's) or a prefix of an id
    // (`b1234`) that names no task is unknown.
    for (args, what) in [
        (&["output", "b12345678"][..], "b12345678"),
        (&["wait", "b12345678"], "b12345678"),
        (&["kill", "b12345678"], "b12345678"),
        (&["wait", "B12345678"], "B12345678"),
        (&["kill", "b1234"], "b1234"),
    ] {
        let out = sandbox.run(args);
        assert_eq!(code(&out), 66, "{args:?}");
        assert!(stderr_line(&out).contains(&format!("no task {what}")));
    }
    let file_root = sandbox.root().join("not-a-dir");
    std::fs::write(&file_root, "").unwrap();
    let out = sandbox
        .command(&["ps"])
        .env("TASKS_ROOT", &file_root)
        .output()
        .unwrap();
    assert_eq!(code(&out), 74);
    assert!(stderr_line(&out).contains("not-a-dir"));
}

#[test]
fn racing_starters_converge_on_one_detached_supervisor_that_exits_when_idle() {
    // Long enough idle time that the winner outlives the losers' patience for the lock (500 ms):
    // a shorter one lets a loser take over from an idle winner, which is correct but would make
    // the pid checks below race with that hand-over.
    let sandbox = root_with(&[("TASKS_IDLE_EXIT_MS", "2000")]);
    let starters: Vec<_> = (0..6)
        .map(|_| {
            sandbox
                .command(&["run", "--", "true"])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let ids: Vec<String> = starters
        .into_iter()
        .map(|s| {
            let out = s.wait_with_output().unwrap();
            assert!(out.status.success());
            String::from_utf8(out.stdout).unwrap().trim().to_owned()
        })
        .collect();
    let supervisors = || {
        sandbox
            .processes()
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == b"__supervise"))
            })
            .collect::<Vec<_>>()
    };
    // The lock file names its holder once the holder has written it: wait for both to agree.
    let named = || {
        let text = std::fs::read_to_string(sandbox.session_dir().join("supervisor.lock")).ok()?;
        text.trim().parse::<i32>().ok()
    };
    let supervisor =
        eventually(
            "exactly one supervisor, named in the lock file",
            || match supervisors()[..] {
                [one] if named() == Some(one) => Some(one),
                _ => None,
            },
        );
    let stat = std::fs::read_to_string(format!("/proc/{supervisor}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    assert_eq!(
        fields[3],
        supervisor.to_string(),
        "the supervisor leads its own session"
    );
    for id in &ids {
        sandbox.ok(&["wait", id]);
    }
    eventually("the idle supervisor gone", || {
        supervisors().is_empty().then_some(())
    });
    assert!(!sandbox.session_dir().join("supervisor.sock").exists());
}

#[test]
fn help_and_completions_cover_every_subcommand() {
    let sandbox = root_with(&[]);
    let help = sandbox.ok(&["--help"]);
    for sub in [
        "run",
        "monitor",
        "ps",
        "output",
        "wait",
        "kill",
        "notifications",
        "list",
        "completions",
    ] {
        assert!(help.contains(sub), "{sub} missing from --help");
    }
    assert!(!help.contains("__supervise"));
    for shell in ["bash", "zsh", "fish"] {
        let script = sandbox.ok(&["completions", shell]);
        assert!(script.contains("notifications"), "{shell}");
    }
    let list_help = sandbox.ok(&["list", "--help"]);
    for op in [
        "create", "get", "update", "delete", "claim", "unassign", "ready", "graph", "doctor",
        "watch",
    ] {
        assert!(list_help.contains(op), "{op} missing from list --help");
    }
}

#[test]
fn monitor_lines_become_next_priority_events_before_the_completion() {
    let sandbox = root_with(&[]);
    let id = sandbox
        .ok(&[
            "monitor",
            "--description",
            "ticks",
            "--",
            "echo one; echo two",
        ])
        .trim()
        .to_owned();
    assert!(id.starts_with('m'), "{id}");
    sandbox.ok(&["wait", "--no-deliver", &id]);
    let notices: Vec<Value> = sandbox
        .ok(&["notifications", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let events: Vec<&str> = notices
        .iter()
        .filter_map(|n| n["notification"]["event"].as_str())
        .collect();
    assert_eq!(events, ["one", "two"]);
    assert!(notices.iter().all(|n| n["priority"] == "next"));
    let last = notices.last().unwrap()["text"].as_str().unwrap();
    assert!(last.contains("Monitor \"ticks\" stream ended"), "{last}");
}

#[test]
fn sessions_are_separate_and_task_lists_round_trip() {
    let sandbox = root_with(&[]);
    let id = sandbox
        .ok(&["--session", "other", "run", "--", "true"])
        .trim()
        .to_owned();
    sandbox.ok(&["--session", "other", "wait", &id]);
    assert_eq!(
        code(&sandbox.run(&["wait", &id])),
        66,
        "not in the default session"
    );
    let bad = sandbox.run(&["--session", "../up", "ps"]);
    assert_ne!(code(&bad), 0);
    assert!(stderr_line(&bad).contains("invalid session name"));

    assert_eq!(
        sandbox
            .ok(&["list", "create", "--subject", "Set up schema"])
            .trim(),
        "Task #1 created successfully: Set up schema"
    );
    sandbox.ok(&["list", "create", "--subject", "Write API"]);
    assert_eq!(
        sandbox
            .ok(&["list", "update", "2", "--add-blocked-by", "1"])
            .trim(),
        "Updated task #2 blockedBy"
    );
    let cycle = sandbox.run(&["list", "update", "1", "--add-blocked-by", "2"]);
    assert_eq!(code(&cycle), 70);
    assert!(String::from_utf8_lossy(&cycle.stdout).contains("cycle"));
    let task = sandbox.json(&["list", "get", "2"]);
    assert_eq!(task["task"]["blockedBy"][0], "1");
    let dot = sandbox.ok(&["list", "graph", "--dot"]);
    assert!(dot.contains("\"1\" -> \"2\""), "{dot}");
    let ready = sandbox.ok(&["list", "ready"]);
    assert!(
        ready.contains("#2 not ready: Write API (blocked by #1)"),
        "{ready}"
    );
    assert!(sandbox.root().join("lists/default/2.json").exists());
    let bad_id = sandbox.run(&["list", "get", "x1"]);
    assert_eq!(code(&bad_id), 65);
    // A completed task is done, not "not ready".
    sandbox.ok(&["list", "update", "1", "--status", "completed"]);
    let ready = sandbox.ok(&["list", "ready"]);
    assert_eq!(ready, "#2 ready: Write API\n");
    // unassign tells a person what changed (the lead's message stays in the JSON).
    sandbox.ok(&["list", "claim", "2", "--owner", "bob"]);
    let unassigned = sandbox.ok(&["list", "unassign", "--owner", "bob"]);
    assert_eq!(unassigned, "#2 Write API: back to pending, no owner\n");
    let again = sandbox.ok(&["list", "unassign", "--owner", "bob"]);
    assert_eq!(again, "bob had no unfinished task\n");
}

/// A command run by `script(1)` under a real pseudo-terminal, with this sandbox's environment;
/// what the terminal shows is collected from `script`'s stdout as it arrives.
struct Terminal {
    child: std::process::Child,
    screen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Terminal {
    fn start(sandbox: &Sandbox, args: &[&str]) -> Self {
        use std::io::Read;
        let line = std::iter::once(tasks_bin().as_str())
            .chain(args.iter().copied())
            .map(|word| format!("'{word}'"))
            .collect::<Vec<_>>()
            .join(" ");
        let mut command = Command::new("script");
        command.args([
            "--quiet",
            "--flush",
            "--return",
            "--command",
            &line,
            "/dev/null",
        ]);
        sandbox.environment(&mut command);
        command.stdout(Stdio::piped());
        let mut child = command.spawn().expect("script(1) from util-linux");
        let mut stdout = child.stdout.take().unwrap();
        let screen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = std::sync::Arc::clone(&screen);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stdout.read(&mut buf) {
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Self {
            child,
            screen,
            reader: Some(reader),
        }
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    fn wait(mut self) -> (i32, String) {
        let status = self.child.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        (status.code().unwrap_or(-1), self.screen())
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn wait_shows_a_spinner_on_a_terminal_and_none_when_piped() {
    let sandbox = root_with(&[]);
    let gate = sandbox.root().join("gate");
    let id = sandbox.start(&format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; exit 3",
        gate.display()
    ));
    let terminal = Terminal::start(&sandbox, &["wait", &id]);
    eventually("the spinner on the terminal", || {
        terminal
            .screen()
            .contains("waiting for 1 task(s)")
            .then_some(())
    });
    std::fs::write(&gate, b"").unwrap();
    let (code_on_terminal, screen) = terminal.wait();
    assert_eq!(
        code_on_terminal, 3,
        "wait mirrors the exit code: {screen:?}"
    );
    assert!(
        ['⠋', '⠙', '⠹'].iter().any(|frame| screen.contains(*frame)),
        "no spinner frame in {screen:?}"
    );
    assert!(screen.contains("\r\x1b[2K"), "the spinner line is erased");

    let piped = sandbox.run(&["wait", &id]);
    assert_eq!(code(&piped), 3);
    assert!(
        piped.stderr.is_empty(),
        "no spinner when stderr is not a terminal: {:?}",
        String::from_utf8_lossy(&piped.stderr)
    );
}

#[test]
fn ps_watch_refreshes_the_table_in_place_on_a_terminal() {
    let sandbox = root_with(&[]);
    let first = sandbox.start("sleep 1000");
    let terminal = Terminal::start(&sandbox, &["ps", "--watch"]);
    eventually("a first screen listing the task", || {
        terminal.screen().contains(&first).then_some(())
    });
    let second = sandbox.start("sleep 1000");
    eventually("a redrawn screen listing the new task", || {
        let screen = terminal.screen();
        let last = screen.rsplit("\x1b[H\x1b[2J").next().unwrap_or_default();
        (last.contains(&first) && last.contains(&second)).then_some(())
    });
    let screen = terminal.screen();
    assert!(
        screen.matches("\x1b[H\x1b[2J").count() >= 2,
        "the table is redrawn in place, not appended: {screen:?}"
    );
    assert!(screen.contains("STATUS"), "a table header: {screen:?}");
}

/// Lines a running `tasks` command prints, collected by a thread as they arrive.
fn stdout_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    received
}

#[test]
fn list_watch_reports_changes_made_by_other_invocations_as_json_lines() {
    let sandbox = root_with(&[]);
    sandbox.ok(&["list", "create", "--subject", "Before the watch"]);
    let mut watch = sandbox.command(&["list", "watch", "--json"]);
    let mut child = watch.stdout(Stdio::piped()).spawn().unwrap();
    let lines = stdout_lines(&mut child);
    // The watch reports changes after it has started; create until one is reported.
    let deadline = Instant::now() + DEADLINE;
    let first: Value = loop {
        assert!(Instant::now() < deadline, "list watch reported nothing");
        sandbox.ok(&["list", "create", "--subject", "Seen by the watch"]);
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(500)) {
            break serde_json::from_str(&line).unwrap();
        }
    };
    let created = first["created"].as_array().unwrap();
    assert!(!created.is_empty(), "{first}");
    assert!(
        !created.contains(&Value::from("1")),
        "task 1 predates the watch: {first}"
    );

    sandbox.ok(&["list", "update", "1", "--status", "in_progress"]);
    let change: Value = loop {
        let line = lines
            .recv_timeout(DEADLINE)
            .expect("the update is reported");
        let change: Value = serde_json::from_str(&line).unwrap();
        if change["updated"]
            .as_array()
            .unwrap()
            .contains(&Value::from("1"))
        {
            break change;
        }
    };
    assert!(change["created"].as_array().unwrap().is_empty(), "{change}");
    sandbox.ok(&["list", "delete", "1"]);
    let deleted = loop {
        let line = lines
            .recv_timeout(DEADLINE)
            .expect("the deletion is reported");
        let change: Value = serde_json::from_str(&line).unwrap();
        if !change["deleted"].as_array().unwrap().is_empty() {
            break change;
        }
    };
    assert_eq!(deleted["deleted"], serde_json::json!(["1"]));
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_large_supervisor_log_is_rotated_when_a_supervisor_starts() {
    let sandbox = root_with(&[]);
    let dir = sandbox.session_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let old = "an old line of the supervisor log\n".repeat(40_000); // about 1.3 MiB
    std::fs::write(dir.join("supervisor.log"), &old).unwrap();
    let id = sandbox.start("true");
    sandbox.ok(&["wait", &id]);
    let rotated = std::fs::read_to_string(dir.join("supervisor.log.1")).unwrap();
    assert_eq!(rotated, old, "the old log is kept whole, once");
    let fresh = eventually("the new supervisor's first line", || {
        let log = std::fs::read_to_string(dir.join("supervisor.log")).ok()?;
        log.contains("supervising").then_some(log)
    });
    assert!(!fresh.contains("an old line"), "{fresh}");

    // A small log is left alone by the next supervisor.
    sigkill(sandbox.supervisor_pid());
    let next = sandbox.start("true");
    sandbox.ok(&["wait", &next]);
    let after = std::fs::read_to_string(dir.join("supervisor.log")).unwrap();
    assert!(
        after.starts_with(&fresh),
        "appended to, not rotated: {after}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("supervisor.log.1")).unwrap(),
        old
    );
}

#[test]
fn output_prints_everything_by_default_and_says_what_is_left_when_limited() {
    let sandbox = root_with(&[]);
    // More than the 8 MiB a single read returns, as in the report (13.7 MB).
    let total: usize = 14_000_000;
    let id = sandbox.start(&format!("yes | head -c {total}"));
    assert_eq!(sandbox.run(&["wait", &id]).status.code(), Some(0));

    let all = sandbox.run(&["output", &id]);
    assert!(all.status.success());
    assert_eq!(all.stdout.len(), total, "every byte, not a first chunk");
    assert!(all.stdout.ends_with(b"y\n"));
    assert!(
        all.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&all.stderr)
    );

    let first = sandbox.run(&["output", &id, "--max-bytes", "1000"]);
    assert!(first.status.success());
    assert_eq!(first.stdout.len(), 1000);
    let note = stderr_line(&first);
    let left = total - 1000;
    assert!(
        note.contains(&format!("{left} more bytes")) && note.contains("--offset 1000"),
        "{note}"
    );

    let rest = sandbox.run(&[
        "output",
        &id,
        "--offset",
        "1000",
        "--max-bytes",
        &left.to_string(),
    ]);
    assert_eq!(rest.stdout.len(), left);
    assert!(rest.stderr.is_empty(), "nothing left, nothing said");

    let json = sandbox.json(&["output", &id, "--max-bytes", "10"]);
    assert_eq!(json["newOffset"], 10);
    assert_eq!(json["remainingBytes"], total - 10);
}
