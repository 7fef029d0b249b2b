//! The write ends of the stdin pipes of the shell tasks started with
//! [`StdinMode::Piped`](crate::process::StdinMode), by task id, for the life of each task.
//!
//! Each pipe sits behind its own async lock, held for the whole of one write (and the close
//! that may follow it): two writers to one task never interleave within a chunk. A task's slot
//! is locked from its registration until its process exists, so input sent in between waits
//! for the pipe instead of being refused.

use std::sync::Arc;
use std::time::Instant;

use dashmap::DashMap;
use task_core::process::ChildStdin;
use task_core::{Input, InputError, TaskId};
use tokio::io::AsyncWriteExt;
use tokio::sync::{Mutex, OwnedMutexGuard};

use crate::handle::TaskHandle;

/// A task's stdin as its writers see it.
#[derive(Debug)]
pub(crate) enum Pipe {
    /// The process is not started yet, or its start failed.
    NotStarted,
    /// Open for writing.
    Open(ChildStdin),
    /// Closed on request.
    Closed,
    /// The reading side closed it: a write got `EPIPE`.
    ReaderGone,
}

/// The stdin pipes of live tasks.
#[derive(Debug, Default)]
pub(crate) struct Inputs {
    pipes: DashMap<TaskId, Arc<Mutex<Pipe>>>,
}

impl Inputs {
    /// Reserves the pipe of `id` before its process exists: writers wait on its lock until
    /// the reservation is given the started task ([`Reservation::attach`]); dropped instead
    /// (the start failed, or never ran), the pipe is forgotten.
    pub(crate) fn reserve(self: &Arc<Self>, id: TaskId) -> Reservation {
        let slot = Arc::new(Mutex::new(Pipe::NotStarted));
        // A new lock is always free; were it not, the pipe would only stay `NotStarted`.
        let pipe = Arc::clone(&slot).try_lock_owned().ok();
        self.pipes.insert(id, slot);
        Reservation {
            inputs: Arc::clone(self),
            id,
            pipe,
            attached: false,
        }
    }

    /// Forgets the pipe of `id` (its task ended): the write end is closed once no writer holds it.
    pub(crate) fn release(&self, id: &TaskId) {
        self.pipes.remove(id);
    }

    /// Writes `input` to the stdin of `id`, holding its lock throughout.
    pub(crate) async fn write(&self, id: &TaskId, input: Input<'_>) -> Result<(), InputError> {
        let slot = self
            .pipes
            .get(id)
            .map(|entry| Arc::clone(entry.value()))
            .ok_or(InputError::NotPiped(*id))?;
        let started = Instant::now();
        let mut pipe = tokio::time::timeout(input.patience, slot.lock())
            .await
            .map_err(|_| stalled(id, 0, input, started))?;
        let stdin = match &mut *pipe {
            Pipe::Open(stdin) => stdin,
            Pipe::NotStarted => return Err(InputError::NotPiped(*id)),
            Pipe::Closed => return Err(InputError::Closed(*id)),
            Pipe::ReaderGone => return Err(InputError::ReaderGone(*id)),
        };
        let mut written = 0;
        let remaining = input.patience.saturating_sub(started.elapsed());
        let wrote = tokio::time::timeout(remaining, async {
            while written < input.bytes.len() {
                match stdin.write(&input.bytes[written..]).await? {
                    0 => return Err(std::io::ErrorKind::WriteZero.into()),
                    n => written += n,
                }
            }
            stdin.flush().await
        })
        .await;
        match wrote {
            Err(_) => Err(stalled(id, written, input, started)),
            Ok(Err(error)) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                *pipe = Pipe::ReaderGone;
                Err(InputError::ReaderGone(*id))
            }
            Ok(Err(source)) => Err(InputError::Failed { id: *id, source }),
            Ok(Ok(())) => {
                if input.close {
                    *pipe = Pipe::Closed; // drops the write end: end of file for the reader
                }
                Ok(())
            }
        }
    }
}

/// The pipe of a task being started, locked; see [`Inputs::reserve`].
#[derive(Debug)]
pub(crate) struct Reservation {
    inputs: Arc<Inputs>,
    id: TaskId,
    pipe: Option<OwnedMutexGuard<Pipe>>,
    attached: bool,
}

impl Reservation {
    /// Opens the pipe to the started task's stdin, and forgets it when the task ends (which
    /// closes the write end). Call on a tokio runtime.
    pub(crate) fn attach(mut self, mut task: TaskHandle) {
        if let (Some(pipe), Some(stdin)) = (self.pipe.as_mut(), task.take_stdin()) {
            **pipe = Pipe::Open(stdin);
        }
        self.attached = true;
        let (inputs, id) = (Arc::clone(&self.inputs), self.id);
        drop(self); // unlocks: waiting writers go on
        tokio::spawn(async move {
            let _ = task.wait().await;
            inputs.release(&id);
        });
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.attached {
            self.inputs.release(&self.id);
        }
    }
}

fn stalled(id: &TaskId, written: usize, input: Input<'_>, started: Instant) -> InputError {
    InputError::Stalled {
        id: *id,
        written,
        total: input.bytes.len(),
        waited: started.elapsed(),
    }
}
