//! Group commit on the file store: writers of one list in one process (through one handle and
//! its clones) share a transaction, and so its one journal flush.
//!
//! The first writer to arrive when no transaction is being filled leads one: it takes the
//! list lock (`Txn::begin`), runs its body, then hands the transaction to every writer that
//! arrived meanwhile, one at a time (each runs its body on it, seeing the changes before its
//! own through the transaction), and once none is waiting, commits them all: one journal
//! record, one `fdatasync`, then each writer returns its own result. A writer arriving while
//! that commit flushes starts (or joins) the next transaction, which waits for the list lock:
//! so under load, the writers that queue during one flush share the next. A body that fails
//! is rolled back to where it started (a savepoint), leaving the others' changes. At most
//! [`MAX_JOINED`] writers share one transaction, so a steady stream cannot hold a commit back.
//!
//! Writers in other processes, or through handles opened separately, are ordered by the list
//! lock as before; each of their transactions has its own flush.

use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, PoisonError};

use crate::backend::StoreTxn;
use crate::error::{Error, Result};

/// What a group needs of the store's transaction (the file store's `Txn`): a transaction
/// that writers share, each body's changes kept or dropped as a whole.
pub(crate) trait Shared: StoreTxn + Send + std::fmt::Debug {
    /// Runs `body` on this transaction; if it fails, what it staged is dropped.
    fn attempt(&mut self, body: &mut dyn FnMut(&mut dyn StoreTxn) -> Result<()>) -> Result<()>;
}

/// At most this many writers join one leader's transaction.
const MAX_JOINED: usize = 64;

/// The shared transactions of a handle and its clones.
#[derive(Debug, Default)]
pub(crate) struct Group {
    state: Mutex<State>,
    /// Signalled whenever a transaction changes hands, is committed or is closed.
    changed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    /// The transaction being filled, if any.
    filling: Option<Batch>,
}

/// A transaction being filled.
#[derive(Debug)]
struct Batch {
    /// Shared with every writer in it: how its commit ended.
    outcome: Arc<Outcome>,
    /// Whether it holds the reference's list lock.
    dir_lock: bool,
    /// Its leader shares it with no one.
    alone: bool,
    /// The transaction, while no body runs on it (`None` before it is begun, and while a body
    /// runs).
    txn: Option<Box<dyn Shared>>,
    /// A body is running on it.
    running: bool,
    /// Writers waiting for their turn on it.
    waiting: usize,
    /// Writers that joined it, in all.
    joined: usize,
    /// A joiner's body panicked while it held the transaction: it is gone.
    lost: bool,
}

/// How a shared transaction's commit ended: `Ok`, or the error's kind, file and text (a joiner
/// gets a copy as [`Error::Io`]; the leader gets the error itself).
type Outcome = OnceLock<std::result::Result<(), Failure>>;

/// What a joiner is told of a failed commit: the error's kind, the file it was about (none when
/// not an I/O error) and its text.
type Failure = (std::io::ErrorKind, Option<PathBuf>, String);

impl Group {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `body` in a shared transaction, begun (when this writer leads one) by `begin`
    /// (see the module's documentation). `dir_lock`: the transaction must hold the reference's
    /// list lock. `alone`: in a transaction of its own, shared with no other writer.
    pub(crate) fn write<T: Send>(
        &self,
        begin: impl FnOnce() -> Result<Box<dyn Shared>>,
        dir_lock: bool,
        alone: bool,
        mut body: impl FnMut(&mut dyn StoreTxn) -> Result<T> + Send,
    ) -> Result<T> {
        let mut state = self.lock();
        loop {
            match &mut state.filling {
                None => break,
                Some(batch)
                    if !alone
                        && !batch.alone
                        && !batch.lost
                        && batch.joined < MAX_JOINED
                        && (batch.dir_lock || !dir_lock)
                        && batch.outcome.get().is_none() =>
                {
                    batch.waiting += 1;
                    batch.joined += 1;
                    let outcome = Arc::clone(&batch.outcome);
                    self.changed.notify_all();
                    return self.join(state, &outcome, body);
                }
                Some(_) => state = self.wait(state),
            }
        }
        let outcome = Arc::new(Outcome::new());
        state.filling = Some(Batch {
            outcome: Arc::clone(&outcome),
            dir_lock,
            alone,
            txn: None,
            running: true,
            waiting: 0,
            joined: 0,
            lost: false,
        });
        drop(state);
        self.changed.notify_all();
        let mut txn = match begin() {
            Ok(txn) => txn,
            Err(e) => {
                self.finish(&outcome, Err(&e));
                self.lock().filling = None;
                self.changed.notify_all();
                return Err(e);
            }
        };
        let value = run(&mut txn, &mut body);
        let mut state = self.lock();
        if let Some(batch) = &mut state.filling {
            batch.txn = Some(txn);
            batch.running = false;
        }
        self.changed.notify_all();
        // Every writer that joined runs its body before the commit (unless one panicked with
        // the transaction: then the others are told it failed).
        while state
            .filling
            .as_ref()
            .is_some_and(|b| !b.lost && (b.running || b.waiting > 0))
        {
            state = self.wait(state);
        }
        let batch = state.filling.take();
        drop(state);
        self.changed.notify_all();
        let txn = batch.and_then(|b| b.txn);
        let committed = match txn {
            Some(txn) => txn.commit(),
            None => Err(Error::Internal(
                "a writer's body panicked in a shared transaction; nothing was committed".into(),
            )),
        };
        self.finish(&outcome, committed.as_ref().map(|_| ()));
        let value = value?;
        committed.map(|()| value)
    }

    /// Runs `body` on the transaction being filled, when its turn comes, then waits for the
    /// commit.
    fn join<T: Send>(
        &self,
        mut state: MutexGuard<'_, State>,
        outcome: &Arc<Outcome>,
        mut body: impl FnMut(&mut dyn StoreTxn) -> Result<T> + Send,
    ) -> Result<T> {
        let mut txn = loop {
            if let Some(done) = outcome.get() {
                return Err(shared_error(done.as_ref().err()));
            }
            let ours = state
                .filling
                .as_mut()
                .filter(|b| Arc::ptr_eq(&b.outcome, outcome) && !b.running);
            if let Some(txn) = ours.and_then(|batch| {
                let txn = batch.txn.take()?;
                batch.running = true;
                batch.waiting -= 1;
                Some(txn)
            }) {
                break txn;
            }
            state = self.wait(state);
        };
        drop(state);
        let ran = catch_unwind(AssertUnwindSafe(|| run(&mut txn, &mut body)));
        let mut state = self.lock();
        if let Some(batch) = state
            .filling
            .as_mut()
            .filter(|b| Arc::ptr_eq(&b.outcome, outcome))
        {
            batch.running = false;
            match ran.is_ok() {
                true => batch.txn = Some(txn),
                false => batch.lost = true,
            }
        }
        self.changed.notify_all();
        let value = match ran {
            Ok(value) => value,
            Err(panic) => {
                drop(state);
                resume_unwind(panic)
            }
        };
        while outcome.get().is_none() {
            state = self.wait(state);
        }
        match outcome.get() {
            Some(Ok(())) => value,
            other => Err(shared_error(other.and_then(|o| o.as_ref().err()))),
        }
    }

    /// Records how the commit ended and wakes every writer in it.
    fn finish(&self, outcome: &Outcome, result: std::result::Result<(), &Error>) {
        let _ = outcome.set(result.map_err(failure));
        let _state = self.lock();
        self.changed.notify_all();
    }
}

/// Runs `body` on `txn`; if it fails, what it staged is dropped.
fn run<T>(
    txn: &mut Box<dyn Shared>,
    body: &mut impl FnMut(&mut dyn StoreTxn) -> Result<T>,
) -> Result<T> {
    let mut value = None;
    txn.attempt(&mut |txn| body(txn).map(|v| value = Some(v)))?;
    value.ok_or_else(|| Error::Internal("a transaction's body succeeded without a value".into()))
}

/// What a joiner is told of `e`, the error its leader's commit failed with.
fn failure(e: &Error) -> Failure {
    match e {
        Error::Io { source, path, .. } => (source.kind(), Some(path.clone()), e.to_string()),
        _ => (std::io::ErrorKind::Other, None, e.to_string()),
    }
}

/// A joiner's copy of the error its shared transaction's commit (or begin) failed with.
fn shared_error(failed: Option<&Failure>) -> Error {
    let (kind, path, message) = failed.cloned().unwrap_or((
        std::io::ErrorKind::Other,
        None,
        "the shared commit failed".into(),
    ));
    Error::Io {
        op: "commit",
        path: path.unwrap_or_default(),
        source: std::io::Error::new(kind, message),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::time::Duration;

    use super::*;
    use crate::api::CreateRequest;
    use crate::record::Task;
    use crate::store::TaskList;
    use crate::{StoreConfig, TaskId};

    /// Waits (with a deadline) until `n` writers wait on the transaction being filled.
    fn until_waiting(list: &TaskList, n: usize) {
        until(list, "{n} writers never queued", |state| {
            state.filling.as_ref().is_some_and(|b| b.waiting >= n)
        });
    }

    /// Stages a new task `subject` in `txn`.
    fn stage(txn: &mut dyn StoreTxn, subject: &str) -> Result<TaskId> {
        let task = Task::new(txn.next_id()?, subject, "");
        txn.save(&task)?;
        Ok(task.id)
    }

    #[test]
    fn writers_that_queue_while_a_transaction_is_open_share_its_one_journal_record() {
        let root = tempfile::tempdir().unwrap();
        let list = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        list.create(&CreateRequest::new("first", "")).unwrap();
        let records = || crate::wal::op_records(&list).unwrap();
        let before = records();
        const JOINERS: usize = 7;
        let ids: Vec<TaskId> = std::thread::scope(|scope| {
            let leader = scope.spawn(|| {
                list.write(false, |txn| {
                    // Held open until every other writer queues on it.
                    until_waiting(&list, JOINERS);
                    stage(txn, "leader")
                })
            });
            until_waiting_for_a_leader(&list);
            let joiners: Vec<_> = (0..JOINERS)
                .map(|n| {
                    let list = list.clone();
                    scope.spawn(move || {
                        list.write(false, |txn| {
                            // Each sees the tasks staged before its own.
                            let staged = txn.task_ids()?.len();
                            assert!(staged >= 2, "{staged}");
                            stage(txn, &format!("joiner {n}"))
                        })
                    })
                })
                .collect();
            std::iter::once(leader)
                .chain(joiners)
                .map(|h| h.join().unwrap().unwrap())
                .collect()
        });
        assert_eq!(
            records(),
            before + 1,
            "one record, so one flush, for all eight"
        );
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 1 + JOINERS, "distinct ids: {ids:?}");
        assert_eq!(list.snapshot().unwrap().tasks.len(), 2 + JOINERS);
    }

    #[test]
    fn a_failing_writer_in_a_shared_transaction_drops_only_its_own_changes() {
        let root = tempfile::tempdir().unwrap();
        let list = TaskList::open(root.path(), "l", StoreConfig::default()).unwrap();
        let (kept, failed) = std::thread::scope(|scope| {
            let leader = scope.spawn(|| {
                list.write(false, |txn| {
                    until_waiting(&list, 1);
                    stage(txn, "kept")
                })
            });
            until_waiting_for_a_leader(&list);
            let failing = list.clone();
            let failed = scope.spawn(move || {
                failing.write(false, |txn| {
                    stage(txn, "dropped")?;
                    Err::<TaskId, _>(Error::Internal("refused".into()))
                })
            });
            (leader.join().unwrap(), failed.join().unwrap())
        });
        let kept = kept.unwrap();
        assert!(matches!(failed, Err(Error::Internal(_))), "{failed:?}");
        let tasks = list.snapshot().unwrap().tasks;
        assert_eq!(tasks.keys().copied().collect::<Vec<_>>(), vec![kept]);
        // The id the failed writer took is free again.
        let next = list
            .create(&CreateRequest::new("next", ""))
            .unwrap()
            .task
            .id;
        assert_eq!(next.get(), kept.get() + 1);
    }

    /// Waits (with a deadline) until a leader has begun filling a transaction.
    fn until_waiting_for_a_leader(list: &TaskList) {
        until(list, "no leader", |state| state.filling.is_some());
    }

    /// Waits on the group's condition variable (every change of its state is announced on it)
    /// until `done`, failing with `what` after 20 s.
    fn until(list: &TaskList, what: &str, done: impl Fn(&State) -> bool) {
        let state = list.group.lock();
        let (_state, waited) = list
            .group
            .changed
            .wait_timeout_while(state, Duration::from_secs(20), |state| !done(state))
            .unwrap_or_else(PoisonError::into_inner);
        assert!(!waited.timed_out(), "{what}");
    }
}
