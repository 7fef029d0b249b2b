//! A full disk: the state root on a small tmpfs filled to the last page. Nothing is lost (a task
//! that ends keeps its true outcome, a notification stays deliverable), reads keep working, no
//! temporary file is left, and a supervisor that cannot start says why, once.

use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::sandbox::{Sandbox, eventually, is_alive, is_root, skip, temp_files};

/// A mounted tmpfs, unmounted when dropped.
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes` at `path`; `None` (after saying why) when that is not possible.
    pub fn mount(path: &Path, bytes: u64) -> Option<Self> {
        if !is_root() {
            skip("mounting a tmpfs needs root");
            return None;
        }
        std::fs::create_dir_all(path).unwrap();
        let mounted = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={bytes},mode=0700"),
                "tmpfs",
            ])
            .arg(path)
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(Self {
                path: path.to_owned(),
            }),
            Ok(out) => {
                skip(&format!(
                    "cannot mount a tmpfs: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
                None
            }
            Err(e) => {
                skip(&format!("cannot run mount: {e}"));
                None
            }
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.path).status();
        if !unmounted.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(&self.path).status();
        }
    }
}

/// Fills the filesystem of `dir` to its last page; returns the file doing it.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = [0_u8; 64 * 1024];
    loop {
        match file.write(&chunk) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    path
}

/// A session on a full disk: task `done` completed before the disk filled, task `ended`
/// exited 0 after it did (its supervisor could not record that).
struct FullDisk {
    sandbox: Sandbox,
    filler: PathBuf,
    done: String,
    ended: String,
    supervisor: i32,
}

impl FullDisk {
    /// `None` where no tmpfs can be mounted (the skip is reported).
    fn new() -> Option<Self> {
        let mut sandbox = Sandbox::on_tmpfs(512 * 1024)?;
        // Idle after 100 ms: a supervisor that gave up its unwritten truth would leave at once.
        sandbox.set("TASKS_IDLE_EXIT_MS", "100");
        let done = sandbox.ended("true");
        let gate = sandbox.scratch().join("gate");
        let pid_file = sandbox.scratch().join("ended.pid");
        let ended = sandbox.start(&format!(
            "echo $$ > {}; while [ ! -e {} ]; do sleep 0.01; done; exit 0",
            pid_file.display(),
            gate.display()
        ));
        sandbox.until_running(&ended);
        let shell: i32 = eventually("the task's pid", || {
            std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
        });
        let supervisor = sandbox.supervisor_pid();
        let filler = fill(sandbox.root().parent().unwrap());
        std::fs::write(&gate, "").unwrap();
        eventually("the task to exit", || (!is_alive(shell)).then_some(()));
        eventually("the supervisor to report the failed write", || {
            sandbox
                .log()
                .contains("cannot write its record: kept in memory and retried")
                .then_some(())
        });
        Some(Self {
            sandbox,
            filler,
            done,
            ended,
            supervisor,
        })
    }

    fn free_space(&self) {
        std::fs::remove_file(&self.filler).unwrap();
    }

    /// Waits for `ended`'s true end to reach the disk once space is back.
    fn until_recorded(&self) {
        self.free_space();
        eventually("the ended task's record", || {
            (self.sandbox.task(&self.ended)["status"] != "running").then_some(())
        });
    }
}

#[test]
fn a_task_that_exits_while_the_disk_is_full_keeps_its_true_outcome() {
    let Some(disk) = FullDisk::new() else { return };
    let sandbox = &disk.sandbox;
    // Past the idle timeout with the end unrecorded: the supervisor holds the truth and stays.
    assert_eq!(
        sandbox
            .run(&["wait", "--no-deliver", &disk.ended, "--timeout", "300"])
            .code(),
        124
    );
    assert!(is_alive(disk.supervisor), "the supervisor kept its truth");
    disk.until_recorded();
    let task = sandbox.task(&disk.ended);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["exitCode"], 0, "{task}");
    assert_eq!(task["supervisorPid"], disk.supervisor, "{task}");
    assert_eq!(
        sandbox.run(&["wait", "--no-deliver", &disk.ended]).code(),
        0
    );
    assert!(sandbox.log().contains("its record is on disk again"));
}

#[test]
fn a_supervisor_killed_while_the_disk_is_full_leaves_the_true_end_of_a_task_that_exited_0() {
    let Some(disk) = FullDisk::new() else { return };
    let sandbox = &disk.sandbox;
    eventually("the end kept in its slot", || {
        sandbox
            .log()
            .contains("its end is kept in its end slot")
            .then_some(())
    });
    sandbox.kill_supervisor();
    // The disk still full and no supervisor: every reader takes the end from its slot.
    let task = sandbox.task(&disk.ended);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["exitCode"], 0, "{task}");
    assert_eq!(
        sandbox.run(&["wait", "--no-deliver", &disk.ended]).code(),
        0
    );
    disk.free_space();
    assert_eq!(
        delivered_ids(sandbox),
        [disk.done.clone(), disk.ended.clone()]
    );
    // The next supervisor records that end (and delivers nothing again).
    sandbox.ok(&["run", "--wait", "--", "true"]);
    assert!(delivered_ids(sandbox).is_empty(), "delivered once");
    let recorded: serde_json::Value = serde_json::from_slice(
        &std::fs::read(sandbox.tasks_dir().join(format!("{}.json", disk.ended))).unwrap(),
    )
    .unwrap();
    assert_eq!(recorded["task"]["status"], "completed", "{recorded}");
    assert_eq!(recorded["supervisorPid"], disk.supervisor, "{recorded}");
    assert!(
        !sandbox
            .tasks_dir()
            .join(format!("{}.end", disk.ended))
            .exists(),
        "the slot is released once the end is in the record"
    );
    let log = std::fs::read_to_string(sandbox.session_dir().join("notifications.jsonl")).unwrap();
    let ended = format!("\"task_id\":\"{}\"", disk.ended);
    assert_eq!(log.matches(&ended).count(), 1, "{log}");
}

#[test]
fn ps_and_wait_work_on_a_full_disk_and_write_nothing() {
    let Some(disk) = FullDisk::new() else { return };
    let sandbox = &disk.sandbox;
    let before = listing(&sandbox.session_dir());
    let listed = sandbox.listed();
    let status = |id: &str| {
        listed
            .iter()
            .find(|t| t["id"] == id)
            .map(|t| t["status"].clone())
    };
    assert_eq!(status(&disk.done).unwrap(), "completed");
    assert_eq!(status(&disk.ended).unwrap(), "running", "not yet recorded");
    assert!(sandbox.ok(&["ps"]).contains(&disk.ended));
    assert_eq!(sandbox.run(&["wait", "--no-deliver", &disk.done]).code(), 0);
    assert_eq!(
        sandbox
            .run(&["wait", "--no-deliver", &disk.ended, "--timeout", "50"])
            .code(),
        124
    );
    sandbox.ok(&["output", &disk.done]);
    assert_eq!(
        listing(&sandbox.session_dir()),
        before,
        "reads created or changed nothing"
    );
}

#[test]
fn a_notification_that_cannot_be_recorded_on_a_full_disk_is_delivered_later_exactly_once() {
    let Some(disk) = FullDisk::new() else { return };
    let sandbox = &disk.sandbox;
    let notified = sandbox.tasks_dir().join(format!("{}.notified", disk.done));
    sandbox
        .run(&["notifications"])
        .fails_saying(&["notifications.jsonl", "No space left on device"]);
    assert!(!notified.exists(), "the claim was released");
    disk.until_recorded();
    let delivered = delivered_ids(sandbox);
    assert_eq!(delivered, [disk.done.clone(), disk.ended.clone()]);
    assert!(delivered_ids(sandbox).is_empty(), "delivered once");
    let log = std::fs::read_to_string(sandbox.session_dir().join("notifications.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 2, "{log}");
}

#[test]
fn failed_record_writes_leave_no_temporary_file() {
    let Some(disk) = FullDisk::new() else { return };
    let sandbox = &disk.sandbox;
    assert_eq!(temp_files(&sandbox.tasks_dir()), Vec::<String>::new());
    disk.until_recorded();
    assert_eq!(temp_files(&sandbox.tasks_dir()), Vec::<String>::new());
}

#[test]
fn a_start_the_supervisor_cannot_record_on_a_full_disk_is_refused_and_never_runs() {
    let Some(disk) = FullDisk::new() else { return };
    let sandbox = &disk.sandbox;
    let marker = sandbox.scratch().join("ran");
    let ran = sandbox.run(&["run", "--", &format!("touch {}", marker.display())]);
    ran.fails_saying(&["cannot record the task", "No space left on device"]);
    assert!(ran.stdout.is_empty(), "no id handed out: {ran:?}");
    disk.until_recorded();
    // The supervisor leaves once idle: nothing unwritten holds it.
    eventually("the supervisor idle and gone", || {
        (!is_alive(disk.supervisor)).then_some(())
    });
    let mut ids: Vec<String> = sandbox
        .listed()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let mut expected = [disk.done.clone(), disk.ended.clone()];
    expected.sort();
    assert_eq!(ids, expected, "the refused task left no record");
    assert!(!marker.exists(), "the refused command ran");
    let leftovers: Vec<_> = std::fs::read_dir(sandbox.tasks_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| !expected.iter().any(|id| name.starts_with(id.as_str())))
        .collect();
    assert!(
        leftovers.is_empty(),
        "files of the refused task: {leftovers:?}"
    );
}

#[test]
fn a_supervisor_that_cannot_start_on_a_full_disk_fails_the_run_clearly_and_starts_once() {
    let Some(mut sandbox) = Sandbox::on_tmpfs(256 * 1024) else {
        return;
    };
    // Plenty of time for a client that spawns again and again to do so.
    sandbox.set("TASKS_START_TIMEOUT_MS", "3000");
    let session = sandbox.session_dir();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&session)
        .unwrap();
    // The log gets its page before the disk fills: every supervisor start can say its word.
    std::fs::write(session.join("supervisor.log"), "started on a full disk\n").unwrap();
    let filler = fill(sandbox.root().parent().unwrap());

    let ran = sandbox.run(&["run", "--", "echo hi"]);
    ran.fails_saying(&[
        "tasks: supervisor: could not start: ",
        "supervisor.lock",
        "No space left on device",
    ]);
    assert_eq!(ran.code(), 69);
    let starts = sandbox
        .log()
        .lines()
        .filter(|l| l.contains("No space left"))
        .count();
    assert_eq!(starts, 1, "one supervisor tried: {}", sandbox.log());
    sandbox.ok(&["ps"]);

    std::fs::remove_file(filler).unwrap();
    assert_eq!(sandbox.run(&["run", "--wait", "--", "true"]).code(), 0);
}

/// Names, sizes and modification times of the files under `dir` but the supervisor's log (a
/// directory's time changes with every write the supervisor retries).
fn listing(dir: &Path) -> Vec<(PathBuf, u64, std::time::SystemTime)> {
    let mut found = Vec::new();
    let mut dirs = vec![dir.to_owned()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                dirs.push(entry.path());
                continue;
            }
            if entry.file_name() == "supervisor.log" {
                continue;
            }
            found.push((entry.path(), meta.len(), meta.modified().unwrap()));
        }
    }
    found.sort();
    found
}

/// The task ids of the notifications one `tasks notifications --json` delivers, in order.
pub fn delivered_ids(sandbox: &Sandbox) -> Vec<String> {
    sandbox
        .ok(&["notifications", "--json"])
        .lines()
        .map(|l| {
            let notice: serde_json::Value = serde_json::from_str(l).unwrap();
            notice["taskId"].as_str().unwrap().to_owned()
        })
        .collect()
}
