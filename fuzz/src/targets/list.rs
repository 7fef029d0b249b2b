//! task-list: task files, and a whole list directory (which agents and the reference harness
//! write directly: every file in it is untrusted input).

use std::collections::BTreeSet;

use task_list::{CreateRequest, EntryFault, Problem, StoreConfig, Task, TaskId, TaskList};

use crate::scratch;

/// A handle on the list `fuzz` of this thread's scratch directory, emptied. No fsync and no
/// reference lock directories: they cost time and parse nothing.
fn fresh_list() -> TaskList {
    let root = scratch::fresh("lists");
    let mut config = StoreConfig {
        durable: false,
        ..StoreConfig::default()
    };
    config.lock.reference_locks = false;
    TaskList::open(&root, "fuzz", config).expect("a list in the scratch directory")
}

/// One task file's contents: parsed as every reader parses it; what parses is written back as
/// the reference writes it and must parse to an equal task; read through a list handle as `get`,
/// `list`, `ready` and `graph` read it.
pub fn task_file(data: &[u8]) {
    if let Ok(task) = Task::from_file_json(data) {
        let text = task.to_file_json();
        let again = Task::from_file_json(text.as_bytes()).expect("a task file reads back");
        assert_eq!(again, task, "a task reads back as it was written");
        assert_eq!(again.to_file_json(), text, "writing is deterministic");
        let _ = task.is_internal();
    }
    let list = fresh_list();
    let id = named_id(data).unwrap_or_else(|| TaskId::new(1).unwrap());
    scratch::write(&list.dir().join(id.file_name()), data);
    let got = list.get(id);
    if let Ok(Some(task)) = &got {
        assert_eq!(task.id, id, "a file holds the task it is named after");
    }
    let snapshot = list
        .snapshot()
        .expect("a snapshot never fails for a bad file");
    assert_eq!(snapshot.tasks.len() + snapshot.problems.len(), 1);
    let listed = list.list().expect("list never fails for a bad file");
    let _ = listed.model_text();
    let ready = list.ready().expect("ready never fails for a bad file");
    let _ = serde_json::to_string(&ready);
    let graph = list.graph().expect("graph never fails for a bad file");
    let _ = (graph.to_text(), graph.to_dot("fuzz"), graph.cycles());
    if let Ok(details) = list.get_details(id) {
        let _ = details.model_text();
    }
}

/// The id a task file's contents name, if any.
fn named_id(data: &[u8]) -> Option<TaskId> {
    let value: serde_json::Value = serde_json::from_slice(data).ok()?;
    TaskId::parse(value.get("id")?.as_str()?).ok()
}

/// The files of a list directory, from sections `=== {name}\n{contents}` (text before the first
/// header is `1.json`). Names are single path components of `[A-Za-z0-9._-]`; `.lock*` names are
/// left out (the lock files are the store's own).
fn files(data: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut name = String::from("1.json");
    let mut contents = Vec::new();
    let mut rest = data;
    loop {
        let (line, next) = match rest.iter().position(|&b| b == b'\n') {
            Some(end) => (&rest[..=end], Some(&rest[end + 1..])),
            None => (rest, None),
        };
        if let Some(header) = line.strip_prefix(b"=== ") {
            files.push((std::mem::take(&mut name), std::mem::take(&mut contents)));
            name = String::from_utf8_lossy(header).trim().to_owned();
        } else {
            contents.extend_from_slice(line);
        }
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    files.push((name, contents));
    let valid = |name: &str| {
        !name.is_empty()
            && name.len() <= 64
            && name != "."
            && name != ".."
            && !name.starts_with(".lock")
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    files.retain(|(name, contents)| valid(name) && !(name == "1.json" && contents.is_empty()));
    files
}

/// A whole list directory: every reader over it, `doctor` and its repair, and a create
/// (which replays a leftover journal first). Readers never fail for bad contents; a repair
/// leaves nothing `doctor` would repair again; a new id is above every id issued.
pub fn dir(data: &[u8]) {
    let list = fresh_list();
    let files = files(data);
    for (name, contents) in &files {
        scratch::write(&list.dir().join(name), contents);
    }
    let task_files: BTreeSet<TaskId> = files
        .iter()
        .filter_map(|(name, _)| TaskId::from_file_name(name))
        .collect();

    let snapshot = list
        .snapshot()
        .expect("a snapshot never fails for bad contents");
    // Names like task files whose id is not one (`0.json`, `-1.json`) are reported too.
    let (invalid, unread): (Vec<_>, Vec<_>) = snapshot
        .problems
        .iter()
        .partition(|p| p.fault == EntryFault::InvalidId);
    assert_eq!(
        snapshot.tasks.len() + unread.len(),
        task_files.len(),
        "every task file is read or reported"
    );
    for problem in invalid {
        assert!(
            files.iter().any(|(name, _)| *name == problem.file),
            "{problem} names a file that is there"
        );
    }
    for (id, task) in &snapshot.tasks {
        assert_eq!(task.id, *id);
        assert!(task_files.contains(id), "a task comes from its own file");
    }
    let _ = list
        .list()
        .expect("list never fails for bad contents")
        .model_text();
    let ready = list.ready().expect("ready never fails for bad contents");
    let _ = serde_json::to_string(&ready);
    let graph = list.graph().expect("graph never fails for bad contents");
    let _ = (
        graph.to_text(),
        graph.to_dot("fuzz"),
        graph.cycles(),
        graph.edges(),
    );
    let _ = list
        .audit_log()
        .expect("the audit log never fails for bad lines");
    let _ = list
        .high_water_mark()
        .expect("the high-water mark always reads");
    let _ = list.inbox("fuzz");
    let _ = list.export();
    let report = list
        .doctor(false)
        .expect("doctor never fails for bad contents");
    let _ = report.is_clean();

    if let Ok(report) = list.doctor(true) {
        let _ = report.is_clean();
        let again = list
            .doctor(false)
            .expect("doctor never fails after a repair");
        let left: Vec<&Problem> = again.problems.iter().filter(|p| fixable(p)).collect();
        assert!(
            left.is_empty(),
            "a repair left {left:?} (found {:?})",
            report.problems
        );
    }
    // The mark after the repair (which replays a leftover journal: a journal may lower the mark,
    // see README.md, "Findings"); a journal the repair could not replay is replayed by the
    // create, which may lower it again.
    let high_water_mark = list
        .high_water_mark()
        .expect("the high-water mark always reads");
    let journal_left = list.dir().join(".journal").exists();
    let highest = list
        .snapshot()
        .map(|s| s.tasks.keys().next_back().map_or(0, |id| id.get()))
        .unwrap_or(0);
    if let Ok(created) = list.create(&CreateRequest::new("fuzz", "")) {
        let id = created.task.id.get();
        assert!(
            id > highest,
            "a new id ({id}) is above every task ({highest})"
        );
        assert!(
            id > high_water_mark || journal_left,
            "a new id ({id}) is above the high-water mark ({high_water_mark})"
        );
        let task = list.get(created.task.id).expect("the new task reads");
        assert!(task.is_some(), "the new task exists");
    }
}

/// Problems `doctor --fix` repairs.
///
/// Known and left alone (README.md, "Findings"): an unreadable `.highwatermark` in a list where
/// no id above 0 is known is reported as drift by every `doctor` and never repaired (the repair
/// raises the mark to the highest id issued, 0, which is not above the unreadable mark's 0).
fn fixable(problem: &Problem) -> bool {
    match problem {
        Problem::CorruptFile { .. } | Problem::LockHeld { .. } | Problem::StaleLock { .. } => false,
        Problem::HighWaterMarkDrift {
            high_water_mark,
            highest_issued,
        } => highest_issued > high_water_mark,
        _ => true,
    }
}
