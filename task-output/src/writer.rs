//! The capped disk writer: a flat queue of chunks drained by one loop into one file handle.
//!
//! [`DiskWriter::append`] never blocks on the disk: it queues the chunk and, if no drain is
//! running, starts one. Inside a tokio runtime the drain runs on the blocking pool
//! (`spawn_blocking`); outside one it runs inline on the appending thread, so the crate also
//! serves synchronous programs. A runtime that is shutting down drops the drain instead of
//! running it, and the drain then runs where it is dropped: queued bytes are never stranded. Each pass of the drain takes every queued chunk and appends them
//! with one vectored write (`writev`, which joins them without a copy); the chunks are freed as
//! soon as they are written.
//!
//! The writer accepts at most [`DiskWriterConfig::cap_bytes`] bytes. The first chunk that would
//! pass the cap is cut at the cap, its [`cap_notice`] is appended once, and every later byte is
//! dropped, so the file never grows past the cap plus the notice.

use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::mem;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use tokio::sync::Notify;

use crate::OutputError;
use crate::open::{create_output_file, open_output_append};

/// The default cap on the bytes one writer puts in its file: 5 GiB.
pub const MAX_TASK_OUTPUT_BYTES: u64 = 5 * 1024 * 1024 * 1024;

/// Appended once when the default cap is reached: the reference's text. Other caps are named in
/// theirs ([`cap_notice`]).
pub const CAP_NOTICE: &str = "\n[output truncated: exceeded 5GB disk cap]\n";

/// The notice appended once when a file reaches `cap_bytes`: [`CAP_NOTICE`] for the default
/// cap, the same sentence naming the cap otherwise.
pub fn cap_notice(cap_bytes: u64) -> String {
    format!(
        "\n[output truncated: exceeded {} disk cap]\n",
        human_size(cap_bytes)
    )
}

pub use task_protocol::human_size;

/// Settings of a [`DiskWriter`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskWriterConfig {
    /// The most bytes the file may hold before its [`cap_notice`] (default
    /// [`MAX_TASK_OUTPUT_BYTES`]).
    pub cap_bytes: u64,
}

impl Default for DiskWriterConfig {
    fn default() -> Self {
        Self {
            cap_bytes: MAX_TASK_OUTPUT_BYTES,
        }
    }
}

/// Appends chunks to one output file through a queue, up to a cap.
#[derive(Debug)]
pub struct DiskWriter {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    cap_bytes: u64,
    state: Mutex<State>,
    /// The file handle; only the single running drain uses it.
    file: Mutex<Option<File>>,
    /// Woken whenever a drain finishes.
    idle: Notify,
}

#[derive(Debug, Default)]
struct State {
    queue: Vec<Bytes>,
    /// Bytes counted against the cap (the file's length when opened plus every accepted byte).
    accepted: u64,
    capped: bool,
    draining: bool,
    /// The first write failure not yet reported by `flush`.
    error: Option<OutputError>,
}

impl DiskWriter {
    /// Creates the output file (`O_EXCL|O_NOFOLLOW`, mode `0600`) and a writer for it.
    pub fn create(path: impl Into<PathBuf>, config: DiskWriterConfig) -> Result<Self, OutputError> {
        let path = path.into();
        let file = create_output_file(&path)?;
        Ok(Self::with_file(path, file, 0, config))
    }

    /// Opens an existing output file for appending (`O_APPEND|O_NOFOLLOW`); the bytes already in
    /// it count against the cap.
    pub fn open_append(
        path: impl Into<PathBuf>,
        config: DiskWriterConfig,
    ) -> Result<Self, OutputError> {
        let path = path.into();
        let file = open_output_append(&path)?;
        let len = file
            .metadata()
            .map_err(|err| OutputError::from_io(&path, err))?
            .len();
        Ok(Self::with_file(path, file, len, config))
    }

    fn with_file(path: PathBuf, file: File, len: u64, config: DiskWriterConfig) -> Self {
        let state = State {
            accepted: len,
            capped: len > config.cap_bytes,
            ..State::default()
        };
        Self {
            shared: Arc::new(Shared {
                path,
                cap_bytes: config.cap_bytes,
                state: Mutex::new(state),
                file: Mutex::new(Some(file)),
                idle: Notify::new(),
            }),
        }
    }

    /// The path of the file being written.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Queues `chunk` for writing and makes sure a drain is running. Bytes past the cap are
    /// dropped (after the one-time [`cap_notice`]).
    pub fn append(&self, chunk: Bytes) {
        let start_drain = {
            let mut state = self.shared.lock_state();
            state.accept(chunk, self.shared.cap_bytes);
            let idle = !state.draining && !state.queue.is_empty();
            state.draining |= idle;
            idle
        };
        if start_drain {
            self.start_drain();
        }
    }

    /// Queues a copy of `bytes`; see [`append`](Self::append).
    pub fn write(&self, bytes: &[u8]) {
        self.append(Bytes::copy_from_slice(bytes));
    }

    /// Whether the cap has been reached (later bytes are dropped).
    pub fn is_capped(&self) -> bool {
        self.shared.lock_state().capped
    }

    /// Bytes counted against the cap so far (excluding the notice), written or still queued.
    pub fn accepted_bytes(&self) -> u64 {
        self.shared.lock_state().accepted
    }

    /// Waits until every queued chunk has been handed to the operating system (this is not an
    /// `fsync`), then reports the first write failure since the last flush, if any.
    pub async fn flush(&self) -> Result<(), OutputError> {
        loop {
            let notified = self.shared.idle.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut state = self.shared.lock_state();
                if !state.draining {
                    return state.error.take().map_or(Ok(()), Err);
                }
            }
            notified.await;
        }
    }

    /// Writes what is queued, then closes the file handle and keeps the file.
    pub async fn evict(self) -> Result<(), OutputError> {
        let flushed = self.flush().await;
        self.shared.lock_file().take();
        flushed
    }

    /// Drops whatever is still queued, closes the file handle and deletes the file.
    pub async fn cleanup(self) -> Result<(), OutputError> {
        {
            let mut state = self.shared.lock_state();
            state.queue.clear();
            state.capped = true;
        }
        // Ignore write errors: the file is going away.
        let _ = self.flush().await;
        self.shared.lock_file().take();
        match std::fs::remove_file(&self.shared.path) {
            Err(err) if err.kind() != io::ErrorKind::NotFound => {
                Err(OutputError::from_io(&self.shared.path, err))
            }
            _ => Ok(()),
        }
    }

    fn start_drain(&self) {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let drain = QueuedDrain(Arc::clone(&self.shared));
                runtime.spawn_blocking(move || drop(drain));
            }
            Err(_) => self.shared.drain(),
        }
    }
}

/// A drain handed to the blocking pool; it drains when dropped. The pool drops it after running
/// it, and a runtime that is shutting down drops it without running it: the drain then happens
/// on the thread that drops it, so queued bytes are never stranded and [`DiskWriter::flush`]
/// never waits for a drain that will not come.
struct QueuedDrain(Arc<Shared>);

impl Drop for QueuedDrain {
    fn drop(&mut self) {
        self.0.drain();
    }
}

impl State {
    fn accept(&mut self, chunk: Bytes, cap_bytes: u64) {
        if self.capped || chunk.is_empty() {
            return;
        }
        let room = cap_bytes.saturating_sub(self.accepted);
        let len = chunk.len() as u64;
        if len <= room {
            self.accepted += len;
            self.queue.push(chunk);
            return;
        }
        // `room < len <= usize::MAX`, so the cast is lossless.
        let kept = chunk.slice(..room as usize);
        if !kept.is_empty() {
            self.queue.push(kept);
        }
        self.queue.push(Bytes::from(cap_notice(cap_bytes)));
        self.accepted = cap_bytes;
        self.capped = true;
        tracing::warn!(
            cap_bytes,
            "output reached its disk cap; later output is dropped"
        );
    }
}

impl Shared {
    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_file(&self) -> MutexGuard<'_, Option<File>> {
        self.file.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The drain loop: one pass per batch of queued chunks, until the queue is empty.
    fn drain(&self) {
        let mut file = self.lock_file();
        loop {
            let batch = {
                let mut state = self.lock_state();
                if state.queue.is_empty() {
                    state.draining = false;
                    break;
                }
                mem::take(&mut state.queue)
            };
            let written = match file.as_mut() {
                Some(file) => write_with_one_retry(file, &batch),
                None => Err(io::Error::other("the writer's file handle is closed")),
            };
            if let Err(err) = written {
                tracing::warn!(path = %self.path.display(), error = %err, "output write failed");
                self.lock_state()
                    .error
                    .get_or_insert_with(|| OutputError::from_io(&self.path, err));
            }
        }
        drop(file);
        self.idle.notify_waiters();
    }
}

/// Writes all of `batch` with vectored writes (one `writev` per pass when the kernel takes it
/// all, no copying), retrying once after a failed write, from where it stopped.
fn write_with_one_retry(file: &mut impl Write, batch: &[Bytes]) -> io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = batch.iter().map(|chunk| IoSlice::new(chunk)).collect();
    let mut remaining = &mut slices[..];
    IoSlice::advance_slices(&mut remaining, 0);
    let mut retried = false;
    while !remaining.is_empty() {
        match file.write_vectored(remaining) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(count) => IoSlice::advance_slices(&mut remaining, count),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(err) if !retried => {
                tracing::debug!(error = %err, "output write failed; retrying once");
                retried = true;
            }
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink whose first `failures` writes fail; later writes take at most 3 bytes of the first
    /// non-empty slice (the default `write_vectored`).
    struct Flaky {
        failures: usize,
        written: Vec<u8>,
    }

    impl Write for Flaky {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.failures > 0 {
                self.failures -= 1;
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let count = buf.len().min(3);
            self.written.extend_from_slice(&buf[..count]);
            Ok(count)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn batch() -> Vec<Bytes> {
        let parts: [&'static [u8]; 4] = [b"0123", b"", b"45", b"6789"];
        parts.map(Bytes::from_static).to_vec()
    }

    #[test]
    fn one_failure_is_retried_from_where_the_write_stopped() {
        let mut sink = Flaky {
            failures: 1,
            written: Vec::new(),
        };
        write_with_one_retry(&mut sink, &batch()).unwrap_or_else(|err| panic!("{err}"));
        assert_eq!(sink.written, b"0123456789");
    }

    #[test]
    fn a_second_failure_is_reported() {
        let mut sink = Flaky {
            failures: 2,
            written: Vec::new(),
        };
        let err = write_with_one_retry(&mut sink, &batch()).err();
        assert_eq!(err.map(|err| err.kind()), Some(io::ErrorKind::WouldBlock));
        assert!(sink.written.is_empty());
    }
}
