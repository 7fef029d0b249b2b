//! State files are untrusted input. A FIFO, a symlink, a socket, a device or an oversized file
//! planted at any state path a reader opens never hangs a command or a starting supervisor, is
//! reported by name, and never hides the other tasks; a crafted record naming a foreign process
//! group gets nothing killed.

use std::os::unix::process::CommandExt;
use std::path::Path;

use serde_json::Value;

use crate::full_disk::delivered_ids;
use crate::sandbox::{Ran, Sandbox, eventually, is_alive};

/// A well-formed id no task of the tests has.
const BAD_ID: &str = "b0000000b";

/// What can be planted where a regular state file belongs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Hostile {
    Fifo,
    /// A symlink to a regular file outside the session, holding what a reader would accept.
    Symlink,
    Socket,
    /// A character device (`/dev/null`'s numbers); a FIFO stands in where `mknod` is refused.
    Device,
    /// A regular file past the state file limit (4 MiB).
    Oversized,
}

const EVERY_KIND: [Hostile; 5] = [
    Hostile::Fifo,
    Hostile::Symlink,
    Hostile::Socket,
    Hostile::Device,
    Hostile::Oversized,
];

impl Hostile {
    /// Plants this kind of file at `path`; a symlink points at `outside`, which gets `bait`.
    fn plant(self, path: &Path, outside: &Path, bait: &str) {
        use rustix::fs::{FileType, Mode, mknodat};
        let mode = Mode::from_raw_mode(0o600);
        match self {
            Hostile::Fifo => mknodat(rustix::fs::CWD, path, FileType::Fifo, mode, 0).unwrap(),
            Hostile::Symlink => {
                std::fs::write(outside, bait).unwrap();
                std::os::unix::fs::symlink(outside, path).unwrap();
            }
            Hostile::Socket => drop(std::os::unix::net::UnixListener::bind(path).unwrap()),
            Hostile::Device => {
                let null = rustix::fs::makedev(1, 3);
                if mknodat(rustix::fs::CWD, path, FileType::CharacterDevice, mode, null).is_err() {
                    eprintln!("mknod of a device refused here: a FIFO stands in");
                    Hostile::Fifo.plant(path, outside, bait);
                }
            }
            Hostile::Oversized => {
                let file = std::fs::File::create(path).unwrap();
                file.set_len(5 * 1024 * 1024).unwrap();
            }
        }
    }
}

/// Asserts `ran` hung on nothing and named `file` on stderr.
fn names(ran: &Ran, file: &Path, kind: Hostile) {
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(
        ran.stderr.contains(name),
        "{kind:?}: {name} not named in {:?}",
        ran.stderr
    );
    assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
}

#[test]
fn hostile_task_records_never_hang_readers_or_a_starting_supervisor_and_are_named() {
    for kind in EVERY_KIND {
        let sandbox = Sandbox::new();
        // A real record to copy as bait: what a reader following the symlink would accept.
        let probe = sandbox.ended("true");
        let bait = std::fs::read_to_string(sandbox.tasks_dir().join(format!("{probe}.json")))
            .unwrap()
            .replace(&probe, BAD_ID);
        sandbox.kill_supervisor();
        let bad = sandbox.tasks_dir().join(format!("{BAD_ID}.json"));
        kind.plant(&bad, &sandbox.scratch().join("outside.json"), &bait);

        // The next start brings up a supervisor, which reads every record for orphans.
        let good = sandbox.start("echo good");
        assert_eq!(
            sandbox.run(&["wait", "--no-deliver", &good]).code(),
            0,
            "{kind:?}"
        );
        let ps = sandbox.run(&["ps", "--all"]);
        assert!(ps.status.success(), "{kind:?}: {ps:?}");
        assert!(ps.stdout.contains(&good) && ps.stdout.contains(&probe));
        assert!(!ps.stdout.contains(BAD_ID), "{kind:?}: followed: {ps:?}");
        names(&ps, &bad, kind);
        for args in [["wait", BAD_ID], ["kill", BAD_ID], ["output", BAD_ID]] {
            let ran = sandbox.run(&args);
            assert!(!ran.status.success(), "{kind:?} {args:?}: {ran:?}");
            names(&ran, &bad, kind);
        }
        let delivered = delivered_ids(&sandbox);
        assert_eq!(delivered, [probe, good], "{kind:?}");
    }
}

#[test]
fn hostile_pending_events_are_named_and_the_other_notifications_still_delivered() {
    for kind in EVERY_KIND {
        let sandbox = Sandbox::new();
        let good = sandbox.ended("true");
        let name = format!("1-0000000000000001-00000001-0000000000-{BAD_ID}.json");
        let bad = sandbox.session_dir().join("events/pending").join(&name);
        let bait = r#"{"priority":"next","atMs":1,"notification":{}}"#;
        kind.plant(&bad, &sandbox.scratch().join("outside.json"), bait);

        let ran = sandbox.run(&["notifications", "--json"]);
        assert!(ran.status.success(), "{kind:?}: {ran:?}");
        names(&ran, &bad, kind);
        assert!(ran.stdout.contains(&good), "{kind:?}: {ran:?}");
        assert!(!ran.stdout.contains(BAD_ID), "{kind:?}: {ran:?}");
        assert!(sandbox.ok(&["ps", "--all"]).contains(&good));
    }
}

#[test]
fn a_hostile_config_file_is_named_by_every_command_and_a_starting_supervisor() {
    for kind in EVERY_KIND {
        let sandbox = Sandbox::new();
        let good = sandbox.ended("true");
        sandbox.kill_supervisor();
        let config = sandbox.session_dir().join("config.json");
        kind.plant(&config, &sandbox.scratch().join("outside.json"), "{}");
        for args in [
            &["ps"][..],
            &["wait", "--no-deliver", &good],
            &["notifications"],
            &["run", "--", "true"],
            &["__supervise"],
        ] {
            let ran = sandbox.run(args);
            assert!(!ran.status.success(), "{kind:?} {args:?}: {ran:?}");
            names(&ran, &config, kind);
        }
    }
}

#[test]
fn a_hostile_notifications_log_fails_delivery_by_name_and_loses_nothing() {
    // The log is only ever appended to, never read: its size is no concern, so no oversized one.
    for kind in EVERY_KIND.into_iter().filter(|&k| k != Hostile::Oversized) {
        let sandbox = Sandbox::new();
        let good = sandbox.ended("true");
        let log = sandbox.session_dir().join("notifications.jsonl");
        let outside = sandbox.scratch().join("outside.jsonl");
        kind.plant(&log, &outside, "");

        let ran = sandbox.run(&["notifications"]);
        assert!(!ran.status.success(), "{kind:?}: {ran:?}");
        names(&ran, &log, kind);
        if kind == Hostile::Symlink {
            assert_eq!(std::fs::read_to_string(&outside).unwrap(), "");
        }
        assert!(sandbox.ok(&["ps", "--all"]).contains(&good));
        std::fs::remove_file(&log).unwrap();
        assert_eq!(delivered_ids(&sandbox), [good], "{kind:?}");
        assert!(delivered_ids(&sandbox).is_empty(), "{kind:?}: once");
    }
}

/// A process group of its own, unrelated to any task (`setsid sleep`), killed when dropped.
struct Foreign {
    child: std::process::Child,
}

impl Foreign {
    fn start() -> Self {
        let mut command = std::process::Command::new("sleep");
        command.arg("1000");
        // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| rustix::process::setsid().map(drop).map_err(Into::into));
        }
        Self {
            child: command.spawn().unwrap(),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its start time in clock ticks after boot (`/proc/<pid>/stat` field 22).
    fn started(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let after_name = stat.rsplit_once(')').unwrap().1;
        after_name
            .split_ascii_whitespace()
            .nth(19)
            .unwrap()
            .parse()
            .unwrap()
    }

    fn is_alive(&self) -> bool {
        is_alive(self.pid() as i32)
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A task that ended under a supervisor now gone, and an unrelated process group.
fn ended_task_and_foreign_group(sandbox: &Sandbox) -> (String, Foreign) {
    let id = sandbox.ended("true");
    sandbox.kill_supervisor();
    (id, Foreign::start())
}

/// Rewrites the record of the ended task `id` as `running` in process group `pgid` (started at
/// `leader_started`) under a supervisor that is gone.
fn craft_running(sandbox: &Sandbox, id: &str, pgid: u32, leader_started: u64) {
    let path = sandbox.tasks_dir().join(format!("{id}.json"));
    let mut record: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let task = record["task"].as_object_mut().unwrap();
    task.insert("status".into(), "running".into());
    task.insert("notified".into(), false.into());
    task.remove("endTime");
    task.remove("endReason");
    let shell = record["task"]["kind"]["shell"].as_object_mut().unwrap();
    shell.remove("exitCode");
    shell.insert(
        "process".into(),
        serde_json::json!({ "pgid": pgid, "leaderStarted": leader_started }),
    );
    record.as_object_mut().unwrap().remove("notification");
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();
}

#[test]
fn a_crafted_record_naming_a_foreign_process_group_gets_nothing_killed_by_readers() {
    let sandbox = Sandbox::new();
    let (id, foreign) = ended_task_and_foreign_group(&sandbox);
    // The exact fingerprint of the foreign group: pid and start time.
    craft_running(&sandbox, &id, foreign.pid(), foreign.started());

    let task = sandbox.task(&id);
    assert_eq!(task["status"], "failed", "read as an orphan: {task}");
    sandbox.ok(&["ps"]);
    assert_eq!(sandbox.run(&["wait", "--no-deliver", &id]).code(), 1);
    sandbox.ok(&["output", &id]);
    assert_eq!(delivered_ids(&sandbox), std::slice::from_ref(&id));
    assert!(foreign.is_alive(), "a read sent a signal");
    let on_disk = std::fs::read_to_string(sandbox.tasks_dir().join(format!("{id}.json"))).unwrap();
    assert!(on_disk.contains("\"running\""), "a read wrote the record");
}

#[test]
fn a_crafted_record_claiming_to_survive_its_supervisor_is_ended_by_the_supervisor_a_read_starts() {
    let sandbox = Sandbox::new();
    let (id, foreign) = ended_task_and_foreign_group(&sandbox);
    // A reused pid (the leader's start time differs), and a claim no shell makes.
    craft_running(&sandbox, &id, foreign.pid(), foreign.started() + 1);
    let path = sandbox.tasks_dir().join(format!("{id}.json"));
    let mut record: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    record["survivesSupervisor"] = true.into();
    std::fs::write(&path, serde_json::to_vec(&record).unwrap()).unwrap();

    // The read starts the supervisor, which finds nothing to resume: it ends the task as the
    // orphan it is (the one end every reader then sees) and leaves the foreign group alone.
    let task = sandbox.task(&id);
    assert_eq!(task["status"], "failed", "{task}");
    assert_eq!(task["endReason"]["reason"], "supervisor_died", "{task}");
    let on_disk = std::fs::read_to_string(&path).unwrap();
    assert!(
        on_disk.contains("\"failed\""),
        "the supervisor recorded the end: {on_disk}"
    );
    assert!(!on_disk.contains("survivesSupervisor"), "{on_disk}");
    assert!(foreign.is_alive(), "the supervisor killed a foreign group");
    assert_eq!(delivered_ids(&sandbox), std::slice::from_ref(&id));
}

#[test]
fn a_starting_supervisor_leaves_a_foreign_group_whose_start_time_differs_alone() {
    let sandbox = Sandbox::new();
    let (id, foreign) = ended_task_and_foreign_group(&sandbox);
    // The pid of the foreign group, but not the start time of its leader: a reused pid.
    craft_running(&sandbox, &id, foreign.pid(), foreign.started() + 1);

    sandbox.ended("true"); // a new supervisor: it ends the orphan
    eventually("the orphan recorded as failed", || {
        let on_disk =
            std::fs::read_to_string(sandbox.tasks_dir().join(format!("{id}.json"))).ok()?;
        on_disk.contains("\"failed\"").then_some(())
    });
    assert!(foreign.is_alive(), "the supervisor killed a foreign group");
}
