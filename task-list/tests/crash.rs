//! Writers SIGKILLed at random moments leave a list that loads whole; the next writer takes
//! over their locks and finishes their interrupted commits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Child;
use std::time::{Duration, Instant};

use common::{Rng, assert_consistent, create, open, spawn_worker};
use task_list::Problem;

const WRITERS: usize = 3;
const KILLS: usize = 24;

/// Not a test on its own: the body of each worker process.
#[test]
fn crash_worker() {
    common::run_worker_from_env();
}

fn sigkill(child: &mut Child) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    // ESRCH: it already finished, which is fine.
    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    child.wait().unwrap();
}

#[test]
fn writers_killed_at_random_moments_leave_a_loadable_list() {
    let root = tempfile::tempdir().unwrap();
    let list = open(root.path());
    for n in 0..20 {
        create(&list, &format!("seed {n}"));
    }
    let report = root.path().join("report");
    let spawn = |seed: usize| {
        let spec = format!(
            "{}|k{seed}|100000|{}|{}",
            root.path().display(),
            7 + seed,
            report.display()
        );
        spawn_worker("crash_worker", &spec)
    };
    let mut rng = Rng::new(42);
    let mut writers: Vec<Child> = (0..WRITERS).map(spawn).collect();
    for kill in 0..KILLS {
        // Let the writers get going for a random while (this is the "random moment", not a
        // wait for anything to settle), then kill one and start a fresh one.
        let until = Instant::now() + Duration::from_millis(30 + rng.below(150));
        while Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let victim = rng.below(WRITERS as u64) as usize;
        sigkill(&mut writers[victim]);
        writers[victim] = spawn(WRITERS + kill);
    }
    for writer in &mut writers {
        sigkill(writer);
    }

    // Every file parses, and doctor reports nothing worse than what a dead writer leaves
    // behind: a lock directory (fresh or stale), a temp file it never renamed, its journal;
    // and, while that journal is half applied, the one-sided edges of its change.
    let snapshot = list.snapshot().unwrap();
    assert!(snapshot.problems.is_empty(), "{:?}", snapshot.problems);
    let leftovers = list.doctor(false).unwrap().problems;
    let journal_pending = leftovers
        .iter()
        .any(|p| matches!(p, Problem::UnfinishedJournal));
    for problem in &leftovers {
        let left_by_a_dead_writer = matches!(
            problem,
            Problem::StaleLock { .. }
                | Problem::LockHeld { .. }
                | Problem::LeftoverTempFile { .. }
                | Problem::UnfinishedJournal
        );
        let half_applied = journal_pending
            && matches!(
                problem,
                Problem::AsymmetricEdge { .. } | Problem::DanglingReference { .. }
            );
        assert!(
            left_by_a_dead_writer || half_applied,
            "{problem:?} among {leftovers:?}"
        );
    }
    // Once the dead writers' locks are stale, the next writer of each file takes them over
    // (and the next transaction replays any journal).
    common::wait_until("dead writers' locks to go stale", || {
        !list
            .doctor(false)
            .unwrap()
            .problems
            .iter()
            .any(|p| matches!(p, Problem::LockHeld { .. }))
    });
    let fresh = create(&list, "after the crash");
    // That write replayed any journal: its change is whole again.
    let replayed = list.doctor(false).unwrap().problems;
    assert!(
        !replayed.iter().any(|p| matches!(
            p,
            Problem::UnfinishedJournal
                | Problem::AsymmetricEdge { .. }
                | Problem::DanglingReference { .. }
        )),
        "{replayed:?}"
    );
    for problem in list.doctor(false).unwrap().problems {
        if let Problem::StaleLock { name, .. } = problem {
            let Some(task) = name
                .strip_suffix(".json.lock")
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            let mut touch = task_list::UpdateRequest::new(task);
            touch.subject = Some("taken over".into());
            // (A lock of a task deleted since is left to `doctor --fix` below.)
            if list.update(&touch).unwrap().success {
                assert!(!list.dir().join(&name).exists(), "{name} not taken over");
            }
        }
    }
    assert_eq!(list.get(fresh).unwrap().unwrap().subject, "after the crash");
    list.doctor(true).unwrap();
    let after = list.doctor(false).unwrap();
    assert!(after.is_clean(), "{:?}", after.problems);
    assert_consistent(&list);
    let (_, audit_problems) = list.audit_log().unwrap();
    assert!(audit_problems.is_empty(), "{audit_problems:?}");
}
