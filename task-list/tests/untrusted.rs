//! The list directory is untrusted input (issue #25, item 2): agents and the reference harness
//! write it directly, so a FIFO, a 1 GiB file, a symlink (to `/etc/passwd`, to a directory), a
//! directory or an impossible id may stand where a task file belongs, and anything may stand at
//! the list's own files. Every reader skips such an entry and goes on with the good tasks, never
//! waits on it, follows it or reads it whole; `doctor` names each with why; a planted id never
//! moves the next id. Every call that could hang runs on a thread waited on with a deadline, so
//! a hang fails the test instead of hanging the suite.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

use rustix::fs::{FileType, Mode};
use task_list::{
    AUDIT_LOG_FILE, EXPORT_FORMAT, EntryFault, EntryKind, Error, ListExport, Problem,
    QUARANTINE_DIR, StoreConfig, Task, TaskId, TaskList,
};

/// How long any one call may take before the test calls it hung.
const DEADLINE: Duration = Duration::from_secs(60);

/// The size of the planted sparse file: far over every limit, costing no disk.
const HUGE: u64 = 1 << 30;

/// Names like task files whose id no task may have: 2^64, 2^53 (one past [`TaskId::MAX`]),
/// negative, zero, a leading zero.
const ABSURD_IDS: [&str; 5] = ["18446744073709551616", "9007199254740992", "-1", "0", "01"];

/// Runs `work` on a thread of its own and waits for it until [`DEADLINE`].
fn bounded<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || drop(done.send(work())));
    match result.recv_timeout(DEADLINE) {
        Ok(value) => value,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what} hung"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what} panicked"),
    }
}

fn fifo(path: &Path) {
    let mode = Mode::from_raw_mode(0o600);
    rustix::fs::mknodat(rustix::fs::CWD, path, FileType::Fifo, mode, 0).unwrap();
}

fn huge(path: &Path) {
    std::fs::File::create(path).unwrap().set_len(HUGE).unwrap();
}

/// A file holding what a task file named `stem` would hold (bait for a reader that trusts
/// names).
fn bait(dir: &Path, stem: &str) {
    let text = format!(
        r#"{{"id":"{stem}","subject":"planted","description":"","status":"pending","blocks":[],"blockedBy":[]}}"#
    );
    std::fs::write(dir.join(format!("{stem}.json")), text).unwrap();
}

fn not_regular(kind: EntryKind) -> EntryFault {
    EntryFault::NotRegularFile { kind }
}

/// A list holding tasks 1 and 2 (`one`, `two`); the bad entries are planted beside them.
fn list_with_two_tasks(root: &Path) -> TaskList {
    list_with_two_tasks_in(root, common::fast_config())
}

/// [`list_with_two_tasks`], opened with `config`.
fn list_with_two_tasks_in(root: &Path, config: StoreConfig) -> TaskList {
    let list = TaskList::open(root, "list", config).unwrap();
    common::create(&list, "one");
    common::create(&list, "two");
    list
}

/// Plants every kind of bad task entry in `list` (`outside` is a directory outside the list);
/// returns what a reader must say about each, by name.
fn plant_task_entries(list: &TaskList, outside: &Path) -> BTreeMap<String, EntryFault> {
    let dir = list.dir();
    fifo(&dir.join("3.json"));
    huge(&dir.join("4.json"));
    std::os::unix::fs::symlink("/etc/passwd", dir.join("5.json")).unwrap();
    std::os::unix::fs::symlink(outside, dir.join("6.json")).unwrap();
    std::fs::create_dir(dir.join("7.json")).unwrap();
    let mut expected = BTreeMap::from([
        ("3.json".to_owned(), not_regular(EntryKind::Fifo)),
        (
            "4.json".to_owned(),
            EntryFault::TooLarge {
                size: HUGE,
                limit: list_limit(),
            },
        ),
        ("5.json".to_owned(), not_regular(EntryKind::Symlink)),
        ("6.json".to_owned(), not_regular(EntryKind::Symlink)),
        ("7.json".to_owned(), not_regular(EntryKind::Directory)),
    ]);
    for stem in ABSURD_IDS {
        bait(dir, stem);
        expected.insert(format!("{stem}.json"), EntryFault::InvalidId);
    }
    expected
}

fn list_limit() -> u64 {
    common::fast_config().max_task_file_bytes
}

fn ids(tasks: impl IntoIterator<Item = TaskId>) -> Vec<u64> {
    tasks.into_iter().map(TaskId::get).collect()
}

/// The bad entries `doctor` names, with why.
fn named_by_doctor(list: &TaskList) -> BTreeMap<String, EntryFault> {
    let list = list.clone();
    let report = bounded("doctor", move || list.doctor(false)).unwrap();
    report
        .problems
        .into_iter()
        .filter_map(|problem| match problem {
            Problem::BadEntry { file, fault } => Some((file, fault)),
            Problem::CorruptFile { file, message } => {
                Some((file, EntryFault::Malformed { message }))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn bad_task_entries_beside_good_tasks_are_skipped_named_and_never_hang_a_reader() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let list = list_with_two_tasks(root.path());
    let expected = plant_task_entries(&list, outside.path());

    let reader = list.clone();
    let snapshot = bounded("snapshot", move || reader.snapshot()).unwrap();
    assert_eq!(ids(snapshot.tasks.keys().copied()), [1, 2]);
    let skipped: BTreeMap<String, EntryFault> = snapshot
        .problems
        .into_iter()
        .map(|p| (p.file, p.fault))
        .collect();
    assert_eq!(skipped, expected);

    let reader = list.clone();
    let listed = bounded("list", move || reader.list()).unwrap();
    assert_eq!(ids(listed.tasks.iter().map(|t| t.id)), [1, 2]);
    let reader = list.clone();
    let ready = bounded("ready", move || reader.ready()).unwrap();
    assert_eq!(ids(ready.ready.iter().map(|t| t.id)), [1, 2]);
    assert_eq!(ready.problems.len(), expected.len());
    let reader = list.clone();
    let graph = bounded("graph", move || reader.graph()).unwrap();
    assert_eq!(ids(graph.tasks().iter().map(|t| t.id)), [1, 2]);
    let reader = list.clone();
    let export = bounded("export", move || reader.export()).unwrap();
    assert_eq!(ids(export.tasks.iter().map(|t| t.id)), [1, 2]);

    assert_eq!(named_by_doctor(&list), expected);
    // /etc/passwd and the directory a symlink points to are untouched.
    assert!(std::fs::symlink_metadata("/etc/passwd").unwrap().is_file());
    assert!(outside.path().is_dir());
}

#[test]
fn get_of_a_bad_entry_is_a_typed_error_naming_it_and_get_of_a_good_one_works() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let list = list_with_two_tasks(root.path());
    let expected = plant_task_entries(&list, outside.path());
    for n in 3..=7 {
        let reader = list.clone();
        let got = bounded("get", move || reader.get(common::id(n)));
        let file = format!("{n}.json");
        match got {
            Err(Error::BadEntry { path, fault }) => {
                assert_eq!(path, list.dir().join(&file));
                assert_eq!(Some(&fault), expected.get(&file));
            }
            other => panic!("get {n}: {other:?}"),
        }
    }
    let reader = list.clone();
    let one = bounded("get", move || reader.get(common::id(1))).unwrap();
    assert_eq!(one.unwrap().subject, "one");
    for stem in ABSURD_IDS {
        assert!(
            matches!(TaskId::parse(stem), Err(Error::InvalidId(_))),
            "{stem}"
        );
    }
}

#[test]
fn a_malformed_task_file_is_named_by_doctor_and_stops_an_export_by_name() {
    let root = tempfile::tempdir().unwrap();
    let list = list_with_two_tasks(root.path());
    std::fs::write(list.dir().join("3.json"), "{not json").unwrap();
    let snapshot = list.snapshot().unwrap();
    assert_eq!(ids(snapshot.tasks.keys().copied()), [1, 2]);
    let named = named_by_doctor(&list);
    assert!(
        matches!(named.get("3.json"), Some(EntryFault::Malformed { .. })),
        "{named:?}"
    );
    // An export that dropped a task that may be one caught half written would not be lossless.
    match list.export() {
        Err(Error::Corrupt { path, .. }) => assert_eq!(path, list.dir().join("3.json")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_next_id_follows_the_names_a_task_may_have_and_never_a_planted_absurd_id() {
    let root = tempfile::tempdir().unwrap();
    let list = list_with_two_tasks(root.path());
    for stem in ABSURD_IDS {
        bait(list.dir(), stem);
    }
    assert_eq!(common::create(&list, "three").get(), 3);
    // Entries that are not tasks still hold their names: an id is never given to a name that
    // is taken (a FIFO at 4.json, a directory at 5.json).
    fifo(&list.dir().join("4.json"));
    std::fs::create_dir(list.dir().join("5.json")).unwrap();
    let creator = list.clone();
    let created = bounded("create", move || common::create(&creator, "six"));
    assert_eq!(created.get(), 6);
    assert!(list.high_water_mark().unwrap() <= 6);
}

/// The list's own files, and what a reader must say about each planted kind at them.
const STATE_FILES: [&str; 7] = [
    ".highwatermark",
    AUDIT_LOG_FILE,
    ".snapshot-cache",
    ".journal",
    ".wal",
    ".inboxes/ann.jsonl",
    ".lock",
];

#[derive(Debug, Clone, Copy)]
enum Planted {
    Fifo,
    SymlinkToPasswd,
    Directory,
    Huge,
}

impl Planted {
    fn plant(self, path: &Path) {
        match self {
            Planted::Fifo => fifo(path),
            Planted::SymlinkToPasswd => std::os::unix::fs::symlink("/etc/passwd", path).unwrap(),
            Planted::Directory => std::fs::create_dir(path).unwrap(),
            Planted::Huge => huge(path),
        }
    }
}

#[test]
fn the_lists_own_files_planted_as_fifos_symlinks_directories_or_huge_never_hang_a_reader() {
    let kinds = [
        Planted::Fifo,
        Planted::SymlinkToPasswd,
        Planted::Directory,
        Planted::Huge,
    ];
    // No task settles, so no snapshot writes the cache file over a planted one.
    let config = StoreConfig {
        cache_min_age: Duration::from_secs(3600),
        cache_min_age_local: Duration::from_secs(3600),
        ..common::fast_config()
    };
    for name in STATE_FILES {
        for kind in kinds {
            let root = tempfile::tempdir().unwrap();
            let list = list_with_two_tasks_in(root.path(), config.clone());
            let path = list.dir().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            let _ = std::fs::remove_file(&path);
            kind.plant(&path);
            let case = format!("{kind:?} at {name}");

            let reader = TaskList::open(root.path(), "list", config.clone()).unwrap();
            let snapshot = bounded(&case, move || {
                let snapshot = reader.snapshot().unwrap();
                let _ = reader.audit_log().unwrap();
                let _ = reader.inbox("ann").unwrap();
                let _ = reader.high_water_mark().unwrap();
                let _ = reader.ready().unwrap();
                snapshot
            });
            assert_eq!(ids(snapshot.tasks.keys().copied()), [1, 2], "{case}");
            // `.lock` is never read: its size does not matter.
            if !matches!((name, kind), (".lock", Planted::Huge)) {
                let named = named_by_doctor(&list);
                assert!(named.contains_key(name), "{case}: doctor named {named:?}");
            }
            // A write either works or is refused, at once.
            let writer = list.clone();
            let _ = bounded(&case, move || {
                writer.create(&task_list::CreateRequest::new("after", ""))
            });
        }
    }
}

#[test]
fn an_overlong_audit_line_is_skipped_without_being_held_and_the_records_around_it_read() {
    let root = tempfile::tempdir().unwrap();
    let list = list_with_two_tasks(root.path());
    let log = list.dir().join(AUDIT_LOG_FILE);
    let mut text = std::fs::read_to_string(&log).unwrap();
    let lines = text.lines().count();
    text.insert_str(0, &format!("{}\n", "x".repeat(5 << 20)));
    std::fs::write(&log, text).unwrap();
    let (records, problems) = list.audit_log().unwrap();
    assert_eq!(records.len(), lines);
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].file, format!("{AUDIT_LOG_FILE}:1"));
    assert!(matches!(problems[0].fault, EntryFault::TooLarge { .. }));
}

#[test]
fn doctor_fix_moves_what_can_never_be_a_task_into_the_quarantine_following_no_symlink() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let list = list_with_two_tasks(root.path());
    let expected = plant_task_entries(&list, outside.path());
    std::fs::write(list.dir().join("8.json"), "{not json").unwrap();
    let fixer = list.clone();
    bounded("doctor --fix", move || fixer.doctor(true)).unwrap();
    let quarantine = list.dir().join(QUARANTINE_DIR);
    for file in expected.keys() {
        assert!(
            std::fs::symlink_metadata(list.dir().join(file)).is_err(),
            "{file} left"
        );
        assert!(
            std::fs::symlink_metadata(quarantine.join(file)).is_ok(),
            "{file} not quarantined"
        );
    }
    assert!(
        std::fs::symlink_metadata(quarantine.join("5.json"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(std::fs::symlink_metadata("/etc/passwd").unwrap().is_file());
    // A malformed file may be a task caught half written: reported, left in place.
    let left = named_by_doctor(&list);
    assert_eq!(left.keys().collect::<Vec<_>>(), ["8.json"]);
    assert_eq!(ids(list.snapshot().unwrap().tasks.keys().copied()), [1, 2]);
}

#[test]
fn an_import_whose_high_water_mark_is_beyond_the_largest_id_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let list = common::open(root.path());
    let export = ListExport {
        format: EXPORT_FORMAT.into(),
        list_id: "list".into(),
        high_water_mark: TaskId::MAX + 1,
        tasks: vec![Task::new(common::id(1), "one", "")],
        audit: Vec::new(),
    };
    assert!(matches!(list.import(&export), Err(Error::InvalidExport(_))));
    assert!(list.snapshot().unwrap().tasks.is_empty());
}

#[test]
fn a_reset_beside_bad_entries_removes_the_tasks_and_leaves_the_list_writable() {
    let root = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let list = list_with_two_tasks(root.path());
    plant_task_entries(&list, outside.path());
    let resetter = list.clone();
    bounded("reset", move || resetter.reset()).unwrap();
    assert!(list.snapshot().unwrap().tasks.is_empty());
    // A directory at a task's name cannot be unlinked: it is left for `doctor`, and no journal
    // that would fail on it for ever is left behind.
    assert!(list.dir().join("7.json").is_dir());
    let creator = list.clone();
    let created = bounded("create", move || common::create(&creator, "after"));
    assert_eq!(created.get(), 8);
}
