//! Dreams and their consolidation lock: one winner among processes, the rollback after a kill,
//! a failure and a `SIGKILL`ed holder, and the phases of a real (scripted) agent CLI.
//! Lock holders in other processes are this test binary re-run as `lock_holder_process`,
//! told what to do on their stdin and saying what happened on their stdout.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::fs::FileTimes;
use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, UNIX_EPOCH};

use common::{Fixture, wait_file};
use serde_json::json;
use task_agent::AgentError;
use task_agent::dream::{ConsolidationLock, DreamExecutor, DreamRequest, LockError};
use task_core::{DreamPhase, EndReason, TaskKind, TaskStatus};

const LOCK_ENV: &str = "DREAM_TEST_LOCK";

/// A consolidation that happened long ago (ms epoch).
const PRIOR_MS: u64 = 1_600_000_000_000;

/// Not a test: a process that tries the lock once it reads `go` on its stdin, says `won` or
/// `busy` on its stdout, and if it won holds the lock until it reads `release` (then
/// succeeds). A test that dies closes its end: the read fails and the holder exits.
#[test]
#[ignore = "run as a child process by the dream tests"]
fn lock_holder_process() {
    let lock = ConsolidationLock::new(std::env::var(LOCK_ENV).unwrap());
    let mut orders = std::io::stdin().lock().lines();
    let mut order = || orders.next().unwrap().unwrap();
    assert_eq!(order(), "go");
    // Straight to stdout, past the test harness's capture.
    let say = |word: &str| {
        let mut out = std::io::stdout();
        writeln!(out, "{word}").and_then(|()| out.flush()).unwrap();
    };
    match lock.acquire() {
        Ok(held) => {
            say("won");
            assert_eq!(order(), "release");
            held.succeed();
        }
        Err(LockError::Busy { .. }) => say("busy"),
        Err(other) => panic!("{other}"),
    }
}

/// A lock holder process, its stdin and the lines of its stdout.
struct Holder {
    child: Child,
    said: Lines<BufReader<ChildStdout>>,
}

impl Holder {
    fn spawn(lock: &Path) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["lock_holder_process", "--exact", "--ignored", "--quiet"])
            .env(LOCK_ENV, lock)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let said = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { child, said }
    }

    /// Tells it `order` (a holder that already exited cannot hear it: ignored).
    fn tell(&mut self, order: &str) {
        let stdin = self.child.stdin.as_mut().unwrap();
        let _ = writeln!(stdin, "{order}").and_then(|()| stdin.flush());
    }

    /// Its answer to `go`: `won` or `busy` (the harness's own lines are skipped).
    fn answer(&mut self) -> String {
        self.said
            .by_ref()
            .map(Result::unwrap)
            .find(|line| line == "won" || line == "busy")
            .expect("the holder exited without an answer")
    }
}

fn mtime_ms(path: &Path) -> u64 {
    let modified = std::fs::metadata(path).unwrap().modified().unwrap();
    modified.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A lock file whose last consolidation was at [`PRIOR_MS`].
fn consolidated_long_ago(dir: &Path) -> ConsolidationLock {
    let path = dir.join("memory/.consolidate-lock");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let file = std::fs::File::create(&path).unwrap();
    file.set_times(FileTimes::new().set_modified(UNIX_EPOCH + Duration::from_millis(PRIOR_MS)))
        .unwrap();
    ConsolidationLock::new(path)
}

#[tokio::test]
async fn of_eight_processes_racing_for_the_lock_exactly_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let lock = consolidated_long_ago(dir.path());
    let mut holders: Vec<Holder> = (0..8).map(|_| Holder::spawn(lock.path())).collect();
    holders.iter_mut().for_each(|h| h.tell("go"));
    let mut answers: Vec<String> = holders.iter_mut().map(Holder::answer).collect();
    answers.sort();
    assert_eq!(answers, [["busy"; 7].as_slice(), &["won"]].concat());
    // This process is refused too while the winner holds it.
    assert!(matches!(lock.acquire(), Err(LockError::Busy { .. })));
    for holder in &mut holders {
        holder.tell("release");
        assert!(holder.child.wait().unwrap().success());
    }
    // The winner succeeded: the consolidation is recorded as after the prior one.
    assert!(lock.last_consolidated().unwrap().unwrap() > PRIOR_MS);
}

#[tokio::test]
async fn a_holder_sigkilled_mid_dream_is_rolled_back_by_the_next_acquire() {
    let dir = tempfile::tempdir().unwrap();
    let lock = consolidated_long_ago(dir.path());
    let mut holder = Holder::spawn(lock.path());
    holder.tell("go");
    assert_eq!(holder.answer(), "won");
    // Mid-dream, the lock says "consolidated now".
    assert!(mtime_ms(lock.path()) > PRIOR_MS);
    holder.child.kill().unwrap();
    holder.child.wait().unwrap();
    let held = lock.acquire().unwrap();
    assert_eq!(held.prior_mtime(), Some(PRIOR_MS));
    held.roll_back().unwrap();
    assert_eq!(mtime_ms(lock.path()), PRIOR_MS);
}

#[test]
fn a_new_lock_file_says_never_consolidated_and_a_rollback_keeps_it_so() {
    let dir = tempfile::tempdir().unwrap();
    let lock = ConsolidationLock::new(dir.path().join("new/.lock"));
    assert_eq!(lock.last_consolidated().unwrap(), None);
    let held = lock.acquire().unwrap();
    assert_eq!(held.prior_mtime(), None);
    assert!(lock.last_consolidated().unwrap().is_some());
    drop(held); // dropped without success: rolled back
    assert_eq!(lock.last_consolidated().unwrap(), None);
}

fn dream_fixture() -> (Fixture, DreamExecutor) {
    let fx = Fixture::new();
    let dreams = DreamExecutor::new(fx.registry.clone(), fx.dir.path()).register_with_registry();
    (fx, dreams)
}

#[tokio::test]
async fn a_completed_dream_keeps_the_new_mtime_and_records_its_phase_files_and_turns() {
    let (fx, dreams) = dream_fixture();
    let lock = consolidated_long_ago(fx.dir.path());
    let gate = fx.path("gate");
    let runner = fx.runner(&[
        json!({"read_user": true}),
        json!({"text": "reviewing sessions"}),
        json!({"tool": "Read", "input": {"file_path": "/m/a.md"}}),
        json!({"touch": fx.path("before-write").display().to_string()}),
        json!({"wait_file": gate.display().to_string()}),
        json!({"tool": "Write", "input": {"file_path": "/m/MEMORY.md", "content": "x"}}),
        json!({"tool": "Edit", "input": {"file_path": "/m/b.md"}}),
        json!({"result": "consolidated"}),
    ]);
    let mut request = DreamRequest::new(runner, "consolidate", lock.clone());
    request.sessions_reviewing = 3;
    let id = dreams.start(request).await.unwrap();
    wait_file(&fx.path("before-write")).await;
    let state = fx.state(&id);
    let TaskKind::Dream(dream) = &state.kind else {
        panic!()
    };
    assert_eq!(dream.phase, DreamPhase::Starting);
    assert_eq!(dream.prior_mtime, Some(PRIOR_MS));
    assert_eq!(dream.sessions_reviewing, 3);
    std::fs::write(&gate, b"").unwrap();
    let done = fx.wait_done(&id).await;
    assert_eq!(done.status(), TaskStatus::Completed);
    let TaskKind::Dream(dream) = &done.kind else {
        panic!()
    };
    assert_eq!(dream.phase, DreamPhase::Updating);
    assert_eq!(dream.files_touched, ["/m/MEMORY.md", "/m/b.md"]);
    assert_eq!(dream.turns.len(), 1);
    assert_eq!(dream.turns.iter().next().unwrap().tool_use_count, 3);
    assert!(lock.last_consolidated().unwrap().unwrap() > PRIOR_MS);
    // UI only: nothing was queued for a model.
    assert!(fx.registry.notifications().drain().is_empty());
}

#[tokio::test]
async fn a_failed_dream_rolls_the_lock_back() {
    let (fx, dreams) = dream_fixture();
    let lock = consolidated_long_ago(fx.dir.path());
    let runner = fx.runner(&[
        json!({"read_user": true}),
        json!({"tool": "Write", "input": {"file_path": "/m/x.md"}}),
        json!({"result_error": "error_during_execution", "message": "disk on fire"}),
    ]);
    let id = dreams
        .start(DreamRequest::new(runner, "consolidate", lock.clone()))
        .await
        .unwrap();
    let done = fx.wait_done(&id).await;
    assert_eq!(done.status(), TaskStatus::Failed);
    assert!(matches!(
        done.base.end_reason,
        Some(EndReason::Errored { .. })
    ));
    assert_eq!(mtime_ms(lock.path()), PRIOR_MS);
    assert!(fx.registry.notifications().drain().is_empty());
    // The lock is free again.
    lock.acquire().unwrap().succeed();
}

#[tokio::test]
async fn a_killed_dream_rolls_the_lock_back_and_a_second_dream_is_refused_meanwhile() {
    let (fx, dreams) = dream_fixture();
    let lock = consolidated_long_ago(fx.dir.path());
    let runner = fx.runner(&[
        json!({"touch": fx.path("started").display().to_string()}),
        json!({"wait_file": fx.path("never").display().to_string()}),
    ]);
    let id = dreams
        .start(DreamRequest::new(
            runner.clone(),
            "consolidate",
            lock.clone(),
        ))
        .await
        .unwrap();
    wait_file(&fx.path("started")).await;
    let second = dreams
        .start(DreamRequest::new(runner, "again", lock.clone()))
        .await;
    assert!(matches!(
        second,
        Err(AgentError::Lock(LockError::Busy { .. }))
    ));
    fx.registry.kill(&id).await.unwrap();
    let state = fx.state(&id);
    assert_eq!(state.status(), TaskStatus::Killed);
    assert!(state.base.notified);
    assert_eq!(mtime_ms(lock.path()), PRIOR_MS);
    assert!(fx.registry.notifications().drain().is_empty());
}
