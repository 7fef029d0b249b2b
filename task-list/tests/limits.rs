//! A transaction writing far more files than the process may hold open: a commit keeps only a
//! batch of them open at a time. (Its own test binary: it lowers the process's open-file limit.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use task_list::{EXPORT_FORMAT, ListExport, Task, TaskId};

#[test]
fn an_import_of_2000_tasks_fits_in_128_open_files() {
    let limit = getrlimit(Resource::Nofile);
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(128),
            maximum: limit.maximum,
        },
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    let list = common::open(root.path());
    let export = ListExport {
        format: EXPORT_FORMAT.into(),
        list_id: "list".into(),
        high_water_mark: 2000,
        tasks: (1..=2000)
            .map(|i| Task::new(TaskId::new(i).unwrap(), format!("task {i}"), ""))
            .collect(),
        audit: Vec::new(),
    };
    assert_eq!(list.import(&export).unwrap(), 2000);
    let snapshot = list.snapshot().unwrap();
    assert_eq!(snapshot.tasks.len(), 2000);
    assert!(snapshot.problems.is_empty());
    let leftovers: Vec<_> = std::fs::read_dir(list.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".tmp.") || name == ".journal")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
