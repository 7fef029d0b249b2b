//! The poll loop: reads each running task's new output and evicts what may leave.

use std::path::Path;
use std::sync::Arc;

use task_output::OutputError;
use task_output::read::Delta;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::event::TaskEvent;
use crate::{Registry, TaskId, TaskState, TaskStatus, UpdateOutcome};

/// Where the poll loop gets output deltas from.
pub trait OutputReader: Send + Sync + 'static {
    /// At most `max_bytes` of `path` from `offset` (see [`task_output::read::read_delta`]).
    fn read_delta(&self, path: &Path, offset: u64, max_bytes: usize) -> Result<Delta, OutputError>;
}

/// Reads output files with [`task_output::read::read_delta`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FileReader;

impl OutputReader for FileReader {
    fn read_delta(&self, path: &Path, offset: u64, max_bytes: usize) -> Result<Delta, OutputError> {
        task_output::read::read_delta(path, offset, max_bytes)
    }
}

/// What one tick of the poll loop did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PollReport {
    /// Tasks whose offset advanced.
    pub advanced: Vec<TaskId>,
    /// Bytes consumed over all tasks.
    pub bytes: u64,
    /// Tasks evicted.
    pub evicted: Vec<TaskId>,
}

/// Every `poll_interval`: for each running task, read its output from `outputOffset`, advance
/// the offset, emit the bytes as a `TaskOutput` event; then evict every task that may leave.
///
/// The offset is written with a compare-and-set on the task's state as it is *after* the
/// read, so a kill or completion that lands while a read is in flight is never overwritten.
#[derive(Debug)]
pub struct PollLoop<R = FileReader> {
    registry: Arc<Registry>,
    reader: R,
}

impl PollLoop {
    /// A poll loop over `registry` reading real output files.
    pub fn new(registry: Arc<Registry>) -> Self {
        PollLoop::with_reader(registry, FileReader)
    }
}

impl<R: OutputReader> PollLoop<R> {
    /// A poll loop reading through `reader`.
    pub fn with_reader(registry: Arc<Registry>, reader: R) -> Self {
        PollLoop { registry, reader }
    }

    /// One pass. Blocking (it reads files): async code runs it through
    /// [`spawn`](PollLoop::spawn) or `spawn_blocking`.
    pub fn tick(&self) -> PollReport {
        let mut report = PollReport::default();
        let running = self
            .registry
            .snapshot()
            .into_iter()
            .filter(|state| state.status() == TaskStatus::Running);
        for state in running {
            if let Some(consumed) = self.read_one(&state) {
                report.advanced.push(state.id());
                report.bytes += consumed;
            }
        }
        report.evicted = self.registry.evict_expired();
        report
    }

    /// Runs [`tick`](PollLoop::tick) every `poll_interval` on the blocking pool until the
    /// returned handle is aborted. Call it from within a Tokio runtime.
    pub fn spawn(self) -> JoinHandle<()> {
        let period = self.registry.config().poll_interval;
        let this = Arc::new(self);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let pass = Arc::clone(&this);
                if let Err(error) = tokio::task::spawn_blocking(move || pass.tick()).await {
                    tracing::warn!(%error, "poll tick failed");
                }
            }
        })
    }

    /// Reads one task's delta and records it on the fresh state; returns the bytes consumed.
    fn read_one(&self, state: &TaskState) -> Option<u64> {
        let (id, offset) = (state.id(), state.base.output_offset);
        let max = self.registry.config().max_read_bytes;
        let delta = match self.reader.read_delta(&state.base.output_file, offset, max) {
            Ok(delta) if delta.new_offset > offset => delta,
            Ok(_) => return None,
            Err(error) => {
                tracing::debug!(task = %id, %error, "no output delta");
                return None;
            }
        };
        let new_offset = delta.new_offset;
        // Applied to the state as it is now: only the offset changes, and only if nobody
        // consumed these bytes meanwhile.
        let outcome = self.registry.update(&id, |fresh| {
            (fresh.base.output_offset == offset).then(|| {
                let mut next = fresh.clone();
                next.base.output_offset = new_offset;
                next
            })
        });
        match outcome {
            Ok(UpdateOutcome::Written(_)) => {
                self.registry.emit(TaskEvent::TaskOutput {
                    task_id: id,
                    offset,
                    bytes: delta.bytes,
                });
                Some(new_offset - offset)
            }
            Ok(UpdateOutcome::Unchanged) | Err(_) => None,
        }
    }
}

/// Starts the poll loop over `registry`, reading real output files (from within a Tokio
/// runtime; abort the handle to stop it).
pub fn spawn_poll_loop(registry: Arc<Registry>) -> JoinHandle<()> {
    PollLoop::new(registry).spawn()
}
