//! `claim_next`: the best ready task, claimed atomically, on both stores; and a team of claimer
//! processes that works a random dependency graph through to the end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Rng, add_blocked_by, create, fast_config, id};
use task_list::{
    Actor, AuditOp, ClaimFailure, ClaimOptions, CreateRequest, Metadata, StoreConfig, Task, TaskId,
    TaskList, UpdateRequest, UpdateStatus,
};

/// `{store}|{worker}`: turns the test binary into a worker that claims with `claim_next` and
/// completes what it claims until every task is completed.
const WORKER_ENV: &str = "TASK_LIST_TEST_NEXT_WORKER";

/// Claimer processes.
const WORKERS: usize = 8;

/// Tasks in the list they work.
const TASKS: u64 = 200;

/// No fsyncs: these tests are about concurrency, not power loss.
fn config() -> StoreConfig {
    StoreConfig {
        durable: false,
        ..fast_config()
    }
}

/// Opens list `list` of the store at `location` (a lists root or a PostgreSQL URL).
fn open_at(location: &str) -> TaskList {
    match location.starts_with("postgres") {
        true => TaskList::connect(location, "list", config()).unwrap(),
        false => TaskList::open(location, "list", config()).unwrap(),
    }
}

fn with_priority(list: &TaskList, subject: &str, priority: Option<u64>) -> TaskId {
    let metadata = priority.map(|p| Metadata::from_iter([("priority".into(), p.into())]));
    let request = CreateRequest {
        metadata,
        ..CreateRequest::new(subject, "")
    };
    list.create(&request).unwrap().task.id
}

fn complete(list: &TaskList, task: TaskId) {
    let mut request = UpdateRequest::new(task);
    request.status = Some(UpdateStatus::Completed);
    assert!(list.update(&request).unwrap().success);
}

fn next(list: &TaskList, claimant: &str) -> Option<TaskId> {
    let result = list
        .claim_next(claimant, ClaimOptions::default())
        .unwrap()?;
    assert!(result.success, "{result:?}");
    Some(result.task.unwrap().id)
}

/// Not a test on its own: the body of each worker process.
#[test]
fn worker() {
    let Ok(spec) = std::env::var(WORKER_ENV) else {
        return;
    };
    let (location, worker) = spec.split_once('|').unwrap();
    let list = open_at(location).with_actor(Actor::new(worker));
    // Watching from before the first claim: a change made after a claim found nothing ready
    // wakes the worker.
    let mut watcher = list.watch().unwrap();
    // Idle for this many seconds in a row, a peer must have died holding a task: fail rather
    // than wait forever.
    let mut idle = 0;
    loop {
        match next(&list, worker) {
            Some(task) => complete(&list, task),
            None if all_completed(&list) => return,
            // The timeout only bounds a missed wake-up: the loop claims again either way.
            None => match watcher.next_change(Some(Duration::from_secs(1))).unwrap() {
                Some(_) => idle = 0,
                None => {
                    idle += 1;
                    assert!(idle < 120, "nothing changed for {idle} s");
                }
            },
        }
    }
}

fn all_completed(list: &TaskList) -> bool {
    list.snapshot()
        .unwrap()
        .tasks
        .values()
        .all(|t| t.status == task_list::TaskStatus::Completed)
}

/// 200 tasks, random priorities (some none), each blocked by up to three earlier tasks; one in
/// eight a child of a later task (so nothing waits in a loop), one in ten moved before another.
fn random_list(list: &TaskList, seed: u64) {
    let mut rng = Rng::new(seed);
    for n in 1..=TASKS {
        let priority = Some(rng.below(6)).filter(|&p| p < 5);
        with_priority(list, &format!("t{n}"), priority);
        let blockers: std::collections::BTreeSet<u64> = (0..rng.below(4))
            .filter(|_| n > 1)
            .map(|_| 1 + rng.below(n - 1))
            .collect();
        let blockers: Vec<u64> = blockers.into_iter().collect();
        if !blockers.is_empty() {
            assert!(add_blocked_by(list, n, &blockers).success);
        }
    }
    for n in 1..TASKS {
        let mut request = UpdateRequest::new(n);
        if rng.below(8) == 0 {
            let parent = n + 1 + rng.below(TASKS - n);
            request.metadata = Some(Metadata::from_iter([(
                "parent".into(),
                parent.to_string().into(),
            )]));
        }
        if rng.below(10) == 0 {
            let anchor = 1 + rng.below(TASKS);
            request.place = (anchor != n).then(|| task_list::Placement::Before(id(anchor)));
        }
        if request.metadata.is_some() || request.place.is_some() {
            assert!(list.update(&request).unwrap().success);
        }
    }
}

/// What the replay of the audit log knows of a task.
#[derive(Debug)]
struct Replayed {
    task: Task,
    claims: usize,
}

/// Replays the claims and completions in `records` (commit order) over `tasks` (the list
/// before them): each claim must take a ready task of the best rank among those ready then,
/// and each completion must be by the task's claimant.
fn replay(tasks: BTreeMap<TaskId, Task>, records: &[task_list::AuditRecord]) {
    let mut state: BTreeMap<TaskId, Replayed> = tasks
        .into_iter()
        .map(|(id, task)| (id, Replayed { task, claims: 0 }))
        .collect();
    for record in records {
        let task = record.task_id.unwrap();
        match record.op {
            AuditOp::Claim => {
                let ready = ready_now(&state);
                assert!(ready.contains(&task), "#{task} claimed while not ready");
                let rank = |t: &TaskId| state[t].task.queue_key();
                let best = ready.iter().min_by_key(|t| rank(t)).unwrap();
                assert_eq!(
                    rank(&task).0,
                    rank(best).0,
                    "#{task} claimed before #{best}"
                );
                assert_eq!(&task, best, "ties go to the lowest position, then id");
                let entry = state.get_mut(&task).unwrap();
                entry.claims += 1;
                entry.task.owner = Some(record.actor.clone());
            }
            AuditOp::Update => {
                let entry = state.get_mut(&task).unwrap();
                assert_eq!(entry.task.owner.as_deref(), Some(record.actor.as_str()));
                assert_eq!(record.fields, ["status"]);
                entry.task.status = task_list::TaskStatus::Completed;
            }
            other => panic!("unexpected {other:?} record"),
        }
    }
    for (id, entry) in &state {
        assert_eq!(entry.claims, 1, "#{id} claimed {} times", entry.claims);
        assert_eq!(entry.task.status, task_list::TaskStatus::Completed);
    }
}

/// The tasks ready in the replayed `state`: pending, unowned, every blocker and every child
/// completed.
fn ready_now(state: &BTreeMap<TaskId, Replayed>) -> Vec<TaskId> {
    let done = |id: &TaskId| state[id].task.status == task_list::TaskStatus::Completed;
    let open_child_of = |id: TaskId| {
        state
            .values()
            .any(|entry| entry.task.parent() == Some(id) && !done(&entry.task.id))
    };
    state
        .values()
        .map(|entry| &entry.task)
        .filter(|t| t.status == task_list::TaskStatus::Pending && t.owner.is_none())
        .filter(|t| t.blocked_by.iter().all(done) && !open_child_of(t.id))
        .map(|t| t.id)
        .collect()
}

fn spawn_worker(location: &str, worker: &str) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "worker", "--test-threads=1", "--quiet"])
        .env(WORKER_ENV, format!("{location}|{worker}"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

store_tests! {
    fn picks_by_priority_then_id(fx) {
        let list = fx.open();
        with_priority(&list, "low", Some(4));
        create(&list, "default");
        with_priority(&list, "urgent", Some(0));
        with_priority(&list, "urgent, blocked", Some(0));
        with_priority(&list, "too large counts as lowest", Some(9));
        assert!(add_blocked_by(&list, 4, &[2]).success);
        assert_eq!(next(&list, "ann"), Some(id(3)));
        assert_eq!(next(&list, "bob"), Some(id(2)));
        assert_eq!(next(&list, "ann"), Some(id(1)), "#4 is still blocked by #2");
        complete(&list, id(2));
        assert_eq!(next(&list, "bob"), Some(id(4)), "completing #2 readied #4");
        assert_eq!(next(&list, "cy"), Some(id(5)));
        assert_eq!(list.get(id(5)).unwrap().unwrap().owner.as_deref(), Some("cy"));
    }

    fn a_parent_waits_for_its_children_and_positions_order_equal_priorities(fx) {
        let list = fx.open();
        let epic = create(&list, "epic");
        let child = |subject: &str, parent: &str| {
            let request = CreateRequest {
                metadata: Some(Metadata::from_iter([("parent".into(), parent.into())])),
                ..CreateRequest::new(subject, "")
            };
            list.create(&request)
        };
        let first = child("first", "1").unwrap().task.id;
        let second = child("second", "1").unwrap().task.id;
        assert!(child("orphan", "99").unwrap_err().to_string().contains("#99 does not exist"));
        let mut cycle = UpdateRequest::new(epic);
        cycle.metadata = Some(Metadata::from_iter([("parent".into(), first.to_string().into())]));
        let refused = list.update(&cycle).unwrap();
        assert!(!refused.success);
        assert!(refused.error.unwrap().contains("descendants"));
        assert_eq!(list.children(epic).unwrap(), [first, second]);
        let mut moved = UpdateRequest::new(second);
        moved.place = Some(task_list::Placement::Before(first));
        assert!(list.update(&moved).unwrap().success);
        let ready: Vec<TaskId> = list.ready().unwrap().ready.iter().map(|r| r.id).collect();
        assert_eq!(ready, [second, first], "the epic waits; #3 was moved before #2");
        let epic_reasons = list.ready().unwrap().not_ready[0].reasons.clone();
        assert_eq!(
            epic_reasons,
            [task_list::NotReadyReason::OpenChildren { tasks: vec![first, second] }]
        );
        let early = list.claim(epic, "zed", ClaimOptions::default()).unwrap();
        assert!(!early.success, "a parent with open children is not claimed by id either");
        assert_eq!(early.reason, Some(ClaimFailure::Blocked));
        assert_eq!(early.blocked_by_tasks, [first, second]);
        assert_eq!(next(&list, "ann"), Some(second));
        complete(&list, second);
        assert_eq!(next(&list, "bob"), Some(first));
        assert_eq!(next(&list, "cy"), None, "the epic still has an open child");
        complete(&list, first);
        assert_eq!(next(&list, "cy"), Some(epic));
        // Moves survive renumbering: twelve moves into one gap still give the order asked for.
        let tail: Vec<TaskId> = (0..14).map(|n| create(&list, &format!("t{n}"))).collect();
        for &task in &tail[2..] {
            let mut after = UpdateRequest::new(task);
            after.place = Some(task_list::Placement::After(tail[0]));
            assert!(list.update(&after).unwrap().success);
        }
        let mut order: Vec<TaskId> = Vec::new();
        while let Some(id) = next(&list, "dee") {
            order.push(id);
        }
        let mut expected = vec![tail[0]];
        expected.extend(tail[2..].iter().rev());
        expected.push(tail[1]);
        assert_eq!(order, expected);
        let mut beside_itself = UpdateRequest::new(tail[0]);
        beside_itself.place = Some(task_list::Placement::After(tail[0]));
        assert!(!list.update(&beside_itself).unwrap().success);
    }

    fn nothing_ready_is_none(fx) {
        let list = fx.open();
        assert_eq!(list.claim_next("ann", ClaimOptions::default()).unwrap(), None);
        create(&list, "a");
        create(&list, "b");
        assert!(add_blocked_by(&list, 2, &[1]).success);
        assert_eq!(next(&list, "ann"), Some(id(1)));
        assert_eq!(next(&list, "bob"), None, "#2 waits for #1");
        let mut started = UpdateRequest::new(2);
        started.status = Some(UpdateStatus::InProgress);
        started.owner = Some(String::new());
        complete(&list, id(1));
        assert!(list.update(&started).unwrap().success);
        assert_eq!(next(&list, "bob"), None, "an in-progress task is not ready");
    }

    fn a_busy_agent_is_refused(fx) {
        let list = fx.open();
        create(&list, "a");
        create(&list, "b");
        let busy = ClaimOptions { check_agent_busy: true, ..ClaimOptions::default() };
        assert_eq!(next(&list, "ann"), Some(id(1)));
        let refused = list.claim_next("ann", busy).unwrap().unwrap();
        assert_eq!(refused.reason, Some(ClaimFailure::AgentBusy));
        assert_eq!(refused.busy_with_tasks, [id(1)]);
        assert_eq!(list.get(id(2)).unwrap().unwrap().owner, None);
        complete(&list, id(1));
        assert_eq!(list.claim_next("ann", busy).unwrap().unwrap().task.unwrap().id, id(2));
    }

    fn eight_processes_work_a_random_graph_in_priority_order(fx) {
        let list = fx.open_with("list", config());
        random_list(&list, 0x5eed_2026);
        let before = list.snapshot().unwrap().tasks;
        let parents = before.values().filter(|t| t.parent().is_some()).count();
        let moved = before
            .values()
            .filter(|t| t.metadata.as_ref().is_some_and(|m| m.contains_key("position")))
            .count();
        assert!(parents > 10 && moved > 10, "{parents} children, {moved} moved");
        let (setup, _) = list.audit_log().unwrap();
        let location = fx.location();
        let workers: Vec<_> = (0..WORKERS)
            .map(|w| spawn_worker(&location, &format!("w{w}")))
            .collect();
        for mut worker in workers {
            assert!(worker.wait().unwrap().success(), "a worker failed");
        }
        let (records, problems) = list.audit_log().unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        replay(before, &records[setup.len()..]);
        let doctor = list.doctor(false).unwrap();
        assert!(doctor.is_clean(), "{doctor:?}");
    }
}
