//! Pipe mode: output that arrives through the process (hooks, in-process producers) is kept in
//! memory up to a limit, then spilled to a [`DiskWriter`].

use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::OutputError;
use crate::recent::RecentLines;
use crate::utf8::decode_lossy;
use crate::writer::{DiskWriter, DiskWriterConfig};

/// How much output pipe mode keeps in memory before spilling to disk: 8 MiB.
pub const DEFAULT_MAX_MEMORY: usize = 8 * 1024 * 1024;

/// How many recent lines pipe mode remembers.
pub const RECENT_LINES: usize = 1000;

/// The default bound on the bytes of the remembered lines: 1 MiB.
pub const DEFAULT_MAX_RECENT_BYTES: usize = 1024 * 1024;

/// The prefix put before each stderr chunk written to disk.
pub const STDERR_PREFIX: &str = "[stderr] ";

/// How many recent lines [`PipeOutput::stdout`] shows once the output has spilled.
pub const SPILLED_STDOUT_LINES: usize = 5;

/// Settings of a [`PipeOutput`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipeConfig {
    /// Bytes kept in memory before spilling (default [`DEFAULT_MAX_MEMORY`]).
    pub max_memory: usize,
    /// How many recent lines to remember (default [`RECENT_LINES`]).
    pub recent_lines: usize,
    /// The most bytes the remembered lines may take; older lines go first, and a single longer
    /// line keeps its end (default [`DEFAULT_MAX_RECENT_BYTES`]).
    pub max_recent_bytes: usize,
    /// Settings of the disk writer used after the spill.
    pub disk: DiskWriterConfig,
}

impl Default for PipeConfig {
    fn default() -> Self {
        Self {
            max_memory: DEFAULT_MAX_MEMORY,
            recent_lines: RECENT_LINES,
            max_recent_bytes: DEFAULT_MAX_RECENT_BYTES,
            disk: DiskWriterConfig::default(),
        }
    }
}

/// Output received as stdout and stderr chunks, buffered in memory, then spilled to a file.
///
/// Until the spill, stdout and stderr are kept apart, as the chunks received (no copy; memory is
/// counted as the chunks' lengths), and returned whole. The chunk that would take them past
/// [`PipeConfig::max_memory`] creates the output file (`O_EXCL`) and everything moves to disk:
/// stdout first, then stderr (after one [`STDERR_PREFIX`]), then the chunk; from then on chunks
/// go straight to the disk writer, each stderr one prefixed with [`STDERR_PREFIX`].
#[derive(Debug)]
pub struct PipeOutput {
    path: PathBuf,
    config: PipeConfig,
    stdout: Buffered,
    stderr: Buffered,
    disk: Option<DiskWriter>,
    recent: RecentLines,
    total_bytes: u64,
}

/// Chunks kept in memory as received (no copy).
#[derive(Debug, Default)]
struct Buffered {
    chunks: Vec<Bytes>,
    len: usize,
}

impl Buffered {
    fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.len += chunk.len();
            self.chunks.push(chunk);
        }
    }

    fn take(&mut self) -> Vec<Bytes> {
        self.len = 0;
        std::mem::take(&mut self.chunks)
    }

    fn to_text(&self) -> String {
        decode_lossy(&self.chunks.concat())
    }
}

/// Which stream a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

impl PipeOutput {
    /// A pipe output that will spill to `path` (which must not exist yet when it spills).
    pub fn new(path: impl Into<PathBuf>, config: PipeConfig) -> Self {
        Self {
            path: path.into(),
            recent: RecentLines::new(config.recent_lines, config.max_recent_bytes),
            config,
            stdout: Buffered::default(),
            stderr: Buffered::default(),
            disk: None,
            total_bytes: 0,
        }
    }

    /// Takes a chunk of stdout.
    ///
    /// Fails only when the spill cannot create the output file; the chunk is then kept in memory
    /// (nothing is lost) and the next write tries the spill again.
    pub fn write_stdout(&mut self, chunk: Bytes) -> Result<(), OutputError> {
        self.write(chunk, Stream::Stdout)
    }

    /// Takes a chunk of stderr; see [`write_stdout`](Self::write_stdout).
    pub fn write_stderr(&mut self, chunk: Bytes) -> Result<(), OutputError> {
        self.write(chunk, Stream::Stderr)
    }

    fn write(&mut self, chunk: Bytes, stream: Stream) -> Result<(), OutputError> {
        self.total_bytes += chunk.len() as u64;
        self.recent.push(&chunk);
        if let Some(disk) = &self.disk {
            append_to_disk(disk, chunk, stream);
            return Ok(());
        }
        if self.stdout.len + self.stderr.len + chunk.len() > self.config.max_memory {
            match DiskWriter::create(&self.path, self.config.disk.clone()) {
                Ok(disk) => {
                    self.spill(disk, chunk, stream);
                    return Ok(());
                }
                Err(err) => {
                    self.buffer(stream).push(chunk);
                    return Err(err);
                }
            }
        }
        self.buffer(stream).push(chunk);
        Ok(())
    }

    fn buffer(&mut self, stream: Stream) -> &mut Buffered {
        match stream {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        }
    }

    /// Moves the buffers, then `chunk`, to `disk`.
    fn spill(&mut self, disk: DiskWriter, chunk: Bytes, stream: Stream) {
        for chunk in self.stdout.take() {
            disk.append(chunk);
        }
        let stderr = self.stderr.take();
        if !stderr.is_empty() {
            disk.append(Bytes::from_static(STDERR_PREFIX.as_bytes()));
        }
        for chunk in stderr {
            disk.append(chunk);
        }
        append_to_disk(&disk, chunk, stream);
        tracing::debug!(path = %self.path.display(), bytes = self.total_bytes, "pipe output spilled to disk");
        self.disk = Some(disk);
    }

    /// The stdout seen so far. After the spill: the [`SPILLED_STDOUT_LINES`] most recent lines
    /// followed by `\nOutput truncated ({sizeKB}KB total). Full output saved to: {path}`
    /// (`sizeKB` counts both streams, rounded; without lines, the notice has no leading `\n`).
    pub fn stdout(&self) -> String {
        if self.disk.is_none() {
            return self.stdout.to_text();
        }
        let size_kb = (self.total_bytes + 512) / 1024;
        let notice = format!(
            "Output truncated ({size_kb}KB total). Full output saved to: {}",
            self.path.display()
        );
        let recent = self.recent.last(SPILLED_STDOUT_LINES).join("\n");
        if recent.is_empty() {
            notice
        } else {
            format!("{recent}\n{notice}")
        }
    }

    /// The stderr seen so far; empty after the spill (it is in the file, prefixed).
    pub fn stderr(&self) -> String {
        self.stderr.to_text()
    }

    /// The `n` most recent lines of both streams, oldest first (at most
    /// [`PipeConfig::recent_lines`]).
    pub fn recent_lines(&self, n: usize) -> Vec<String> {
        self.recent.last(n)
    }

    /// Whether the output has moved to disk.
    pub fn is_spilled(&self) -> bool {
        self.disk.is_some()
    }

    /// Bytes received from both streams (without prefixes).
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// The path the output spills to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The disk writer, once spilled.
    pub fn disk_writer(&self) -> Option<&DiskWriter> {
        self.disk.as_ref()
    }

    /// Waits for spilled output to reach the file; see [`DiskWriter::flush`].
    pub async fn flush(&self) -> Result<(), OutputError> {
        match &self.disk {
            Some(disk) => disk.flush().await,
            None => Ok(()),
        }
    }
}

fn append_to_disk(disk: &DiskWriter, chunk: Bytes, stream: Stream) {
    if chunk.is_empty() {
        return;
    }
    if stream == Stream::Stderr {
        disk.append(Bytes::from_static(STDERR_PREFIX.as_bytes()));
    }
    disk.append(chunk);
}
