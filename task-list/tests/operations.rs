//! Every operation and every result reason, on real directories.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{add_blocked_by, create, id, open};
use serde_json::json;
use task_list::{
    AuditOp, ClaimFailure, ClaimOptions, CreateRequest, NotReadyReason, StoreConfig, TaskList,
    TaskStatus, UnassignReason, UpdateRequest, UpdateStatus,
};

fn status(list: &TaskList, task: u64, status: UpdateStatus) -> task_list::UpdateResult {
    let mut request = UpdateRequest::new(task);
    request.status = Some(status);
    list.update(&request).unwrap()
}

store_tests! {
fn create_numbers_from_files_and_high_water_mark(fx) {
    let list = fx.open();
    assert_eq!(create(&list, "a"), id(1));
    assert_eq!(create(&list, "b"), id(2));
    fx.set_high_water_mark_raw(7);
    assert_eq!(create(&list, "c"), id(8));
    let created = list.create(&CreateRequest::new("d", "x")).unwrap();
    assert_eq!(created.model_text(), "Task #9 created successfully: d");
    assert_eq!(
        serde_json::to_value(&created).unwrap(),
        json!({"task": {"id": "9", "subject": "d"}})
    );
}

fn handles_see_each_others_ids_and_deletes(fx) {
    let a = fx.open();
    let b = fx.open();
    assert_eq!(create(&a, "a1"), id(1));
    assert_eq!(create(&b, "b1"), id(2));
    assert_eq!(create(&b, "b2"), id(3));
    assert_eq!(create(&a, "a2"), id(4));
    assert!(status(&b, 4, UpdateStatus::Deleted).success);
    assert!(status(&b, 2, UpdateStatus::Deleted).success);
    assert_eq!(create(&a, "a3"), id(5));
    assert_eq!(create(&b, "b3"), id(6));
}

fn ids_are_never_reused_after_delete_or_reset(fx) {
    let list = fx.open();
    for s in ["a", "b", "c"] {
        create(&list, s);
    }
    let deleted = status(&list, 3, UpdateStatus::Deleted);
    assert_eq!(deleted.model_text(), "Updated task #3 deleted");
    assert_eq!(
        serde_json::to_value(&deleted).unwrap(),
        json!({"success": true, "taskId": "3", "updatedFields": ["deleted"], "statusChange": {"from": "pending", "to": "deleted"}})
    );
    assert_eq!(list.high_water_mark().unwrap(), 3);
    assert_eq!(create(&list, "d"), id(4));
    assert_eq!(list.reset().unwrap(), 3);
    assert!(list.snapshot().unwrap().tasks.is_empty());
    assert_eq!(create(&list, "e"), id(5));
    assert_eq!(
        status(&list, 99, UpdateStatus::Deleted).model_text(),
        "Task not found"
    );
}

fn get_and_list_render_the_reference_texts(fx) {
    let list = fx.open();
    create(&list, "one");
    create(&list, "two");
    assert!(add_blocked_by(&list, 2, &[1]).success);
    let got = list.get_details(id(2)).unwrap();
    assert_eq!(
        got.model_text(),
        "Task #2: two\nStatus: pending\nDescription: about two\nBlocked by: #1"
    );
    assert_eq!(
        serde_json::to_value(&got).unwrap(),
        json!({"task": {"id": "2", "subject": "two", "description": "about two", "status": "pending", "blocks": [], "blockedBy": ["1"]}})
    );
    assert_eq!(
        list.get_details(id(3)).unwrap().model_text(),
        "Task not found"
    );
    assert_eq!(
        serde_json::to_value(list.get_details(id(3)).unwrap()).unwrap(),
        json!({"task": null})
    );

    let mut own = UpdateRequest::new(1);
    own.owner = Some("alice".into());
    own.status = Some(UpdateStatus::Completed);
    list.update(&own).unwrap();
    let listing = list.list().unwrap();
    assert_eq!(
        listing.model_text(),
        "#1 [completed] one (alice)\n#2 [pending] two"
    );
    assert_eq!(
        serde_json::to_value(&listing).unwrap(),
        json!({"tasks": [
            {"id": "1", "subject": "one", "status": "completed", "owner": "alice", "blockedBy": []},
            {"id": "2", "subject": "two", "status": "pending", "blockedBy": []}
        ]})
    );
    list.reset().unwrap();
    assert_eq!(list.list().unwrap().model_text(), "No tasks found");
}

fn update_fields_metadata_and_status_in_reference_order(fx) {
    let list = fx.open();
    create(&list, "one");
    let mut first = UpdateRequest::new(1);
    first.status = Some(UpdateStatus::InProgress);
    first.metadata = Some(json!({"k": 1, "z": "x"}).as_object().unwrap().clone());
    let result = list.update(&first).unwrap();
    assert_eq!(result.model_text(), "Updated task #1 metadata, status");
    assert_eq!(
        serde_json::to_value(&result).unwrap(),
        json!({"success": true, "taskId": "1", "updatedFields": ["metadata", "status"], "statusChange": {"from": "pending", "to": "in_progress"}})
    );
    let mut second = UpdateRequest::new(1);
    second.metadata = Some(json!({"k": null}).as_object().unwrap().clone());
    second.owner = Some("alice".into());
    assert_eq!(
        list.update(&second).unwrap().model_text(),
        "Updated task #1 owner, metadata"
    );
    let mut third = UpdateRequest::new(1);
    third.subject = Some("uno".into());
    third.description = Some("d".into());
    third.active_form = Some("Doing uno".into());
    assert_eq!(
        list.update(&third).unwrap().model_text(),
        "Updated task #1 subject, description, activeForm"
    );
    let task = list.get(id(1)).unwrap().unwrap();
    assert_eq!(
        task.metadata.unwrap(),
        *json!({"z": "x"}).as_object().unwrap()
    );
    assert_eq!(task.owner.as_deref(), Some("alice"));
    assert_eq!(task.status, TaskStatus::InProgress);
    let mut clear = UpdateRequest::new(1);
    clear.owner = Some(String::new());
    assert_eq!(list.update(&clear).unwrap().updated_fields, vec!["owner"]);
    assert_eq!(list.get(id(1)).unwrap().unwrap().owner, None);
    let missing = list.update(&UpdateRequest::new(42)).unwrap();
    assert_eq!(
        (missing.success, missing.error.as_deref()),
        (false, Some("Task not found"))
    );
    assert_eq!(
        list.update(&UpdateRequest::new("../1"))
            .unwrap()
            .error
            .as_deref(),
        Some("Task not found")
    );
}

fn edges_are_written_on_both_tasks(fx) {
    let list = fx.open();
    for s in ["a", "b", "c"] {
        create(&list, s);
    }
    let mut request = UpdateRequest::new(1);
    request.add_blocks = Some(vec!["2".into(), "3".into()]);
    assert_eq!(
        list.update(&request).unwrap().model_text(),
        "Updated task #1 blocks"
    );
    assert_eq!(list.get(id(1)).unwrap().unwrap().blocks, vec![id(2), id(3)]);
    assert_eq!(list.get(id(3)).unwrap().unwrap().blocked_by, vec![id(1)]);
    // Adding an existing edge again changes nothing.
    assert!(add_blocked_by(&list, 2, &[1]).updated_fields.is_empty());
}

fn refused_edges_say_why_and_write_nothing(fx) {
    let list = fx.open();
    for s in ["a", "b", "c", "d", "e"] {
        create(&list, s);
    }
    let self_edge = add_blocked_by(&list, 2, &[2]);
    assert_eq!(
        self_edge.error.as_deref(),
        Some("Cannot add dependency: task #2 cannot block itself")
    );
    let missing = add_blocked_by(&list, 2, &[99]);
    assert_eq!(
        missing.error.as_deref(),
        Some("Cannot add dependency: task #99 does not exist (it may have been deleted)")
    );
    status(&list, 4, UpdateStatus::Deleted);
    assert!(
        add_blocked_by(&list, 2, &[4])
            .error
            .unwrap()
            .contains("task #4 does not exist")
    );
    assert!(add_blocked_by(&list, 5, &[3]).success);
    let cycle = add_blocked_by(&list, 3, &[5]);
    assert!(!cycle.success);
    assert_eq!(
        cycle.error.as_deref(),
        Some("Cannot add dependency: #5 blocking #3 would create a cycle: 5 → 3 → 5")
    );
    // A longer cycle, and a request whose own edges close one.
    assert!(add_blocked_by(&list, 1, &[5]).success);
    assert!(
        add_blocked_by(&list, 3, &[1])
            .error
            .unwrap()
            .ends_with("1 → 3 → 5 → 1")
    );
    let mut both = UpdateRequest::new(2);
    both.add_blocks = Some(vec!["1".into()]);
    both.add_blocked_by = Some(vec!["1".into()]);
    both.subject = Some("not applied".into());
    assert!(!list.update(&both).unwrap().success);
    let two = list.get(id(2)).unwrap().unwrap();
    assert_eq!(
        (two.subject.as_str(), two.blocks.len(), two.blocked_by.len()),
        ("b", 0, 0)
    );
    assert!(list.doctor(false).unwrap().is_clean());
}

fn delete_strips_references_everywhere(fx) {
    let list = fx.open();
    for s in ["a", "b", "c"] {
        create(&list, s);
    }
    add_blocked_by(&list, 2, &[1]);
    add_blocked_by(&list, 3, &[2]);
    // A one-sided reference (as a crashed reference writer could leave) is stripped too.
    let mut one = list.get(id(1)).unwrap().unwrap();
    one.blocked_by.push(id(2));
    fx.write_raw(&one);
    assert!(status(&list, 2, UpdateStatus::Deleted).success);
    assert!(list.get(id(2)).unwrap().is_none());
    for task in list.snapshot().unwrap().tasks.values() {
        assert!(
            !task.blocks.contains(&id(2)) && !task.blocked_by.contains(&id(2)),
            "{task:?}"
        );
    }
}

fn claim_reports_every_reason(fx) {
    let list = fx.open();
    for s in ["a", "b", "c", "d"] {
        create(&list, s);
    }
    add_blocked_by(&list, 2, &[1]);
    let no = ClaimOptions::default();
    let busy = ClaimOptions {
        check_agent_busy: true,
        ..ClaimOptions::default()
    };
    let reason = |r: task_list::ClaimResult| r.reason;
    assert_eq!(
        reason(list.claim(id(9), "ann", no).unwrap()),
        Some(ClaimFailure::TaskNotFound)
    );
    let blocked = list.claim(id(2), "ann", no).unwrap();
    assert_eq!(
        (blocked.reason, blocked.blocked_by_tasks.clone()),
        (Some(ClaimFailure::Blocked), vec![id(1)])
    );
    let won = list.claim(id(1), "ann", no).unwrap();
    assert!(won.success);
    assert_eq!(won.task.unwrap().owner.as_deref(), Some("ann"));
    assert!(
        list.claim(id(1), "ann", no).unwrap().success,
        "re-claim by the owner"
    );
    assert_eq!(
        reason(list.claim(id(1), "bob", no).unwrap()),
        Some(ClaimFailure::AlreadyClaimed)
    );
    let agent_busy = list.claim(id(3), "ann", busy).unwrap();
    assert_eq!(
        (agent_busy.reason, agent_busy.busy_with_tasks.clone()),
        (Some(ClaimFailure::AgentBusy), vec![id(1)])
    );
    assert_eq!(
        serde_json::to_value(&agent_busy).unwrap()["reason"],
        json!("agent_busy")
    );
    status(&list, 4, UpdateStatus::Completed);
    assert_eq!(
        reason(list.claim(id(4), "bob", no).unwrap()),
        Some(ClaimFailure::AlreadyResolved)
    );
    status(&list, 1, UpdateStatus::Completed);
    assert!(
        list.claim(id(2), "bob", no).unwrap().success,
        "unblocked once #1 is completed"
    );
}

fn unassign_returns_tasks_to_pending_with_the_reference_message(fx) {
    let list = fx.open();
    for s in ["alpha", "beta", "gamma"] {
        create(&list, s);
    }
    for n in 1..=3 {
        list.claim(id(n), "worker-1", ClaimOptions::default())
            .unwrap();
    }
    status(&list, 2, UpdateStatus::InProgress);
    status(&list, 3, UpdateStatus::Completed);
    let result = list
        .unassign("worker-1", UnassignReason::Terminated)
        .unwrap();
    assert_eq!(
        result.notification_message.as_deref(),
        Some(
            "worker-1 was terminated. 2 task(s) were unassigned: #1 \"alpha\", #2 \"beta\". Use TaskList to check availability and TaskUpdate with owner to reassign them to idle teammates."
        )
    );
    let two = list.get(id(2)).unwrap().unwrap();
    assert_eq!((two.owner, two.status), (None, TaskStatus::Pending));
    assert_eq!(
        list.get(id(3)).unwrap().unwrap().owner.as_deref(),
        Some("worker-1")
    );
    list.claim(id(1), "w2", ClaimOptions::default()).unwrap();
    let shut = list.unassign("w2", UnassignReason::Shutdown).unwrap();
    assert!(
        shut.notification_message
            .unwrap()
            .starts_with("w2 has shut down. 1 task(s) were unassigned: #1 \"alpha\".")
    );
    assert!(
        list.unassign("nobody", UnassignReason::Shutdown)
            .unwrap()
            .notification_message
            .is_none()
    );
}

fn auto_ownership_and_assignment_mailbox_when_teammates_are_enabled(fx) {
    let config = StoreConfig {
        teammates: true,
        ..common::fast_config()
    };
    let list = fx.open_with("team", config).with_actor(task_list::Actor::new("lead"));
    create(&list, "a");
    create(&list, "b");
    let started = status(&list, 1, UpdateStatus::InProgress);
    assert_eq!(started.updated_fields, vec!["owner", "status"]);
    assert_eq!(
        list.get(id(1)).unwrap().unwrap().owner.as_deref(),
        Some("lead")
    );
    let mut assign = UpdateRequest::new(2);
    assign.owner = Some("bob".into());
    list.update(&assign).unwrap();
    let inbox = list.inbox("bob").unwrap();
    assert_eq!(inbox.len(), 1);
    let message = serde_json::to_value(&inbox[0]).unwrap();
    assert_eq!(message["type"], "task_assignment");
    assert_eq!(message["taskId"], "2");
    assert_eq!(message["assignedBy"], "lead");
    // Without teammates: no auto-owner.
    let solo = fx.open_with("solo", common::fast_config());
    create(&solo, "x");
    assert_eq!(
        status(&solo, 1, UpdateStatus::InProgress).updated_fields,
        vec!["status"]
    );
}

fn verification_nudge_on_closing_the_last_of_three(fx) {
    let list = fx.open();
    for s in ["a", "b", "c"] {
        create(&list, s);
    }
    assert!(!status(&list, 1, UpdateStatus::Completed).verification_nudge_needed);
    assert!(!status(&list, 2, UpdateStatus::Completed).verification_nudge_needed);
    let last = status(&list, 3, UpdateStatus::Completed);
    assert!(last.verification_nudge_needed);
    assert!(
        last.model_text()
            .starts_with("Updated task #3 status\n\nNOTE: You just closed out 3+ tasks")
    );
    let other = fx.open_with("other", common::fast_config());
    for s in ["a", "b", "Verify the build"] {
        create(&other, s);
    }
    for n in 1..=3 {
        assert!(!status(&other, n, UpdateStatus::Completed).verification_nudge_needed);
    }
}

fn ready_ranks_and_explains(fx) {
    let list = fx.open();
    for s in ["root", "mid", "leaf", "lone", "done", "owned"] {
        create(&list, s);
    }
    add_blocked_by(&list, 2, &[1]);
    add_blocked_by(&list, 3, &[2]);
    status(&list, 5, UpdateStatus::Completed);
    list.claim(id(6), "ann", ClaimOptions::default()).unwrap();
    // A blocker that vanished behind our back (as after a reference delete without cleanup).
    let mut lone = list.get(id(4)).unwrap().unwrap();
    lone.blocked_by.push(id(77));
    fx.write_raw(&lone);
    let report = list.ready().unwrap();
    let ready: Vec<(u64, usize)> = report
        .ready
        .iter()
        .map(|r| (r.id.get(), r.unblocks))
        .collect();
    assert_eq!(ready, vec![(1, 2)]);
    let why = |n: u64| {
        report
            .not_ready
            .iter()
            .find(|r| r.id == id(n))
            .unwrap()
            .reasons
            .clone()
    };
    assert_eq!(
        why(2),
        vec![NotReadyReason::BlockedBy { tasks: vec![id(1)] }]
    );
    assert_eq!(
        why(4),
        vec![NotReadyReason::MissingBlocker { task: id(77) }]
    );
    assert_eq!(why(5), vec![NotReadyReason::Completed]);
    assert_eq!(
        why(6),
        vec![NotReadyReason::Owned {
            owner: "ann".into()
        }]
    );
}

fn audit_log_records_every_change_and_survives_deletion(fx) {
    let list = fx.open().with_actor(task_list::Actor::new("ann"));
    create(&list, "a");
    create(&list, "b");
    add_blocked_by(&list, 2, &[1]);
    add_blocked_by(&list, 2, &[2]); // refused: not recorded
    list.claim(id(1), "ann", ClaimOptions::default()).unwrap();
    status(&list, 1, UpdateStatus::Deleted);
    list.reset().unwrap();
    let (records, problems) = list.audit_log().unwrap();
    assert!(problems.is_empty());
    let ops: Vec<(AuditOp, Option<u64>)> = records
        .iter()
        .map(|r| (r.op, r.task_id.map(|i| i.get())))
        .collect();
    assert_eq!(
        ops,
        vec![
            (AuditOp::Create, Some(1)),
            (AuditOp::Create, Some(2)),
            (AuditOp::Update, Some(2)),
            (AuditOp::Claim, Some(1)),
            (AuditOp::Delete, Some(1)),
            (AuditOp::Reset, None),
        ]
    );
    assert!(
        records
            .iter()
            .all(|r| r.actor == "ann" && r.time.ends_with('Z'))
    );
    assert_eq!(records[2].fields, vec!["blockedBy"]);
}

fn doctor_finds_and_fixes_every_kind_of_damage(fx) {
    let list = fx.open();
    for s in ["a", "b", "c", "d"] {
        create(&list, s);
    }
    // Damage the files directly, as the reference (which accepts all of this) would.
    let write = |n: u64, blocks: &[u64], blocked_by: &[u64]| {
        let mut t = list.get(id(n)).unwrap().unwrap();
        t.blocks = blocks.iter().map(|&b| id(b)).collect();
        t.blocked_by = blocked_by.iter().map(|&b| id(b)).collect();
        fx.write_raw(&t);
    };
    write(1, &[2], &[2, 1]); // 1 → 2 → 1 cycle; self-edge on the blockedBy side
    write(2, &[1], &[1, 99]); // dangling 99
    write(3, &[4], &[]); // asymmetric: 4 lacks blockedBy 3
    fx.set_high_water_mark_raw(2);
    fx.remove_raw(id(4)); // 4 issued, now gone: drift
    if fx.is_files() {
        // A crashed writer's lock (files only: a database has no lock directories).
        std::fs::create_dir(list.dir().join("3.json.lock")).unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::open(list.dir().join("3.json.lock"))
            .unwrap()
            .set_modified(old)
            .unwrap();
    }

    let report = list.doctor(false).unwrap();
    let kinds: std::collections::BTreeSet<String> = report
        .problems
        .iter()
        .map(|p| {
            serde_json::to_value(p).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    let stale_lock = fx.is_files().then_some("stale_lock");
    for kind in ["cycle", "dangling_reference", "high_water_mark_drift"]
        .into_iter()
        .chain(stale_lock)
    {
        assert!(kinds.contains(kind), "{kind} not found in {kinds:?}");
    }
    assert!(!report.fixed);
    let fixed = list.doctor(true).unwrap();
    assert!(fixed.fixed);
    let after = list.doctor(false).unwrap();
    assert!(after.is_clean(), "{:?}", after.problems);
    assert_eq!(
        create(&list, "e"),
        id(5),
        "the fixed high-water mark keeps 4 retired"
    );

    let asym = fx.open_with("asym", common::fast_config());
    create(&asym, "x");
    create(&asym, "y");
    let mut x = asym.get(id(1)).unwrap().unwrap();
    x.blocks.push(id(2));
    fx.write_raw_in("asym", &x);
    assert_eq!(
        asym.doctor(false).unwrap().problems,
        vec![task_list::Problem::AsymmetricEdge {
            blocker: id(1),
            blocked: id(2),
            missing_on: id(2)
        }]
    );
    asym.doctor(true).unwrap();
    assert_eq!(asym.get(id(2)).unwrap().unwrap().blocked_by, vec![id(1)]);
}

fn graph_exports_text_and_dot(fx) {
    let list = fx.open();
    create(&list, "schema");
    create(&list, "api \"v2\"");
    add_blocked_by(&list, 2, &[1]);
    let graph = list.graph().unwrap();
    assert_eq!(
        graph.to_text(),
        "#1 [pending] schema → #2\n#2 [pending] api \"v2\"\n"
    );
    let dot = graph.to_dot(list.list_id());
    assert!(dot.contains("\"1\" -> \"2\";"), "{dot}");
    assert!(dot.contains("api \\\"v2\\\""), "{dot}");
}

fn watch_reports_changes_from_another_handle(fx) {
    let list = fx.open();
    create(&list, "a");
    let mut watcher = list.watch().unwrap();
    let other = fx.open();
    create(&other, "b");
    status(&other, 1, UpdateStatus::InProgress);
    let mut seen = task_list::Change::default();
    while seen.created.is_empty() || seen.updated.is_empty() {
        let change = watcher
            .next_change(Some(std::time::Duration::from_secs(20)))
            .unwrap()
            .expect("a change within the deadline");
        seen.created.extend(change.created);
        seen.updated.extend(change.updated);
    }
    assert_eq!((seen.created, seen.updated), (vec![id(2)], vec![id(1)]));
    status(&other, 2, UpdateStatus::Deleted);
    let change = watcher
        .next_change(Some(std::time::Duration::from_secs(20)))
        .unwrap()
        .unwrap();
    assert_eq!(change.deleted, vec![id(2)]);
}
}

#[test]
fn torn_file_is_reported_by_name_and_the_rest_loads() {
    let root = tempfile::tempdir().unwrap();
    let list = open(root.path());
    for s in ["a", "b", "c"] {
        create(&list, s);
    }
    std::fs::write(list.dir().join("2.json"), "{\n  \"id\": \"2\",\n  \"subj").unwrap();
    let snapshot = list.snapshot().unwrap();
    assert_eq!(
        snapshot.tasks.keys().copied().collect::<Vec<_>>(),
        vec![id(1), id(3)]
    );
    assert_eq!(snapshot.problems.len(), 1);
    assert_eq!(snapshot.problems[0].file, "2.json");
    assert_eq!(list.list().unwrap().tasks.len(), 2);
    assert!(matches!(
        list.get(id(2)),
        Err(task_list::Error::Corrupt { .. })
    ));
    let report = list.doctor(true).unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| matches!(p, task_list::Problem::CorruptFile { file, .. } if file == "2.json"))
    );
    assert!(
        list.dir().join("2.json").exists(),
        "doctor never deletes data"
    );
    assert_eq!(create(&list, "d"), id(4));
}

store_tests! {
fn removing_an_edge_writes_both_ends_and_unblocks_at_once(fx) {
    let list = fx.open();
    for s in ["a", "b", "c"] {
        create(&list, s);
    }
    assert!(add_blocked_by(&list, 3, &[1, 2, 1]).success);
    let blockers = |task: u64| list.get(id(task)).unwrap().unwrap().blocked_by;
    assert_eq!(blockers(3), [id(1), id(2)], "an id given twice is one edge");
    assert!(list.claim(id(1), "ann", ClaimOptions::default()).unwrap().success);
    let mut remove = UpdateRequest::new(3);
    remove.remove_blocked_by = Some(vec!["1".into()]);
    let removed = list.update(&remove).unwrap();
    assert_eq!(removed.model_text(), "Updated task #3 blockedBy");
    assert_eq!(blockers(3), [id(2)]);
    assert!(list.get(id(1)).unwrap().unwrap().blocks.is_empty(), "both ends");
    let mut undo = UpdateRequest::new(2);
    undo.remove_blocks = Some(vec!["3".into()]);
    assert_eq!(list.update(&undo).unwrap().updated_fields, ["blocks"]);
    assert!(blockers(3).is_empty());
    let next = list.claim_next("bob", ClaimOptions::default()).unwrap().unwrap();
    assert_eq!(next.task.unwrap().id, id(2), "#2 before #3: by id");
    assert_eq!(list.claim_next("cy", ClaimOptions::default()).unwrap().unwrap().task.unwrap().id, id(3));
    let (records, _) = list.audit_log().unwrap();
    let updates: Vec<(u64, Vec<String>)> = records
        .iter()
        .filter(|r| r.op == AuditOp::Update)
        .map(|r| (r.task_id.unwrap().get(), r.fields.clone()))
        .collect();
    assert_eq!(updates[1..], [(3, vec!["blockedBy".into()]), (2, vec!["blocks".into()])]);
    assert!(list.doctor(false).unwrap().is_clean());
    // Nothing to remove is no change; a bad id or a self-edge is refused.
    assert!(list.update(&remove).unwrap().updated_fields.is_empty());
    remove.remove_blocked_by = Some(vec!["3".into()]);
    assert_eq!(
        list.update(&remove).unwrap().model_text(),
        "Cannot remove dependency: task #3 cannot block itself"
    );
}
}

store_tests! {
fn list_where_filters_by_status_owner_labels_priority_and_readiness(fx) {
    let list = fx.open();
    let labelled = |subject: &str, metadata: serde_json::Value| {
        let request = CreateRequest {
            metadata: metadata.as_object().cloned(),
            ..CreateRequest::new(subject, "")
        };
        list.create(&request).unwrap().task.id
    };
    labelled("api", json!({"labels": ["backend", "v2"], "priority": 0}));
    labelled("docs", json!({"labels": ["docs"]}));
    labelled("db", json!({"labels": ["backend"], "priority": 1}));
    labelled("odd labels", json!({"labels": "backend", "priority": "high"}));
    assert!(add_blocked_by(&list, 1, &[3]).success);
    assert!(list.claim(id(2), "ann", ClaimOptions::default()).unwrap().success);
    status(&list, 4, UpdateStatus::Completed);
    let ids = |filter: task_list::ListFilter| -> Vec<u64> {
        let listed = list.list_where(&filter).unwrap().tasks;
        listed.iter().map(|t| t.id.get()).collect()
    };
    let all = task_list::ListFilter::default();
    assert_eq!(ids(all.clone()), [1, 2, 3, 4]);
    assert_eq!(list.list_where(&all).unwrap(), list.list().unwrap());
    let backend = || vec!["backend".to_string()];
    assert_eq!(ids(task_list::ListFilter { labels: backend(), ..all.clone() }), [1, 3]);
    let both = vec!["backend".to_string(), "v2".to_string()];
    assert_eq!(ids(task_list::ListFilter { labels: both, ..all.clone() }), [1]);
    assert_eq!(ids(task_list::ListFilter { priority: Some(2), ..all.clone() }), [2, 4], "the default, and a priority that is no number");
    assert_eq!(ids(task_list::ListFilter { owner: Some("ann".into()), ..all.clone() }), [2]);
    assert_eq!(ids(task_list::ListFilter { status: Some(TaskStatus::Completed), ..all.clone() }), [4]);
    assert_eq!(ids(task_list::ListFilter { ready: true, ..all.clone() }), [3]);
    assert_eq!(ids(task_list::ListFilter { blocked: true, ..all.clone() }), [1]);
    assert_eq!(ids(task_list::ListFilter { blocked: true, labels: vec!["docs".into()], ..all.clone() }), Vec::<u64>::new());
    status(&list, 3, UpdateStatus::Completed);
    assert_eq!(ids(task_list::ListFilter { ready: true, ..all.clone() }), [1], "#3 completed readies #1");
    assert_eq!(ids(task_list::ListFilter { blocked: true, ..all }), Vec::<u64>::new());
}
}
