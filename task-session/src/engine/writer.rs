//! The record writer: one thread that writes every task's record, sweeps, and settles ends.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use task_core::{Registry, TaskId, TaskState, TaskStatus};
use tokio::sync::oneshot;

use super::ends::EndActions;
use crate::error::{Error, Result};
use crate::guard as lock;
use crate::notice::Notice;
use crate::paths::SessionPaths;
use crate::queue::Placements;
use crate::record::{self, TaskRecord};
use crate::start_record::StartRecord;

enum WriteRequest {
    Write(TaskId, Occasion),
    Flush(oneshot::Sender<()>),
}

/// The handle of the record writer thread.
///
/// One thread: every record is a file created in the same directory, and file creations in
/// one directory are serialized by the kernel anyway (on ext4, several writers spent their time
/// spinning on the directory's lock: one writer used 10-25 % less supervisor CPU than four in
/// the 200-run loop of `benches/benches/cli.rs`).
#[derive(Clone)]
pub(super) struct Mirror {
    sender: mpsc::Sender<WriteRequest>,
    pub(super) state: Arc<Mirrored>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mirror")
    }
}

impl Mirror {
    /// Starts the writer thread, which also sweeps every `sweep_interval`.
    pub(super) fn spawn(
        paths: SessionPaths,
        registry: Arc<Registry>,
        sweep_interval: Duration,
        placements: Arc<Placements>,
        ends: EndActions,
    ) -> Result<Self> {
        let state = Arc::new(Mirrored {
            paths,
            registry,
            sweep_interval,
            placements,
            ends,
            books: Mutex::default(),
            task_locks: TaskLocks::default(),
            detached: AtomicBool::new(false),
            starting: AtomicUsize::new(0),
        });
        let (sender, receiver) = mpsc::channel();
        let writer = Arc::clone(&state);
        std::thread::Builder::new()
            .name("record-writer".into())
            .spawn(move || writer.write_loop(&receiver))
            .map_err(|e| Error::io("start", "the record writer", e))?;
        Ok(Self { sender, state })
    }

    pub(super) fn write(&self, id: TaskId) {
        let _ = self.sender.send(WriteRequest::Write(id, Occasion::Change));
    }

    /// Writes the end of `id` that ended at `end` and was settled silently: no notice is
    /// waited for.
    pub(super) fn write_silent(&self, id: TaskId, end: Option<u64>) {
        let _ = self
            .sender
            .send(WriteRequest::Write(id, Occasion::Silent { end }));
    }

    /// Attaches the completion notice of an ended task to its record.
    pub(super) fn complete(&self, id: TaskId, notice: Notice) {
        lock(&self.state.books).completions.insert(id, notice);
        self.write(id);
    }

    /// Waits until every write asked for so far is done.
    pub(super) async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.sender.send(WriteRequest::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }

    /// Writes the record of `id` on the calling thread, now (a short blocking write, like the
    /// creation of the task's output file before it): no hand-off to the writer thread on the
    /// way of a start. The first record of a task is always written this way. A failed write
    /// is also kept for the sweep to retry.
    pub(super) fn write_now(&self, id: TaskId) -> Result<()> {
        self.state.write(id, Occasion::Start)
    }

    /// Marks a start in flight until the guard is dropped: meanwhile the writer thread puts
    /// off the first record of any task it has not written yet (the sweep writes it), since
    /// that may be the task the start is making, which a launcher can start (a monitor)
    /// before the start notes its key and hook. A first record without its key would let a
    /// start sent again after this supervisor's death make a second task.
    pub(super) fn starting(&self) -> StartInFlight {
        self.state.starting.fetch_add(1, Ordering::SeqCst);
        StartInFlight(Arc::clone(&self.state))
    }

    /// Notes the key of the start that made `id`, for its records.
    pub(super) fn keyed(&self, id: TaskId, key: String) {
        lock(&self.state.books).start_keys.insert(id, key);
    }

    /// Keeps, for every task the wiring took over from a dead predecessor (a remote agent, a
    /// batch job followed again), what its record carried beyond its state: the key of the
    /// start that made it (so a retry of that start finds it instead of making another) and
    /// its end hook. Before any of its records is rewritten by this supervisor.
    pub(super) fn keep_what_records_carried(&self, registry: &Registry) {
        for state in registry.snapshot() {
            if let Ok(record) = record::read(&self.state.paths, &state.id()) {
                self.carry(&record, None);
            }
        }
    }

    /// Notes, for the task of `record` taken back under its id (by a supervisor after its
    /// predecessor's death, or resumed by a message after its eviction), what its record on
    /// disk carried beyond its state: the key of the start that made it, its end hook, and
    /// how it was started (`start`, when read from elsewhere than the record: an older
    /// client's file), so that every record this supervisor writes keeps them.
    pub(super) fn carry(&self, record: &TaskRecord, start: Option<Arc<StartRecord>>) {
        let id = record.id();
        let mut books = lock(&self.state.books);
        if let Some(key) = &record.start_key {
            books.start_keys.insert(id, key.clone());
        }
        if let Some(command) = &record.on_end {
            books.on_end.insert(id, command.clone());
        }
        if let Some(start) = start.or_else(|| record.start.clone()) {
            books.starts.insert(id, start);
        }
    }

    /// Notes how the task `id` was started, for its records.
    pub(super) fn started_with(&self, id: TaskId, start: StartRecord) {
        lock(&self.state.books).starts.insert(id, Arc::new(start));
    }

    /// Notes the task's own end hook, for its records.
    pub(super) fn on_end(&self, id: TaskId, command: String) {
        lock(&self.state.books).on_end.insert(id, command);
    }

    /// Writes the record of a task a kill on request just ended, now: no completion notice is
    /// due for it, so nothing waits for one. A failure is kept for the sweep to retry.
    pub(super) fn write_killed(&self, id: TaskId) {
        let _ = self.state.write(id, Occasion::Killed);
    }

    /// Notes that no reader delivers the completion of `id` (its caller waits for it in the
    /// foreground): its end is written without waiting for a notice.
    pub(super) fn expect_no_notice(&self, id: TaskId) {
        lock(&self.state.books).silent.insert(id);
    }

    /// Drops everything the books hold about `id` (a task that was never begun).
    pub(super) fn forget(&self, id: TaskId) {
        let _writing = self.state.task_locks.of(&id);
        lock(&self.state.books).forget(&id);
        self.state.ends.forget(&id);
        self.state.placements.forget(&id);
    }

    /// Holds `id` until the guard is dropped: no record of it is written and it is not
    /// settled (evicted) meanwhile. For a task taken back, between noting what its records
    /// carried and its registration: settling its previous end then would forget those notes.
    pub(super) fn hold(&self, id: TaskId) -> std::sync::MutexGuard<'_, ()> {
        self.state.task_locks.of(&id)
    }

    /// Stops every write to the session's paths, for good (the directory is gone).
    pub(super) fn detach(&self) {
        self.state.detached.store(true, Ordering::SeqCst);
    }

    /// Whether [`Mirror::detach`] was called.
    pub(super) fn is_detached(&self) -> bool {
        self.state.detached.load(Ordering::SeqCst)
    }

    /// How many tasks have a state no write has put on disk yet (writes that failed, ends
    /// waiting for their completion notice).
    pub(super) fn unwritten(&self) -> usize {
        let books = lock(&self.state.books);
        books.unwritten.len() + books.awaiting_notice.len()
    }
}

impl Books {
    /// The completion notice the end in `state` of `id` is written with on `occasion`:
    /// `Some(Some(_))` its notice, `Some(None)` none due (a kill on request, a settlement
    /// without one, a task run in the foreground), `None` while it is still awaited.
    fn end_notice(
        &self,
        id: &TaskId,
        state: &TaskState,
        occasion: Occasion,
    ) -> Option<Option<&Notice>> {
        // A notice of an earlier end (an agent resumed since) is not this end's.
        let notice = self
            .completions
            .get(id)
            .filter(|notice| state.base.end_time.is_none_or(|end| notice.at_ms >= end));
        let no_notice_due = match occasion {
            Occasion::Killed => true,
            Occasion::Silent { end } => end == state.base.end_time,
            Occasion::Change | Occasion::Start => false,
        } || self.silent.contains(id);
        match notice {
            Some(notice) => Some(Some(notice)),
            None if no_notice_due => Some(None),
            None => None,
        }
    }

    /// Drops everything about `id` (evicted, or never begun).
    pub(super) fn forget(&mut self, id: &TaskId) {
        self.written.remove(id);
        self.completions.remove(id);
        self.unwritten.remove(id);
        self.deferred.remove(id);
        self.start_keys.remove(id);
        self.on_end.remove(id);
        self.starts.remove(id);
        self.kept.remove(id);
        self.awaiting_notice.remove(id);
        self.silent.remove(id);
        self.quiet.remove(id);
    }
}

/// Why a record is written, which decides whether it may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Occasion {
    /// A change the writer thread or the sweep picked up.
    Change,
    /// A task's start: its first record is written even while `pending`.
    Start,
    /// A kill on request ended it: no completion notice is due, so nothing waits for one.
    Killed,
    /// Its notification was settled silently after the end at `end`: no notice is due for
    /// that end.
    Silent { end: Option<u64> },
}

/// What the writer thread works from.
pub(super) struct Mirrored {
    pub(super) paths: SessionPaths,
    pub(super) registry: Arc<Registry>,
    pub(super) sweep_interval: Duration,
    /// Each task's place in the queue, written into its records.
    pub(super) placements: Arc<Placements>,
    /// What is done at every end written: its hook, the look for what it left running.
    pub(super) ends: EndActions,
    /// What is noted about each task beyond its state; locked only while it is read or
    /// changed, never across a file write or a look through `/proc`.
    pub(super) books: Mutex<Books>,
    /// Held for the whole of a write of one task: the writer thread and
    /// [`Mirror::write_now`] never write one task at once.
    pub(super) task_locks: TaskLocks,
    /// Set once the session directory is gone: nothing is written any more.
    pub(super) detached: AtomicBool,
    /// Starts between their launch and their first record ([`Mirror::starting`]).
    pub(super) starting: AtomicUsize,
}

/// The writer's bookkeeping; every entry leaves when its task is evicted, so nothing here
/// grows with the number of finished tasks.
#[derive(Default)]
pub(super) struct Books {
    /// What was last written for each task.
    pub(super) written: HashMap<TaskId, Written>,
    /// The completion notice of each ended task, until it is evicted.
    pub(super) completions: HashMap<TaskId, Notice>,
    /// Tasks whose latest state could not be written (a full disk): retried every sweep.
    pub(super) unwritten: HashSet<TaskId>,
    /// Tasks whose first record was put off while a start was in flight: written by the sweep.
    pub(super) deferred: HashSet<TaskId>,
    /// The ends put into end slots for want of space, until their records take them.
    pub(super) kept: HashMap<TaskId, TaskRecord>,
    /// Ended tasks whose end is not written yet because their completion notice may still
    /// be on its way from the notification pump, with when to write them without it.
    pub(super) awaiting_notice: HashMap<TaskId, Instant>,
    /// Tasks whose completion no reader delivers (run in the foreground).
    pub(super) silent: HashSet<TaskId>,
    /// Live tasks whose state changes without an event (agents: tokens and text between tool
    /// uses), compared with their records every sweep. Kept apart so that a sweep, which
    /// follows every batch of writes, costs these tasks and not every task held.
    pub(super) quiet: HashSet<TaskId>,
    /// Ended tasks written to disk, with when to try to evict them.
    pub(super) settling: VecDeque<(TaskId, Instant)>,
    /// The key of the start that made each task, written into each of its records.
    pub(super) start_keys: HashMap<TaskId, String>,
    /// The end hook each task brought, written into each of its records.
    pub(super) on_end: HashMap<TaskId, String>,
    /// How each task was started, written into each of its records.
    pub(super) starts: HashMap<TaskId, Arc<StartRecord>>,
}

/// What was last written for a task: its state, shared with the registry for as long as the
/// task does not change (a live task costs no second copy of its state: 10 000 running tasks
pub(super) struct Written {
    state: Arc<TaskState>,
    /// Boxed: a live task has none, and an entry of every task held pays for its width.
    notification: Option<Box<Notice>>,
    survives_supervisor: bool,
    /// Whether the task's end slot is reserved ([`record::reserve_end`]).
    end_reserved: bool,
}

impl Written {
    pub(super) fn of(state: Arc<TaskState>, record: &TaskRecord, end_reserved: bool) -> Self {
        Written {
            state,
            notification: record.notification.clone().map(Box::new),
            survives_supervisor: record.survives_supervisor,
            end_reserved,
        }
    }

    /// Whether `record` holds nothing new (its start key and supervisor never change).
    pub(super) fn matches(&self, record: &TaskRecord) -> bool {
        self.survives_supervisor == record.survives_supervisor
            && self.notification.as_deref() == record.notification.as_ref()
            && *self.state == record.task
    }
}

/// A record ready to write, and whether one of its task was written before.
struct Drafted {
    record: TaskRecord,
    known: bool,
}

/// One lock per stripe of task ids: two writes of one task never overlap (each writes the
/// registry's state as it is under its lock, so an older state never replaces a newer one),
/// while writes of different tasks, and the books, do not wait for each other's files.
pub(super) struct TaskLocks([Mutex<()>; TASK_LOCK_STRIPES]);

/// How many stripes [`TaskLocks`] has: two tasks share one lock with odds of 1 in 64.
const TASK_LOCK_STRIPES: usize = 64;

impl Default for TaskLocks {
    fn default() -> Self {
        Self(std::array::from_fn(|_| Mutex::new(())))
    }
}

impl TaskLocks {
    /// The lock of `id`'s stripe, held.
    pub(super) fn of(&self, id: &TaskId) -> std::sync::MutexGuard<'_, ()> {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(id);
        lock(&self.0[(hash % TASK_LOCK_STRIPES as u64) as usize])
    }
}

/// A start in flight ([`Mirror::starting`]), until dropped.
pub(super) struct StartInFlight(Arc<Mirrored>);

impl Drop for StartInFlight {
    fn drop(&mut self) {
        self.0.starting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Mirrored {
    /// Writes in batches (everything queued is taken at once and each task written once, from
    /// its state at that moment: a burst of transitions costs one write; the ends of a batch
    /// are looked at for strays in one look, and their end slots removed once every record of
    /// the batch is on disk), and sweeps between batches: retries failed writes, evicts ended
    /// tasks whose final record is on disk.
    fn write_loop(&self, requests: &mpsc::Receiver<WriteRequest>) {
        loop {
            let first = match requests.recv_timeout(self.sweep_interval) {
                Ok(first) => Some(first),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            // Each task once, in the order first asked; a silent settlement outweighs a change.
            let mut writes: Vec<(TaskId, Occasion)> = Vec::new();
            let mut index: HashMap<TaskId, usize> = HashMap::new();
            let mut flushed = Vec::new();
            for request in first.into_iter().chain(requests.try_iter()) {
                match request {
                    WriteRequest::Write(id, occasion) => match index.get(&id) {
                        Some(&at) if occasion != Occasion::Change => writes[at].1 = occasion,
                        Some(_) => {}
                        None => {
                            index.insert(id, writes.len());
                            writes.push((id, occasion));
                        }
                    },
                    WriteRequest::Flush(done) => flushed.push(done),
                }
            }
            self.look_for_strays(&writes);
            let mut ended = Vec::new();
            for (id, occasion) in writes {
                // A failure is logged, kept and retried by the sweep.
                if let Ok(true) = self.write_record(id, occasion) {
                    ended.push(id);
                }
            }
            // Once every record of the batch is on disk: no end waits behind another's slot.
            for id in &ended {
                record::release_end(&self.paths, id);
            }
            for done in flushed {
                let _ = done.send(());
            }
            self.sweep();
        }
    }

    /// Looks for what the ends among `writes` that are written now (with their notice, or with
    /// none due) left running, all in one look ([`EndActions::look_for_strays`]): each of their
    /// writes then finds it noted. A single end is looked for by its write, as before.
    fn look_for_strays(&self, writes: &[(TaskId, Occasion)]) {
        let ended: Vec<(Arc<TaskState>, Occasion)> = writes
            .iter()
            .filter_map(|&(id, occasion)| Some((self.registry.get(&id)?, occasion)))
            .filter(|(state, _)| state.status().is_terminal())
            .collect();
        if ended.len() < 2 {
            return;
        }
        let due: Vec<&TaskState> = {
            let books = lock(&self.books);
            ended
                .iter()
                .filter(|(state, occasion)| {
                    books.end_notice(&state.id(), state, *occasion).is_some()
                })
                .map(|(state, _)| &**state)
                .collect()
        };
        if due.len() > 1 {
            self.ends.look_for_strays(&due);
        }
    }

    /// Writes the record of `id` from the registry's current state. A task not written yet is
    /// written while `pending` only at its start: the events of its registration would each
    /// cost a file no reader can ask for yet. An end is written with its completion notice:
    /// the executor ends a task and then sends the notice, which reaches [`Mirror::complete`]
    /// through the notification pump, so an end without one waits for it up to a sweep
    /// interval (an end with no notice due is written then, or at once when known: a kill on
    /// request, a task run in the foreground). Were the
    /// end written first, a supervisor dying before the notice would lose it for good. A
    /// write that fails is logged and kept for the sweep to retry, and its error returned.
    fn write(&self, id: TaskId, occasion: Occasion) -> Result<()> {
        if self.write_record(id, occasion)? {
            record::release_end(&self.paths, &id);
        }
        Ok(())
    }

    /// [`Mirrored::write`], but the end slot of an end written is left to the caller to
    /// release ([`record::release_end`]): returns whether an end was written.
    fn write_record(&self, id: TaskId, occasion: Occasion) -> Result<bool> {
        if self.detached.load(Ordering::SeqCst) {
            // A start is refused (no reader could ever see it); anything else is dropped.
            return match occasion {
                Occasion::Start => Err(Error::Supervisor(
                    "the session directory was deleted or replaced".into(),
                )),
                _ => Ok(false),
            };
        }
        let _writing = self.task_locks.of(&id);
        let Some(state) = self.registry.get(&id) else {
            return Ok(false);
        };
        let Some(Drafted { mut record, known }) = self.draft(id, &state, occasion) else {
            return Ok(false);
        };
        if state.status().is_terminal() {
            // Looked for only now: an agent is ended before its CLI has exited, and sends its
            // notice once it has, so what the CLI's tools left is the supervisor's by then.
            let left = self.ends.strays(&state);
            record.strays = left.running();
            if let (Some(notice), Some(note)) = (&mut record.notification, left.note()) {
                let summary = &mut notice.notification.summary;
                *summary = format!("{summary}; {note}");
            }
        }
        if lock(&self.books)
            .written
            .get(&id)
            .is_some_and(|w| w.matches(&record))
        {
            return Ok(false);
        }
        // The file is written with no lock but this task's held: a start or an end of another
        // task never waits behind it.
        let written = record::write(&self.paths, &record);
        self.wrote(id, state, record, known, written)
    }

    /// The record of `id` (in `state`) to write on this `occasion`, from the registry's state
    /// and what the books note about it; `None` when nothing is to be written now. Holds the
    /// books' lock for no file access.
    fn draft(&self, id: TaskId, state: &TaskState, occasion: Occasion) -> Option<Drafted> {
        let mut books = lock(&self.books);
        let known = books.written.contains_key(&id);
        if !known && occasion != Occasion::Start && state.status() == TaskStatus::Pending {
            return None;
        }
        let changed = matches!(occasion, Occasion::Change | Occasion::Silent { .. });
        if !known && changed && self.starting.load(Ordering::SeqCst) > 0 {
            books.deferred.insert(id);
            return None;
        }
        books.deferred.remove(&id);
        // An end is written with its completion notice; one still awaited is not drafted.
        let notification = if state.status().is_terminal() {
            match books.end_notice(&id, state, occasion) {
                Some(notice) => notice.cloned(),
                None => {
                    let now = Instant::now();
                    // As long as its executor may take to send it (an agent: once its CLI
                    // exited).
                    let delay = self
                        .registry
                        .executor(state.base.task_type)
                        .map_or(Duration::ZERO, |executor| executor.notice_delay(state));
                    let due = *books
                        .awaiting_notice
                        .entry(id)
                        .or_insert(now + self.sweep_interval.max(delay));
                    if now < due {
                        return None; // written by `complete`, or by the sweep once due
                    }
                    None
                }
            }
        } else {
            None
        };
        let mut record = TaskRecord::new(state.clone());
        record.notification = notification;
        record.start_key = books.start_keys.get(&id).cloned();
        record.queue = self.placements.get(&id);
        record.on_end = self.ends.hooks.command_for(books.on_end.get(&id));
        record.start = books.starts.get(&id).cloned();
        record.survives_supervisor = !state.status().is_terminal()
            && self
                .registry
                .executor(state.base.task_type)
                .is_some_and(|executor| executor.survives_supervisor(state));
        // A task waiting in the queue is queued again by the next supervisor (its start is
        // kept), so no reader ends it as an orphan: a reader starts that supervisor instead.
        let waiting = state.status() == TaskStatus::Pending
            && record
                .queue
                .as_ref()
                .is_some_and(|placement| placement.waiting);
        record.survives_supervisor |= waiting;
        books.awaiting_notice.remove(&id);
        Some(Drafted { record, known })
    }

    /// Notes in the books how the write of `record` (the state `state` of `id`) went, and does
    /// what follows an end on disk: its hook, its settling. Returns whether an end was written
    /// (its end slot is then to be released).
    fn wrote(
        &self,
        id: TaskId,
        state: Arc<TaskState>,
        record: TaskRecord,
        known: bool,
        written: Result<()>,
    ) -> Result<bool> {
        let terminal = record.is_terminal();
        match written {
            Ok(()) => {
                // Reserved once the task may run: not while it waits in the queue (where
                // 100 000 waiting tasks would each hold a slot's space; a task killed there
                // ends without ever running, and its end needs no more room than its
                // record had).
                let reserved = known
                    && lock(&self.books)
                        .written
                        .get(&id)
                        .is_some_and(|w| w.end_reserved);
                let reserve = !reserved && !terminal && !record.waits_in_queue();
                if reserve {
                    self.reserve_end(id);
                }
                if terminal {
                    // After the end and its notice are on disk: a hook never holds them up.
                    self.ends.hooks.ended(&record);
                }
                let mut books = lock(&self.books);
                if !terminal && state.kind.changes_quietly() {
                    books.quiet.insert(id);
                } else {
                    books.quiet.remove(&id);
                }
                books
                    .written
                    .insert(id, Written::of(state, &record, reserved || reserve));
                if books.unwritten.remove(&id) {
                    tracing::info!(task = %id, "its record is on disk again");
                }
                if terminal {
                    books.kept.remove(&id);
                    let at = Instant::now() + self.sweep_interval;
                    books.settling.push_back((id, at));
                }
                Ok(terminal)
            }
            Err(error) => {
                let kept_already = lock(&self.books).kept.get(&id) == Some(&record);
                if terminal && !kept_already {
                    self.keep_end(&record);
                    lock(&self.books).kept.insert(id, record);
                }
                if lock(&self.books).unwritten.insert(id) {
                    tracing::error!(task = %id, %error, "cannot write its record: kept in memory and retried");
                }
                Err(error)
            }
        }
    }

    /// Reserves the space of a new task's end. Without it the task still runs; its end then
    /// relies on this process alone when the disk is full.
    fn reserve_end(&self, id: TaskId) {
        if let Err(error) = record::reserve_end(&self.paths, &id) {
            tracing::warn!(task = %id, %error, "no space is reserved for its end");
        }
    }

    /// Puts an end its record could not take into the task's end slot, so it survives this
    /// process.
    fn keep_end(&self, record: &TaskRecord) {
        match record::write_end(&self.paths, record) {
            Ok(()) => tracing::warn!(task = %record.id(), "its end is kept in its end slot"),
            Err(error) => {
                tracing::error!(task = %record.id(), %error, "cannot keep its end in its end slot");
            }
        }
    }

    /// Retries failed writes, writes the ends whose notice wait is over, brings the records of
    /// live agents up to date, and evicts ended tasks whose final record has been on disk for
    /// a sweep interval.
    fn sweep(&self) {
        let now = Instant::now();
        let retry: Vec<TaskId> = {
            let books = lock(&self.books);
            // Only the ends whose wait for their notice is over: one that comes is written by
            // `complete`, so a burst of ends awaiting theirs costs no rewrite at every batch.
            let waited = books
                .awaiting_notice
                .iter()
                .filter(|&(_, due)| *due <= now)
                .map(|(id, _)| id);
            // Agents change without an event (tokens and text between tool uses): their
            // records are compared with their states, and rewritten if they differ.
            books
                .unwritten
                .iter()
                .chain(&books.deferred)
                .chain(waited)
                .chain(&books.quiet)
                .copied()
                .collect()
        };
        for id in retry {
            let _ = self.write(id, Occasion::Change); // not yet: kept for the next sweep
        }
        let now = Instant::now();
        let due: Vec<TaskId> = {
            let mut books = lock(&self.books);
            let mut due = Vec::new();
            while let Some(&(id, at)) = books.settling.front() {
                if at > now {
                    break;
                }
                books.settling.pop_front();
                due.push(id);
            }
            due
        };
        for id in due {
            self.settle(id);
        }
    }

    /// Evicts `id` if the record on disk holds the end the registry has and the registry lets
    /// it go; tries again later if its grace has not passed. A task resumed under its id since
    /// the end that queued this (a teammate sent a message) is not evicted here, even once it
    /// has ended again: that end may still wait for its notice, and evicting it first would
    /// leave its record `running` for good. The write of that end queues it again.
    pub(super) fn settle(&self, id: TaskId) {
        let _ = self.write(id, Occasion::Change); // a no-op unless something changed since
        let _writing = self.task_locks.of(&id);
        let mut books = lock(&self.books);
        if books.unwritten.contains(&id) {
            return; // retried by the sweep; settles once written
        }
        let final_on_disk = |current: &TaskState| {
            books
                .written
                .get(&id)
                .map(|written| Arc::clone(&written.state))
                .filter(|written| written.status().is_terminal() && **written == *current)
        };
        let gone = match self.registry.get(&id) {
            None => true,
            Some(current) => match final_on_disk(&current) {
                // Live again, or an end not written yet: the write of that end settles it.
                None => return,
                Some(written) => {
                    self.registry.evict_if(&id, |state| *state == *written)
                        || self.registry.get(&id).is_none()
                }
            },
        };
        if gone {
            books.forget(&id);
            self.ends.forget(&id);
            self.placements.forget(&id);
        } else {
            books
                .settling
                .push_back((id, Instant::now() + self.sweep_interval));
        }
    }
}
