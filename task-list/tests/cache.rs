//! The snapshot cache never serves a stale task: a warm handle sees every change another
//! handle or another process makes, at once, including same-size rewrites in place (the way
//! the reference harness writes).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::{add_blocked_by, create, fast_config, id, wait_until};
use task_list::{
    ClaimOptions, NotReadyReason, ReadyReport, StoreConfig, TaskList, UpdateRequest, UpdateStatus,
};

const CACHE_MIN_AGE: Duration = Duration::from_millis(10);

fn config() -> StoreConfig {
    StoreConfig {
        cache_min_age: CACHE_MIN_AGE,
        ..fast_config()
    }
}

fn open(root: &Path) -> TaskList {
    TaskList::open(root, "list", config()).unwrap()
}

/// Waits until every task file was last changed well before now, so a snapshot caches them all.
fn settle(list: &TaskList) {
    wait_until("task files to settle", || {
        std::fs::read_dir(list.dir()).unwrap().all(|entry| {
            let meta = entry.unwrap().metadata().unwrap();
            let changed = SystemTime::UNIX_EPOCH
                + Duration::new(meta.ctime() as u64, meta.ctime_nsec() as u32);
            changed + 3 * CACHE_MIN_AGE < SystemTime::now()
        })
    });
}

/// Replaces `path`'s contents in place (same inode) from another process, as the reference
/// does, checking that the size is unchanged too.
fn rewrite_in_place_same_size(root: &Path, path: &Path, contents: &str) {
    let before = std::fs::symlink_metadata(path).unwrap();
    assert_eq!(
        before.len(),
        contents.len() as u64,
        "not a same-size rewrite"
    );
    let staged = root.join("staged.json");
    std::fs::write(&staged, contents).unwrap();
    let status = Command::new("cp").arg(&staged).arg(path).status().unwrap();
    assert!(status.success());
    let after = std::fs::symlink_metadata(path).unwrap();
    assert_eq!((before.ino(), before.len()), (after.ino(), after.len()));
}

/// Two handles on a new list where `#2 next` is blocked by `#1 root`.
fn root_and_next(root: &Path) -> (TaskList, TaskList) {
    let (list, other) = (open(root), open(root));
    create(&list, "root");
    create(&list, "next");
    add_blocked_by(&list, 2, &[1]);
    (list, other)
}

fn reasons(report: &ReadyReport, task: u64) -> Vec<NotReadyReason> {
    let entry = report.not_ready.iter().find(|r| r.id == id(task));
    entry.map(|r| r.reasons.clone()).unwrap_or_default()
}

fn ready_ids(report: &ReadyReport) -> Vec<u64> {
    report.ready.iter().map(|r| r.id.get()).collect()
}

#[test]
fn warm_ready_sees_a_same_size_rewrite_in_place_by_another_process() {
    let root = tempfile::tempdir().unwrap();
    let (list, _) = root_and_next(root.path());
    list.claim(id(1), "alice", ClaimOptions::default()).unwrap();
    settle(&list);
    let warm = list.ready().unwrap();
    assert!(reasons(&warm, 1).contains(&NotReadyReason::Owned {
        owner: "alice".into()
    }));
    assert_eq!(list.ready().unwrap(), warm);

    let path = list.dir().join("1.json");
    let text = std::fs::read_to_string(&path).unwrap();
    rewrite_in_place_same_size(root.path(), &path, &text.replace("\"alice\"", "\"bobby\""));

    let owners: Vec<_> = reasons(&list.ready().unwrap(), 1)
        .into_iter()
        .filter(|r| matches!(r, NotReadyReason::Owned { .. }))
        .collect();
    assert_eq!(
        owners,
        vec![NotReadyReason::Owned {
            owner: "bobby".into()
        }]
    );
}

#[test]
fn warm_ready_sees_another_handles_updates_at_once() {
    let root = tempfile::tempdir().unwrap();
    let (list, other) = root_and_next(root.path());
    settle(&list);
    assert_eq!(ready_ids(&list.ready().unwrap()), vec![1]);

    let mut rename = UpdateRequest::new(1);
    rename.subject = Some("ROOT".into());
    assert!(other.update(&rename).unwrap().success);
    assert_eq!(list.ready().unwrap().ready[0].subject, "ROOT");

    let mut complete = UpdateRequest::new(1);
    complete.status = Some(UpdateStatus::Completed);
    assert!(other.update(&complete).unwrap().success);
    let report = list.ready().unwrap();
    assert_eq!(ready_ids(&report), vec![2]);
    assert_eq!(reasons(&report, 1), vec![NotReadyReason::Completed]);
}

#[test]
fn warm_snapshot_drops_deleted_tasks_and_adds_created_ones() {
    let root = tempfile::tempdir().unwrap();
    let (list, other) = root_and_next(root.path());
    settle(&list);
    assert_eq!(list.snapshot().unwrap().tasks.len(), 2);

    let mut delete = UpdateRequest::new(1);
    delete.status = Some(UpdateStatus::Deleted);
    assert!(other.update(&delete).unwrap().success);
    create(&other, "after");
    let snapshot = list.snapshot().unwrap();
    assert_eq!(
        snapshot.tasks.keys().copied().collect::<Vec<_>>(),
        vec![id(2), id(3)]
    );
    assert!(snapshot.tasks[&id(2)].blocked_by.is_empty());
    assert_eq!(ready_ids(&list.ready().unwrap()), vec![2, 3]);
}

#[test]
fn a_cached_file_torn_in_place_is_reported_not_served() {
    let root = tempfile::tempdir().unwrap();
    let list = open(root.path());
    create(&list, "a");
    create(&list, "b");
    settle(&list);
    assert!(list.snapshot().unwrap().problems.is_empty());

    let path = list.dir().join("2.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let torn = format!("{:<width$}", "{\"id\": \"2\", \"subj", width = text.len());
    rewrite_in_place_same_size(root.path(), &path, &torn);
    let snapshot = list.snapshot().unwrap();
    assert_eq!(
        snapshot.tasks.keys().copied().collect::<Vec<_>>(),
        vec![id(1)]
    );
    assert_eq!(snapshot.problems[0].file, "2.json");

    rewrite_in_place_same_size(root.path(), &path, &text);
    let snapshot = list.snapshot().unwrap();
    assert_eq!(snapshot.tasks.len(), 2);
    assert!(snapshot.problems.is_empty());
}

#[test]
fn same_size_rewrite_right_after_a_warm_read_is_seen() {
    // Default settings: the files are too young to be cached, so a rewrite within the same
    // timestamp tick as the read (same size, same mtime) cannot be missed.
    let root = tempfile::tempdir().unwrap();
    let list = TaskList::open(root.path(), "list", StoreConfig::default()).unwrap();
    create(&list, "abc");
    assert_eq!(list.ready().unwrap().ready[0].subject, "abc");
    let path = list.dir().join("1.json");
    let text = std::fs::read_to_string(&path).unwrap();
    rewrite_in_place_same_size(root.path(), &path, &text.replace("\"abc\"", "\"xyz\""));
    assert_eq!(list.ready().unwrap().ready[0].subject, "xyz");
}

const CACHE_FILE: &str = ".snapshot-cache";

/// Edits the subject of every task in `list`'s cache file, keeping the stamps: what a new
/// handle then shows tells whether it served the cache or read the files.
fn tamper_with_cache_file(list: &TaskList, from: &str, to: &str) {
    let path = list.dir().join(CACHE_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(from), "{text}");
    std::fs::write(&path, text.replace(from, to)).unwrap();
}

fn subjects(list: &TaskList) -> Vec<String> {
    let tasks = list.snapshot().unwrap().tasks;
    tasks.into_values().map(|t| t.subject).collect()
}

/// [`root_and_next`], settled and read once so that its cache file holds both tasks; the list
/// and the cache file's path.
fn cached_root_and_next(root: &Path) -> (TaskList, std::path::PathBuf) {
    let (list, _) = root_and_next(root);
    settle(&list);
    assert_eq!(subjects(&list), ["root", "next"]);
    let path = list.dir().join(CACHE_FILE);
    (list, path)
}

#[test]
fn a_new_handle_starts_from_the_cache_file_while_the_files_are_unchanged() {
    let root = tempfile::tempdir().unwrap();
    let (list, _) = cached_root_and_next(root.path());
    tamper_with_cache_file(&list, "\"next\"", "\"NEXT\"");
    // The stamps in the cache file still match the files, so a new handle serves its entries:
    // task #2 was not read again.
    assert_eq!(subjects(&open(root.path())), ["root", "NEXT"]);

    // Once the file changes (even rewritten in place to the same size), it is read again.
    let path = list.dir().join("2.json");
    let text = std::fs::read_to_string(&path).unwrap();
    rewrite_in_place_same_size(root.path(), &path, &text.replace("\"next\"", "\"nExt\""));
    assert_eq!(subjects(&open(root.path())), ["root", "nExt"]);
}

#[test]
fn a_cache_file_that_is_damaged_foreign_or_a_symlink_is_ignored() {
    let root = tempfile::tempdir().unwrap();
    let (_, path) = cached_root_and_next(root.path());
    let good = std::fs::read(&path).unwrap();
    let foreign = String::from_utf8(good.clone())
        .unwrap()
        .replace("\"version\":1", "\"version\":99")
        .replace("\"next\"", "\"NEXT\"");
    let decoy = root.path().join("decoy");
    std::fs::write(
        &decoy,
        String::from_utf8(good.clone())
            .unwrap()
            .replace("\"next\"", "\"NEXT\""),
    )
    .unwrap();
    let damaged: Vec<Vec<u8>> = vec![
        good[..good.len() / 2].to_vec(),
        Vec::new(),
        b"\0\0\0\0".to_vec(),
        foreign.into_bytes(),
    ];
    for bytes in damaged {
        std::fs::write(&path, &bytes).unwrap();
        assert_eq!(subjects(&open(root.path())), ["root", "next"]);
    }
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&decoy, &path).unwrap();
    assert_eq!(subjects(&open(root.path())), ["root", "next"]);
    let decoy_text = std::fs::read_to_string(&decoy).unwrap();
    assert!(
        decoy_text.contains("NEXT"),
        "the symlink's target was written through"
    );
}

#[test]
fn the_cache_file_is_rewritten_only_when_the_cache_changed() {
    let root = tempfile::tempdir().unwrap();
    let (list, path) = cached_root_and_next(root.path());
    let first = std::fs::symlink_metadata(&path).unwrap().ino();
    subjects(&open(root.path()));
    list.ready().unwrap();
    assert_eq!(
        std::fs::symlink_metadata(&path).unwrap().ino(),
        first,
        "unchanged cache rewritten"
    );
    create(&list, "third");
    settle(&list);
    assert_eq!(subjects(&open(root.path())), ["root", "next", "third"]);
    assert_ne!(std::fs::symlink_metadata(&path).unwrap().ino(), first);

    let off = TaskList::open(
        root.path(),
        "other",
        StoreConfig {
            cache_file: false,
            ..config()
        },
    )
    .unwrap();
    create(&off, "a");
    settle(&off);
    subjects(&off);
    assert!(!off.dir().join(CACHE_FILE).exists());
}

#[test]
fn on_a_local_filesystem_files_are_cached_once_50_ms_old_not_2_s() {
    let root = tempfile::tempdir().unwrap();
    let list = TaskList::open(root.path(), "list", fast_config()).unwrap();
    create(&list, "young");
    let path = list.dir().join("1.json");
    wait_until("the file to be 150 ms old", || {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let changed =
            SystemTime::UNIX_EPOCH + Duration::new(meta.ctime() as u64, meta.ctime_nsec() as u32);
        changed + Duration::from_millis(150) < SystemTime::now()
    });
    assert_eq!(subjects(&list), ["young"]);
    tamper_with_cache_file(&list, "\"young\"", "\"YOUNG\"");
    assert_eq!(
        subjects(&open(root.path())),
        ["YOUNG"],
        "not cached at 150 ms"
    );
}
