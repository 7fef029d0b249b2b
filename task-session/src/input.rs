//! Input for a task's stdin (`tasks input`): the client sends it in chunks, one request each,
//! and the supervisor writes each chunk into the task's pipe before it answers.
//!
//! Why a chunk per request rather than a connection that streams raw bytes after its request
//! line: every request keeps its deadline and its typed answer (a chunk refused because the
//! task ended or closed its stdin says so at once); order holds because a client sends its
//! next chunk only after the answer to the last; backpressure is the answer itself (it comes
//! once the bytes are in the pipe, so a slow reader slows the client, and neither side holds
//! more than one chunk); and the supervisor's per-task lock is held for one chunk, not for a
//! whole stream, so an interactive `tasks input ID -` left open does not shut out other writers.
//! [`LineChunks`] cuts chunks at line ends, so concurrent writers never interleave within a line
//! shorter than [`CHUNK_BYTES`].

use std::io::Read;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use task_core::{Input, TaskId};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::protocol::{InputRefusal, Op, Response};
use crate::session::Session;

/// The most bytes one request carries (a pipe's capacity on Linux).
pub const CHUNK_BYTES: usize = 64 * 1024;

/// What the supervisor answers to [`Op::Input`]: writes the decoded bytes to the stdin of `id`
/// within `patience`, then closes it if asked.
pub(crate) async fn serve(
    engine: &Engine,
    id: &TaskId,
    data: &str,
    close: bool,
    patience: Duration,
) -> Response {
    let bytes = match STANDARD.decode(data) {
        Ok(bytes) => bytes,
        Err(error) => {
            return Response::Error {
                kind: crate::protocol::ErrorKind::BadRequest,
                message: format!("input that is not base64: {error}"),
            };
        }
    };
    let input = Input {
        bytes: &bytes,
        close,
        patience,
    };
    match engine.write_input(id, input).await {
        Ok(()) => Response::Written {
            bytes: bytes.len(),
            closed: close,
        },
        Err(error) => Response::InputRefused {
            reason: crate::refusal::input_refusal(&error),
            message: error.to_string(),
        },
    }
}

impl Session {
    /// Writes `bytes` (at most [`CHUNK_BYTES`] are sent at once) to the stdin of task `id`,
    /// a task started with a stdin pipe, then closes it if `close`; returns once the bytes are
    /// in the task's pipe. A task whose record says it ended is refused without asking the
    /// supervisor.
    pub fn write_input(&self, id: &TaskId, bytes: &[u8], close: bool) -> Result<()> {
        self.refuse_ended(id)?;
        let mut chunks = bytes.chunks(CHUNK_BYTES).peekable();
        if chunks.peek().is_none() && close {
            return self.send_input(id, &[], true);
        }
        while let Some(chunk) = chunks.next() {
            self.send_input(id, chunk, close && chunks.peek().is_none())?;
        }
        Ok(())
    }

    /// Copies `reader` to the stdin of task `id` until end of file, a chunk at a time (cut at
    /// line ends), then closes it if `close`; returns how many bytes went through.
    pub fn copy_input(&self, id: &TaskId, reader: impl Read, close: bool) -> Result<u64> {
        self.refuse_ended(id)?;
        let mut copied = 0;
        let mut chunks = LineChunks::new(reader);
        while let Some(chunk) = chunks
            .next_chunk()
            .map_err(|e| Error::io("read", "standard input", e))?
        {
            self.send_input(id, chunk, false)?;
            copied += chunk.len() as u64;
        }
        if close {
            self.send_input(id, &[], true)?;
        }
        Ok(copied)
    }

    /// [`InputRefusal::Finished`] if the record of `id` says it ended (an unknown id is
    /// [`Error::UnknownTask`]).
    fn refuse_ended(&self, id: &TaskId) -> Result<()> {
        let task = self.task(id)?;
        if task.is_terminal() {
            return Err(Error::Input {
                reason: InputRefusal::Finished,
                message: format!("task {id} has already ended ({})", task.status()),
            });
        }
        Ok(())
    }

    fn send_input(&self, id: &TaskId, bytes: &[u8], close: bool) -> Result<()> {
        let op = Op::Input {
            id: *id,
            data: STANDARD.encode(bytes),
            close,
        };
        match self.send(op)? {
            Response::Written { .. } => Ok(()),
            Response::InputRefused { reason, message } => Err(Error::Input { reason, message }),
            other => Err(crate::session::unexpected(other)),
        }
    }
}

/// Reads a stream in chunks of at most [`CHUNK_BYTES`] that end at a line end whenever the
/// line fits: a partial last line waits for the rest of its line (or the end of the stream).
#[derive(Debug)]
pub struct LineChunks<R> {
    reader: R,
    buffer: Vec<u8>,
    /// Bytes of `buffer` read and not yet handed out.
    filled: usize,
    /// Bytes at the start of `buffer` handed out by the last call.
    taken: usize,
    eof: bool,
}

impl<R: Read> LineChunks<R> {
    /// Chunks of `reader`.
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            buffer: vec![0; CHUNK_BYTES],
            filled: 0,
            taken: 0,
            eof: false,
        }
    }

    /// The next chunk, or `None` at the end of the stream.
    ///
    /// # Errors
    /// A read error of the stream (interruptions are retried).
    pub fn next_chunk(&mut self) -> std::io::Result<Option<&[u8]>> {
        self.buffer.copy_within(self.taken..self.filled, 0);
        self.filled -= self.taken;
        self.taken = 0;
        loop {
            let line_end = self.buffer[..self.filled]
                .iter()
                .rposition(|&b| b == b'\n')
                .map(|newline| newline + 1);
            let cut = match line_end {
                _ if self.eof => self.filled,
                Some(end) => end,
                None if self.filled == self.buffer.len() => self.filled, // one long line
                None => 0,
            };
            if cut > 0 {
                self.taken = cut;
                return Ok(Some(&self.buffer[..cut]));
            }
            if self.eof {
                return Ok(None);
            }
            match self.reader.read(&mut self.buffer[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(read) => self.filled += read,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A reader that returns at most `step` bytes per read, as a pipe may.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn chunks_of(data: &[u8], step: usize) -> Vec<Vec<u8>> {
        let mut chunks = LineChunks::new(Trickle { data, step });
        let mut out = Vec::new();
        while let Some(chunk) = chunks.next_chunk().unwrap() {
            out.push(chunk.to_vec());
        }
        out
    }

    #[test]
    fn chunks_end_at_line_ends_and_lose_nothing() {
        let line = |i: usize| format!("{i:04}:{}\n", "x".repeat(3000));
        let data: String = (0..100).map(line).collect();
        for step in [1, 7, 4096, 10_000, CHUNK_BYTES] {
            let chunks = chunks_of(data.as_bytes(), step);
            assert_eq!(chunks.concat(), data.as_bytes(), "step {step}");
            for chunk in &chunks {
                assert!(chunk.len() <= CHUNK_BYTES);
                assert_eq!(chunk.last(), Some(&b'\n'), "step {step}: a line was cut");
            }
        }
    }

    #[test]
    fn a_line_longer_than_a_chunk_and_a_last_line_without_end_go_through_whole() {
        let mut data = vec![b'a'; CHUNK_BYTES + 10];
        data.push(b'\n');
        data.extend_from_slice(b"no newline");
        let chunks = chunks_of(&data, 5000);
        assert_eq!(chunks.concat(), data);
        assert_eq!(chunks[0].len(), CHUNK_BYTES);
        assert_eq!(chunks.last().unwrap(), b"no newline");
    }
}
