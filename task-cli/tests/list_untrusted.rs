//! The list directory is untrusted input (issue #25, item 2), through the built `tasks` binary:
//! beside two good tasks stand a FIFO, a 1 GiB (sparse) file, symlinks to `/etc/passwd` and to
//! a directory, a directory and task files named with ids no task may have (2^64, 2^53). Every
//! `tasks list` reader (`ls`, `ready`, `graph`, `doctor`, `export`, `get`) ends, is waited on
//! with a deadline (a hang is killed and fails the test), stays under 64 MiB of peak resident
//! memory (the child's `ru_maxrss`, from `wait4`), shows the good tasks and no planted one;
//! `doctor` names every bad entry with why; `get` of a bad entry or a bad id is a clear error;
//! the next create gets the next id a task may have, not one after a planted id.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use rustix::fs::{FileType, Mode};

/// How long one `tasks` command may take before the test calls it hung.
const DEADLINE: Duration = Duration::from_secs(60);

/// The most resident memory a reader may use at its peak.
const MAX_RSS_KIB: i64 = 64 << 10;

/// The size of the planted sparse file.
const HUGE: u64 = 1 << 30;

/// Ids no task may have, planted as task files holding a task of that id: 2^64 (beyond u64)
/// and 2^53 (one past the largest id, 2^53 − 1).
const ABSURD_IDS: [&str; 2] = ["18446744073709551616", "9007199254740992"];

/// The list the test works on.
const LIST: &str = "untrusted";

/// A finished `tasks` run.
#[derive(Debug)]
struct Ran {
    /// The exit code.
    code: i32,
    stdout: String,
    stderr: String,
    /// Peak resident memory of the process, in KiB.
    max_rss_kib: i64,
}

/// Runs `tasks list --list LIST args…` with its state under `root`; a run that outlasts
/// [`DEADLINE`] is killed and fails the test.
#[allow(clippy::zombie_processes)] // Reaped by `wait4`, which `Child::wait` cannot replace.
fn tasks(root: &Path, args: &[&str]) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tasks"))
        .args(["list", "--list", LIST])
        .args(args)
        .env("TASKS_ROOT", root)
        .env_remove("TASKS_SESSION")
        .env_remove("TASKS_LIST_ID")
        .env_remove("TASKS_LIST_ROOT")
        .env_remove("TASKS_LIST_STORE")
        .env_remove("TASKS_LOG")
        .env_remove("CLAUDE_CONFIG_DIR")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    let pid = i32::try_from(child.id()).unwrap();
    let (code, max_rss_kib) = wait_with_deadline(pid, &format!("tasks list {args:?}"));
    Ran {
        code,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        max_rss_kib,
    }
}

fn drain(mut stream: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    })
}

/// Reaps the child `pid` with `wait4` (on a thread, waited on until [`DEADLINE`]; past it the
/// child, not yet reaped, is killed by pid and the test fails naming `what`): its exit code
/// (128 + the signal if killed) and its peak resident memory in KiB.
fn wait_with_deadline(pid: i32, what: &str) -> (i32, i64) {
    let (done, reaped) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(wait4(pid));
    });
    match reaped.recv_timeout(DEADLINE) {
        Ok(result) => result,
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("waiting for {what} failed"),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
            let _ = reaped.recv();
            panic!("{what} hung: killed after {DEADLINE:?}");
        }
    }
}

/// Blocks until the child `pid` ends and reaps it: its exit code and `ru_maxrss`.
fn wait4(pid: i32) -> (i32, i64) {
    let mut status = 0;
    // SAFETY: `rusage` is plain old data, for which all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals of the right types; `pid` is our child,
        // reaped only here.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            break;
        }
        let error = std::io::Error::last_os_error();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::Interrupted,
            "wait4: {error}"
        );
    }
    let code = match libc::WIFEXITED(status) {
        true => libc::WEXITSTATUS(status),
        false => 128 + libc::WTERMSIG(status),
    };
    (code, usage.ru_maxrss)
}

/// Plants every bad entry beside tasks 1 and 2 of the list directory `dir` (`outside`: a
/// directory outside it); returns the names and what `doctor` says about each.
fn plant(dir: &Path, outside: &Path) -> Vec<(String, &'static str)> {
    let mode = Mode::from_raw_mode(0o600);
    rustix::fs::mknodat(rustix::fs::CWD, dir.join("3.json"), FileType::Fifo, mode, 0).unwrap();
    let huge = std::fs::File::create(dir.join("4.json")).unwrap();
    huge.set_len(HUGE).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", dir.join("5.json")).unwrap();
    std::os::unix::fs::symlink(outside, dir.join("6.json")).unwrap();
    std::fs::create_dir(dir.join("7.json")).unwrap();
    let mut planted = vec![
        ("3.json".to_owned(), "it is a FIFO, not a regular file"),
        ("4.json".to_owned(), "it holds 1073741824 bytes, over the"),
        ("5.json".to_owned(), "it is a symlink, not a regular file"),
        ("6.json".to_owned(), "it is a symlink, not a regular file"),
        ("7.json".to_owned(), "it is a directory, not a regular file"),
    ];
    for id in ABSURD_IDS {
        let task = format!(
            r#"{{"id":"{id}","subject":"planted","description":"","status":"pending","blocks":[],"blockedBy":[]}}"#
        );
        std::fs::write(dir.join(format!("{id}.json")), task).unwrap();
        planted.push((format!("{id}.json"), "its name is not a task id"));
    }
    planted
}

/// Asserts `ran` was a reader that kept within the memory bound and showed no planted entry.
fn bounded_and_clean(ran: &Ran, what: &str) {
    eprintln!("{what}: exit {}, peak {} KiB", ran.code, ran.max_rss_kib);
    assert!(
        ran.max_rss_kib < MAX_RSS_KIB,
        "{what}: {} KiB at its peak",
        ran.max_rss_kib
    );
    assert!(!ran.stdout.contains("planted"), "{what}: {ran:?}");
    assert!(
        !ran.stdout.contains("root:"),
        "{what} read /etc/passwd: {ran:?}"
    );
    assert!(!ran.stderr.contains("panicked"), "{what}: {ran:?}");
}

#[test]
fn every_list_reader_ends_in_bounded_memory_beside_bad_entries_and_doctor_names_each() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    for subject in ["one", "two"] {
        assert_eq!(tasks(root.path(), &["create", subject]).code, 0);
    }
    let dir = root.path().join("lists").join(LIST);
    let planted = plant(&dir, outside.path());

    let shows_both = [
        (&["ls"][..], ["#1 [pending] one", "#2 [pending] two"]),
        (&["ready"][..], ["#1 ready: one", "#2 ready: two"]),
        (&["graph"][..], ["one", "two"]),
        (
            &["export"][..],
            [r#""subject": "one""#, r#""subject": "two""#],
        ),
    ];
    for (args, lines) in shows_both {
        let ran = tasks(root.path(), args);
        bounded_and_clean(&ran, args[0]);
        assert_eq!(ran.code, 0, "{args:?}: {ran:?}");
        for line in lines {
            assert!(
                ran.stdout.contains(line),
                "{args:?}: {line:?} not in {ran:?}"
            );
        }
        // Every reader warns about every bad entry, by name.
        for (name, _) in &planted {
            assert!(
                ran.stderr.contains(name.as_str()),
                "{args:?}: {name}: {ran:?}"
            );
        }
    }

    let doctor = tasks(root.path(), &["doctor"]);
    bounded_and_clean(&doctor, "doctor");
    assert_ne!(doctor.code, 0, "problems were found: {doctor:?}");
    for (name, why) in &planted {
        let line = format!("- {name} is skipped: {why}");
        assert!(doctor.stdout.contains(&line), "{line:?} not in {doctor:?}");
    }

    let get = tasks(root.path(), &["get", "1"]);
    bounded_and_clean(&get, "get 1");
    assert_eq!(get.code, 0, "{get:?}");
    assert!(get.stdout.contains("Task #1: one"), "{get:?}");
}

#[test]
fn get_of_a_bad_entry_or_an_absurd_id_is_a_clear_error_and_the_next_id_ignores_planted_ids() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    for subject in ["one", "two"] {
        assert_eq!(tasks(root.path(), &["create", subject]).code, 0);
    }
    let dir = root.path().join("lists").join(LIST);
    let planted = plant(&dir, outside.path());

    for (name, why) in &planted[..5] {
        let id = name.trim_end_matches(".json");
        let ran = tasks(root.path(), &["get", id]);
        bounded_and_clean(&ran, name);
        assert_eq!(ran.code, 70, "get {id}: {ran:?}");
        let said = format!("{} is not read: {why}", dir.join(name).display());
        assert!(ran.stderr.contains(&said), "{said:?} not in {ran:?}");
    }
    for id in ABSURD_IDS {
        let ran = tasks(root.path(), &["get", id]);
        bounded_and_clean(&ran, id);
        assert_eq!(ran.code, 65, "get {id}: {ran:?}");
        assert!(ran.stderr.contains("malformed list task id"), "{ran:?}");
    }

    // 3 to 7 are taken (by entries that are not tasks); 2^53 and 2^64 are no ids.
    let created = tasks(root.path(), &["create", "three"]);
    assert_eq!(created.code, 0, "{created:?}");
    assert_eq!(created.stdout.trim(), "Task #8 created successfully: three");
    let ls = tasks(root.path(), &["ls"]);
    assert!(ls.stdout.contains("#8 [pending] three"), "{ls:?}");
}
