//! Compatibility with the reference harness: its files load here, ours match its format, and
//! its lock protocol is honoured.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{add_blocked_by, create, fast_config, id, open};
use task_list::{Error, LockConfig, StoreConfig, TaskList, TaskStatus, UpdateRequest};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference")
        .join(name)
}

/// Copies a reference list into a temp lists root and opens it.
fn open_fixture(name: &str, root: &Path) -> TaskList {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).unwrap();
    for entry in std::fs::read_dir(fixture(name)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.join(entry.file_name())).unwrap();
    }
    TaskList::open(root, name, fast_config()).unwrap()
}

fn observed() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/observed.md"),
    )
    .unwrap()
}

#[test]
fn reference_lists_load() {
    let root = tempfile::tempdir().unwrap();
    let list = open_fixture("delete-owner-metadata", root.path());
    let snapshot = list.snapshot().unwrap();
    assert!(snapshot.problems.is_empty());
    let one = &snapshot.tasks[&id(1)];
    assert_eq!(
        (one.owner.as_deref(), one.status),
        (Some("alice"), TaskStatus::Completed)
    );
    assert_eq!(one.metadata.as_ref().unwrap()["z"], "x");
    assert_eq!(snapshot.tasks[&id(2)].blocked_by, vec![id(2), id(1)]);
    assert_eq!(list.high_water_mark().unwrap(), 3);
    // The reference's final TaskList text, as observed.
    let text = list.list().unwrap().model_text();
    assert_eq!(
        text,
        "#1 [completed] one (alice) [blocked by #2]\n#2 [pending] two [blocked by #2]"
    );
    assert!(observed().contains(&text));
    let get = list.get_details(id(2)).unwrap().model_text();
    assert_eq!(
        get,
        "Task #2: two\nStatus: pending\nDescription: d2\nBlocked by: #2, #1\nBlocks: #2, #1"
    );
    assert!(observed().contains(&get));
    // Deleted id 3 stays retired.
    assert_eq!(create(&list, "next"), id(4));
}

#[test]
fn reference_damage_is_found_by_doctor() {
    let root = tempfile::tempdir().unwrap();
    let list = open_fixture("delete-owner-metadata", root.path());
    let problems = list.doctor(false).unwrap().problems;
    assert!(
        problems.contains(&task_list::Problem::SelfEdge { task: id(2) }),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, task_list::Problem::Cycle { .. })),
        "{problems:?}"
    );
    list.doctor(true).unwrap();
    assert!(list.doctor(false).unwrap().is_clean());
}

#[test]
fn files_we_write_are_byte_identical_to_the_reference() {
    // Replay what produced `schema-and-edges`: two creates, then 2 blockedBy 1.
    let root = tempfile::tempdir().unwrap();
    let list = open(root.path());
    let first = list
        .create(&task_list::CreateRequest::new("Set up schema", "first"))
        .unwrap();
    let mut second = task_list::CreateRequest::new("Write API", "second");
    second.active_form = Some("Writing API".into());
    let second = list.create(&second).unwrap();
    let edge = add_blocked_by(&list, 2, &[1]);
    for text in [first.model_text(), second.model_text(), edge.model_text()] {
        assert!(
            observed().contains(&format!("```\n{text}\n```")),
            "{text:?} not observed"
        );
    }
    assert_eq!(
        list.list().unwrap().model_text(),
        "#1 [pending] Set up schema\n#2 [pending] Write API [blocked by #1]"
    );
    for name in ["1.json", "2.json", ".lock"] {
        let ours = std::fs::read(list.dir().join(name)).unwrap();
        let theirs = std::fs::read(fixture("schema-and-edges").join(name)).unwrap();
        assert_eq!(
            String::from_utf8_lossy(&ours),
            String::from_utf8_lossy(&theirs),
            "{name}"
        );
    }
    assert!(
        !list.dir().join(".highwatermark").exists(),
        "the reference writes it only on delete"
    );
    // Nothing else the reference would read as a task.
    let task_like: Vec<String> = std::fs::read_dir(list.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    assert_eq!(task_like.len(), 2, "{task_like:?}");
}

#[test]
fn round_trip_keeps_the_reference_field_set_and_format() {
    for list in ["schema-and-edges", "delete-owner-metadata"] {
        for entry in std::fs::read_dir(fixture(list)).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                let text = std::fs::read_to_string(&path).unwrap();
                let task = task_list::Task::from_file_json(text.as_bytes()).unwrap();
                assert_eq!(task.to_file_json(), text, "{}", path.display());
            }
        }
    }
}

/// Priorities, parents and positions live in `metadata`, which the reference keeps: a task
/// file of the reference's format with them reads them, and our writes keep the reference's
/// field set and every other metadata key.
#[test]
fn queue_fields_are_reference_metadata() {
    let root = tempfile::tempdir().unwrap();
    let list = open_fixture("delete-owner-metadata", root.path());
    let reference = std::fs::read_to_string(list.dir().join("1.json")).unwrap();
    let with_priority = reference.replace(
        "\"z\": \"x\"",
        "\"z\": \"x\",\n    \"priority\": 0,\n    \"parent\": \"2\",\n    \"position\": 4096",
    );
    std::fs::write(list.dir().join("1.json"), &with_priority).unwrap();
    let task = list.get(id(1)).unwrap().unwrap();
    assert_eq!(task.priority(), 0);
    assert_eq!(task.parent(), Some(id(2)));
    assert_eq!(task.position(), 4096);
    assert_eq!(list.children(id(2)).unwrap(), [id(1)]);
    assert_eq!(
        task.to_file_json(),
        with_priority,
        "the reference's format, unchanged"
    );
    assert_eq!(
        list.get(id(2)).unwrap().unwrap().priority(),
        task_list::DEFAULT_PRIORITY
    );
    let mut update = UpdateRequest::new(1);
    update.subject = Some("renamed".into());
    assert!(list.update(&update).unwrap().success);
    let written = std::fs::read_to_string(list.dir().join("1.json")).unwrap();
    assert_eq!(written, with_priority.replace("\"one\"", "\"renamed\""));
}

#[test]
fn a_held_reference_lock_is_respected_and_a_stale_one_taken_over() {
    let root = tempfile::tempdir().unwrap();
    let patient = open(root.path());
    create(&patient, "a");
    let impatient = open_impatient(root.path());
    // The reference holds 1.json's lock (fresh mtime): we must not write 1.json.
    let lock = patient.dir().join("1.json.lock");
    std::fs::create_dir(&lock).unwrap();
    let mut rename = UpdateRequest::new(1);
    rename.subject = Some("renamed".into());
    assert!(matches!(
        impatient.update(&rename),
        Err(Error::LockBusy { .. })
    ));
    assert_eq!(patient.get(id(1)).unwrap().unwrap().subject, "a");
    // The reference holds the list lock: creates wait too.
    std::fs::create_dir(patient.dir().join(".lock.lock")).unwrap();
    assert!(matches!(
        impatient.create(&task_list::CreateRequest::new("b", "")),
        Err(Error::LockBusy { .. })
    ));
    // Once the holder is gone for longer than the stale limit, the locks are taken over.
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    for dir in [&lock, &patient.dir().join(".lock.lock")] {
        std::fs::File::open(dir).unwrap().set_modified(old).unwrap();
    }
    assert!(patient.update(&rename).unwrap().success);
    assert_eq!(patient.get(id(1)).unwrap().unwrap().subject, "renamed");
    assert_eq!(create(&patient, "b"), id(2));
    assert!(
        !lock.exists() && !patient.dir().join(".lock.lock").exists(),
        "released after use"
    );
}

#[test]
fn without_reference_locks_no_lock_directory_is_taken_or_waited_for() {
    let root = tempfile::tempdir().unwrap();
    let mut config = fast_config();
    config.lock.reference_locks = false;
    let list = TaskList::open(root.path(), "list", config).unwrap();
    create(&list, "a");
    create(&list, "b");
    // Lock directories a reference harness would hold do not stop a list that is not shared
    // with one (the kernel flock orders this crate's own writers).
    for held in ["1.json.lock", "2.json.lock", ".lock.lock"] {
        std::fs::create_dir(list.dir().join(held)).unwrap();
    }
    let mut edge = UpdateRequest::new(2);
    edge.add_blocked_by = Some(vec!["1".into()]);
    assert!(list.update(&edge).unwrap().success);
    assert_eq!(create(&list, "c"), id(3));
    assert_eq!(list.get(id(1)).unwrap().unwrap().blocks, [id(2)]);
    for held in ["1.json.lock", "2.json.lock", ".lock.lock"] {
        std::fs::remove_dir(list.dir().join(held)).unwrap();
    }
    // And none is left behind by its own writes.
    let mut rename = UpdateRequest::new(3);
    rename.subject = Some("renamed".into());
    assert!(list.update(&rename).unwrap().success);
    let lock_dirs: Vec<_> = std::fs::read_dir(list.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".lock") && name != ".lock")
        .collect();
    assert!(lock_dirs.is_empty(), "{lock_dirs:?}");
}

#[test]
fn a_torn_reference_write_is_reread_under_its_lock_before_being_called_corrupt() {
    let root = tempfile::tempdir().unwrap();
    let list = open_impatient(root.path());
    create(&list, "a");
    let good = std::fs::read(list.dir().join("1.json")).unwrap();
    // The reference is mid-write: half a file, its lock held. We wait for the lock rather than
    // declare the file corrupt.
    let lock = list.dir().join("1.json.lock");
    std::fs::create_dir(&lock).unwrap();
    std::fs::write(list.dir().join("1.json"), &good[..good.len() / 2]).unwrap();
    assert!(matches!(list.get(id(1)), Err(Error::LockBusy { .. })));
    // With no writer holding it, the same bytes are corrupt, reported by name.
    std::fs::remove_dir(&lock).unwrap();
    match list.get(id(1)) {
        Err(Error::Corrupt { path, .. }) => assert!(path.ends_with("1.json")),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    std::fs::write(list.dir().join("1.json"), &good).unwrap();
    assert_eq!(list.get(id(1)).unwrap().unwrap().subject, "a");
}

/// A handle that gives up on a held lock after two retries instead of thirty.
fn open_impatient(root: &std::path::Path) -> TaskList {
    let config = StoreConfig {
        lock: LockConfig {
            retries: 2,
            ..fast_config().lock
        },
        ..fast_config()
    };
    TaskList::open(root, "list", config).unwrap()
}
