//! `TaskCreated` / `TaskCompleted` hooks as real processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{create, fast_config, id, wait_until};
use task_list::{
    CreateRequest, Error, HookCommand, StoreConfig, TaskList, TaskStatus, UpdateRequest,
    UpdateStatus,
};

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn list_with(root: &Path, configure: impl FnOnce(&mut StoreConfig)) -> TaskList {
    let mut config = fast_config();
    // Generous: a hook that is meant to finish must never time out on a loaded machine.
    // The hung-hook test sets its own short limit.
    config.hooks.timeout = Duration::from_secs(60);
    configure(&mut config);
    TaskList::open(root.join("lists"), "list", config).unwrap()
}

fn complete(list: &TaskList, n: u64) -> task_list::UpdateResult {
    let mut request = UpdateRequest::new(n);
    request.status = Some(UpdateStatus::Completed);
    list.update(&request).unwrap()
}

#[test]
fn blocking_created_hook_rolls_the_task_back() {
    let root = tempfile::tempdir().unwrap();
    let input = root.path().join("input.json");
    let hook = script(
        root.path(),
        "gate.sh",
        &format!(
            "cat > '{}'\necho 'subjects must name a ticket' >&2\nexit 2",
            input.display()
        ),
    );
    let list = list_with(root.path(), |c| {
        c.hooks.task_created = vec![HookCommand::new(&hook, Vec::<String>::new())]
    });
    match list.create(&CreateRequest::new("vague", "desc")) {
        Err(e @ Error::CreateBlocked { .. }) => {
            assert_eq!(
                e.to_string(),
                "TaskCreated hook feedback:\nsubjects must name a ticket"
            );
        }
        other => panic!("expected CreateBlocked, got {other:?}"),
    }
    assert!(list.snapshot().unwrap().tasks.is_empty(), "rolled back");
    let stdin: serde_json::Value = serde_json::from_slice(&std::fs::read(&input).unwrap()).unwrap();
    assert_eq!(
        stdin,
        serde_json::json!({"hook_event_name": "TaskCreated", "task_id": "1", "task_subject": "vague", "task_description": "desc"})
    );
    let ops: Vec<task_list::AuditOp> = list.audit_log().unwrap().0.iter().map(|r| r.op).collect();
    assert_eq!(
        ops,
        vec![task_list::AuditOp::Create, task_list::AuditOp::Rollback]
    );
    // The rolled-back id is never reused.
    let free = list_with(root.path(), |_| {});
    assert_eq!(create(&free, "next"), id(2));
}

#[test]
fn blocking_completed_hook_leaves_the_status_unchanged() {
    let root = tempfile::tempdir().unwrap();
    let hook = script(
        root.path(),
        "tests.sh",
        "cat >/dev/null\necho '3 tests failing' >&2\nexit 2",
    );
    let list = list_with(root.path(), |c| {
        c.hooks.task_completed = vec![HookCommand::new(&hook, Vec::<String>::new())]
    });
    create(&list, "ship");
    let result = complete(&list, 1);
    assert!(!result.success);
    assert_eq!(
        result.error.as_deref(),
        Some("TaskCompleted hook feedback:\n3 tests failing")
    );
    assert_eq!(
        result.model_text(),
        "TaskCompleted hook feedback:\n3 tests failing"
    );
    assert_eq!(
        list.get(id(1)).unwrap().unwrap().status,
        TaskStatus::Pending
    );
}

#[test]
fn non_blocking_hook_failure_is_a_warning() {
    let root = tempfile::tempdir().unwrap();
    let hook = script(root.path(), "flaky.sh", "echo oops >&2\nexit 1");
    let list = list_with(root.path(), |c| {
        c.hooks.task_created = vec![HookCommand::new(&hook, Vec::<String>::new())];
        c.hooks.task_completed = vec![HookCommand::new(&hook, Vec::<String>::new())];
    });
    let created = list.create(&CreateRequest::new("a", "")).unwrap();
    assert_eq!(created.warnings.len(), 1);
    assert!(
        created.warnings[0].contains("oops"),
        "{:?}",
        created.warnings
    );
    let done = complete(&list, 1);
    assert!(done.success && done.warnings.len() == 1);
    assert_eq!(
        list.get(id(1)).unwrap().unwrap().status,
        TaskStatus::Completed
    );
}

#[test]
fn hung_hook_is_killed_with_its_process_group_and_reported() {
    let root = tempfile::tempdir().unwrap();
    let pids = root.path().join("pids");
    let hook = script(
        root.path(),
        "hang.sh",
        &format!("sleep 300 &\necho $! > '{}'\nsleep 300", pids.display()),
    );
    let list = list_with(root.path(), |c| {
        c.hooks.timeout = Duration::from_millis(300);
        c.hooks.task_completed = vec![HookCommand::new(&hook, Vec::<String>::new())]
    });
    create(&list, "a");
    let result = complete(&list, 1);
    assert!(result.success, "a hung hook does not block");
    assert!(
        result.warnings[0].contains("timed out after 300 ms and was killed"),
        "{:?}",
        result.warnings
    );
    let background: i32 = std::fs::read_to_string(&pids)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let pid = rustix::process::Pid::from_raw(background).unwrap();
    // The grandchild was in the hook's group: it is gone (ESRCH once its zombie is reaped by init).
    wait_until("the hook's background sleep to die", || {
        rustix::process::test_kill_process(pid).is_err()
            || std::fs::read_to_string(format!("/proc/{background}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
    });
}

#[test]
fn a_hook_that_writes_20_mb_is_read_through_pipe_mode_and_its_last_lines_are_the_feedback() {
    let root = tempfile::tempdir().unwrap();
    let hook = script(
        root.path(),
        "loud.sh",
        "yes 0123456789012345678901234567890123456789012345678 | head -c 20000000 >&2\n\
         echo >&2; echo 'the last line' >&2\nexit 2",
    );
    let list = list_with(root.path(), |c| {
        c.hooks.task_created = vec![HookCommand::new(&hook, Vec::<String>::new())]
    });
    let feedback = match list.create(&CreateRequest::new("loud", "desc")) {
        Err(e @ Error::CreateBlocked { .. }) => e.to_string(),
        other => panic!("expected CreateBlocked, got {other:?}"),
    };
    let saved = feedback
        .split("Full output saved to: ")
        .nth(1)
        .unwrap_or_else(|| panic!("no spill named: {feedback}"))
        .trim()
        .to_owned();
    let spilled = std::fs::metadata(&saved).map(|m| m.len()).unwrap_or(0);
    std::fs::remove_file(&saved).unwrap();
    assert!(
        feedback.len() < 4096,
        "{} bytes of feedback",
        feedback.len()
    );
    assert!(feedback.contains("\nthe last line\n"), "{feedback}");
    assert!(spilled > 20_000_000, "{spilled} bytes spilled");
}
